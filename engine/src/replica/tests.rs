//! The replica around a real core: a single voter leads, and a producer's retries are answered
//! from the log in the order the replica decides them.

use super::*;
use crate::groups::{GroupLimits, Groups};
use crate::producer_ids::BlockWanted;
use crate::raft::{Acks, Input, LogOpKind, Output, RaftConfig};
use crate::record::RecordBatchBuilder;

const P: i64 = 5;

/// A leading single-voter replica and the highest log op seq it has emitted.
struct Driver {
    replica: Replica,
    now: u64,
    last_seq: u64,
    /// The answers to InitProducerId so far, in order.
    ids: Vec<(u64, Result<i64, ErrorCode>)>,
    /// The retention runs asked for so far, in order.
    retains: Vec<RetentionBounds>,
    /// The bounds sent for the rolls so far, in order.
    roll_bounds: Vec<RetentionBounds>,
    /// The producer-state snapshots asked for so far, and how many of them are written.
    snapshots: Vec<Offset>,
    written_snapshots: usize,
    /// Whether the snapshots are written as soon as they are asked for.
    write_snapshots: bool,
    /// The answers to group requests so far, in order.
    groups: Vec<(u64, crate::groups::GroupReply)>,
}

impl Driver {
    fn leading() -> Self {
        Self::leading_with(None)
    }

    /// A leading replica that runs retention every `retention` ms.
    fn leading_with(retention: Option<u64>) -> Self {
        Self::leading_grouped(
            retention,
            0,
            Groups::new(GroupLimits::default(), String::new()),
        )
    }

    /// A leading replica with this group coordinator, booted at wall-clock `boot_timestamp`
    /// ms (0: no wall clock).
    fn leading_grouped(retention: Option<u64>, boot_timestamp: i64, groups: Groups) -> Self {
        let mut config = RaftConfig::new(1, "c", vec![1]);
        config.boot_timestamp = boot_timestamp;
        let core = RaftCore::new(config, None, crate::raft::LogSnapshot::default(), 0)
            .expect("core starts");
        let replica = Replica::new(
            core,
            ProducerStates::default(),
            ProducerIdLedger::new(1, 77),
        )
        .with_groups(groups);
        let mut d = Self {
            replica: match retention {
                Some(interval) => replica.with_retention(interval),
                None => replica,
            },
            now: 0,
            last_seq: 0,
            ids: Vec::new(),
            retains: Vec::new(),
            roll_bounds: Vec::new(),
            snapshots: Vec::new(),
            written_snapshots: 0,
            write_snapshots: true,
            groups: Vec::new(),
        };
        for _ in 0..100 {
            if d.replica.core().role() == Role::Leader {
                break;
            }
            d.now += 100;
            d.step(Input::Tick { now: d.now });
            d.durable();
        }
        assert_eq!(d.replica.core().role(), Role::Leader);
        d
    }

    /// The core's outputs of one step (the InitProducerId answers go to `self.ids`).
    fn step(&mut self, input: impl Into<super::Input>) -> Vec<Output> {
        let mut out = Vec::new();
        self.replica.step(input, &mut out);
        let mut core = Vec::new();
        for o in out {
            match o {
                super::Output::Core(o) => {
                    if let Output::Log(op) = &o {
                        self.last_seq = self.last_seq.max(op.seq);
                    }
                    core.push(o);
                }
                super::Output::ProducerId { request, result } => self.ids.push((request, result)),
                super::Output::Retain(bounds) => self.retains.push(bounds),
                super::Output::RollBounds(bounds) => self.roll_bounds.push(bounds),
                super::Output::WriteProducerSnapshot { offset, .. } => self.snapshots.push(offset),
                super::Output::Group { request, reply } => self.groups.push((request, reply)),
            }
        }
        // Snapshot files are written at once (after the list, as a driver's answer would come).
        if self.write_snapshots {
            while self.written_snapshots < self.snapshots.len() {
                let offset = self.snapshots[self.written_snapshots];
                self.written_snapshots += 1;
                let more = self.step(super::Input::ProducerSnapshotWritten { offset, ok: true });
                core.extend(more);
            }
        }
        core
    }

