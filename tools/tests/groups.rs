//! Consumer groups with real, unmodified clients (docs/clients.md, "Consumer groups"):
//! kafka-python 3 subscribes in a group, commits and reads its committed offset back, and a
//! second run of the group after the leader is SIGKILLed resumes exactly at that offset (the
//! offset record was committed through the log, so the new leader rebuilt it). The clients
//! come from `.ci/install-clients.sh` (a venv at target/venv); a missing one fails the test
//! with that hint. GROUP ACLs and NOT_COORDINATOR on followers are checked with the project's
//! own client. Every wait is bounded; every process is killed when its guard drops.

mod support;

use std::process::Command;
use std::time::{Duration, Instant};

use engine::raft::ErrorCode;
use net::wire::kafka::{
    DeleteGroupsRequest, DescribeGroupsRequest, ListGroupsRequest, OffsetDeleteRequest,
};
use net::wire::kafka::{
    FindCoordinatorRequest, JoinGroupProtocol, JoinGroupRequest, OffsetCommitPartition,
    OffsetCommitRequest, OffsetFetchGroup, OffsetFetchRequest, Topic, KEY_TYPE_GROUP,
};
use serde_json::Value;
use support::clients::{venv_python, workspace};
use support::*;

/// Every script run is bounded by this.
const SCRIPT_LIMIT: Duration = Duration::from_secs(90);

