//! FetchQuorumRecords behaviours that no test pinned until mutation testing showed it
//! (docs/testing.md, "Mutation testing"): the follower's checks on the batches an answer brings,
//! the back-off after an error answer, several log reads at once, a superseded long poll,
//! fetches that must not park, fetches to a node on its way out, anonymous fetchers and the
//! fields every answer carries. Each test names the change it catches.

use super::harness::*;
use super::quorum_epoch::elect;
use crate::raft::leader::LeaderState;
use crate::raft::*;

const VOTERS: &[NodeId] = &[1, 2, 3];
const FIVE: &[NodeId] = &[1, 2, 3, 4, 5];

/// A fetch request built by the harness, then changed by `edit`.
fn fetch(
    replica: NodeId,
    epoch: Epoch,
    offset: Offset,
    last_epoch: Epoch,
    durable: Offset,
    edit: impl FnOnce(&mut FetchQuorumRecordsRequest),
) -> Request {
    let Request::FetchQuorumRecords(mut r) =
        Harness::fetch_request(replica, epoch, offset, last_epoch, durable)
    else {
        unreachable!()
    };
    edit(&mut r);
    Request::FetchQuorumRecords(r)
}

/// A fetch from a process that names no replica (replica id -1) on an unauthenticated
/// connection, as a debugging tool sends it.
fn anonymous_fetch(h: &mut Harness, id: RequestId, epoch: Epoch, offset: Offset) -> Vec<Output> {
    let request = fetch(-1, epoch, offset, epoch, -1, |r| r.is_follower = false);
    h.step(Input::Request {
        id,
        from: Sender::Unverified,
        request,
    })
}

fn answers_to(out: &[Output], id: RequestId) -> Vec<FetchQuorumRecordsResponse> {
    responses(out)
        .into_iter()
        .filter(|r| r.0 == id)
        .map(|r| fetch_of(&r.1).clone())
        .collect()
}

fn read_logs(out: &[Output]) -> Vec<(u64, Offset)> {
    out.iter()
        .filter_map(|o| match o {
            Output::ReadLog {
                read_id,
                from_offset,
                ..
            } => Some((*read_id, *from_offset)),
            _ => None,
        })
        .collect()
}

fn appended(out: &[Output]) -> Vec<(Offset, Epoch)> {
    log_ops(out)
        .into_iter()
        .flat_map(|op| match op {
            LogOpKind::Append(b) => b
                .iter()
                .map(|b| (b.base_offset, b.epoch))
                .collect::<Vec<_>>(),
            _ => Vec::new(),
        })
        .collect()
}

/// A leader (epoch 2) whose LeaderChange record is durable and whose clock is at 100 ms.
fn quiet_leader() -> Harness {
    let (mut h, _) = elect(2);
    h.durable_all();
    h.run_until(100);
    h
}

// ----- the follower's checks on an answer's batches -----

/// Node 1 with `log`, following leader 2 of `epoch`, after the answer to its first fetch
/// brought `batches` (high watermark unknown).
fn follower_answered(
    epoch: Epoch,
    log: LogSnapshot,
    batches: Vec<Batch>,
) -> (Harness, Vec<Output>) {
    let (mut h, c) = Harness::follower(1, VOTERS, epoch, 2, log);
    let answer = Harness::fetch_response(2, epoch, batches, -1);
    let out = h.respond(2, c, Response::FetchQuorumRecords(answer));
    (h, out)
}

/// Caught: any `||` of the batch checks in `append_fetched` turned into `&&` (a gap let
/// through), and `!=` into `==`.
#[test]
fn a_follower_stops_at_a_batch_that_does_not_follow_on() {
    let (h, out) = follower_answered(2, log(0, &[]), vec![batch(0, 2, 3), batch(4, 2, 2)]);
    assert_eq!(appended(&out), vec![(0, 2)], "offset 3 is missing: stop");
    assert_eq!(h.core.log_end_offset(), 3);
    assert_eq!(fetch_sends(&out)[0].2.fetch_offset, 3);
}

