//! AlterQuorum on the leader and the reassignment it drives (docs/protocol.md, "AlterQuorum
//! and reassignment").

use std::collections::BTreeMap;

use super::core::RaftCore;
use super::leader::{AlterWait, RequestedTarget};
use super::types::{Batch, DirectoryId, NodeId, Offset, Output, PlantedBug, RequestId};
use super::voter_set::{voter_records, VoterConfig};
use super::Role;
use super::{AlterQuorumRequest, AlterQuorumResponse, AlterQuorumVoterResult, ErrorCode, Response};

impl RaftCore {
    // ----- the voter set in the log (docs/protocol.md, "The voter set lives in the log") -----

    /// Applies the voter records of batches this node just appended: each is in force at once,
    /// before it commits. A voter record this node cannot read stops it: applying a different
    /// set than the other replicas would be silent divergence.
    pub(crate) fn apply_appended_voter_records(
        &mut self,
        batches: &[Batch],
        out: &mut Vec<Output>,
    ) {
        if !batches.iter().any(|b| b.is_control) {
            return;
        }
        match voter_records(batches) {
            Ok(records) => {
                for r in records {
                    self.apply_voter_config(r.offset, r.config, out);
                }
            }
            Err(e) => self.fatal(format!("cannot apply the log's voter set: {e}"), out),
        }
    }

    pub(crate) fn apply_voter_config(
        &mut self,
        offset: Offset,
        config: VoterConfig,
        out: &mut Vec<Output>,
    ) {
        self.qs.apply_voter_record(offset, config, self.now);
        self.after_voter_set_change(out);
    }

    /// A truncation to `offset` took voter records away: the set they replaced is in force
    /// again.
    pub(crate) fn revert_truncated_voter_records(&mut self, offset: Offset, out: &mut Vec<Output>) {
        let keep_set = self.config.planted == Some(PlantedBug::NoRevertOnTruncation);
        if self.qs.revert_voter_records(offset, keep_set, self.now) {
            self.after_voter_set_change(out);
        }
    }

    /// What a new set in force changes at once: a leader's high watermark may move with the
    /// new majority. A set changes only with the log, on the leader's own appends and on a
    /// follower's fetch answers; a prospective that gets a fetch answer follows its leader
    /// again before it applies the batches, so no prospective ever sees its set change (a
    /// non-voter's pre-vote round would otherwise need ending here).
    fn after_voter_set_change(&mut self, out: &mut Vec<Output>) {
        debug_assert_ne!(
            self.qs.role(),
            Role::Prospective,
            "a voter set changed during a pre-vote round"
        );
        self.announce_after_voter_change();
        if self.qs.leader().is_some() {
            // A lone voter's leadership has no check-quorum timer (nobody to hear from); once
            // its set grows it needs one, or a leader cut off from the others stays one for
            // good (the simulator's seed 201132 of 1 voter + 3 observers).
            if self.role_deadline.is_none() && self.qs.voters().len() > 1 {
                self.role_deadline = Some(self.now + self.config.progress_timeout_ms);
            }
            self.update_leader_hw(out);
        }
    }

    /// Folds the voter records below the committed and locally durable end into the set the
    /// quorum-state file caches (the set a restart starts from before it reads the log above
    /// AppliedOffset). Locally durable too: a record this node lost in a crash must not be in
    /// the file while its log lacks it.
    pub(crate) fn fold_committed_voter_records(&mut self, out: &mut Vec<Output>) {
        let Some(hw) = self.high_watermark() else {
            return;
        };
        if self.qs.pending_voter_record().is_none() {
            return;
        }
        let upto = hw.min(self.log.durable_end_offset());
        self.qs.commit_voter_records(upto, self.now, out);
    }

