//! Carrying out a core's outputs: sends, disk operations, role changes, and the checks that ride on them.

use crate::raft::NAMED_LEADER_UNKNOWINGLY;
use crate::raft::{
    bootstrap_server_index, Batch, Epoch, LogOp, LogOpKind, NodeId, Offset, Output, Request,
    Response, Role,
};
use crate::sim::disk;
use crate::sim::invariants::{breach, Breach, Checked, Invariant};
use crate::sim::liar::LIAR_ID;
use crate::sim::trace::TraceEntry;

use super::faults::Phase;
use super::network::Message;
use super::reassigner::REASSIGNER_ID;
use super::scheduler::Event;
use super::{core_config, Simulation};

impl Simulation {
    /// Carries out one of the replica's outputs.
    pub(super) fn carry_out(&mut self, i: usize, output: crate::replica::Output) -> Checked {
        match output {
            crate::replica::Output::Core(output) => self.carry_out_core(i, output),
            crate::replica::Output::ProducerId { request, result } => {
                self.producer_id_answered(i, request, result)
            }
            crate::replica::Output::Retain(bounds) => self.retention_asked(i, bounds),
            // The simulated disk has no segments to roll: nothing to tell a writer.
            crate::replica::Output::RollBounds(_) => Ok(()),
            crate::replica::Output::WriteProducerSnapshot { offset, bytes } => {
                self.snapshot_asked(i, offset, bytes)
            }
            crate::replica::Output::Group { request, reply } => {
                self.group_answered(i, request, reply)
            }
        }
    }

