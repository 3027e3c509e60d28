//! Process test of `/metrics` (docs/operations.md, "Metrics"): a 3-voter cluster, two nodes
//! with `metrics.listener` and one without. Each listener is scraped with the Python
//! `prometheus_client` OpenMetrics parser (installed by .ci/install-clients.sh; missing, the
//! test fails) before and after a burst of acks=all Produce requests: the names and types are
//! the documented ones, and the epoch, high watermark, log end offset, append and fetch
//! counters and the disk group histogram move. The node without the setting listens on nothing
//! but its Kafka listener (its sockets in /proc). Real `ringraft serve` processes on 127.0.0.1;
//! every wait is bounded and every process is killed when its guard drops.

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use serde_json::Value;
use support::clients::{run_bounded, script, venv_python};
use support::*;

/// (type, unit) of every family the test expects, as the parser names them (OpenMetrics:
/// a counter's family has no `_total`, a unit is part of the name).
const FAMILIES: &[(&str, &str)] = &[
    ("ringraft_raft_current_state", "gauge"),
    ("ringraft_raft_current_leader", "gauge"),
    ("ringraft_raft_current_epoch", "gauge"),
    ("ringraft_raft_current_vote", "gauge"),
    ("ringraft_raft_high_watermark", "gauge"),
    ("ringraft_raft_log_end_offset", "gauge"),
    ("ringraft_raft_commit_latency_seconds", "histogram"),
    ("ringraft_raft_commit_latency_max_seconds", "gauge"),
    ("ringraft_raft_election_latency_seconds", "histogram"),
    ("ringraft_raft_election_latency_max_seconds", "gauge"),
    ("ringraft_raft_append_records", "counter"),
    ("ringraft_raft_fetch_records", "counter"),
    ("ringraft_raft_poll_idle_seconds", "counter"),
    ("ringraft_raft_number_unknown_voter_connections", "gauge"),
    ("ringraft_raft_leader_changes", "counter"),
    ("ringraft_raft_replica_lag_records", "gauge"),
    ("ringraft_raft_replica_lag_seconds", "gauge"),
    ("ringraft_requests", "counter"),
    ("ringraft_responses", "counter"),
    ("ringraft_connections_open", "gauge"),
    ("ringraft_connections_accepted", "counter"),
    ("ringraft_network_received_bytes", "counter"),
    ("ringraft_network_sent_bytes", "counter"),
    ("ringraft_disk_group_duration_seconds", "histogram"),
    ("ringraft_disk_group_bytes", "histogram"),
    ("ringraft_disk_group_batches", "histogram"),
    ("ringraft_disk_groups", "counter"),
    ("ringraft_disk_written_bytes", "counter"),
    ("ringraft_log_segments", "counter"),
    ("ringraft_tail_cache_bytes", "gauge"),
    ("ringraft_sparse_index_bytes", "gauge"),
    ("ringraft_startup_fdatasync_probe_seconds", "gauge"),
    ("ringraft_startup_dsync_probe_seconds", "gauge"),
    ("ringraft_log_sync_dsync", "gauge"),
    ("ringraft_startup_memlock_sufficient", "gauge"),
    ("ringraft_startup_memlock_needed_bytes", "gauge"),
    ("ringraft_startup_registered_buffers", "gauge"),
    ("ringraft_startup_o_direct", "gauge"),
    ("ringraft_producer_snapshot_offset", "gauge"),
    ("ringraft_producer_snapshot_failures", "counter"),
];

struct Scrape(BTreeMap<String, Value>);

impl Scrape {
    fn family(&self, name: &str) -> &Value {
        self.0
            .get(name)
            .unwrap_or_else(|| panic!("no family {name} in {:?}", self.0.keys()))
    }

    /// The value of the sample `sample` with exactly `labels`.
    fn value_with(&self, family: &str, sample: &str, labels: &[(&str, &str)]) -> Option<f64> {
        let want: BTreeMap<String, String> = labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        self.family(family)["samples"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| {
                let got: BTreeMap<String, String> =
                    serde_json::from_value(s[1].clone()).unwrap_or_default();
                s[0] == sample && got == want
            })
            .map(|s| match &s[2] {
                Value::String(inf) if inf == "+Inf" => f64::INFINITY,
                v => v.as_f64().unwrap(),
            })
    }

    /// The value of an unlabelled gauge or counter (`name` is the family's).
    fn value(&self, family: &str) -> f64 {
        let sample = match self.family(family)["type"].as_str() {
            Some("counter") => format!("{family}_total"),
            _ => family.to_string(),
        };
        self.value_with(family, &sample, &[])
            .unwrap_or_else(|| panic!("{family} has no unlabelled sample"))
    }

    fn histogram_count(&self, family: &str) -> f64 {
        self.value_with(family, &format!("{family}_count"), &[])
            .unwrap()
    }
}