    pub(crate) fn handle_alter_quorum(
        &mut self,
        id: RequestId,
        request: AlterQuorumRequest,
        out: &mut Vec<Output>,
    ) {
        if self.qs.leader().is_none() || self.is_shutting_down() {
            return self.respond_alter_quorum_error(id, ErrorCode::NOT_QUORUM_LEADER, None, out);
        }
        let me = self.qs.local_id();
        let mut target: Vec<NodeId> = request.target_voters.iter().map(|v| v.voter_id).collect();
        target.sort_unstable();
        // Rule: a voter the leader never heard fetch is unknown (it may not exist at all),
        // unless the log already names it (a voter, or in the target an earlier leader took:
        // repeating that request to a new leader must not fail before the node finds it).
        let l = self.qs.leader().expect("checked above");
        let config = self.qs.voter_config();
        let in_log = |id: NodeId| {
            config.contains(id) || config.target.as_ref().is_some_and(|t| t.contains(&id))
        };
        let known = |id: NodeId| {
            id == me || in_log(id) || l.voters.contains_key(&id) || l.observers.contains_key(&id)
        };
        let results: Vec<AlterQuorumVoterResult> = target
            .iter()
            .map(|&voter_id| AlterQuorumVoterResult {
                voter_id,
                error: if known(voter_id) {
                    ErrorCode::NONE
                } else {
                    ErrorCode::UNKNOWN_VOTER_ID
                },
            })
            .collect();
        if results.iter().any(|r| !r.error.is_none()) {
            let why = "a target voter never fetched from this leader".to_string();
            return self.respond_alter_quorum(
                id,
                ErrorCode::UNKNOWN_VOTER_ID,
                Some(why),
                results,
                out,
            );
        }
        let directories: BTreeMap<NodeId, DirectoryId> = request
            .target_voters
            .iter()
            .filter(|v| !v.directory_id.is_zero())
            .map(|v| (v.voter_id, v.directory_id))
            .collect();
        // A voter is one replica: another directory under a voter's id is a new replica, which
        // joins only after the old one left (docs/operations.md, "Replacing a voter that lost
        // its disk").
        if let Some((&voter, &named)) = directories
            .iter()
            .find(|(v, d)| config.directory_of(**v).is_some_and(|bound| bound != **d))
        {
            let why = format!(
                "voter {voter} is bound to log directory {}, not {named}: remove it from the \
                 voters first, then add it back with its new directory",
                config.directory_of(voter).expect("found bound")
            );
            return self.respond_alter_quorum(
                id,
                ErrorCode::INVALID_REQUEST,
                Some(why),
                results,
                out,
            );
        }
        if request.validate_only {
            return self.respond_alter_quorum(id, ErrorCode::NONE, None, results, out);
        }
        let deadline = self.now + u64::try_from(request.timeout_ms).unwrap_or(0);
        let l = self.leading();
        l.requested_target = Some(RequestedTarget {
            voters: target.clone(),
            force: request.force,
            directories,
        });
        l.alter_waits.push(AlterWait {
            id,
            target,
            deadline,
        });
        self.drive_reassignment(out);
        self.answer_alter_waits(out);
    }

    fn respond_alter_quorum(
        &self,
        id: RequestId,
        error: ErrorCode,
        error_message: Option<String>,
        target_voters: Vec<AlterQuorumVoterResult>,
        out: &mut Vec<Output>,
    ) {
        out.push(Output::Respond {
            id,
            response: Response::AlterQuorum(AlterQuorumResponse {
                error,
                error_message,
                leader_id: self.leader_hint(),
                leader_epoch: self.qs.epoch(),
                target_voters,
            }),
        });
    }

    /// Answers the AlterQuorum requests whose target is recorded and committed (the committed
    /// set names it as its target, or reached it), and those whose time ran out
    /// (REQUEST_TIMED_OUT: safe to retry, the request is an idempotent overwrite).
    pub(crate) fn answer_alter_waits(&mut self, out: &mut Vec<Output>) {
        let Some(l) = self.qs.leader() else {
            return;
        };
        if l.alter_waits.is_empty() {
            return;
        }
        let committed = self.qs.committed_voter_config().clone();
        let done = |w: &AlterWait| match &committed.target {
            Some(t) => *t == w.target,
            None => committed.current == w.target,
        };
        let now = self.now;
        let waits = std::mem::take(&mut self.leading().alter_waits);
        for w in waits {
            let error = if done(&w) {
                ErrorCode::NONE
            } else if w.deadline <= now {
                ErrorCode::REQUEST_TIMED_OUT
            } else {
                self.leading().alter_waits.push(w);
                continue;
            };
            let results = w
                .target
                .iter()
                .map(|&voter_id| AlterQuorumVoterResult {
                    voter_id,
                    error: ErrorCode::NONE,
                })
                .collect();
            self.respond_alter_quorum(w.id, error, None, results, out);
        }
    }

