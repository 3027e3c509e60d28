//! Idempotent-producer state: per producer id, its epoch and its last batches, rebuilt from the
//! log's batch headers (docs/protocol.md, "Idempotent producers"). Logic only, no IO: the node
//! feeds it every log change in order and asks it about each new batch before the core appends.
//!
//! What it keeps per producer: every batch at or above the committed offset plus the last
//! [`BATCHES_PER_PRODUCER`] below it. Raft never truncates below the committed offset, so a
//! truncation is rolled back exactly by dropping batches from the back (no log read); the batches
//! below the committed offset beyond the last five can never be needed again and are dropped.

use std::collections::{BTreeSet, HashMap, VecDeque};

use crate::base::Offset;
use crate::record::BatchHeader;

/// The batches per producer whose retries are recognised as duplicates: Kafka's
/// `max.in.flight.requests.per.connection` limit for idempotence.
pub const BATCHES_PER_PRODUCER: usize = 5;
/// Producers tracked at most; beyond it the least recently written is forgotten.
pub const DEFAULT_MAX_PRODUCERS: usize = 100_000;
/// Batches at or above the committed offset kept per producer at most (beyond the last five):
/// bounds memory on a node that has not learned the committed offset yet (after a restart).
pub const DEFAULT_MAX_UNCOMMITTED_PER_PRODUCER: usize = 1024;

/// The bounds of a [`ProducerStates`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProducerLimits {
    pub max_producers: usize,
    pub max_uncommitted_per_producer: usize,
}

impl Default for ProducerLimits {
    fn default() -> Self {
        Self {
            max_producers: DEFAULT_MAX_PRODUCERS,
            max_uncommitted_per_producer: DEFAULT_MAX_UNCOMMITTED_PER_PRODUCER,
        }
    }
}

/// The idempotence fields of one batch header (a batch without a producer id has none).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sequenced {
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub base_sequence: i32,
    /// The batch's LastOffsetDelta: it spans sequences `base_sequence ..= base + delta`.
    pub last_offset_delta: i32,
}

impl Sequenced {
    /// A batch of `records` from a producer, its first sequence `base_sequence` (fewer than
    /// one record makes a LastOffsetDelta below 0, which [`ProducerStates::check`] refuses).
    pub fn new(producer_id: i64, producer_epoch: i16, base_sequence: i32, records: i32) -> Self {
        Self {
            producer_id,
            producer_epoch,
            base_sequence,
            last_offset_delta: records - 1,
        }
    }

    /// The batch's idempotence fields, or None for a batch without a producer id (-1), which is
    /// never checked.
    pub fn of(header: &BatchHeader) -> Option<Sequenced> {
        (header.producer_id >= 0).then_some(Sequenced {
            producer_id: header.producer_id,
            producer_epoch: header.producer_epoch,
            base_sequence: header.base_sequence,
            last_offset_delta: header.last_offset_delta,
        })
    }

    /// The last sequence of the batch; sequences wrap from i32::MAX to 0 as Kafka's do
    /// (`DefaultRecordBatch.incrementSequence`).
    pub fn last_sequence(&self) -> i32 {
        next_sequence_after(self.base_sequence, self.last_offset_delta)
    }
}

/// `sequence` advanced by `by` (>= 0), wrapping from i32::MAX to 0.
fn next_sequence_after(sequence: i32, by: i32) -> i32 {
    let sum = i64::from(sequence) + i64::from(by);
    let modulus = i64::from(i32::MAX) + 1;
    (sum.rem_euclid(modulus)) as i32
}

/// One batch a producer wrote, as kept in its state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatchMeta {
    pub producer_epoch: i16,
    pub first_sequence: i32,
    pub last_sequence: i32,
    pub base_offset: Offset,
    pub last_offset: Offset,
}

