//! Replication and fetch, and pipelining (docs/testing.md, "Behaviours the scenario tests
//! cover").

use super::harness::*;
use super::quorum_epoch::elect;
use crate::raft::*;

const VOTERS: &[NodeId] = &[1, 2, 3];

fn respond_fetch(
    h: &mut Harness,
    correlation: Correlation,
    r: FetchQuorumRecordsResponse,
) -> Vec<Output> {
    h.respond(2, correlation, Response::FetchQuorumRecords(r))
}

/// The error of the answer to the fetch `request` from `from`.
fn fetch_error(h: &mut Harness, from: NodeId, request: Request) -> ErrorCode {
    let (_, out) = h.request(from, request);
    fetch_of(&responses(&out)[0].1).error
}

fn diverging(
    leader: NodeId,
    epoch: Epoch,
    offset: Offset,
    div_epoch: Epoch,
    hw: Offset,
) -> FetchQuorumRecordsResponse {
    let mut r = Harness::fetch_response(leader, epoch, Vec::new(), hw);
    r.next_fetch_offset = offset;
    r.next_fetch_offset_epoch = div_epoch;
    r
}

#[test]
fn follower_replication() {
    let (mut h, c) = Harness::follower(1, VOTERS, 2, 2, log(0, &[]));
    let out = respond_fetch(
        &mut h,
        c,
        Harness::fetch_response(2, 2, vec![batch(0, 2, 3), batch(3, 2, 2)], 2),
    );
    match &log_ops(&out)[..] {
        [LogOpKind::Append(b)] => assert_eq!(b.len(), 2, "one op for the whole response"),
        other => panic!("{other:?}"),
    }
    assert_eq!(hw_outputs(&out), vec![2]);
    assert_eq!(h.core.log_end_offset(), 5);
    // Pipelined: the next fetch goes out at once, before the append is durable.
    let next = fetch_sends(&out);
    assert_eq!(next.len(), 1);
    assert_eq!(
        (
            next[0].2.fetch_offset,
            next[0].2.last_fetched_epoch,
            next[0].2.durable_offset
        ),
        (5, 2, 0)
    );
    let out = respond_fetch(&mut h, next[0].1, Harness::fetch_response(2, 2, vec![], 9));
    assert_eq!(hw_outputs(&out), vec![5], "HW = min(leader HW, LEO)");
    assert_eq!(h.core.high_watermark(), Some(5));
}

#[test]
fn pipelined_fetch_reports_durable_offset() {
    let (mut h, c) = Harness::follower(1, VOTERS, 2, 2, log(0, &[]));
    let out = respond_fetch(
        &mut h,
        c,
        Harness::fetch_response(2, 2, vec![batch(0, 2, 3)], -1),
    );
    assert_eq!(fetch_sends(&out)[0].2.durable_offset, 0);
    let out = h.durable_all();
    assert_eq!(h.core.durable_end_offset(), 3);
    let refresh = fetch_sends(&out);
    assert_eq!(
        refresh.len(),
        1,
        "a fresher fetch carries the durable offset"
    );
    assert_eq!(
        (refresh[0].2.fetch_offset, refresh[0].2.durable_offset),
        (3, 3)
    );
}

#[test]
fn follower_log_reconciliation() {
    let (mut h, c) = Harness::follower(1, VOTERS, 4, 2, log(3, &[(1, 0), (3, 1)]));
    let out = respond_fetch(&mut h, c, diverging(2, 4, 2, 3, -1));
    assert!(matches!(log_ops(&out)[..], [LogOpKind::TruncateTo(2)]));
    let next = fetch_sends(&out);
    assert_eq!(
        (next[0].2.fetch_offset, next[0].2.last_fetched_epoch),
        (2, 3)
    );
}

