//! Property: no sequence of well-formed hostile messages from outside the cluster (spoofed
//! ids, epochs and offsets at the edges, huge successor lists, stray responses), interleaved
//! with ordinary simulation, makes a core panic or breaks one of the simulator's invariants,
//! and the cluster elects and commits again afterwards (docs/simulation.md).
//!
//! The messages come from proptest strategies written apart from the simulator's liar
//! (`engine::sim::liar`), so a blind spot of one generator need not be one of the other, and a
//! failure shrinks to a short list of readable steps.

use engine::raft::{
    BeginQuorumEpochRequest, BeginQuorumEpochResponse, DescribeQuorumRequest,
    EndQuorumEpochRequest, EndQuorumEpochResponse, Epoch, ErrorCode, FetchQuorumRecordsRequest,
    FetchQuorumRecordsResponse, FindQuorumRequest, NodeId, Offset, Request, Response, VoteRequest,
    VoteResponse,
};
use engine::sim::{Lie, SimConfig, Simulation, TargetView, Violation, LIAR_ID};
use proptest::prelude::*;
use proptest::sample::{select, Index};

/// An epoch relative to the target's current one (saturating), or absolute.
#[derive(Clone, Debug)]
enum Ep {
    Rel(Epoch),
    Abs(Epoch),
}

/// An offset relative to the target's log end (saturating), or absolute.
#[derive(Clone, Debug)]
enum Off {
    FromEnd(Offset),
    Abs(Offset),
}

/// A claimed node id.
#[derive(Clone, Debug)]
enum Id {
    Liar,
    /// A voter the target knows: spoofing.
    Voter(Index),
    Target,
    Abs(NodeId),
}

#[derive(Clone, Debug)]
struct Fields {
    right_cluster: bool,
    epoch: Ep,
    log_epoch: Ep,
    id: Id,
    other_id: Id,
    offset: Off,
    other_offset: Off,
    flag: bool,
    max_wait_ms: i32,
    successors: Vec<Id>,
    port: i32,
    timestamp: i64,
}

#[derive(Clone, Debug)]
enum Step {
    /// Let the cluster run for this many simulated milliseconds.
    Run(u16),
    Request {
        target: Index,
        kind: u8,
        fields: Fields,
    },
    /// A response to a request the target never sent, as if from a voter.
    Response {
        target: Index,
        kind: u8,
        from: Index,
        correlation: u64,
        error: i16,
        fields: Fields,
    },
}

// ---------------------------------------------------------------- strategies

const JUMP: Epoch = 1 << 20;

fn ep() -> impl Strategy<Value = Ep> {
    prop_oneof![
        3 => (-2..=3).prop_map(Ep::Rel),
        1 => select(vec![JUMP - 1, JUMP, JUMP + 1]).prop_map(Ep::Rel),
        1 => select(vec![Epoch::MAX, Epoch::MAX - 1, Epoch::MIN, -1, 0]).prop_map(Ep::Abs),
        1 => any::<Epoch>().prop_map(Ep::Abs),
    ]
}

fn off() -> impl Strategy<Value = Off> {
    prop_oneof![
        3 => (-2..=2i64).prop_map(Off::FromEnd),
        1 => select(vec![-2, -1, 0, Offset::MAX, Offset::MIN, 1 << 62]).prop_map(Off::Abs),
        1 => any::<Offset>().prop_map(Off::Abs),
    ]
}

fn id() -> impl Strategy<Value = Id> {
    prop_oneof![
        1 => Just(Id::Liar),
        3 => any::<Index>().prop_map(Id::Voter),
        1 => Just(Id::Target),
        1 => select(vec![-1, -2, NodeId::MAX, NodeId::MIN]).prop_map(Id::Abs),
    ]
}

fn successors() -> impl Strategy<Value = Vec<Id>> {
    prop_oneof![
        Just(Vec::new()),
        prop::collection::vec(id(), 1..16),
        // Huge, every entry the same (cheap to generate and to shrink).
        (id(), 1_000..=10_000usize).prop_map(|(id, n)| vec![id; n]),
    ]
}