    /// Everything logged so far becomes durable: the outputs of that step.
    fn durable(&mut self) -> Vec<Output> {
        self.step(Input::LogDurable {
            up_to_seq: self.last_seq,
        })
    }

    fn append(&mut self, id: u64, sequence: i32) -> Vec<Output> {
        self.append_with(id, sequence, Acks::Quorum)
    }

    fn append_with(&mut self, id: u64, sequence: i32, acks: Acks) -> Vec<Output> {
        let mut b = RecordBatchBuilder::new(0, 0).producer(P, 0, sequence);
        b.append(1_000, None, Some(b"v"), &[]);
        self.step(Input::ClientAppend {
            id,
            batch: b.build(),
            record_count: 1,
            acks,
        })
    }
}

/// The appends among `out` that carry a control batch (a producer-id block record here).
fn block_appends(out: &[Output]) -> usize {
    out.iter()
        .filter(|o| {
            matches!(o, Output::Log(op) if matches!(&op.kind, LogOpKind::Append(b) if b.iter().any(|b| b.is_control)))
        })
        .count()
}

/// The append answers (id, result) among `out`, in order.
fn answers(out: &[Output]) -> Vec<(u64, AppendResult)> {
    out.iter()
        .filter_map(|o| match o {
            Output::AppendDone { id, result } => Some((*id, result.clone())),
            _ => None,
        })
        .collect()
}

#[test]
fn a_retry_is_answered_with_the_original_offsets_right_after_they_commit() {
    let mut d = Driver::leading();
    let out = d.append(1, 0);
    let appended = out
        .iter()
        .any(|o| matches!(o, Output::Log(op) if matches!(op.kind, LogOpKind::Append(_))));
    assert!(appended, "the first send is appended: {out:?}");
    // The retry arrives before the original is durable: it waits, and is not appended.
    let out = d.append(2, 0);
    assert!(
        out.is_empty(),
        "a waiting duplicate makes no output: {out:?}"
    );
    assert_eq!(d.replica.producing().waiting(), 1);
    let out = d.durable();
    let hw_at = out
        .iter()
        .position(|o| matches!(o, Output::HighWatermark(_)))
        .expect("the append commits");
    let Output::HighWatermark(hw) = out[hw_at] else {
        unreachable!()
    };
    let done = answers(&out);
    let base = hw - 1;
    let original = AppendResult::Appended {
        base_offset: base,
        last_offset: base,
    };
    // The duplicate's answer comes right after the high watermark that committed its original
    // (as the node answered it while carrying out that output), before the core's own answer.
    assert_eq!(done, vec![(2, original.clone()), (1, original.clone())]);
    assert!(
        matches!(&out[hw_at + 1..], [Output::AppendDone { id: 2, .. }, ..]),
        "{out:?}"
    );
    // A retry of a committed batch is answered at once, from the log.
    assert_eq!(answers(&d.append(3, 0)), vec![(3, original)]);
    assert_eq!(d.replica.producing().counts().duplicates, 2);
    // The next sequence is appended; a gap is refused.
    assert!(answers(&d.append(4, 1)).is_empty());
    let refused = answers(&d.append(5, 9));
    assert!(
        matches!(&refused[..], [(5, AppendResult::Failed { error, leader_id: 1, .. })] if *error == ErrorCode::OUT_OF_ORDER_SEQUENCE_NUMBER),
        "{refused:?}"
    );
}

/// A leader that shuts down (resigns) tells its waiting duplicates to go to the next one.
#[test]
fn resigning_fails_the_waiting_duplicates() {
    let mut d = Driver::leading();
    d.append(1, 0);
    assert!(d.append(2, 0).is_empty());
    let out = d.step(Input::Shutdown);
    let resigned = out
        .iter()
        .position(|o| matches!(o, Output::RoleChanged { role, .. } if *role != Role::Leader))
        .expect("a shutting-down leader resigns");
    let failed = AppendResult::Failed {
        error: ErrorCode::NOT_LEADER_OR_FOLLOWER,
        leader_id: d.replica.core().leader_id().unwrap_or(-1),
        leader_epoch: d.replica.core().epoch(),
    };
    assert!(
        matches!(&out[resigned + 1..], [Output::AppendDone { id: 2, result }, ..] if *result == failed),
        "{out:?}"
    );
    assert_eq!(d.replica.producing().waiting(), 0);
}

