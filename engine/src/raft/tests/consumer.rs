//! A consumer's read (ClientFetch) and the queries of ListOffsets and OffsetForLeaderEpoch
//! (docs/protocol.md section 16).

use super::harness::*;
use super::quorum_epoch::elect;
use crate::raft::*;

const VOTERS: &[NodeId] = &[1, 2, 3];

/// A consumer fetch at `offset` that answers at once with whatever there is.
fn at(offset: Offset) -> ClientFetch {
    ClientFetch {
        fetch_offset: offset,
        last_fetched_epoch: None,
        current_leader_epoch: None,
        max_wait_ms: 0,
        min_bytes: 0,
        max_bytes: 1 << 20,
    }
}

/// The same, waiting up to `wait` ms for `min_bytes`.
fn polling(offset: Offset, min_bytes: usize, wait: u64) -> ClientFetch {
    ClientFetch {
        max_wait_ms: wait,
        min_bytes,
        ..at(offset)
    }
}

fn fetch(h: &mut Harness, id: u64, f: ClientFetch) -> Vec<Output> {
    h.step(Input::ClientFetch { id, fetch: f })
}

fn done(out: &[Output]) -> Vec<(u64, ClientFetchResult)> {
    out.iter()
        .filter_map(|o| match o {
            Output::ClientFetchDone { id, result } => Some((*id, result.clone())),
            _ => None,
        })
        .collect()
}

/// The one answer in `out`, for `id`.
fn only(out: &[Output], id: u64) -> ClientFetchResult {
    match &done(out)[..] {
        [(got, r)] if *got == id => r.clone(),
        other => panic!("expected one answer for {id}, got {other:?}"),
    }
}

fn reads(out: &[Output]) -> Vec<(u64, Offset, usize)> {
    out.iter()
        .filter_map(|o| match o {
            Output::ReadLog {
                read_id,
                from_offset,
                max_bytes,
            } => Some((*read_id, *from_offset, *max_bytes)),
            _ => None,
        })
        .collect()
}

fn spans(batches: &[Batch]) -> Vec<(Offset, Offset)> {
    batches
        .iter()
        .map(|b| (b.base_offset, b.end_offset()))
        .collect()
}

fn append(h: &mut Harness, id: u64, count: u32) -> Vec<Output> {
    h.append(id, count, Acks::Leader)
}

/// A lone voter leading epoch 1 with the LeaderChange at 0 and `batches` two-record batches
/// after it, all committed (HW = 1 + 2 * batches).
fn lone_leader(batches: u32) -> Harness {
    let mut h = Harness::leader(1, &[1], 1, log(0, &[]));
    for i in 0..batches {
        append(&mut h, u64::from(i), 2);
    }
    h.durable_all();
    assert_eq!(h.core.high_watermark(), Some(Offset::from(1 + 2 * batches)));
    h
}

/// Leader 1 of epoch 2 among three voters, LeaderChange at 0, three two-record batches
/// (1..3, 3..5, 5..7) durable on the leader, and voter 2 durable up to `durable` (the HW).
fn leader_with_hw(durable: Offset) -> Harness {
    let (mut h, _) = elect(2);
    for i in 0..3 {
        append(&mut h, i, 2);
    }
    h.durable_all();
    let (_, out) = h.request(2, Harness::fetch_request(2, 2, durable, 2, durable));
    assert_eq!(hw_outputs(&out), vec![durable]);
    h
}

// ----- who serves -----

#[test]
fn only_the_leader_serves_others_answer_at_once_with_the_leader_they_know() {
    let (mut h, _) = Harness::follower(1, VOTERS, 2, 2, log(0, &[]));
    let r = only(&fetch(&mut h, 7, at(0)), 7);
    assert_eq!(r.error, ErrorCode::NOT_LEADER_OR_FOLLOWER);
    assert_eq!((r.leader_id, r.leader_epoch), (2, 2));
    assert_eq!((r.high_watermark, r.log_start_offset), (-1, -1));
    assert!(r.batches.is_empty() && r.diverging_epoch.is_none());

    let mut h = Harness::unattached(3, log(0, &[]));
    let r = only(&fetch(&mut h, 8, at(0)), 8);
    assert_eq!(r.error, ErrorCode::NOT_LEADER_OR_FOLLOWER);
    assert_eq!((r.leader_id, r.leader_epoch), (-1, 3), "no leader known");
    assert_eq!(
        h.core.consumer_offsets(None),
        Err(ReadRefused::NotLeader {
            leader_id: -1,
            leader_epoch: 3
        })
    );
}

