//! The disruption scenario (docs/simulation.md, "Disruption"): a healthy cluster, one follower
//! cut off from the leader for several fetch timeouts and healed, while the leader keeps a
//! majority. With pre-vote nothing may come of it: no epoch raised anywhere, no election, the
//! same leader throughout, and the follower back following it. Without pre-vote the follower
//! stands for election and unseats the leader, which is what the scenario measures then.

use crate::raft::{Epoch, NodeId, Role, TimeMs};

use super::invariants::{Breach, Invariant};
use super::{SimConfig, SimRng, Simulation, Violation};

/// How the follower is cut off.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cut {
    /// It hears nobody and nobody hears it (a partition, or a paused process).
    Isolated,
    /// The leader's messages to it are lost; everything else flows (it still reaches the
    /// leader and the other voters).
    DeafToLeader,
    /// Its messages to the leader are lost; everything else flows.
    MuteToLeader,
}

/// What one seed of the scenario did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DisruptionRun {
    pub seed: u64,
    pub leader: NodeId,
    pub epoch: Epoch,
    pub follower: NodeId,
    pub cut: Cut,
    pub cut_ms: TimeMs,
    /// The client stopped appending before the cut, and every log was equal: the cut-off
    /// follower's log is as up to date as anyone's, so only the live-leader rule of pre-vote
    /// stands between it and an election.
    pub quiet: bool,
    /// Elections won from the cut to the end of the run.
    pub elections: u64,
    /// How far the highest epoch any node reached rose above the leader's.
    pub epoch_raise: Epoch,
}

impl DisruptionRun {
    /// The leader was unseated or an epoch raised: what pre-vote prevents.
    pub fn disrupted(&self) -> bool {
        self.elections > 0 || self.epoch_raise > 0
    }
}

/// The fetch timeout of the simulated cores (`cluster::core_config`).
const FETCH_TIMEOUT_MS: TimeMs = 500;
/// How long the run watches after the heal.
const AFTER_HEAL_MS: TimeMs = 3_000;

/// One seed with `voters` voters (at least 3: a follower to cut and a majority without it).
/// With `pre_vote` a disruption is a violation (`DisruptedHealthyLeader`), and so is a follower
/// that does not follow the leader again after the heal; without, the run reports what
/// happened. The other invariants are checked after every event as in every run (those that
/// watch the mechanism only without `outcome_only`).
pub fn run_disruption(
    seed: u64,
    voters: usize,
    pre_vote: bool,
    outcome_only: bool,
) -> Result<DisruptionRun, Box<Violation>> {
    disruption_run(seed, voters, pre_vote, outcome_only, None)
}

/// The disruption scenario with pre-vote, and a bug planted in every core (docs/simulation.md,
/// "Planted bugs").
pub fn run_disruption_planted(
    seed: u64,
    voters: usize,
    plant: crate::raft::PlantedBug,
) -> Result<DisruptionRun, Box<Violation>> {
    disruption_run(seed, voters, true, false, Some(plant))
}

/// The command that runs disruption seed `seed` again, printed with its violations.
pub fn disruption_replay_command(
    seed: u64,
    voters: usize,
    pre_vote: bool,
    outcome_only: bool,
) -> String {
    format!(
        "cargo run --release -p ringraft-tools --bin ringraft-sim -- --disruption --seeds 1 --first-seed {seed} --voters {voters}{}{}",
        if pre_vote { "" } else { " --no-prevote" },
        if outcome_only { " --outcome-only" } else { "" }
    )
}