/// What the state says about a new batch from a producer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SequenceCheck {
    /// In sequence (or from a producer not tracked): append it.
    Append,
    /// A retry of a batch already in the log at these offsets: do not append it again.
    Duplicate {
        base_offset: Offset,
        last_offset: Offset,
    },
    /// A gap, a sequence from the past that is no longer recognised, or a new epoch not
    /// starting at 0: OUT_OF_ORDER_SEQUENCE_NUMBER (45).
    OutOfOrder,
    /// An epoch older than the producer's: INVALID_PRODUCER_EPOCH (47).
    FencedEpoch,
    /// A producer id with a negative epoch or sequence: INVALID_RECORD (87), as Kafka's
    /// validator answers.
    Invalid,
}

/// The state of one producer: its batches in log order (never empty while it is tracked).
#[derive(Clone, Debug)]
struct Producer {
    batches: VecDeque<BatchMeta>,
    /// Batches at or above the committed offset were dropped by the per-producer bound, so a
    /// deep truncation may leave fewer batches than the log implies (docs/protocol.md).
    lost_history: bool,
}

impl Producer {
    fn latest(&self) -> &BatchMeta {
        self.batches.back().expect("a tracked producer has a batch")
    }

    /// The last [`BATCHES_PER_PRODUCER`] batches, restricted to the current (latest) epoch: a
    /// new epoch starts a new history, as Kafka clears it on an epoch bump.
    fn recent(&self) -> impl Iterator<Item = &BatchMeta> {
        let epoch = self.latest().producer_epoch;
        self.batches
            .iter()
            .rev()
            .take(BATCHES_PER_PRODUCER)
            .take_while(move |b| b.producer_epoch == epoch)
    }
}

/// What one producer's state implies, for comparing machines in tests and tools.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProducerView {
    pub producer_epoch: i16,
    /// Oldest first, at most [`BATCHES_PER_PRODUCER`], all of `producer_epoch`.
    pub batches: Vec<BatchMeta>,
}

/// Every producer's state, fed the log's changes in order (see the module comment).
#[derive(Clone, Debug)]
pub struct ProducerStates {
    limits: ProducerLimits,
    producers: HashMap<i64, Producer>,
    /// (last offset written, producer id): the least recently written first, for eviction and
    /// for finding the producers a truncation touches.
    by_recency: BTreeSet<(Offset, i64)>,
    /// Below this offset the log is committed and is never truncated.
    committed: Offset,
    evicted: u64,
}

impl Default for ProducerStates {
    fn default() -> Self {
        Self::new(ProducerLimits::default())
    }
}

impl ProducerStates {
    pub fn new(limits: ProducerLimits) -> Self {
        assert!(limits.max_producers > 0, "at least one producer tracked");
        Self {
            limits,
            producers: HashMap::new(),
            by_recency: BTreeSet::new(),
            committed: 0,
            evicted: 0,
        }
    }

    /// Producers tracked now.
    pub fn len(&self) -> usize {
        self.producers.len()
    }

    pub fn is_empty(&self) -> bool {
        self.producers.is_empty()
    }

    /// Producers forgotten so far because the bound was reached.
    pub fn evicted(&self) -> u64 {
        self.evicted
    }

    /// Checks a new batch from a producer against the batches in the log (those handed to the
    /// core included, so pipelined batches are checked against each other).
    pub fn check(&self, batch: &Sequenced) -> SequenceCheck {
        if batch.producer_epoch < 0 || batch.base_sequence < 0 || batch.last_offset_delta < 0 {
            return SequenceCheck::Invalid;
        }
        let Some(producer) = self.producers.get(&batch.producer_id) else {
            // Unknown (new, or forgotten by eviction): any sequence is taken, as Kafka does
            // since KIP-360, so a producer whose state was dropped can carry on.
            return SequenceCheck::Append;
        };
        let latest = producer.latest();
        if batch.producer_epoch < latest.producer_epoch {
            return SequenceCheck::FencedEpoch;
        }
        if batch.producer_epoch > latest.producer_epoch {
            return if batch.base_sequence == 0 {
                SequenceCheck::Append
            } else {
                SequenceCheck::OutOfOrder
            };
        }
        let last_sequence = batch.last_sequence();
        if let Some(original) = producer
            .recent()
            .find(|b| b.first_sequence == batch.base_sequence && b.last_sequence == last_sequence)
        {
            return SequenceCheck::Duplicate {
                base_offset: original.base_offset,
                last_offset: original.last_offset,
            };
        }
        if batch.base_sequence == next_sequence_after(latest.last_sequence, 1) {
            SequenceCheck::Append
        } else {
            SequenceCheck::OutOfOrder
        }
    }