/// Runs `script MODE SERVERS N NAME` from the venv to its end (bounded), returning its JSON
/// event lines; a script that fails or overruns fails the test with its stderr.
fn run_script(script: &str, cluster: &Cluster, args: [&str; 3]) -> Vec<Value> {
    let servers: Vec<String> = [1, 2, 3]
        .iter()
        .map(|&id| cluster.addr(id).to_string())
        .collect();
    let stderr_path = cluster
        .root
        .path()
        .join(format!("{script}-{}-{}.stderr", args[0], args[2]));
    let mut command = Command::new(venv_python());
    command
        .arg(workspace().join("tools/tests/clients").join(script))
        .arg(args[0])
        .arg(servers.join(","))
        .arg(args[1])
        .arg(args[2])
        .stdout(std::process::Stdio::piped())
        .stderr(std::fs::File::create(&stderr_path).unwrap());
    testkit::kill_with_parent(&mut command);
    let child = command.spawn().unwrap_or_else(|e| {
        panic!(
            "{}: {e} (run .ci/install-clients.sh)",
            venv_python().display()
        )
    });
    let mut guard = ProcessGuard { child };
    let deadline = Instant::now() + SCRIPT_LIMIT;
    let status = loop {
        if let Some(status) = guard.child.try_wait().unwrap() {
            break Some(status);
        }
        if Instant::now() > deadline {
            break None;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let mut out = String::new();
    use std::io::Read;
    if status.is_some() {
        guard
            .child
            .stdout
            .take()
            .unwrap()
            .read_to_string(&mut out)
            .unwrap();
    }
    let stderr = std::fs::read_to_string(&stderr_path).unwrap_or_default();
    assert!(
        status.is_some_and(|s| s.success()),
        "{script} {args:?}: {status:?}\nstdout:\n{out}\nstderr:\n{stderr}"
    );
    out.lines()
        .filter_map(|line| serde_json::from_str(line).ok())
        .collect()
}

/// The offsets of the `consumed` events.
fn consumed(events: &[Value]) -> Vec<i64> {
    events
        .iter()
        .filter_map(|e| e.get("consumed"))
        .map(|c| c[0].as_i64().unwrap())
        .collect()
}

fn field(events: &[Value], name: &str) -> Value {
    events
        .iter()
        .find_map(|e| e.get(name).cloned())
        .unwrap_or_else(|| panic!("no {name} in {events:?}"))
}

/// kafka-python: produce 100 records; a group member reads 40 and commits after each poll;
/// the leader is SIGKILLed and another elected; the group's next member finds the committed
/// offset (`committed()`) and reads the other 60 from exactly there, nothing skipped.
#[test]
fn kafka_python_group_commits_survive_a_leader_kill() {
    let (mut cluster, leader) = Cluster::started(3);
    let produced = run_script("group_kafka_python.py", &cluster, ["produce", "100", "kpg"]);
    let acked: Vec<i64> = produced
        .iter()
        .filter_map(|e| e.get("acked"))
        .map(|a| a[0].as_i64().unwrap())
        .collect();
    assert_eq!(acked.len(), 100);
    let first = run_script("group_kafka_python.py", &cluster, ["consume", "40", "g-kp"]);
    assert_eq!(
        field(&first, "committed_before"),
        Value::Null,
        "a new group"
    );
    let read = consumed(&first);
    assert_eq!(read, acked[..40], "the first member reads from the start");
    let committed = field(&first, "committed_after").as_i64().unwrap();
    assert_eq!(committed, acked[39] + 1);
    cluster.node(leader).process.take(); // SIGKILL via the guard
    let successor = cluster.wait_for_leader(Some(leader));
    assert_ne!(successor, leader);
    let second = run_script("group_kafka_python.py", &cluster, ["consume", "60", "g-kp"]);
    assert_eq!(
        field(&second, "committed_before").as_i64(),
        Some(committed),
        "the new leader has the committed offset"
    );
    assert_eq!(consumed(&second), acked[40..], "resumed exactly there");
    let after = field(&second, "committed_after").as_i64().unwrap();
    assert_eq!(after, acked[99] + 1);
}

/// confluent-kafka (librdkafka): its producer asked for lz4 writes lz4 batches (librdkafka
/// compresses only for a broker it takes for new enough, which the group APIs make it), a
/// group consumer gets an assignment, each synchronous commit() returns, and a second member
/// of the group resumes after the last commit.
#[test]
fn confluent_kafka_group_gets_an_assignment_and_commits() {
    let (mut cluster, _) = Cluster::started(3);
    let produced = run_script("group_confluent.py", &cluster, ["produce", "30", "ckg"]);
    let mut acked: Vec<i64> = produced
        .iter()
        .filter_map(|e| e.get("acked"))
        .map(|a| a[0].as_i64().unwrap())
        .collect();
    acked.sort_unstable();
    assert_eq!(acked.len(), 30);
    let first = run_script("group_confluent.py", &cluster, ["consume", "10", "g-ck"]);
    assert_eq!(field(&first, "assigned"), serde_json::json!([0]));
    assert_eq!(consumed(&first), acked[..10]);
    let commits: Vec<i64> = first
        .iter()
        .filter_map(|e| e.get("committed"))
        .map(|c| c.as_i64().unwrap())
        .collect();
    assert_eq!(commits.len(), 10, "every commit() returned");
    assert_eq!(
        field(&first, "committed_after").as_i64(),
        Some(acked[9] + 1)
    );
    let second = run_script("group_confluent.py", &cluster, ["consume", "20", "g-ck"]);
    assert_eq!(consumed(&second), acked[10..]);
    cluster.stop_all_cleanly();
    let compressions: Vec<engine::record::compression::Compression> =
        read_batches(&cluster.nodes[0].dir)
            .iter()
            .filter(|b| !b.is_control())
            .map(|b| b.compression())
            .collect();
    assert!(
        !compressions.is_empty()
            && compressions
                .iter()
                .all(|c| *c == engine::record::compression::Compression::Lz4),
        "every data batch lz4: {compressions:?}"
    );
}

/// kcat -G (librdkafka 2.0's balanced consumer, auto-commit): reads in a group, commits on
/// exit, and the group's next run goes on from there.
#[test]
fn kcat_balanced_consumer_reads_and_resumes() {
    let (cluster, _) = Cluster::started(3);
    let produced = run_script("group_kafka_python.py", &cluster, ["produce", "30", "kcg"]);
    let acked: Vec<i64> = produced
        .iter()
        .filter_map(|e| e.get("acked"))
        .map(|a| a[0].as_i64().unwrap())
        .collect();
    let servers: Vec<String> = [1, 2, 3]
        .iter()
        .map(|&id| cluster.addr(id).to_string())
        .collect();
    let kcat_group = |count: usize| -> Vec<i64> {
        let out = Command::new("timeout")
            .args(["60", support::clients::kcat().to_str().unwrap()])
            .args([
                "-b",
                &servers.join(","),
                "-G",
                "g-kcat",
                "__cluster_metadata",
            ])
            .args(["-X", "auto.offset.reset=earliest", "-q", "-f", "%o\\n"])
            .args(["-c", &count.to_string()])
            .output()
            .expect("kcat runs (run .ci/install-clients.sh)");
        assert!(
            out.status.success(),
            "kcat -G: {}: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| l.trim().parse().ok())
            .collect()
    };
    assert_eq!(kcat_group(12), acked[..12]);
    assert_eq!(kcat_group(18), acked[12..]);
}

fn commit_request(group: &str, offset: i64) -> OffsetCommitRequest {
    OffsetCommitRequest {
        group_id: group.into(),
        generation_id: -1,
        member_id: String::new(),
        group_instance_id: None,
        retention_time_ms: -1,
        topics: vec![Topic {
            name: "__cluster_metadata".into(),
            partitions: vec![OffsetCommitPartition {
                partition: 0,
                committed_offset: offset,
                committed_leader_epoch: -1,
                committed_metadata: Some("m".into()),
            }],
        }],
    }
}

/// Asks `request` of whichever node leads until the answer is not one a client retries
/// (a follower's NOT_COORDINATOR, a new leader's COORDINATOR_LOAD_IN_PROGRESS), bounded.
fn on_the_coordinator<R: net::client::ClientRequest>(
    cluster: &mut Cluster,
    version: i16,
    request: &R,
    error_of: impl Fn(&R::Response) -> ErrorCode,
) -> R::Response {
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut slot = None;
    loop {
        assert!(Instant::now() < deadline, "no coordinator answered");
        let Some(client) = leader_client(cluster, &mut slot) else {
            continue;
        };
        match client.call_at(version, request) {
            Ok(answer) => match error_of(&answer) {
                ErrorCode::NOT_COORDINATOR | ErrorCode::COORDINATOR_LOAD_IN_PROGRESS => {
                    slot = None;
                    std::thread::sleep(Duration::from_millis(100));
                }
                _ => return answer,
            },
            Err(_) => slot = None,
        }
    }
}

/// A group's committed offset outlives the segment that held its record: retention deletes
/// that segment on every node, every node is SIGKILLed and started again, and the new leader
/// still answers OffsetFetch with the offset. The producer-state snapshot keeps the committed
/// offsets, and retention never passes the newest written one (docs/storage.md, "Committed
/// offsets"); before it did, the offset was lost with its segment.
#[test]
fn a_committed_offset_outlives_its_records_segment_and_a_restart_of_every_node() {
    let mut cluster = Cluster::new_with(3, |s| {
        s.segment_bytes = Some(1 << 20);
        s.overrides = vec![
            "retention.bytes=2097152".to_string(),
            "log.retention.check.interval.ms=200".to_string(),
        ];
    });
    cluster.start_all();
    let committed = on_the_coordinator(&mut cluster, 8, &commit_request("keep", 4242), |r| {
        r.topics[0].partitions[0].error
    });
    assert_eq!(committed.topics[0].partitions[0].error, ErrorCode::NONE);
    // Records of 30 KB, about 34 to a segment, until every node's log starts past the record
    // acknowledged after the commit (so past the commit's record).
    let value = "r".repeat(30_000);
    let mut slot = None;
    let mut after_commit = None;
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut produced = 0;
    loop {
        let starts: Vec<i64> = [1, 2, 3]
            .iter()
            .map(|&id| {
                segment_bases(&log_dir(&cluster, id))
                    .first()
                    .copied()
                    .unwrap_or(0)
            })
            .collect();
        if after_commit.is_some_and(|a| starts.iter().all(|&s| s > a)) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "log starts {starts:?} never all passed {after_commit:?} ({produced} produced)"
        );
        for _ in 0..10 {
            let Some(client) = leader_client(&mut cluster, &mut slot) else {
                continue;
            };
            match produce_one(client, &value) {
                Ok(offset) => {
                    after_commit.get_or_insert(offset);
                    produced += 1;
                }
                Err(_) => slot = None,
            }
        }
    }
    drop(slot);
    for id in [1, 2, 3] {
        cluster.node(id).process.take(); // SIGKILL via the guard
    }
    cluster.start_all();
    let fetch = OffsetFetchRequest {
        groups: vec![OffsetFetchGroup {
            group_id: "keep".into(),
            member_id: None,
            member_epoch: -1,
            topics: None,
        }],
        require_stable: true,
    };
    let fetched = on_the_coordinator(&mut cluster, 8, &fetch, |r| r.groups[0].error);
    assert_eq!(fetched.groups[0].error, ErrorCode::NONE);
    let offset = fetched.groups[0]
        .topics
        .first()
        .map(|t| t.partitions[0].committed_offset);
    assert_eq!(
        offset,
        Some(4242),
        "the offset whose record retention deleted, after {produced} records: {fetched:?}"
    );
}

/// GROUP ACLs, fail-closed: with READ and DESCRIBE on `group:ok` only, FindCoordinator,
/// JoinGroup, OffsetCommit and OffsetFetch on `ok` go through and on `no` are refused
/// GROUP_AUTHORIZATION_FAILED; a follower answers NOT_COORDINATOR and its FindCoordinator
/// names the leader.
#[test]
fn group_acls_admit_the_named_group_only_and_followers_point_to_the_leader() {
    let mut cluster = Cluster::new(3);
    let acls = cluster.root.path().join("acls.txt");
    std::fs::write(
        &acls,
        "allow User:ANONYMOUS CLUSTER_ACTION cluster:kafka-cluster from *\n\
         allow User:ANONYMOUS DESCRIBE cluster:kafka-cluster from *\n\
         allow User:ANONYMOUS READ topic:__cluster_metadata from *\n\
         allow User:ANONYMOUS DESCRIBE topic:__cluster_metadata from *\n\
         allow User:ANONYMOUS READ group:ok from *\n\
         allow User:ANONYMOUS DESCRIBE group:ok from *\n",
    )
    .unwrap();
    let acl_file = format!("authorizer.acl.file={}", acls.display());
    for id in 1..=3 {
        cluster.start(id, &[&acl_file]);
    }
    let leader = cluster.wait_for_leader(None);
    let mut client = cluster.connect(leader, Duration::from_secs(10));
    // FindCoordinator v4, both keys; the leader names itself once it lists its endpoint.
    let deadline = Instant::now() + Duration::from_secs(20);
    let find = |client: &mut net::client::BlockingClient| {
        let request = FindCoordinatorRequest {
            keys: vec!["ok".into(), "no".into()],
            key_type: KEY_TYPE_GROUP,
        };
        client.call_at(4, &request).unwrap()
    };
    let mut found = find(&mut client);
    while found.coordinators[0].error != ErrorCode::NONE && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
        found = find(&mut client);
    }
    assert_eq!(found.coordinators[0].error, ErrorCode::NONE, "{found:?}");
    assert_eq!(found.coordinators[0].node_id, leader);
    assert_eq!(
        found.coordinators[1].error,
        ErrorCode::GROUP_AUTHORIZATION_FAILED
    );
    // JoinGroup v5: `ok` is admitted (and handed a member id), `no` refused.
    let join = |group: &str| JoinGroupRequest {
        group_id: group.into(),
        session_timeout_ms: 10_000,
        rebalance_timeout_ms: 10_000,
        member_id: String::new(),
        group_instance_id: None,
        protocol_type: "consumer".into(),
        protocols: vec![JoinGroupProtocol {
            name: "range".into(),
            metadata: bytes::Bytes::from_static(b"m"),
        }],
        reason: None,
    };
    // A new leader answers COORDINATOR_LOAD_IN_PROGRESS until its epoch commits.
    let mut joined = client.call_at(5, &join("ok")).unwrap();
    while joined.error == ErrorCode::COORDINATOR_LOAD_IN_PROGRESS && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
        joined = client.call_at(5, &join("ok")).unwrap();
    }
    assert_eq!(joined.error, ErrorCode::MEMBER_ID_REQUIRED, "{joined:?}");
    assert!(!joined.member_id.is_empty());
    let refused = client.call_at(5, &join("no")).unwrap();
    assert_eq!(refused.error, ErrorCode::GROUP_AUTHORIZATION_FAILED);
    // OffsetCommit v8 outside any membership, then OffsetFetch v8 of both groups.
    let committed = client.call_at(8, &commit_request("ok", 5)).unwrap();
    assert_eq!(committed.topics[0].partitions[0].error, ErrorCode::NONE);
    let refused = client.call_at(8, &commit_request("no", 5)).unwrap();
    assert_eq!(
        refused.topics[0].partitions[0].error,
        ErrorCode::GROUP_AUTHORIZATION_FAILED
    );
    let fetch = OffsetFetchRequest {
        groups: ["ok", "no"]
            .iter()
            .map(|g| OffsetFetchGroup {
                group_id: g.to_string(),
                member_id: None,
                member_epoch: -1,
                topics: None,
            })
            .collect(),
        require_stable: true,
    };
    let fetched = client.call_at(8, &fetch).unwrap();
    assert_eq!(fetched.groups[0].error, ErrorCode::NONE);
    assert_eq!(
        fetched.groups[0].topics[0].partitions[0].committed_offset,
        5
    );
    assert_eq!(
        fetched.groups[1].error,
        ErrorCode::GROUP_AUTHORIZATION_FAILED
    );
    // A follower: NOT_COORDINATOR for the group APIs, and it points to the leader.
    let follower = (1..=3).find(|&id| id != leader).unwrap();
    let mut other = cluster.connect(follower, Duration::from_secs(10));
    let not_here = other.call_at(8, &commit_request("ok", 6)).unwrap();
    assert_eq!(
        not_here.topics[0].partitions[0].error,
        ErrorCode::NOT_COORDINATOR
    );
    let mut found = find(&mut other);
    while found.coordinators[0].node_id != leader && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
        found = find(&mut other);
    }
    assert_eq!(found.coordinators[0].node_id, leader, "{found:?}");
    drop((client, other));
    cluster.stop_all_cleanly();
}

