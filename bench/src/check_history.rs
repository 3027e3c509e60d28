//! The history a `ringraft-bench check` run records and the checks over it, apart from any
//! process or socket: [`analyse`] is a pure function of the events, so every check is unit
//! tested on small synthetic histories below, and a history written by a run can be checked
//! again on its own (`ringraft-bench check --history-in FILE`). The checks are those of
//! Jepsen's queue workload, applied to one Kafka partition; what each one means is in
//! docs/testing.md ("The correctness checker").
//!
//! The model the checks hold the cluster to:
//! - An acknowledged record (acks=-1, a Produce answered NONE with a base offset) is committed:
//!   it is in the log at that offset forever (docs/protocol.md section 7: no truncation below
//!   the high watermark).
//! - A record a consumer was given (Fetch, read_committed, below the high watermark the answer
//!   names) is committed too: whatever node served it, the same record is at that offset
//!   forever. A consumer may be shown a *stale* log (a newly elected leader's lower high
//!   watermark, or a deposed one's: a leader cut off keeps answering Fetch until its progress
//!   timeout), but never a record that later changes or disappears. Answers whose high
//!   watermark is below what the consumer has already read are counted, not failed: the
//!   current read model allows them (no leader lease yet; docs/testing.md, "The correctness
//!   checker").
//! - A consumer reading from its position is given every offset once, in order (control
//!   records included: they take offsets too).
//! - A producer's acknowledged records are in the log in the order it sent them. The checker's
//!   producers make that a promise for plain producers too: each connection's requests are
//!   answered in order, and a producer leaves a connection (and everything unanswered on it)
//!   before it opens the next one. Idempotent producers retry a batch with its sequence number,
//!   and that retry must never write it twice.
//! - A send that got no answer (or an error) is indeterminate: its record may or may not be in
//!   the log, once; it is counted, never failed.

use std::collections::{BTreeMap, HashMap, HashSet};

use serde::{Deserialize, Serialize};

/// A record as a consumer or the final read saw it: its offset and its value (None for a
/// control record, which takes an offset but carries no data).
pub type Seen = (i64, Option<String>);

/// One event of a run, in the order they were recorded; `t_ms` is milliseconds since the
/// run's start.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "kebab-case")]
pub enum Event {
    /// A producer sent record `seq` (value [`value_of`]) to `node`.
    Send {
        t_ms: f64,
        producer: u32,
        seq: u64,
        idempotent: bool,
        node: i32,
    },
    /// Record `seq` was acknowledged by `node` at `offset`.
    Ack {
        t_ms: f64,
        producer: u32,
        seq: u64,
        offset: i64,
        node: i32,
    },
    /// The send of `seq` got no acknowledgement this time (an error code, a lost connection, a
    /// timeout): indeterminate. An idempotent producer sends it again, the same sequence.
    Unknown {
        t_ms: f64,
        producer: u32,
        seq: u64,
        why: String,
    },
    /// One Fetch answer a consumer took from `node`: the records at and past `fetch_offset`
    /// in the order given (the part of a batch below the fetch offset is dropped, as a Kafka
    /// consumer drops it), and the high watermark the answer named.
    Read {
        t_ms: f64,
        consumer: u32,
        node: i32,
        fetch_offset: i64,
        high_watermark: i64,
        records: Vec<Seen>,
    },
    /// A Fetch that failed (an error code, a lost connection).
    ReadError {
        t_ms: f64,
        consumer: u32,
        node: i32,
        fetch_offset: i64,
        why: String,
    },
    /// The nemesis put a fault on `node`.
    FaultStart { t_ms: f64, kind: String, node: i32 },
    /// ... and undid it.
    FaultEnd { t_ms: f64, kind: String, node: i32 },
    /// The watchers first named `node` the leader of `epoch`.
    Leader { t_ms: f64, node: i32, epoch: i32 },
    /// The final full read, from `node`, after every fault was undone and the producers
    /// stopped: the log from `log_start` to the high watermark.
    Final {
        t_ms: f64,
        node: i32,
        log_start: i64,
        high_watermark: i64,
        records: Vec<Seen>,
    },
    /// Something planted on purpose to show that the checker fails (`--plant`): what.
    Planted { t_ms: f64, what: String },
}

