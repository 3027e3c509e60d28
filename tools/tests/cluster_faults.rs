//! Process tests of faults: a wrong `broker.id`, every voter SIGKILLed at once, bad input and a
//! connection flood against a live node, and an observer. Real `ringraft serve` processes on
//! 127.0.0.1 (see support/mod.rs); every wait is bounded and every process is killed when its
//! guard drops.

mod support;

use std::io::Read;
use std::net::{SocketAddr, TcpStream};
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use engine::raft::{ErrorCode, Request, Response, VoteRequest};
use engine::sim::XorShift64;
use net::client::BlockingClient;
use support::*;

const TIMEOUT: Duration = Duration::from_secs(10);

#[test]
fn restart_with_a_wrong_broker_id_names_both_ids() {
    let (mut cluster, _) = Cluster::started(3);
    cluster.stop_all();
    // Node 1's directory, started as node 2: the quorum-state file says node 1.
    let config = cluster.node(1).config.clone();
    let mut wrong = ProcessGuard {
        child: spawn(&config, &["broker.id=2"], Stdio::piped()),
    };
    let status = wrong.wait_exit(TIMEOUT).expect("wrong broker id exits");
    assert!(!status.success(), "wrong broker id exited with {status}");
    let stderr = read_stderr(&mut wrong);
    assert!(stderr.contains("belongs to node 1"), "{stderr}");
    assert!(stderr.contains("this node is 2"), "{stderr}");
}

#[test]
fn all_voters_sigkilled_under_load_keep_every_acknowledged_record() {
    sigkill_all_voters_under_load("fdatasync");
}

/// The same with every group made durable by one RWF_DSYNC write (`log.sync.mode=dsync`)
/// instead of the write and its linked fdatasync.
#[test]
fn with_dsync_writes_all_voters_sigkilled_under_load_keep_every_acknowledged_record() {
    sigkill_all_voters_under_load("dsync");
}

/// With every node on `log.sync.mode=sync_mode`: SIGKILLs all voters under acks=-1 load,
/// restarts them and checks that two of the three logs hold every acknowledged record, and that
/// the leader's writer made its groups durable the way the mode says (its /metrics).
fn sigkill_all_voters_under_load(sync_mode: &str) {
    let mode = format!("log.sync.mode={sync_mode}");
    let mut cluster = Cluster::new_with(3, |s| s.overrides = vec![mode]);
    cluster.start_all_and_elect();
    let stop = Arc::new(AtomicBool::new(false));
    let (acked, producer) = start_load((1..=3).map(|id| cluster.addr(id)).collect(), stop.clone());
    let deadline = Instant::now() + WAIT;
    while acked.lock().unwrap().len() < 100 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(acked.lock().unwrap().len() >= 100, "no load committed");
    // SIGKILL all three before reaping any: no node gets to finish a write the others miss.
    for node in &cluster.nodes {
        node.process.as_ref().unwrap().signal(libc::SIGKILL);
    }
    for id in 1..=3 {
        cluster.node(id).process.take();
    }
    stop.store(true, Ordering::Relaxed);
    producer.join().unwrap();
    let mut acked = acked.lock().unwrap().clone();
    acked.sort();
    eprintln!("{} records acknowledged before the kill", acked.len());

    let metrics: Vec<SocketAddr> = (1..=3)
        .map(|_| format!("127.0.0.1:{}", free_port()).parse().unwrap())
        .collect();
    for (id, addr) in (1..=3).zip(&metrics) {
        cluster.start(id, &[&format!("metrics.listener=http://{addr}")]);
    }
    let leader = cluster.wait_for_leader(None);
    let mut client = cluster.connect(leader, TIMEOUT);
    let after = produce_one(&mut client, "after the crash").unwrap();
    assert!(
        after > acked.last().unwrap().0,
        "new record below the old ones"
    );
    drop(client);
    assert_groups_durable_by(sync_mode, metrics[leader as usize - 1]);
    cluster.stop_all();
    let holding = cluster
        .nodes
        .iter()
        .filter(|n| log_holds_once_in_order(&read_log(&n.dir), &acked))
        .count();
    assert!(
        holding >= 2,
        "only {holding} of 3 logs hold all {} acknowledged records once and in order",
        acked.len()
    );
}

