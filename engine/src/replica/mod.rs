//! The replica: the sans-IO machine a node is, around the Raft core (docs/architecture.md,
//! "Layers"). It is stepped with the core's inputs and answers with the core's outputs, in
//! order, never re-entrantly, and decides what the core leaves to the node: today, idempotent
//! produce ([`producing`]: which client batches are appended, refused or answered as
//! duplicates, and the producer state every replica keeps from its log).
//!
//! The node (net) and the simulator (`sim`) drive the same `Replica`, so every decision here runs
//! under the simulator's seeds (docs/simulation.md, "The whole replica").

pub mod producing;
#[cfg(test)]
mod tests;

use crate::producers::ProducerStates;
use crate::raft::{AppendResult, ErrorCode, Input, Output, PlantedBug, RaftCore, Role};

pub use producing::{Admission, Producing, ProducingCounts};

/// A Raft core and the decisions of a node around it.
pub struct Replica {
    core: RaftCore,
    producing: Producing,
    /// The core's outputs of the step being carried over (kept to reuse its allocation).
    core_out: Vec<Output>,
    /// Answers the replica adds after one core output (kept to reuse its allocation).
    answers: Vec<producing::Answer>,
    planted: Option<PlantedBug>,
}

impl Replica {
    /// A replica around `core`, with the producer state its log implies (rebuilt by the driver
    /// from the log, or a snapshot and the log after it).
    pub fn new(core: RaftCore, producers: ProducerStates) -> Self {
        let planted = core.config.planted;
        Self {
            core,
            producing: Producing::new(producers),
            core_out: Vec::new(),
            answers: Vec::new(),
            planted,
        }
    }

    /// The core, for read-only queries (role, offsets, the answers to ListOffsets, ...).
    pub fn core(&self) -> &RaftCore {
        &self.core
    }

    pub fn producing(&self) -> &Producing {
        &self.producing
    }

    /// Steps the replica with `input`; its outputs are appended to `out`, to be carried out in
    /// order. An output of the core is followed at once by the answers it makes due (a
    /// duplicate answered when the high watermark passes its original), so the driver sees
    /// them in the order the replica decided them.
    pub fn step(&mut self, input: Input, out: &mut Vec<Output>) {
        let input = match input {
            Input::ClientAppend {
                id,
                batch,
                record_count,
                acks,
            } => match self.admit(&batch) {
                Admission::Append => Input::ClientAppend {
                    id,
                    batch,
                    record_count,
                    acks,
                },
                refused_or_duplicate => {
                    return self.answer_without_core(id, refused_or_duplicate, acks, out);
                }
            },
            other => other,
        };
        let mut core_out = std::mem::take(&mut self.core_out);
        debug_assert!(core_out.is_empty());
        self.core.step(input, &mut core_out);
        for output in core_out.drain(..) {
            self.follow(&output);
            out.push(output);
            for (id, result) in self.answers.drain(..) {
                out.push(Output::AppendDone { id, result });
            }
        }
        self.core_out = core_out;
    }

    fn admit(&mut self, batch: &[u8]) -> Admission {
        let admission = producing::admit(self.producing.producers(), self.core.role(), batch);
        let admission = match admission {
            // The planted bug (docs/simulation.md, "Planted bugs"): a retry appended again.
            Admission::Duplicate { .. } if self.planted == Some(PlantedBug::DuplicateAppended) => {
                Admission::Append
            }
            other => other,
        };
        self.producing.count(admission);
        admission
    }

    /// A client batch the core never sees: refused, or a duplicate (answered now or once its
    /// original commits). With acks=0 nothing is answered (the client reads no response).
    fn answer_without_core(
        &mut self,
        id: u64,
        admission: Admission,
        acks: crate::raft::Acks,
        out: &mut Vec<Output>,
    ) {
        let result = match admission {
            Admission::Refuse(error) => Some(self.failed(error)),
            Admission::Duplicate {
                base_offset,
                last_offset,
            } if acks != crate::raft::Acks::None => {
                let hw = match self.planted {
                    // The planted bug: answered as if already committed.
                    Some(PlantedBug::DuplicateAnsweredEarly) => Some(last_offset + 1),
                    _ => self.core.high_watermark(),
                };
                self.producing.duplicate(id, base_offset, last_offset, hw)
            }
            Admission::Duplicate { .. } => None,
            Admission::Append => unreachable!("appends go to the core"),
        };
        if let Some(result) = result {
            out.push(Output::AppendDone { id, result });
        }
    }

    /// A failed answer naming the leader this replica knows, as the core's own refusals do.
    fn failed(&self, error: ErrorCode) -> AppendResult {
        AppendResult::Failed {
            error,
            leader_id: self.core.leader_id().unwrap_or(-1),
            leader_epoch: self.core.epoch(),
        }
    }

    /// What one core output means for the replica's own state; the answers it makes due wait
    /// in `self.answers` for the driver, right after that output.
    fn follow(&mut self, output: &Output) {
        let gone = self.failed(ErrorCode::NOT_LEADER_OR_FOLLOWER);
        match output {
            Output::Log(op) => {
                let hw = self.core.high_watermark();
                self.producing.track(op, hw, gone, &mut self.answers);
            }
            Output::HighWatermark(hw) => self.producing.committed(*hw, &mut self.answers),
            Output::RoleChanged { role, .. } if *role != Role::Leader => {
                self.producing.resigned(gone, &mut self.answers)
            }
            Output::RoleChanged { .. }
            | Output::PersistElectionState(_)
            | Output::Send { .. }
            | Output::Respond { .. }
            | Output::ReadLog { .. }
            | Output::AppendDone { .. }
            | Output::ClientFetchDone { .. }
            | Output::ShutdownComplete
            | Output::EndpointChanged(_)
            | Output::ProbeEndpoint { .. }
            | Output::Refused { .. }
            | Output::Alert(_)
            | Output::Fatal(_) => {}
        }
    }
}
