//! The failover benchmark's arithmetic, apart from any process or socket: the fault kinds, the
//! client-seen unavailability of one cycle from the acknowledgements the client saw, the
//! per-kind summary, and the read-back check of every acknowledged record
//! (docs/benchmarks.md, "Failover").

use std::collections::HashMap;
use std::time::{Duration, Instant};

use serde::Serialize;

/// What one cycle does to the cluster.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum FaultKind {
    /// SIGKILL the leader; restart it once another node has acknowledged a record.
    Kill,
    /// SIGSTOP the leader; SIGCONT once another node has acknowledged a record.
    Stop,
    /// Cut the leader's host off the network (from both followers and the client); heal it
    /// once another node has acknowledged a record. Needs root (network namespaces).
    Partition,
    /// SIGKILL a follower, hold it down for the hold time, restart it.
    FollowerRestart,
    /// Cut a follower's host off for the hold time, heal it. Needs root.
    FollowerPartition,
}

impl FaultKind {
    pub const ALL: [FaultKind; 5] = [
        FaultKind::Kill,
        FaultKind::Stop,
        FaultKind::Partition,
        FaultKind::FollowerRestart,
        FaultKind::FollowerPartition,
    ];

    pub fn name(self) -> &'static str {
        match self {
            FaultKind::Kill => "kill",
            FaultKind::Stop => "stop",
            FaultKind::Partition => "partition",
            FaultKind::FollowerRestart => "follower-restart",
            FaultKind::FollowerPartition => "follower-partition",
        }
    }

    /// Whether the fault hits the leader (and is held until another node acknowledges).
    pub fn hits_leader(self) -> bool {
        matches!(
            self,
            FaultKind::Kill | FaultKind::Stop | FaultKind::Partition
        )
    }

    /// Whether the fault needs the nodes in network namespaces (root).
    pub fn needs_namespaces(self) -> bool {
        matches!(self, FaultKind::Partition | FaultKind::FollowerPartition)
    }
}

impl std::str::FromStr for FaultKind {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        FaultKind::ALL
            .into_iter()
            .find(|kind| kind.name() == text)
            .ok_or_else(|| {
                let names: Vec<&str> = FaultKind::ALL.iter().map(|k| k.name()).collect();
                format!("unknown fault kind {text:?}: use {}", names.join(", "))
            })
    }
}

/// One acknowledgement the client received: when, from which node, at which offset, and the
/// sequence number its value carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ack {
    pub at: Instant,
    pub node: i32,
    pub offset: i64,
    pub seq: u64,
}

/// The client-seen gap of one cycle, from the acknowledgements in receive order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Gap {
    /// The last acknowledgement counted as before the fault.
    pub last_before: Instant,
    /// The first counted as after it.
    pub first_after: Instant,
}

impl Gap {
    pub fn length(&self) -> Duration {
        self.first_after.duration_since(self.last_before)
    }
}

/// The unavailability a cycle's fault caused, as the client saw it: from the last
/// acknowledgement before the fault to the first after it. For a fault on the leader
/// (`faulted_leader`), answers the faulted node still gave after the fault (requests it had
/// committed before it stopped, read from the socket afterwards) count as before it, and the
/// first after is the first from another node: service is back when the new leader answers.
/// None when there is no acknowledgement on one side.
pub fn unavailability(acks: &[Ack], fault_at: Instant, faulted_leader: Option<i32>) -> Option<Gap> {
    let after = acks.iter().position(|ack| {
        ack.at > fault_at && faulted_leader.is_none_or(|leader| ack.node != leader)
    })?;
    let before = acks[..after].last()?;
    Some(Gap {
        last_before: before.at,
        first_after: acks[after].at,
    })
}

/// The longest time between two consecutive acknowledgements from the last one at or before
/// `from` to the last one at or before `to` (the whole cycle: the fault, its undoing and the
/// settling after, which waits for acknowledgements); None without one at or before `from`.
pub fn longest_gap(acks: &[Ack], from: Instant, to: Instant) -> Option<Duration> {
    let start = acks.iter().rposition(|ack| ack.at <= from)?;
    let end = acks.iter().rposition(|ack| ack.at <= to)?;
    acks[start..=end]
        .windows(2)
        .map(|pair| pair[1].at.duration_since(pair[0].at))
        .max()
        .or(Some(Duration::ZERO))
}