#[test]
fn a_resigned_leader_points_nowhere() {
    // Restarted as leader of epoch 4: Resigned, its stored leader id is itself.
    let mut h = Harness::restarted_and_ticked(4, 1, -1);
    assert_eq!(h.core.role(), Role::Resigned);
    let r = only(&fetch(&mut h, 1, at(0)), 1);
    assert_eq!(r.error, ErrorCode::NOT_LEADER_OR_FOLLOWER);
    assert_eq!(r.leader_id, -1);
}

#[test]
fn the_current_leader_epoch_is_fenced_both_ways() {
    let mut h = leader_with_hw(3);
    let older = ClientFetch {
        current_leader_epoch: Some(1),
        ..at(0)
    };
    let r = only(&fetch(&mut h, 1, older), 1);
    assert_eq!(r.error, ErrorCode::FENCED_LEADER_EPOCH);
    assert_eq!(r.error.0, 74);
    assert_eq!((r.leader_id, r.leader_epoch), (1, 2));
    let newer = ClientFetch {
        current_leader_epoch: Some(3),
        ..at(0)
    };
    let r = only(&fetch(&mut h, 2, newer), 2);
    assert_eq!(r.error, ErrorCode::UNKNOWN_LEADER_EPOCH);
    assert!(r.batches.is_empty());
    let same = ClientFetch {
        current_leader_epoch: Some(2),
        ..at(0)
    };
    assert_eq!(only(&fetch(&mut h, 3, same), 3).error, ErrorCode::NONE);
    assert_eq!(
        h.core.list_offsets(Some(1), OffsetSpec::Latest),
        Err(ReadRefused::FencedLeaderEpoch {
            requested: 1,
            leader_id: 1,
            leader_epoch: 2
        })
    );
    let unknown = h.core.offset_for_leader_epoch(Some(3), 2).unwrap_err();
    assert_eq!(unknown.error_code(), ErrorCode::UNKNOWN_LEADER_EPOCH);
    assert_eq!((unknown.leader_id(), unknown.leader_epoch()), (1, 2));
}

// ----- what is served -----

#[test]
fn only_batches_wholly_below_the_high_watermark_are_served() {
    let mut h = leader_with_hw(3);
    let r = only(&fetch(&mut h, 1, at(0)), 1);
    assert_eq!(r.error, ErrorCode::NONE);
    assert_eq!(
        spans(&r.batches),
        vec![(0, 1), (1, 3)],
        "5..7 is not committed"
    );
    assert_eq!((r.high_watermark, r.log_start_offset), (3, 0));
    assert_eq!((r.leader_id, r.leader_epoch), (1, 2));
    // From inside a batch: the batch holding the offset, whole.
    let r = only(&fetch(&mut h, 2, at(2)), 2);
    assert_eq!(spans(&r.batches), vec![(1, 3)]);
}

#[test]
fn the_log_start_and_the_high_watermark_bound_the_offsets() {
    let mut h = leader_with_hw(3);
    let r = only(&fetch(&mut h, 1, at(0)), 1);
    assert_eq!(
        r.batches[0].base_offset, 0,
        "the log start itself is served"
    );
    for (id, offset) in [(2, -1), (3, 8), (4, i64::MAX), (5, i64::MIN)] {
        let r = only(&fetch(&mut h, id, at(offset)), id);
        assert_eq!(r.error, ErrorCode::OFFSET_OUT_OF_RANGE, "offset {offset}");
        assert_eq!((r.log_start_offset, r.high_watermark), (0, 3), "the bounds");
        assert!(r.batches.is_empty());
    }
    // At the HW, and between the HW and the log end (7): no records, no error.
    for (id, offset) in [(6, 3), (7, 5), (8, 7)] {
        let r = only(&fetch(&mut h, id, at(offset)), id);
        assert_eq!(r.error, ErrorCode::NONE, "offset {offset}");
        assert!(r.batches.is_empty(), "offset {offset}");
    }
}