fn fields() -> impl Strategy<Value = Fields> {
    let values = (
        prop::bool::weighted(0.9),
        ep(),
        ep(),
        id(),
        id(),
        off(),
        off(),
        any::<bool>(),
    );
    let extras = (
        select(vec![-1, 0, 1, 100, i32::MAX, i32::MIN]),
        successors(),
        select(vec![-5, 0, 9093, 70_000, i32::MAX]),
        select(vec![i64::MAX, i64::MIN, -1, 0]),
    );
    (values, extras).prop_map(
        |(
            (right_cluster, epoch, log_epoch, id, other_id, offset, other_offset, flag),
            (max_wait_ms, successors, port, timestamp),
        )| Fields {
            right_cluster,
            epoch,
            log_epoch,
            id,
            other_id,
            offset,
            other_offset,
            flag,
            max_wait_ms,
            successors,
            port,
            timestamp,
        },
    )
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        2 => (0..800u16).prop_map(Step::Run),
        6 => (any::<Index>(), 0..6u8, fields())
            .prop_map(|(target, kind, fields)| Step::Request { target, kind, fields }),
        1 => (any::<Index>(), 0..4u8, any::<Index>(), any::<u64>(), any::<i16>(), fields())
            .prop_map(|(target, kind, from, correlation, error, fields)| Step::Response {
                target,
                kind,
                from,
                correlation,
                error,
                fields,
            }),
    ]
}

// ---------------------------------------------------------------- building the messages

fn epoch(e: &Ep, v: &TargetView) -> Epoch {
    match *e {
        Ep::Rel(d) => v.epoch.saturating_add(d),
        Ep::Abs(x) => x,
    }
}

fn offset(o: &Off, v: &TargetView) -> Offset {
    match *o {
        Off::FromEnd(d) => v.log_end.saturating_add(d),
        Off::Abs(x) => x,
    }
}

fn voter(ix: &Index, v: &TargetView) -> NodeId {
    if v.voters.is_empty() {
        0
    } else {
        *ix.get(&v.voters)
    }
}

fn node(id: &Id, v: &TargetView) -> NodeId {
    match id {
        Id::Liar => LIAR_ID,
        Id::Voter(ix) => voter(ix, v),
        Id::Target => v.node,
        Id::Abs(x) => *x,
    }
}

fn cluster(f: &Fields, v: &TargetView) -> String {
    if f.right_cluster {
        v.cluster_id.clone()
    } else {
        "another-cluster".to_owned()
    }
}

fn request(kind: u8, f: &Fields, v: &TargetView) -> Request {
    let cluster_id = cluster(f, v);
    match kind {
        0 => Request::Vote(VoteRequest {
            cluster_id,
            candidate_epoch: epoch(&f.epoch, v),
            candidate_id: node(&f.id, v),
            last_epoch: epoch(&f.log_epoch, v),
            last_epoch_end_offset: offset(&f.offset, v),
            // A pre-vote or a real one: the flag is free here (FetchQuorumRecords reads it as
            // IsFollower).
            pre_vote: f.flag,
            ..Default::default()
        }),
        1 => Request::BeginQuorumEpoch(BeginQuorumEpochRequest {
            cluster_id,
            leader_id: node(&f.id, v),
            leader_epoch: epoch(&f.epoch, v),
        }),
        2 => Request::EndQuorumEpoch(EndQuorumEpochRequest {
            cluster_id,
            replica_id: node(&f.id, v),
            leader_id: node(&f.other_id, v),
            leader_epoch: epoch(&f.epoch, v),
            preferred_successors: f.successors.iter().map(|s| node(s, v)).collect(),
        }),
        3 => Request::FetchQuorumRecords(FetchQuorumRecordsRequest {
            cluster_id,
            replica_id: node(&f.id, v),
            leader_epoch: epoch(&f.epoch, v),
            fetch_offset: offset(&f.offset, v),
            last_fetched_epoch: epoch(&f.log_epoch, v),
            is_follower: f.flag,
            max_wait_ms: f.max_wait_ms,
            durable_offset: offset(&f.other_offset, v),
            replica_directory_id: Default::default(),
            lease_echo: None,
        }),
        4 => Request::FindQuorum(FindQuorumRequest {
            cluster_id,
            replica_id: node(&f.id, v),
            boot_timestamp: f.timestamp,
            host: "prop.invalid".to_owned(),
            port: f.port,
        }),
        _ => Request::DescribeQuorum(DescribeQuorumRequest {}),
    }
}

