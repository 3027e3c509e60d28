//! AlterQuorum is guarded by ALTER on the CLUSTER (docs/security.md, "Principals and ACLs"):
//! real `ringraft serve` processes on 127.0.0.1 with an ACL file that lets User:ANONYMOUS (every
//! PLAINTEXT connection) run the quorum and describe the cluster, but not alter it. Its
//! AlterQuorum is refused with CLUSTER_AUTHORIZATION_FAILED by the leader and the followers
//! alike, before the core sees it; once ALTER is granted (the ACL file reloaded on SIGHUP) the
//! same request gets past the authorizer. Every wait is bounded.

mod support;

use std::time::{Duration, Instant};

use support::clients::run_bounded;

use engine::base::ids::DirectoryId;
use engine::raft::{AlterQuorumRequest, AlterQuorumVoter, ErrorCode, Request, Response};
use support::*;

const TIMEOUT: Duration = Duration::from_secs(10);

const ACLS_WITHOUT_ALTER: &str = "\
allow User:ANONYMOUS CLUSTER_ACTION cluster:kafka-cluster from *
allow User:ANONYMOUS DESCRIBE cluster:kafka-cluster from *
";

fn alter_quorum(validate_only: bool) -> Request {
    Request::AlterQuorum(AlterQuorumRequest {
        cluster_id: CLUSTER_ID.into(),
        target_voters: (1..=3)
            .map(|voter_id| AlterQuorumVoter {
                voter_id,
                directory_id: DirectoryId::ZERO,
            })
            .collect(),
        timeout_ms: 1000,
        validate_only,
        force: false,
    })
}

fn alter_error(cluster: &Cluster, id: i32) -> ErrorCode {
    match send_raw_request(cluster.addr(id), &alter_quorum(true), TIMEOUT) {
        Ok(Response::AlterQuorum(r)) => r.error,
        other => panic!("node {id}: {other:?}"),
    }
}

#[test]
fn alter_quorum_without_alter_on_the_cluster_gets_cluster_authorization_failed() {
    let mut cluster = Cluster::new(3);
    let acls = cluster.root.path().join("acls.txt");
    std::fs::write(&acls, ACLS_WITHOUT_ALTER).unwrap();
    let acl_file = format!("authorizer.acl.file={}", acls.display());
    for id in 1..=3 {
        cluster.start(id, &[&acl_file, "allow.everyone.if.no.acl.found=true"]);
    }
    let leader = cluster.wait_for_leader(None);
    let mut client = cluster.connect(leader, TIMEOUT);
    let offset = produce_one(&mut client, "before the refused AlterQuorum").unwrap();
    // Every node is up and replicating before each is asked: a majority elects and commits
    // while the third may still be starting (it would refuse the connection).
    cluster.wait_for_voters_at(leader, offset + 1);
    for id in 1..=3 {
        assert_eq!(
            alter_error(&cluster, id),
            ErrorCode::CLUSTER_AUTHORIZATION_FAILED,
            "node {id} (leader {leader})"
        );
    }
    // The operator's tool fails, naming the error, instead of retrying the refusal until its
    // deadline: with a deadline of ten minutes it exits 1 on its own. (The bound only keeps the
    // test from hanging: a tool that retried would be killed by it, exit 124.)
    let servers: Vec<String> = cluster.nodes.iter().map(|n| n.addr.to_string()).collect();
    let servers = servers.join(",");
    let args = [
        "quorum",
        "--bootstrap-server",
        &servers,
        "--timeout-ms",
        "600000",
        "reassign",
        "--voters",
        "1,2,3",
    ];
    let tool = run_bounded(binary().as_ref(), &args, b"", Duration::from_secs(120));
    let stderr = String::from_utf8_lossy(&tool.stderr);
    assert_eq!(tool.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("CLUSTER_AUTHORIZATION_FAILED"), "{stderr}");
    // The refusal changed nothing: same leader, same epoch, still committing.
    let before = client.describe_quorum().unwrap();
    produce_one(&mut client, "after the refused AlterQuorum").unwrap();
    let after = client.describe_quorum().unwrap();
    assert_eq!(
        (after.leader_id, after.leader_epoch),
        (before.leader_id, before.leader_epoch)
    );

    // With ALTER granted and the ACLs reloaded (SIGHUP), the same request passes the
    // authorizer: whatever the leader answers, it is not an authorization failure.
    std::fs::write(
        &acls,
        format!("{ACLS_WITHOUT_ALTER}allow User:ANONYMOUS ALTER cluster:kafka-cluster from *\n"),
    )
    .unwrap();
    for node in &cluster.nodes {
        node.process.as_ref().unwrap().signal(libc::SIGHUP);
    }
    let deadline = Instant::now() + WAIT;
    let mut error = alter_error(&cluster, leader);
    while error == ErrorCode::CLUSTER_AUTHORIZATION_FAILED && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
        error = alter_error(&cluster, leader);
    }
    assert_ne!(
        error,
        ErrorCode::CLUSTER_AUTHORIZATION_FAILED,
        "after ALTER was granted"
    );
    eprintln!("with ALTER granted the leader answers {error}");
    drop(client);
    cluster.stop_all_cleanly();
}
