//! The deterministic simulator (docs/simulation.md, docs/testing.md): many [`RaftCore`]s on a
//! simulated network with simulated disks, crashes, restarts and partitions, all drawn from one
//! `u64` seed, with the safety invariants checked after every event.
//!
//! [`run_seed`] runs one seed; a failing seed comes back as a [`Violation`] that says which rule
//! broke, shows the last events, and prints the command that replays it exactly. See
//! docs/simulation.md.
//!
//! [`RaftCore`]: crate::raft::RaftCore

pub(crate) mod batch;
mod cluster;
mod disk;
mod disruption;
mod invariants;
pub mod liar;
mod rng;
mod script;
mod trace;
mod xorshift;

pub use cluster::Simulation;
pub use disruption::{
    disruption_replay_command, run_disruption, run_disruption_planted, Cut, DisruptionRun,
};
pub use invariants::Invariant;
pub use liar::{ByteDraw, Draw, Lie, TargetView, LIAR_ID};
pub use rng::SimRng;
pub use script::run_script;
pub use xorshift::XorShift64;

/// What one simulation runs.
#[derive(Clone, Debug)]
pub struct SimConfig {
    pub seed: u64,
    /// Events of the fault phase; the final calm period comes on top.
    pub events: u64,
    pub voters: usize,
    pub observers: usize,
    /// Observers start without a voter set and learn it from their bootstrap servers (one
    /// voter, perhaps another observer) through FindQuorum, as with `bootstrap.servers` alone.
    pub bootstrap_observers: bool,
    /// Random faults (kills, shutdowns, partitions, loss, duplication, torn writes).
    pub faults: bool,
    /// Also kill an observer and delete its persistent state now and then. (Voters lose their
    /// state only in scripted scenarios: see `Simulation::kill_and_delete_state`.)
    pub delete_state: bool,
    /// During fault periods a liar (node `LIAR_ID`, no member of the cluster) sends well-formed
    /// hostile requests and stray responses to live nodes (see `liar.rs`).
    pub liar: bool,
    /// Judge only by outcomes: skip MajorityReachedHighWatermark, VotePersistedBeforeGranted
    /// and PreVoteChangesNothing, which watch the mechanism directly.
    pub outcome_only: bool,
    /// A client keeps appending.
    pub client: bool,
    /// Consumers reading the committed log with ClientFetch (docs/simulation.md, "Consumers").
    pub consumers: usize,
    /// How long the final calm may take before liveness is declared broken.
    pub liveness_ms: u64,
    /// The cores stand for election through a pre-vote round (`RaftConfig::pre_vote`,
    /// docs/protocol.md, "Pre-vote"); the liar then sends pre-votes too. Off: the runs of the
    /// core before pre-vote, event for event.
    pub pre_vote: bool,
    /// Now and then a message takes 100-500 ms more (the network's long tail). The disruption
    /// scenario turns it off: a tail that long is a leader unheard for a fetch timeout.
    pub latency_tail: bool,
    /// Tick a core at the present before every other input, as the node runtime does on every
    /// wake-up (docs/architecture.md, "Node runtime"). Off (the random runs, as the simulator
    /// always ran): a core is ticked only at its deadlines, so it handles a message with the
    /// clock of its last tick, and a timer armed by the message (a follower's fetch timeout)
    /// runs from that earlier time. The disruption scenario turns it on: there a fetch timeout
    /// that fires early is a leader wrongly taken for dead.
    pub tick_before_input: bool,
    /// A reassigner sends AlterQuorum requests with random targets drawn from every node
    /// (voters and observers), and the voter-set invariants are checked (docs/simulation.md,
    /// "Reassignment"). Off: no draw and no trace entry of its own, so runs replay as before.
    pub reassign: bool,
    /// Nodes delete the front of their logs as retention would, and followers behind a
    /// leader's log start reset (docs/simulation.md, "Retention"). Off: no draw and no trace
    /// entry of its own, so runs replay as before.
    pub retention: bool,
    /// After every fourth event, one node in turn steps `Input::RefreshFetch` (the node's wish
    /// for producer ids, docs/protocol.md "Producer ids"): a follower or observer with a fetch
    /// outstanding sends a fresh one. Off: runs replay as before.
    pub refresh_fetches: bool,
    /// Idempotent producers sending alongside the client (docs/simulation.md, "The whole
    /// replica"). 0: no draw and no trace entry of theirs, so runs replay as before.
    pub idempotent_producers: usize,
    /// Now and then an acknowledgement never reaches its producer, which stalls for up to 3 s
    /// before it retries (docs/simulation.md, "Producer stalls"). Off: no draw, so runs replay
    /// as before.
    pub producer_stalls: bool,
    /// A committer sends OffsetCommits for two groups alongside the client, and every replica's
    /// committed offsets are checked against the acknowledged ones (docs/simulation.md,
    /// "Committed offsets"). Off: no draw, so runs replay as before.
    pub group_commits: bool,
    /// A bug planted in every core, to show an invariant catches it (docs/simulation.md,
    /// "Planted bugs"). None in every real run.
    pub plant: Option<crate::raft::PlantedBug>,
    /// Events kept for the report.
    pub trace_len: usize,
}