/// ListGroups, DescribeGroups, OffsetDelete and DeleteGroups through the project's client: a
/// group with only committed offsets is listed Empty, its offset deleted and then the group;
/// a group with a member is described with it and refuses deletion (NON_EMPTY_GROUP).
#[test]
fn groups_are_listed_described_and_deleted() {
    let (cluster, leader) = Cluster::started(3);
    let mut client = cluster.connect(leader, Duration::from_secs(15));
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut committed = client.call_at(8, &commit_request("adm", 7)).unwrap();
    while committed.topics[0].partitions[0].error == ErrorCode::COORDINATOR_LOAD_IN_PROGRESS
        && Instant::now() < deadline
    {
        std::thread::sleep(Duration::from_millis(100));
        committed = client.call_at(8, &commit_request("adm", 7)).unwrap();
    }
    assert_eq!(committed.topics[0].partitions[0].error, ErrorCode::NONE);
    // A member in group "busy" (JoinGroup v3: no MEMBER_ID_REQUIRED round; answered after the
    // initial rebalance delay).
    let joined = client
        .call_at(
            3,
            &JoinGroupRequest {
                group_id: "busy".into(),
                session_timeout_ms: 30_000,
                rebalance_timeout_ms: 30_000,
                member_id: String::new(),
                group_instance_id: None,
                protocol_type: "consumer".into(),
                protocols: vec![JoinGroupProtocol {
                    name: "range".into(),
                    metadata: bytes::Bytes::from_static(b"m"),
                }],
                reason: None,
            },
        )
        .unwrap();
    assert_eq!(joined.error, ErrorCode::NONE, "{joined:?}");
    assert_eq!(joined.leader, joined.member_id);
    let list = |client: &mut net::client::BlockingClient| -> Vec<(String, String)> {
        let request = ListGroupsRequest {
            states_filter: vec![],
            types_filter: vec![],
        };
        let listed = client.call_at(4, &request).unwrap();
        assert_eq!(listed.error, ErrorCode::NONE);
        listed
            .groups
            .into_iter()
            .map(|g| (g.group_id, g.group_state))
            .collect()
    };
    assert_eq!(
        list(&mut client),
        [
            ("adm".to_string(), "Empty".to_string()),
            ("busy".to_string(), "CompletingRebalance".to_string())
        ]
    );
    let described = client
        .call_at(
            5,
            &DescribeGroupsRequest {
                groups: vec!["busy".into(), "adm".into(), "nope".into()],
                include_authorized_operations: false,
            },
        )
        .unwrap();
    let busy = &described.groups[0];
    assert_eq!(
        (busy.error, busy.group_state.as_str()),
        (ErrorCode::NONE, "CompletingRebalance")
    );
    assert_eq!(busy.protocol_data, "range");
    assert_eq!(busy.members[0].member_id, joined.member_id);
    assert_eq!(described.groups[1].group_state, "Empty");
    assert_eq!(described.groups[2].group_state, "Dead");
    // OffsetDelete of adm's offset, then the group itself; busy keeps its member.
    let deleted = client
        .call_at(
            0,
            &OffsetDeleteRequest {
                group_id: "adm".into(),
                topics: vec![Topic {
                    name: "__cluster_metadata".into(),
                    partitions: vec![0],
                }],
            },
        )
        .unwrap();
    assert_eq!(deleted.error, ErrorCode::NONE);
    assert_eq!(deleted.topics[0].partitions[0], (0, ErrorCode::NONE));
    client.call_at(8, &commit_request("adm", 9)).unwrap();
    let deleted = client
        .call_at(
            2,
            &DeleteGroupsRequest {
                groups: vec!["adm".into(), "busy".into(), "nope".into()],
            },
        )
        .unwrap();
    assert_eq!(
        deleted.results,
        [
            ("adm".to_string(), ErrorCode::NONE),
            ("busy".to_string(), ErrorCode::NON_EMPTY_GROUP),
            ("nope".to_string(), ErrorCode::GROUP_ID_NOT_FOUND),
        ]
    );
    assert_eq!(
        list(&mut client),
        [("busy".to_string(), "CompletingRebalance".to_string())]
    );
}