/// Caught: `b.epoch < last_epoch` dropped or turned into `>` (a newer epoch refused).
#[test]
fn a_follower_refuses_a_batch_older_than_its_last_epoch_and_takes_newer_ones() {
    let (mut h, out) = follower_answered(4, log(3, &[(3, 0)]), vec![batch(3, 2, 1)]);
    assert!(appended(&out).is_empty(), "epoch 2 after epoch 3: {out:?}");
    assert_eq!(h.core.log_end_offset(), 3);
    let next = fetch_sends(&out)[0].1;
    // Epoch 3 again, then epoch 4 (the leader's): both follow on.
    let newer = Harness::fetch_response(2, 4, vec![batch(3, 3, 1), batch(4, 4, 2)], -1);
    let out = h.respond(2, next, Response::FetchQuorumRecords(newer));
    assert_eq!(appended(&out), vec![(3, 3), (4, 4)]);
    assert_eq!((h.core.log_end_offset(), h.core.last_epoch()), (6, 4));
}

/// Caught: `b.epoch > leader_epoch` dropped or turned into `<` (an older epoch than the
/// leader's refused).
#[test]
fn a_follower_refuses_a_batch_of_an_epoch_past_the_leaders() {
    let (h, out) = follower_answered(3, log(0, &[]), vec![batch(0, 2, 1), batch(1, 4, 1)]);
    assert_eq!(appended(&out), vec![(0, 2)], "epoch 4 from the leader of 3");
    assert_eq!(h.core.log_end_offset(), 1);
}

// ----- back-off after an error answer -----

/// Caught: `retry_fetch_later` deleted, or any of its conditions inverted: without the
/// scheduled retry the follower would fetch again at once, for as long as the leader answers
/// with an error.
#[test]
fn an_error_answer_is_followed_by_a_back_off_then_a_fetch() {
    let (mut h, c) = Harness::follower(1, VOTERS, 2, 2, log(0, &[]));
    let r = Harness::fetch_error_response(2, 2, -1, ErrorCode::NOT_LEADER_OR_FOLLOWER);
    let out = h.respond(2, c, Response::FetchQuorumRecords(r));
    assert!(fetch_sends(&out).is_empty(), "not at once: {out:?}");
    let backoff_max = h.core.config.retry_backoff_max_ms;
    let out = h.run_until(h.now + backoff_max);
    let again = fetch_sends(&out);
    assert_eq!(again.len(), 1, "one fetch after the back-off: {out:?}");
    assert_eq!((again[0].0, again[0].2.fetch_offset), (2, 0));
    assert_eq!(h.core.role(), Role::Follower);
}

// ----- the leader: several log reads at once -----

/// Caught: `next_read_id += 1` turned into `*= 1` or `-= 1` (two reads under one id: the first
/// fetcher is never answered).
#[test]
fn two_lagging_followers_reading_the_log_at_once_are_both_answered() {
    let mut h = Harness::leader(1, FIVE, 2, log(9, &[(1, 0)]));
    let (a, out_a) = h.request(2, Harness::fetch_request(2, 2, 2, 1, 2));
    let (b, out_b) = h.request(3, Harness::fetch_request(3, 2, 5, 1, 5));
    let (ra, rb) = (read_logs(&out_a), read_logs(&out_b));
    assert_eq!((ra.len(), rb.len()), (1, 1), "{out_a:?} {out_b:?}");
    assert_eq!((ra[0].1, rb[0].1), (2, 5));
    assert_ne!(ra[0].0, rb[0].0, "one read id per read");
    // The later read finishes first.
    let out = h.step(Input::LogReadDone {
        read_id: rb[0].0,
        batches: vec![batch(5, 1, 4)],
    });
    let answer_b = answers_to(&out, b);
    assert_eq!(answer_b.len(), 1, "{out:?}");
    assert_eq!(answer_b[0].batches[0].base_offset, 5);
    let out = h.step(Input::LogReadDone {
        read_id: ra[0].0,
        batches: vec![batch(2, 1, 3)],
    });
    let answer_a = answers_to(&out, a);
    assert_eq!(
        answer_a.len(),
        1,
        "the first reader is answered too: {out:?}"
    );
    assert_eq!(answer_a[0].batches[0].base_offset, 2);
}

