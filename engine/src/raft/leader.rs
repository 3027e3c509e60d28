//! The leader's bookkeeping: per-replica progress (durable end offsets of voters, fetch times),
//! endorsements, the high watermark, parked (long-poll) fetches, log reads in progress and
//! client appends waiting for commit.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use super::types::{Acks, DirectoryId, Epoch, NodeId, Offset, RequestId, TimeMs};

/// Observers the leader tracks at most (for DescribeQuorum): any process may fetch under any
/// replica id, and each new id must not cost memory for good.
pub(crate) const MAX_OBSERVERS: usize = 1024;
/// An observer that has not fetched for this long is forgotten (the draft's five minutes).
pub(crate) const OBSERVER_EXPIRY_MS: TimeMs = 5 * 60 * 1000;

#[derive(Clone, Copy, Debug)]
pub(crate) struct ReplicaProgress {
    /// The replica's last fetch offset (its log end offset); -1 unknown.
    pub(crate) end_offset: Offset,
    /// What counts toward the high watermark: its reported durable end offset; -1 unknown.
    pub(crate) durable_offset: Offset,
    pub(crate) last_fetch_ms: Option<TimeMs>,
    pub(crate) last_caught_up_ms: Option<TimeMs>,
    /// The leader's log end when this replica last fetched (-1: never): a fetch that reaches it
    /// shows the replica was caught up at that fetch (Kafka's rule, docs/protocol.md section 6).
    pub(crate) leader_end_at_last_fetch: Offset,
    /// When an answer last gave this observer every record there was (pacing, docs/protocol.md,
    /// "Observer fetch pacing"); None after one cut short, and for voters.
    pub(crate) last_records_ms: Option<TimeMs>,
    /// The log directory id its last fetch named (ZERO: none yet).
    pub(crate) directory_id: DirectoryId,
    /// The newest lease stamp this voter echoed in this leadership (None: none yet): the
    /// leader's clock when it made an answer the voter took (docs/consistency.md, "The leader
    /// lease").
    pub(crate) lease_stamp: Option<TimeMs>,
}

impl ReplicaProgress {
    fn unknown() -> Self {
        Self {
            end_offset: -1,
            durable_offset: -1,
            last_fetch_ms: None,
            last_caught_up_ms: None,
            leader_end_at_last_fetch: -1,
            last_records_ms: None,
            directory_id: DirectoryId::ZERO,
            lease_stamp: None,
        }
    }
}

/// How long a leader may answer clients as leader (docs/consistency.md, "The leader lease").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lease {
    /// A lone voter: no other node can be elected without it.
    Unbounded,
    /// Until this time (the leader's clock), unless fresher echoes renew it.
    Until(TimeMs),
    /// Fewer voters than a majority (with the leader) echoed a stamp of this leadership.
    None,
}

impl Lease {
    pub fn valid_at(self, now: TimeMs) -> bool {
        match self {
            Lease::Unbounded => true,
            Lease::Until(until) => now < until,
            Lease::None => false,
        }
    }
}

/// Parked consumer fetches the leader keeps at most; beyond, a consumer is answered at once with
/// what there is (docs/protocol.md section 16).
pub(crate) const MAX_PARKED_CONSUMER_FETCHES: usize = 1024;
/// Log reads for consumers in flight at most; beyond, a consumer the tail cache cannot serve is
/// answered with no records and fetches again (the reader's queue holds 32: docs/architecture.md,
/// "Threads", so replicas keep room there).
pub(crate) const MAX_CONSUMER_READS: usize = 16;

/// Who waits for a fetch answer: one machinery (parking, log reads, expiry, the end of a
/// leadership) serves both kinds, and only the answer differs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Fetcher {
    /// A replica's FetchQuorumRecords, answered with `Output::Respond` (uncommitted data too).
    Replica {
        request_id: RequestId,
        replica_id: NodeId,
    },
    /// A consumer's `Input::ClientFetch`, answered with `Output::ClientFetchDone` (committed data
    /// only). `max_bytes` is already capped by the core's fetch budget.
    Consumer {
        id: u64,
        min_bytes: usize,
        max_bytes: usize,
    },
}

