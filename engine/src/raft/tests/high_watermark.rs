//! High watermark, appends and check-quorum (docs/testing.md, "Behaviours the scenario tests
//! cover").

use super::harness::*;
use super::quorum_epoch::{durable_leader_of_epoch_2, elect, elect_among};
use crate::raft::*;

const VOTERS: &[NodeId] = &[1, 2, 3];

/// Leader 1 of epoch 2 with `count` records from one Quorum append durable on itself alone.
fn leader_with_durable_records(count: u32) -> Harness {
    let (mut h, _) = elect(2);
    h.durable_all();
    h.append(1, count, Acks::Quorum);
    h.durable_all();
    h
}

/// The only voter, leading from its first tick.
fn single_voter_leader() -> Harness {
    let mut h = Harness::new(config(1, &[1]), None, log(0, &[]));
    h.tick();
    h
}

/// What `appends_done` says when append `id` was stored at `base_offset..=last_offset`.
fn appended(id: u64, base_offset: Offset, last_offset: Offset) -> Vec<(u64, AppendResult)> {
    vec![(
        id,
        AppendResult::Appended {
            base_offset,
            last_offset,
        },
    )]
}

#[test]
fn high_watermark_unknown_until_start_of_leader_epoch() {
    let mut h = durable_leader_of_epoch_2(VOTERS);
    assert_eq!(h.core.durable_end_offset(), 4);
    // Voter 2 has everything up to the epoch start offset (3) durable: not enough.
    let (_, out) = h.request(2, Harness::fetch_request(2, 2, 3, 1, 3));
    assert!(hw_outputs(&out).is_empty());
    assert_eq!(h.core.high_watermark(), None);
    assert_eq!(fetch_of(&responses(&out)[0].1).high_watermark, -1);
    // Once the LeaderChange record (offset 3) is durable on a majority, HW = 4.
    let (_, out) = h.request(2, Harness::fetch_request(2, 2, 4, 2, 4));
    assert_eq!(hw_outputs(&out), vec![4]);
    assert_eq!(h.core.high_watermark(), Some(4));
}

#[test]
fn fetch_offset_without_durable_offset_never_counts() {
    let (mut h, _) = elect(2);
    h.durable_all();
    let (_, out) = h.request(2, Harness::fetch_request(2, 2, 1, 2, 0));
    assert!(
        hw_outputs(&out).is_empty(),
        "fetch offset 1 but nothing durable"
    );
    let (_, out) = h.request(2, Harness::fetch_request(2, 2, 1, 2, 1));
    assert_eq!(hw_outputs(&out), vec![1]);
}

#[test]
fn observers_never_count_toward_high_watermark() {
    let (mut h, _) = elect(2);
    h.durable_all();
    let mut req = Harness::fetch_request(9, 2, 1, 2, 1);
    if let Request::FetchQuorumRecords(r) = &mut req {
        r.is_follower = false;
    }
    let (_, out) = h.request(9, req);
    assert!(hw_outputs(&out).is_empty());
    assert_eq!(h.core.high_watermark(), None);
}

#[test]
fn leader_counts_itself_only_when_durable() {
    let (mut h, _) = elect(2);
    let (_, out) = h.request(2, Harness::fetch_request(2, 2, 1, 2, 1));
    let (_, out2) = h.request(3, Harness::fetch_request(3, 2, 1, 2, 1));
    // Two followers suffice for a majority of 3 even while the leader is not durable.
    assert_eq!([hw_outputs(&out), hw_outputs(&out2)].concat(), vec![1]);
}

#[test]
fn update_high_watermark_quorum_size_1() {
    let mut h = single_voter_leader();
    h.append(1, 2, Acks::Quorum);
    assert_eq!(h.core.high_watermark(), None);
    let out = h.durable_all();
    assert_eq!(hw_outputs(&out), vec![3]);
}

#[test]
fn update_high_watermark_quorum_size_2() {
    let (mut h, _) = elect_among(&[1, 2], 1, log(0, &[]));
    let out = h.durable_all();
    assert!(hw_outputs(&out).is_empty(), "size 2 needs both");
    let (_, out) = h.request(2, Harness::fetch_request(2, 1, 1, 1, 1));
    assert_eq!(hw_outputs(&out), vec![1]);
}

#[test]
fn update_high_watermark_quorum_size_3() {
    let mut h = leader_with_durable_records(4);
    let (_, out) = h.request(3, Harness::fetch_request(3, 2, 5, 2, 5));
    assert_eq!(hw_outputs(&out), vec![5]);
}

#[test]
fn high_watermark_does_not_decrease() {
    let mut h = leader_with_durable_records(4);
    h.request(2, Harness::fetch_request(2, 2, 5, 2, 5));
    assert_eq!(h.core.high_watermark(), Some(5));
    // Voter 2 lost its disk and comes back empty: tolerated, HW stays (KAFKA-12181).
    let (_, out) = h.request(2, Harness::fetch_request(2, 2, 0, 0, 0));
    assert!(!has_fatal(&out));
    assert!(hw_outputs(&out).is_empty());
    assert_eq!(h.core.high_watermark(), Some(5));
    assert_eq!(fetch_of(&responses(&out)[0].1).high_watermark, 5);
}

