//! Real Kafka clients against real nodes (docs/clients.md): `kcat -L`, kafka-python 3 and
//! confluent-kafka 2 read Metadata from every node of a 3-voter cluster (plus an observer) and
//! see every broker's client endpoint and the partition's leader; Metadata on a survivor after
//! the leader is killed never names the dead leader once another is elected; separate CLIENT
//! and CONTROLLER listeners advertise the CLIENT endpoints. The clients come from
//! `.ci/install-clients.sh` (kcat on the PATH, a venv at target/venv); a missing one fails the
//! test with that hint. Every wait is bounded; every process is killed when its guard drops.

mod support;

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use engine::raft::ErrorCode;
use net::client::BlockingClient;
use net::wire::kafka::MetadataResponse;
use serde_json::Value;
use support::clients::{kcat, kcat_consume_args, kcat_produce_args, venv_python, workspace};
use support::*;

const TIMEOUT: Duration = Duration::from_secs(10);
/// Every client run is killed after this (coreutils `timeout`), so a hung client fails the test.
const CLIENT_LIMIT_SECS: &str = "30";

/// Runs `program args` under `timeout`, returning its stdout (or why it failed).
fn run(program: &Path, args: &[&str]) -> Result<String, String> {
    let out = Command::new("timeout")
        .arg(CLIENT_LIMIT_SECS)
        .arg(program)
        .args(args)
        .output()
        .map_err(|e| format!("{}: {e}", program.display()))?;
    if !out.status.success() {
        return Err(format!(
            "{} {args:?}: {}: {}",
            program.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// What a client saw: the brokers (id, host, port) and the partition's leader.
#[derive(Debug, PartialEq, Eq)]
struct Seen {
    brokers: BTreeSet<(i64, String, i64)>,
    leader: i64,
}

fn kcat_metadata(addr: SocketAddr) -> Result<Seen, String> {
    let server = addr.to_string();
    let out = run(
        &kcat(),
        &[
            "-b",
            &server,
            "-L",
            "-J",
            "-t",
            "__cluster_metadata",
            "-m",
            "10",
        ],
    )?;
    let json: Value = serde_json::from_str(&out).map_err(|e| format!("{e}: {out}"))?;
    let brokers = json["brokers"]
        .as_array()
        .ok_or(format!("no brokers: {out}"))?
        .iter()
        .map(|b| {
            let name = b["name"].as_str().unwrap_or_default();
            let (host, port) = name.rsplit_once(':').unwrap_or((name, "0"));
            let id = b["id"].as_i64().unwrap_or(-100);
            (id, host.to_owned(), port.parse().unwrap_or(0))
        })
        .collect();
    let leader = json["topics"][0]["partitions"][0]["leader"]
        .as_i64()
        .ok_or(format!("no partition leader: {out}"))?;
    Ok(Seen { brokers, leader })
}

/// One of the Python scripts beside this file, run from the venv.
fn python_metadata(script: &str, addr: SocketAddr) -> Result<Seen, String> {
    let path = workspace().join("tools/tests/clients").join(script);
    let out = run(&venv_python(), &[path.to_str().unwrap(), &addr.to_string()])?;
    let json: Value = serde_json::from_str(out.trim()).map_err(|e| format!("{e}: {out}"))?;
    let brokers = json["brokers"]
        .as_array()
        .ok_or(format!("no brokers: {out}"))?
        .iter()
        .map(|b| {
            (
                b[0].as_i64().unwrap_or(-100),
                b[1].as_str().unwrap_or_default().to_owned(),
                b[2].as_i64().unwrap_or(0),
            )
        })
        .collect();
    let leader = json["leader"].as_i64().ok_or(format!("no leader: {out}"))?;
    Ok(Seen { brokers, leader })
}

/// Polls `query` (bounded by [`WAIT`]) until it sees `expected`; panics with the last answer.
fn wait_to_see(what: &str, expected: &Seen, mut query: impl FnMut() -> Result<Seen, String>) {
    let deadline = Instant::now() + WAIT;
    let mut last = Err("never asked".to_string());
    while Instant::now() < deadline {
        last = query();
        if last.as_ref() == Ok(expected) {
            return;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    panic!("{what}: expected {expected:?} within {WAIT:?}, last saw {last:?}");
}

fn expected(cluster: &Cluster, ids: &[i32], leader: i32) -> Seen {
    Seen {
        brokers: ids
            .iter()
            .map(|id| {
                let addr = cluster.addr(*id);
                (
                    i64::from(*id),
                    addr.ip().to_string(),
                    i64::from(addr.port()),
                )
            })
            .collect(),
        leader: i64::from(leader),
    }
}

/// The leader a consumer's Fetch v12 refused by the node at `addr` names (None: no answer, or
/// not refused).
fn fetch_hint(addr: SocketAddr) -> Option<i32> {
    let mut client = BlockingClient::connect(addr, TIMEOUT).ok()?;
    let response = client
        .call_at(12, &consumer_fetch_request(0, 1 << 20))
        .ok()?;
    let partition = response.topics.first()?.partitions.first()?;
    partition.current_leader.map(|leader| leader.leader_id)
}

/// A Produce v10 (acks=-1) to the node at `addr` when it refuses it (None: no answer, or taken).
fn produce_v10_refusal(addr: SocketAddr) -> Option<net::wire::kafka::ProduceResponse> {
    let mut client = BlockingClient::connect(addr, TIMEOUT).ok()?;
    let response = client.produce(10, -1, batch("hint")).ok()??;
    let error = response.topics.first()?.partitions.first()?.error;
    (!error.is_none()).then_some(response)
}

fn metadata(addr: SocketAddr, version: i16) -> Result<MetadataResponse, String> {
    BlockingClient::connect(addr, TIMEOUT)
        .and_then(|mut c| c.metadata(version, None))
        .map_err(|e| e.to_string())
}

fn add_observer(cluster: &mut Cluster, id: i32) {
    let membership = format!("bootstrap.servers={}", cluster.addr(1));
    cluster
        .add_node(id, &format!("observer-{id}"), CLUSTER_ID, &membership)
        .unwrap();
}

#[test]
fn kcat_kafka_python_and_confluent_kafka_see_every_broker_and_the_leader_from_every_node() {
    let (kcat_path, python) = (kcat(), venv_python());
    assert!(kcat_path.is_file() && python.is_file());
    let mut cluster = Cluster::new(3);
    add_observer(&mut cluster, 4);
    let leader = cluster.start_all_and_elect();
    let want = expected(&cluster, &[1, 2, 3, 4], leader);
    for id in 1..=4 {
        let addr = cluster.addr(id);
        wait_to_see(&format!("kcat -L on node {id}"), &want, || {
            kcat_metadata(addr)
        });
    }
    for id in 1..=4 {
        let addr = cluster.addr(id);
        for script in ["metadata_kafka_python.py", "metadata_confluent.py"] {
            wait_to_see(&format!("{script} on node {id}"), &want, || {
                python_metadata(script, addr)
            });
        }
    }
    assert_eq!(cluster.leader_now(None), Some(leader), "the leader held");

    // Every version, on a follower: the fields each version carries.
    let follower = cluster.others(leader)[0];
    for version in 0..=12 {
        let m = metadata(cluster.addr(follower), version).unwrap();
        assert_eq!(m.brokers.len(), 4, "v{version}: {m:?}");
        let p = &m.topics[0].partitions[0];
        assert_eq!(
            (p.error, p.leader_id),
            (ErrorCode::NONE, leader),
            "v{version}"
        );
        assert_eq!(p.replica_nodes, vec![1, 2, 3], "v{version}");
        if version >= 1 {
            assert_eq!(m.controller_id, leader);
        }
        if version >= 2 {
            assert_eq!(m.cluster_id.as_deref(), Some(CLUSTER_ID));
        }
        if version >= 7 {
            assert!(p.leader_epoch >= 1, "v{version}: {p:?}");
        }
    }
    // The in-sync set is the leader's view: every voter catches up in an idle cluster.
    let deadline = Instant::now() + WAIT;
    let mut m = metadata(cluster.addr(follower), 12).unwrap();
    while m.topics[0].partitions[0].isr_nodes != vec![1, 2, 3] && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
        m = metadata(cluster.addr(follower), 12).unwrap();
    }
    let p = &m.topics[0].partitions[0];
    assert_eq!(p.isr_nodes, vec![1, 2, 3], "{m:?}");
    assert!(p.offline_replicas.is_empty());

    // Any other topic is unknown, never created; DescribeCluster says the same as Metadata.
    let mut client = cluster.connect(4, TIMEOUT);
    let m = client.metadata(12, Some(&["other"])).unwrap();
    assert_eq!(m.topics[0].error, ErrorCode::UNKNOWN_TOPIC_OR_PARTITION);
    assert!(m.topics[0].partitions.is_empty());
    for version in 0..=1 {
        let d = client.describe_cluster(version).unwrap();
        assert_eq!((d.error, d.controller_id), (ErrorCode::NONE, leader));
        assert_eq!(d.cluster_id, CLUSTER_ID);
        assert_eq!(d.brokers.len(), 4, "{d:?}");
        assert_ne!(d.cluster_authorized_operations, i32::MIN, "asked for");
    }
    drop(client);
    cluster.stop_all_cleanly();
}

#[test]
fn after_the_leader_is_killed_metadata_never_names_it_once_another_is_elected() {
    let (mut cluster, old) = Cluster::started(3);
    let want = expected(&cluster, &[1, 2, 3], old);
    for id in 1..=3 {
        let addr = cluster.addr(id);
        wait_to_see(&format!("kcat -L on node {id}"), &want, || {
            kcat_metadata(addr)
        });
    }
    cluster.node(old).process = None; // SIGKILL
    let new = cluster.wait_for_leader(Some(old));
    let survivors: Vec<i32> = cluster.others(old);
    for id in &survivors {
        let deadline = Instant::now() + WAIT;
        loop {
            let m = metadata(cluster.addr(*id), 12).unwrap();
            let p = &m.topics[0].partitions[0];
            assert_ne!(p.leader_id, old, "node {id} names the dead leader: {m:?}");
            if p.leader_id == -1 {
                assert_eq!(p.error, ErrorCode::LEADER_NOT_AVAILABLE, "{m:?}");
                assert_eq!(m.controller_id, -1);
            }
            if p.leader_id == new {
                assert_eq!(m.controller_id, new);
                // The dead voter stays listed (its last endpoints) and is not in sync.
                assert_eq!(m.brokers.len(), 3, "{m:?}");
                if p.isr_nodes.contains(&new) {
                    assert!(!p.isr_nodes.contains(&old), "{m:?}");
                    assert!(p.offline_replicas.contains(&old), "{m:?}");
                    break;
                }
            }
            assert!(
                Instant::now() < deadline,
                "node {id} never named {new}: {m:?}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        let addr = cluster.addr(*id);
        wait_to_see(
            &format!("kcat -L on survivor {id}"),
            &expected(&cluster, &[1, 2, 3], new),
            || kcat_metadata(addr),
        );
    }
    // The old leader comes back: from its first answer on, a leader it names is one whose
    // endpoint the same answer lists (a producer given another cannot send to it; kafka-python
    // 3.0.12's never recovers, docs/clients.md), until it names the new leader.
    cluster.start(old, &[]);
    let deadline = Instant::now() + WAIT;
    loop {
        if let Ok(m) = metadata(cluster.addr(old), 12) {
            let listed = |id: i32| id == -1 || m.brokers.iter().any(|b| b.node_id == id);
            let p = &m.topics[0].partitions[0];
            assert!(listed(p.leader_id), "leader not among the brokers: {m:?}");
            assert!(
                listed(m.controller_id),
                "controller not among the brokers: {m:?}"
            );
            if p.leader_id == new {
                break;
            }
        }
        assert!(Instant::now() < deadline, "node {old} never named {new}");
        std::thread::sleep(Duration::from_millis(2));
    }
    cluster.stop_all_cleanly();
}

/// A follower restarted while its leader is paused knows that leader from its quorum-state file
/// but not where it listens (the leader's broker list has not reached it). Its Produce v10
/// refusals must not name the leader without its endpoint then, nor its Fetch refusals at all (v12's CurrentLeader, which kafka-python's consumer follows at
/// once, to an id missing from its brokers: docs/clients.md). The node's broker list only grows
/// here, so a leader its Fetch names must be listed by the Metadata answer that follows.
#[test]
fn a_restarted_follower_names_no_leader_it_cannot_list_in_fetch_refusals() {
    let (mut cluster, leader) = Cluster::started(3);
    let follower = cluster.others(leader)[0];
    cluster.node(follower).process = None; // SIGKILL
    let pid = cluster
        .pids()
        .into_iter()
        .find(|(id, _)| *id == leader)
        .expect("the leader runs")
        .1;
    let paused = Resume(vec![pid]);
    // SAFETY: plain syscall on our own child's pid.
    unsafe { libc::kill(pid as i32, libc::SIGSTOP) };
    cluster.start(follower, &[]);
    let addr = cluster.addr(follower);
    // Answers in which the restarted node did not list the paused leader: the window this test
    // is about, until an election among the other two gives a leader it can reach.
    let mut unlisted = 0;
    let deadline = Instant::now() + WAIT;
    while unlisted < 20 {
        assert!(
            Instant::now() < deadline,
            "node {follower} listed node {leader} from the start ({unlisted} answers without it)"
        );
        // A Produce v10 refusal names a leader only with its endpoint, in the same answer.
        if let Some(refusal) = produce_v10_refusal(addr) {
            let partition = &refusal.topics[0].partitions[0];
            if let Some(named) = partition.current_leader.filter(|l| l.leader_id != -1) {
                assert!(
                    refusal
                        .node_endpoints
                        .iter()
                        .any(|e| e.node_id == named.leader_id),
                    "a Produce refusal named {} without its endpoint: {refusal:?}",
                    named.leader_id
                );
            }
        }
        let hinted = fetch_hint(addr);
        if let Ok(m) = metadata(addr, 12) {
            let listed = |id: i32| m.brokers.iter().any(|b| b.node_id == id);
            if let Some(hinted) = hinted.filter(|id| *id != -1) {
                assert!(
                    listed(hinted),
                    "a Fetch refusal named {hinted}, not among the brokers: {m:?}"
                );
            }
            if !listed(leader) {
                unlisted += 1;
            }
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    drop(paused); // SIGCONT
    cluster.stop_all_cleanly();
}

#[test]
fn separate_client_and_controller_listeners_advertise_the_client_endpoints() {
    let mut cluster = Cluster::new_mutual_tls(3);
    let leader = cluster.start_all_and_elect();
    for node in &cluster.nodes {
        assert_ne!(node.addr, node.controller_addr, "two listeners");
    }
    let want = expected(&cluster, &[1, 2, 3], leader);
    for id in 1..=3 {
        let addr = cluster.addr(id);
        wait_to_see(&format!("kcat -L on node {id}"), &want, || {
            kcat_metadata(addr)
        });
    }
    cluster.stop_all_cleanly();
}

#[test]
fn metadata_refused_on_the_topic_still_lists_the_brokers() {
    let mut cluster = Cluster::new(3);
    // The voters' quorum RPCs and DescribeQuorum (which the kit's leader wait uses) stay open;
    // nobody may DESCRIBE the topic.
    let acls = cluster.root.path().join("acls.txt");
    std::fs::write(
        &acls,
        "allow User:ANONYMOUS CLUSTER_ACTION cluster:kafka-cluster from *\n\
         allow User:ANONYMOUS DESCRIBE cluster:kafka-cluster from *\n",
    )
    .unwrap();
    let acl_file = format!("authorizer.acl.file={}", acls.display());
    for id in 1..=3 {
        cluster.start(id, &[&acl_file]);
    }
    let leader = cluster.wait_for_leader(None);
    let mut client = cluster.connect(leader, TIMEOUT);
    let named = Some(&["__cluster_metadata"][..]);
    let deadline = Instant::now() + WAIT;
    let mut m = client.metadata(12, named).unwrap();
    while m.brokers.len() < 3 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
        m = client.metadata(12, named).unwrap();
    }
    assert_eq!(m.brokers.len(), 3, "{m:?}");
    assert_eq!(m.controller_id, leader);
    assert_eq!(
        m.topics[0].error,
        ErrorCode::TOPIC_AUTHORIZATION_FAILED,
        "{m:?}"
    );
    assert!(m.topics[0].partitions.is_empty());
    // Asked for every topic, it lists only those it may describe: none; the brokers still.
    let all = client.metadata(12, None).unwrap();
    assert!(all.topics.is_empty(), "{all:?}");
    assert_eq!(all.brokers.len(), 3);
    let d = client.describe_cluster(1).unwrap();
    assert_eq!(d.error, ErrorCode::NONE);
    // DESCRIBE and CLUSTER_ACTION on the cluster, nothing else: Kafka's bits 8 and 9.
    assert_eq!(d.cluster_authorized_operations, 1 << 8 | 1 << 9, "{d:?}");
    drop(client);
    cluster.stop_all_cleanly();
}

/// What a produce-and-consume script reported: acknowledged and consumed (offset, value), and
/// the values whose delivery failed.
#[derive(Debug, Default)]
struct Run {
    acked: Vec<(i64, String)>,
    consumed: Vec<(i64, String)>,
    failed: Vec<String>,
    done: bool,
}

/// Starts `script` (beside this file, from the venv) producing `count` records `prefix-N`
/// through every node; its JSON lines arrive on the returned channel as they are printed.
fn start_script(
    script: &str,
    cluster: &Cluster,
    count: usize,
    prefix: &str,
    env: &[(&str, &str)],
) -> (ProcessGuard, std::sync::mpsc::Receiver<Value>) {
    start_script_on(script, cluster, &[1, 2, 3], count, prefix, env)
}

/// [`start_script`] with the bootstrap list in the order of `ids`.
fn start_script_on(
    script: &str,
    cluster: &Cluster,
    ids: &[i32],
    count: usize,
    prefix: &str,
    env: &[(&str, &str)],
) -> (ProcessGuard, std::sync::mpsc::Receiver<Value>) {
    use std::io::BufRead;
    let servers: Vec<String> = ids.iter().map(|&id| cluster.addr(id).to_string()).collect();
    let path = workspace().join("tools/tests/clients").join(script);
    // The guard kills the script itself (not a `timeout` wrapper, whose SIGKILL would leave it
    // running: a stalled kafka-python once spun a vCPU for 25 minutes after its test ended),
    // and so does this thread's end. In a lab it runs in the client namespace (`ip netns exec`
    // execs it in the same process, which the guard and the parent-death signal reach).
    let mut command = match &cluster.lab {
        Some(lab) => lab.client().command(&venv_python()),
        None => Command::new(venv_python()),
    };
    command
        .arg(path)
        .arg(servers.join(","))
        .arg(count.to_string())
        .arg(prefix)
        .stdout(std::process::Stdio::piped())
        .envs(env.iter().copied())
        .stderr(std::fs::File::create(script_stderr(cluster, prefix)).unwrap());
    testkit::kill_with_parent(&mut command);
    let mut child = command.spawn().unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
        {
            if let Ok(event) = serde_json::from_str::<Value>(&line) {
                if tx.send(event).is_err() {
                    return;
                }
            }
        }
    });
    (ProcessGuard { child }, rx)
}

/// Where the script run for `prefix` writes its stderr (a client's traceback, when it fails).
fn script_stderr(cluster: &Cluster, prefix: &str) -> std::path::PathBuf {
    cluster.root.path().join(format!("script-{prefix}.stderr"))
}

/// Collects events until `stop` says so or the script is done; bounded by `limit`.
fn collect(
    rx: &std::sync::mpsc::Receiver<Value>,
    run: &mut Run,
    limit: Duration,
    stop: impl Fn(&Run) -> bool,
) {
    let deadline = Instant::now() + limit;
    while !run.done && !stop(run) && Instant::now() < deadline {
        let Ok(event) = rx.recv_timeout(Duration::from_millis(200)) else {
            continue;
        };
        let pair = |v: &Value| {
            (
                v[0].as_i64().unwrap_or(-1),
                v[1].as_str().unwrap_or_default().to_owned(),
            )
        };
        if let Some(a) = event.get("acked") {
            run.acked.push(pair(a));
        } else if let Some(c) = event.get("consumed") {
            run.consumed.push(pair(c));
        } else if let Some(f) = event.get("failed") {
            run.failed.push(f.to_string());
        } else if event.get("done").is_some() {
            run.done = true;
        }
    }
}

/// The checks on a finished run: every record acknowledged (or, when `may_fail`, acknowledged
/// or reported failed), each acknowledged one exactly once in what the consumer read, at its
/// acknowledged offset, in offset order; nothing read that was not produced (no control record);
/// and every voter's log holding each acknowledged value exactly once and no value twice.
fn assert_exactly_once(
    run: &Run,
    count: usize,
    prefix: &str,
    may_fail: bool,
    cluster: &mut Cluster,
) {
    // A stalled script (once in CI: 200 of 600 acknowledged after a leader kill, then nothing
    // for 140 s) is reported with what the cluster thought then, while it still runs.
    assert!(
        run.done,
        "the script did not finish: {} acknowledged (last {:?}), {} consumed, {} failed\n{}\
         the script's stderr:\n{}",
        run.acked.len(),
        run.acked.last(),
        run.consumed.len(),
        run.failed.len(),
        cluster.quorum_report(),
        testkit::tail(
            &std::fs::read_to_string(script_stderr(cluster, prefix)).unwrap_or_default(),
            30,
            false
        )
    );
    assert!(
        may_fail || run.failed.is_empty(),
        "{} deliveries failed, the first: {:?}",
        run.failed.len(),
        run.failed.first()
    );
    let acked: BTreeSet<&String> = run.acked.iter().map(|(_, v)| v).collect();
    assert_eq!(acked.len(), run.acked.len(), "acknowledged once each");
    assert_eq!(acked.len() + run.failed.len(), count, "every send answered");
    support::clients::assert_read_once_where_acked(&run.acked, &run.consumed);
    for (offset, value) in &run.consumed {
        assert!(
            value.starts_with(prefix),
            "read a record nobody produced at {offset}: {value:?}"
        );
    }
    // Committed means on a majority, not on every voter: a voter restarted late in the run may
    // still be fetching. Every voter must reach the last acknowledged offset on its own (a
    // bounded wait, so a voter that never catches up fails here, named) before the logs are read.
    if let Some(last) = run.acked.iter().map(|(offset, _)| *offset).max() {
        let leader = cluster.wait_for_leader(None);
        cluster.wait_for_voters_at(leader, last + 1);
    }
    cluster.stop_all_cleanly();
    for node in &cluster.nodes {
        let log = read_log(&node.dir);
        for i in 0..count {
            let value = format!("{prefix}-{i}");
            let copies = log.iter().filter(|(_, v)| *v == value).count();
            let want = if acked.contains(&value) { 1..=1 } else { 0..=1 };
            assert!(
                want.contains(&copies),
                "node {}: {value} stored {copies} times",
                node.id
            );
        }
    }
}

/// A client `script` produces `count` records named `prefix`-N with acks=all to a healthy
/// cluster and reads them back: every one acknowledged and read exactly once.
fn produces_and_consumes_every_record_once(script: &str, count: usize, prefix: &str) {
    let (mut cluster, _) = Cluster::started(3);
    let (_script, rx) = start_script(script, &cluster, count, prefix, &[]);
    let mut run = Run::default();
    collect(&rx, &mut run, Duration::from_secs(140), |_| false);
    assert_exactly_once(&run, count, prefix, false, &mut cluster);
}

#[test]
fn kafka_python_produces_with_acks_all_and_consumes_every_record_once() {
    produces_and_consumes_every_record_once("produce_consume_kafka_python.py", 200, "kp");
}

#[test]
fn confluent_kafka_produces_lz4_with_acks_all_and_consumes_every_record_once() {
    produces_and_consumes_every_record_once("produce_consume_confluent.py", 300, "ck");
}

/// An idempotent producer with retries (`script`) while the leader is SIGKILLed after a third of
/// the records are acknowledged and restarted a second later: sends in flight are retried to the
/// new leader, the consumer follows it, and every record is acknowledged and read exactly once,
/// in order, and stored once in every log. The bootstrap list starts with `first`.
fn loses_and_duplicates_nothing_across_a_leader_kill(script: &str, prefix: &str, first: Order) {
    let (mut cluster, leader) = Cluster::started(3);
    let count = 600;
    let order = first.servers(leader);
    let (_script, rx) = start_script_on(script, &cluster, &order, count, prefix, &[]);
    let mut run = Run::default();
    collect(&rx, &mut run, Duration::from_secs(60), |r| {
        r.acked.len() >= count / 3
    });
    assert!(
        run.acked.len() >= count / 3,
        "too few acknowledged before the kill: {run:?}"
    );
    cluster.node(leader).process.take(); // SIGKILL via the guard
    std::thread::sleep(Duration::from_secs(1));
    cluster.start(leader, &[]);
    collect(&rx, &mut run, Duration::from_secs(140), |_| false);
    assert_exactly_once(&run, count, prefix, false, &mut cluster);
    let producers = producer_ids_in(&cluster.nodes[0].dir);
    assert!(
        !producers.is_empty() && producers.iter().all(|&id| id >= 0),
        "every data batch comes from an idempotent producer: {producers:?}"
    );
}

/// kafka-python's idempotent producer (retrying without limit) and its consumer, in a lab's
/// client namespace (6,000 records), while the nemesis's seeded faults
/// (tools/tests/support/nemesis.rs: kills and restarts, pauses, cut-offs, severed pairs, on the
/// leader or any node) hit the three voters for its whole run: every record acknowledged and
/// read exactly once, in order, and stored once in every log.
#[test]
fn idempotent_kafka_python_under_a_nemesis_writes_every_record_once() {
    under_a_nemesis_writes_every_record_once("produce_consume_kafka_python.py", "kpnemesis");
}

/// The same with confluent-kafka (librdkafka).
#[test]
fn idempotent_confluent_kafka_under_a_nemesis_writes_every_record_once() {
    under_a_nemesis_writes_every_record_once("produce_consume_confluent.py", "cknemesis");
}

fn under_a_nemesis_writes_every_record_once(script: &str, prefix: &str) {
    use support::nemesis::{run_schedule, schedule_length, seed};
    let mut cluster = Cluster::new_in_lab(3, 3);
    cluster.start_all();
    cluster.wait_for_settled_leader(None);
    let seed = seed();
    eprintln!("{script} under the nemesis: RINGRAFT_NEMESIS_SEED={seed}");
    let mut rng = engine::sim::XorShift64(seed);
    // One send every 5 ms or more: the sends span most of the schedule.
    let count = 6000;
    let (_script, rx) = start_script(script, &cluster, count, prefix, &[]);
    let schedule = run_schedule(&mut cluster, &mut rng, schedule_length());
    eprintln!(
        "schedule (RINGRAFT_NEMESIS_SEED={seed}):\n{}",
        schedule.join("\n")
    );
    let mut run = Run::default();
    collect(&rx, &mut run, Duration::from_secs(180), |_| false);
    assert_exactly_once(&run, count, prefix, false, &mut cluster);
}

/// The producer ids of the data batches in a stopped node's log (-1: not idempotent).
fn producer_ids_in(dir: &Path) -> BTreeSet<i64> {
    read_batches(dir)
        .iter()
        .filter(|view| !view.is_control())
        .map(|view| view.producer_id())
        .collect()
}

/// Where a script's bootstrap list starts.
#[derive(Clone, Copy)]
enum Order {
    /// A follower first: its producer id comes from a follower's block.
    FollowerFirst,
    /// The leader first.
    LeaderFirst,
}

impl Order {
    fn servers(self, leader: i32) -> Vec<i32> {
        let mut ids: Vec<i32> = (1..=3).filter(|&id| id != leader).collect();
        match self {
            Order::FollowerFirst => ids.push(leader),
            Order::LeaderFirst => ids.insert(0, leader),
        }
        ids
    }
}

#[test]
fn idempotent_kafka_python_across_a_leader_kill_writes_every_record_once() {
    let script = "produce_consume_kafka_python.py";
    loses_and_duplicates_nothing_across_a_leader_kill(script, "kpkill", Order::LeaderFirst);
}

#[test]
fn idempotent_confluent_kafka_across_a_leader_kill_writes_every_record_once() {
    let script = "produce_consume_confluent.py";
    loses_and_duplicates_nothing_across_a_leader_kill(script, "ckkill", Order::FollowerFirst);
}

/// kcat (Debian's, librdkafka 2.0) produces with acks=all and zstd (100 short lines compress to
/// under 7 bytes a record, which a header check once refused), then reads the partition
/// from the beginning to its end (`-e`): every line once, in order.
#[test]
fn kcat_produces_and_consumes_every_record_once() {
    use std::io::Write;
    let (cluster, leader) = Cluster::started(3);
    let server = cluster.addr(leader).to_string();
    let values: Vec<String> = (0..100).map(|i| format!("kcat-{i}")).collect();
    let mut producer = Command::new("timeout")
        .args([CLIENT_LIMIT_SECS])
        .arg(kcat())
        .args(kcat_produce_args(&server))
        .args(["-z", "zstd"])
        .stdin(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    producer
        .stdin
        .take()
        .unwrap()
        .write_all(format!("{}\n", values.join("\n")).as_bytes())
        .unwrap();
    assert!(producer.wait().unwrap().success(), "kcat -P failed");
    let out = run(&kcat(), &kcat_consume_args(&server)).unwrap();
    let read: Vec<(i64, String)> = out
        .lines()
        .filter_map(|l| l.split_once(' '))
        .map(|(o, v)| (o.parse().unwrap(), v.to_owned()))
        .collect();
    let read_values: Vec<&String> = read.iter().map(|(_, v)| v).collect();
    assert_eq!(read_values, values.iter().collect::<Vec<_>>(), "{out}");
    let high_watermark = cluster
        .connect(leader, TIMEOUT)
        .describe_quorum()
        .unwrap()
        .high_watermark;
    assert!(
        read.iter().all(|(o, _)| *o < high_watermark),
        "read past the high watermark"
    );
}

/// A batch with one record per timestamp of `stamps`, as a Kafka client writes it (kafka-protocol
/// computes its MaxTimestamp), compressed with `compression`.
fn timestamped_batch(
    stamps: &[i64],
    compression: kafka_protocol::records::Compression,
) -> bytes::Bytes {
    let records: Vec<(i64, String)> = stamps.iter().map(|t| (*t, format!("ts-{t}"))).collect();
    support::kafka_client_batch(&records, compression)
}

/// One ListOffsets of `__cluster_metadata`-0 at `timestamp` with the project's client at
/// `version`: (error, offset, timestamp, leader epoch).
fn list_offset(
    client: &mut BlockingClient,
    version: i16,
    timestamp: i64,
) -> (ErrorCode, i64, i64, i32) {
    use net::wire::kafka::{ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic};
    let request = ListOffsetsRequest {
        replica_id: -1,
        isolation_level: 0,
        topics: vec![ListOffsetsTopic {
            name: "__cluster_metadata".into(),
            partitions: vec![ListOffsetsPartition {
                index: 0,
                current_leader_epoch: -1,
                timestamp,
            }],
        }],
    };
    let response = client.call_at(version, &request).unwrap();
    let p = &response.topics[0].partitions[0];
    (p.error, p.offset, p.timestamp, p.leader_epoch)
}

/// ListOffsets by timestamp and by max timestamp (docs/clients.md, "Offsets by timestamp") on
/// records with known times: batches written by the project's client (one zstd-compressed, times
/// going back inside a batch and between batches) and by kafka-python (`timestamp_ms`), looked
/// up by the project's client at every version 1-7, by kafka-python (`offsets_for_times`,
/// `list_partition_offsets` with MAX_TIMESTAMP) and by confluent-kafka (`offsets_for_times`,
/// `list_offsets` with `max_timestamp`): each answer is the first record in offset order whose
/// timestamp reaches the target (none past the last), as a scan of what was produced says.
#[test]
fn list_offsets_by_timestamp_and_max_timestamp_answer_what_a_scan_of_the_records_says() {
    use kafka_protocol::records::Compression;
    let python = venv_python();
    let mut cluster = Cluster::new(3);
    // The leader keeps its leadership while its followers are paused below (check-quorum).
    for id in 1..=3 {
        cluster.start(id, &["quorum.progress.timeout.ms=120000"]);
    }
    let leader = cluster.wait_for_leader(None);
    let servers: Vec<String> = (1..=3).map(|id| cluster.addr(id).to_string()).collect();
    let servers = servers.join(",");
    // A day ahead: every LeaderChange control record (stamped with the leader's clock) is older
    // than every target, so only the records below count.
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    let t0 = (now + 86_400_000) / 1000 * 1000;
    let mut produced: Vec<(i64, i64)> = Vec::new(); // (offset, timestamp)
    let mut client = cluster.connect(leader, TIMEOUT);
    let ours: [(&[i64], Compression); 3] = [
        (&[t0 + 100, t0 + 110, t0 + 105], Compression::None),
        (&[t0 + 300, t0 + 250, t0 + 320], Compression::Zstd),
        (&[t0 + 200], Compression::None),
    ];
    for (stamps, compression) in ours {
        let response = client
            .produce(9, -1, timestamped_batch(stamps, compression))
            .unwrap()
            .unwrap();
        let p = &response.topics[0].partitions[0];
        assert_eq!(p.error, ErrorCode::NONE, "{p:?}");
        produced.extend(
            stamps
                .iter()
                .enumerate()
                .map(|(i, t)| (p.base_offset + i as i64, *t)),
        );
    }
    let script = workspace().join("tools/tests/clients/timestamps_kafka_python.py");
    let script = script.to_str().unwrap();
    let stamps = [t0 + 400, t0 + 150, t0 + 500].map(|t| t.to_string());
    let mut args = vec![script, &servers, "produce"];
    args.extend(stamps.iter().map(String::as_str));
    let out = run(&python, &args).unwrap();
    let acked: Value = serde_json::from_str(out.trim()).unwrap();
    for pair in acked["acked"].as_array().unwrap() {
        produced.push((pair[0].as_i64().unwrap(), pair[1].as_i64().unwrap()));
    }
    assert_eq!(produced.len(), 10, "{produced:?}");
    let first_at = |target: i64| produced.iter().find(|(_, t)| *t >= target).copied();
    let max = produced.iter().map(|(_, t)| *t).max().unwrap();
    let biggest = first_at(max).unwrap();
    assert_eq!(biggest.1, t0 + 500);
    let targets: Vec<i64> = [0, 100, 101, 106, 111, 201, 260, 321, 401, 450, 500, 501]
        .iter()
        .map(|d| t0 + d)
        .collect();
    assert_eq!(
        first_at(t0 + 106).map(|(_, t)| t),
        Some(t0 + 110),
        "inside a batch"
    );
    assert_eq!(
        first_at(t0 + 201).map(|(_, t)| t),
        Some(t0 + 300),
        "not the next in time"
    );
    assert_eq!(first_at(t0 + 501), None, "past the last");

    // The project's client, every version; the epoch of every batch is this leader's.
    let epoch = client.describe_quorum().unwrap().leader_epoch;
    for version in 1..=7 {
        for target in targets.iter().copied().chain([MAX]) {
            let want = if target == MAX {
                Some(biggest)
            } else {
                first_at(target)
            };
            let (error, offset, timestamp, leader_epoch) =
                list_offset(&mut client, version, target);
            assert_eq!(error, ErrorCode::NONE, "v{version} {target}");
            let (want_offset, want_timestamp) = want.unwrap_or((-1, -1));
            assert_eq!(
                (offset, timestamp),
                (want_offset, want_timestamp),
                "v{version} {target}"
            );
            let want_epoch = match (version, want) {
                (4.., Some(_)) => epoch,
                _ => -1,
            };
            assert_eq!(leader_epoch, want_epoch, "v{version} {target}");
        }
    }
    // Before every record: the LeaderChange control record at offset 0, stamped with the
    // leader's wall clock when it was elected, moments ago (as Kafka's control records are).
    let (error, offset, timestamp, _) = list_offset(&mut client, 7, now - 86_400_000);
    assert_eq!((error, offset), (ErrorCode::NONE, 0));
    assert!(
        (now - 120_000..=now + 5_000).contains(&timestamp),
        "{timestamp} vs {now}"
    );
    // A partition named twice: both copies refused, as Kafka does.
    {
        use net::wire::kafka::{ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic};
        let partition = ListOffsetsPartition {
            index: 0,
            current_leader_epoch: -1,
            timestamp: t0,
        };
        let twice = ListOffsetsRequest {
            replica_id: -1,
            isolation_level: 0,
            topics: vec![ListOffsetsTopic {
                name: "__cluster_metadata".into(),
                partitions: vec![partition.clone(), partition],
            }],
        };
        let response = client.call_at(7, &twice).unwrap();
        let errors: Vec<ErrorCode> = response.topics[0]
            .partitions
            .iter()
            .map(|p| p.error)
            .collect();
        assert_eq!(errors, vec![ErrorCode::INVALID_REQUEST; 2]);
    }
    // Earliest and latest as before; another negative is no offset; a follower points away.
    let hw = client.describe_quorum().unwrap().high_watermark;
    assert_eq!(list_offset(&mut client, 7, -1).1, hw);
    assert_eq!(list_offset(&mut client, 7, -2).1, 0);
    assert_eq!(
        list_offset(&mut client, 7, -7).0,
        ErrorCode::INVALID_REQUEST
    );
    let follower = cluster.others(leader)[0];
    let mut to_follower = cluster.connect(follower, TIMEOUT);
    for target in [t0, MAX] {
        let (error, ..) = list_offset(&mut to_follower, 7, target);
        assert_eq!(error, ErrorCode::NOT_LEADER_OR_FOLLOWER, "{target}");
    }

    // kafka-python and confluent-kafka, through any node.
    let stamps: Vec<String> = targets.iter().map(i64::to_string).collect();
    let mut args = vec![script, &servers, "query"];
    args.extend(stamps.iter().map(String::as_str));
    let out = run(&python, &args).unwrap();
    let kp: Value = serde_json::from_str(out.trim()).unwrap();
    for target in &targets {
        let got = &kp["found"][target.to_string()];
        let want = first_at(*target).map(|(o, t)| serde_json::json!([o, t]));
        assert_eq!(
            got,
            &want.unwrap_or(Value::Null),
            "kafka-python {target}: {out}"
        );
    }
    assert_eq!(
        kp["max"],
        serde_json::json!([biggest.0, biggest.1]),
        "{out}"
    );
    let script = workspace().join("tools/tests/clients/timestamps_confluent.py");
    let mut args = vec![script.to_str().unwrap(), &servers];
    args.extend(stamps.iter().map(String::as_str));
    let out = run(&python, &args).unwrap();
    let ck: Value = serde_json::from_str(out.trim()).unwrap();
    for target in &targets {
        let want = first_at(*target).map_or(-1, |(o, _)| o);
        assert_eq!(
            ck["found"][target.to_string()],
            want,
            "confluent {target}: {out}"
        );
    }
    assert_eq!(
        ck["max"],
        serde_json::json!([biggest.0, biggest.1]),
        "{out}"
    );

    // Above the high watermark nothing counts: with the followers paused, a record durable on
    // the leader (acks=1) is neither found by its time nor the largest, until it is committed.
    let followers: Vec<i32> = cluster.others(leader);
    let pids = cluster.pids();
    let paused = Resume(
        pids.iter()
            .filter(|(id, _)| followers.contains(id))
            .map(|(_, pid)| *pid)
            .collect(),
    );
    assert_eq!(paused.0.len(), 2);
    for &pid in &paused.0 {
        // SAFETY: plain syscall on our own child's pid.
        unsafe { libc::kill(pid as i32, libc::SIGSTOP) };
    }
    let late = t0 + 1_000;
    let response = client
        .produce(9, 1, timestamped_batch(&[late], Compression::None))
        .unwrap()
        .unwrap();
    let late_offset = response.topics[0].partitions[0].base_offset;
    assert!(late_offset >= hw, "{response:?}");
    assert_eq!(
        list_offset(&mut client, 7, -1).1,
        hw,
        "the high watermark waits"
    );
    assert_eq!(
        list_offset(&mut client, 7, late - 1),
        (ErrorCode::NONE, -1, -1, -1)
    );
    let (_, offset, timestamp, _) = list_offset(&mut client, 7, MAX);
    assert_eq!((offset, timestamp), biggest, "the largest committed time");
    drop(paused); // SIGCONT: the followers fetch, the record is committed
    let deadline = Instant::now() + WAIT;
    while list_offset(&mut client, 7, -1).1 <= late_offset {
        assert!(
            Instant::now() < deadline,
            "the high watermark never passed {late_offset}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let (_, offset, timestamp, _) = list_offset(&mut client, 7, late - 1);
    assert_eq!((offset, timestamp), (late_offset, late));
    let (_, offset, timestamp, _) = list_offset(&mut client, 7, MAX);
    assert_eq!((offset, timestamp), (late_offset, late));
    drop((client, to_follower));
    cluster.stop_all_cleanly();
}

/// Kafka's MAX_TIMESTAMP (-3).
const MAX: i64 = net::wire::kafka::MAX_TIMESTAMP;

/// Sends SIGCONT to the paused processes when dropped, so that a failed assertion never leaves
/// a stopped process behind (the cluster's guards then kill them).
struct Resume(Vec<u32>);

impl Drop for Resume {
    fn drop(&mut self) {
        for &pid in &self.0 {
            // SAFETY: plain syscall on our own child's pid.
            unsafe { libc::kill(pid as i32, libc::SIGCONT) };
        }
    }
}

/// One request frame: `header` (v1 or v2 as `flexible`) then `body` as bytes, unchanged.
fn raw_frame(api_key: i16, api_version: i16, flexible: bool, body: &[u8]) -> Vec<u8> {
    let header = net::wire::RequestHeader {
        api_key,
        api_version,
        correlation_id: 7,
        client_id: Some("raw".into()),
    };
    let mut w = net::wire::WireWriter::with_capacity(64);
    w.i32(0);
    header.write(&mut w, flexible);
    let mut frame = w.into_inner().to_vec();
    frame.extend_from_slice(body);
    let size = (frame.len() - 4) as i32;
    frame[..4].copy_from_slice(&size.to_be_bytes());
    frame
}

/// Sends `frame` on `stream` and reads one response frame's body (None: the node closed).
fn exchange(stream: &mut std::net::TcpStream, frame: &[u8]) -> Option<bytes::Bytes> {
    use std::io::{Read, Write};
    stream.write_all(frame).ok()?;
    let mut size = [0u8; 4];
    stream.read_exact(&mut size).ok()?;
    let mut body = vec![0u8; i32::from_be_bytes(size) as usize];
    stream.read_exact(&mut body).ok()?;
    Some(bytes::Bytes::from(body))
}

/// Metadata for every topic (a null list; in v0 an empty one) lists `__cluster_metadata`, and
/// for no topic (an empty list, v1+) lists none, in every version the node advertises; and
/// librdkafka's own request for every topic (v12, captured from confluent-kafka 2.16, with
/// bytes after its last field: docs/clients.md) is answered on a connection that stays open.
#[test]
fn metadata_for_every_topic_and_for_none_is_answered_in_every_advertised_version() {
    use net::wire::kafka::METADATA_SPEC;
    let (mut cluster, leader) = Cluster::started(1);
    let mut client = cluster.connect(leader, TIMEOUT);
    for version in METADATA_SPEC.min_version..=METADATA_SPEC.max_version {
        let all = client
            .metadata(version, None)
            .unwrap_or_else(|e| panic!("v{version}, every topic: {e}"));
        let names: Vec<_> = all.topics.iter().map(|t| t.name.clone()).collect();
        assert_eq!(names, [Some("__cluster_metadata".to_owned())], "v{version}");
        assert_eq!(all.topics[0].partitions.len(), 1, "v{version}");
        assert_eq!(all.brokers.len(), 1, "v{version}");
        if version >= 1 {
            let none = client
                .metadata(version, Some(&[]))
                .unwrap_or_else(|e| panic!("v{version}, no topic: {e}"));
            assert!(none.topics.is_empty(), "v{version}: {none:?}");
            assert_eq!(none.brokers.len(), 1, "v{version}");
        }
    }
    drop(client);
    let mut stream = std::net::TcpStream::connect_timeout(&cluster.addr(leader), TIMEOUT).unwrap();
    stream.set_read_timeout(Some(TIMEOUT)).unwrap();
    let librdkafka_all_topics = raw_frame(3, 12, true, &[0, 0, 0, 0, 1, 0, 0]);
    for attempt in 0..2 {
        let body = exchange(&mut stream, &librdkafka_all_topics)
            .unwrap_or_else(|| panic!("attempt {attempt}: closed without an answer"));
        let mut r = net::wire::WireReader::new(body);
        let header = net::wire::ResponseHeader::read(&mut r, true).unwrap();
        assert_eq!(header.correlation_id, 7);
        let answer = MetadataResponse::decode(&mut r, 12).unwrap();
        assert_eq!(answer.topics.len(), 1, "{answer:?}");
        assert_eq!(answer.topics[0].name.as_deref(), Some("__cluster_metadata"));
    }
    drop(stream);
    cluster.stop_all_cleanly();
}

/// confluent-kafka's `AdminClient.list_topics()` (Metadata v12 for every topic) sees the topic.
#[test]
fn confluent_kafka_lists_every_topic() {
    let (mut cluster, leader) = Cluster::started(1);
    let script = workspace().join("tools/tests/clients/list_topics_confluent.py");
    let out = run(
        &venv_python(),
        &[script.to_str().unwrap(), &cluster.addr(leader).to_string()],
    )
    .unwrap_or_else(|e| panic!("{e}\n{}", cluster.stderr_tail(leader)));
    let json: Value = serde_json::from_str(out.trim()).unwrap_or_else(|e| panic!("{e}: {out}"));
    assert_eq!(json["topics"]["__cluster_metadata"], 1, "{out}");
    assert_eq!(json["brokers"], 1, "{out}");
    cluster.stop_all_cleanly();
}

/// A connection closed because of its request is logged: one warning naming the peer, the
/// api key and version and the reason; a client repeating it gets no more lines for a while.
#[test]
fn a_connection_closed_for_its_request_is_logged_once_per_reason_and_window() {
    let (mut cluster, leader) = Cluster::started(1);
    let addr = cluster.addr(leader);
    let mut locals = Vec::new();
    for _ in 0..5 {
        let mut stream = std::net::TcpStream::connect_timeout(&addr, TIMEOUT).unwrap();
        stream.set_read_timeout(Some(TIMEOUT)).unwrap();
        locals.push(stream.local_addr().unwrap());
        // EndTxn (26) is no API of ringraft's (no transactions).
        assert!(exchange(&mut stream, &raw_frame(26, 3, true, &[0, 0])).is_none());
    }
    // A Metadata v4 body cut short: the node has read the header, not the body.
    let mut stream = std::net::TcpStream::connect_timeout(&addr, TIMEOUT).unwrap();
    stream.set_read_timeout(Some(TIMEOUT)).unwrap();
    let bad_body_from = stream.local_addr().unwrap();
    assert!(exchange(&mut stream, &raw_frame(3, 4, false, &[0, 0])).is_none());
    // Stopped cleanly, the node has written everything it logged.
    cluster.stop_all_cleanly();
    let log = std::fs::read_to_string(cluster.stderr_path(leader)).unwrap();
    let closes: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("closed a connection because of its request"))
        .collect();
    let unknown: Vec<&&str> = closes
        .iter()
        .filter(|l| l.contains("unknown api key"))
        .collect();
    assert_eq!(unknown.len(), 1, "one line for five closes:\n{log}");
    assert!(
        unknown[0].contains(&locals[0].to_string())
            && unknown[0].contains("api_key=26")
            && unknown[0].contains("api_version=3")
            && unknown[0].contains("WARN"),
        "{}",
        unknown[0]
    );
    let bad: Vec<&&str> = closes
        .iter()
        .filter(|l| l.contains("bad Metadata body"))
        .collect();
    assert_eq!(bad.len(), 1, "{log}");
    assert!(
        bad[0].contains(&bad_body_from.to_string()) && bad[0].contains("api_key=3"),
        "{}",
        bad[0]
    );
}
