//! Smoke tests of the cluster benchmark: `ringraft-bench` starts 3 real nodes, drives a short
//! load (closed loop, pipelined, open loop at a rate), writes the JSON report (and the SVG
//! charts) and leaves no node behind.

mod support;

use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};
use support::{processes_mentioning, ringraft_binary};

/// Each run starts 3 nodes: one at a time, so the runs do not slow each other down.
static ONE_CLUSTER_AT_A_TIME: Mutex<()> = Mutex::new(());

/// Runs `ringraft-bench` with `args` plus `--json`; returns its stdout and the JSON report.
fn run_bench(args: &[&str]) -> (String, serde_json::Value) {
    let run = run_bench_any(args);
    assert!(
        run.status.success(),
        "ringraft-bench {args:?} failed: {}\n{}\n{}",
        run.status,
        run.stdout,
        run.stderr
    );
    let report = run.report.expect("a successful run writes its report");
    (run.stdout, report)
}

/// The arguments of a short cluster run: `seconds` measured with no warm-up on `connections`
/// connections, then `more`.
fn no_warmup_run<'a>(seconds: &'a str, connections: &'a str, more: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec![
        "--duration",
        seconds,
        "--warmup",
        "0",
        "--connections",
        connections,
    ];
    args.extend_from_slice(more);
    args
}

/// How a `ringraft-bench` run ended.
struct BenchRun {
    status: std::process::ExitStatus,
    stdout: String,
    stderr: String,
    /// The JSON report, if the run wrote one.
    report: Option<serde_json::Value>,
}

/// Runs `ringraft-bench` with `args` plus `--json`, successful or not (bounded at 120 s), and
/// checks it left no node and no node directory behind.
fn run_bench_any(args: &[&str]) -> BenchRun {
    let _one = ONE_CLUSTER_AT_A_TIME
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let ringraft = ringraft_binary();
    let out = tempfile::tempdir().unwrap();
    let json = out.path().join("report.json");
    // The nodes' directories go under `out` (TMPDIR), which names only this run's nodes: other
    // ringraft-bench runs on the machine are not ours to check.
    let temp = out.path().join("tmp");
    std::fs::create_dir(&temp).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_ringraft-bench"))
        .env("TMPDIR", &temp)
        .args(args)
        // 64 MiB segments instead of 1 GiB preallocated per node: a smoke run writes a few MB,
        // and CI machines' disks are small.
        .args(["--node-override", "log.segment.bytes=67108864"])
        .arg("--ringraft-bin")
        .arg(&ringraft)
        .arg("--json")
        .arg(&json)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(120);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("ringraft-bench did not finish within 120 s");
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let stdout = std::io::read_to_string(child.stdout.take().unwrap()).unwrap();
    let stderr = std::io::read_to_string(child.stderr.take().unwrap()).unwrap();
    // The nodes ran from a config under TMPDIR/ringraft-bench-*: none is left, nor the directory.
    let temp = temp.to_str().unwrap();
    assert!(
        processes_mentioning(temp).is_empty(),
        "a node started by ringraft-bench survived"
    );
    assert_eq!(
        std::fs::read_dir(temp).unwrap().count(),
        0,
        "the nodes' directory was not removed"
    );
    let report = std::fs::read_to_string(&json)
        .ok()
        .map(|text| serde_json::from_str(&text).unwrap());
    BenchRun {
        status,
        stdout,
        stderr,
        report,
    }
}

/// What every report of a run that started its own 3-node cluster holds.
fn assert_complete(report: &serde_json::Value, stdout: &str) {
    assert_complete_with(report, stdout, 3);
}