    /// One step of the reassignment in progress, when the rules of docs/protocol.md,
    /// "Driving the change", allow one: only once an entry of this leader's epoch committed
    /// (the high watermark exists only past the epoch's LeaderChange record), and only when no
    /// voter record is uncommitted.
    pub(crate) fn drive_reassignment(&mut self, out: &mut Vec<Output>) {
        let Some(l) = self.qs.leader() else {
            return;
        };
        if self.is_shutting_down() || self.stopped {
            return;
        }
        // Rule 1: own-epoch commit first. (The planted bug takes what precedes the epoch for
        // committed.)
        let planted = self.config.planted == Some(PlantedBug::ChangeBeforeOwnEpochCommit);
        let Some(hw) = l.high_watermark.or(planted.then_some(l.epoch_start_offset)) else {
            return;
        };
        // Rule 2: one change at a time.
        if self.qs.pending_voter_record().is_some_and(|o| o >= hw) {
            return;
        }
        let config = self.qs.voter_config().clone();
        if let Some(requested) = self.leading().requested_target.take() {
            let mut next = VoterConfig {
                target: (requested.voters != config.current).then_some(requested.voters),
                current: config.current.clone(),
                force: requested.force,
                directories: config.directories.clone(),
                target_directories: requested.directories,
            };
            next.prune_directories();
            if next != config {
                return self.append_voter_record(next, out);
            }
        }
        let me = self.qs.local_id();
        let l = self.qs.leader().expect("checked above");
        let (now, election, fetch) = (
            self.now,
            self.config.election_timeout_ms,
            self.config.fetch_timeout_ms,
        );
        // A voter's progress as that voter; a node to add, as the observer it is, from the
        // directory the target names if it names one.
        let progress = |id: NodeId| {
            if config.contains(id) {
                // A voter whose id now fetches from another directory lost its disk: its last
                // fetch as the voter says nothing of it any more (docs/protocol.md, "Voter
                // identity").
                let stranger = l.observers.get(&id).map(|o| o.last_fetch_ms);
                return l
                    .voters
                    .get(&id)
                    .filter(|p| stranger.is_none_or(|s| s < p.last_fetch_ms));
            }
            l.observers.get(&id).filter(|p| {
                config
                    .target_directories
                    .get(&id)
                    .is_none_or(|d| p.directory_id == *d)
            })
        };
        let caught_up = |id: NodeId| {
            id == me
                || progress(id).is_some_and(|p| {
                    p.durable_offset >= hw
                        && p.last_caught_up_ms
                            .is_some_and(|t| now < t.saturating_add(election))
                })
        };
        let live = |id: NodeId| {
            id == me
                || progress(id).is_some_and(|p| {
                    p.last_fetch_ms
                        .is_some_and(|t| now < t.saturating_add(fetch))
                })
        };
        let observed = |id: NodeId| {
            let seen = progress(id).map(|p| p.directory_id);
            let own = (id == me).then_some(self.qs.local_directory());
            own.or(seen).filter(|d| !d.is_zero())
        };
        match next_step(&config, me, caught_up, live, observed) {
            Some(Step::Write(next)) => self.append_voter_record(next, out),
            Some(Step::HandOver) if self.successor_holds_whole_log() => {
                // Rule 6: the leader leaves last; EndQuorumEpoch names the successors by
                // durable offset, and the next leader removes this node.
                self.resign(out);
                self.role_deadline = Some(self.election_deadline());
            }
            Some(Step::HandOver) => self.pause_appends_for_handover(),
            Some(Step::Wait) => {}
            None => {
                if let Some(bound) = binding_step(&config, |id| live(id).then(|| observed(id))) {
                    self.append_voter_record(bound, out);
                }
            }
        }
    }