#[test]
fn leader_immediately_sends_diverging_epoch() {
    let mut h = Harness::restarted_with(6, -1, 1, log(9, &[(1, 0), (3, 3), (5, 6)]));
    let votes = sends(&h.tick());
    h.respond(
        2,
        votes[0].1,
        Harness::vote_response(ErrorCode::NONE, -1, 6, true),
    );
    assert_eq!(h.core.role(), Role::Leader);
    let (_, out) = h.request(2, Harness::fetch_request(2, 6, 6, 2, 6));
    let r = fetch_of(&responses(&out)[0].1).clone();
    assert_eq!(
        (r.error, r.next_fetch_offset_epoch, r.next_fetch_offset),
        (ErrorCode::NONE, 1, 3)
    );
    let (_, out) = h.request(3, Harness::fetch_request(3, 6, 7, 3, 7));
    let r = fetch_of(&responses(&out)[0].1).clone();
    assert_eq!((r.next_fetch_offset_epoch, r.next_fetch_offset), (3, 6));
    // Valid: offset 5 in epoch 3 is older than the tail cache: read from the log.
    let (id, out) = h.request(3, Harness::fetch_request(3, 6, 5, 3, 5));
    assert!(responses(&out).is_empty());
    let read_id = match out.iter().find(|o| matches!(o, Output::ReadLog { .. })) {
        Some(Output::ReadLog {
            read_id,
            from_offset,
            ..
        }) => {
            assert_eq!(*from_offset, 5);
            *read_id
        }
        other => panic!("{other:?}"),
    };
    let out = h.step(Input::LogReadDone {
        read_id,
        batches: vec![batch(5, 3, 1)],
    });
    let resp = responses(&out);
    assert_eq!(resp[0].0, id);
    let r = fetch_of(&resp[0].1);
    assert_eq!(
        (r.next_fetch_offset_epoch, r.batches[0].base_offset),
        (-1, 5)
    );
}

#[test]
fn invalid_fetch_request() {
    let (mut h, _) = elect(2);
    let mut cases = vec![
        Harness::fetch_request(2, 2, -1, 0, 0),
        Harness::fetch_request(2, 2, 0, -1, 0),
        Harness::fetch_request(2, 2, 0, 3, 0),
    ];
    if let Request::FetchQuorumRecords(mut r) = Harness::fetch_request(2, 2, 0, 0, 0) {
        r.max_wait_ms = -1;
        cases.push(Request::FetchQuorumRecords(r));
    }
    for req in cases {
        assert_eq!(fetch_error(&mut h, 2, req), ErrorCode::INVALID_REQUEST);
    }
    assert_eq!(
        fetch_error(&mut h, 2, Harness::fetch_request(2, 3, 0, 0, 0)),
        ErrorCode::UNKNOWN_LEADER_EPOCH
    );
    let mut wrong = Harness::fetch_request(2, 2, 0, 0, 0);
    if let Request::FetchQuorumRecords(r) = &mut wrong {
        r.cluster_id = "other".into();
    }
    assert_eq!(
        fetch_error(&mut h, 2, wrong),
        ErrorCode::INCONSISTENT_CLUSTER_ID
    );
    // A non-voter claiming to be a follower is told to downgrade.
    assert_eq!(
        fetch_error(&mut h, 7, Harness::fetch_request(7, 2, 0, 0, 0)),
        ErrorCode::NOT_FOLLOWER
    );
    assert_eq!(h.core.role(), Role::Leader);
}

#[test]
fn fetch_with_older_epoch_is_fenced() {
    let (mut h, _) = elect(3);
    let (_, out) = h.request(2, Harness::fetch_request(2, 2, 0, 0, 0));
    let r = fetch_of(&responses(&out)[0].1).clone();
    assert_eq!(
        (r.error, r.leader_id, r.leader_epoch),
        (ErrorCode::FENCED_LEADER_EPOCH, 1, 3)
    );
}

#[test]
fn follower_adopts_leader_from_fenced_fetch_response() {
    let (mut h, c) = Harness::follower(1, VOTERS, 2, 2, log(0, &[]));
    let r = Harness::fetch_error_response(3, 4, -1, ErrorCode::FENCED_LEADER_EPOCH);
    let out = respond_fetch(&mut h, c, r);
    assert_eq!(
        (persisted(&out)[0].epoch, persisted(&out)[0].leader_id),
        (4, 3)
    );
    assert_eq!(h.core.leader_id(), Some(3));
    assert_eq!(fetch_sends(&out)[0].0, 3);
}

#[test]
fn not_leader_answer_from_non_leader() {
    let (mut h, _) = Harness::follower(1, VOTERS, 2, 2, log(0, &[]));
    let (_, out) = h.request(3, Harness::fetch_request(3, 2, 0, 0, 0));
    let r = fetch_of(&responses(&out)[0].1).clone();
    assert_eq!(
        (r.error, r.leader_id),
        (ErrorCode::NOT_LEADER_OR_FOLLOWER, 2)
    );
}