/// [`assert_complete`] for a run whose started nodes (3 voters and any observers) number
/// `nodes`.
fn assert_complete_with(report: &serde_json::Value, stdout: &str, nodes: usize) {
    assert!(
        stdout.contains("acks=-1"),
        "summary lacks the durability mode:\n{stdout}"
    );
    assert!(report["records_per_sec"].as_f64().unwrap() > 0.0);
    assert!(report["mb_per_sec"].as_f64().unwrap() > 0.0);
    for key in ["p50", "p99", "p999", "max"] {
        assert!(
            report["commit_latency_us"][key].as_u64().unwrap() > 0,
            "commit_latency_us.{key}"
        );
    }
    assert_eq!(report["replication_factor"], 3);
    assert_eq!(report["acks"], -1);
    assert_eq!(report["fsync"], true);
    assert_eq!(report["record_bytes"], 1024);
    assert_eq!(report["batch_records"], 1);
    assert_eq!(report["interrupted"], false);
    for key in ["raft_cpus", "log_cpus", "bench_cpus"] {
        assert!(report[key].is_array(), "{key}");
    }
    // The leader's CPU and every node's memory, read from /proc around the window.
    assert!(report["leader_cpu_ns_per_record"].as_f64().unwrap() > 0.0);
    assert!(report["leader_id"].as_u64().is_some());
    for key in ["node_cpu_sec", "node_rss_kib_start", "node_rss_kib_end"] {
        let values = report[key].as_array().unwrap();
        assert_eq!(values.len(), nodes, "{key}");
        assert!(
            values.iter().all(|v| v.as_f64().is_some()),
            "{key}: {values:?}"
        );
    }
    assert!(report["node_rss_kib_end"][0].as_u64().unwrap() > 0);
    // The efficiency figure: committed MB per CPU-second of the three voters together (nodes
    // 1-3, listed first; observers' CPU is not theirs).
    let voter_cpu: f64 = report["node_cpu_sec"]
        .as_array()
        .unwrap()
        .iter()
        .take(3)
        .map(|v| v.as_f64().unwrap())
        .sum();
    let committed_mb = report["records"].as_f64().unwrap() * 1024.0 / 1e6;
    let efficiency = report["committed_mb_per_voter_cpu_sec"].as_f64().unwrap();
    assert!(
        (efficiency - committed_mb / voter_cpu).abs() < 1e-6 * efficiency.max(1.0),
        "{efficiency} vs {committed_mb} MB / {voter_cpu} s"
    );
    assert!(
        stdout.contains("MB committed per CPU-second of the voters"),
        "{stdout}"
    );
    let intervals = report["intervals"].as_array().unwrap();
    assert!(!intervals.is_empty());
    for interval in intervals {
        assert!(interval["latency_us"]["p50"].as_u64().is_some());
        assert!(interval["latency_us"]["p99"].as_u64().is_some());
        assert!(interval["leader_rss_kib"].as_u64().unwrap() > 0);
    }
    let exits = report["node_exits"].as_array().unwrap();
    assert_eq!(exits.len(), nodes);
    assert!(exits
        .iter()
        .all(|e| e.as_str().unwrap().ends_with("exit status: 0")));
}

#[test]
fn default_benchmark_runs_a_three_node_cluster_and_cleans_up() {
    let (stdout, report) = run_bench(&no_warmup_run("2", "4", &[]));
    assert_complete(&report, &stdout);
    assert_eq!(report["connections"], 4);
    assert_eq!(report["inflight_per_connection"], 1);
    assert_eq!(report["load_mode"], "closed loop");
    assert!(report["rate_records_per_sec"].is_null());
    assert!(stdout.contains("closed loop"), "{stdout}");
}

#[test]
fn pipelined_requests_and_the_svg_charts() {
    let out = tempfile::tempdir().unwrap();
    let svg = out.path().join("charts.svg");
    // 3 connections on 2 load threads: one thread waits on two sockets at once.
    let (stdout, report) = run_bench(&no_warmup_run(
        "2",
        "3",
        &[
            "--inflight",
            "4",
            "--load-threads",
            "2",
            "--svg",
            svg.to_str().unwrap(),
        ],
    ));
    assert_complete(&report, &stdout);
    assert_eq!(report["connections"], 3);
    assert_eq!(report["inflight_per_connection"], 4);
    assert_eq!(report["load_threads"], 2);
    assert!(
        stdout.contains("4 in flight each, 2 load threads"),
        "{stdout}"
    );
    let svg = std::fs::read_to_string(&svg).unwrap();
    assert!(svg.starts_with("<svg"), "{}", &svg[..svg.len().min(200)]);
    assert!(svg.trim_end().ends_with("</svg>"));
    assert!(svg.contains("Commit latency by percentile"));
    assert!(svg.contains("Throughput per interval"));
    assert!(
        svg.contains("3 connections x 4 in flight"),
        "the title states the settings"
    );
    assert_eq!(svg.matches("<polyline").count(), 2, "one curve per chart");
}