    /// A batch was appended to the log at `base_offset`. Taken as it is, unchecked: the log is
    /// the truth every replica follows.
    pub fn append(&mut self, batch: &Sequenced, base_offset: Offset) {
        let meta = BatchMeta {
            producer_epoch: batch.producer_epoch,
            first_sequence: batch.base_sequence,
            last_sequence: batch.last_sequence(),
            base_offset,
            last_offset: base_offset + i64::from(batch.last_offset_delta.max(0)),
        };
        let id = batch.producer_id;
        match self.producers.get_mut(&id) {
            Some(producer) => {
                self.by_recency.remove(&(producer.latest().last_offset, id));
                producer.batches.push_back(meta);
            }
            None => {
                if self.producers.len() >= self.limits.max_producers {
                    self.evict_least_recent();
                }
                self.producers.insert(
                    id,
                    Producer {
                        batches: VecDeque::from([meta]),
                        lost_history: false,
                    },
                );
            }
        }
        self.by_recency.insert((meta.last_offset, id));
        self.trim(id);
    }

    fn evict_least_recent(&mut self) {
        if let Some((_, id)) = self.by_recency.pop_first() {
            self.producers.remove(&id);
            self.evicted += 1;
        }
    }

    /// Everything at or beyond `offset` left the log: drop those batches (and the producers that
    /// had no other).
    pub fn truncate_to(&mut self, offset: Offset) {
        let touched: Vec<(Offset, i64)> = self
            .by_recency
            .range((offset, i64::MIN)..)
            .copied()
            .collect();
        for key in touched {
            self.by_recency.remove(&key);
            let id = key.1;
            let producer = self.producers.get_mut(&id).expect("indexed producer");
            while producer
                .batches
                .back()
                .is_some_and(|b| b.base_offset >= offset)
            {
                producer.batches.pop_back();
            }
            match producer.batches.back() {
                Some(latest) => {
                    self.by_recency.insert((latest.last_offset, id));
                }
                None => {
                    self.producers.remove(&id);
                }
            }
        }
    }

    /// The log is committed below `offset` (the high watermark): batches there are never
    /// truncated, so only the last five of them are kept.
    /// The bounds this state keeps to.
    pub fn limits(&self) -> ProducerLimits {
        self.limits
    }

    pub fn set_committed(&mut self, offset: Offset) {
        if offset <= self.committed {
            return;
        }
        self.committed = offset;
        let ids: Vec<i64> = self.producers.keys().copied().collect();
        for id in ids {
            self.trim(id);
        }
    }

    /// Drops a producer's batches that no truncation can bring back into use.
    fn trim(&mut self, id: i64) {
        let committed = self.committed;
        let cap = self.limits.max_uncommitted_per_producer;
        let producer = self
            .producers
            .get_mut(&id)
            .expect("trimmed producer exists");
        let below = producer
            .batches
            .iter()
            .take_while(|b| b.base_offset < committed)
            .count();
        for _ in BATCHES_PER_PRODUCER..below {
            producer.batches.pop_front();
        }
        if below >= BATCHES_PER_PRODUCER {
            // The last five below the committed offset are kept: history is exact again.
            producer.lost_history = false;
        }
        while producer.batches.len() > BATCHES_PER_PRODUCER + cap {
            producer.batches.pop_front();
            producer.lost_history = true;
        }
    }

    /// Whether a producer's state may hold fewer batches than the log implies (see
    /// [`ProducerLimits::max_uncommitted_per_producer`]).
    pub fn lost_history(&self, producer_id: i64) -> bool {
        self.producers
            .get(&producer_id)
            .is_some_and(|p| p.lost_history)
    }

