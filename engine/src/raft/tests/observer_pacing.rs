//! Observer fetch pacing (docs/protocol.md, "Observer fetch pacing"): a leader answers an
//! observer whose last answer gave it everything there was with records at most once per
//! interval.

use super::harness::*;
use crate::raft::*;

const INTERVAL: TimeMs = 20;
const OBSERVER: NodeId = 9;

/// A lone leader (epoch 2) pacing its observers, its LeaderChange record committed.
fn pacing_leader() -> Harness {
    let mut c = config(1, &[1]);
    c.observer_fetch_interval_ms = INTERVAL;
    let mut h = Harness::new(c, Some(stored(2, -1, 1, &[1])), log(0, &[])).elected(2);
    h.durable_all();
    assert_eq!(h.core.high_watermark(), Some(1));
    h
}

/// A fetch from `replica` at `offset` (last epoch 2 past the LeaderChange record).
fn fetch(h: &mut Harness, replica: NodeId, offset: Offset) -> (RequestId, Vec<Output>) {
    let mut request =
        Harness::fetch_request(replica, 2, offset, if offset > 0 { 2 } else { 0 }, offset);
    if let Request::FetchQuorumRecords(r) = &mut request {
        r.is_follower = h.core.voters().contains(&replica);
    }
    h.request(replica, request)
}

/// The answer to `id` in `out` and its batches' offsets, if it was answered.
fn answered(out: &[Output], id: RequestId) -> Option<Vec<Offset>> {
    responses(out)
        .into_iter()
        .find(|(r, _)| *r == id)
        .map(|(_, resp)| {
            fetch_of(&resp)
                .batches
                .iter()
                .map(|b| b.base_offset)
                .collect()
        })
}

/// [`pacing_leader`] whose observer, parked at 1, just got the record at 1: everything there
/// was, so its interval runs from now.
fn paced_after_a_whole_answer() -> Harness {
    let mut h = pacing_leader();
    let (first, _) = fetch(&mut h, OBSERVER, 1);
    let out = commit_one(&mut h, 1);
    assert_eq!(answered(&out, first), Some(vec![1]));
    h
}

/// [`paced_after_a_whole_answer`], appends `ids` committed within its interval, then the
/// observer's fetch at 2: the harness, when the interval started, and that fetch.
fn fetch_after_commits_within_the_interval(
    ids: std::ops::Range<u64>,
) -> (Harness, TimeMs, (RequestId, Vec<Output>)) {
    let mut h = paced_after_a_whole_answer();
    let start = h.now;
    for id in ids {
        commit_one(&mut h, id);
    }
    let fetched = fetch(&mut h, OBSERVER, 2);
    (h, start, fetched)
}

/// Appends one committed record (a lone leader commits on its own durability).
fn commit_one(h: &mut Harness, id: u64) -> Vec<Output> {
    let mut out = h.append(id, 1, Acks::Quorum);
    out.extend(h.durable_all());
    out
}

/// The observer gets the records of the first append at once (it had none within the
/// interval); its next fetch, caught up, waits out the interval although records arrive.
#[test]
fn a_caught_up_observer_gets_records_at_most_once_per_interval() {
    let mut h = pacing_leader();
    let (first, out) = fetch(&mut h, OBSERVER, 1);
    assert_eq!(answered(&out, first), None, "caught up: parked");
    let out = commit_one(&mut h, 1);
    assert_eq!(
        answered(&out, first),
        Some(vec![1]),
        "no records within the interval"
    );
    let start = h.now;
    let (second, out) = fetch(&mut h, OBSERVER, 2);
    assert_eq!(answered(&out, second), None);
    let out = commit_one(&mut h, 2);
    assert_eq!(
        answered(&out, second),
        None,
        "held: records came within the interval"
    );
    let out = h.run_until(start + INTERVAL - 1);
    assert_eq!(answered(&out, second), None);
    let out = h.run_until(start + INTERVAL);
    assert_eq!(answered(&out, second), Some(vec![2]), "the hold is over");
}