/// Count, p50, p99 and max of some samples in milliseconds; percentiles by nearest rank (the
/// smallest sample with at least that share of the samples at or below it), so with fewer
/// than 100 samples p99 is the max.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Summary {
    pub count: usize,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
}

impl Summary {
    pub fn of(samples_ms: &[f64]) -> Option<Summary> {
        if samples_ms.is_empty() {
            return None;
        }
        let mut sorted = samples_ms.to_vec();
        sorted.sort_by(f64::total_cmp);
        let rank = |q: f64| {
            let n = sorted.len();
            let index = ((q * n as f64).ceil() as usize).clamp(1, n) - 1;
            sorted[index]
        };
        Some(Summary {
            count: sorted.len(),
            p50_ms: rank(0.5),
            p99_ms: rank(0.99),
            max_ms: *sorted.last().expect("not empty"),
        })
    }
}

/// What a read-back of one node's log found about the acknowledged records.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ReadBack {
    /// Acknowledged records found once, at the offset they were acknowledged at.
    pub found: u64,
    /// Acknowledged records not in the log.
    pub missing: u64,
    /// Acknowledged records in the log at another offset, or more than once.
    pub misplaced: u64,
    /// The first few problems, for the operator.
    pub examples: Vec<String>,
}

impl ReadBack {
    pub fn complete(&self) -> bool {
        self.missing == 0 && self.misplaced == 0
    }
}

/// Checks every acknowledged (offset, sequence number) against a log's data records (offset,
/// sequence number): each must be there exactly once, at its offset. Records in the log that
/// were never acknowledged (sent, then the connection dropped) are allowed.
pub fn read_back(log: &[(i64, u64)], acked: &[(i64, u64)]) -> ReadBack {
    const EXAMPLES: usize = 5;
    let mut at: HashMap<u64, Vec<i64>> = HashMap::with_capacity(log.len());
    for &(offset, seq) in log {
        at.entry(seq).or_default().push(offset);
    }
    let mut result = ReadBack::default();
    for &(offset, seq) in acked {
        let problem = match at.get(&seq).map(Vec::as_slice) {
            Some([found]) if *found == offset => {
                result.found += 1;
                continue;
            }
            None => {
                result.missing += 1;
                format!("record {seq}: acknowledged at offset {offset}, not in the log")
            }
            Some(offsets) => {
                result.misplaced += 1;
                format!("record {seq}: acknowledged at offset {offset}, in the log at {offsets:?}")
            }
        };
        if result.examples.len() < EXAMPLES {
            result.examples.push(problem);
        }
    }
    result
}

/// The value of record `seq`: what the client sends and the read-back parses.
pub fn value_of(seq: u64) -> String {
    format!("failover-{seq}")
}

