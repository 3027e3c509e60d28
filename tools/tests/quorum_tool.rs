//! `ringraft quorum describe --status | --replication` against real `ringraft serve` processes
//! on 127.0.0.1: Kafka's labels and columns with the values the leader reports, found through a
//! follower as the only bootstrap server, and through a cluster in an election (the tool waits
//! and retries up to its deadline, and says so when the deadline passes). Every wait is bounded
//! and every process is killed when its guard drops.

mod support;

use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use support::*;

const TIMEOUT: Duration = Duration::from_secs(10);

/// The labels of `describe --status`, in Kafka's order, then TargetVoters.
const STATUS_LABELS: [&str; 9] = [
    "ClusterId",
    "LeaderId",
    "LeaderEpoch",
    "HighWatermark",
    "MaxFollowerLag",
    "MaxFollowerLagTimeMs",
    "CurrentVoters",
    "CurrentObservers",
    "TargetVoters",
];

const REPLICATION_COLUMNS: [&str; 7] = [
    "NodeId",
    "DirectoryId",
    "LogEndOffset",
    "Lag",
    "LastFetchTimestamp",
    "LastCaughtUpTimestamp",
    "Status",
];

fn quorum(server: &str, args: &[&str]) -> Output {
    run_quorum_tool(server, args)
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

fn stdout(output: &Output) -> String {
    assert!(
        output.status.success(),
        "{}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout.clone()).unwrap()
}

/// `Label:   value` lines as (label, value), in order.
fn label_lines(text: &str) -> Vec<(String, String)> {
    text.lines()
        .map(|line| {
            let (label, value) = line.split_once(':').unwrap_or_else(|| panic!("{line:?}"));
            (label.to_string(), value.trim().to_string())
        })
        .collect()
}

fn value<'a>(lines: &'a [(String, String)], label: &str) -> &'a str {
    &lines.iter().find(|(l, _)| l == label).unwrap().1
}

#[test]
fn describe_through_a_follower_prints_kafkas_labels_with_the_leaders_values() {
    let (mut cluster, leader) = Cluster::started(3);
    let mut client = cluster.connect(leader, TIMEOUT);
    let last = produce_numbered(&mut client, "described-", 20)
        .last()
        .unwrap()
        .0;
    cluster.wait_for_voters_at(leader, last + 1);
    let epoch = client.describe_quorum().unwrap().leader_epoch;
    let follower = cluster.others(leader)[0];
    let server = cluster.addr(follower).to_string();

    let status = label_lines(&stdout(&quorum(&server, &["describe", "--status"])));
    let labels: Vec<&str> = status.iter().map(|(l, _)| l.as_str()).collect();
    assert_eq!(labels, STATUS_LABELS);
    assert_eq!(value(&status, "ClusterId"), CLUSTER_ID);
    assert_eq!(value(&status, "LeaderId"), leader.to_string());
    assert_eq!(value(&status, "LeaderEpoch"), epoch.to_string());
    let hw: i64 = value(&status, "HighWatermark").parse().unwrap();
    assert!(hw > last, "HighWatermark {hw}, last record at {last}");
    assert_eq!(value(&status, "MaxFollowerLag"), "0");
    assert_eq!(value(&status, "MaxFollowerLagTimeMs"), "0");
    assert_eq!(value(&status, "CurrentVoters"), "[1,2,3]");
    assert_eq!(value(&status, "CurrentObservers"), "[]");
    assert_eq!(value(&status, "TargetVoters"), "none");

    let json: serde_json::Value = serde_json::from_str(&stdout(&quorum(
        &server,
        &["describe", "--status", "--json"],
    )))
    .unwrap();
    assert_eq!(json["ClusterId"], CLUSTER_ID);
    assert_eq!(json["LeaderId"], leader);
    assert_eq!(json["LeaderEpoch"], epoch);
    assert_eq!(json["CurrentVoters"], serde_json::json!([1, 2, 3]));
    assert_eq!(json["TargetVoters"], serde_json::Value::Null);
    assert!(json["HighWatermark"].as_i64().unwrap() > last);

    let table = stdout(&quorum(&server, &["describe", "--replication"]));
    let rows: Vec<Vec<&str>> = table
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(rows[0], REPLICATION_COLUMNS, "{table}");
    assert_eq!(rows.len(), 4, "{table}");
    // Leader first, then the followers; every voter at the leader's log end (lag 0).
    assert_eq!(rows[1][0], leader.to_string());
    let statuses: Vec<&str> = rows[1..].iter().map(|r| *r.last().unwrap()).collect();
    assert_eq!(statuses, ["Leader", "Follower", "Follower"]);
    // Each DirectoryId is the node's log directory's, as its quorum-state file keeps it (the
    // followers' come with their fetches).
    for row in &rows[1..] {
        let id: i32 = row[0].parse().unwrap();
        let state = std::fs::read_to_string(cluster.node(id).dir.join("quorum-state")).unwrap();
        let stored: serde_json::Value = serde_json::from_str(&state).unwrap();
        let directory_id = stored["directoryId"].as_str().unwrap();
        assert_eq!(row[1], directory_id, "node {id}: {table}\n{state}");
        assert_ne!(directory_id, "AAAAAAAAAAAAAAAAAAAAAA");
    }
    let json: serde_json::Value = serde_json::from_str(&stdout(&quorum(
        &server,
        &["describe", "--replication", "--json"],
    )))
    .unwrap();
    let replicas = json.as_array().unwrap();
    assert_eq!(replicas.len(), 3);
    let leader_end = replicas[0]["LogEndOffset"].as_i64().unwrap();
    assert!(leader_end > last, "{json}");
    for replica in replicas {
        assert_eq!(replica["Lag"], 0, "{json}");
        assert_eq!(replica["LogEndOffset"], leader_end, "{json}");
        // Wall-clock times, as Kafka's: within a minute of this test's clock.
        let fetched = replica["LastFetchTimestamp"].as_i64().unwrap();
        assert!((fetched - now_ms()).abs() < 60_000, "{json}");
        for column in REPLICATION_COLUMNS {
            assert!(replica.get(column).is_some(), "{column} missing: {json}");
        }
    }
    let human = stdout(&quorum(
        &server,
        &["describe", "--replication", "--human-readable"],
    ));
    let follower_row = human
        .lines()
        .find(|l| l.trim_end().ends_with("Follower"))
        .unwrap();
    assert!(follower_row.contains(" ms ago"), "{human}");

    // The first form still works, and names the leader.
    let legacy = stdout(&quorum(&server, &["--describe"]));
    assert!(
        legacy.starts_with(&format!("leader: {leader}  epoch: {epoch}")),
        "{legacy}"
    );
    drop(client);
    cluster.stop_all();
}