// ----- long polls -----

/// Caught: `supersede_parked_fetch` deleted, or its `replica_id < 0` turned into `> 0`.
#[test]
fn a_newer_fetch_from_a_replica_answers_its_parked_one_at_once() {
    let mut h = quiet_leader();
    let (first, out) = h.request(2, Harness::fetch_request(2, 2, 1, 2, 0));
    assert!(answers_to(&out, first).is_empty(), "caught up: parked");
    let (second, out) = h.request(2, Harness::fetch_request(2, 2, 1, 2, 0));
    let old = answers_to(&out, first);
    assert_eq!(old.len(), 1, "the older one is answered: {out:?}");
    assert_eq!((old[0].error, old[0].batches.len()), (ErrorCode::NONE, 0));
    assert!(answers_to(&out, second).is_empty(), "the newer one waits");
    // Another replica's parked fetch is not touched by it.
    let (third, _) = h.request(3, Harness::fetch_request(3, 2, 1, 2, 0));
    let (_, out) = h.request(2, Harness::fetch_request(2, 2, 1, 2, 0));
    assert_eq!(answers_to(&out, second).len(), 1);
    assert!(answers_to(&out, third).is_empty());
}

/// Caught: `replica_id < 0` in `supersede_parked_fetch` turned into `<= 0` (replica 0 never
/// superseded) or `== 0`/`> 0` (anonymous fetchers, who are many processes, superseding each
/// other).
#[test]
fn replica_0_supersedes_its_own_parked_fetch_and_anonymous_fetches_never_do() {
    let mut h = quiet_leader();
    let observer = |r: &mut FetchQuorumRecordsRequest| r.is_follower = false;
    let (first, _) = h.request(0, fetch(0, 2, 1, 2, -1, observer));
    let (_, out) = h.request(0, fetch(0, 2, 1, 2, -1, observer));
    assert_eq!(answers_to(&out, first).len(), 1, "replica 0 is a replica");

    let out = anonymous_fetch(&mut h, 1_001, 2, 1);
    assert!(answers_to(&out, 1_001).is_empty(), "parked");
    let out = anonymous_fetch(&mut h, 1_002, 2, 1);
    assert!(
        answers_to(&out, 1_001).is_empty(),
        "two anonymous fetchers are two processes: {out:?}"
    );
    // Both are answered at their deadline, MaxWait (500 ms) after they came.
    let out = h.run_until(h.now + 500);
    assert_eq!(answers_to(&out, 1_001).len(), 1);
    assert_eq!(answers_to(&out, 1_002).len(), 1);
}

/// Caught: `max_wait_ms > 0` turned into `>= 0` and `&&` into `||` in `handle_fetch`, and the
/// admission check `max_wait_ms < 0` turned into `<= 0` (MaxWait 0 refused as invalid).
#[test]
fn a_fetch_with_no_wait_is_answered_at_once() {
    let mut h = quiet_leader();
    let (id, out) = h.request(2, fetch(2, 2, 1, 2, 0, |r| r.max_wait_ms = 0));
    let answer = answers_to(&out, id);
    assert_eq!(answer.len(), 1, "{out:?}");
    assert_eq!(
        (answer[0].error, answer[0].batches.len()),
        (ErrorCode::NONE, 0)
    );
}

/// Caught: `now + wait` turned into `now * wait` or `now - wait`, and the cap on the wait
/// removed: the answer comes exactly when the wait (at most the fetch timeout) runs out.
#[test]
fn a_parked_fetch_is_answered_when_its_wait_runs_out_and_never_later_than_the_fetch_timeout() {
    let mut h = quiet_leader();
    let start = h.now;
    let (short, _) = h.request(2, fetch(2, 2, 1, 2, 0, |r| r.max_wait_ms = 30));
    let (long, _) = h.request(3, fetch(3, 2, 1, 2, 0, |r| r.max_wait_ms = i32::MAX));
    assert!(answers_to(&h.run_until(start + 29), short).is_empty());
    assert_eq!(answers_to(&h.run_until(start + 30), short).len(), 1);
    let fetch_timeout = h.core.config.fetch_timeout_ms;
    assert!(answers_to(&h.run_until(start + fetch_timeout - 1), long).is_empty());
    assert_eq!(
        answers_to(&h.run_until(start + fetch_timeout), long).len(),
        1,
        "capped at the fetch timeout"
    );
}