#[test]
fn open_loop_delivers_about_the_rate_asked_for() {
    // 2,000 records/s is a small fraction of what even a debug build on a busy 2-core machine
    // commits in closed loop (~6,000/s with 4 x 4 in flight), so the schedule, not the cluster,
    // sets the pace: 32 requests in flight keep the rate up as long as commits take under
    // 16 ms. Only throughput is checked, loosely: latencies depend on the machine.
    let (stdout, report) = run_bench(&[
        "--duration",
        "2",
        "--warmup",
        "1",
        "--connections",
        "4",
        "--inflight",
        "8",
        "--rate",
        "2000",
        // Both connections of a thread keep their own schedule.
        "--load-threads",
        "2",
    ]);
    assert_complete(&report, &stdout);
    assert_eq!(report["load_mode"], "open loop");
    assert_eq!(report["rate_records_per_sec"], 2000.0);
    let rate = report["records_per_sec"].as_f64().unwrap();
    assert!(
        (1000.0..=2200.0).contains(&rate),
        "asked for 2,000 records/s, got {rate}\n{stdout}"
    );
    // Latency from the intended send time is never below the latency from the actual send.
    let corrected = report["commit_latency_us"]["max"].as_u64().unwrap();
    let service = report["service_latency_us"]["max"].as_u64().unwrap();
    assert!(corrected >= service, "{corrected} < {service}");
}

/// Observers and idle connections in one run (one cluster start for both): the observers
/// follow the leader through the load and catch up after it; the idle connections stay open
/// through it, and the leader's RSS is sampled around them.
#[test]
fn observers_follow_the_leader_and_idle_connections_stay_open_through_the_run() {
    let (stdout, report) = run_bench(&no_warmup_run(
        "2",
        "4",
        &["--observers", "2", "--idle-connections", "8"],
    ));
    // The observers are started nodes too: CPU, RSS and a clean exit for each.
    assert_complete_with(&report, &stdout, 5);
    assert_eq!(report["replication_factor"], 3, "observers do not vote");
    let observers = &report["observers"];
    assert_eq!(observers["count"], 2);
    assert_eq!(observers["ids"], serde_json::json!([4, 5]));
    assert!(observers["listed_sec"].as_f64().is_some());
    let hw_end = observers["high_watermark_end"].as_i64().unwrap();
    assert!(hw_end > 0);
    let each = observers["per_observer"].as_array().unwrap();
    assert_eq!(each.len(), 2);
    for observer in each {
        // Listed by the leader (fetching) at the window's start and end, with a lag.
        for key in ["log_end_offset_start", "log_end_offset_end"] {
            assert!(observer[key].as_i64().unwrap() >= 0, "{key}: {observer}");
        }
        for key in ["lag_start", "lag_end"] {
            assert!(observer[key].as_i64().is_some(), "{key}: {observer}");
        }
        assert!(
            observer["log_end_offset_end"].as_i64().unwrap()
                > observer["log_end_offset_start"].as_i64().unwrap(),
            "the observer followed the load: {observer}"
        );
    }
    assert!(observers["all_within_max_lag_at_end"].is_boolean());
    assert_eq!(observers["max_lag"], 10_000);
    assert_eq!(
        observers["caught_up_after_load"], true,
        "every observer reached the high watermark once the load stopped\n{stdout}"
    );
    assert!(report["leader_cpu_ns_per_byte"].as_f64().unwrap() > 0.0);
    assert!(
        stdout.contains("  observers: 2; lag at the window's end"),
        "{stdout}"
    );
    assert!(stdout.contains("ns per committed byte"), "{stdout}");
    let idle = &report["idle_connections"];
    assert_eq!(idle["requested"], 8);
    assert_eq!(idle["opened"], 8, "{idle}");
    for key in ["refused", "failed", "not_tried", "closed_during_run"] {
        assert_eq!(idle[key], 0, "{key}: {idle}");
    }
    assert_eq!(idle["open_at_end"], 8, "{idle}");
    assert!(idle["errors"].as_array().unwrap().is_empty(), "{idle}");
    let nofile = idle["nofile_limit"].as_u64().unwrap();
    assert!(nofile >= idle["nofile_limit_before"].as_u64().unwrap());
    let rss = |key: &str| idle[key].as_u64().unwrap();
    let (before, after) = (
        rss("leader_rss_kib_before"),
        rss("leader_rss_kib_after_open"),
    );
    assert!(
        before > 0 && after > 0 && rss("leader_rss_kib_end") > 0,
        "{idle}"
    );
    // The growth over 8 connections may be anything, even negative: only its arithmetic.
    let per = idle["rss_kib_per_connection"].as_f64().unwrap();
    assert!(
        (per - (after as f64 - before as f64) / 8.0).abs() < 1e-9,
        "{idle}"
    );
    assert!(
        stdout.contains("  idle connections: 8 asked, 8 opened"),
        "{stdout}"
    );
}