    fn carry_out_core(&mut self, i: usize, output: Output) -> Checked {
        let id = self.nodes[i].id;
        match output {
            Output::PersistElectionState(state) => {
                let node = &self.nodes[i];
                let epoch_rule = !node.lost_state;
                self.checker
                    .on_persist(id, node.persisted.as_ref(), &state, epoch_rule)?;
                self.trace.push(TraceEntry::new(
                    self.now,
                    "persist",
                    id,
                    i64::from(state.epoch),
                    (i64::from(state.leader_id) + 1) * 100_000 + i64::from(state.voted_id) + 1,
                ));
                self.nodes[i].persisted = Some(state);
                self.nodes[i].persists += 1;
                Ok(())
            }
            Output::Send {
                to: addressed_as,
                correlation,
                request,
            } => {
                let to = match bootstrap_server_index(addressed_as) {
                    Some(k) if matches!(request, Request::FindQuorum(_)) => {
                        self.nodes[i].bootstrap.get(k).copied().unwrap_or(-1)
                    }
                    Some(_) => -1,
                    None => addressed_as,
                };
                if to < 0 || to as usize >= self.nodes.len() || to == id {
                    return breach(
                        Invariant::ExactlyOnceContract,
                        format!("node {id} sends {request:?} to unknown node {addressed_as}"),
                    );
                }
                let from_incarnation = self.nodes[i].incarnation;
                // The node's fetches carry its wish for producer ids (a tagged field).
                let wish = match &request {
                    Request::FetchQuorumRecords(_) => self.nodes[i]
                        .replica
                        .as_ref()
                        .and_then(|r| r.producer_ids().wanted()),
                    _ => None,
                };
                self.send(Message::Request {
                    wish,
                    from: id,
                    from_incarnation,
                    to,
                    addressed_as,
                    correlation,
                    request,
                });
                Ok(())
            }
            Output::Respond { id: rid, response } => {
                let Some(p) = self.nodes[i].pending.remove(&rid) else {
                    return breach(
                        Invariant::ExactlyOnceContract,
                        format!("node {id} responds to unknown or answered request id {rid}"),
                    );
                };
                if let (Some((candidate, epoch)), Response::Vote(v)) = (p.vote, &response) {
                    if v.vote_granted {
                        self.checker.on_vote_granted(id, epoch, candidate)?;
                        self.trace.push(TraceEntry::new(
                            self.now,
                            "grant",
                            id,
                            i64::from(candidate),
                            i64::from(epoch),
                        ));
                    }
                }
                if p.from == LIAR_ID {
                    return Ok(()); // the liar's answers are dropped: it learns nothing
                }
                if p.from == REASSIGNER_ID {
                    let Response::AlterQuorum(r) = response else {
                        return breach(
                            Invariant::ExactlyOnceContract,
                            format!("node {id} answered an AlterQuorum with {response:?}"),
                        );
                    };
                    return self.reassign_answered(i, rid, r);
                }
                self.send(Message::Response {
                    from: id,
                    to: p.from,
                    to_incarnation: p.from_incarnation,
                    addressed_as: p.addressed_as,
                    correlation: p.correlation,
                    response,
                });
                Ok(())
            }
            Output::Log(op) => self.log_op(i, op),
            Output::ReadLog {
                read_id,
                from_offset,
                max_bytes,
            } => {
                // Below the start the core was told of: the core's mistake. Between the disk's
                // deletion and the core's `LogStartMoved` (a tick can come between them, as on
                // the node's raft thread while the writer deletes) a read may name the start
                // before; the disk answers it empty, as the node's log does (docs/protocol.md,
                // "Retention and the log start", rule 2).
                let told = self.nodes[i]
                    .core()
                    .map_or(0, |core| core.log_start_offset());
                if from_offset < told {
                    let id = self.nodes[i].id;
                    return breach(
                        Invariant::LogContract,
                        format!("node {id} reads from {from_offset}, below its log start {told}"),
                    );
                }
                let delay = self.rng.range(1, 5);
                let incarnation = self.nodes[i].incarnation;
                self.read_started(i);
                self.schedule(
                    delay,
                    Event::ReadDone {
                        node: i,
                        incarnation,
                        read_id,
                        from: from_offset,
                        max_bytes,
                    },
                );
                Ok(())
            }
            Output::HighWatermark(hw) => self.observe_hw(i, hw),
            Output::AppendDone { id: aid, result } if aid >= super::producers::ATTEMPT_ID_BASE => {
                self.producer_done(i, aid, result)
            }
            Output::AppendDone { id: aid, result } => self.client_done(i, aid, result),
            Output::ClientFetchDone { id: fid, result } => self.consumer_done(i, fid, result),
            Output::RoleChanged {
                role,
                epoch,
                leader_id,
            } => {
                let node = &mut self.nodes[i];
                node.role = role;
                node.epoch = epoch;
                // With reassignment an observer may become a voter: NonVoterCampaigns judges.
                if node.observer
                    && !self.cfg.reassign
                    && !matches!(role, Role::Unattached | Role::Follower)
                {
                    return breach(
                        Invariant::ObserverRole,
                        format!("observer {id} became {role:?} in epoch {epoch}"),
                    );
                }
                if role == Role::Leader {
                    if leader_id != id {
                        return breach(
                            Invariant::SingleLeader,
                            format!("node {id} leader of epoch {epoch} names leader {leader_id}"),
                        );
                    }
                    self.persisted_leadership(i, epoch)?;
                    self.elections += 1;
                    self.trace.push(TraceEntry::new(
                        self.now,
                        "elected",
                        id,
                        i64::from(epoch),
                        0,
                    ));
                    let log = &self.nodes[i].disk.written;
                    self.checker.on_became_leader(id, epoch, log)?;
                    // A leader dying right after its election, before its LeaderChange record
                    // is everywhere: the window of the HW and completeness bugs (Figure 8).
                    if self.phase == Phase::Faults && self.rng.chance(0.25) {
                        let delay = self.rng.range(0, 30);
                        self.schedule(delay, Event::KillIfLeader { node: i, epoch });
                    }
                }
                Ok(())
            }
            Output::ShutdownComplete => {
                if self.nodes[i].shutdown_since.is_none() {
                    return breach(
                        Invariant::ExactlyOnceContract,
                        format!("node {id} completed a shutdown nobody asked for"),
                    );
                }
                self.trace
                    .push(TraceEntry::new(self.now, "stopped", id, 0, 0));
                self.stop_cleanly(i);
                self.schedule_restart(i);
                if matches!(self.phase, Phase::Final { .. }) {
                    self.schedule(1, Event::Restart { node: i });
                }
                Ok(())
            }
            // The simulated network routes by node id: an endpoint has nothing to change, and
            // no simulated node advertises one, so there is nothing to probe.
            Output::EndpointChanged(_) => Ok(()),
            Output::ProbeEndpoint {
                correlation,
                endpoint,
                ..
            } => {
                self.schedule(
                    1,
                    Event::RequestFailed {
                        node: i,
                        incarnation: self.nodes[i].incarnation,
                        to: endpoint.voter_id,
                        correlation,
                    },
                );
                Ok(())
            }
            // The liar's messages are refused as they should be; an honest node never sends
            // (or answers) what admission refuses, so refusing one of theirs is a breach.
            Output::Refused { peer, .. } if peer == Some(LIAR_ID) => {
                self.liar.refused += 1;
                Ok(())
            }
            // A node that lost its disk forgot the epochs it led: an honest peer naming it the
            // leader of one is right, and ignoring the claim is the safe answer.
            Output::Refused {
                request: None,
                reason,
                ..
            } if self.nodes[i].lost_state && reason.contains(NAMED_LEADER_UNKNOWINGLY) => Ok(()),
            Output::Refused { peer, reason, .. } => breach(
                Invariant::FatalOutput,
                format!("node {id} refused a message of {peer:?}: {reason}"),
            ),
            Output::Alert(_) => Ok(()),
            Output::Fatal(msg) => breach(Invariant::FatalOutput, format!("node {id}: {msg}")),
        }
    }