/// A fetch that arrives with records already waiting is held too, and the answer at the end
/// of the interval carries everything appended meanwhile.
#[test]
fn one_answer_carries_what_the_interval_appended() {
    let (mut h, start, (second, out)) = fetch_after_commits_within_the_interval(2..5);
    assert_eq!(
        answered(&out, second),
        None,
        "records wait, but so does the observer"
    );
    let out = h.run_until(start + INTERVAL);
    assert_eq!(answered(&out, second), Some(vec![2, 3, 4]));
}

/// Voters are never held: the high watermark waits for them.
#[test]
fn a_voter_is_answered_at_once() {
    let mut c = config(1, &[1, 2, 3]);
    c.observer_fetch_interval_ms = INTERVAL;
    let mut h = Harness::new(c, Some(stored(2, -1, 1, &[1, 2, 3])), log(0, &[])).elected(2);
    h.durable_all();
    fetch(&mut h, 2, 1);
    assert_eq!(h.core.high_watermark(), Some(1));
    let (voter, _) = fetch(&mut h, 2, 1);
    let out = h.append(1, 1, Acks::Quorum);
    assert_eq!(answered(&out, voter), Some(vec![1]));
    h.durable_all();
    // Within the interval, with records waiting: it takes them.
    h.append(2, 1, Acks::Quorum);
    h.durable_all();
    let (voter, out) = fetch(&mut h, 2, 2);
    assert_eq!(answered(&out, voter), Some(vec![2]));
}

/// An observer whose last answer the byte budget cut short is catching up: its next fetch
/// is answered at once, and only an answer that reaches the end starts an interval.
#[test]
fn an_observer_catching_up_is_not_held() {
    let mut c = config(1, &[1]);
    c.observer_fetch_interval_ms = INTERVAL;
    c.fetch_max_bytes = 1; // one batch an answer
    let mut h = Harness::new(c, Some(stored(2, -1, 1, &[1])), log(0, &[])).elected(2);
    h.durable_all();
    for id in 1..4 {
        commit_one(&mut h, id);
    }
    for offset in 1..4 {
        let (id, out) = fetch(&mut h, OBSERVER, offset);
        assert_eq!(
            answered(&out, id),
            Some(vec![offset]),
            "cut short, not held"
        );
    }
    // The last of those reached the end: now it waits out the interval.
    commit_one(&mut h, 4);
    let (id, out) = fetch(&mut h, OBSERVER, 4);
    assert_eq!(answered(&out, id), None);
}

/// A fetch that asked not to wait is answered at once, held or not.
#[test]
fn a_fetch_without_a_wait_is_never_held() {
    let mut h = paced_after_a_whole_answer();
    commit_one(&mut h, 2);
    let mut no_wait = Harness::fetch_request(OBSERVER, 2, 2, 2, 2);
    if let Request::FetchQuorumRecords(r) = &mut no_wait {
        r.is_follower = false;
        r.max_wait_ms = 0;
    }
    let (id, out) = h.request(OBSERVER, no_wait);
    assert_eq!(answered(&out, id), Some(vec![2]));
}

/// The interval ends exactly `INTERVAL` after the whole answer: a fetch arriving then takes
/// the records waiting in the same step.
#[test]
fn a_fetch_at_the_end_of_the_interval_is_answered_at_once() {
    let mut h = paced_after_a_whole_answer();
    commit_one(&mut h, 2);
    let end = h.now + INTERVAL;
    h.run_until(end);
    let (id, out) = fetch(&mut h, OBSERVER, 2);
    assert_eq!(answered(&out, id), Some(vec![2]));
}

/// A hold that ends with nothing new is an ordinary long poll for the rest of the fetch's
/// wait: the next append answers it at once, and no empty answer goes out in between.
#[test]
fn a_hold_with_nothing_new_becomes_a_long_poll() {
    let mut h = paced_after_a_whole_answer();
    let start = h.now;
    let (second, _) = fetch(&mut h, OBSERVER, 2);
    let out = h.run_until(start + 3 * INTERVAL);
    assert_eq!(answered(&out, second), None, "parked on after the hold");
    let out = commit_one(&mut h, 2);
    assert_eq!(answered(&out, second), Some(vec![2]));
}

