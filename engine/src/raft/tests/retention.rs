//! The log start: retention's limit, fetches behind the start, a follower that starts its log
//! again at its leader's start (docs/protocol.md, "Retention and the log start").

use super::harness::*;
use super::quorum_epoch::{durable_leader_of_epoch_2, elect_among};
use super::reassign::voter_batch;
use crate::raft::*;

const VOTERS: &[NodeId] = &[1, 2, 3];

/// A log whose first `start` offsets retention deleted: it holds `start..end` in `epochs`.
fn log_from(start: Offset, end: Offset, epochs: &[(Epoch, Offset)]) -> LogSnapshot {
    LogSnapshot {
        start_offset: start,
        ..log(end, epochs)
    }
}

/// The answer to `request` from voter 2; None when the leader reads its log for it instead
/// (a fetch it serves).
fn fetch_answer(h: &mut Harness, request: Request) -> Option<FetchQuorumRecordsResponse> {
    let (_, out) = h.request(2, request);
    let answers = responses(&out);
    if answers.is_empty() {
        assert!(matches!(out[..], [Output::ReadLog { .. }]), "{out:?}");
        return None;
    }
    Some(fetch_of(&answers[0].1).clone())
}

/// The answer to a fetch the leader must refuse at once.
fn refusal(h: &mut Harness, request: Request) -> FetchQuorumRecordsResponse {
    fetch_answer(h, request).expect("answered at once")
}

/// The outputs hold one log op, a reset to `start` in `epoch`.
fn assert_reset_to(out: &[Output], start: Offset, epoch: Epoch) {
    let ops = log_ops(out);
    assert!(
        matches!(ops[..], [LogOpKind::ResetTo { start: s, epoch: e }] if s == start && e == epoch),
        "{out:?}"
    );
}

fn behind_log_start(leader: NodeId, epoch: Epoch, start: Offset, start_epoch: Epoch) -> Response {
    let mut r = Harness::fetch_error_response(leader, epoch, -1, ErrorCode::OFFSET_OUT_OF_RANGE);
    r.log_start = Some(OffsetAndEpoch {
        offset: start,
        epoch: start_epoch,
    });
    Response::FetchQuorumRecords(r)
}

#[test]
fn a_fetch_the_log_no_longer_holds_the_start_of_is_out_of_range_with_the_log_start() {
    // Retention left 100..150 of epoch 1; node 1 leads epoch 2.
    let (mut h, _) = elect_among(VOTERS, 2, log_from(100, 150, &[(1, 100)]));
    h.durable_all();
    let expected = Some(OffsetAndEpoch {
        offset: 100,
        epoch: 1,
    });
    // Below the start, from an empty log, and in an epoch older than any the log still has.
    for (offset, last_epoch) in [(50, 1), (0, 0), (120, 0)] {
        let r = refusal(&mut h, Harness::fetch_request(2, 2, offset, last_epoch, 0));
        assert_eq!(
            r.error,
            ErrorCode::OFFSET_OUT_OF_RANGE,
            "{offset}@{last_epoch}"
        );
        assert_eq!(r.log_start, expected, "{offset}@{last_epoch}");
        assert!(r.batches.is_empty());
    }
    // From the start, and above it in an epoch the log has: served as ever.
    for (offset, last_epoch) in [(100, 1), (120, 1)] {
        let served = fetch_answer(&mut h, Harness::fetch_request(2, 2, offset, last_epoch, 0));
        assert!(served.is_none(), "{offset}@{last_epoch}: {served:?}");
    }
}

#[test]
fn a_log_that_starts_at_zero_answers_an_empty_fetcher_as_before() {
    let mut h = durable_leader_of_epoch_2(VOTERS);
    let served = fetch_answer(&mut h, Harness::fetch_request(2, 2, 0, 0, 0));
    assert!(served.is_none(), "{served:?}");
}