fn disruption_run(
    seed: u64,
    voters: usize,
    pre_vote: bool,
    outcome_only: bool,
    plant: Option<crate::raft::PlantedBug>,
) -> Result<DisruptionRun, Box<Violation>> {
    assert!(
        voters >= 3,
        "a follower to cut off and a majority without it"
    );
    let mut cfg = SimConfig::scripted(seed, voters, 0);
    cfg.pre_vote = pre_vote;
    cfg.outcome_only = outcome_only;
    cfg.plant = plant;
    cfg.latency_tail = false;
    cfg.tick_before_input = true;
    let replay = disruption_replay_command(seed, voters, pre_vote, outcome_only);
    let with_replay = |mut v: Box<Violation>| {
        v.replay.clone_from(&replay);
        v
    };
    let mut sim = Simulation::new(cfg).map_err(with_replay)?;
    let healthy = |s: &Simulation| {
        s.current_leader()
            .is_some_and(|(l, _)| s.high_watermark(l).is_some())
            && s.acked() >= 5
    };
    live_until(&mut sim, 20_000, healthy, "no healthy leader", &replay)?;
    let (leader, epoch) = sim.current_leader().expect("healthy");
    let mut draw = SimRng::new(seed ^ 0xd15c_0ed5);
    let followers: Vec<NodeId> = (0..voters as NodeId).filter(|&v| v != leader).collect();
    let follower = followers[draw.index(followers.len())];
    let cut = [Cut::Isolated, Cut::DeafToLeader, Cut::MuteToLeader][draw.index(3)];
    let cut_ms = draw.range(2 * FETCH_TIMEOUT_MS, 10 * FETCH_TIMEOUT_MS);
    let quiet = draw.chance(0.5);
    if quiet {
        sim.pause_client(true);
        let voter_ids: Vec<NodeId> = (0..voters as NodeId).collect();
        let settled = move |s: &Simulation| {
            let end = s.log_end(leader);
            s.client_in_flight() == 0
                && voter_ids.iter().all(|&v| {
                    s.log_end(v) == end && s.high_watermark(v).is_some_and(|hw| Some(hw) == end)
                })
        };
        live_until(&mut sim, 10_000, settled, "logs did not settle", &replay)?;
    }
    let elections = sim.elections();
    match cut {
        Cut::Isolated => {
            let rest: Vec<NodeId> = (0..sim.node_count() as NodeId)
                .filter(|&n| n != follower)
                .collect();
            sim.partition(&[&[follower], &rest]);
        }
        Cut::DeafToLeader => sim.block_one_way(leader, follower),
        Cut::MuteToLeader => sim.block_one_way(follower, leader),
    }
    let run = |sim: &Simulation| DisruptionRun {
        seed,
        leader,
        epoch,
        follower,
        cut,
        cut_ms,
        quiet,
        elections: sim.elections() - elections,
        epoch_raise: sim.max_epoch() - epoch,
    };
    // With pre-vote the first sign of a disruption is the violation; without, the run goes to
    // its end so that it counts the elections that follow.
    let disrupted = |s: &Simulation| pre_vote && run(s).disrupted();
    let mut hit = sim.run_until(cut_ms, disrupted).map_err(with_replay)?;
    sim.heal();
    let committed = sim.committed_end();
    let rejoined = move |s: &Simulation| {
        s.role(follower) == Some(Role::Follower)
            && s.leader_of(follower) == Some(leader)
            && s.high_watermark(follower).is_some_and(|hw| hw >= committed)
    };
    if !hit {
        hit = sim
            .run_until(AFTER_HEAL_MS, |s| disrupted(s))
            .map_err(with_replay)?;
    }
    let result = run(&sim);
    if !pre_vote {
        return Ok(result);
    }
    if hit {
        let why = format!(
            "{cut:?} follower {follower} for {cut_ms} ms under leader {leader} of epoch {epoch}: \
             {} election(s), highest epoch {}",
            result.elections,
            epoch + result.epoch_raise
        );
        return Err(fail(&sim, Invariant::DisruptedHealthyLeader, &why, &replay));
    }
    if !rejoined(&sim) {
        let why = format!(
            "{cut:?} follower {follower} does not follow leader {leader} again {AFTER_HEAL_MS} ms \
             after the heal (role {:?}, HW {:?}, committed {committed})",
            sim.role(follower),
            sim.high_watermark(follower)
        );
        return Err(fail(&sim, Invariant::Liveness, &why, &replay));
    }
    sim.check_acknowledged().map_err(with_replay)?;
    Ok(result)
}

/// Runs `sim` for at most `ms` until `until` holds; that it never does is a liveness failure
/// named `what`.
fn live_until(
    sim: &mut Simulation,
    ms: TimeMs,
    until: impl FnMut(&Simulation) -> bool,
    what: &str,
    replay: &str,
) -> Result<(), Box<Violation>> {
    let reached = sim.run_until(ms, until).map_err(|mut v| {
        v.replay = replay.to_owned();
        v
    })?;
    if reached {
        return Ok(());
    }
    Err(fail(sim, Invariant::Liveness, what, replay))
}

fn fail(sim: &Simulation, invariant: Invariant, detail: &str, replay: &str) -> Box<Violation> {
    let mut v = sim.violation(Breach {
        invariant,
        detail: detail.to_owned(),
    });
    v.replay = replay.to_owned();
    v
}