/// More idle connections than the node's limit (1024 open connections, peers included): the
/// refusals are counted and the run fails before the load, saying so, and stops its nodes.
#[test]
fn idle_connections_refused_by_the_node_fail_the_run() {
    let asked = 1100usize;
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes the struct it is given.
    assert_eq!(
        unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) },
        0
    );
    // The bench raises its soft limit to the hard one: the hard one must leave room for the
    // connections and the nodes' own files. Raising it needs root (CAP_SYS_RESOURCE), as the
    // test suite runs in CI.
    let needed = asked as u64 + 512;
    if limit.rlim_max < needed {
        limit.rlim_max = needed;
        limit.rlim_cur = limit.rlim_cur.min(needed);
        // SAFETY: setrlimit reads the struct it is given.
        let raised = unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &limit) };
        assert_eq!(
            raised,
            0,
            "the hard open-file limit must be at least {needed} (run as root or raise it): {}",
            std::io::Error::last_os_error()
        );
    }
    let asked_text = asked.to_string();
    let run = run_bench_any(&no_warmup_run(
        "1",
        "2",
        &["--idle-connections", &asked_text],
    ));
    assert!(!run.status.success(), "{}\n{}", run.stdout, run.stderr);
    assert!(run.report.is_none(), "no load, no report");
    assert!(
        run.stderr.contains("refused by the node") && run.stderr.contains("before the load"),
        "{}",
        run.stderr
    );
    let line = run
        .stdout
        .lines()
        .find(|l| l.starts_with("idle connections: "))
        .unwrap_or_else(|| panic!("{}", run.stdout));
    // "idle connections: O of N opened in S s (R refused by the node, F failed, T not tried)"
    let before = |needle: &str| -> usize {
        let head = &line[..line
            .find(needle)
            .unwrap_or_else(|| panic!("{needle}: {line}"))];
        let word = head.rsplit([' ', '(']).next().unwrap();
        word.parse().unwrap_or_else(|_| panic!("{needle}: {line}"))
    };
    let (opened, refused) = (before(" of "), before(" refused by the node"));
    assert!(line.contains(&format!(" of {asked} opened")), "{line}");
    assert!(refused > 0 && opened <= 1024, "{line}");
    assert_eq!(
        opened + refused + before(" failed") + before(" not tried"),
        asked,
        "{line}"
    );
}

/// The records produced by [`produce_known_records`]: how many, and the high watermark after.
struct Produced {
    records: u64,
    high_watermark: i64,
    /// An offset inside a batch of several records (not its base).
    inside_a_batch: i64,
}