#[test]
fn retention_moving_the_start_makes_older_fetches_out_of_range() {
    let (mut h, _) = elect_among(VOTERS, 2, log(150, &[(1, 0)]));
    h.durable_all();
    assert!(fetch_answer(&mut h, Harness::fetch_request(2, 2, 50, 1, 0)).is_none());
    h.step(Input::LogStartMoved { start: 100 });
    assert_eq!(h.core.log_start_offset(), 100);
    let r = refusal(&mut h, Harness::fetch_request(2, 2, 50, 1, 0));
    assert_eq!(r.error, ErrorCode::OFFSET_OUT_OF_RANGE);
    assert_eq!(r.log_start.map(|s| (s.offset, s.epoch)), Some((100, 1)));
    // A report that crossed a later one (or a reset) moves nothing back.
    h.step(Input::LogStartMoved { start: 40 });
    assert_eq!(h.core.log_start_offset(), 100);
}

#[test]
fn a_follower_behind_its_leaders_log_start_starts_its_log_again_there() {
    let (mut h, c) = Harness::follower(1, VOTERS, 3, 2, log(10, &[(1, 0)]));
    let out = h.respond(2, c, behind_log_start(2, 3, 100, 2));
    assert_reset_to(&out, 100, 2);
    assert_eq!(
        (
            h.core.log_start_offset(),
            h.core.log_end_offset(),
            h.core.last_epoch()
        ),
        (100, 100, 2)
    );
    // It fetches from the start, in the epoch the leader named: the leader's log matches it.
    let next = fetch_sends(&out);
    assert_eq!(next.len(), 1);
    assert_eq!(
        (next[0].2.fetch_offset, next[0].2.last_fetched_epoch),
        (100, 2)
    );
    // Durable once the reset is.
    assert!(h.core.durable_end_offset() < 100);
    h.durable_all();
    assert_eq!(h.core.durable_end_offset(), 100);
}

#[test]
fn an_out_of_range_answer_that_cannot_be_right_resets_nothing() {
    // The follower learned HW 8: a leader's log start below it would drop committed data.
    let (mut h, c) = Harness::follower(1, VOTERS, 3, 2, log(10, &[(1, 0)]));
    let out = h.respond(
        2,
        c,
        Response::FetchQuorumRecords(Harness::fetch_response(2, 3, Vec::new(), 8)),
    );
    assert_eq!(h.core.high_watermark(), Some(8));
    let next = fetch_sends(&out)[0].1;
    let out = h.respond(2, next, behind_log_start(2, 3, 5, 1));
    assert!(log_ops(&out).is_empty(), "{out:?}");
    assert_eq!(h.core.log_start_offset(), 0);
    // Nor a start in an epoch past the leader's.
    let (mut h, c) = Harness::follower(1, VOTERS, 3, 2, log(10, &[(1, 0)]));
    let out = h.respond(2, c, behind_log_start(2, 3, 100, 4));
    assert!(log_ops(&out).is_empty(), "{out:?}");
    // Nor a log start of 0, which no fetch can be behind (caught: `start.offset > 0` turned
    // into `>= 0` in `reset_behind_log_start`).
    let (mut h, c) = Harness::follower(1, VOTERS, 3, 2, log(10, &[(1, 0)]));
    let out = h.respond(2, c, behind_log_start(2, 3, 0, 1));
    assert!(log_ops(&out).is_empty(), "{out:?}");
    assert_eq!(h.core.log_end_offset(), 10);
}

/// A reset log votes like any lagging voter: its log is everything below its start
/// (committed) in the start's epoch, so a candidate whose log does not reach the start is
/// refused and one whose log does is granted (docs/protocol.md, "Retention and the log start",
/// rule 5). The simulator's seed 69010711 (`--voters 5 --observers 3 --reassign --retention
/// --refresh-fetches --tick-before-input`) had the set {0, 4} with voter 4 reset and its leader
/// 0 gone: 4 refused every vote until it fetched a voter record from a leader, 0 could not lead
/// without 4's vote, and nobody led again.
#[test]
fn a_reset_log_votes_for_a_candidate_whose_log_reaches_its_start() {
    let (mut h, c) = Harness::follower(1, VOTERS, 3, 2, log(10, &[(1, 0)]));
    h.respond(2, c, behind_log_start(2, 3, 100, 2));
    assert!(!h.core.voter_set_known());
    let (refused, _) = h.ask_vote(3, 4, 2, 50);
    assert_eq!(
        (refused.error, refused.vote_granted),
        (ErrorCode::NONE, false)
    );
    let (granted, _) = h.ask_vote(2, 5, 2, 100);
    assert_eq!(
        (granted.error, granted.vote_granted),
        (ErrorCode::NONE, true)
    );
    assert_eq!((h.core.epoch(), h.core.role()), (5, Role::Voted));
    assert!(!h.core.voter_set_known(), "a vote teaches it no set");
}