#[derive(Clone, Copy, Debug)]
pub(crate) struct ParkedFetch {
    pub(crate) fetcher: Fetcher,
    pub(crate) fetch_offset: Offset,
    /// When it is answered with whatever there is (its MaxWait).
    pub(crate) deadline: TimeMs,
    /// A paced observer's fetch is held until then even if records arrive (docs/protocol.md,
    /// "Observer fetch pacing"); never past `deadline`.
    pub(crate) hold_until: Option<TimeMs>,
}

impl ParkedFetch {
    /// When the core must look at it again.
    pub(crate) fn due(&self) -> TimeMs {
        self.hold_until.unwrap_or(self.deadline)
    }

    pub(crate) fn held(&self, now: TimeMs) -> bool {
        self.hold_until.is_some_and(|t| t > now)
    }
}

#[derive(Clone, Copy, Debug)]
pub(crate) struct PendingAppend {
    pub(crate) id: u64,
    pub(crate) base_offset: Offset,
    pub(crate) end_offset: Offset,
    pub(crate) acks: Acks,
}

/// What an AlterQuorum asked for: the target's ids (sorted), its force flag, and the
/// directories it named for voters of the target (docs/protocol.md, "Voter identity").
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct RequestedTarget {
    pub(crate) voters: Vec<NodeId>,
    pub(crate) force: bool,
    pub(crate) directories: BTreeMap<NodeId, DirectoryId>,
}

/// An AlterQuorum waiting for its target to commit (docs/protocol.md, "AlterQuorum").
#[derive(Clone, Debug)]
pub(crate) struct AlterWait {
    pub(crate) id: RequestId,
    /// The target asked for (sorted); the current set itself for a cancel.
    pub(crate) target: Vec<NodeId>,
    pub(crate) deadline: TimeMs,
}

#[derive(Debug)]
pub(crate) struct LeaderState {
    /// A target asked for and not yet written (it waits for the own-epoch commit or for the
    /// voter record in flight to commit).
    pub(crate) requested_target: Option<RequestedTarget>,
    /// AlterQuorum requests answered once their target record commits.
    pub(crate) alter_waits: Vec<AlterWait>,
    /// LEO when leadership began: the LeaderChange record sits here; the HW must pass it.
    pub(crate) epoch_start_offset: Offset,
    pub(crate) high_watermark: Option<Offset>,
    /// Every voter except the leader itself.
    pub(crate) voters: BTreeMap<NodeId, ReplicaProgress>,
    pub(crate) observers: BTreeMap<NodeId, ReplicaProgress>,
    pub(crate) endorsed: BTreeSet<NodeId>,
    pub(crate) parked: Vec<ParkedFetch>,
    /// read id -> the fetch waiting for it.
    pub(crate) reads: BTreeMap<u64, Fetcher>,
    pub(crate) appends: VecDeque<PendingAppend>,
    pub(crate) since_ms: TimeMs,
    /// The handover's pause of appends (docs/protocol.md, "Driving the change", rule 6): none
    /// taken yet, or when the last one started.
    pub(crate) handover_pause_from: Option<TimeMs>,
}

impl LeaderState {
    pub(crate) fn new(
        epoch: Epoch,
        epoch_start_offset: Offset,
        local_id: NodeId,
        voters: &[NodeId],
        now: TimeMs,
    ) -> Self {
        let _ = epoch;
        Self {
            requested_target: None,
            alter_waits: Vec::new(),
            epoch_start_offset,
            high_watermark: None,
            voters: voters
                .iter()
                .filter(|v| **v != local_id)
                .map(|v| (*v, ReplicaProgress::unknown()))
                .collect(),
            observers: BTreeMap::new(),
            endorsed: BTreeSet::new(),
            parked: Vec::new(),
            reads: BTreeMap::new(),
            appends: VecDeque::new(),
            since_ms: now,
            handover_pause_from: None,
        }
    }