/// Caught: the `!` of `!hw_advanced` deleted. A fetch whose durable offset moves the high
/// watermark is answered at once, so the follower learns it.
#[test]
fn a_fetch_that_advances_the_high_watermark_is_answered_at_once_with_it() {
    let mut h = quiet_leader();
    assert_eq!(h.core.high_watermark(), None);
    let (id, out) = h.request(2, Harness::fetch_request(2, 2, 1, 2, 1));
    let answer = answers_to(&out, id);
    assert_eq!(answer.len(), 1, "{out:?}");
    assert_eq!(answer[0].high_watermark, 1);
    // Nothing new to vouch for: parked.
    let (id, out) = h.request(2, Harness::fetch_request(2, 2, 1, 2, 1));
    assert!(answers_to(&out, id).is_empty());
}

// ----- fetches to a node on its way out -----

/// Caught: `is_shutting_down() || gave_up` turned into `&&`. A resigned leader (restarted) and
/// a node that moved to a newer epoch while shutting down both answer BROKER_NOT_AVAILABLE: they
/// will not serve, and an observer told so looks for the leader again.
#[test]
fn fetches_to_a_resigned_or_departing_node_are_answered_broker_not_available() {
    // Restarted after leading epoch 2: Resigned, not shutting down.
    let mut h = Harness::restarted_with(2, 1, -1, log(1, &[(2, 0)]));
    h.tick();
    assert_eq!(h.core.role(), Role::Resigned);
    let (id, out) = h.request(2, Harness::fetch_request(2, 2, 1, 2, 1));
    assert_eq!(
        answers_to(&out, id)[0].error,
        ErrorCode::BROKER_NOT_AVAILABLE
    );

    // A leader shutting down, then moved on to epoch 3 by a vote: not the one who gave up
    // epoch 3, but still on its way out.
    let (mut h, _) = elect(2);
    h.step(Input::Shutdown);
    assert_eq!(h.core.role(), Role::Resigned);
    let leo = h.core.log_end_offset();
    h.request(3, Harness::vote_request(3, 3, 2, leo));
    assert_eq!((h.core.epoch(), h.core.role()), (3, Role::Voted));
    let (id, out) = h.request(2, Harness::fetch_request(2, 3, 0, 0, 0));
    assert_eq!(
        answers_to(&out, id)[0].error,
        ErrorCode::BROKER_NOT_AVAILABLE
    );
}

// ----- who progress is recorded for -----

fn observers_listed(h: &mut Harness) -> Vec<NodeId> {
    let (_, out) = h.request(0, Request::DescribeQuorum(DescribeQuorumRequest {}));
    match &responses(&out)[0].1 {
        Response::DescribeQuorum(r) => r.observers.iter().map(|o| o.replica_id).collect(),
        other => panic!("{other:?}"),
    }
}

/// Caught: `replica_id >= 0 && replica_id != local` turned into `||`. An anonymous fetcher
/// (-1) and a fetch naming the leader itself are served, but nobody's progress.
#[test]
fn anonymous_fetches_and_fetches_naming_the_leader_record_no_progress() {
    let mut h = quiet_leader();
    anonymous_fetch(&mut h, 1_001, 2, 0);
    h.request(1, fetch(1, 2, 0, 0, -1, |r| r.is_follower = false));
    h.request(9, fetch(9, 2, 0, 0, -1, |r| r.is_follower = false));
    assert_eq!(observers_listed(&mut h), vec![9]);
}

// ----- what every answer carries -----