/// Starts `script MODE SERVERS N NAME` from the venv; its JSON lines arrive on the channel as
/// they are printed. The guard kills it.
fn start_script(
    script: &str,
    cluster: &Cluster,
    args: [&str; 3],
) -> (ProcessGuard, std::sync::mpsc::Receiver<Value>) {
    use std::io::BufRead;
    let servers: Vec<String> = [1, 2, 3]
        .iter()
        .map(|&id| cluster.addr(id).to_string())
        .collect();
    let stderr_path = cluster.root.path().join(format!(
        "{script}-{}-{}-{}.stderr",
        args[0], args[1], args[2]
    ));
    let mut command = Command::new(venv_python());
    command
        .arg(workspace().join("tools/tests/clients").join(script))
        .arg(args[0])
        .arg(servers.join(","))
        .arg(args[1])
        .arg(args[2])
        .stdout(std::process::Stdio::piped())
        .stderr(std::fs::File::create(&stderr_path).unwrap());
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

/// The next assignment `rx` reports within `limit` (None: none came).
fn next_assignment(rx: &std::sync::mpsc::Receiver<Value>, limit: Duration) -> Option<Value> {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if let Ok(event) = rx.recv_timeout(Duration::from_millis(200)) {
            if let Some(assigned) = event.get("assigned") {
                return Some(assigned.clone());
            }
        }
    }
    None
}