    /// The voter set changed (docs/protocol.md, "The voter set lives in the log"): a new voter's
    /// progress carries over from its time as an observer (the caught-up check needs it), a
    /// removed one's goes back to the observers. The high watermark counts the new set from
    /// here on, and never goes down.
    pub(crate) fn set_voters(&mut self, local_id: NodeId, voters: &[NodeId], now: TimeMs) {
        let removed: Vec<NodeId> = self
            .voters
            .keys()
            .copied()
            .filter(|id| voters.binary_search(id).is_err())
            .collect();
        for id in removed {
            if let Some(p) = self.voters.remove(&id) {
                self.observers.insert(id, p);
            }
            self.endorsed.remove(&id);
        }
        for id in voters.iter().copied().filter(|id| *id != local_id) {
            if !self.voters.contains_key(&id) {
                let mut p = self
                    .observers
                    .remove(&id)
                    .unwrap_or_else(ReplicaProgress::unknown);
                // Check-quorum gives a new voter the time since it joined, as it gives every
                // voter the time since the leadership began.
                p.last_fetch_ms = Some(p.last_fetch_ms.unwrap_or(now));
                self.voters.insert(id, p);
            }
        }
    }

    pub(crate) fn parked_consumers(&self) -> usize {
        let consumer = |p: &&ParkedFetch| matches!(p.fetcher, Fetcher::Consumer { .. });
        self.parked.iter().filter(consumer).count()
    }

    pub(crate) fn consumer_reads(&self) -> usize {
        let consumer = |f: &&Fetcher| matches!(f, Fetcher::Consumer { .. });
        self.reads.values().filter(consumer).count()
    }

    /// Any well-formed fetch in this epoch (diverging or not) shows the replica is in contact
    /// and, for a voter, endorses the leader.
    pub(crate) fn note_contact(&mut self, replica_id: NodeId, now: TimeMs) {
        if let Some(p) = self.voters.get_mut(&replica_id) {
            p.last_fetch_ms = Some(now);
            self.endorsed.insert(replica_id);
        }
    }

    /// Voter `replica_id` echoed `echo` (a fetch's `lease_echo`) at `now`. Only a stamp this
    /// leadership made counts: one from before it began (another incarnation's clock) or
    /// after `now` (no answer of ours says so) is ignored, and a stamp never moves back.
    pub(crate) fn note_echo(&mut self, replica_id: NodeId, echo: Option<i64>, now: TimeMs) {
        let Some(stamp) = echo.and_then(|e| TimeMs::try_from(e).ok()) else {
            return;
        };
        if stamp < self.since_ms || stamp > now {
            return;
        }
        if let Some(p) = self.voters.get_mut(&replica_id) {
            p.lease_stamp = p.lease_stamp.max(Some(stamp));
        }
    }

    /// The lease (docs/consistency.md, "The leader lease"): `lease_ms` from the newest stamp
    /// that voters making a majority with the leader have all echoed (the leader counts as
    /// echoing now). A voter's echo shows it took an answer made at the stamp, so it refuses
    /// pre-votes for a fetch timeout of its own clock from after the stamp.
    pub(crate) fn lease(&self, majority: usize, lease_ms: u64) -> Lease {
        let needed_others = majority.saturating_sub(1);
        if needed_others == 0 {
            return Lease::Unbounded;
        }
        let mut stamps: Vec<TimeMs> = self.voters.values().filter_map(|p| p.lease_stamp).collect();
        if stamps.len() < needed_others {
            return Lease::None;
        }
        stamps.sort_unstable_by(|a, b| b.cmp(a));
        Lease::Until(stamps[needed_others - 1].saturating_add(lease_ms))
    }

