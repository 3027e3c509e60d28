//! Idempotent produce (docs/protocol.md, "Idempotent producers"): what becomes of a client's
//! batch before the core sees it, the producer state fed from every log change the core makes,
//! and duplicates answered with their original offsets once those are committed. Logic only:
//! the replica ([`super::Replica`]) steps it between the driver and the core.

use std::collections::BTreeMap;

use crate::base::Offset;
use crate::producers::{BatchMeta, ProducerStates, SequenceCheck, Sequenced};
use crate::raft::{AppendResult, ErrorCode, LogOp, LogOpKind, Role};
use crate::record::BatchHeader;

/// Duplicates waiting for their original batch to commit, at most: a producer retries at most
/// five batches at once ([`crate::producers::BATCHES_PER_PRODUCER`]), so this is thousands of
/// producers retrying at once; one more is answered REQUEST_TIMED_OUT (retriable) at once.
pub const MAX_WAITING_DUPLICATES: usize = 65_536;

/// What becomes of one client batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Admission {
    /// To the core: no producer id, in sequence, a new producer, or not the leader (the core
    /// answers NOT_LEADER_OR_FOLLOWER with the leader it knows).
    Append,
    /// Answered with this error, not appended.
    Refuse(ErrorCode),
    /// Already in the log at these offsets: answered from there once they are committed, never
    /// appended again.
    Duplicate {
        base_offset: Offset,
        last_offset: Offset,
    },
}

/// Decides what becomes of `batch` (a client's RecordBatch) on a replica of `role` whose
/// producer state is `producers`. A pure function of its arguments.
pub fn admit(producers: &ProducerStates, role: Role, batch: &[u8]) -> Admission {
    // Bytes that do not frame as a batch are the core's to refuse (it validates every batch).
    let Ok(header) = BatchHeader::read(batch) else {
        return Admission::Append;
    };
    if header.is_transactional() {
        // No transaction coordinator here (docs/clients.md): refused before anything is stored.
        return Admission::Refuse(ErrorCode::TRANSACTIONAL_ID_AUTHORIZATION_FAILED);
    }
    let Some(sequenced) = Sequenced::of(&header) else {
        return Admission::Append;
    };
    if role != Role::Leader {
        return Admission::Append;
    }
    match producers.check(&sequenced) {
        SequenceCheck::Append => Admission::Append,
        SequenceCheck::Duplicate {
            base_offset,
            last_offset,
        } => Admission::Duplicate {
            base_offset,
            last_offset,
        },
        SequenceCheck::OutOfOrder => Admission::Refuse(ErrorCode::OUT_OF_ORDER_SEQUENCE_NUMBER),
        SequenceCheck::FencedEpoch => Admission::Refuse(ErrorCode::INVALID_PRODUCER_EPOCH),
        SequenceCheck::Invalid => Admission::Refuse(ErrorCode::INVALID_RECORD),
    }
}

/// Counts for the operator and the simulator's summary.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProducingCounts {
    /// Retries recognised as already in the log (answered from it, not appended again).
    pub duplicates: u64,
    /// Batches refused by the sequence or epoch checks, or as transactional.
    pub refused: u64,
}

/// The idempotence state of a replica.
#[derive(Default)]
pub struct Producing {
    producers: ProducerStates,
    /// Duplicates waiting for the high watermark to pass their original batch:
    /// (original end offset, append id) -> original base offset.
    waiting: BTreeMap<(Offset, u64), Offset>,
    counts: ProducingCounts,
    /// Batches below this offset are the restored state's already, and are not fed again
    /// (a reset that came with the leader's snapshot: [`Producing::restore`]).
    replay_from: Offset,
}

/// An answer the replica owes the driver: (append id, its result).
pub type Answer = (u64, AppendResult);

impl Producing {
    pub fn new(producers: ProducerStates) -> Self {
        Self {
            producers,
            ..Self::default()
        }
    }

    pub fn producers(&self) -> &ProducerStates {
        &self.producers
    }