    /// One producer's state as the log implies it, None when not tracked.
    pub fn view(&self, producer_id: i64) -> Option<ProducerView> {
        let producer = self.producers.get(&producer_id)?;
        let mut batches: Vec<BatchMeta> = producer.recent().copied().collect();
        batches.reverse();
        Some(ProducerView {
            producer_epoch: producer.latest().producer_epoch,
            batches,
        })
    }

    /// The offset below which the log is known to be committed.
    pub fn committed(&self) -> Offset {
        self.committed
    }

    /// What a snapshot at the committed offset keeps: per producer, its batches below that
    /// offset, oldest first (at most [`BATCHES_PER_PRODUCER`]: only the last five below the
    /// committed offset are kept; none for a producer written only above it). In no order:
    /// one pass over the state, nothing allocated, as the raft thread takes it.
    pub fn committed_batches(
        &self,
    ) -> impl Iterator<Item = (i64, impl Iterator<Item = &BatchMeta> + '_)> + '_ {
        let committed = self.committed;
        self.producers.iter().map(move |(&id, producer)| {
            let below = producer
                .batches
                .iter()
                .take_while(move |b| b.base_offset < committed);
            (id, below)
        })
    }

    /// [`Self::committed_batches`] collected, by producer id, producers with none left out.
    pub fn committed_part(&self) -> Vec<(i64, Vec<BatchMeta>)> {
        let mut part: Vec<(i64, Vec<BatchMeta>)> = self
            .committed_batches()
            .map(|(id, below)| (id, below.copied().collect::<Vec<_>>()))
            .filter(|(_, below)| !below.is_empty())
            .collect();
        part.sort_unstable_by_key(|(id, _)| *id);
        debug_assert!(part.iter().all(|(_, b)| b.len() <= BATCHES_PER_PRODUCER));
        part
    }

    /// The state a [`Self::committed_part`] implies, committed below `committed`: fed the log
    /// from `committed` on, it is the state of a machine fed the whole log. Beyond
    /// `limits.max_producers`, the least recently written are left out.
    pub fn restored(
        limits: ProducerLimits,
        committed: Offset,
        part: Vec<(i64, Vec<BatchMeta>)>,
    ) -> Self {
        let mut states = Self::new(limits);
        states.committed = committed;
        let mut by_last: Vec<(Offset, i64, Vec<BatchMeta>)> = part
            .into_iter()
            .filter_map(|(id, batches)| Some((batches.last()?.last_offset, id, batches)))
            .collect();
        by_last.sort_unstable_by_key(|(last, id, _)| (*last, *id));
        let skip = by_last.len().saturating_sub(limits.max_producers);
        states.evicted = skip as u64;
        for (last, id, batches) in by_last.into_iter().skip(skip) {
            assert!(
                batches
                    .windows(2)
                    .all(|w| w[0].last_offset < w[1].base_offset)
                    && batches.iter().all(|b| b.base_offset < committed),
                "a snapshot's batches are in log order and committed"
            );
            states.by_recency.insert((last, id));
            states.producers.insert(
                id,
                Producer {
                    batches: batches.into(),
                    lost_history: false,
                },
            );
            states.trim(id);
        }
        states
    }

    /// Every tracked producer's state, by producer id.
    pub fn views(&self) -> std::collections::BTreeMap<i64, ProducerView> {
        self.producers
            .keys()
            .filter_map(|&id| Some((id, self.view(id)?)))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const P: i64 = 7;

    fn seq(producer_id: i64, epoch: i16, base_sequence: i32, records: i32) -> Sequenced {
        Sequenced::new(producer_id, epoch, base_sequence, records)
    }

    /// A log of (batch, base offset), fed to a machine as it grows.
    #[derive(Default)]
    struct Log {
        batches: Vec<(Sequenced, Offset)>,
        end: Offset,
    }

    impl Log {
        fn append(&mut self, states: &mut ProducerStates, batch: Sequenced) -> Offset {
            let base = self.end;
            states.append(&batch, base);
            self.batches.push((batch, base));
            self.end = base + i64::from(batch.last_offset_delta) + 1;
            base
        }

        fn truncate(&mut self, states: &mut ProducerStates, offset: Offset) {
            self.batches.retain(|(_, base)| *base < offset);
            self.end = self
                .batches
                .last()
                .map_or(0, |(b, base)| base + i64::from(b.last_offset_delta) + 1);
            states.truncate_to(self.end);
        }

        fn rebuilt(&self, limits: ProducerLimits) -> ProducerStates {
            let mut states = ProducerStates::new(limits);
            for (batch, base) in &self.batches {
                states.append(batch, *base);
            }
            states
        }
    }

    fn write_in_order(states: &mut ProducerStates, log: &mut Log, count: i32, records: i32) {
        for i in 0..count {
            let batch = seq(P, 0, i * records, records);
            assert_eq!(states.check(&batch), SequenceCheck::Append, "batch {i}");
            log.append(states, batch);
        }
    }

    /// No producers yet, under `limits`: the start of each test of a bound.
    fn empty_with(limits: ProducerLimits) -> (ProducerStates, Log) {
        (ProducerStates::new(limits), Log::default())
    }

    /// Fresh default states and log after [`write_in_order`].
    fn written_in_order(count: i32, records: i32) -> (ProducerStates, Log) {
        let mut states = ProducerStates::default();
        let mut log = Log::default();
        write_in_order(&mut states, &mut log, count, records);
        (states, log)
    }

    #[test]
    fn each_of_the_last_five_batches_is_a_duplicate_with_its_offsets_and_older_ones_are_not() {
        let (states, log) = written_in_order(8, 3);
        for i in 3..8 {
            let (batch, base) = log.batches[i as usize];
            assert_eq!(
                states.check(&batch),
                SequenceCheck::Duplicate {
                    base_offset: base,
                    last_offset: base + 2
                },
                "batch {i}"
            );
        }
        // The sixth from the end is out of the window: a sequence from the past.
        assert_eq!(states.check(&seq(P, 0, 6, 3)), SequenceCheck::OutOfOrder);
        // Same first sequence, different last: not the same batch.
        assert_eq!(states.check(&seq(P, 0, 21, 2)), SequenceCheck::OutOfOrder);
        assert_eq!(states.check(&seq(P, 0, 24, 1)), SequenceCheck::Append);
    }

    #[test]
    fn a_gap_or_a_repeat_of_the_next_sequence_minus_one_is_out_of_order() {
        let (states, _) = written_in_order(2, 1);
        assert_eq!(states.check(&seq(P, 0, 3, 1)), SequenceCheck::OutOfOrder);
        assert_eq!(states.check(&seq(P, 0, 2, 1)), SequenceCheck::Append);
        assert_eq!(states.check(&seq(P, 0, 1, 2)), SequenceCheck::OutOfOrder);
    }

    #[test]
    fn sequences_wrap_from_i32_max_to_zero() {
        assert_eq!(seq(P, 0, i32::MAX - 1, 3).last_sequence(), 0);
        assert_eq!(seq(P, 0, i32::MAX, 1).last_sequence(), i32::MAX);
        let mut states = ProducerStates::default();
        let mut log = Log::default();
        log.append(&mut states, seq(P, 0, i32::MAX - 2, 2));
        let wrapping = seq(P, 0, i32::MAX, 2);
        assert_eq!(states.check(&wrapping), SequenceCheck::Append);
        log.append(&mut states, wrapping);
        assert_eq!(
            states.check(&wrapping),
            SequenceCheck::Duplicate {
                base_offset: 2,
                last_offset: 3
            }
        );
        assert_eq!(states.check(&seq(P, 0, 1, 1)), SequenceCheck::Append);
        assert_eq!(states.check(&seq(P, 0, 0, 1)), SequenceCheck::OutOfOrder);
        assert_eq!(states.check(&seq(P, 0, 2, 1)), SequenceCheck::OutOfOrder);
    }

    #[test]
    fn a_new_epoch_starts_at_zero_and_fences_the_old_one() {
        let (mut states, mut log) = written_in_order(3, 1);
        assert_eq!(states.check(&seq(P, 1, 3, 1)), SequenceCheck::OutOfOrder);
        assert_eq!(states.check(&seq(P, 1, 0, 1)), SequenceCheck::Append);
        log.append(&mut states, seq(P, 1, 0, 1));
        assert_eq!(states.check(&seq(P, 0, 3, 1)), SequenceCheck::FencedEpoch);
        // The old epoch's batches are no longer duplicates of anything.
        assert_eq!(states.check(&seq(P, 1, 1, 1)), SequenceCheck::Append);
        assert_eq!(states.check(&seq(P, 1, 2, 1)), SequenceCheck::OutOfOrder);
        let view = states.view(P).unwrap();
        assert_eq!(view.producer_epoch, 1);
        assert_eq!(view.batches.len(), 1);
        assert_eq!(view.batches[0].base_offset, 3);
    }

    #[test]
    fn an_unknown_producer_is_taken_at_any_sequence_and_no_producer_id_is_never_checked() {
        let states = ProducerStates::default();
        assert_eq!(states.check(&seq(P, 4, 1234, 2)), SequenceCheck::Append);
        let mut builder = crate::record::RecordBatchBuilder::new(0, 0);
        builder.append(0, None, Some(b"x"), &[]);
        let bytes = builder.build();
        let plain = crate::record::BatchHeader::read(&bytes).unwrap();
        assert_eq!(Sequenced::of(&plain), None);
        let mut builder = crate::record::RecordBatchBuilder::new(0, 0).producer(P, 2, 9);
        builder.append(0, None, Some(b"x"), &[]);
        builder.append(0, None, Some(b"y"), &[]);
        let bytes = builder.build();
        let header = crate::record::BatchHeader::read(&bytes).unwrap();
        assert_eq!(Sequenced::of(&header), Some(seq(P, 2, 9, 2)));
    }

    #[test]
    fn negative_epochs_or_sequences_with_a_producer_id_are_invalid() {
        let states = ProducerStates::default();
        assert_eq!(states.check(&seq(P, -1, 0, 1)), SequenceCheck::Invalid);
        assert_eq!(states.check(&seq(P, 0, -1, 1)), SequenceCheck::Invalid);
        assert_eq!(states.check(&seq(P, 0, 0, 0)), SequenceCheck::Invalid);
        assert_eq!(states.check(&seq(P, 0, 0, 1)), SequenceCheck::Append);
    }

    #[test]
    fn truncation_in_the_middle_of_a_producers_batches_leaves_what_the_log_implies() {
        let (mut states, mut log) = written_in_order(12, 2);
        let other = seq(P + 1, 0, 0, 1);
        log.append(&mut states, other);
        states.set_committed(10);
        // Cut batch 8 (offset 16) and everything after it, the other producer included.
        log.truncate(&mut states, 16);
        assert_eq!(
            states.views(),
            log.rebuilt(ProducerLimits::default()).views()
        );
        assert_eq!(states.view(P + 1), None);
        let view = states.view(P).unwrap();
        assert_eq!(
            view.batches
                .iter()
                .map(|b| b.base_offset)
                .collect::<Vec<_>>(),
            vec![6, 8, 10, 12, 14]
        );
        // Batch 3 (offset 6) is a duplicate again; batch 8 is the next one.
        assert_eq!(
            states.check(&seq(P, 0, 6, 2)),
            SequenceCheck::Duplicate {
                base_offset: 6,
                last_offset: 7
            }
        );
        assert_eq!(states.check(&seq(P, 0, 16, 2)), SequenceCheck::Append);
    }

    #[test]
    fn truncating_an_epoch_bump_brings_the_old_epoch_back() {
        let (mut states, mut log) = written_in_order(3, 1);
        log.append(&mut states, seq(P, 1, 0, 1));
        log.truncate(&mut states, 3);
        assert_eq!(states.view(P).unwrap().producer_epoch, 0);
        assert_eq!(states.check(&seq(P, 0, 3, 1)), SequenceCheck::Append);
        assert!(states.check(&seq(P, 0, 2, 1)).is_duplicate());
    }

    #[test]
    fn committed_batches_beyond_the_last_five_are_dropped() {
        let (mut states, mut log) = written_in_order(20, 1);
        assert_eq!(states.producers[&P].batches.len(), 20);
        states.set_committed(18);
        // Five below 18 (13..=17) and the two at or above it.
        let kept: Vec<Offset> = states.producers[&P]
            .batches
            .iter()
            .map(|b| b.base_offset)
            .collect();
        assert_eq!(kept, vec![13, 14, 15, 16, 17, 18, 19]);
        // A committed offset that goes back changes nothing.
        states.set_committed(5);
        assert_eq!(states.producers[&P].batches.len(), 7);
        log.truncate(&mut states, 18);
        assert_eq!(
            states.views(),
            log.rebuilt(ProducerLimits::default()).views()
        );
    }

    #[test]
    fn the_least_recently_written_producer_is_evicted_and_then_unknown() {
        let (mut states, mut log) = empty_with(ProducerLimits {
            max_producers: 2,
            ..ProducerLimits::default()
        });
        log.append(&mut states, seq(1, 0, 0, 1));
        log.append(&mut states, seq(2, 0, 0, 1));
        log.append(&mut states, seq(1, 0, 1, 1)); // producer 1 written most recently
        assert_eq!(states.evicted(), 0);
        log.append(&mut states, seq(3, 0, 0, 1));
        assert_eq!(states.len(), 2);
        assert!(!states.is_empty());
        assert!(ProducerStates::default().is_empty());
        assert_eq!(states.evicted(), 1);
        assert_eq!(states.view(2), None);
        assert!(states.view(1).is_some() && states.view(3).is_some());
        // Forgotten: a retry is no longer recognised, any sequence is taken.
        assert_eq!(states.check(&seq(2, 0, 0, 1)), SequenceCheck::Append);
        assert_eq!(states.check(&seq(2, 0, 57, 1)), SequenceCheck::Append);
    }

    #[test]
    fn the_per_producer_bound_drops_the_oldest_and_says_so_until_commits_catch_up() {
        let (mut states, mut log) = empty_with(ProducerLimits {
            max_uncommitted_per_producer: 3,
            ..ProducerLimits::default()
        });
        write_in_order(&mut states, &mut log, 8, 1);
        assert_eq!(states.producers[&P].batches.len(), 8);
        assert!(!states.lost_history(P));
        write_in_order_from(&mut states, &mut log, 8, 2);
        assert_eq!(states.producers[&P].batches.len(), 8);
        assert!(states.lost_history(P));
        assert_eq!(states.producers[&P].batches[0].base_offset, 2);
        states.set_committed(8);
        assert!(!states.lost_history(P));
        assert!(!states.lost_history(P + 100));
    }

    fn write_in_order_from(states: &mut ProducerStates, log: &mut Log, from: i32, count: i32) {
        for i in from..from + count {
            log.append(states, seq(P, 0, i, 1));
        }
    }

    impl SequenceCheck {
        fn is_duplicate(self) -> bool {
            matches!(self, SequenceCheck::Duplicate { .. })
        }
    }

    #[derive(Clone, Debug)]
    enum Op {
        /// A batch from producer `id % 4`: in sequence, a retry, a gap, or a new epoch.
        Write { id: u8, kind: u8, records: u8 },
        /// Truncate `back` batches from the end (never below the committed offset).
        Truncate { back: u8 },
        /// Commit `upto` percent of the log.
        Commit { percent: u8 },
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            6 => (0u8..4, 0u8..4, 1u8..4).prop_map(|(id, kind, records)| Op::Write { id, kind, records }),
            2 => (0u8..8).prop_map(|back| Op::Truncate { back }),
            1 => (0u8..=100).prop_map(|percent| Op::Commit { percent }),
        ]
    }

    /// The next batch a producer of the model log might send, sometimes wrong on purpose.
    fn next_batch(states: &ProducerStates, id: i64, kind: u8, records: i32) -> Sequenced {
        let Some(view) = states.view(id) else {
            return seq(id, 0, i32::MAX - 3, records);
        };
        let last = view.batches.last().unwrap();
        let next = next_sequence_after(last.last_sequence, 1);
        match kind {
            0 => seq(id, view.producer_epoch, next, records),
            1 => seq(
                id,
                view.producer_epoch,
                next_sequence_after(next, 1),
                records,
            ),
            2 => seq(id, view.producer_epoch + 1, 0, records),
            _ => seq(id, view.producer_epoch, last.first_sequence, records),
        }
    }

    fn run(ops: &[Op], limits: ProducerLimits) -> (ProducerStates, Log) {
        let mut states = ProducerStates::new(limits);
        let mut log = Log::default();
        let mut committed: Offset = 0;
        for op in ops {
            match *op {
                Op::Write { id, kind, records } => {
                    let batch = next_batch(&states, i64::from(id), kind, i32::from(records));
                    // The log takes whatever a leader appended; the check is not consulted.
                    log.append(&mut states, batch);
                }
                Op::Truncate { back } => {
                    let keep = log.batches.len().saturating_sub(usize::from(back));
                    let offset = log.batches.get(keep).map_or(log.end, |(_, base)| *base);
                    if offset >= committed {
                        log.truncate(&mut states, offset);
                    }
                }
                Op::Commit { percent } => {
                    committed = committed.max(log.end * i64::from(percent) / 100);
                    states.set_committed(committed);
                }
            }
        }
        (states, log)
    }

    /// Two states that hold the same and answer alike, for every next batch a producer of the
    /// model might send (as `truth` sees it).
    fn answer_alike(states: &ProducerStates, truth: &ProducerStates) -> Result<(), TestCaseError> {
        prop_assert_eq!(states.views(), truth.views());
        for id in 0..5i64 {
            for kind in 0..4u8 {
                let batch = next_batch(truth, id, kind, 2);
                prop_assert_eq!(states.check(&batch), truth.check(&batch));
            }
        }
        Ok(())
    }

    /// A state under two producers at most that knows only what the complete state of `log`
    /// knows: each producer's epoch, and the tail of its batches.
    fn only_forgets(states: &ProducerStates, log: &Log) -> Result<(), TestCaseError> {
        prop_assert!(states.len() <= 2);
        let complete = log.rebuilt(ProducerLimits::default()).views();
        for (id, view) in states.views() {
            let truth = &complete[&id];
            prop_assert_eq!(view.producer_epoch, truth.producer_epoch);
            prop_assert!(
                truth.batches.ends_with(&view.batches),
                "{:?} vs {:?}",
                view,
                truth
            );
        }
        Ok(())
    }

    proptest! {
        /// A state restored from its committed part and fed the log from the committed offset
        /// on equals the state fed the whole log (the producer-state snapshot's promise); with
        /// evictions it only forgets, as the fed state does.
        #[test]
        fn restored_from_the_committed_part_and_fed_the_rest_equals_the_fed_state(
            ops in proptest::collection::vec(op(), 0..120),
            small in any::<bool>(),
        ) {
            let limits = if small {
                ProducerLimits { max_producers: 2, max_uncommitted_per_producer: 4 }
            } else {
                ProducerLimits::default()
            };
            let (states, log) = run(&ops, limits);
            let committed = states.committed();
            let mut restored = ProducerStates::restored(limits, committed, states.committed_part());
            for (batch, base) in log.batches.iter().filter(|(_, base)| *base >= committed) {
                restored.append(batch, *base);
            }
            if small {
                only_forgets(&restored, &log)?;
            } else {
                answer_alike(&restored, &states)?;
            }
        }

        #[test]
        fn fed_with_truncations_equals_rebuilt_from_the_surviving_log(
            ops in proptest::collection::vec(op(), 0..120)
        ) {
            let limits = ProducerLimits::default();
            let (states, log) = run(&ops, limits);
            answer_alike(&states, &log.rebuilt(limits))?;
        }

        #[test]
        fn with_evictions_a_fed_machine_only_forgets(
            ops in proptest::collection::vec(op(), 0..120)
        ) {
            let limits = ProducerLimits { max_producers: 2, max_uncommitted_per_producer: 4 };
            let (states, log) = run(&ops, limits);
            only_forgets(&states, &log)?;
        }
    }
}