#[test]
fn describe_waits_through_an_election_and_says_when_its_deadline_passed() {
    let mut cluster = Cluster::new(3);
    // Node 1 alone cannot be elected: the quorum is in an election until another voter starts.
    cluster.start(1, &[]);
    let server = cluster.addr(1).to_string();
    let started = Instant::now();
    let refused = quorum(&server, &["describe", "--status", "--timeout-ms", "1500"]);
    let waited = started.elapsed();
    assert!(!refused.status.success());
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(stderr.contains("no leader answered within"), "{stderr}");
    assert!(
        waited >= Duration::from_millis(1000) && waited < Duration::from_secs(8),
        "gave up after {waited:?} with --timeout-ms 1500"
    );

    // Asked again with time to wait, the tool waits for the election the other voters end.
    let mut waiting = ProcessGuard {
        child: Command::new(binary())
            .args(["quorum", "--bootstrap-server", &server])
            .args(["describe", "--status", "--timeout-ms", "30000"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    };
    std::thread::sleep(Duration::from_secs(2));
    assert!(
        waiting.exited().is_none(),
        "the tool did not wait for a leader"
    );
    cluster.start(2, &[]);
    cluster.start(3, &[]);
    let status = waiting
        .wait_exit(WAIT)
        .expect("the tool answered once a leader was elected");
    let mut text = String::new();
    std::io::Read::read_to_string(waiting.child.stdout.as_mut().unwrap(), &mut text).unwrap();
    assert!(
        status.success(),
        "{status}: {text}{}",
        read_stderr(&mut waiting)
    );
    let lines = label_lines(&text);
    let leader: i32 = value(&lines, "LeaderId").parse().unwrap();
    assert!((1..=3).contains(&leader), "{text}");
    assert_eq!(leader, cluster.wait_for_leader(None));
    cluster.stop_all();
}

#[test]
fn describe_needs_one_of_status_and_replication() {
    let output = quorum("127.0.0.1:1", &["describe"]);
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("--status") && stderr.contains("--replication"),
        "{stderr}"
    );
}