/// Two kafka-python members of one group: the first takes the partition; when the second
/// joins, the group rebalances and exactly one of them holds it; when the holder is SIGKILLed
/// (no LeaveGroup), its session times out and the other gets the partition.
#[test]
fn two_kafka_python_members_rebalance_when_one_joins_and_when_one_dies() {
    let (cluster, _) = Cluster::started(3);
    let limit = Duration::from_secs(40);
    let (a_guard, a) = start_script("group_kafka_python.py", &cluster, ["member", "80", "g-two"]);
    assert_eq!(next_assignment(&a, limit), Some(serde_json::json!([0])));
    let (b_guard, b) = start_script("group_kafka_python.py", &cluster, ["member", "80", "g-two"]);
    let (Some(a_second), Some(b_first)) = (next_assignment(&a, limit), next_assignment(&b, limit))
    else {
        panic!("no rebalance when the second member joined");
    };
    let holds = |assigned: &Value| *assigned == serde_json::json!([0]);
    assert!(
        holds(&a_second) != holds(&b_first),
        "exactly one holder: a {a_second}, b {b_first}"
    );
    // The holder dies; the survivor's next assignment (after the 10 s session) has it.
    let survivor = if holds(&a_second) {
        drop(a_guard);
        b
    } else {
        drop(b_guard);
        a
    };
    assert_eq!(
        next_assignment(&survivor, limit),
        Some(serde_json::json!([0])),
        "the survivor takes the partition"
    );
}