impl SimConfig {
    /// The random run of the `ringraft-sim` tool.
    pub fn random(seed: u64, events: u64, voters: usize, observers: usize) -> Self {
        Self {
            seed,
            events,
            voters,
            observers,
            bootstrap_observers: false,
            faults: true,
            delete_state: false,
            liar: true,
            outcome_only: false,
            client: true,
            consumers: 2,
            liveness_ms: 30_000,
            pre_vote: true,
            latency_tail: true,
            tick_before_input: false,
            reassign: false,
            retention: false,
            refresh_fetches: false,
            idempotent_producers: 0,
            producer_stalls: false,
            group_commits: false,
            plant: None,
            trace_len: 40,
        }
    }

    /// A calm cluster for scripted scenarios: no random faults, no liar.
    pub fn scripted(seed: u64, voters: usize, observers: usize) -> Self {
        Self {
            faults: false,
            liar: false,
            ..Self::random(seed, 0, voters, observers)
        }
    }

    pub fn replay_command(&self) -> String {
        let mut cmd = format!(
            "cargo run --release -p ringraft-tools --bin ringraft-sim -- --seeds 1 --first-seed {} --events {} --voters {} --observers {}",
            self.seed, self.events, self.voters, self.observers
        );
        let flags = [
            (self.bootstrap_observers, " --bootstrap-observers"),
            (self.delete_state, " --delete-state"),
            (self.outcome_only, " --outcome-only"),
            (!self.liar, " --no-liar"),
            (!self.pre_vote, " --no-prevote"),
            (self.tick_before_input, " --tick-before-input"),
            (self.retention, " --retention"),
            (self.reassign, " --reassign"),
            (self.refresh_fetches, " --refresh-fetches"),
        ];
        for (on, flag) in flags {
            if on {
                cmd.push_str(flag);
            }
        }
        if self.idempotent_producers > 0 {
            cmd.push_str(&format!(" --producers {}", self.idempotent_producers));
        }
        if self.producer_stalls {
            cmd.push_str(" --producer-stalls");
        }
        if self.group_commits {
            cmd.push_str(" --group-commits");
        }
        if !self.faults {
            cmd.push_str("  # (scripted scenario: replay with its test instead)");
        }
        cmd
    }
}

/// A broken invariant: everything needed to understand and replay it.
#[derive(Clone, Debug)]
pub struct Violation {
    pub seed: u64,
    pub event_index: u64,
    pub time_ms: u64,
    pub invariant: Invariant,
    pub detail: String,
    /// The last events before the violation, oldest first.
    pub trace: Vec<String>,
    pub replay: String,
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "VIOLATION of {:?} at seed {}, event {}, t={}ms: {}",
            self.invariant, self.seed, self.event_index, self.time_ms, self.detail
        )?;
        writeln!(f, "last events:")?;
        for line in &self.trace {
            writeln!(f, "  {line}")?;
        }
        write!(f, "replay: {}", self.replay)
    }
}

/// What one passing seed did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Summary {
    pub seed: u64,
    /// All events, including the final calm.
    pub events: u64,
    pub fault_events: u64,
    pub elections: u64,
    /// Quorum-acknowledged client appends.
    pub commits: u64,
    pub committed_offsets: i64,
    /// ClientFetch requests the consumers sent, and the batches they were handed.
    pub consumer_fetches: u64,
    pub consumed_batches: u64,
    pub sim_time_ms: u64,
    /// Hostile messages the liar sent.
    pub liar_messages: u64,
    /// Of those, the ones the nodes refused on admission (docs/protocol.md section 14).
    pub refused_lies: u64,
    /// Elections won and epochs raised after faults stopped, until the cluster was live.
    pub final_elections: u64,
    pub final_epochs: i32,
    /// AlterQuorum requests the reassigner sent, those answered NONE (target recorded and
    /// committed), targets the committed set reached, and voter-set changes committed in the
    /// final leader's log (all 0 without `reassign`).
    pub alter_requests: u64,
    pub alter_accepted: u64,
    pub reassignments_completed: u64,
    pub voter_changes: u64,
    /// Voters whose disk the faults took (`delete_state`).
    pub voter_disks_lost: u64,
    /// Log starts moved by retention, and logs reset to a leader's log start (both 0 without
    /// `retention`).
    pub retentions: u64,
    pub resets: u64,
    /// Producer-state snapshots the replicas had written (docs/simulation.md, "Retention").
    pub producer_snapshots: u64,
    /// RefreshFetch steps to a following node (0 without `refresh_fetches`).
    pub refreshes: u64,
    /// Crashes that tore or lost log writes not yet durable (the simulated disk's only storage
    /// fault so far: docs/simulation.md, "Storage faults").
    pub torn_tails: u64,
    /// Acknowledgements the idempotent producers got, their retries, and the retries the
    /// replicas recognised as duplicates (all 0 without `idempotent_producers`).
    pub idempotent_acks: u64,
    pub idempotent_retries: u64,
    pub duplicates_suppressed: u64,
    /// Acknowledgements the producers never heard (each followed by a stall of the producer).
    pub idempotent_lost_acks: u64,
    /// Offset commits acknowledged (0 without `group_commits`).
    pub group_commits_acked: u64,
    /// Producer ids the replicas handed out to the producers (each checked unique).
    pub producer_ids_granted: u64,
    pub trace_hash: u64,
}

/// Runs one seed to the end: faults, then the final calm and its liveness check.
pub fn run_seed(cfg: SimConfig) -> Result<Summary, Box<Violation>> {
    Simulation::new(cfg)?.run()
}