    /// Records a valid fetch, as the voter of that id when `as_voter` (it is, from the
    /// directory the set binds it to), else as an observer: observers' progress is tracked for
    /// DescribeQuorum and for adding them, never counted. Returns the progress entry.
    pub(crate) fn record_fetch(
        &mut self,
        replica_id: NodeId,
        as_voter: bool,
        fetch_offset: Offset,
        durable_offset: Offset,
        leader_end: Offset,
        now: TimeMs,
    ) -> &mut ReplicaProgress {
        debug_assert!(!as_voter || self.voters.contains_key(&replica_id));
        if !as_voter && !self.observers.contains_key(&replica_id) {
            self.make_room_for_observer(now);
        }
        if as_voter {
            self.endorsed.insert(replica_id);
        }
        let map = if as_voter {
            &mut self.voters
        } else {
            &mut self.observers
        };
        let p = map
            .entry(replica_id)
            .or_insert_with(ReplicaProgress::unknown);
        debug_assert!(fetch_offset <= leader_end, "a fetch past our end diverges");
        p.end_offset = fetch_offset;
        debug_assert!(p.last_fetch_ms.is_none_or(|t| t <= now));
        // Caught up now, or at its last fetch if it now holds what the leader had then: a
        // replica that fetches again only after writing what it got (or that is paced) is
        // still caught up when the leader's end has moved meanwhile.
        if fetch_offset >= leader_end {
            p.last_caught_up_ms = Some(now);
        } else if p.leader_end_at_last_fetch >= 0 && fetch_offset >= p.leader_end_at_last_fetch {
            p.last_caught_up_ms = p.last_fetch_ms.max(p.last_caught_up_ms);
        }
        p.leader_end_at_last_fetch = leader_end;
        // Only what the follower made durable, and never beyond what it asks from (its log
        // matches ours only up to the fetch offset). A regression (lost disk) is tolerated.
        p.durable_offset = durable_offset.min(fetch_offset);
        p.last_fetch_ms = Some(now);
        p
    }

    /// Before a new observer is tracked: forget those silent for [`OBSERVER_EXPIRY_MS`] and, if
    /// still full, the one silent longest.
    fn make_room_for_observer(&mut self, now: TimeMs) {
        let silent_since = |p: &ReplicaProgress| p.last_fetch_ms.unwrap_or(0);
        if self.observers.len() < MAX_OBSERVERS {
            return;
        }
        self.observers
            .retain(|_, p| now.saturating_sub(silent_since(p)) < OBSERVER_EXPIRY_MS);
        if self.observers.len() >= MAX_OBSERVERS {
            let oldest = self
                .observers
                .iter()
                .min_by_key(|(id, p)| (silent_since(p), **id))
                .map(|(id, _)| *id);
            if let Some(id) = oldest {
                self.observers.remove(&id);
            }
        }
        debug_assert!(self.observers.len() < MAX_OBSERVERS);
    }

    /// Observers that fetched within [`OBSERVER_EXPIRY_MS`] (what DescribeQuorum lists).
    pub(crate) fn live_observers(
        &self,
        now: TimeMs,
    ) -> impl Iterator<Item = (&NodeId, &ReplicaProgress)> {
        self.observers.iter().filter(move |(_, p)| {
            p.last_fetch_ms
                .is_some_and(|t| now.saturating_sub(t) < OBSERVER_EXPIRY_MS)
        })
    }

    /// The offset a majority of voters has durable (docs/protocol.md section 7): element n/2 of the
    /// voters' durable offsets sorted descending, the leader counting its own durable end.
    pub(crate) fn majority_offset(&self, own_durable: Offset) -> Offset {
        // No allocation on this hot path for quorums of up to 16 voters.
        let mut small = [Offset::MIN; 16];
        let mut large = Vec::new();
        let n = self.voters.len() + 1;
        let offsets: &mut [Offset] = if n <= small.len() {
            &mut small[..n]
        } else {
            large.resize(n, Offset::MIN);
            &mut large[..]
        };
        offsets[0] = own_durable;
        for (slot, p) in offsets[1..].iter_mut().zip(self.voters.values()) {
            *slot = p.durable_offset;
        }
        offsets.sort_unstable_by(|a, b| b.cmp(a));
        offsets[n / 2]
    }

    /// Recomputes the HW; returns the new value if it advanced (rules 9.3 and 9.4).
    pub(crate) fn maybe_advance_hw(&mut self, own_durable: Offset) -> Option<Offset> {
        let candidate = self.majority_offset(own_durable);
        if candidate <= self.epoch_start_offset {
            return None;
        }
        if self.high_watermark.is_some_and(|hw| candidate <= hw) {
            return None;
        }
        // Never down, and past this epoch's LeaderChange record (docs/protocol.md section 7).
        debug_assert!(self.high_watermark.is_none_or(|hw| hw < candidate));
        debug_assert!(candidate > self.epoch_start_offset);
        self.high_watermark = Some(candidate);
        Some(candidate)
    }