#[test]
fn leader_append_single_member_quorum() {
    let mut h = single_voter_leader();
    let out = h.append(7, 3, Acks::Quorum);
    match &log_ops(&out)[..] {
        [LogOpKind::Append(b)] => {
            assert_eq!((b[0].base_offset, b[0].epoch, b[0].record_count), (1, 1, 3));
            let view = crate::record::BatchView::parse(b[0].bytes.clone()).expect("stamped batch");
            assert_eq!((view.base_offset(), view.partition_leader_epoch()), (1, 1));
        }
        other => panic!("{other:?}"),
    }
    assert!(
        appends_done(&out).is_empty(),
        "not committed before it is durable"
    );
    let out = h.durable_all();
    assert_eq!(appends_done(&out), appended(7, 1, 3));
}

#[test]
fn acks_leader_completes_on_leader_durability() {
    let (mut h, _) = elect(2);
    h.append(1, 2, Acks::Leader);
    h.append(2, 2, Acks::Quorum);
    h.append(3, 2, Acks::None);
    let out = h.durable_all();
    assert_eq!(appends_done(&out), appended(1, 1, 2));
    let (_, out) = h.request(2, Harness::fetch_request(2, 2, 7, 2, 7));
    assert_eq!(appends_done(&out), appended(2, 3, 4));
}

#[test]
fn append_to_non_leader_fails() {
    let (mut h, _) = Harness::follower(1, VOTERS, 2, 2, log(0, &[]));
    let out = h.append(5, 1, Acks::Quorum);
    assert_eq!(
        appends_done(&out),
        vec![(
            5,
            AppendResult::Failed {
                error: ErrorCode::NOT_LEADER_OR_FOLLOWER,
                leader_id: 2,
                leader_epoch: 2
            }
        )]
    );
    assert!(log_ops(&out).is_empty());
}

#[test]
fn append_empty_record_set_not_allowed() {
    let (mut h, _) = elect(2);
    let out = h.step(Input::ClientAppend {
        id: 5,
        batch: client_batch(1),
        record_count: 0,
        acks: Acks::Quorum,
    });
    assert_eq!(
        append_refusal(&appends_done(&out)),
        Some((5, ErrorCode::INVALID_REQUEST))
    );
    assert!(log_ops(&out).is_empty());
}

#[test]
fn pending_appends_fail_when_leadership_is_lost() {
    let (mut h, _) = elect(2);
    h.append(1, 2, Acks::Quorum);
    let (_, out) = h.request(2, Harness::vote_request(2, 3, 2, 3));
    assert_eq!(
        append_refusal(&appends_done(&out)),
        Some((1, ErrorCode::NOT_LEADER_OR_FOLLOWER))
    );
}

#[test]
fn leader_should_resign_if_not_get_fetch_request_from_majority_voters() {
    let (mut h, _) = elect(2);
    h.run_until(1_000);
    h.request(2, Harness::fetch_request(2, 2, 0, 0, 0));
    // Voter 2 fetched at 1000: the majority is alive until 1000 + 3000.
    h.run_until(3_999);
    assert_eq!(h.core.role(), Role::Leader);
    let out = h.run_until(4_000);
    assert_eq!(h.core.role(), Role::Resigned);
    assert!(sends(&out)
        .iter()
        .any(|s| matches!(s.2, Request::EndQuorumEpoch(_))));
    // ... and an election follows: a pre-vote round for epoch 3 (docs/protocol.md, "Pre-vote").
    let out = h.run_until(6_001);
    assert_eq!((h.core.role(), h.core.epoch()), (Role::Prospective, 2));
    assert!(sends(&out)
        .iter()
        .any(|s| matches!(&s.2, Request::Vote(v) if v.pre_vote && v.candidate_epoch == 3)));
}

#[test]
fn leader_with_majority_fetching_stays_leader() {
    let (mut h, _) = elect(2);
    for t in (1_000..10_000).step_by(1_000) {
        h.run_until(t);
        let (_, _) = h.request(3, Harness::fetch_request(3, 2, 0, 0, 0));
    }
    assert_eq!(h.core.role(), Role::Leader);
}

#[test]
fn single_voter_leader_never_resigns() {
    let mut h = single_voter_leader();
    h.run_until(100_000);
    assert_eq!(h.core.role(), Role::Leader);
}

#[test]
fn diverging_voter_still_counts_as_in_contact() {
    let (mut h, _) = elect(2);
    h.run_until(1_000);
    // Voter 2 has a stale log (epoch 1 the leader never had): answered with a truncation point,
    // yet it is alive and connected.
    let (_, out) = h.request(2, Harness::fetch_request(2, 2, 3, 1, 3));
    assert!(fetch_of(&responses(&out)[0].1).next_fetch_offset_epoch >= 0);
    h.run_until(3_999);
    assert_eq!(h.core.role(), Role::Leader);
    h.run_until(4_000);
    assert_eq!(h.core.role(), Role::Resigned);
}