/// A leader (epoch 2) with the LeaderChange record durable and a caught-up fetch from 2 parked.
fn leader_with_parked_fetch() -> (Harness, RequestId) {
    let (mut h, _) = elect(2);
    h.durable_all();
    let (id, out) = h.request(2, Harness::fetch_request(2, 2, 1, 2, 0));
    assert!(responses(&out).is_empty(), "caught up: parked");
    (h, id)
}

#[test]
fn purgatory_fetch_timeout() {
    let (mut h, id) = leader_with_parked_fetch();
    assert!(responses(&h.run_until(499)).is_empty());
    let out = h.run_until(500);
    let resp = responses(&out);
    assert_eq!(resp[0].0, id);
    let r = fetch_of(&resp[0].1);
    assert_eq!((r.error, r.batches.len()), (ErrorCode::NONE, 0));
}

#[test]
fn purgatory_fetch_satisfied_by_write() {
    let (mut h, id) = leader_with_parked_fetch();
    let out = h.append(7, 2, Acks::Quorum);
    let resp = responses(&out);
    assert_eq!(resp[0].0, id);
    let r = fetch_of(&resp[0].1);
    assert_eq!(
        (
            r.batches.len(),
            r.batches[0].base_offset,
            r.batches[0].epoch
        ),
        (1, 1, 2)
    );
}

#[test]
fn purgatory_fetch_completed_by_follower_transition() {
    let (mut h, id) = leader_with_parked_fetch();
    let (_, out) = h.request(3, Harness::begin_request(3, 3));
    let p = position(&out, is_persist).unwrap();
    let resp = responses(&out);
    let parked = resp
        .iter()
        .find(|r| r.0 == id)
        .expect("parked fetch answered");
    let r = fetch_of(&parked.1);
    assert_eq!(
        (r.error, r.leader_id, r.leader_epoch),
        (ErrorCode::NOT_LEADER_OR_FOLLOWER, 3, 3)
    );
    assert!(p < position(&out, is_respond).unwrap());
}

#[test]
fn resign_will_complete_fetch_purgatory() {
    let (mut h, id) = leader_with_parked_fetch();
    let out = h.step(Input::Shutdown);
    let resp = responses(&out);
    assert_eq!(resp[0].0, id);
    assert_eq!(fetch_of(&resp[0].1).error, ErrorCode::BROKER_NOT_AVAILABLE);
}

#[test]
fn fetch_response_ignored_after_becoming_candidate() {
    let (h, c) = Harness::follower(1, VOTERS, 2, 2, log(0, &[]));
    let mut h = h.without_pre_vote();
    h.run_until(2_000);
    assert_eq!(h.core.role(), Role::Candidate);
    let out = respond_fetch(
        &mut h,
        c,
        Harness::fetch_response(2, 2, vec![batch(0, 2, 1)], 1),
    );
    assert!(log_ops(&out).is_empty() && hw_outputs(&out).is_empty());
    assert_eq!(h.core.log_end_offset(), 0);
}

#[test]
fn fetch_response_ignored_after_becoming_follower_of_different_leader() {
    let (mut h, c) = Harness::follower(1, VOTERS, 2, 2, log(0, &[]));
    h.request(3, Harness::begin_request(3, 3));
    let out = respond_fetch(
        &mut h,
        c,
        Harness::fetch_response(2, 2, vec![batch(0, 2, 1)], 1),
    );
    assert!(log_ops(&out).is_empty());
    assert_eq!((h.core.leader_id(), h.core.epoch()), (Some(3), 3));
}

#[test]
fn empty_record_set_in_fetch_response() {
    let (mut h, c) = Harness::follower(1, VOTERS, 2, 2, log(3, &[(1, 0)]));
    h.run_until(1_500);
    let out = respond_fetch(&mut h, c, Harness::fetch_response(2, 2, vec![], 2));
    assert_eq!(hw_outputs(&out), vec![2]);
    // The fetch timer restarted at 1500: no candidacy at 2000.
    h.run_until(3_499);
    assert_eq!(h.core.role(), Role::Follower);
}

#[test]
fn follower_never_truncates_below_high_watermark() {
    let (mut h, c) = Harness::follower(1, VOTERS, 2, 2, log(5, &[(1, 0)]));
    let out = respond_fetch(&mut h, c, Harness::fetch_response(2, 2, vec![], 4));
    assert_eq!(h.core.high_watermark(), Some(4));
    let next = fetch_sends(&out)[0].1;
    let out = respond_fetch(&mut h, next, diverging(2, 2, 2, 1, 4));
    assert!(has_fatal(&out), "{out:?}");
    assert!(log_ops(&out).is_empty(), "nothing truncated");
}

