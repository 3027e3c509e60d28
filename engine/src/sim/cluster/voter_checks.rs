//! The voter-set invariants (docs/simulation.md, "Reassignment"), checked after every event of
//! a run with `SimConfig::reassign`: the set a core uses is the one its own log implies, at
//! most one voter record above the committed end, no campaign outside the set. They read the
//! driver's copy of each node's disk and quorum-state file, never the core's own bookkeeping.

use crate::raft::{Batch, NodeId, Offset, Role};
use crate::record::voters::{voter_records, VoterConfig};
use crate::sim::invariants::{breach, Checked, Invariant};

use super::Simulation;

/// The newest voter record of `log` at or above `from`, newest batch first.
fn newest_voter_record(log: &[Batch], from: Offset) -> Option<VoterConfig> {
    for b in log.iter().rev() {
        if b.end_offset() <= from {
            return None;
        }
        if !b.is_control {
            continue;
        }
        let records =
            voter_records(std::slice::from_ref(b)).expect("the cores write readable voter records");
        if let Some(r) = records.into_iter().rev().find(|r| r.offset >= from) {
            return Some(r.config);
        }
    }
    None
}

/// Voter records of `log` at or above `from`.
fn voter_records_above(log: &[Batch], from: Offset) -> usize {
    let mut n = 0;
    for b in log.iter().rev() {
        if b.end_offset() <= from {
            break;
        }
        if b.is_control {
            n += voter_records(std::slice::from_ref(b))
                .expect("the cores write readable voter records")
                .iter()
                .filter(|r| r.offset >= from)
                .count();
        }
    }
    n
}

fn sorted(mut v: Vec<NodeId>) -> Vec<NodeId> {
    v.sort_unstable();
    v
}

impl Simulation {
    /// The voter set node `i`'s log implies: the newest voter record at or above the persisted
    /// AppliedOffset, else the persisted set, else the configured one (`quorum.voters`).
    pub(super) fn log_voter_config(&self, i: usize) -> VoterConfig {
        self.voter_config_of(i, &self.nodes[i].disk.written)
    }

    /// The voter set node `i`'s durable log implies: what it keeps through any crash.
    pub(super) fn durable_voter_config(&self, i: usize) -> VoterConfig {
        self.voter_config_of(i, &self.nodes[i].disk.durable)
    }

    fn voter_config_of(&self, i: usize, log: &[Batch]) -> VoterConfig {
        let n = &self.nodes[i];
        let (base, from) = match &n.persisted {
            Some(s) if !s.current_voters.is_empty() => (
                VoterConfig {
                    current: sorted(s.current_voters.clone()),
                    target: s.target_voters.clone().map(sorted),
                    force: s.target_force,
                    directories: s.voter_directories.clone(),
                    target_directories: s.target_directories.clone(),
                },
                s.applied_offset,
            ),
            _ => {
                let configured = if n.bootstrap.is_empty() {
                    let mut ids = n
                        .configured_voters
                        .clone()
                        .unwrap_or_else(|| self.voter_ids());
                    ids.sort_unstable();
                    ids
                } else {
                    Vec::new()
                };
                (VoterConfig::of(configured), 0)
            }
        };
        newest_voter_record(log, from).unwrap_or(base)
    }

    /// The voter-set invariants for node `i` (running).
    pub(super) fn check_voter_set(&self, i: usize) -> Checked {
        let n = &self.nodes[i];
        let Some(core) = n.core() else {
            return Ok(());
        };
        let id = n.id;
        let campaigning = matches!(
            core.role(),
            Role::Prospective | Role::Candidate | Role::Leader
        );
        if !core.voter_set_known() {
            // A log reset to a leader's log start, before it fetched the voter record there:
            // its set may be stale, and the shadow below its start is no log it reads. It
            // must not stand until it knows (docs/protocol.md, "Retention and the log start").
            if campaigning {
                return breach(
                    Invariant::NonVoterCampaigns,
                    format!(
                        "node {id} is {:?} in epoch {} before it knows its voter set (log reset \
                         to {:?})",
                        core.role(),
                        core.epoch(),
                        n.disk.written_start
                    ),
                );
            }
            return Ok(());
        }
        let implied = self.log_voter_config(i);
        let used = core.qs.voter_config();
        if *used != implied || core.voters() != implied.current.as_slice() {
            return breach(
                Invariant::VoterSetFromLog,
                format!("node {id} uses {used:?}; its log implies {implied:?}"),
            );
        }
        let committed = self.checker.committed_end();
        let above = voter_records_above(&n.disk.written, committed);
        if above > 1 {
            return breach(
                Invariant::OneUncommittedVoterRecord,
                format!(
                    "node {id} holds {above} voter records above the committed end {committed}"
                ),
            );
        }
        if campaigning && !implied.has_voter(id, n.directory) {
            return breach(
                Invariant::NonVoterCampaigns,
                format!(
                    "node {id} (directory {}) is {:?} in epoch {} outside its log's voter set \
                     {:?} (directories {:?})",
                    n.directory,
                    core.role(),
                    core.epoch(),
                    implied.current,
                    implied.directories
                ),
            );
        }
        Ok(())
    }

    /// Every running node's role, epoch, leader, voter set and reassignment target, for a
    /// liveness report.
    pub(super) fn voter_configs(&self) -> Vec<String> {
        self.nodes
            .iter()
            .filter_map(|n| Some((n, n.core()?)))
            .map(|(n, c)| {
                let v = c.qs.voter_config();
                // Which voters the set binds to a directory their node no longer has.
                let strangers: Vec<NodeId> = v
                    .directories
                    .iter()
                    .filter(|(id, d)| self.nodes[**id as usize].directory != **d)
                    .map(|(id, _)| *id)
                    .collect();
                format!(
                    "{} {:?}@{} leader {:?} voters {:?} target {:?} log end {} last epoch {} \
                     bound {} lost-disk voters {:?}{}",
                    c.node_id(),
                    c.role(),
                    c.epoch(),
                    c.leader_id(),
                    v.current,
                    v.target,
                    c.log_end_offset(),
                    c.last_epoch(),
                    v.directories.len(),
                    strangers,
                    if n.lost_state { " (lost its disk)" } else { "" }
                )
            })
            .collect()
    }
}