    /// The log was reset to a start below `offset`, with the leader's producer state there:
    /// it replaces this replica's (it knows every producer of the committed log below
    /// `offset`, this replica's included), and the batches below `offset`, which the reset
    /// log fetches next, are not fed again.
    pub(super) fn restore(&mut self, offset: Offset, producers: Vec<(i64, Vec<BatchMeta>)>) {
        assert!(
            self.waiting.is_empty(),
            "a replica whose log is reset leads nothing"
        );
        let limits = self.producers.limits();
        self.producers = ProducerStates::restored(limits, offset, producers);
        self.replay_from = offset;
    }

    pub fn counts(&self) -> ProducingCounts {
        self.counts
    }

    /// Duplicates waiting for their original batch to commit.
    pub fn waiting(&self) -> usize {
        self.waiting.len()
    }

    pub(super) fn count(&mut self, admission: Admission) {
        match admission {
            Admission::Append => {}
            Admission::Refuse(_) => self.counts.refused += 1,
            Admission::Duplicate { .. } => self.counts.duplicates += 1,
        }
    }

    /// A duplicate (append `id`) of the batch at `base_offset..=last_offset`: answered with those
    /// offsets once the high watermark `hw` passes them, like any acks=-1 answer (acks=1 waits
    /// for the same, which is stricter). Returns the answer when it is due now.
    pub(super) fn duplicate(
        &mut self,
        id: u64,
        base_offset: Offset,
        last_offset: Offset,
        hw: Option<Offset>,
    ) -> Option<AppendResult> {
        assert!(base_offset <= last_offset, "a batch holds a record");
        let end = last_offset + 1;
        let appended = AppendResult::Appended {
            base_offset,
            last_offset,
        };
        if hw.is_some_and(|hw| hw >= end) {
            return Some(appended);
        }
        if self.waiting.len() >= MAX_WAITING_DUPLICATES {
            return Some(AppendResult::Failed {
                error: ErrorCode::REQUEST_TIMED_OUT,
                leader_id: -1,
                leader_epoch: -1,
            });
        }
        let previous = self.waiting.insert((end, id), base_offset);
        assert!(previous.is_none(), "append id {id} waits once");
        None
    }

    /// Every log change the core makes goes through the producer state, in order, on every
    /// replica, so a new leader has it already. `hw` is the replica's high watermark after the
    /// step that made the change. Duplicates whose original left the log are answered in
    /// `answers` with `gone`.
    pub(super) fn track(
        &mut self,
        op: &LogOp,
        hw: Option<Offset>,
        gone: AppendResult,
        answers: &mut Vec<Answer>,
    ) {
        match &op.kind {
            LogOpKind::Append(batches) => {
                let fed = batches
                    .iter()
                    .filter(|b| !b.is_control && b.base_offset >= self.replay_from);
                for batch in fed {
                    // The core's batches were validated when they came in.
                    let header = BatchHeader::read(&batch.bytes).ok();
                    if let Some(sequenced) = header.as_ref().and_then(Sequenced::of) {
                        self.producers.append(&sequenced, batch.base_offset);
                    }
                }
            }
            LogOpKind::TruncateTo(offset) => {
                // The restored state is committed: no truncation reaches below it.
                assert!(
                    *offset >= self.replay_from,
                    "a truncation to {offset}, below the restored state's {}",
                    self.replay_from
                );
                self.forget_from(*offset, gone, answers)
            }
            // What the log held at or above its high watermark went with it; the state of the
            // committed batches below stays (the batches between them and the new start are
            // not replayed: docs/protocol.md, "Retention and the log start").
            LogOpKind::ResetTo { .. } => self.forget_from(hw.unwrap_or(0), gone, answers),
        }
    }

    fn forget_from(&mut self, offset: Offset, gone: AppendResult, answers: &mut Vec<Answer>) {
        self.producers.truncate_to(offset);
        // Ends past the new log end are the keys from (offset + 1, 0) on.
        let lost = self.waiting.split_off(&(offset + 1, 0));
        answers.extend(lost.into_keys().map(|(_, id)| (id, gone.clone())));
    }