/// An observer the reassignment wants is not held: its catch-up decides the next step.
#[test]
fn an_observer_of_the_target_is_not_held() {
    let mut h = paced_after_a_whole_answer();
    let voters = [(1, DirectoryId::ZERO), (OBSERVER, DirectoryId::ZERO)];
    let alter = AlterQuorumRequest::new(CLUSTER, voters, 60_000);
    h.request(-1, Request::AlterQuorum(alter));
    h.durable_all();
    let end = h.core.log_end_offset();
    assert!(end > 2, "the target record");
    let (second, out) = fetch(&mut h, OBSERVER, 2);
    assert!(
        answered(&out, second).is_some_and(|b| !b.is_empty()),
        "records at once: {out:?}"
    );
}

/// Without an interval (the default) an observer is answered like a voter.
#[test]
fn no_interval_no_hold() {
    let mut h = Harness::leader(1, &[1], 2, log(0, &[]));
    h.durable_all();
    let (first, _) = fetch(&mut h, OBSERVER, 1);
    let out = commit_one(&mut h, 1);
    assert!(answered(&out, first).is_some());
    let (second, _) = fetch(&mut h, OBSERVER, 2);
    let out = commit_one(&mut h, 2);
    assert_eq!(answered(&out, second), Some(vec![2]));
}

/// A paced observer stays caught up in the leader's view: each fetch reaches the end the
/// leader had at the one before (docs/protocol.md section 6), although the end has moved
/// by the time it arrives.
#[test]
fn a_paced_observer_under_steady_appends_is_reported_caught_up() {
    let mut h = pacing_leader();
    let (mut id, _) = fetch(&mut h, OBSERVER, 1);
    let mut next_append = 1;
    let mut offset = 1;
    let mut fetched_at = vec![h.now];
    for _ in 0..5 {
        // Appends keep coming while the observer's answer is held and while it writes.
        let out = h.run_until(h.now + INTERVAL);
        let mut got = answered(&out, id);
        if got.is_none() {
            let out = commit_one(&mut h, next_append);
            next_append += 1;
            got = answered(&out, id);
        }
        offset += got.expect("answered").len() as Offset;
        commit_one(&mut h, next_append);
        next_append += 1;
        assert!(offset < h.core.log_end_offset(), "the end moved on");
        id = fetch(&mut h, OBSERVER, offset).0;
        fetched_at.push(h.now);
    }
    let d = super::reassign::describe(&mut h);
    let observer = d
        .observers
        .iter()
        .find(|o| o.replica_id == OBSERVER)
        .unwrap();
    // Never at the end when it fetched, yet caught up as of its previous fetch (not only at
    // its first, which found nothing new).
    let previous = fetched_at[fetched_at.len() - 2];
    assert!(
        observer.last_caught_up_timestamp >= previous as i64,
        "caught up at its previous fetch ({previous}): {observer:?}"
    );
}

/// Retention moves the log start past a held fetch while it waits: at the end of the hold the
/// fetch is answered as one that arrives behind the start (OFFSET_OUT_OF_RANGE with the log
/// start), with no read of what retention deleted. The simulator found the read (seed
/// 64007096 with `--bootstrap-observers --delete-state --refresh-fetches --retention`).
#[test]
fn a_held_fetch_that_retention_passed_is_told_the_log_start() {
    let (mut h, start, (held, out)) = fetch_after_commits_within_the_interval(2..6);
    assert_eq!(answered(&out, held), None, "held");
    h.step(Input::LogStartMoved { start: 4 });
    assert_eq!(h.core.log_start_offset(), 4);
    let out = h.run_until(start + INTERVAL);
    assert!(
        !out.iter().any(|o| matches!(o, Output::ReadLog { .. })),
        "no read below the log start: {out:?}"
    );
    let (_, response) = responses(&out)
        .into_iter()
        .find(|(id, _)| *id == held)
        .expect("answered at the end of the hold");
    let answer = fetch_of(&response);
    assert_eq!(answer.error, ErrorCode::OFFSET_OUT_OF_RANGE);
    assert!(answer.batches.is_empty());
    assert_eq!(
        answer.log_start.map(|s| (s.offset, s.epoch)),
        Some((4, 2)),
        "the log start, in the epoch it is in"
    );
}