/// kafkajs 2 (node, installed by .ci/install-clients.sh under target/node): a group consumer
/// reads, commits as it goes and on disconnect, and the group's next run resumes after what
/// the first consumed.
#[test]
fn kafkajs_group_reads_commits_and_resumes() {
    let (cluster, _) = Cluster::started(3);
    let produced = run_script("group_kafka_python.py", &cluster, ["produce", "30", "kjg"]);
    let acked: Vec<i64> = produced
        .iter()
        .filter_map(|e| e.get("acked"))
        .map(|a| a[0].as_i64().unwrap())
        .collect();
    let servers: Vec<String> = [1, 2, 3]
        .iter()
        .map(|&id| cluster.addr(id).to_string())
        .collect();
    let modules = workspace().join("target/node/node_modules");
    assert!(
        modules.join("kafkajs").exists(),
        "{} has no kafkajs: run .ci/install-clients.sh",
        modules.display()
    );
    let run = |take: usize| -> Vec<i64> {
        let out = Command::new("timeout")
            .args(["90", "node"])
            .arg(workspace().join("tools/tests/clients/group_kafkajs.js"))
            .args(["consume", &servers.join(","), &take.to_string(), "g-kj"])
            .env("NODE_PATH", &modules)
            .output()
            .expect("node runs (run .ci/install-clients.sh)");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "kafkajs: {}\n{stdout}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        let events: Vec<Value> = stdout
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect();
        consumed(&events)
    };
    assert_eq!(run(12), acked[..12]);
    assert_eq!(run(18), acked[12..]);
}