/// InitProducerId on a leader with no ids yet: held while the replica reserves a block for
/// itself through the log, answered from it once it commits, then at once; every id once.
#[test]
fn producer_ids_come_from_a_committed_block() {
    let mut d = Driver::leading();
    let out = d.step(super::Input::InitProducerId { request: 1 });
    assert!(d.ids.is_empty(), "no block yet: the request waits");
    assert!(
        block_appends(&out) > 0,
        "the leader appends a block record for itself: {out:?}"
    );
    assert_eq!(d.replica.producer_ids().waiting(), 1);
    d.durable();
    assert_eq!(d.ids, vec![(1, Ok(0))], "answered once the block commits");
    assert_eq!(d.replica.producer_ids().waiting(), 0);
    d.step(super::Input::InitProducerId { request: 2 });
    d.step(super::Input::InitProducerId { request: 3 });
    assert_eq!(d.ids[1..], [(2, Ok(1)), (3, Ok(2))]);
    assert_eq!(d.replica.producer_ids().handed_out(), 3);
}

/// A request held past its deadline is answered with the retriable error at the next tick.
#[test]
fn a_held_init_times_out_retriably() {
    let mut d = Driver::leading();
    d.step(super::Input::InitProducerId { request: 9 });
    // The block is never made durable: the request waits until its deadline.
    d.now += producer_ids::INIT_WAIT_MS - 1;
    d.step(Input::Tick { now: d.now });
    assert!(d.ids.is_empty());
    d.now += 1;
    d.step(Input::Tick { now: d.now });
    assert_eq!(
        d.ids,
        vec![(9, Err(ErrorCode::COORDINATOR_LOAD_IN_PROGRESS))]
    );
}

/// Retention stops at the newest committed producer-id block record (a replica that starts
/// from the log start learns from it where ids are free), and the unpinned offset is the high
/// watermark.
#[test]
fn retention_keeps_the_newest_committed_block_record() {
    let mut d = Driver::leading();
    let core_limit = d.replica.core().retention_limit();
    assert_eq!(d.replica.retention_limit(), core_limit, "no block yet");
    let out = d.step(super::Input::InitProducerId { request: 1 });
    let block_at = out
        .iter()
        .find_map(|o| match o {
            Output::Log(op) => match &op.kind {
                LogOpKind::Append(b) => b.iter().find(|b| b.is_control).map(|b| b.base_offset),
                _ => None,
            },
            _ => None,
        })
        .expect("a block record appended");
    d.durable();
    let hw = d.replica.core().high_watermark().expect("committed");
    // The voter record at the log's start pins the core's limit there, and the first
    // snapshot (at the first high watermark) the replica's: held back, the replica carries the
    // record forward and takes a snapshot at the next high watermark, so that only the block
    // record holds retention back.
    d.step(super::Input::RetentionHeldBack { wanted: hw });
    d.durable();
    let hw = d.replica.core().high_watermark().expect("committed");
    assert_eq!(d.replica.snapshots().written(), Some(hw));
    assert!(
        d.replica.core().retention_limit() > block_at,
        "the core's limit is past the block record: {}",
        d.replica.core().retention_limit()
    );
    assert_eq!(
        d.replica.producer_ids().newest_committed_record(),
        Some(block_at)
    );
    assert_eq!(d.replica.retention_limit(), block_at);
    assert_eq!(
        d.replica.retention_bounds(),
        RetentionBounds {
            limit: block_at,
            unpinned: hw
        }
    );
}

/// With acks=0 nobody reads an answer: a duplicate is neither answered nor kept waiting.
#[test]
fn an_acks_0_duplicate_is_dropped_unanswered() {
    let mut d = Driver::leading();
    d.append(1, 0);
    assert!(d.append_with(2, 0, Acks::None).is_empty());
    assert_eq!(d.replica.producing().waiting(), 0);
    d.durable();
    assert!(answers(&d.append_with(3, 0, Acks::None)).is_empty());
    assert_eq!(d.replica.producing().counts().duplicates, 2);
}