/// Caught: `delete -` on the constants of `respond_fetch` (-1 = none/unknown on the wire,
/// docs/protocol.md, "FetchQuorumRecords"): no divergence, no high watermark yet, and the two
/// fields this implementation does not carry.
#[test]
fn a_plain_fetch_answer_names_no_divergence_and_carries_no_dirty_offset_or_caught_up_time() {
    let (mut h, _) = elect(2);
    assert_eq!(h.core.high_watermark(), None);
    let (id, out) = h.request(2, fetch(2, 2, 0, 0, 0, |r| r.max_wait_ms = 0));
    let r = &answers_to(&out, id)[0];
    assert_eq!(r.error, ErrorCode::NONE);
    assert_eq!(r.batches.len(), 1, "the LeaderChange record");
    assert_eq!((r.next_fetch_offset, r.next_fetch_offset_epoch), (-1, -1));
    assert_eq!(r.high_watermark, -1, "no HW yet");
    assert_eq!((r.first_dirty_offset, r.last_caught_up_time_ms), (-1, -1));
    // An error answer carries the same.
    let (id, out) = h.request(2, Harness::fetch_request(2, 1, 0, 0, 0));
    let r = &answers_to(&out, id)[0];
    assert_eq!(r.error, ErrorCode::FENCED_LEADER_EPOCH);
    assert_eq!(fetch_positions(r), (-1, -1, -1, -1, -1));
}

// ----- the leader's record of a replica's progress (leader.rs) -----

/// Caught: `fetch_offset >= leader_end` in `record_fetch` turned into `<` (or the caught-up
/// time set on every fetch). Metadata's in-sync replicas and DescribeQuorum rest on it.
#[test]
fn last_caught_up_is_the_last_fetch_at_the_leaders_end() {
    let mut l = LeaderState::new(2, 0, 1, &[1, 2, 3], 0);
    l.record_fetch(2, true, 3, 3, 5, 10);
    assert_eq!(l.voters[&2].last_caught_up_ms, None, "3 of 5: behind");
    l.record_fetch(2, true, 5, 5, 5, 20);
    assert_eq!(l.voters[&2].last_caught_up_ms, Some(20), "at the end");
    l.record_fetch(2, true, 5, 5, 8, 30);
    assert_eq!(l.voters[&2].last_caught_up_ms, Some(20), "behind again");
    assert_eq!(l.voters[&2].last_fetch_ms, Some(30));
    l.record_fetch(9, false, 8, -1, 8, 40);
    assert_eq!(l.observers[&9].last_caught_up_ms, Some(40));
}

// ----- pipelining: the durable-offset refresh -----

/// A follower of 2 in epoch 2 that appended offsets 0..3 (op 1) and 3..5 (op 2), none durable
/// yet, with its fetch at (5, 2) outstanding: returns it and that fetch's correlation.
fn follower_with_two_appends_pending() -> (Harness, Correlation) {
    let (mut h, c) = Harness::follower(1, VOTERS, 2, 2, log(0, &[]));
    let out = h.respond(
        2,
        c,
        Response::FetchQuorumRecords(Harness::fetch_response(2, 2, vec![batch(0, 2, 3)], -1)),
    );
    let next = fetch_sends(&out)[0].1;
    let out = h.respond(
        2,
        next,
        Response::FetchQuorumRecords(Harness::fetch_response(2, 2, vec![batch(3, 2, 2)], -1)),
    );
    let pending = fetch_sends(&out);
    assert_eq!((pending.len(), pending[0].2.fetch_offset), (1, 5));
    assert_eq!(h.core.durable_end_offset(), 0);
    (h, pending[0].1)
}

/// Caught: the `forget` of a refresh widened (`&&` into `||`, `!=` into `==`): the fetch the
/// refresh supersedes is at the same position, and its answer, if it comes first, is used.
#[test]
fn after_a_durable_refresh_the_fetch_it_supersedes_is_still_answered() {
    let (mut h, older) = follower_with_two_appends_pending();
    let out = h.step(Input::LogDurable { up_to_seq: 1 });
    let refresh = fetch_sends(&out);
    assert_eq!(refresh.len(), 1, "{out:?}");
    assert_eq!(
        (refresh[0].2.fetch_offset, refresh[0].2.durable_offset),
        (5, 3)
    );
    let out = h.respond(
        2,
        older,
        Response::FetchQuorumRecords(Harness::fetch_response(2, 2, vec![batch(5, 2, 1)], 3)),
    );
    assert_eq!(appended(&out), vec![(5, 2)], "the older answer counts");
    assert_eq!(h.core.high_watermark(), Some(3));
}