/// The sequence number in a value [`value_of`] made; None for any other value.
pub fn seq_of(value: &[u8]) -> Option<u64> {
    std::str::from_utf8(value)
        .ok()?
        .strip_prefix("failover-")?
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn acks(t0: Instant, list: &[(u64, i32)]) -> Vec<Ack> {
        list.iter()
            .enumerate()
            .map(|(i, &(ms, node))| Ack {
                at: t0 + Duration::from_millis(ms),
                node,
                offset: i as i64,
                seq: i as u64,
            })
            .collect()
    }

    #[test]
    fn a_leader_fault_ends_at_the_first_answer_of_another_node() {
        let t0 = Instant::now();
        // Node 1 leads; the fault at 100 ms; node 1 still answers at 101 ms (read after the
        // fault); node 2 answers from 2100 ms on.
        let list = acks(t0, &[(10, 1), (90, 1), (101, 1), (2100, 2), (2110, 2)]);
        let gap = unavailability(&list, t0 + Duration::from_millis(100), Some(1)).unwrap();
        assert_eq!(gap.last_before, t0 + Duration::from_millis(101));
        assert_eq!(gap.first_after, t0 + Duration::from_millis(2100));
        assert_eq!(gap.length(), Duration::from_millis(1999));
        // A follower fault: the first answer after the fault, whoever gave it.
        let gap = unavailability(&list, t0 + Duration::from_millis(100), None).unwrap();
        assert_eq!(gap.length(), Duration::from_millis(11));
        // Nothing before, or nothing after: no figure.
        assert_eq!(unavailability(&list, t0, None), None);
        assert_eq!(
            unavailability(&list, t0 + Duration::from_secs(3), Some(1)),
            None
        );
        assert_eq!(
            unavailability(&list, t0 + Duration::from_millis(100), Some(9))
                .unwrap()
                .length(),
            Duration::from_millis(11),
            "a node that answered nothing after the fault changes nothing"
        );
    }

    #[test]
    fn the_longest_gap_covers_the_whole_cycle() {
        let t0 = Instant::now();
        let list = acks(t0, &[(0, 1), (10, 1), (50, 1), (60, 1), (400, 1), (410, 1)]);
        let ms = Duration::from_millis;
        assert_eq!(longest_gap(&list, t0 + ms(20), t0 + ms(55)), Some(ms(40)));
        assert_eq!(longest_gap(&list, t0 + ms(20), t0 + ms(100)), Some(ms(40)));
        assert_eq!(longest_gap(&list, t0 + ms(20), t0 + ms(405)), Some(ms(340)));
        assert_eq!(longest_gap(&list, t0 + ms(10), t0 + ms(10)), Some(ms(0)));
        assert_eq!(longest_gap(&list, t0 - ms(1), t0 + ms(500)), None);
    }

    #[test]
    fn summaries_take_the_nearest_rank() {
        assert_eq!(Summary::of(&[]), None);
        let one = Summary::of(&[7.0]).unwrap();
        assert_eq!(
            (one.count, one.p50_ms, one.p99_ms, one.max_ms),
            (1, 7.0, 7.0, 7.0)
        );
        // 1..=200 shuffled: p50 is the 100th, p99 the 198th.
        let samples: Vec<f64> = (1..=200).map(|i| ((i * 73) % 200 + 1) as f64).collect();
        let s = Summary::of(&samples).unwrap();
        assert_eq!(
            (s.count, s.p50_ms, s.p99_ms, s.max_ms),
            (200, 100.0, 198.0, 200.0)
        );
        // Twenty samples: p99 is the max, p50 the 10th.
        let twenty: Vec<f64> = (1..=20).rev().map(f64::from).collect();
        let s = Summary::of(&twenty).unwrap();
        assert_eq!((s.p50_ms, s.p99_ms, s.max_ms), (10.0, 20.0, 20.0));
    }

    #[test]
    fn the_read_back_finds_missing_and_misplaced_records() {
        let log = [(0, 0), (1, 1), (2, 9), (3, 2), (4, 3), (5, 3)];
        let all_there = read_back(&log, &[(0, 0), (1, 1), (3, 2)]);
        assert!(all_there.complete());
        assert_eq!(all_there.found, 3);
        let bad = read_back(&log, &[(0, 0), (2, 2), (4, 3), (6, 4)]);
        assert!(!bad.complete());
        assert_eq!((bad.found, bad.missing, bad.misplaced), (1, 1, 2));
        assert_eq!(bad.examples.len(), 3);
        assert!(bad.examples[2].contains("record 4"), "{:?}", bad.examples);
    }

    #[test]
    fn values_and_kinds_round_trip() {
        assert_eq!(seq_of(value_of(42).as_bytes()), Some(42));
        assert_eq!(seq_of(b"failover-x"), None);
        assert_eq!(seq_of(b"other-1"), None);
        for kind in FaultKind::ALL {
            assert_eq!(kind.name().parse::<FaultKind>(), Ok(kind));
        }
        assert!("reboot"
            .parse::<FaultKind>()
            .unwrap_err()
            .contains("follower-partition"));
    }
}