#[test]
fn a_reset_log_stands_for_nothing_until_it_fetches_its_voter_record() {
    let (mut h, c) = Harness::follower(1, VOTERS, 3, 2, log(10, &[(1, 0)]));
    let out = h.respond(2, c, behind_log_start(2, 3, 100, 2));
    assert!(!h.core.voter_set_known());
    assert_eq!(fetch_sends(&out).len(), 1);
    // Its leader goes silent: it stands for nothing, timer after timer, and asks the voters it
    // knows who leads instead.
    let out = h.run_until(h.now + 20_000);
    assert!(
        !sends(&out).iter().any(|s| matches!(s.2, Request::Vote(_))),
        "{out:?}"
    );
    assert_eq!(h.core.role(), Role::Follower);
    assert!(!find_sends(&out).is_empty(), "it looks for the leader");
    // The next ask, answered at once.
    let mut asked = None;
    for _ in 0..100 {
        let out = h.run_until(h.now + 50);
        if let Some(&last) = find_sends(&out).last() {
            asked = Some(last);
            break;
        }
    }
    let (to, find) = asked.expect("it keeps asking");
    // Voter 3 answers that it leads epoch 4 now: the node follows it there.
    let out = h.follow_found_leader(to, find, 3, 4);
    let next = fetch_sends(&out)
        .last()
        .expect("it fetches from the new leader")
        .1;
    // The leader's voter record at the start arrives: the set is known again.
    let record = voter_batch(100, 2, VOTERS, None);
    h.respond(
        3,
        next,
        Response::FetchQuorumRecords(Harness::fetch_response(3, 4, vec![record], 101)),
    );
    assert!(h.core.voter_set_known());
    let (vote, _) = h.ask_vote(2, 5, 2, 101);
    assert!(vote.vote_granted);
}

#[test]
fn retention_stops_at_the_high_watermark_and_at_the_newest_committed_voter_record() {
    let mut h = durable_leader_of_epoch_2(VOTERS);
    // Nothing committed yet: nothing may go.
    assert_eq!(h.core.retention_limit(), 0);
    let (_, out) = h.request(2, Harness::fetch_request(2, 2, 4, 2, 4));
    assert_eq!(hw_outputs(&out), vec![4]);
    // Committed, but no voter record: the log must not start above 0 without one.
    assert_eq!(h.core.retention_limit(), 0);
    // Retention asks for one: the leader appends its set (at 4).
    let out = h.step(Input::CarryVoterRecord { below: 4 });
    match &log_ops(&out)[..] {
        [LogOpKind::Append(b)] => assert!(b.len() == 1 && b[0].is_control && b[0].base_offset == 4),
        other => panic!("{other:?}"),
    }
    h.durable_all();
    // Asked again while it is uncommitted: one voter record at a time.
    assert!(log_ops(&h.step(Input::CarryVoterRecord { below: 4 })).is_empty());
    let (_, out) = h.request(2, Harness::fetch_request(2, 2, 5, 2, 5));
    assert_eq!(hw_outputs(&out), vec![5]);
    // Now retention may go up to the record, not past it.
    assert_eq!(h.core.retention_limit(), 4);
    // A record at or above what retention wants is not carried again.
    assert!(log_ops(&h.step(Input::CarryVoterRecord { below: 4 })).is_empty());
    // Nor while the disk is full (caught: either of the last two `||` of its guard turned
    // into `&&`, which leaves a full disk alone no reason to wait): a lone voter leads on
    // with a full disk (a leader among several resigns).
    let mut lone = Harness::new(config(1, &[1]), None, log(0, &[]));
    lone.tick();
    lone.durable_all();
    assert_eq!(lone.core.role(), Role::Leader);
    let end = lone.core.log_end_offset();
    lone.step(Input::StorageFull { full: true });
    assert!(log_ops(&lone.step(Input::CarryVoterRecord { below: end })).is_empty());
    assert_eq!(lone.core.role(), Role::Leader);
    lone.step(Input::StorageFull { full: false });
    assert_eq!(
        log_ops(&lone.step(Input::CarryVoterRecord { below: end })).len(),
        1
    );
    // Followers carry nothing.
    let (mut f, _) = Harness::follower(2, VOTERS, 2, 1, log(3, &[(1, 0)]));
    assert!(log_ops(&f.step(Input::CarryVoterRecord { below: 3 })).is_empty());
}