    /// Some current voter is not bound to a log directory yet, and the leader knows the one it
    /// fetches with (its own, for itself): a binding record is due (docs/protocol.md, "Voter
    /// identity"). Allocation-free: asked after every input.
    pub(crate) fn binding_due(&self) -> bool {
        let Some(l) = self.qs.leader() else {
            return false;
        };
        let config = self.qs.voter_config();
        let me = self.qs.local_id();
        config.current.iter().any(|&id| {
            config.directory_of(id).is_none()
                && if id == me {
                    !self.qs.local_directory().is_zero()
                } else {
                    l.voters.get(&id).is_some_and(|p| !p.directory_id.is_zero())
                }
        })
    }

    /// Rule 6 under load: a steady stream of appends keeps the leader's log end ahead of every
    /// successor, so the handover waits on a successor that never quite catches up. The leader
    /// refuses appends for one election timeout (retriable, as after the handover itself) so
    /// the log end holds still; if no successor caught up by then, it serves appends again for
    /// as long before the next pause. A pause starts only while the handover is due.
    fn pause_appends_for_handover(&mut self) {
        let (now, pause) = (self.now, self.config.election_timeout_ms);
        let l = self.leading();
        let due = l
            .handover_pause_from
            .is_none_or(|from| now >= from.saturating_add(2 * pause));
        if due {
            l.handover_pause_from = Some(now);
        }
    }

    /// Appends are refused now: a handover pause is running (rule 6), and the handover is
    /// still due (a cancelled reassignment or a new target ends the pause at once).
    pub(crate) fn appends_paused(&self) -> bool {
        let Some(l) = self.qs.leader() else {
            return false;
        };
        let running = l
            .handover_pause_from
            .is_some_and(|from| self.now < from.saturating_add(self.config.election_timeout_ms));
        running && self.handover_due()
    }

    /// Only this leader is left to remove from the set in force (rule 6).
    fn handover_due(&self) -> bool {
        let config = self.qs.voter_config();
        let me = self.qs.local_id();
        let always = |_: NodeId| true;
        let unknown = |_: NodeId| None;
        matches!(
            next_step(config, me, always, always, unknown),
            Some(Step::HandOver)
        )
    }

    /// Rule 6: a voter of the target holds this leader's whole log durably. Handing over
    /// earlier leaves a successor that this node (the one log ahead of it) refuses to vote
    /// for, and a resigned leader serves no fetch to close the gap.
    fn successor_holds_whole_log(&self) -> bool {
        let Some(l) = self.qs.leader() else {
            return false;
        };
        let end = self.log.end_offset();
        let config = self.qs.voter_config();
        let Some(target) = &config.target else {
            return false;
        };
        l.voters
            .iter()
            .any(|(id, p)| target.binary_search(id).is_ok() && p.durable_offset >= end)
    }

    /// Appends a voter record in this leader's epoch; it is in force at once.
    pub(crate) fn append_voter_record(&mut self, config: VoterConfig, out: &mut Vec<Output>) {
        let base_offset = self.log.end_offset();
        let epoch = self.qs.epoch();
        let timestamp = self.now as i64;
        let bytes =
            config
                .to_record(&self.config.cluster_id)
                .to_batch(base_offset, epoch, timestamp);
        let batch = Batch {
            base_offset,
            epoch,
            record_count: 1,
            is_control: true,
            bytes: bytes.freeze(),
        };
        self.log.append(vec![batch], out);
        self.apply_voter_config(base_offset, config, out);
        self.complete_parked_with_records(out);
    }

    /// A voter the log is removing while some voter of the target is still in the set does not
    /// stand for election: the target's voters lead the change to its end (a removed leader
    /// that came back would only hand over again).
    pub(crate) fn leaving_voter(&self) -> bool {
        let config = self.qs.voter_config();
        let me = self.qs.local_id();
        config.target.as_ref().is_some_and(|t| {
            t.binary_search(&me).is_err()
                && config.current.iter().any(|v| t.binary_search(v).is_ok())
        })
    }

    /// An AlterQuorum answer with no per-voter results: the leader hint and this node's epoch,
    /// so a client sent to the wrong node can go on to the leader.
    pub(crate) fn respond_alter_quorum_error(
        &self,
        id: RequestId,
        error: ErrorCode,
        error_message: Option<String>,
        out: &mut Vec<Output>,
    ) {
        self.respond_alter_quorum(id, error, error_message, Vec::new(), out)
    }
}