#[test]
fn max_bytes_is_a_budget_but_one_whole_batch_always_goes() {
    let mut h = lone_leader(3);
    let first = only(&fetch(&mut h, 1, at(1)), 1).batches[0].bytes.len();
    for (id, max_bytes, expect) in [
        (2, 0, 1),
        (3, 1, 1),
        (4, first, 1),
        (5, 2 * first, 2),
        (6, 1 << 20, 3),
    ] {
        let f = ClientFetch { max_bytes, ..at(1) };
        let r = only(&fetch(&mut h, id, f), id);
        assert_eq!(r.batches.len(), expect, "max bytes {max_bytes}");
        assert_eq!(r.batches[0].base_offset, 1);
    }
}

#[test]
fn the_core_fetch_budget_caps_a_consumer_s_max_bytes() {
    let mut cfg = config(1, &[1]);
    cfg.tail_cache_bytes = 1;
    let mut h = Harness::new(cfg, Some(stored(1, -1, 1, &[1])), log(0, &[]));
    h.tick();
    for i in 0..3 {
        append(&mut h, i, 2);
    }
    h.durable_all();
    let f = ClientFetch {
        max_bytes: usize::MAX,
        ..at(0)
    };
    let out = fetch(&mut h, 1, f);
    assert_eq!(
        reads(&out),
        vec![(1, 0, 1 << 20)],
        "capped at fetch_max_bytes"
    );
}

#[test]
fn divergence_is_answered_with_the_largest_epoch_at_or_below_and_its_end() {
    // Epochs 1 at 0, 3 at 5, and the leader's own 4 at 10 (LeaderChange), LEO 11.
    let mut h = Harness::leader(1, &[1], 4, log(10, &[(1, 0), (3, 5)]));
    h.durable_all();
    assert_eq!(h.core.high_watermark(), Some(11));
    let with = |offset, epoch| ClientFetch {
        last_fetched_epoch: Some(epoch),
        ..at(offset)
    };
    // Epoch 1 ends at 5, below the fetch offset 7.
    let r = only(&fetch(&mut h, 1, with(7, 1)), 1);
    assert_eq!(r.error, ErrorCode::NONE);
    assert_eq!(
        r.diverging_epoch,
        Some(OffsetAndEpoch {
            offset: 5,
            epoch: 1
        })
    );
    assert!(r.batches.is_empty());
    assert_eq!(r.high_watermark, 11);
    // Epoch 2 was never a leader's here: the largest below it is 1, ending at 5.
    let r = only(&fetch(&mut h, 2, with(5, 2)), 2);
    assert_eq!(
        r.diverging_epoch,
        Some(OffsetAndEpoch {
            offset: 5,
            epoch: 1
        })
    );
    // Epoch 1 up to its end: consistent (no batch is stored at 5 in this harness, so the
    // answer is a log read, not a divergence).
    let out = fetch(&mut h, 3, with(5, 1));
    assert!(done(&out).is_empty());
    assert_eq!(reads(&out).len(), 1);
    // Epoch 4 (the latest) ends at the log end.
    let r = only(&fetch(&mut h, 4, with(11, 4)), 4);
    assert_eq!(r.diverging_epoch, None);
    assert_eq!(r.error, ErrorCode::NONE);
    // Epoch 5 is newer than any: the latest, 4, ending at 11.
    let r = only(&fetch(&mut h, 5, with(11, 5)), 5);
    assert_eq!(
        r.diverging_epoch,
        Some(OffsetAndEpoch {
            offset: 11,
            epoch: 4
        })
    );
    // Epoch 0 predates the whole log: out of range, not "truncate to 0".
    let r = only(&fetch(&mut h, 6, with(3, 0)), 6);
    assert_eq!(r.error, ErrorCode::OFFSET_OUT_OF_RANGE);
    assert_eq!(r.diverging_epoch, None);
    // At offset 0 of a log that starts at 0 the epoch is checked too (caught: the log-start
    // exemption's `start_offset() > 0` turned into `>= 0`): epoch 5 is newer than any.
    let r = only(&fetch(&mut h, 7, with(0, 5)), 7);
    assert_eq!(
        r.diverging_epoch,
        Some(OffsetAndEpoch {
            offset: 11,
            epoch: 4
        })
    );
}