/// The leader at `metrics` made its groups since the restart durable as `sync_mode` says: some
/// by an RWF_DSYNC write alone with `dsync`; none that way with `fdatasync`. (With `dsync`, a
/// group that brings a zero-fill still takes an fdatasync, so that count is not checked.)
fn assert_groups_durable_by(sync_mode: &str, metrics: SocketAddr) {
    let text = get_metrics(metrics, TIMEOUT);
    let groups = |by: &str| -> u64 {
        metric_sample(
            &text,
            &format!("ringraft_disk_groups_total{{durable_by=\"{by}\"}}"),
        )
    };
    let (fdatasynced, dsync_written) = (groups("fdatasync"), groups("rwf_dsync"));
    eprintln!("{sync_mode}: groups fdatasynced {fdatasynced}, dsync written {dsync_written}");
    match sync_mode {
        "dsync" => assert!(dsync_written > 0, "dsync: no group written with RWF_DSYNC"),
        _ => {
            assert_eq!(
                dsync_written, 0,
                "{sync_mode}: groups written with RWF_DSYNC"
            );
            assert!(fdatasynced > 0, "{sync_mode}: no group fdatasynced");
        }
    }
}

/// Sends one frame (size prefix added) on a fresh connection; returns the stream.
fn send_frame(addr: SocketAddr, body: &[u8]) -> TcpStream {
    use std::io::Write;
    let mut stream = TcpStream::connect_timeout(&addr, TIMEOUT).unwrap();
    stream.set_read_timeout(Some(TIMEOUT)).unwrap();
    let mut frame = (body.len() as i32).to_be_bytes().to_vec();
    frame.extend_from_slice(body);
    stream.write_all(&frame).unwrap();
    stream
}

/// True if the peer closes the connection (EOF or reset) without sending anything.
fn closed_by_peer(mut stream: TcpStream) -> bool {
    let mut buf = [0u8; 64];
    match stream.read(&mut buf) {
        Ok(0) => true,
        Ok(_) => false,
        Err(e) => e.kind() == std::io::ErrorKind::ConnectionReset,
    }
}

/// A Vote request whose body carries `cluster_id`.
fn vote_request(cluster_id: &str) -> Request {
    Request::Vote(VoteRequest {
        cluster_id: cluster_id.into(),
        candidate_epoch: 0,
        candidate_id: 9,
        last_epoch: 0,
        last_epoch_end_offset: 0,
        pre_vote: false,
        ..Default::default()
    })
}

#[test]
fn bad_input_and_a_connection_flood_leave_the_node_committing() {
    let (mut cluster, leader) = Cluster::started(3);
    let addr = cluster.addr(leader);

    // ApiVersions v3 header cut inside the correlation id.
    let truncated = send_frame(addr, &[0, 18, 0, 3, 0, 0]);
    assert!(closed_by_peer(truncated), "truncated header: no close");
    for seed in 1..=5u64 {
        // Deterministic noise, so a failure can be replayed.
        let noise = XorShift64(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15)).bytes(64);
        let random = send_frame(addr, &noise);
        assert!(
            closed_by_peer(random),
            "random bytes (seed {seed}): no close"
        );
    }
    match send_raw_request(addr, &vote_request("another-cluster"), TIMEOUT).unwrap() {
        Response::Vote(vote) => {
            assert_eq!(vote.error, ErrorCode::INCONSISTENT_CLUSTER_ID);
            assert!(!vote.vote_granted);
        }
        other => panic!("unexpected {other:?}"),
    }

    let flood: Vec<_> = (0..200)
        .map(|_| {
            std::thread::spawn(move || -> Result<(), String> {
                let mut client = BlockingClient::connect(addr, WAIT).map_err(|e| e.to_string())?;
                for _ in 0..3 {
                    let versions = client.api_versions(3).map_err(|e| e.to_string())?;
                    assert_eq!(versions.error, ErrorCode::NONE);
                }
                client.describe_quorum().map_err(|e| e.to_string())?;
                Ok(())
            })
        })
        .collect();
    let failures: Vec<String> = flood
        .into_iter()
        .filter_map(|t| t.join().unwrap().err())
        .collect();
    assert!(failures.is_empty(), "flood: {failures:?}");

    let pid = cluster.node(leader).process.as_ref().unwrap().child.id();
    let rss = rss_kib(pid);
    eprintln!("leader RSS after the flood: {rss} KiB");
    assert!(rss < 512 * 1024, "leader RSS {rss} KiB after the flood");
    let mut client = BlockingClient::connect(addr, TIMEOUT).unwrap();
    produce_one(&mut client, "after the flood").unwrap();
}