/// Caught: `keep_newest(|f| f.kind == current)` turned into `!=`: each refresh sends one more
/// fetch and drops all but the newest before it, so at most two are in flight and the oldest
/// one's answer is dropped.
#[test]
fn a_second_durable_refresh_drops_the_oldest_fetch() {
    let (mut h, oldest) = follower_with_two_appends_pending();
    let first = fetch_sends(&h.step(Input::LogDurable { up_to_seq: 1 }));
    let second = fetch_sends(&h.durable_all());
    assert_eq!((first.len(), second.len()), (1, 1));
    assert_eq!(second[0].2.durable_offset, 5);
    let out = h.respond(
        2,
        oldest,
        Response::FetchQuorumRecords(Harness::fetch_response(2, 2, vec![batch(5, 2, 1)], 3)),
    );
    assert!(appended(&out).is_empty(), "dropped: {out:?}");
    // The refreshes are in flight, and the newer one is answered.
    let out = h.respond(
        2,
        second[0].1,
        Response::FetchQuorumRecords(Harness::fetch_response(2, 2, vec![batch(5, 2, 1)], 5)),
    );
    assert_eq!(appended(&out), vec![(5, 2)]);
}

/// Caught: `durable <= sent_durable` turned into `>`: no refresh when nothing new is durable.
#[test]
fn no_refresh_when_nothing_new_is_durable() {
    let (mut h, _) = follower_with_two_appends_pending();
    assert_eq!(
        fetch_sends(&h.step(Input::LogDurable { up_to_seq: 1 })).len(),
        1
    );
    let out = h.step(Input::LogDurable { up_to_seq: 1 });
    assert!(fetch_sends(&out).is_empty(), "{out:?}");
}

/// Caught: in `on_request_failure`, `&&` turned into `||` in a failed fetch's "current"
/// position, and `fetching_from().is_none() || !current` into `&&`. The older of two fetches
/// at (5, 2) is answered, so the follower appends and fetches at (6, 2); the other fetch at
/// (5, 2), stale now, then fails: its failure changes nothing, and the answer to the fetch at
/// (6, 2) is still used.
#[test]
fn a_stale_fetch_that_fails_leaves_the_current_one_in_flight() {
    let (mut h, older) = follower_with_two_appends_pending();
    let refresh = fetch_sends(&h.step(Input::LogDurable { up_to_seq: 1 }));
    assert_eq!(refresh.len(), 1);
    let out = h.respond(
        2,
        older,
        Response::FetchQuorumRecords(Harness::fetch_response(2, 2, vec![batch(5, 2, 1)], 3)),
    );
    assert_eq!(appended(&out), vec![(5, 2)]);
    let current = fetch_sends(&out);
    assert_eq!(
        (current.len(), current[0].2.fetch_offset),
        (1, 6),
        "{out:?}"
    );
    h.step(Input::RequestFailed {
        to: 2,
        correlation: refresh[0].1,
    });
    let out = h.respond(
        2,
        current[0].1,
        Response::FetchQuorumRecords(Harness::fetch_response(2, 2, vec![batch(6, 2, 1)], 3)),
    );
    assert_eq!(appended(&out), vec![(6, 2)], "{out:?}");
}

// ----- the follower's answer handling -----