/// A leader held back by its block record reserves a newer block for itself; elsewhere the
/// carry does nothing.
#[test]
fn carrying_the_block_record_reserves_a_newer_block_on_the_leader_only() {
    let mut d = Driver::leading();
    d.step(super::Input::InitProducerId { request: 1 });
    d.durable();
    let hw = d.replica.core().high_watermark().expect("committed");
    let appends_a_block = |out: &[Output]| block_appends(out) > 0;
    // Past the interval between two grants to one replica.
    d.now += producer_ids::GRANT_INTERVAL_MS;
    d.step(Input::Tick { now: d.now });
    let out = d.step(super::Input::RetentionHeldBack { wanted: hw });
    assert!(appends_a_block(&out), "{out:?}");
    // Not held back (the record is at or above `below`): nothing, past the interval too.
    d.now += producer_ids::GRANT_INTERVAL_MS;
    d.step(Input::Tick { now: d.now });
    let out = d.step(super::Input::RetentionHeldBack { wanted: 0 });
    assert!(!appends_a_block(&out), "{out:?}");
}

/// A fetch's wish for producer ids is granted by the leader for a replica it knows, in its
/// own epoch only.
#[test]
fn a_wish_is_granted_for_a_known_replica_in_the_leaders_epoch() {
    let mut d = Driver::leading();
    let epoch = d.replica.core().epoch();
    let wanted = BlockWanted {
        incarnation: 5,
        have: -1,
    };
    let blocks = block_appends;
    let wish = |replica, epoch| super::Input::ProducerIdsWanted {
        replica,
        epoch,
        wanted,
    };
    assert_eq!(blocks(&d.step(wish(9, epoch))), 0, "an unknown replica");
    assert_eq!(blocks(&d.step(wish(1, epoch - 1))), 0, "an older epoch");
    assert_eq!(blocks(&d.step(wish(1, epoch))), 1, "a voter in this epoch");
}

/// Retention runs on the replica's schedule, one at a time: a run within the replica's bounds
/// at the first tick, none while it is in the writer, the next an interval after; a finished
/// run moves the core's log start (never past the bounds it was given: asserted); a shutdown
/// stops the schedule.
#[test]
fn retention_runs_on_the_replicas_schedule_one_at_a_time() {
    let mut d = Driver::leading_with(Some(1_000));
    // The first run was asked for at the first tick; nothing was committed then.
    assert_eq!(d.retains.len(), 1);
    let others = [
        d.replica.core().next_deadline(),
        d.replica.groups().next_deadline(),
    ];
    assert_eq!(
        d.replica.next_deadline(),
        others.into_iter().flatten().min(),
        "no retention deadline while a run is in the writer"
    );
    d.now += 1_000;
    d.step(Input::Tick { now: d.now });
    assert_eq!(d.retains.len(), 1, "one run at a time");
    d.step(super::Input::Retained {
        start: 0,
        wanted: 0,
    });
    let due = d.replica.retention().next_deadline();
    assert!(due.is_some_and(|t| t <= d.now), "{due:?} at {}", d.now);
    // Commit a few records; held back by the voter record at the start and by the first
    // snapshot, the replica carries the record forward and takes a newer snapshot.
    for sequence in 0..3 {
        d.append(10 + sequence as u64, sequence);
    }
    d.durable();
    let hw = d.replica.core().high_watermark().expect("committed");
    d.step(super::Input::RetentionHeldBack { wanted: hw });
    d.durable();
    d.step(Input::Tick { now: d.now });
    assert_eq!(d.retains.len(), 2, "due again after the interval");
    let bounds = d.retains[1];
    assert!(bounds.limit > 0, "{bounds:?}");
    d.step(super::Input::Retained {
        start: bounds.limit,
        wanted: bounds.limit,
    });
    assert_eq!(d.replica.core().log_start_offset(), bounds.limit);
    d.step(Input::Shutdown);
    d.now += 10_000;
    d.step(Input::Tick { now: d.now });
    assert_eq!(d.retains.len(), 2, "no run after a shutdown began");
}