/// Produces 120 batches of 1 to 5 records each (acks=-1, each answer checked) to `leader`.
fn produce_known_records(leader: std::net::SocketAddr) -> Produced {
    use engine::record::RecordBatchBuilder;
    let mut client = net::client::BlockingClient::connect(leader, Duration::from_secs(10)).unwrap();
    let mut records = 0u64;
    let mut end = 0i64;
    let mut inside_a_batch = None;
    for i in 0..120usize {
        let count = 1 + i % 5;
        let mut builder = RecordBatchBuilder::new(0, 0);
        for r in 0..count {
            builder.append(0, None, Some(format!("record {i}.{r}").as_bytes()), &[]);
        }
        let response = client
            .produce(9, -1, builder.build().freeze())
            .unwrap()
            .expect("acks=-1 is answered");
        let partition = &response.topics[0].partitions[0];
        assert!(partition.error.is_none(), "{:?}", partition.error);
        assert!(partition.base_offset >= end, "offsets go forward");
        if count > 2 && inside_a_batch.is_none() {
            inside_a_batch = Some(partition.base_offset + 2);
        }
        records += count as u64;
        end = partition.base_offset + count as i64;
    }
    Produced {
        records,
        high_watermark: end,
        inside_a_batch: inside_a_batch.unwrap(),
    }
}

/// What every consumer of a `consume-all` phase must have done: read from `start` to the high
/// watermark it last saw, which is `hw` or beyond, every offset once (data and control records
/// together cover the range exactly), with nothing left.
/// The high watermark may have moved past `hw` without a produce: the leader writes a
/// voter-binding record for each voter once it has fetched (docs/protocol.md "Voter identity"),
/// and a voter that is slow to start is bound after the test's produce.
/// `data_records`: how many data records the range holds, when the test knows (None: a range
/// that may hold other control records than the leader's).
fn assert_read_all(phase: &serde_json::Value, start: i64, hw: i64, data_records: Option<u64>) {
    assert_eq!(phase["phase"], "consume-all");
    for consumer in phase["consume"]["per_consumer"].as_array().unwrap() {
        let end = consumer["high_watermark_end"].as_i64().unwrap();
        assert!(end >= hw, "{consumer}: the high watermark was {hw} before");
        assert_eq!(consumer["position_start"], start, "{consumer}");
        assert_eq!(consumer["position_end"], end, "{consumer}");
        assert_eq!(consumer["lag_end"], 0, "{consumer}");
        assert_eq!(consumer["reached_end"], true, "{consumer}");
        let records = consumer["records"].as_u64().unwrap();
        if let Some(data) = data_records {
            assert_eq!(records, data, "{consumer}");
        }
        let control = consumer["control_records"].as_u64().unwrap();
        assert_eq!(records + control, (end - start) as u64, "{consumer}");
        assert!(consumer["fetches"].as_u64().unwrap() > 0);
        assert!(consumer["bytes"].as_u64().unwrap() > 0);
    }
}

