//! Liveness as properties checked while a run goes on, so that a regression fails a named
//! invariant at once instead of a test hanging (docs/simulation.md, "Liveness properties"):
//! every replica fetch is answered by its deadline, and the elections after faults stop are
//! bounded. Nothing here draws from the RNG or writes the trace: a seed replays as before.

use crate::raft::{Epoch, RequestId, TimeMs};
use crate::sim::invariants::{breach, Checked, Invariant};

use super::scheduler::Event;
use super::{core_config, Simulation};

/// What a fetch's answer may take beyond its wait: a log read (1-5 ms on the simulated disk),
/// with room to spare.
const FETCH_ANSWER_SLACK_MS: TimeMs = 20;

/// After faults stop, a live cluster is reached within this many elections won and epochs
/// raised (each). The fixed batch of seeds needs at most a handful (docs/simulation.md,
/// "Liveness properties", has the figures); an election storm needs many more.
pub(super) const FINAL_ELECTIONS_BOUND: u64 = 12;

/// Where the final calm started from, to count what it took.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct CalmStart {
    pub(super) elections: u64,
    pub(super) max_epoch: Epoch,
}

/// How long a FetchQuorumRecords with `max_wait_ms` may go unanswered: its wait, capped as the
/// leader caps it (at the larger of the fetch timeout and the fetch max wait: `handle_fetch`),
/// plus a log read.
pub(super) fn fetch_answer_bound(max_wait_ms: i32) -> TimeMs {
    let c = core_config(0, &[], 0);
    let cap = c.fetch_timeout_ms.max(c.fetch_max_wait_ms);
    let wait = u64::try_from(max_wait_ms).unwrap_or(0).min(cap);
    wait + FETCH_ANSWER_SLACK_MS
}

impl Simulation {
    /// A FetchQuorumRecords was handed to node `dest` as request `id`: watch its answer.
    pub(super) fn watch_fetch(&mut self, dest: usize, id: RequestId, max_wait_ms: i32) {
        let incarnation = self.nodes[dest].incarnation;
        self.schedule(
            fetch_answer_bound(max_wait_ms),
            Event::FetchWatch {
                node: dest,
                incarnation,
                request: id,
            },
        );
    }

    pub(super) fn fetch_watch(&mut self, node: usize, incarnation: u32, id: RequestId) -> Checked {
        let n = &self.nodes[node];
        if !n.running() || n.incarnation != incarnation || !n.pending.contains_key(&id) {
            return Ok(());
        }
        let p = &n.pending[&id];
        breach(
            Invariant::FetchAnsweredByDeadline,
            format!(
                "node {} left the fetch of node {} (request {id}) unanswered past its deadline",
                n.id, p.from
            ),
        )
    }

    /// A log read started on node `i`.
    pub(super) fn read_started(&mut self, i: usize) {
        let key = (i, self.nodes[i].incarnation);
        let n = self.reads_in_flight.entry(key).or_insert(0);
        *n += 1;
        self.max_concurrent_reads = self.max_concurrent_reads.max(*n);
    }

    /// A log read of node `i`'s incarnation `incarnation` finished (or its node went away).
    pub(super) fn read_finished(&mut self, i: usize, incarnation: u32) {
        if let Some(n) = self.reads_in_flight.get_mut(&(i, incarnation)) {
            *n -= 1;
            if *n == 0 {
                self.reads_in_flight.remove(&(i, incarnation));
            }
        }
    }

    /// The most log reads one node had in flight at once so far (a scenario with several
    /// lagging replicas shows it had them).
    pub fn max_concurrent_reads(&self) -> usize {
        self.max_concurrent_reads
    }

    /// Elections won and epochs raised since the final calm started.
    pub(super) fn since_calm(&self, start: CalmStart) -> (u64, Epoch) {
        (
            self.elections - start.elections,
            self.max_epoch() - start.max_epoch,
        )
    }

    /// The cluster is live again: it must have taken a bounded number of elections.
    pub(super) fn check_final_elections(&self, start: CalmStart) -> Checked {
        let (elections, epochs) = self.since_calm(start);
        if elections > FINAL_ELECTIONS_BOUND || epochs > FINAL_ELECTIONS_BOUND as Epoch {
            return breach(
                Invariant::ElectionsAfterFaultsBounded,
                format!(
                    "{elections} elections and {epochs} epochs raised after faults stopped \
                     (at most {FINAL_ELECTIONS_BOUND} each)"
                ),
            );
        }
        Ok(())
    }
}