/// Retention never passes the newest written producer-state snapshot: a snapshot being written
/// does not count, and retention held back by it asks for a newer one.
#[test]
fn retention_stays_below_the_newest_written_snapshot() {
    let mut d = Driver::leading();
    let first = d
        .replica
        .snapshots()
        .written()
        .expect("the first high watermark's");
    d.write_snapshots = false;
    d.append(1, 0);
    d.durable();
    let hw = d.replica.core().high_watermark().expect("committed");
    d.step(Input::CarryVoterRecord { below: hw });
    d.durable();
    assert!(d.replica.core().retention_limit() > first);
    assert_eq!(d.replica.retention_limit(), first - 1);
    // Held back: the next high watermark takes a snapshot; written, it moves the limit.
    let newer = |d: &mut Driver| {
        let asked = d.snapshots.len();
        let hw = d.replica.core().high_watermark().expect("committed");
        d.step(super::Input::RetentionHeldBack { wanted: hw });
        d.append(2 + asked as u64, asked as i32);
        d.durable();
        assert_eq!(d.snapshots.len(), asked + 1, "{:?}", d.snapshots);
        assert_eq!(d.replica.retention_limit(), first - 1, "being written");
        d.snapshots[asked]
    };
    let failed = newer(&mut d);
    d.step(super::Input::ProducerSnapshotWritten {
        offset: failed,
        ok: false,
    });
    assert_eq!(d.replica.retention_limit(), first - 1, "a failed write");
    let written = newer(&mut d);
    d.step(super::Input::ProducerSnapshotWritten {
        offset: written,
        ok: true,
    });
    // The carried voter record may be what holds it now.
    let core_limit = d.replica.core().retention_limit();
    assert!(core_limit > first - 1);
    assert_eq!(d.replica.retention_limit(), (written - 1).min(core_limit));
}

/// A run held back by pinned records (the policy wanted more than the bounds allowed) makes a
/// leader carry the newest committed voter record forward.
#[test]
fn a_run_held_back_carries_the_voter_record_forward() {
    let mut d = Driver::leading_with(Some(60_000));
    d.append(1, 0);
    d.durable();
    let hw = d.replica.core().high_watermark().expect("committed");
    let limit = d.replica.retention_limit();
    assert!(limit < hw, "the voter record at the start pins retention");
    let out = d.step(super::Input::Retained {
        start: limit,
        wanted: hw,
    });
    let voter_records = out
        .iter()
        .filter(|o| match o {
            Output::Log(op) => {
                matches!(&op.kind, LogOpKind::Append(b) if b.iter().any(|b| b.is_control))
            }
            _ => false,
        })
        .count();
    assert_eq!(voter_records, 1, "{out:?}");
}

/// An OffsetCommit on the leader is written as a control record and answered only once it
/// commits; OffsetFetch then sees it, and a replica that stops leading answers NOT_COORDINATOR.
#[test]
fn an_offset_commit_is_answered_when_its_record_commits() {
    use crate::groups::GroupReply;
    let mut d = Driver::leading();
    d.durable();
    assert_eq!(d.replica.coordinator_status(), Ok(()));
    let end = d.replica.core().log_end_offset();
    let out = d.step(super::Input::Group {
        request: 9,
        ask: commit(42),
    });
    assert!(d.groups.is_empty(), "not answered before it commits");
    let appended = out.iter().any(|o| {
        matches!(o, Output::Log(op) if matches!(&op.kind, LogOpKind::Append(b)
            if b[0].base_offset == end && b[0].is_control))
    });
    assert!(
        appended,
        "the commit is a control batch at the log end: {out:?}"
    );
    assert!(d.replica.groups().offsets().group("g").is_none());
    d.durable();
    assert_eq!(d.groups, vec![(9, GroupReply::Written(ErrorCode::NONE))]);
    let committed = d.replica.groups().offsets().group("g").unwrap();
    assert_eq!(committed.values().next().unwrap().offset, 42);
    // Shutting down resigns: a commit in flight then is answered NOT_COORDINATOR.
    d.step(super::Input::Group {
        request: 10,
        ask: commit(43),
    });
    d.step(Input::Shutdown);
    d.durable();
    let last = d.groups.last().unwrap();
    assert_eq!(last.0, 10);
    // A single voter commits at once on durability, or answers NOT_COORDINATOR if it
    // resigned first: never both, never nothing.
    assert_eq!(d.groups.iter().filter(|(r, _)| *r == 10).count(), 1);
}