/// Caught: `point < hw` in `truncate_diverged` turned into `<=`: truncating to exactly the high
/// watermark keeps everything committed and is allowed.
#[test]
fn a_follower_may_truncate_to_exactly_its_high_watermark() {
    let (mut h, c) = Harness::follower(1, VOTERS, 2, 2, log(5, &[(1, 0)]));
    let out = h.respond(
        2,
        c,
        Response::FetchQuorumRecords(Harness::fetch_response(2, 2, vec![], 3)),
    );
    assert_eq!(h.core.high_watermark(), Some(3));
    let next = fetch_sends(&out)[0].1;
    let mut r = Harness::fetch_response(2, 2, vec![], 3);
    (r.next_fetch_offset, r.next_fetch_offset_epoch) = (3, 1);
    let out = h.respond(2, next, Response::FetchQuorumRecords(r));
    assert!(!has_fatal(&out), "{out:?}");
    assert!(matches!(log_ops(&out)[..], [LogOpKind::TruncateTo(3)]));
}

/// Caught: `hw > h` turned into `>=`: a high watermark is reported when it grows, not again.
#[test]
fn the_same_high_watermark_twice_is_reported_once() {
    let (mut h, c) = Harness::follower(1, VOTERS, 2, 2, log(5, &[(1, 0)]));
    let out = h.respond(
        2,
        c,
        Response::FetchQuorumRecords(Harness::fetch_response(2, 2, vec![], 4)),
    );
    assert_eq!(hw_outputs(&out), vec![4]);
    let next = fetch_sends(&out)[0].1;
    let out = h.respond(
        2,
        next,
        Response::FetchQuorumRecords(Harness::fetch_response(2, 2, vec![], 4)),
    );
    assert!(hw_outputs(&out).is_empty(), "{out:?}");
    assert_eq!(fetch_sends(&out).len(), 1, "and it fetches again");
}

/// Caught: `error == OFFSET_OUT_OF_RANGE && next_fetch_offset_epoch >= 0` turned into `||`:
/// only with a truncation point is the first draft's OFFSET_OUT_OF_RANGE a divergence; without
/// one it is an error answer (back-off, no fetch at once).
#[test]
fn offset_out_of_range_without_a_truncation_point_is_an_error() {
    let (mut h, c) = Harness::follower(1, VOTERS, 2, 2, log(3, &[(1, 0)]));
    let r = Harness::fetch_error_response(2, 2, 2, ErrorCode::OFFSET_OUT_OF_RANGE);
    let out = h.respond(2, c, Response::FetchQuorumRecords(r));
    assert!(fetch_sends(&out).is_empty(), "{out:?}");
    assert!(hw_outputs(&out).is_empty() && log_ops(&out).is_empty());
}

/// Caught: the guard `self.qs.fetching_from().is_some()` in `on_log_durable` made true (a
/// node that fetches from nobody would refresh a fetch it never sent). A follower whose
/// appends become durable only after it stood as a candidate just records them durable.
#[test]
fn appends_made_durable_after_the_follower_stood_refresh_nothing() {
    let (h, _) = follower_with_two_appends_pending();
    let mut h = h.without_pre_vote();
    h.run_until(h.now + 5_000);
    assert_eq!(h.core.role(), Role::Candidate);
    let out = h.durable_all();
    assert!(fetch_sends(&out).is_empty(), "{out:?}");
    assert_eq!(h.core.durable_end_offset(), 5);
}

/// Caught: the body of `Outbound::forget` deleted. After a failed fetch the follower starts
/// over: the answer to the other fetch it had in flight (the durable refresh) is dropped, and
/// one fetch goes out after the backoff.
#[test]
fn after_a_failed_fetch_the_other_fetch_in_flight_is_dropped() {
    let (mut h, older) = follower_with_two_appends_pending();
    let refresh = fetch_sends(&h.step(Input::LogDurable { up_to_seq: 1 }));
    assert_eq!(refresh.len(), 1);
    h.step(Input::RequestFailed {
        to: 2,
        correlation: older,
    });
    let out = h.respond(
        2,
        refresh[0].1,
        Response::FetchQuorumRecords(Harness::fetch_response(2, 2, vec![batch(5, 2, 1)], 3)),
    );
    assert!(appended(&out).is_empty(), "dropped: {out:?}");
    let out = h.run_until(h.now + 1_000);
    let again = fetch_sends(&out);
    assert_eq!(again.len(), 1, "{out:?}");
    assert_eq!(again[0].2.fetch_offset, 5);
}