// ----- long poll -----

#[test]
fn min_bytes_is_met_by_two_appends() {
    let mut h = lone_leader(1);
    let size = only(&fetch(&mut h, 1, at(1)), 1).batches[0].bytes.len();
    // Waiting at the HW (3) for more than one batch's worth.
    let out = fetch(&mut h, 2, polling(3, size + size / 2, 500));
    assert!(done(&out).is_empty(), "parked");
    append(&mut h, 10, 2);
    let out = h.durable_all();
    assert_eq!(hw_outputs(&out), vec![5]);
    assert!(done(&out).is_empty(), "one batch is not enough");
    append(&mut h, 11, 2);
    let out = h.durable_all();
    let r = only(&out, 2);
    assert_eq!(spans(&r.batches), vec![(3, 5), (5, 7)]);
    assert_eq!(r.high_watermark, 7);
}

#[test]
fn an_uncommitted_append_does_not_answer_a_parked_consumer() {
    let mut h = leader_with_hw(3);
    let out = fetch(&mut h, 1, polling(3, 1, 500));
    assert!(done(&out).is_empty());
    let out = append(&mut h, 20, 1);
    assert!(done(&out).is_empty(), "appended, not committed");
    let out = h.durable_all();
    assert!(done(&out).is_empty(), "durable on the leader only");
    // Voter 2 makes 3..5 durable: committed, answered with exactly that batch.
    let (_, out) = h.request(2, Harness::fetch_request(2, 2, 5, 2, 5));
    let r = only(&out, 1);
    assert_eq!(spans(&r.batches), vec![(3, 5)]);
}

#[test]
fn a_long_poll_ends_at_the_capped_wait_with_what_there_is() {
    let mut h = lone_leader(1);
    let out = fetch(&mut h, 1, polling(3, 1, 60_000));
    assert!(done(&out).is_empty());
    // Capped by fetch_max_wait_ms (500).
    assert_eq!(h.core.next_deadline(), Some(500));
    assert!(done(&h.run_until(499)).is_empty());
    let r = only(&h.run_until(500), 1);
    assert_eq!(r.error, ErrorCode::NONE);
    assert!(r.batches.is_empty());
    assert_eq!(r.high_watermark, 3);
    assert!(done(&h.run_until(2_000)).is_empty(), "answered once");
}

/// A lone leader with 1..3 and 3..5 committed, and consumer fetch 2 at 1 parked for up to
/// 100 ms: what is committed is less than its min bytes (ten batches' worth).
fn parked_poll_below_the_high_watermark() -> Harness {
    let mut h = lone_leader(2);
    let size = only(&fetch(&mut h, 1, at(1)), 1).batches[0].bytes.len();
    let out = fetch(&mut h, 2, polling(1, 10 * size, 100));
    assert!(done(&out).is_empty());
    h
}

#[test]
fn an_expired_poll_below_the_high_watermark_gets_the_data() {
    let mut h = parked_poll_below_the_high_watermark();
    let r = only(&h.run_until(100), 2);
    assert_eq!(spans(&r.batches), vec![(1, 3), (3, 5)]);
}