/// On the leader, an idle group's offset expires after `offsets.retention.minutes`: the
/// replica appends the group's DeleteGroup record at the check, and every offset of the group
/// is gone once it commits (docs/storage.md, "Committed offsets").
#[test]
fn an_idle_groups_offset_expires_through_the_log() {
    use crate::groups::GroupReply;
    let limits = GroupLimits {
        offsets_retention_ms: 60_000,
        offsets_retention_check_interval_ms: 1_000,
        ..GroupLimits::default()
    };
    let mut d =
        Driver::leading_grouped(None, 1_700_000_000_000, Groups::new(limits, String::new()));
    d.durable();
    d.step(super::Input::Group {
        request: 9,
        ask: commit(42),
    });
    d.durable();
    assert_eq!(d.groups, vec![(9, GroupReply::Written(ErrorCode::NONE))]);
    assert_eq!(committed_offset(&d.replica), Some(42));
    let commit_at = d.now;
    let mut appended_at = None;
    for _ in 0..200 {
        d.now += 1_000;
        let end = d.replica.core().log_end_offset();
        let out = d.step(Input::Tick { now: d.now });
        if block_appends(&out) > 0 {
            appended_at = Some((d.now, end));
            break;
        }
    }
    let (at, offset) = appended_at.expect("an expiry record appended");
    assert!(
        at >= commit_at + 60_000 && at <= commit_at + 62_000,
        "at the first check a retention after the commit: {at} (commit at {commit_at})"
    );
    assert_eq!(
        committed_offset(&d.replica),
        Some(42),
        "not before the record commits"
    );
    d.durable();
    assert!(d.replica.core().high_watermark().unwrap() > offset);
    assert_eq!(committed_offset(&d.replica), None);
    assert_eq!(d.replica.groups().offsets().group_count(), 0);
}

/// A roll's new log start reaches the core through the replica, which checks it against the
/// bounds it sent for the rolls; a repeat or a start behind the core's moves nothing.
#[test]
fn a_roll_moves_the_log_start_within_the_bounds_it_was_given() {
    let mut d = Driver::leading_with(Some(60_000));
    d.step(super::Input::Retained {
        start: 0,
        wanted: 0,
    });
    for sequence in 0..3 {
        d.append(10 + sequence as u64, sequence);
    }
    d.durable();
    let hw = d.replica.core().high_watermark().expect("committed");
    d.step(super::Input::RetentionHeldBack { wanted: hw });
    d.durable();
    d.now += retention::ROLL_LIMIT_INTERVAL_MS;
    d.step(Input::Tick { now: d.now });
    let limit = d.roll_bounds.last().expect("bounds sent").limit;
    assert!(limit > 0, "{:?}", d.roll_bounds);
    d.step(super::Input::Rolled { start: limit });
    assert_eq!(d.replica.core().log_start_offset(), limit);
    d.step(super::Input::Rolled { start: limit - 1 });
    assert_eq!(
        d.replica.core().log_start_offset(),
        limit,
        "nothing moves back"
    );
}

#[test]
#[should_panic(expected = "past every limit it was given")]
fn a_roll_past_its_bounds_stops_the_replica() {
    let mut d = Driver::leading_with(Some(60_000));
    d.append(10, 0);
    d.durable();
    d.step(super::Input::Rolled { start: 1 });
}

/// An OffsetCommit of `offset` for group "g" (no member, as a consumer that only commits).
fn commit(offset: Offset) -> crate::groups::GroupRequest {
    use crate::groups::{GroupRequest, MemberRef, PartitionOffset};
    GroupRequest::Commit {
        who: MemberRef {
            group_id: "g".into(),
            generation: None,
            member_id: None,
            instance_id: None,
        },
        offsets: vec![PartitionOffset {
            topic: "__cluster_metadata".into(),
            partition: 0,
            offset: Some(offset),
            leader_epoch: Some(1),
            metadata: None,
        }],
    }
}