fn response(kind: u8, error: i16, f: &Fields, v: &TargetView) -> Response {
    let (error, leader_id, leader_epoch) = (ErrorCode(error), node(&f.id, v), epoch(&f.epoch, v));
    match kind {
        0 => Response::Vote(VoteResponse {
            error,
            leader_id,
            leader_epoch,
            vote_granted: f.flag,
        }),
        1 => Response::BeginQuorumEpoch(BeginQuorumEpochResponse {
            error,
            leader_id,
            leader_epoch,
        }),
        2 => Response::EndQuorumEpoch(EndQuorumEpochResponse {
            error,
            leader_id,
            leader_epoch,
        }),
        _ => Response::FetchQuorumRecords(FetchQuorumRecordsResponse {
            error,
            leader_id,
            leader_epoch,
            next_fetch_offset: offset(&f.offset, v),
            next_fetch_offset_epoch: epoch(&f.log_epoch, v),
            batches: Vec::new(),
            high_watermark: offset(&f.other_offset, v),
            first_dirty_offset: 0,
            last_caught_up_time_ms: f.timestamp,
            log_start: None,
            producer_state: None,
            lease_stamp: None,
        }),
    }
}

// ---------------------------------------------------------------- the run

/// The lie a step tells node `t` in its current state (None for a Run step).
fn lie(step: &Step, v: &TargetView) -> Option<Lie> {
    match step {
        Step::Run(_) => None,
        Step::Request { kind, fields, .. } => Some(Lie::Request(request(*kind, fields, v))),
        Step::Response {
            kind,
            from,
            correlation,
            error,
            fields,
            ..
        } => Some(Lie::Response {
            from: voter(from, v),
            correlation: *correlation,
            response: response(*kind, *error, fields, v),
        }),
    }
}

fn run(cfg: SimConfig, steps: &[Step]) -> Result<(), Box<Violation>> {
    let mut sim = Simulation::new(cfg)?;
    // Most lies should meet a working cluster; the fuzz target covers the start-up too.
    sim.run_until(3_000, |s| s.current_leader().is_some())?;
    for step in steps {
        let target = match step {
            Step::Run(ms) => {
                sim.run_for(u64::from(*ms))?;
                continue;
            }
            Step::Request { target, .. } | Step::Response { target, .. } => {
                target.index(sim.node_count())
            }
        };
        let Some(view) = sim.target_view(target) else {
            continue; // down: nobody to lie to
        };
        if let Some(lie) = lie(step, &view) {
            sim.inject(target, lie)?;
        }
    }
    sim.check_liveness()?;
    sim.check_acknowledged()
}

proptest! {
    // Each case simulates a few seconds of a small cluster: about a millisecond of CPU.
    #![proptest_config(ProptestConfig {
        cases: 256,
        max_shrink_iters: 1_000,
        ..ProptestConfig::default()
    })]

    #[test]
    fn hostile_messages_break_no_invariant(
        seed in any::<u64>(),
        voters in 1..=3usize,
        observers in 0..=1usize,
        faults in any::<bool>(),
        bootstrap_observers in any::<bool>(),
        steps in prop::collection::vec(step(), 1..40),
    ) {
        let mut cfg = SimConfig::random(seed, 0, voters, observers);
        cfg.faults = faults;
        cfg.bootstrap_observers = bootstrap_observers;
        cfg.liar = false; // the steps are the liar
        if let Err(v) = run(cfg, &steps) {
            panic!("{v}");
        }
    }
}