impl Event {
    pub fn t_ms(&self) -> f64 {
        match self {
            Event::Send { t_ms, .. }
            | Event::Ack { t_ms, .. }
            | Event::Unknown { t_ms, .. }
            | Event::Read { t_ms, .. }
            | Event::ReadError { t_ms, .. }
            | Event::FaultStart { t_ms, .. }
            | Event::FaultEnd { t_ms, .. }
            | Event::Leader { t_ms, .. }
            | Event::Final { t_ms, .. }
            | Event::Planted { t_ms, .. } => *t_ms,
        }
    }
}

/// The value of producer `producer`'s record `seq`: unique over a run, so a value names its
/// record wherever it is seen.
pub fn value_of(producer: u32, seq: u64) -> String {
    format!("chk-{producer}-{seq}")
}

/// One check's outcome.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CheckResult {
    pub name: &'static str,
    /// What a violation is, in a line.
    pub meaning: &'static str,
    pub violations: u64,
    /// The first few violations, for the operator.
    pub examples: Vec<String>,
}

impl CheckResult {
    fn new(name: &'static str, meaning: &'static str) -> Self {
        Self {
            name,
            meaning,
            violations: 0,
            examples: Vec::new(),
        }
    }

    fn violation(&mut self, example: impl FnOnce() -> String) {
        const EXAMPLES: usize = 5;
        self.violations += 1;
        if self.examples.len() < EXAMPLES {
            self.examples.push(example());
        }
    }
}

/// Counts that are not violations: what the run did, and what the model allows.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Counts {
    pub sends: u64,
    /// Distinct records sent (an idempotent retry sends one record again).
    pub records_sent: u64,
    pub acknowledged: u64,
    /// Sends answered with no acknowledgement (an error, a lost connection, a timeout).
    pub indeterminate_sends: u64,
    /// Records sent, never acknowledged, yet in the final read (committed without an answer).
    pub unacknowledged_in_final: u64,
    pub reads: u64,
    pub records_read: u64,
    pub read_errors: u64,
    /// Answers whose high watermark was below the consumer's position: a node showed a shorter
    /// committed log than the consumer had already read (allowed by the current model, see
    /// the module's comment).
    pub reads_behind_position: u64,
    pub faults: u64,
    /// Leader changes the watchers saw.
    pub leaders: u64,
    /// Data records of the final read, and its high watermark (-1 without a final read).
    pub final_records: u64,
    pub final_high_watermark: i64,
    pub planted: u64,
}

/// The verdict: every check, and the counts.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Verdict {
    pub checks: Vec<CheckResult>,
    pub counts: Counts,
}

impl Verdict {
    pub fn violations(&self) -> u64 {
        self.checks.iter().map(|c| c.violations).sum()
    }

    #[cfg(test)]
    pub fn check(&self, name: &str) -> Option<&CheckResult> {
        self.checks.iter().find(|c| c.name == name)
    }
}

pub const LOST: &str = "lost";
pub const UNSEEN: &str = "unseen";
pub const DUPLICATED: &str = "duplicated";
pub const REORDERED: &str = "reordered";
pub const SKIPPED: &str = "skipped";
pub const NON_MONOTONIC: &str = "non-monotonic";
pub const CHANGED: &str = "changed";
pub const UNEXPECTED: &str = "unexpected";
pub const FINAL_READ: &str = "final-read";