/// Group "g"'s committed offset on `replica`, if it has one.
fn committed_offset(replica: &Replica) -> Option<Offset> {
    let offsets = replica.groups().offsets().group("g")?;
    Some(offsets[&("__cluster_metadata".to_string(), 0)].offset)
}

/// The committed offset of group "g" in a leader past a snapshot ([`leader_past_a_snapshot`]).
const COMMITTED: Offset = 42;

/// A leader that committed offset [`COMMITTED`] for group "g" and produced three batches of
/// producer `P`, wrote a snapshot past them, and let retention move its log start below it
/// (and past the commit's record).
fn leader_past_a_snapshot() -> (Driver, Offset, Offset) {
    let mut d = Driver::leading_with(Some(60_000));
    d.step(super::Input::Retained {
        start: 0,
        wanted: 0,
    });
    let commit_at = d.replica.core().log_end_offset();
    d.step(super::Input::Group {
        request: 1,
        ask: commit(COMMITTED),
    });
    for sequence in 0..3 {
        d.append(10 + sequence as u64, sequence);
    }
    d.durable();
    let hw = d.replica.core().high_watermark().expect("committed");
    d.step(super::Input::RetentionHeldBack { wanted: hw });
    d.durable();
    let written = d.replica.snapshots().written().expect("a snapshot written");
    d.now += 60_000;
    d.step(Input::Tick { now: d.now });
    let start = d.retains.last().expect("a run asked for").limit;
    assert!(
        start > commit_at && start < written,
        "{commit_at} {start} {written}"
    );
    d.step(super::Input::Retained {
        start,
        wanted: start,
    });
    assert_eq!(committed_offset(&d.replica), Some(COMMITTED));
    (d, start, written)
}

/// The producer-state snapshot keeps the groups' committed offsets, so retention, which never
/// passes the newest written snapshot, never deletes the only record of one: a start from the
/// snapshot and the log after retention still knows it (docs/storage.md, "Committed offsets").
#[test]
fn a_commit_whose_record_retention_deleted_is_in_the_snapshot_a_start_uses() {
    use crate::producer_snapshot::ProducerSnapshot;
    use crate::replica::rebuild::ProducerRebuild;
    let (d, start, written) = leader_past_a_snapshot();
    let (offset, bytes) = d.replica.shared_snapshot.clone().expect("written");
    assert_eq!(offset, written);
    let snapshot = ProducerSnapshot::decode(&bytes).expect("decodes");
    let groups = snapshot
        .groups
        .clone()
        .expect("a current snapshot keeps the offsets");
    assert_eq!(groups.len(), 1, "{groups:?}");
    assert_eq!(
        (groups[0].group_id.as_str(), groups[0].committed.offset),
        ("g", COMMITTED)
    );
    // A start: the snapshot fits the log from `start`, and nothing below it is replayed.
    let rebuild = ProducerRebuild::new(1, 78, Some(snapshot.clone()), start);
    assert_eq!(rebuild.from(), written);
    let rebuilt = rebuild.finish();
    let restored = rebuilt.offsets.group("g").expect("the group is known");
    assert_eq!(
        restored[&("__cluster_metadata".to_string(), 0)].offset,
        COMMITTED
    );
    // A version 1 snapshot (no offsets) makes the start read the whole log for them.
    let mut old = snapshot;
    old.groups = None;
    assert_eq!(ProducerRebuild::new(1, 78, Some(old), start).from(), start);
}