    pub(super) fn persisted_leadership(&self, i: usize, epoch: Epoch) -> Checked {
        let node = &self.nodes[i];
        match &node.persisted {
            Some(s) if s.epoch == epoch && s.leader_id == node.id => Ok(()),
            other => breach(
                Invariant::LeadershipPersisted,
                format!(
                    "node {} acts as leader of epoch {epoch}; persisted state: {other:?}",
                    node.id
                ),
            ),
        }
    }

    /// The committed log below `start`, for a node that resets its log there: a reset start
    /// is the leader's log start, so all of it must be committed (docs/protocol.md,
    /// "Retention and the log start"). Read from any node whose log holds exactly that prefix.
    fn committed_prefix(&self, id: NodeId, start: Offset) -> Result<Vec<Batch>, Breach> {
        let fail = |detail: String| {
            Err(Breach {
                invariant: Invariant::ConsistentCommittedData,
                detail,
            })
        };
        if start > self.checker.committed_end() {
            return fail(format!(
                "node {id} resets its log to {start}, beyond the committed end {}",
                self.checker.committed_end()
            ));
        }
        for n in &self.nodes {
            if let Some(prefix) = self.checker.committed_prefix(&n.disk.written, start) {
                return Ok(prefix);
            }
        }
        fail(format!(
            "node {id} resets its log to {start}: no node holds the committed log below"
        ))
    }

    pub(super) fn log_op(&mut self, i: usize, op: LogOp) -> Checked {
        let id = self.nodes[i].id;
        let mut reset_prefix = Vec::new();
        match &op.kind {
            LogOpKind::Append(batches) => {
                let prev = self.nodes[i].disk.written.last();
                self.checker.on_append(id, prev, batches)?;
            }
            LogOpKind::TruncateTo(offset) => {
                self.checker
                    .on_truncate(id, *offset, self.nodes[i].max_hw)?;
                self.trace
                    .push(TraceEntry::new(self.now, "truncate", id, *offset, 0));
            }
            LogOpKind::ResetTo { start, epoch } => {
                reset_prefix = self.committed_prefix(id, *start)?;
                self.resets += 1;
                self.trace.push(TraceEntry::new(
                    self.now,
                    "reset",
                    id,
                    *start,
                    i64::from(*epoch),
                ));
            }
        }
        let seq = op.seq;
        if let Err(e) = self.nodes[i].disk.apply(op, reset_prefix) {
            return breach(Invariant::LogContract, format!("node {id}: {e}"));
        }
        // Durability in seq order: each op completes no earlier than the one before it.
        let mut latency = self.rng.range(1, 4);
        if self.rng.chance(0.05) {
            latency += self.rng.range(10, 40);
        }
        if self.now < self.nodes[i].disk_slow_until {
            latency += self.rng.range(50, 300);
        }
        let done = (self.now + latency).max(self.nodes[i].disk_busy_until);
        self.nodes[i].disk_busy_until = done;
        let incarnation = self.nodes[i].incarnation;
        self.schedule(
            done - self.now,
            Event::Durable {
                node: i,
                incarnation,
                seq,
            },
        );
        Ok(())
    }

    pub(super) fn observe_hw(&mut self, i: usize, hw: Offset) -> Checked {
        let node = &self.nodes[i];
        if node.max_hw.is_some_and(|m| hw < m) {
            return breach(
                Invariant::MonotonicNodeHighWatermark,
                format!("node {} HW went from {:?} to {hw}", node.id, node.max_hw),
            );
        }
        if node.max_hw == Some(hw) {
            return Ok(());
        }
        let (id, epoch) = (node.id, node.epoch);
        if node.role == Role::Leader {
            self.trace.push(TraceEntry::new(
                self.now,
                "leader-hw",
                id,
                hw,
                i64::from(epoch),
            ));
            let node = &self.nodes[i];
            let voters = self.hw_voters(i, hw);
            // A voter the leader's set binds to a directory its node lost holds what it held
            // then: the leader counted that (a stranger's fetches count for nothing since).
            let bound = node.core().map(|c| c.qs.voter_config().directories.clone());
            let voter_logs: Vec<&[Batch]> = voters
                .iter()
                .map(|&v| {
                    let n = &self.nodes[v as usize];
                    let lost = bound
                        .as_ref()
                        .and_then(|b| b.get(&v))
                        .is_some_and(|d| *d != n.directory);
                    if lost {
                        n.lost_durable.as_slice()
                    } else {
                        n.disk.durable.as_slice()
                    }
                })
                .collect();
            self.checker
                .on_leader_hw(id, epoch, hw, &node.disk.written, &voter_logs)?;
        }
        let node = &mut self.nodes[i];
        let mut verified = node.verified;
        let result = self
            .checker
            .on_node_hw(id, hw, &node.disk.written, &mut verified);
        node.verified = verified;
        node.max_hw = Some(hw);
        result
    }