    /// Voters that endorsed this leadership and have not fetched for `timeout_ms` (their last
    /// fetch, or the leadership's start, that long ago or more).
    pub(crate) fn silent_endorsers(&self, now: TimeMs, timeout_ms: u64) -> Vec<NodeId> {
        self.endorsed
            .iter()
            .copied()
            .filter(|id| self.silent_from(*id, timeout_ms).is_some_and(|t| t <= now))
            .collect()
    }

    /// When the first endorser falls silent for `timeout_ms`, if it keeps not fetching.
    pub(crate) fn next_silence(&self, timeout_ms: u64) -> Option<TimeMs> {
        self.endorsed
            .iter()
            .filter_map(|id| self.silent_from(*id, timeout_ms))
            .min()
    }

    fn silent_from(&self, id: NodeId, timeout_ms: u64) -> Option<TimeMs> {
        let p = self.voters.get(&id)?;
        Some(p.last_fetch_ms.unwrap_or(self.since_ms).max(self.since_ms) + timeout_ms)
    }

    /// True while a majority of voters (the leader included) fetched within `window_ms`.
    /// Returns the time at which that stops being true if nothing else arrives.
    pub(crate) fn quorum_alive_until(&self, majority: usize, window_ms: u64) -> Option<TimeMs> {
        let needed_others = majority - 1;
        if needed_others == 0 {
            return None; // a single-voter quorum never loses contact with itself
        }
        let mut times: Vec<TimeMs> = self
            .voters
            .values()
            .map(|p| p.last_fetch_ms.unwrap_or(self.since_ms))
            .collect();
        times.sort_unstable_by(|a, b| b.cmp(a));
        let oldest_needed = times
            .get(needed_others - 1)
            .copied()
            .unwrap_or(self.since_ms);
        Some(oldest_needed.max(self.since_ms) + window_ms)
    }