    /// The high watermark advanced to `hw`: the producer state forgets what can no longer be
    /// truncated, and waiting duplicates whose original is now committed are answered.
    pub(super) fn committed(&mut self, hw: Offset, answers: &mut Vec<Answer>) {
        self.producers.set_committed(hw);
        while let Some(entry) = self.waiting.first_entry() {
            let (end, id) = *entry.key();
            if end > hw {
                break;
            }
            let base_offset = entry.remove();
            let last_offset = end - 1;
            assert!(base_offset <= last_offset, "a waiting batch holds a record");
            let result = AppendResult::Appended {
                base_offset,
                last_offset,
            };
            answers.push((id, result));
        }
    }

    /// No longer the leader: every waiting duplicate is told `gone` (go to the new leader),
    /// since its original batch may never commit here.
    pub(super) fn resigned(&mut self, gone: AppendResult, answers: &mut Vec<Answer>) {
        let all = std::mem::take(&mut self.waiting);
        answers.extend(all.into_keys().map(|(_, id)| (id, gone.clone())));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::RecordBatchBuilder;

    const P: i64 = 7;

    /// A client batch of `records` records from producer `P` (`None`: no producer id).
    fn batch(producer: Option<(i16, i32)>, records: u32, transactional: bool) -> Vec<u8> {
        let mut b = RecordBatchBuilder::new(0, 0).transactional(transactional);
        if let Some((epoch, sequence)) = producer {
            b = b.producer(P, epoch, sequence);
        }
        for _ in 0..records {
            b.append(1_000, None, Some(b"v"), &[]);
        }
        b.build().to_vec()
    }

    /// Producer `P` with batches of epoch 2 at sequences 0..=1 (offsets 10..=11) and 2..=4
    /// (offsets 12..=14).
    fn state() -> ProducerStates {
        let mut producers = ProducerStates::default();
        producers.append(&Sequenced::new(P, 2, 0, 2), 10);
        producers.append(&Sequenced::new(P, 2, 2, 3), 12);
        producers
    }

    /// Every way a batch can go, as a table: (batch, role, admission).
    #[test]
    fn admission_follows_the_producer_state_on_the_leader_only() {
        use Role::*;
        let cases: [(Vec<u8>, Role, Admission); 10] = [
            (batch(None, 1, false), Leader, Admission::Append),
            (batch(Some((2, 5)), 2, false), Leader, Admission::Append),
            (
                batch(Some((2, 2)), 3, false),
                Leader,
                Admission::Duplicate {
                    base_offset: 12,
                    last_offset: 14,
                },
            ),
            (
                batch(Some((2, 6)), 1, false),
                Leader,
                Admission::Refuse(ErrorCode::OUT_OF_ORDER_SEQUENCE_NUMBER),
            ),
            (
                batch(Some((1, 5)), 1, false),
                Leader,
                Admission::Refuse(ErrorCode::INVALID_PRODUCER_EPOCH),
            ),
            (
                batch(Some((2, -3)), 1, false),
                Leader,
                Admission::Refuse(ErrorCode::INVALID_RECORD),
            ),
            (
                batch(Some((2, 5)), 1, true),
                Leader,
                Admission::Refuse(ErrorCode::TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
            ),
            // Not the leader: the core answers NOT_LEADER_OR_FOLLOWER with its leader.
            (batch(Some((2, 2)), 3, false), Follower, Admission::Append),
            (
                batch(None, 1, true),
                Follower,
                Admission::Refuse(ErrorCode::TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
            ),
            // Bytes that are no batch: the core's validation refuses them.
            (vec![1, 2, 3], Leader, Admission::Append),
        ];
        let producers = state();
        for (i, (bytes, role, expected)) in cases.into_iter().enumerate() {
            assert_eq!(admit(&producers, role, &bytes), expected, "case {i}");
        }
    }

    fn gone() -> AppendResult {
        AppendResult::Failed {
            error: ErrorCode::NOT_LEADER_OR_FOLLOWER,
            leader_id: 2,
            leader_epoch: 9,
        }
    }

    fn appended(base_offset: Offset, last_offset: Offset) -> AppendResult {
        AppendResult::Appended {
            base_offset,
            last_offset,
        }
    }

    /// A duplicate of a committed batch is answered at once; one of an uncommitted batch waits
    /// until the high watermark passes its original's end, in the order those ends commit.
    #[test]
    fn duplicates_are_answered_once_their_original_commits() {
        let mut p = Producing::new(state());
        assert_eq!(p.duplicate(1, 10, 11, Some(12)), Some(appended(10, 11)));
        assert_eq!(p.duplicate(2, 12, 14, Some(12)), None);
        assert_eq!(p.duplicate(3, 15, 15, None), None);
        assert_eq!(p.waiting(), 2);
        let mut answers = Vec::new();
        p.committed(14, &mut answers);
        assert!(answers.is_empty(), "14 is not past 12..=14: {answers:?}");
        p.committed(15, &mut answers);
        assert_eq!(answers, vec![(2, appended(12, 14))]);
        answers.clear();
        p.committed(16, &mut answers);
        assert_eq!(answers, vec![(3, appended(15, 15))]);
        assert_eq!(p.waiting(), 0);
        assert_eq!(p.producers().committed(), 16);
    }

    /// A truncation fails the duplicates whose original it removed (ends past the new log
    /// end) and keeps the others; losing the leadership fails every one still waiting.
    #[test]
    fn truncation_and_resignation_fail_the_duplicates_they_orphan() {
        let mut p = Producing::new(state());
        assert_eq!(p.duplicate(1, 10, 11, None), None);
        assert_eq!(p.duplicate(2, 12, 14, None), None);
        let mut answers = Vec::new();
        let truncate = LogOp {
            seq: 1,
            kind: LogOpKind::TruncateTo(12),
        };
        p.track(&truncate, None, gone(), &mut answers);
        assert_eq!(answers, vec![(2, gone())]);
        assert_eq!(
            p.producers().view(P).map(|v| v.batches.len()),
            Some(1),
            "the batch at 12 left the producer state with the log"
        );
        answers.clear();
        p.resigned(gone(), &mut answers);
        assert_eq!(answers, vec![(1, gone())]);
        assert_eq!(p.waiting(), 0);
    }

    /// A reset to a leader's log start keeps the committed state and forgets the rest.
    #[test]
    fn a_reset_forgets_what_was_not_committed() {
        let mut p = Producing::new(state());
        assert_eq!(p.duplicate(1, 12, 14, None), None);
        let mut answers = Vec::new();
        let reset = LogOp {
            seq: 1,
            kind: LogOpKind::ResetTo {
                start: 40,
                epoch: 3,
            },
        };
        p.track(&reset, Some(12), gone(), &mut answers);
        assert_eq!(answers, vec![(1, gone())]);
        let view = p.producers().view(P).expect("the committed batch stays");
        assert_eq!(view.batches.len(), 1);
        assert_eq!(view.batches[0].base_offset, 10);
    }

    /// Appends feed the producer state (control batches and batches without a producer id
    /// do not); the bound on waiting duplicates answers the one past it retriably.
    #[test]
    fn appends_feed_the_state_and_waiting_is_bounded() {
        let mut p = Producing::default();
        let stamped = |bytes: Vec<u8>, base_offset: Offset, is_control: bool| {
            let mut bytes = bytes::BytesMut::from(&bytes[..]);
            crate::record::stamp(&mut bytes, base_offset, 1);
            crate::raft::Batch {
                base_offset,
                epoch: 1,
                record_count: 1,
                is_control,
                bytes: bytes.freeze(),
            }
        };
        let append = LogOp {
            seq: 1,
            kind: LogOpKind::Append(vec![
                stamped(batch(Some((0, 0)), 1, false), 0, false),
                stamped(batch(None, 1, false), 1, false),
                stamped(batch(Some((0, 1)), 1, false), 2, true),
            ]),
        };
        let mut answers = Vec::new();
        p.track(&append, None, gone(), &mut answers);
        assert!(answers.is_empty());
        let view = p
            .producers()
            .view(P)
            .expect("the producer's batch was tracked");
        assert_eq!(
            view.batches.len(),
            1,
            "control and plain batches are not: {view:?}"
        );
        for id in 0..MAX_WAITING_DUPLICATES as u64 {
            assert_eq!(p.duplicate(id, 0, 0, None), None);
        }
        let over = p.duplicate(u64::MAX, 0, 0, None);
        assert!(
            matches!(over, Some(AppendResult::Failed { error, .. }) if error == ErrorCode::REQUEST_TIMED_OUT),
            "{over:?}"
        );
    }
}