/// The same poll, with retention moving the log start past it while it waits: at expiry it is
/// told OFFSET_OUT_OF_RANGE with the new start (the consumer applies its offset reset), and
/// nothing below the start is read or served (docs/protocol.md, "Retention and the log start").
#[test]
fn an_expired_poll_that_retention_passed_is_out_of_range() {
    let mut h = parked_poll_below_the_high_watermark();
    h.step(Input::LogStartMoved { start: 3 });
    let out = h.run_until(100);
    assert!(reads(&out).is_empty(), "no read below the log start");
    let r = only(&out, 2);
    assert_eq!(r.error, ErrorCode::OFFSET_OUT_OF_RANGE);
    assert!(r.batches.is_empty());
    assert_eq!(r.log_start_offset, 3);
}

#[test]
fn no_wait_or_no_min_bytes_answers_at_once() {
    let mut h = lone_leader(1);
    let r = only(&fetch(&mut h, 1, polling(3, 1, 0)), 1);
    assert!(r.batches.is_empty());
    let r = only(&fetch(&mut h, 2, polling(3, 0, 500)), 2);
    assert!(r.batches.is_empty());
}

#[test]
fn parked_consumers_are_bounded_and_each_answered_once() {
    let mut h = lone_leader(0);
    for id in 0..1024 {
        assert!(done(&fetch(&mut h, id, polling(1, 1, 500))).is_empty());
    }
    let r = only(&fetch(&mut h, 5_000, polling(1, 1, 500)), 5_000);
    assert_eq!(r.error, ErrorCode::NONE, "beyond the bound: at once");
    let out = h.run_until(500);
    let mut ids: Vec<u64> = done(&out).into_iter().map(|(id, _)| id).collect();
    ids.sort_unstable();
    assert_eq!(ids, (0..1024).collect::<Vec<_>>());
}

// ----- log reads -----

/// Leader 1 of epoch 2 as in `leader_with_hw`, with a one-byte tail cache (the newest batch
/// only), so older data comes from log reads.
fn leader_reading_the_log(durable: Offset) -> Harness {
    let mut cfg = config(1, VOTERS);
    cfg.tail_cache_bytes = 1;
    let mut h = Harness::new(cfg, Some(stored(2, -1, 1, VOTERS)), log(0, &[]));
    let votes = sends(&h.tick());
    h.respond(
        2,
        votes[0].1,
        Harness::vote_response(ErrorCode::NONE, -1, 2, true),
    );
    for i in 0..3 {
        append(&mut h, i, 2);
    }
    h.durable_all();
    h.request(2, Harness::fetch_request(2, 2, durable, 2, durable));
    assert_eq!(h.core.high_watermark(), Some(durable));
    h
}

/// Client fetch 1 from offset 0, which must wait on one log read from offset 0: its id.
fn fetch_from_0_reads_the_log(h: &mut Harness) -> u64 {
    let out = fetch(h, 1, at(0));
    let [(read_id, 0, _)] = reads(&out)[..] else {
        panic!("{out:?}")
    };
    read_id
}

fn stored_batches() -> Vec<Batch> {
    let mut lc = batch(0, 2, 1);
    lc.is_control = true;
    vec![lc, batch(1, 2, 2), batch(3, 2, 2), batch(5, 2, 2)]
}

#[test]
fn a_read_is_cut_at_the_high_watermark_when_it_completes() {
    let mut h = leader_reading_the_log(3);
    let read_id = fetch_from_0_reads_the_log(&mut h);
    let r = only(
        &h.step(Input::LogReadDone {
            read_id,
            batches: stored_batches(),
        }),
        1,
    );
    assert_eq!(spans(&r.batches), vec![(0, 1), (1, 3)]);
    assert_eq!(r.high_watermark, 3);
}