/// Checks a history (see the module's comment for the model; docs/testing.md for each check).
pub fn analyse(events: &[Event]) -> Verdict {
    let mut counts = Counts {
        final_high_watermark: -1,
        ..Counts::default()
    };
    // What was sent, what was acknowledged (producer, seq) -> offsets answered.
    let mut sent: HashSet<String> = HashSet::new();
    let mut acks: BTreeMap<(u32, u64), Vec<i64>> = BTreeMap::new();
    let mut reads: Vec<&Event> = Vec::new();
    let mut finals: Vec<(&i64, &Vec<Seen>)> = Vec::new();
    for event in events {
        match event {
            Event::Send { producer, seq, .. } => {
                counts.sends += 1;
                sent.insert(value_of(*producer, *seq));
            }
            Event::Ack {
                producer,
                seq,
                offset,
                ..
            } => {
                counts.acknowledged += 1;
                acks.entry((*producer, *seq)).or_default().push(*offset);
            }
            Event::Unknown { .. } => counts.indeterminate_sends += 1,
            Event::Read { records, .. } => {
                counts.reads += 1;
                counts.records_read += records.len() as u64;
                reads.push(event);
            }
            Event::ReadError { .. } => counts.read_errors += 1,
            Event::FaultStart { .. } => counts.faults += 1,
            Event::FaultEnd { .. } => {}
            Event::Leader { .. } => counts.leaders += 1,
            Event::Final {
                log_start,
                high_watermark,
                records,
                ..
            } => {
                counts.final_high_watermark = *high_watermark;
                finals.push((log_start, records));
            }
            Event::Planted { .. } => counts.planted += 1,
        }
    }
    counts.records_sent = sent.len() as u64;

    let mut final_read = CheckResult::new(
        FINAL_READ,
        "the history has no final read (or more than one): nothing to hold the others against",
    );
    let mut skipped = CheckResult::new(
        SKIPPED,
        "a consumer was given a record past its position (the offsets between never given), or the final read has a hole",
    );
    // The final log: offset -> value, and value -> offsets.
    let mut final_at: BTreeMap<i64, Option<String>> = BTreeMap::new();
    let mut final_start = i64::MAX;
    match finals.as_slice() {
        [] => final_read.violation(|| "no final read in the history".into()),
        [(start, records)] => {
            final_start = **start;
            let mut next = **start;
            for (offset, value) in records.iter() {
                if *offset != next {
                    let (expected, got) = (next, *offset);
                    skipped.violation(|| {
                        format!("the final read went from offset {expected} to {got}")
                    });
                }
                next = offset + 1;
                final_at.insert(*offset, value.clone());
            }
        }
        more => {
            let n = more.len();
            final_read.violation(|| format!("{n} final reads in one history"));
        }
    }
    let mut final_offsets: HashMap<&str, Vec<i64>> = HashMap::new();
    for (offset, value) in &final_at {
        if let Some(value) = value {
            counts.final_records += 1;
            final_offsets.entry(value).or_default().push(*offset);
        }
    }

    // lost and unseen: every acknowledgement against the final read.
    let mut lost = CheckResult::new(
        LOST,
        "an acknowledged record is not at the offset its acknowledgement named in the final read",
    );
    let mut unseen = CheckResult::new(
        UNSEEN,
        "an acknowledged record is nowhere in the final read",
    );
    let have_final = finals.len() == 1;
    for (&(producer, seq), offsets) in &acks {
        let value = value_of(producer, seq);
        let found = final_offsets.get(value.as_str());
        if have_final && found.is_none() {
            unseen.violation(|| format!("{value}, acknowledged at {offsets:?}"));
        }
        for offset in offsets {
            let there = final_at.get(offset);
            if !have_final || there != Some(&Some(value.clone())) {
                lost.violation(|| match there {
                    Some(Some(other)) => format!(
                        "{value}, acknowledged at offset {offset}, which holds {other} in the final read"
                    ),
                    Some(None) => format!(
                        "{value}, acknowledged at offset {offset}, which holds a control record"
                    ),
                    None => format!(
                        "{value}, acknowledged at offset {offset}, beyond the final read"
                    ),
                });
            }
        }
    }
    for value in final_offsets.keys() {
        let key = parse_value(value);
        if sent.contains(*value) && key.is_some_and(|key| !acks.contains_key(&key)) {
            counts.unacknowledged_in_final += 1;
        }
    }

    // duplicated: a value at two offsets of the final read, or delivered twice to a consumer
    // (below, with the consumers).
    let mut duplicated = CheckResult::new(
        DUPLICATED,
        "one record at two or more offsets of the final read, or given twice to one consumer",
    );
    let mut dup_values: Vec<(&&str, &Vec<i64>)> =
        final_offsets.iter().filter(|(_, o)| o.len() > 1).collect();
    dup_values.sort();
    for (value, offsets) in dup_values {
        duplicated.violation(|| format!("{value} at offsets {offsets:?} of the final read"));
    }

    // reordered: each producer's acknowledged records, in the order it sent them (sequence
    // numbers), at increasing offsets (as acknowledged, and in the final read).
    let mut reordered = CheckResult::new(
        REORDERED,
        "a producer's acknowledged records are not at increasing offsets in the order it sent them",
    );
    let mut previous: Option<((u32, u64), i64, Option<i64>)> = None;
    for (&(producer, seq), offsets) in &acks {
        let acked = *offsets.iter().min().expect("at least one");
        let in_final = final_offsets
            .get(value_of(producer, seq).as_str())
            .and_then(|o| o.iter().min().copied());
        if let Some(((p, s), before_acked, before_final)) = previous {
            if p == producer {
                let final_backwards =
                    matches!((before_final, in_final), (Some(a), Some(b)) if b <= a);
                if acked <= before_acked || final_backwards {
                    reordered.violation(|| {
                        format!(
                            "producer {producer}: record {s} acknowledged at {before_acked} (final read: {before_final:?}), \
                             record {seq} after it at {acked} (final read: {in_final:?})"
                        )
                    });
                }
            }
        }
        previous = Some(((producer, seq), acked, in_final));
    }

    // The consumers: skipped, non-monotonic, duplicated, changed.
    let mut non_monotonic = CheckResult::new(
        NON_MONOTONIC,
        "a consumer was given an offset at or below one it had already been given",
    );
    let mut changed = CheckResult::new(
        CHANGED,
        "a record a consumer was given differs from what another read or the final read has at that offset, or is gone",
    );
    let mut unexpected = CheckResult::new(
        UNEXPECTED,
        "a record read (by a consumer or the final read) that no producer sent",
    );
    // Per consumer: the next offset it expects, and the values it has been given.
    let mut position: HashMap<u32, i64> = HashMap::new();
    let mut given: HashMap<u32, HashMap<String, i64>> = HashMap::new();
    // What any consumer was given at each offset: the first value and who gave it.
    let mut read_at: HashMap<i64, (Option<String>, u32, i32)> = HashMap::new();
    let mut unexpected_seen: HashSet<String> = HashSet::new();
    for event in reads {
        let Event::Read {
            consumer,
            node,
            fetch_offset,
            high_watermark,
            records,
            ..
        } = event
        else {
            continue;
        };
        let next = position.entry(*consumer).or_insert(*fetch_offset);
        if *high_watermark < *next {
            counts.reads_behind_position += 1;
        }
        for (offset, value) in records {
            if *offset < *next {
                let (c, o, n) = (*consumer, *offset, *next);
                non_monotonic.violation(|| {
                    format!("consumer {c} given offset {o} from node {node} after reaching {n}")
                });
            } else {
                if *offset > *next {
                    let (c, o, n) = (*consumer, *offset, *next);
                    skipped.violation(|| {
                        format!(
                            "consumer {c} at position {n} given offset {o} from node {node} (offsets {n}..{o} skipped)"
                        )
                    });
                }
                *next = offset + 1;
            }
            if let Some(value) = value {
                let mine = given.entry(*consumer).or_default();
                if let Some(before) = mine.insert(value.clone(), *offset) {
                    if before != *offset {
                        let c = *consumer;
                        duplicated.violation(|| {
                            format!("consumer {c} given {value} at offsets {before} and {offset}")
                        });
                    }
                }
                if !sent.contains(value) && unexpected_seen.insert(value.clone()) {
                    unexpected.violation(|| {
                        format!("{value} at offset {offset}, given by node {node}, was never sent")
                    });
                }
            }
            // Against the final read, then against what other reads were given there.
            let in_final = final_at.get(offset);
            let first = read_at.get(offset);
            // The final read is the judge where it reaches; below its start (none in a run
            // without retention), the reads are held to each other.
            let judged = have_final && *offset >= final_start;
            if judged && in_final != Some(value) {
                let c = *consumer;
                changed.violation(|| {
                    format!(
                        "offset {offset}: consumer {c} given {} by node {node}; the final read has {}",
                        describe(value),
                        in_final.map_or("nothing".into(), describe)
                    )
                });
            } else if let Some((first, by, from)) =
                first.filter(|(first, ..)| !judged && first != value)
            {
                let c = *consumer;
                changed.violation(|| {
                    format!(
                        "offset {offset}: consumer {c} given {} by node {node}, consumer {by} given {} by node {from}",
                        describe(value),
                        describe(first)
                    )
                });
            }
            if first.is_none() {
                read_at.insert(*offset, (value.clone(), *consumer, *node));
            }
        }
    }
    for (offset, value) in &final_at {
        if let Some(value) = value {
            if !sent.contains(value) && unexpected_seen.insert(value.clone()) {
                unexpected.violation(|| {
                    format!("{value} at offset {offset} of the final read was never sent")
                });
            }
        }
    }
    Verdict {
        checks: vec![
            lost,
            unseen,
            duplicated,
            reordered,
            skipped,
            non_monotonic,
            changed,
            unexpected,
            final_read,
        ],
        counts,
    }
}

