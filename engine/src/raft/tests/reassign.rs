//! AlterQuorum and reassignment (docs/protocol.md, "AlterQuorum and reassignment").

use super::harness::*;
use crate::raft::*;

const VOTERS: &[NodeId] = &[1, 2, 3];

fn alter(ids: &[NodeId]) -> Request {
    Request::AlterQuorum(AlterQuorumRequest {
        cluster_id: CLUSTER.into(),
        target_voters: ids
            .iter()
            .map(|id| AlterQuorumVoter {
                voter_id: *id,
                directory_id: DirectoryId::ZERO,
            })
            .collect(),
        timeout_ms: 1000,
        validate_only: false,
        force: false,
    })
}

fn alter_of(out: &[Output]) -> AlterQuorumResponse {
    let all = responses(out);
    assert_eq!(all.len(), 1, "{out:?}");
    match &all[0].1 {
        Response::AlterQuorum(r) => r.clone(),
        other => panic!("not an AlterQuorum answer: {other:?}"),
    }
}

#[test]
fn a_follower_sends_an_alter_quorum_to_the_leader_it_knows() {
    let (mut h, _) = Harness::follower(2, VOTERS, 4, 1, log(0, &[]));
    let (_, out) = h.request(-1, alter(&[1, 2]));
    let r = alter_of(&out);
    assert_eq!(
        (r.error, r.leader_id, r.leader_epoch),
        (ErrorCode::NOT_QUORUM_LEADER, 1, 4)
    );
    assert!(r.target_voters.is_empty());
}

#[test]
fn an_alter_quorum_for_another_cluster_or_with_a_bad_set_changes_nothing() {
    let mut h = Harness::leader(1, VOTERS, 2, log(0, &[]));
    let mut other = alter(&[1, 2]);
    if let Request::AlterQuorum(r) = &mut other {
        r.cluster_id = "other".into();
    }
    let (_, out) = h.request(-1, other);
    assert_eq!(alter_of(&out).error, ErrorCode::INCONSISTENT_CLUSTER_ID);
    for bad in [alter(&[]), alter(&[1, 1]), alter(&[-3])] {
        let (_, out) = h.request(-1, bad);
        let r = alter_of(&out);
        assert_eq!(r.error, ErrorCode::INVALID_REQUEST);
        assert!(r.error_message.is_some());
        assert!(log_ops(&out).is_empty() && persisted(&out).is_empty());
    }
}