#[test]
fn the_high_watermark_moving_during_a_read_lets_more_through() {
    let mut h = leader_reading_the_log(3);
    let read_id = fetch_from_0_reads_the_log(&mut h);
    let (_, out) = h.request(2, Harness::fetch_request(2, 2, 7, 2, 7));
    assert_eq!(hw_outputs(&out), vec![7]);
    assert!(done(&out).is_empty(), "the read is still out");
    let r = only(
        &h.step(Input::LogReadDone {
            read_id,
            batches: stored_batches(),
        }),
        1,
    );
    assert_eq!(spans(&r.batches), vec![(0, 1), (1, 3), (3, 5), (5, 7)]);
    assert_eq!(r.high_watermark, 7);
}

#[test]
fn consumer_reads_in_flight_are_bounded() {
    let mut h = leader_reading_the_log(7);
    for id in 0..16 {
        let out = fetch(&mut h, id, at(0));
        assert_eq!(reads(&out).len(), 1, "read {id}");
        assert!(done(&out).is_empty());
    }
    let out = fetch(&mut h, 99, at(0));
    assert!(reads(&out).is_empty());
    let r = only(&out, 99);
    assert_eq!(r.error, ErrorCode::NONE);
    assert!(r.batches.is_empty(), "fetch again later");
    // A replica's read is not held back by consumers'.
    let (_, out) = h.request(3, Harness::fetch_request(3, 2, 0, 0, 0));
    assert_eq!(reads(&out).len(), 1);
}

// ----- the end of a leadership -----

#[test]
fn resigning_answers_parked_consumers_and_reads_not_leader_once() {
    let mut h = leader_reading_the_log(3);
    let out = fetch(&mut h, 1, at(0));
    let [(read_id, ..)] = reads(&out)[..] else {
        panic!("{out:?}")
    };
    assert!(done(&fetch(&mut h, 2, polling(3, 1, 500))).is_empty());
    let out = h.step(Input::Shutdown);
    assert_eq!(h.core.role(), Role::Resigned);
    let mut answers = done(&out);
    answers.sort_by_key(|a| a.0);
    assert_eq!(answers.len(), 2, "{answers:?}");
    for (id, r) in &answers {
        assert_eq!(r.error, ErrorCode::NOT_LEADER_OR_FOLLOWER, "fetch {id}");
        assert_eq!(r.leader_id, -1);
        assert!(r.batches.is_empty());
    }
    let out = h.step(Input::LogReadDone {
        read_id,
        batches: stored_batches(),
    });
    assert!(done(&out).is_empty(), "already answered");
    assert!(done(&h.run_until(1_000)).is_empty());
}

#[test]
fn a_new_leader_answers_parked_consumers_with_its_id() {
    let mut h = leader_with_hw(3);
    assert!(done(&fetch(&mut h, 1, polling(3, 1, 500))).is_empty());
    let (_, out) = h.request(2, Harness::begin_request(2, 3));
    let r = only(&out, 1);
    assert_eq!(r.error, ErrorCode::NOT_LEADER_OR_FOLLOWER);
    assert_eq!((r.leader_id, r.leader_epoch), (2, 3));
}

#[test]
fn a_new_leader_serves_what_it_learned_was_committed_before_its_own_hw() {
    // A follower of epoch 2 learns HW 3, then wins epoch 3.
    let (h, c) = Harness::follower(1, VOTERS, 2, 2, log(0, &[]));
    let mut h = h.without_pre_vote();
    let mut lc = batch(0, 2, 1);
    lc.is_control = true;
    let r = Harness::fetch_response(2, 2, vec![lc, batch(1, 2, 2), batch(3, 2, 2)], 3);
    h.respond(2, c, Response::FetchQuorumRecords(r));
    h.durable_all();
    assert_eq!(h.core.high_watermark(), Some(3));
    let out = h.run_until(2_000);
    let votes: Vec<_> = sends(&out)
        .into_iter()
        .filter(|s| matches!(s.2, Request::Vote(_)))
        .collect();
    h.respond(
        2,
        votes[0].1,
        Harness::vote_response(ErrorCode::NONE, -1, 3, true),
    );
    assert_eq!(h.core.role(), Role::Leader);
    assert_eq!(h.core.consumer_offsets(None).unwrap().high_watermark, 3);
    let r = only(&fetch(&mut h, 1, at(0)), 1);
    assert_eq!(spans(&r.batches), vec![(0, 1), (1, 3)]);
    // A consumer that read up to 5 from the old leader waits here rather than reset.
    let r = only(&fetch(&mut h, 2, at(5)), 2);
    assert_eq!(r.error, ErrorCode::NONE);
    assert!(r.batches.is_empty());
}