fn scrape(port: u16) -> Scrape {
    let url = format!("http://127.0.0.1:{port}/metrics");
    let python = venv_python();
    let script = script("scrape_metrics.py");
    let out = run_bounded(
        &python,
        &[script.to_str().unwrap(), &url],
        b"",
        Duration::from_secs(30),
    );
    assert!(
        out.status.success(),
        "scraping {url} failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let parsed: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        parsed["content_type"]
            .as_str()
            .unwrap()
            .starts_with("application/openmetrics-text"),
        "{parsed}"
    );
    let families = parsed["families"].as_object().unwrap().clone();
    Scrape(families.into_iter().collect())
}

/// The TCP ports process `pid` listens on (its sockets' inodes in /proc/PID/fd, looked up in
/// /proc/net/tcp and tcp6 in LISTEN state).
fn listening_ports(pid: u32) -> BTreeSet<u16> {
    let inodes: BTreeSet<String> = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .filter_map(|target| {
            let t = target.to_string_lossy().into_owned();
            t.strip_prefix("socket:[")?
                .strip_suffix(']')
                .map(str::to_owned)
        })
        .collect();
    let mut ports = BTreeSet::new();
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let Ok(text) = std::fs::read_to_string(table) else {
            continue;
        };
        for line in text.lines().skip(1) {
            let fields: Vec<&str> = line.split_whitespace().collect();
            if fields.len() > 9 && fields[3] == "0A" && inodes.contains(fields[9]) {
                let port = fields[1].rsplit(':').next().unwrap();
                ports.insert(u16::from_str_radix(port, 16).unwrap());
            }
        }
    }
    ports
}

fn check_families(scrape: &Scrape, node: i32) {
    for (name, kind) in FAMILIES {
        assert_eq!(
            scrape.family(name)["type"].as_str(),
            Some(*kind),
            "node {node}: {name}"
        );
    }
    // Exactly one state is 1.
    let states = scrape.family("ringraft_raft_current_state")["samples"]
        .as_array()
        .unwrap();
    let ones = states.iter().filter(|s| s[2].as_f64() == Some(1.0)).count();
    assert_eq!(ones, 1, "node {node}: {states:?}");
    assert_eq!(scrape.value("ringraft_startup_o_direct"), 1.0);
    assert!(scrape.value("ringraft_startup_fdatasync_probe_seconds") > 0.0);
    assert!(scrape.value("ringraft_startup_dsync_probe_seconds") > 0.0);
    assert!(scrape.value("ringraft_startup_memlock_needed_bytes") > 0.0);
}