#[test]
fn consume_reads_every_produced_record_once_and_in_order() {
    let ringraft = ringraft_binary();
    let mut cluster = testkit::Cluster::create(
        testkit::Settings {
            segment_bytes: Some(64 << 20),
            ..testkit::Settings::new(&ringraft)
        },
        3,
    )
    .unwrap();
    cluster.start_all(testkit::Stderr::File).unwrap();
    let leader = cluster
        .wait_for_leader(&testkit::LeaderWait::within(Duration::from_secs(30)))
        .unwrap();
    let produced = produce_known_records(cluster.addr(leader));
    let servers = cluster
        .nodes
        .iter()
        .map(|n| n.addr.to_string())
        .collect::<Vec<_>>()
        .join(",");
    let common = ["consume", "--bootstrap-server", &servers, "--settle", "0"];

    // Two consumers from the start, each to the end: every record once, in order (the mode
    // fails the run on a gap or a repeat), the LeaderChange counted apart.
    let mut args = common.to_vec();
    args.extend(["--consumers", "2"]);
    let (stdout, report) = run_bench(&args);
    assert_eq!(report["started_cluster"], false);
    let phases = report["phases"].as_array().unwrap();
    assert_eq!(
        phases.len(),
        1,
        "the default phase is consume-all\n{stdout}"
    );
    assert_eq!(
        phases[0]["consume"]["per_consumer"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
    assert_read_all(
        &phases[0],
        0,
        produced.high_watermark,
        Some(produced.records),
    );
    let control = phases[0]["consume"]["control_records"].as_u64().unwrap();
    assert!(control >= 2, "each consumer read the leader's LeaderChange");
    assert!(stdout.contains("consumers: "), "{stdout}");

    // From inside a batch: the node answers from that batch's base, the records before the
    // offset are not counted again.
    let from = produced.inside_a_batch.to_string();
    let mut args = common.to_vec();
    args.extend(["--from", &from, "--fetch-max-wait-ms", "100"]);
    let (_, report) = run_bench(&args);
    let phase = &report["phases"][0];
    assert_read_all(
        phase,
        produced.inside_a_batch,
        produced.high_watermark,
        None,
    );
    let stopped = cluster.stop_all(Duration::from_secs(15));
    assert!(stopped.iter().all(|(_, s)| s.is_some_and(|s| s.success())));
}

#[test]
fn consume_phases_beside_the_produce_load_and_kcat() {
    let mut args = vec![
        "consume",
        "--prefill-mb",
        "3",
        "--phases",
        "produce,produce-consume,consume,consume-all,kcat-all",
    ];
    args.extend(no_warmup_run(
        "1",
        "2",
        &["--settle", "0", "--kcat", "/usr/bin/kcat"],
    ));
    let (stdout, report) = run_bench(&args);
    assert_eq!(report["started_cluster"], true);
    // The phases began once every voter had reached the high watermark after the prefill,
    // and each names the quorum it started with.
    assert!(report["voters_catch_up_sec"].as_f64().is_some());
    let phases = report["phases"].as_array().unwrap();
    for phase in phases {
        let lags = phase["quorum_before"]["voter_lag"].as_array().unwrap();
        assert_eq!(lags.len(), 3, "{phase}");
    }
    let names: Vec<_> = phases
        .iter()
        .map(|p| p["phase"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "produce",
            "produce-consume",
            "consume",
            "consume-all",
            "kcat-all"
        ],
        "{stdout}"
    );
    for phase in &phases[..2] {
        let produce = &phase["produce"];
        assert!(
            produce["records_per_sec"].as_f64().unwrap() > 0.0,
            "{phase}"
        );
        assert!(produce["commit_latency_us"]["p99"].as_u64().unwrap() > 0);
    }
    assert!(phases[0]["consume"].is_null());
    for phase in &phases[1..4] {
        let consume = &phase["consume"];
        assert!(consume["records"].as_u64().unwrap() > 0, "{phase}");
        assert!(consume["mb_per_sec"].as_f64().unwrap() > 0.0);
        assert!(consume["bytes_per_fetch"].as_f64().unwrap() > 0.0);
        let values = phase["node_cpu_sec"].as_array().unwrap();
        assert_eq!(values.len(), 3);
        assert!(values.iter().all(|v| v.as_f64().is_some()), "{values:?}");
        // The leader's segments were dropped from the page cache before each reading phase.
        assert!(phase["evicted_bytes"].as_u64().unwrap() > 0);
    }
    // The whole log from the start: the consumer and kcat read the same data records.
    let all = &phases[3]["consume"]["per_consumer"][0];
    let hw = all["position_end"].as_i64().unwrap();
    let records = all["records"].as_u64().unwrap();
    assert_read_all(&phases[3], 0, hw, Some(records));
    assert!(
        records > 3_000,
        "the prefill's 3 MB of 1 KiB records: {records}"
    );
    let kcat = &phases[4]["kcat"];
    assert_eq!(kcat["records"], records, "{stdout}");
    assert_eq!(kcat["last_offset"], hw - 1);
    let ratios = report["ratios"].as_array().unwrap();
    assert_eq!(ratios.len(), 1);
    assert!(ratios[0]["commit_p99_ratio"].as_f64().unwrap() > 0.0);
    let exits = report["node_exits"].as_array().unwrap();
    assert!(exits
        .iter()
        .all(|e| e.as_str().unwrap().ends_with("exit status: 0")));
    assert!(stdout.contains("with the reader / without"), "{stdout}");
}