/// confluent-kafka's AdminClient: list_consumer_groups lists a group that has only committed
/// offsets (Empty), describe_consumer_groups describes it, delete_consumer_groups deletes it.
#[test]
fn confluent_admin_client_lists_describes_and_deletes_a_group() {
    let (cluster, leader) = Cluster::started(3);
    let mut client = cluster.connect(leader, Duration::from_secs(15));
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut committed = client.call_at(8, &commit_request("g-admin", 3)).unwrap();
    while committed.topics[0].partitions[0].error == ErrorCode::COORDINATOR_LOAD_IN_PROGRESS
        && Instant::now() < deadline
    {
        std::thread::sleep(Duration::from_millis(100));
        committed = client.call_at(8, &commit_request("g-admin", 3)).unwrap();
    }
    assert_eq!(committed.topics[0].partitions[0].error, ErrorCode::NONE);
    let events = run_script(
        "group_admin_confluent.py",
        &cluster,
        ["list", "x", "g-admin"],
    );
    assert_eq!(
        field(&events, "listed"),
        serde_json::json!([["g-admin", "EMPTY"]])
    );
    assert_eq!(
        field(&events, "described"),
        serde_json::json!(["g-admin", "EMPTY", 0])
    );
    assert_eq!(field(&events, "deleted"), serde_json::json!("g-admin"));
}