/// Adds node `id`, not among the voters, with the voters' `quorum.voters` line.
fn add_observer(cluster: &mut Cluster, id: i32) {
    let voters_config = std::fs::read_to_string(&cluster.node(1).config).unwrap();
    let voters_line = voters_config
        .lines()
        .find(|l| l.starts_with("quorum.voters="))
        .unwrap()
        .to_string();
    assert_eq!(cluster.nodes.len() as i32, id - 1);
    let name = format!("node-{id}");
    cluster
        .add_node(id, &name, CLUSTER_ID, &voters_line)
        .unwrap();
}

#[test]
fn an_observer_replicates_committed_records_and_never_votes() {
    let mut cluster = Cluster::new(3);
    add_observer(&mut cluster, 4);
    cluster.start_all();
    let leader = cluster.wait_for_settled_leader(Some(4));
    let mut client = cluster.connect(leader, TIMEOUT);
    let acked = produce_numbered(&mut client, "observed-", 20);
    let end = acked.last().unwrap().0 + 1;
    drop(client);
    // The leader lists node 4 as an observer once it fetches, and sees it reach the end. Asked
    // of whichever voter leads at each poll: on a loaded machine leadership may move meanwhile,
    // and a former leader lists no observers.
    let deadline = Instant::now() + WAIT;
    let mut observer_seen = None;
    while Instant::now() < deadline {
        let described = cluster.leader_now(Some(4)).and_then(|leading| {
            let client = cluster.client(cluster.addr(leading), TIMEOUT);
            client
                .and_then(|mut c| c.describe_quorum().map_err(|e| e.to_string()))
                .ok()
        });
        if let Some(d) = described {
            assert!(d.current_voters.iter().all(|v| v.replica_id != 4));
            observer_seen = d.observers.iter().find(|o| o.replica_id == 4).cloned();
            if observer_seen
                .as_ref()
                .is_some_and(|o| o.log_end_offset >= end)
            {
                break;
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let observer = observer_seen.expect("DescribeQuorum never listed node 4 as an observer");
    assert!(observer.log_end_offset >= end, "observer at {observer:?}");
    let leader = cluster.wait_for_leader(Some(4));
    cluster.wait_for_voters_at(leader, end);
    cluster.stop_all_cleanly();
    let observer_log = read_log(&cluster.node(4).dir);
    assert!(
        log_holds_once_in_order(&observer_log, &acked),
        "observer log {observer_log:?}"
    );
    // An observer never votes: its quorum-state file, if written, records no vote.
    let state_path = cluster.node(4).dir.join("quorum-state");
    if let Ok(state) = std::fs::read_to_string(&state_path) {
        assert!(state.contains("\"votedId\":-1"), "observer voted: {state}");
    }
}

#[test]
fn a_pinning_cpu_outside_the_allowed_set_fails_at_start_up_naming_the_set() {
    let cluster = Cluster::new(1);
    let beyond = engine::os::file::allowed_cpus().unwrap().last().unwrap() + 1;
    let setting = format!("log.cpu={beyond}");
    let mut node = ProcessGuard {
        child: spawn(&cluster.nodes[0].config, &[&setting], Stdio::piped()),
    };
    let status = node.wait_exit(TIMEOUT).expect("a bad log.cpu exits");
    assert!(!status.success());
    let stderr = read_stderr(&mut node);
    assert!(
        stderr.contains(&format!(
            "{setting} is outside this process's allowed CPU set"
        )),
        "{stderr}"
    );
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
}