/// A fetch behind the log start is answered with the log start and the newest written
/// producer-state snapshot, so that the fetcher, reset to the start, still knows the producers
/// whose batches retention deleted (docs/protocol.md, "Retention and the log start").
#[test]
fn a_fetch_behind_the_log_start_gets_the_written_snapshot() {
    use crate::raft::{FetchQuorumRecordsRequest, Request, Response, Sender};
    let (mut d, start, written) = leader_past_a_snapshot();
    let epoch = d.replica.core().epoch();
    let out = d.step(Input::Request {
        id: 900,
        from: Sender::Replica(7),
        request: Request::FetchQuorumRecords(FetchQuorumRecordsRequest {
            cluster_id: "c".into(),
            replica_id: 7,
            leader_epoch: epoch,
            fetch_offset: 0,
            last_fetched_epoch: 0,
            is_follower: false,
            max_wait_ms: 0,
            durable_offset: -1,
            replica_directory_id: Default::default(),
            lease_echo: None,
        }),
    });
    let answer = out
        .iter()
        .find_map(|o| match o {
            Output::Respond {
                id: 900,
                response: Response::FetchQuorumRecords(r),
            } => Some(r.clone()),
            _ => None,
        })
        .expect("answered");
    assert_eq!(answer.error, ErrorCode::OFFSET_OUT_OF_RANGE);
    assert_eq!(answer.log_start.map(|s| s.offset), Some(start));
    let bytes = answer.producer_state.expect("the snapshot rides along");
    let snapshot = crate::producer_snapshot::ProducerSnapshot::decode(&bytes).expect("decodes");
    assert_eq!(snapshot.offset, written);
    assert_eq!(snapshot.producers.len(), 1, "producer {P} is in it");
}

/// An observer behind the leader's log start resets its log with the leader's snapshot: it
/// knows producer `P`, whose batches it never fetched, does not feed the batches below the
/// snapshot again, and writes the snapshot as its own file.
#[test]
fn a_reset_takes_the_leaders_producer_state_with_it() {
    use crate::quorum_state_store::ElectionState;
    use crate::raft::{Request, Response, Sender};
    let (mut leader, start, written) = leader_past_a_snapshot();
    let epoch = leader.replica.core().epoch();
    let stored = ElectionState {
        epoch,
        leader_id: 1,
        voted_id: -1,
        current_voters: vec![1],
        ..Default::default()
    };
    let core = RaftCore::new(
        RaftConfig::new(7, "c", vec![1]),
        Some(stored),
        crate::raft::LogSnapshot::default(),
        0,
    )
    .expect("core starts");
    let mut observer = Replica::new(core, ProducerStates::default(), ProducerIdLedger::new(7, 5))
        .with_snapshots(1 << 20, None);
    assert_eq!(observer.producing().producers().len(), 0);
    let mut out = Vec::new();
    observer.step(Input::Tick { now: leader.now }, &mut out);
    let (correlation, request) = out
        .iter()
        .find_map(|o| match o {
            super::Output::Core(Output::Send {
                to: 1,
                correlation,
                request: request @ Request::FetchQuorumRecords(_),
            }) => Some((*correlation, request.clone())),
            _ => None,
        })
        .expect("the observer fetches from the leader");
    let answer = leader
        .step(Input::Request {
            id: 901,
            from: Sender::Replica(7),
            request,
        })
        .into_iter()
        .find_map(|o| match o {
            Output::Respond { id: 901, response } => Some(response),
            _ => None,
        })
        .expect("answered");
    let Response::FetchQuorumRecords(r) = &answer else {
        panic!("{answer:?}")
    };
    assert!(r.producer_state.is_some() && r.log_start.is_some());
    let mut out = Vec::new();
    observer.step(
        Input::Response {
            from: 1,
            correlation,
            response: answer,
        },
        &mut out,
    );
    let reset = out.iter().any(|o| {
        matches!(o, super::Output::Core(Output::Log(op))
            if matches!(op.kind, LogOpKind::ResetTo { start: s, .. } if s == start))
    });
    assert!(reset, "reset to the leader's start: {out:?}");
    assert_eq!(
        observer.producing().producers().len(),
        1,
        "producer {P} known"
    );
    let leader_blocks = leader.replica.producer_ids().committed_blocks();
    let blocks = observer.producer_ids().committed_blocks();
    assert_eq!(
        blocks.committed_to, written,
        "the blocks restored at the snapshot"
    );
    assert_eq!(
        (blocks.committed_end, blocks.newest_record),
        (leader_blocks.committed_end, leader_blocks.newest_record),
        "the leader's committed blocks"
    );
    assert!(
        out.iter().any(|o| matches!(o,
            super::Output::WriteProducerSnapshot { offset, .. } if *offset == written)),
        "written as its own file: {out:?}"
    );
    assert_eq!(
        committed_offset(&observer),
        Some(COMMITTED),
        "the group's offset, whose record retention deleted"
    );
}