    /// Checks after an event touched node `i`: the core's view against the driver's, epochs,
    /// the HW.
    pub(super) fn sweep(&mut self, i: usize) -> Checked {
        let node = &self.nodes[i];
        let Some(core) = node.core() else {
            return Ok(());
        };
        let id = node.id;
        let persisted_epoch = node.persisted.as_ref().map_or(0, |s| s.epoch);
        if core.epoch() != persisted_epoch {
            return breach(
                Invariant::MonotonicEpoch,
                format!(
                    "node {id} runs in epoch {} but persisted epoch {persisted_epoch}",
                    core.epoch()
                ),
            );
        }
        if core.role() == Role::Leader {
            self.persisted_leadership(i, core.epoch())?;
        }
        if node.observer
            && !self.cfg.reassign
            && !matches!(core.role(), Role::Unattached | Role::Follower)
        {
            return breach(
                Invariant::ObserverRole,
                format!("observer {id} is {:?}", core.role()),
            );
        }
        let (leo, last_epoch) = (
            disk::end_offset(&node.disk.written),
            node.disk.written_last_epoch(),
        );
        if core.log_start_offset() != node.disk.written_start.0 {
            return breach(
                Invariant::CoreLogView,
                format!(
                    "node {id}: core says log start {}, log has {:?}",
                    core.log_start_offset(),
                    node.disk.written_start
                ),
            );
        }
        let durable_end = disk::end_offset(&node.disk.durable);
        if core.log_end_offset() != leo || core.last_epoch() != last_epoch {
            return breach(
                Invariant::CoreLogView,
                format!(
                    "node {id}: core says LEO {} last epoch {}, log has {leo} / {last_epoch}",
                    core.log_end_offset(),
                    core.last_epoch()
                ),
            );
        }
        if core.durable_end_offset() > durable_end.max(leo) {
            return breach(
                Invariant::CoreLogView,
                format!(
                    "node {id}: core says durable end {}, disk has {durable_end}",
                    core.durable_end_offset()
                ),
            );
        }
        if let Some(since) = node.shutdown_since {
            let limit = core_config(id, &[], 0).shutdown_timeout_ms + 1_000;
            if self.now > since + limit {
                return breach(
                    Invariant::ShutdownCompletes,
                    format!(
                        "node {id} still shutting down {} ms after asked",
                        self.now - since
                    ),
                );
            }
        }
        if let Some(hw) = core.high_watermark() {
            self.observe_hw(i, hw)?;
        }
        if self.cfg.reassign {
            self.check_voter_set(i)?;
            self.note_reassign_progress();
        }
        Ok(())
    }

    /// The voters whose durable logs a leader's `hw` is judged by: the configured ones, or
    /// with reassignment the set the leader counts now, or the one it counted before this step
    /// if only that one holds it (the step may have appended a voter record after moving the
    /// high watermark).
    fn hw_voters(&self, i: usize, hw: Offset) -> Vec<crate::raft::NodeId> {
        if !self.cfg.reassign {
            return self.voter_ids();
        }
        let node = &self.nodes[i];
        let now: Vec<_> = node
            .core()
            .map_or_else(|| node.step_voters.clone(), |c| c.voters().to_vec());
        if hw == 0 || node.step_voters.is_empty() || node.step_voters == now {
            return now;
        }
        let log = &node.disk.written;
        let Some(at) = disk::batch_index_covering(log, hw - 1).map(|k| &log[k]) else {
            return now;
        };
        let logs = |set: &[crate::raft::NodeId]| -> Vec<&[Batch]> {
            set.iter()
                .map(|&v| self.nodes[v as usize].disk.durable.as_slice())
                .collect()
        };
        if crate::sim::invariants::Checker::majority_holds(hw, at, &logs(&now)) {
            now
        } else {
            node.step_voters.clone()
        }
    }
}
