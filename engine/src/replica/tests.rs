//! The replica around a real core: a single voter leads, and a producer's retries are answered
//! from the log in the order the replica decides them.

use super::*;
use crate::raft::{Acks, LogOpKind, RaftConfig};
use crate::record::RecordBatchBuilder;

const P: i64 = 5;

/// A leading single-voter replica and the highest log op seq it has emitted.
struct Driver {
    replica: Replica,
    now: u64,
    last_seq: u64,
}

impl Driver {
    fn leading() -> Self {
        let config = RaftConfig::new(1, "c", vec![1]);
        let core = RaftCore::new(config, None, crate::raft::LogSnapshot::default(), 0)
            .expect("core starts");
        let mut d = Self {
            replica: Replica::new(core, ProducerStates::default()),
            now: 0,
            last_seq: 0,
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

    fn step(&mut self, input: Input) -> Vec<Output> {
        let mut out = Vec::new();
        self.replica.step(input, &mut out);
        for o in &out {
            if let Output::Log(op) = o {
                self.last_seq = self.last_seq.max(op.seq);
            }
        }
        out
    }

    /// Everything logged so far becomes durable: the outputs of that step.
    fn durable(&mut self) -> Vec<Output> {
        self.step(Input::LogDurable {
            up_to_seq: self.last_seq,
        })
    }

    fn append(&mut self, id: u64, sequence: i32) -> Vec<Output> {
        let mut b = RecordBatchBuilder::new(0, 0).producer(P, 0, sequence);
        b.append(1_000, None, Some(b"v"), &[]);
        self.step(Input::ClientAppend {
            id,
            batch: b.build(),
            record_count: 1,
            acks: Acks::Quorum,
        })
    }
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