    /// Voters sorted by descending durable offset (ties by id): the preferred successors.
    pub(crate) fn successors(&self) -> Vec<NodeId> {
        let mut v: Vec<(Offset, NodeId)> = self
            .voters
            .iter()
            .map(|(id, p)| (p.durable_offset, *id))
            .collect();
        v.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
        v.into_iter().map(|(_, id)| id).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn majority_offset_is_element_n_over_2_descending() {
        let mut l = LeaderState::new(1, 0, 1, &[1, 2, 3], 0);
        l.voters.get_mut(&2).unwrap().durable_offset = 5;
        assert_eq!(l.majority_offset(10), 5);
        l.voters.get_mut(&3).unwrap().durable_offset = 7;
        assert_eq!(l.majority_offset(10), 7);
        let mut two = LeaderState::new(1, 0, 1, &[1, 2], 0);
        two.voters.get_mut(&2).unwrap().durable_offset = 3;
        assert_eq!(two.majority_offset(10), 3, "size 2 needs both");
    }

    #[test]
    fn hw_waits_for_epoch_start_and_never_decreases() {
        let mut l = LeaderState::new(1, 4, 1, &[1, 2, 3], 0);
        l.voters.get_mut(&2).unwrap().durable_offset = 4;
        assert_eq!(l.maybe_advance_hw(5), None, "== epoch start is not enough");
        l.voters.get_mut(&2).unwrap().durable_offset = 5;
        assert_eq!(l.maybe_advance_hw(5), Some(5));
        l.voters.get_mut(&2).unwrap().durable_offset = 2;
        assert_eq!(l.maybe_advance_hw(5), None);
        assert_eq!(l.high_watermark, Some(5));
    }

    /// Kafka's rule: a fetch that reaches the end the leader had at the replica's previous
    /// fetch shows the replica caught up as of that previous fetch; one at the end, as of now.
    /// The time never goes back.
    #[test]
    fn a_fetch_reaching_the_previous_end_dates_caught_up_to_the_previous_fetch() {
        let mut l = LeaderState::new(1, 0, 1, &[1, 2, 3], 0);
        let caught_up = |l: &LeaderState| l.voters[&2].last_caught_up_ms;
        l.record_fetch(2, true, 0, 0, 10, 100);
        assert_eq!(caught_up(&l), None, "behind, no previous fetch");
        l.record_fetch(2, true, 5, 5, 12, 200);
        assert_eq!(
            caught_up(&l),
            None,
            "short of 10, the end at its previous fetch"
        );
        l.record_fetch(2, true, 12, 12, 20, 300);
        assert_eq!(
            caught_up(&l),
            Some(200),
            "holds the end it was shown at 200"
        );
        l.record_fetch(2, true, 20, 20, 20, 400);
        assert_eq!(caught_up(&l), Some(400), "at the end");
        l.record_fetch(2, true, 20, 20, 30, 500);
        assert_eq!(
            caught_up(&l),
            Some(400),
            "as of its previous fetch: no earlier"
        );
    }

    /// A leader of {1, 2, 3} at time `now` tracking observers 100.. (MAX_OBSERVERS of them),
    /// each last heard from at `heard(id)`.
    fn full_of_observers(now: TimeMs, heard: impl Fn(NodeId) -> TimeMs) -> LeaderState {
        let mut l = LeaderState::new(1, 0, 1, &[1, 2, 3], 0);
        for i in 0..MAX_OBSERVERS as NodeId {
            let id = 100 + i;
            l.record_fetch(id, false, 0, 0, 10, heard(id));
        }
        assert_eq!(l.observers.len(), MAX_OBSERVERS);
        l.record_fetch(2, true, 0, 0, 10, now);
        l
    }

    /// Caught: `&&` turned into `||` in `record_fetch` (room would be made for a replica that
    /// is already tracked, or a voter). With the observers full, a tracked observer's or a
    /// voter's fetch evicts nobody.
    #[test]
    fn a_known_observer_or_a_voter_makes_no_room() {
        let now = OBSERVER_EXPIRY_MS * 2;
        let mut l = full_of_observers(now, |_| now - 1);
        l.record_fetch(100, false, 0, 0, 10, now);
        l.record_fetch(3, true, 0, 0, 10, now);
        assert_eq!(l.observers.len(), MAX_OBSERVERS);
    }

    /// Caught: `len() < MAX_OBSERVERS` turned into `>` in `make_room_for_observer`. Below the
    /// bound a new observer evicts nobody, even one silent past the expiry (it is only left
    /// out of DescribeQuorum).
    #[test]
    fn below_the_bound_a_new_observer_evicts_nobody() {
        let mut l = LeaderState::new(1, 0, 1, &[1, 2, 3], 0);
        l.record_fetch(100, false, 0, 0, 10, 0);
        let now = OBSERVER_EXPIRY_MS + 1;
        l.record_fetch(101, false, 0, 0, 10, now);
        assert_eq!(l.observers.len(), 2);
        assert_eq!(l.live_observers(now).count(), 1);
    }

    /// Caught: `< OBSERVER_EXPIRY_MS` turned into `==`, `>` or `<=` in
    /// `make_room_for_observer`. At the bound a new observer evicts those silent for the expiry
    /// or longer, and only those.
    #[test]
    fn at_the_bound_a_new_observer_evicts_the_expired_only() {
        let now = OBSERVER_EXPIRY_MS * 2;
        // 100 and 101 silent for exactly the expiry; the rest heard from just now.
        let mut l = full_of_observers(now, |id| {
            if id < 102 {
                now - OBSERVER_EXPIRY_MS
            } else {
                now - 1
            }
        });
        l.record_fetch(5000, false, 0, 0, 10, now);
        assert_eq!(l.observers.len(), MAX_OBSERVERS - 1);
        assert!(!l.observers.contains_key(&100) && !l.observers.contains_key(&101));
        assert!(l.observers.contains_key(&102) && l.observers.contains_key(&5000));
    }

    /// Caught: `n <= small.len()` turned into `>` in `majority_offset` (a set larger than
    /// the stack buffer would index past it). Twenty voters: the 10th largest of the 20
    /// durable offsets (the leader's among them) is what a majority has.
    #[test]
    fn a_set_larger_than_the_stack_buffer_has_its_majority_offset() {
        let voters: Vec<NodeId> = (1..=20).collect();
        let mut l = LeaderState::new(1, 0, 1, &voters, 0);
        for v in 2..=20 {
            l.voters.get_mut(&v).unwrap().durable_offset = i64::from(v) * 10;
        }
        // Descending: 200, 190, ..., 20 and the leader's 1000 first: element 10 is 110.
        assert_eq!(l.majority_offset(1000), 110);
    }
}