/// What the leader does next for a reassignment in progress (docs/protocol.md, "Driving the
/// change").
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Step {
    /// Append a voter record with this config.
    Write(VoterConfig),
    /// Only this leader is left to remove: hand leadership over first.
    HandOver,
    /// Nothing can be done now (waiting for a voter to catch up, or refused by the strict
    /// reconfiguration check).
    Wait,
}

/// The next single-member step from `config` toward its target (None: nothing in progress).
/// `caught_up(id)`: has `id` fetched to the leader's end within an election timeout with its
/// durable offset at the high watermark; `live(id)`: has it fetched within the fetch timeout
/// (the leader itself is both).
/// `directory(id)`: the log directory `id` fetches with (the leader's own for itself), which
/// a voter added is bound to unless the target names one.
pub(crate) fn next_step(
    config: &VoterConfig,
    leader: NodeId,
    caught_up: impl Fn(NodeId) -> bool,
    live: impl Fn(NodeId) -> bool,
    directory: impl Fn(NodeId) -> Option<DirectoryId>,
) -> Option<Step> {
    let target = config.target.as_ref()?;
    if *target == config.current {
        return Some(Step::Write(VoterConfig {
            current: config.current.clone(),
            directories: config.directories.clone(),
            ..VoterConfig::default()
        }));
    }
    let adding: Vec<NodeId> = target
        .iter()
        .copied()
        .filter(|id| !config.contains(*id))
        .collect();
    let removing: Vec<NodeId> = config
        .current
        .iter()
        .copied()
        .filter(|id| target.binary_search(id).is_err())
        .collect();
    let mut next = config.current.clone();
    let mut directories = config.directories.clone();
    if !adding.is_empty() && adding.len() >= removing.len() {
        // Rule 3: a new voter only once caught up; until then the reassignment waits.
        let Some(new) = adding.into_iter().find(|id| caught_up(*id)) else {
            return Some(Step::Wait);
        };
        next.push(new);
        next.sort_unstable();
        let named = config.target_directories.get(&new).copied();
        if let Some(d) = named.or_else(|| directory(new)) {
            directories.insert(new, d);
        }
    } else {
        // A non-leader first: the leader leaves last, after handing over (rule 6).
        let Some(old) = removing
            .iter()
            .copied()
            .find(|id| *id != leader)
            .or(removing.first().copied())
        else {
            return Some(Step::Wait);
        };
        if old == leader {
            return Some(Step::HandOver);
        }
        next.retain(|id| *id != old);
    }
    // Rule 7: never empty (a removal leaves the leader at least).
    assert!(!next.is_empty(), "a step to an empty voter set");
    // Rule 4: the live, caught-up voters of the new set must be a majority of it.
    let ready = next
        .iter()
        .filter(|id| live(**id) && caught_up(**id))
        .count();
    if ready < next.len() / 2 + 1 && !config.force {
        return Some(Step::Wait);
    }
    let mut written = VoterConfig {
        current: next,
        target: Some(target.clone()),
        force: config.force,
        directories,
        target_directories: config.target_directories.clone(),
    };
    written.prune_directories();
    Some(Step::Write(written))
}

/// With no reassignment in progress, the record that binds the current voters not bound yet
/// to the directory each fetches with (`directory(id)`: known and live, or None), so that a
/// voter that comes back without its disk is told apart (docs/protocol.md, "Voter
/// identity"). None when there is nothing to bind. The voters do not change.
pub(crate) fn binding_step(
    config: &VoterConfig,
    directory: impl Fn(NodeId) -> Option<Option<DirectoryId>>,
) -> Option<VoterConfig> {
    if config.target.is_some() {
        return None;
    }
    let mut next = config.clone();
    for &id in &config.current {
        if next.directories.contains_key(&id) {
            continue;
        }
        if let Some(Some(d)) = directory(id) {
            next.directories.insert(id, d);
        }
    }
    next.prune_directories();
    (next != *config).then_some(next)
}