#[test]
fn a_consumer_at_the_log_start_is_served_whatever_epoch_it_read_last() {
    let (mut h, _) = elect_among(VOTERS, 4, log_from(100, 150, &[(3, 100)]));
    h.durable_all();
    let consumer = |offset, last_epoch| Input::ClientFetch {
        id: offset as u64,
        fetch: ClientFetch {
            fetch_offset: offset,
            last_fetched_epoch: Some(last_epoch),
            current_leader_epoch: None,
            max_wait_ms: 0,
            min_bytes: 0,
            max_bytes: 1 << 20,
        },
    };
    let error = |out: Vec<Output>| {
        out.iter()
            .find_map(|o| match o {
                Output::ClientFetchDone { result, .. } => Some(result.error),
                _ => None,
            })
            .expect("answered at once")
    };
    // Its last batch (epoch 1, below the start) is gone with the cache entry that named it:
    // everything below the start is committed, so there is nothing to diverge from.
    assert_eq!(error(h.step(consumer(100, 1))), ErrorCode::NONE);
    // Above the start, an epoch older than the log's is out of range, as before.
    assert_eq!(
        error(h.step(consumer(120, 1))),
        ErrorCode::OFFSET_OUT_OF_RANGE
    );
}

/// A log that reaches past the leader's start (its tail in an epoch the leader's log no longer
/// has) is reset too; an append made before the reset and reported durable after it claims
/// nothing past the new start.
#[test]
fn a_reset_of_a_log_past_the_start_claims_nothing_of_the_old_tail_durable() {
    let (mut h, c) = Harness::follower(1, VOTERS, 3, 2, log(150, &[(1, 0)]));
    // An append at 150 of epoch 1, not yet durable.
    let out = h.respond(
        2,
        c,
        Response::FetchQuorumRecords(Harness::fetch_response(2, 3, vec![batch(150, 1, 10)], -1)),
    );
    let append_seq = h.last_seq;
    let next = fetch_sends(&out)[0].1;
    let out = h.respond(2, next, behind_log_start(2, 3, 100, 2));
    assert_reset_to(&out, 100, 2);
    assert_eq!(
        (h.core.log_end_offset(), h.core.durable_end_offset()),
        (100, 100)
    );
    h.step(Input::LogDurable {
        up_to_seq: append_seq,
    });
    assert_eq!(h.core.durable_end_offset(), 100);
    h.durable_all();
    assert_eq!(
        (h.core.log_start_offset(), h.core.durable_end_offset()),
        (100, 100)
    );
}

/// Caught: `committed_voter_offset` made to return 0 (the reset would revert the voter
/// records from offset 0, below the committed one). A follower whose voter record at offset 1
/// is committed and whose record at 2 is not starts its log again at its leader's start: the
/// uncommitted record is reverted, the committed set stays in force.
#[test]
fn a_reset_reverts_the_uncommitted_voter_records_only() {
    let (mut h, c) = Harness::follower(2, VOTERS, 4, 1, log(1, &[(4, 0)]));
    let answer =
        |batches, hw| Response::FetchQuorumRecords(Harness::fetch_response(1, 4, batches, hw));
    let out = h.respond(1, c, answer(vec![voter_batch(1, 4, &[1, 2], None)], 2));
    h.durable_all();
    let c = fetch_sends(&out)[0].1;
    let out = h.respond(1, c, answer(vec![voter_batch(2, 4, &[1, 2, 4], None)], 2));
    h.durable_all();
    assert_eq!(h.core.voters(), &[1, 2, 4]);
    let c = fetch_sends(&out)[0].1;
    let out = h.respond(1, c, behind_log_start(1, 4, 100, 4));
    assert_reset_to(&out, 100, 4);
    assert_eq!(h.core.voters(), &[1, 2]);
}