/// Below the log start everything was committed, so a node that has not learned the high
/// watermark since it started still refuses to truncate there: it stops, with a message, and
/// its log is untouched.
#[test]
fn follower_never_truncates_below_its_log_start() {
    let mut start_at_5 = log(8, &[(1, 5)]);
    start_at_5.start_offset = 5;
    let (mut h, c) = Harness::follower(1, VOTERS, 2, 2, start_at_5);
    assert_eq!(h.core.high_watermark(), None);
    let out = respond_fetch(&mut h, c, diverging(2, 2, 2, 1, -1));
    assert!(has_fatal(&out), "{out:?}");
    assert!(log_ops(&out).is_empty(), "nothing truncated");
    // To the log start itself is allowed: what is at and above it need not be committed.
    let mut start_at_5 = log(8, &[(1, 5)]);
    start_at_5.start_offset = 5;
    let (mut h, c) = Harness::follower(1, VOTERS, 2, 2, start_at_5);
    let out = respond_fetch(&mut h, c, diverging(2, 2, 5, 1, -1));
    assert!(!has_fatal(&out), "{out:?}");
    assert!(
        matches!(log_ops(&out)[..], [LogOpKind::TruncateTo(5)]),
        "{out:?}"
    );
}

#[test]
fn truncation_applied_before_high_watermark_update() {
    let (mut h, c) = Harness::follower(1, VOTERS, 4, 2, log(3, &[(1, 0), (3, 1)]));
    let out = respond_fetch(&mut h, c, diverging(2, 4, 2, 3, 3));
    assert!(matches!(log_ops(&out)[..], [LogOpKind::TruncateTo(2)]));
    assert!(
        hw_outputs(&out).is_empty(),
        "no HW from a divergence answer"
    );
    let next = fetch_sends(&out)[0].1;
    let out = respond_fetch(&mut h, next, Harness::fetch_response(2, 4, vec![], 3));
    assert_eq!(hw_outputs(&out), vec![2], "min(leader HW, truncated LEO)");
}

#[test]
fn leader_answers_from_tail_cache_without_log_read() {
    let (mut h, _) = elect(2);
    h.append(1, 3, Acks::Quorum);
    let (_, out) = h.request(2, Harness::fetch_request(2, 2, 0, 0, 0));
    assert!(!out.iter().any(|o| matches!(o, Output::ReadLog { .. })));
    let r = fetch_of(&responses(&out)[0].1).clone();
    assert_eq!(
        r.batches.iter().map(|b| b.base_offset).collect::<Vec<_>>(),
        vec![0, 1]
    );
}

#[test]
fn log_read_finishing_after_leadership_loss_is_dropped() {
    let mut h = Harness::restarted_with(2, -1, 1, log(5, &[(1, 0)]));
    let votes = sends(&h.tick());
    h.respond(
        2,
        votes[0].1,
        Harness::vote_response(ErrorCode::NONE, -1, 2, true),
    );
    let (id, out) = h.request(2, Harness::fetch_request(2, 2, 2, 1, 2));
    let read_id = match out.iter().find(|o| matches!(o, Output::ReadLog { .. })) {
        Some(Output::ReadLog { read_id, .. }) => *read_id,
        other => panic!("{other:?}"),
    };
    // Leadership lost while the read is in progress: the fetch is answered at once...
    let (_, out) = h.request(3, Harness::vote_request(3, 3, 2, 6));
    let answered: Vec<_> = responses(&out).into_iter().filter(|r| r.0 == id).collect();
    assert_eq!(
        fetch_of(&answered[0].1).error,
        ErrorCode::NOT_LEADER_OR_FOLLOWER
    );
    // ... and never a second time.
    let out = h.step(Input::LogReadDone {
        read_id,
        batches: vec![batch(2, 1, 3)],
    });
    assert!(responses(&out).is_empty());
}

#[test]
fn begin_quorum_epoch_connection_failure_is_retried_after_backoff() {
    let (mut h, out) = super::quorum_epoch::elect(2);
    let to3 = sends(&out)
        .into_iter()
        .find(|s| s.0 == 3 && matches!(s.2, Request::BeginQuorumEpoch(_)))
        .unwrap();
    let out = h.step(Input::RequestFailed {
        to: 3,
        correlation: to3.1,
    });
    assert!(sends(&out).is_empty(), "not at once");
    let out = h.run_until(30);
    assert!(sends(&out)
        .iter()
        .any(|s| s.0 == 3 && matches!(s.2, Request::BeginQuorumEpoch(_))));
}