#[test]
fn metrics_are_scraped_parsed_and_move_under_load() {
    let started = Instant::now();
    let mut cluster = Cluster::new(3);
    let ports = [free_port(), free_port()];
    let with_metrics = [(1, ports[0]), (2, ports[1])];
    for (id, port) in with_metrics {
        let setting = format!("metrics.listener=http://127.0.0.1:{port}");
        cluster.start(id, &[setting.as_str()]);
    }
    cluster.start(3, &[]);
    let leader = cluster.wait_for_leader(None);
    // A majority elects a leader while the third may still be starting: wait (bounded) until
    // every node's Kafka listener accepts, which it binds after the metrics listener.
    for id in 1..=3 {
        let deadline = Instant::now() + WAIT;
        while std::net::TcpStream::connect_timeout(&cluster.addr(id), Duration::from_secs(1))
            .is_err()
        {
            assert!(Instant::now() < deadline, "node {id} never listened");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    // The node without the setting listens only on its Kafka listener.
    let pids: BTreeMap<i32, u32> = cluster.pids().into_iter().collect();
    assert_eq!(
        listening_ports(pids[&3]),
        BTreeSet::from([cluster.addr(3).port()]),
        "metrics off: no listener besides the node's own"
    );
    for (id, port) in with_metrics {
        assert_eq!(
            listening_ports(pids[&id]),
            BTreeSet::from([cluster.addr(id).port(), port]),
            "node {id}"
        );
    }

    let before: Vec<Scrape> = with_metrics.iter().map(|&(_, p)| scrape(p)).collect();
    for ((id, _), s) in with_metrics.iter().zip(&before) {
        check_families(s, *id);
        assert!(s.value("ringraft_raft_current_epoch") >= 1.0, "node {id}");
        assert_eq!(s.value("ringraft_raft_current_leader"), f64::from(leader));
    }

    // A burst of acks=all records at the leader.
    const RECORDS: usize = 200;
    let mut client = cluster.connect(leader, WAIT);
    let last = produce_numbered(&mut client, "metrics-", RECORDS)
        .last()
        .unwrap()
        .0;
    cluster.wait_for_voters_at(leader, last + 1);
    // The followers learn the high watermark with their next fetch, and the raft thread
    // publishes its figures once per loop turn: wait (bounded) for both.
    let deadline = Instant::now() + WAIT;
    let after = loop {
        let after: Vec<Scrape> = with_metrics.iter().map(|&(_, p)| scrape(p)).collect();
        if after
            .iter()
            .all(|s| s.value("ringraft_raft_high_watermark") > last as f64)
            || Instant::now() > deadline
        {
            break after;
        }
        std::thread::sleep(Duration::from_millis(100));
    };

    for (((id, _), b), a) in with_metrics.iter().zip(&before).zip(&after) {
        check_families(a, *id);
        let moved = |name: &str| (b.value(name), a.value(name));
        // The first high watermark of a run takes a producer-state snapshot at once.
        let snapshot = a.value("ringraft_producer_snapshot_offset");
        assert!(
            snapshot >= 1.0 && snapshot <= a.value("ringraft_raft_high_watermark"),
            "node {id}: producer-state snapshot at {snapshot}"
        );
        assert_eq!(a.value("ringraft_producer_snapshot_failures"), 0.0);
        let (hw0, hw1) = moved("ringraft_raft_high_watermark");
        assert!(
            hw1 > last as f64 && hw1 > hw0,
            "node {id}: HW {hw0} -> {hw1}"
        );
        let (leo0, leo1) = moved("ringraft_raft_log_end_offset");
        assert!(
            leo1 >= hw1 && leo1 > leo0,
            "node {id}: LEO {leo0} -> {leo1}"
        );
        assert!(a.value("ringraft_raft_current_epoch") >= b.value("ringraft_raft_current_epoch"));
        let records = if *id == leader {
            "ringraft_raft_append_records"
        } else {
            "ringraft_raft_fetch_records"
        };
        let (r0, r1) = moved(records);
        assert!(
            r1 - r0 >= RECORDS as f64,
            "node {id}: {records} {r0} -> {r1}"
        );
        let groups = "ringraft_disk_group_duration_seconds";
        let (g0, g1) = (b.histogram_count(groups), a.histogram_count(groups));
        assert!(g1 > g0, "node {id}: {groups} count {g0} -> {g1}");
        assert_eq!(
            a.value_with(groups, &format!("{groups}_bucket"), &[("le", "+Inf")]),
            Some(g1),
            "node {id}: +Inf bucket = count"
        );
        // The groups were made durable the way the gauge says the writer runs (the node's
        // default, log.sync.mode=auto: what its start-up probe chose on this disk).
        let durable_by = |scrape: &Scrape, how| {
            scrape
                .value_with(
                    "ringraft_disk_groups",
                    "ringraft_disk_groups_total",
                    &[("durable_by", how)],
                )
                .unwrap_or(0.0)
        };
        let alone = durable_by(a, "rwf_dsync") - durable_by(b, "rwf_dsync");
        let synced = durable_by(a, "fdatasync") - durable_by(b, "fdatasync");
        match a.value("ringraft_log_sync_dsync") {
            1.0 => assert!(
                alone > 0.0,
                "node {id}: dsync, yet {alone} groups by RWF_DSYNC"
            ),
            0.0 => assert!(
                alone == 0.0 && synced > 0.0,
                "node {id}: fdatasync, yet groups by RWF_DSYNC {alone}, by fdatasync {synced}"
            ),
            other => panic!("node {id}: ringraft_log_sync_dsync is {other}"),
        }
        let (w0, w1) = moved("ringraft_disk_written_bytes");
        assert!(w1 > w0, "node {id}: bytes written {w0} -> {w1}");
        let (n0, n1) = moved("ringraft_network_received_bytes");
        assert!(n1 > n0, "node {id}: bytes received {n0} -> {n1}");
        if *id == leader {
            let commits = a.histogram_count("ringraft_raft_commit_latency_seconds");
            assert!(commits >= RECORDS as f64, "node {id}: {commits} commits");
            let produced = a
                .value_with(
                    "ringraft_responses",
                    "ringraft_responses_total",
                    &[("api", "Produce"), ("error", "NONE")],
                )
                .unwrap_or(0.0);
            assert!(
                produced >= RECORDS as f64,
                "node {id}: {produced} Produce answers"
            );
            for replica in ["1", "2", "3"].iter().filter(|r| **r != leader.to_string()) {
                let lag = a.value_with(
                    "ringraft_raft_replica_lag_records",
                    "ringraft_raft_replica_lag_records",
                    &[("replica", replica)],
                );
                assert!(lag.is_some_and(|l| l >= 0.0), "node {id}: lag of {replica}");
            }
            let fetches = a
                .value_with(
                    "ringraft_requests",
                    "ringraft_requests_total",
                    &[("api", "FetchQuorumRecords")],
                )
                .unwrap_or(0.0);
            assert!(fetches > 0.0, "node {id}: the leader served fetches");
        }
    }
    let stopped = cluster.stop_all();
    assert!(
        stopped.iter().all(|(_, s)| s.is_some_and(|s| s.success())),
        "{stopped:?}"
    );
    eprintln!("metrics test took {:?}", started.elapsed());
}