// ----- queries -----

#[test]
fn list_offsets_and_offset_for_leader_epoch_answer_as_kafka_does() {
    let mut h = Harness::leader(1, &[1], 4, log(10, &[(1, 0), (3, 5)]));
    h.durable_all();
    let p = h.core.consumer_offsets(Some(4)).unwrap();
    assert_eq!(
        p,
        PartitionOffsets {
            leader_id: 1,
            leader_epoch: 4,
            log_start_offset: 0,
            high_watermark: 11
        }
    );
    let earliest = h.core.list_offsets(None, OffsetSpec::Earliest).unwrap();
    assert_eq!(
        earliest,
        ListedOffset {
            offset: 0,
            leader_epoch: Some(1)
        }
    );
    let latest = h.core.list_offsets(None, OffsetSpec::Latest).unwrap();
    assert_eq!(
        latest,
        ListedOffset {
            offset: 11,
            leader_epoch: Some(4)
        }
    );
    let end = |e| h.core.offset_for_leader_epoch(None, e).unwrap();
    assert_eq!(
        end(1),
        OffsetAndEpoch {
            offset: 5,
            epoch: 1
        }
    );
    assert_eq!(
        end(2),
        OffsetAndEpoch {
            offset: 5,
            epoch: 1
        }
    );
    assert_eq!(
        end(3),
        OffsetAndEpoch {
            offset: 10,
            epoch: 3
        }
    );
    assert_eq!(
        end(4),
        OffsetAndEpoch {
            offset: 11,
            epoch: 4
        }
    );
    assert_eq!(end(0), UNDEFINED_EPOCH_END);
    assert_eq!(
        UNDEFINED_EPOCH_END,
        OffsetAndEpoch {
            offset: -1,
            epoch: -1
        },
        "Kafka's UNDEFINED_EPOCH_OFFSET and UNDEFINED_EPOCH"
    );
    assert_eq!(end(-1), UNDEFINED_EPOCH_END);
}

#[test]
fn queries_change_nothing() {
    let mut h = leader_with_hw(3);
    let before = (
        h.core.high_watermark(),
        h.core.next_deadline(),
        h.core.log_end_offset(),
    );
    for _ in 0..3 {
        h.core.consumer_offsets(None).unwrap();
        h.core.list_offsets(Some(2), OffsetSpec::Latest).unwrap();
        h.core.offset_for_leader_epoch(None, 2).unwrap();
    }
    let after = (
        h.core.high_watermark(),
        h.core.next_deadline(),
        h.core.log_end_offset(),
    );
    assert_eq!(before, after);
    assert!(h
        .tick()
        .iter()
        .all(|o| !matches!(o, Output::ClientFetchDone { .. })));
}

#[test]
fn wire_fields_map_to_the_core_s_types() {
    let f = ClientFetch::from_wire(5, -1, -1, -3, -1, -100);
    assert_eq!(
        f,
        ClientFetch {
            fetch_offset: 5,
            last_fetched_epoch: None,
            current_leader_epoch: None,
            max_wait_ms: 0,
            min_bytes: 0,
            max_bytes: 0
        }
    );
    let f = ClientFetch::from_wire(-7, 0, 3, 500, 1, 1 << 20);
    assert_eq!(f.fetch_offset, -7);
    assert_eq!(f.last_fetched_epoch, Some(0));
    assert_eq!(f.current_leader_epoch, Some(3));
    assert_eq!((f.max_wait_ms, f.min_bytes, f.max_bytes), (500, 1, 1 << 20));
    assert_eq!(
        ClientFetch::from_wire(0, -2, -5, 0, 0, 0).last_fetched_epoch,
        None
    );
}