/// A value for a message: the value, or "a control record".
fn describe(value: &Option<String>) -> String {
    value.clone().unwrap_or_else(|| "a control record".into())
}

/// (producer, seq) of a value [`value_of`] made.
pub fn parse_value(value: &str) -> Option<(u32, u64)> {
    let (producer, seq) = value.strip_prefix("chk-")?.split_once('-')?;
    Some((producer.parse().ok()?, seq.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn send(producer: u32, seq: u64) -> Event {
        Event::Send {
            t_ms: 0.0,
            producer,
            seq,
            idempotent: false,
            node: 1,
        }
    }

    fn ack(producer: u32, seq: u64, offset: i64) -> Event {
        Event::Ack {
            t_ms: 0.0,
            producer,
            seq,
            offset,
            node: 1,
        }
    }

    fn data(offset: i64, producer: u32, seq: u64) -> Seen {
        (offset, Some(value_of(producer, seq)))
    }

    fn read(consumer: u32, fetch_offset: i64, hw: i64, records: Vec<Seen>) -> Event {
        Event::Read {
            t_ms: 0.0,
            consumer,
            node: 1,
            fetch_offset,
            high_watermark: hw,
            records,
        }
    }

    fn final_read(records: Vec<Seen>) -> Event {
        let hw = records.last().map_or(0, |r| r.0 + 1);
        Event::Final {
            t_ms: 0.0,
            node: 1,
            log_start: records.first().map_or(0, |r| r.0),
            high_watermark: hw,
            records,
        }
    }

    /// A clean run: producer 0 writes records 0..3 at offsets 1..4 after a control record at
    /// 0; one consumer reads all in two answers, another in one; the final read agrees.
    fn clean() -> Vec<Event> {
        let log = vec![
            (0, None),
            data(1, 0, 0),
            data(2, 0, 1),
            data(3, 0, 2),
            data(4, 0, 3),
        ];
        let mut events = Vec::new();
        for seq in 0..4 {
            events.push(send(0, seq));
            events.push(ack(0, seq, seq as i64 + 1));
        }
        events.push(read(0, 0, 3, log[..3].to_vec()));
        events.push(read(0, 3, 5, log[3..].to_vec()));
        events.push(read(1, 0, 5, log.clone()));
        events.push(final_read(log));
        events
    }

    fn violations(events: &[Event]) -> Vec<(&'static str, u64)> {
        analyse(events)
            .checks
            .iter()
            .filter(|c| c.violations > 0)
            .map(|c| (c.name, c.violations))
            .collect()
    }

    #[test]
    fn a_clean_history_passes_every_check() {
        let verdict = analyse(&clean());
        assert_eq!(verdict.violations(), 0, "{verdict:#?}");
        let c = &verdict.counts;
        assert_eq!(
            (c.sends, c.acknowledged, c.reads, c.records_read),
            (4, 4, 3, 10)
        );
        assert_eq!((c.final_records, c.final_high_watermark), (4, 5));
        assert_eq!(verdict.checks.len(), 9);
    }

    #[test]
    fn an_acknowledgement_that_never_happened_is_lost_and_unseen() {
        // The planted fault: producer 0 claims record 9 was acknowledged at offset 2, which
        // holds record 1; record 9 is nowhere.
        let mut events = clean();
        events.push(ack(0, 9, 2));
        let verdict = analyse(&events);
        assert_eq!(
            violations(&events),
            // Record 9 is also out of order: after record 3 (offset 4) at offset 2.
            vec![(LOST, 1), (UNSEEN, 1), (REORDERED, 1)]
        );
        assert!(verdict.check(LOST).unwrap().examples[0].contains("chk-0-9"));
    }

    #[test]
    fn an_acknowledged_record_at_another_offset_is_lost_not_unseen() {
        let mut events = clean();
        // Record 1 was answered at offset 3; the final read has it at 2.
        events.retain(|e| !matches!(e, Event::Ack { seq: 1, .. }));
        events.push(ack(0, 1, 3));
        let found = violations(&events);
        assert!(found.contains(&(LOST, 1)), "{found:?}");
        assert!(!found.iter().any(|(name, _)| *name == UNSEEN), "{found:?}");
    }

    #[test]
    fn a_record_twice_in_the_final_read_or_given_twice_is_duplicated() {
        let log = vec![data(0, 0, 0), data(1, 0, 1), data(2, 0, 0)];
        let events = vec![
            send(0, 0),
            ack(0, 0, 0),
            send(0, 1),
            ack(0, 1, 1),
            read(0, 0, 3, log.clone()),
            final_read(log),
        ];
        // In the final read at 0 and 2, and given to consumer 0 at both.
        assert_eq!(violations(&events), vec![(DUPLICATED, 2)]);
    }

    #[test]
    fn records_of_one_producer_out_of_send_order_are_reordered() {
        let log = vec![data(0, 0, 1), data(1, 0, 0)];
        let events = vec![
            send(0, 0),
            send(0, 1),
            ack(0, 1, 0),
            ack(0, 0, 1),
            final_read(log),
        ];
        assert_eq!(violations(&events), vec![(REORDERED, 1)]);
        // Two producers interleaved is no reordering.
        let log = vec![data(0, 1, 0), data(1, 0, 0), data(2, 1, 1), data(3, 0, 1)];
        let events = vec![
            send(0, 0),
            send(1, 0),
            send(0, 1),
            send(1, 1),
            ack(1, 0, 0),
            ack(0, 0, 1),
            ack(1, 1, 2),
            ack(0, 1, 3),
            final_read(log),
        ];
        assert_eq!(violations(&events), vec![]);
    }

    #[test]
    fn a_gap_in_a_consumers_offsets_or_the_final_read_is_skipped() {
        let mut events = clean();
        // Consumer 2 at 0 is given offset 2 first: 0 and 1 skipped.
        events.insert(0, read(2, 0, 5, vec![data(2, 0, 1)]));
        assert_eq!(violations(&events), vec![(SKIPPED, 1)]);
        // The final read lacks offset 3.
        let mut events = clean();
        let Some(Event::Final { records, .. }) = events.last_mut() else {
            unreachable!()
        };
        records.remove(3);
        let found = violations(&events);
        // A hole; record 2 acknowledged at 3 is gone; consumers were given it at 3.
        assert_eq!(
            found,
            vec![(LOST, 1), (UNSEEN, 1), (SKIPPED, 1), (CHANGED, 2)]
        );
    }

    #[test]
    fn an_offset_given_again_or_going_back_is_non_monotonic() {
        let mut events = clean();
        // Consumer 1, past offset 4, is given offset 3 again.
        events.insert(events.len() - 1, read(1, 5, 5, vec![data(3, 0, 2)]));
        assert_eq!(violations(&events), vec![(NON_MONOTONIC, 1)]);
    }

    #[test]
    fn a_record_that_changes_or_disappears_at_its_offset_is_changed() {
        // The planted stale read: consumer 0 was given at offset 2 a record that was sent,
        // never acknowledged, and is not in the final read (as if later truncated).
        let mut events = clean();
        events.insert(0, send(0, 7));
        let Event::Read { records, .. } = &mut events[9] else {
            unreachable!("{:?}", events[9])
        };
        records[2] = data(2, 0, 7);
        assert_eq!(violations(&events), vec![(CHANGED, 1)]);
        // Two consumers given different records at an offset below the final read's start
        // (deleted by retention, say): the reads are held to each other.
        let events = vec![
            send(0, 0),
            send(0, 1),
            read(0, 0, 1, vec![data(0, 0, 0)]),
            read(1, 0, 1, vec![data(0, 0, 1)]),
            Event::Final {
                t_ms: 0.0,
                node: 1,
                log_start: 1,
                high_watermark: 1,
                records: vec![],
            },
        ];
        assert_eq!(violations(&events), vec![(CHANGED, 1)]);
        // A control record where a consumer was given data.
        let mut events = clean();
        let Some(Event::Final { records, .. }) = events.last_mut() else {
            unreachable!()
        };
        records[1].1 = None;
        let found = violations(&events);
        assert!(found.contains(&(CHANGED, 2)), "{found:?}");
    }

    #[test]
    fn a_record_nobody_sent_is_unexpected() {
        let mut events = clean();
        let Some(Event::Final { records, .. }) = events.last_mut() else {
            unreachable!()
        };
        records.push(data(5, 3, 0));
        assert_eq!(violations(&events), vec![(UNEXPECTED, 1)]);
    }

    #[test]
    fn indeterminate_sends_and_stale_high_watermarks_are_counted_not_failed() {
        let mut events = clean();
        // Record 4 got no answer, yet it committed; record 5 got none and did not.
        events.insert(0, send(0, 4));
        events.insert(1, send(0, 5));
        events.insert(
            2,
            Event::Unknown {
                t_ms: 0.0,
                producer: 0,
                seq: 4,
                why: "timed out".into(),
            },
        );
        // A node that shows consumer 0 (at 5) a high watermark of 3.
        events.insert(events.len() - 1, read(0, 5, 3, vec![]));
        let Some(Event::Final { records, .. }) = events.last_mut() else {
            unreachable!()
        };
        records.push(data(5, 0, 4));
        let verdict = analyse(&events);
        assert_eq!(verdict.violations(), 0, "{verdict:#?}");
        assert_eq!(verdict.counts.unacknowledged_in_final, 1);
        assert_eq!(verdict.counts.indeterminate_sends, 1);
        assert_eq!(verdict.counts.reads_behind_position, 1);
    }

    #[test]
    fn without_one_final_read_nothing_acknowledged_counts_as_kept() {
        let mut events = clean();
        events.pop();
        let found = violations(&events);
        assert_eq!(found, vec![(LOST, 4), (FINAL_READ, 1)]);
        let mut events = clean();
        events.push(events.last().unwrap().clone());
        assert_eq!(violations(&events), vec![(LOST, 4), (FINAL_READ, 1)]);
    }

    #[test]
    fn events_go_through_json_lines_unchanged() {
        let events = clean();
        for event in &events {
            let line = serde_json::to_string(event).unwrap();
            assert!(!line.contains('\n'));
            let back: Event = serde_json::from_str(&line).unwrap();
            assert_eq!(&back, event);
        }
        assert_eq!(parse_value(&value_of(12, 345)), Some((12, 345)));
        assert_eq!(parse_value("failover-3"), None);
    }
}