#[test]
fn offset_out_of_range_with_truncation_point_is_a_truncation() {
    let (mut h, c) = Harness::follower(1, VOTERS, 4, 2, log(3, &[(1, 0), (3, 1)]));
    let mut r = diverging(2, 4, 2, 3, -1);
    r.error = ErrorCode::OFFSET_OUT_OF_RANGE;
    let out = respond_fetch(&mut h, c, r);
    assert!(matches!(log_ops(&out)[..], [LogOpKind::TruncateTo(2)]));
}

#[test]
fn a_leader_appends_the_nodes_control_batches_and_nobody_else_does() {
    use crate::record::control::ProducerIdBlock;
    let block = ProducerIdBlock {
        node_id: 2,
        incarnation: 7,
        first_id: 0,
        count: 1000,
    };
    let (mut f, _) = Harness::follower(2, &[1, 2, 3], 3, 1, log(0, &[]));
    let out = f.step(Input::AppendControl {
        batch: block.to_batch(0, 0, 1),
    });
    assert!(log_ops(&out).is_empty(), "a follower appends nothing");

    let mut h = Harness::leader(1, &[1, 2, 3], 2, log(0, &[]));
    let end = h.core.log_end_offset();
    let out = h.step(Input::AppendControl {
        batch: client_batch(1),
    });
    assert!(
        log_ops(&out).is_empty(),
        "a data batch is not a control batch"
    );
    let out = h.step(Input::AppendControl {
        batch: block.to_batch(0, 0, 1),
    });
    let ops = log_ops(&out);
    let [LogOpKind::Append(batches)] = &ops[..] else {
        panic!("one append expected: {ops:?}");
    };
    assert_eq!(
        (
            batches[0].base_offset,
            batches[0].epoch,
            batches[0].is_control
        ),
        (end, 2, true)
    );
    let view = crate::record::BatchView::parse(batches[0].bytes.clone()).unwrap();
    assert_eq!(ProducerIdBlock::from_batch(&view), Ok(block));
    // A client may not append a control batch.
    let out = h.step(Input::ClientAppend {
        id: 9,
        batch: block.to_batch(0, 0, 1),
        record_count: 1,
        acks: Acks::Quorum,
    });
    assert!(log_ops(&out).is_empty());
    assert_eq!(
        append_refusal(&appends_done(&out)),
        Some((9, ErrorCode::INVALID_REQUEST))
    );
}

/// `Input::RefreshFetch` (the node has a new wish for its fetches): a fresh fetch at the same
/// position while one is outstanding, at most two in flight, and nothing otherwise.
#[test]
fn a_refresh_sends_a_fresh_fetch_only_while_one_is_outstanding() {
    let (mut h, c) = Harness::follower(1, VOTERS, 2, 2, log(0, &[]));
    let out = h.step(Input::RefreshFetch);
    let fresh = fetch_sends(&out);
    assert_eq!(fresh.len(), 1, "{out:?}");
    assert_eq!((fresh[0].2.fetch_offset, fresh[0].2.leader_epoch), (0, 2));
    // Again: one more, and the first is forgotten (never more than two in flight).
    let again = fetch_sends(&h.step(Input::RefreshFetch));
    assert_eq!(again.len(), 1);
    let out = respond_fetch(
        &mut h,
        c,
        Harness::fetch_response(2, 2, vec![batch(0, 2, 3)], -1),
    );
    assert!(log_ops(&out).is_empty(), "the first fetch was superseded");
    let out = respond_fetch(
        &mut h,
        fresh[0].1,
        Harness::fetch_response(2, 2, vec![batch(0, 2, 3)], -1),
    );
    assert!(
        matches!(&log_ops(&out)[..], [LogOpKind::Append(b)] if b.len() == 1),
        "the one kept is answered: {out:?}"
    );

    // With nothing outstanding at the log end, the next fetch carries it: nothing now.
    let (mut h, _) = Harness::follower(1, VOTERS, 2, 2, log(0, &[]));
    h.step(Input::StorageFull { full: true });
    assert!(
        fetch_sends(&h.step(Input::RefreshFetch)).is_empty(),
        "a full log sends none"
    );
    let mut leader = Harness::leader(1, VOTERS, 2, log(0, &[]));
    assert!(fetch_sends(&leader.step(Input::RefreshFetch)).is_empty());
}
