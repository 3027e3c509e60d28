//! The simulator against the real Raft core: a fixed batch of random seeds, named scenarios
//! after those of Kafka's simulation test (docs/simulation.md), and determinism.
//!
//! A failure prints the violated invariant, the last events and the command that replays it.

use engine::raft::{NodeId, Role};
use engine::sim::{run_disruption, run_seed, SimConfig, Simulation, Summary, Violation};

fn ok<T>(r: Result<T, Box<Violation>>) -> T {
    r.unwrap_or_else(|v| panic!("{v}"))
}

fn scripted(seed: u64, voters: usize, observers: usize) -> Simulation {
    ok(Simulation::new(SimConfig::scripted(
        seed, voters, observers,
    )))
}

/// Waits for a leader with an exposed HW; returns it.
fn wait_leader(sim: &mut Simulation, ms: u64) -> (NodeId, i32) {
    let found = ok(sim.run_until(ms, |s| {
        s.current_leader()
            .is_some_and(|(l, _)| s.high_watermark(l).is_some())
    }));
    assert!(
        found,
        "no leader with a high watermark within {ms} ms (t={})",
        sim.now()
    );
    sim.current_leader().expect("found")
}

/// Waits until the client has `n` more acknowledged appends.
fn wait_acks(sim: &mut Simulation, n: usize, ms: u64) {
    let target = sim.acked() + n;
    let done = ok(sim.run_until(ms, |s| s.acked() >= target));
    assert!(done, "only {} of {target} acks within {ms} ms", sim.acked());
}

/// A scripted cluster once it has a leader with an exposed HW and the client `acks`
/// acknowledged appends: the simulation, that leader and its epoch.
fn led_with_acks(
    seed: u64,
    voters: usize,
    observers: usize,
    acks: usize,
) -> (Simulation, NodeId, i32) {
    let mut sim = scripted(seed, voters, observers);
    let (leader, epoch) = wait_leader(&mut sim, 10_000);
    wait_acks(&mut sim, acks, 10_000);
    (sim, leader, epoch)
}

/// Waits (10 s at most) until `node`'s high watermark reaches what is committed now; `who` names
/// it in the failure.
fn wait_caught_up(sim: &mut Simulation, node: NodeId, who: &str) {
    let target = sim.committed_end();
    let caught_up = ok(sim.run_until(10_000, |s| {
        s.high_watermark(node).is_some_and(|hw| hw >= target)
    }));
    assert!(caught_up, "{who} catches up to {target}");
}

fn finish(sim: &mut Simulation) {
    ok(sim.check_liveness());
    ok(sim.check_acknowledged());
}

/// The summaries of the random seeds `seeds` (`events` fault events among `voters` voters and
/// `observers` observers, each set up further by `shape`), run one by one as they are taken:
/// every batch of seeds below fails on the first violation, and on a seed that ran out of
/// events, before it counts anything.
fn random_seeds(
    seeds: std::ops::Range<u64>,
    events: u64,
    (voters, observers): (usize, usize),
    shape: impl Fn(u64, &mut SimConfig),
) -> impl Iterator<Item = Summary> {
    seeds.map(move |seed| {
        let mut cfg = SimConfig::random(seed, events, voters, observers);
        shape(seed, &mut cfg);
        let s = ok(run_seed(cfg));
        assert!(s.fault_events >= events, "seed {seed} ran out of events");
        s
    })
}

#[test]
fn initial_election_with_1_to_5_voters_and_observers() {
    for voters in 1..=5 {
        for observers in 0..=2 {
            let mut sim = scripted(
                100 + voters as u64 * 10 + observers as u64,
                voters,
                observers,
            );
            let (leader, epoch) = wait_leader(&mut sim, 10_000);
            assert!((leader as usize) < voters, "an observer cannot lead");
            assert!(epoch >= 1);
            let leaders = (0..sim.node_count() as NodeId)
                .filter(|&n| sim.role(n) == Some(Role::Leader))
                .count();
            assert_eq!(leaders, 1, "{voters} voters: one leader");
            wait_acks(&mut sim, 10, 10_000);
            finish(&mut sim);
        }
    }
}

#[test]
fn new_leader_after_leader_kill_and_old_leader_catches_up() {
    let (mut sim, old, epoch) = led_with_acks(7, 3, 1, 10);
    sim.kill(old as usize);
    let found = ok(sim.run_until(10_000, |s| {
        s.current_leader()
            .is_some_and(|(l, e)| l != old && e > epoch)
    }));
    assert!(found, "a new leader after the kill");
    wait_acks(&mut sim, 10, 10_000);
    ok(sim.restart(old as usize));
    wait_caught_up(&mut sim, old, "the old leader");
    finish(&mut sim);
}

#[test]
fn new_leader_after_graceful_shutdown() {
    for (voters, observers) in [(3, 0), (3, 2), (5, 1)] {
        let (mut sim, old, epoch) = led_with_acks(11 + voters as u64, voters, observers, 5);
        ok(sim.shutdown(old as usize));
        let found = ok(sim.run_until(10_000, |s| {
            !s.is_running(old)
                && s.current_leader()
                    .is_some_and(|(l, e)| l != old && e > epoch)
        }));
        assert!(found, "shutdown completes and another voter leads");
        wait_acks(&mut sim, 5, 10_000);
        finish(&mut sim);
    }
}

#[test]
fn all_killed_then_only_a_majority_restarted() {
    let (mut sim, _, _) = led_with_acks(21, 5, 1, 20);
    for i in 0..6 {
        sim.kill(i);
    }
    ok(sim.run_for(500));
    for i in [1, 3, 4, 5] {
        ok(sim.restart(i));
    }
    let (leader, _) = wait_leader(&mut sim, 15_000);
    assert!([1, 3, 4].contains(&leader));
    wait_acks(&mut sim, 10, 10_000);
    ok(sim.check_acknowledged());
    finish(&mut sim);
}

#[test]
fn five_voters_split_two_three_then_heal() {
    let (mut sim, _, _) = led_with_acks(31, 5, 0, 5);
    sim.partition(&[&[0, 1], &[2, 3, 4]]);
    let majority_leads = ok(sim.run_until(15_000, |s| {
        s.current_leader()
            .is_some_and(|(l, _)| l >= 2 && s.high_watermark(l).is_some())
    }));
    assert!(majority_leads, "the majority side elects a leader");
    let before = sim.committed_end();
    wait_acks(&mut sim, 10, 15_000);
    assert!(sim.committed_end() > before, "the majority side commits");
    // The minority side cannot have learned anything committed after the split.
    for n in [0, 1] {
        assert!(sim.high_watermark(n).unwrap_or(0) <= before);
    }
    sim.heal();
    let target = sim.committed_end();
    let caught_up = ok(sim.run_until(15_000, |s| {
        (0..5).all(|n| s.high_watermark(n).is_some_and(|hw| hw >= target))
    }));
    assert!(caught_up, "everyone catches up after the heal");
    finish(&mut sim);
}

#[test]
fn old_leader_partitioned_away_steps_down_and_catches_up() {
    let (mut sim, old, epoch) = led_with_acks(61, 3, 1, 5);
    let old_hw = sim.high_watermark(old).expect("a leader with a HW");
    sim.partition(&[
        &[old],
        &[0, 1, 2, 3]
            .into_iter()
            .filter(|&n| n != old)
            .collect::<Vec<_>>(),
    ]);
    let found = ok(sim.run_until(10_000, |s| {
        s.current_leader()
            .is_some_and(|(l, e)| l != old && e > epoch && s.high_watermark(l).is_some())
    }));
    assert!(found, "the majority elects a new leader");
    wait_acks(&mut sim, 5, 10_000);
    // Cut off, the old leader cannot have committed anything new.
    assert!(sim.high_watermark(old).unwrap_or(0) <= old_hw);
    sim.heal();
    let target = sim.committed_end();
    let caught_up = ok(sim.run_until(10_000, |s| {
        s.role(old) != Some(Role::Leader) && s.high_watermark(old).is_some_and(|hw| hw >= target)
    }));
    assert!(
        caught_up,
        "the old leader steps down and catches up to {target}"
    );
    finish(&mut sim);
}

#[test]
fn back_to_back_leader_failures() {
    let mut sim = scripted(41, 5, 1);
    let (mut leader, mut epoch) = wait_leader(&mut sim, 10_000);
    let mut killed = Vec::new();
    for _ in 0..2 {
        wait_acks(&mut sim, 3, 10_000);
        sim.kill(leader as usize);
        killed.push(leader);
        let dead = killed.clone();
        let found = ok(sim.run_until(15_000, |s| {
            s.current_leader()
                .is_some_and(|(l, e)| !dead.contains(&l) && e > epoch)
        }));
        assert!(found, "a leader after {} failures", killed.len());
        (leader, epoch) = sim.current_leader().expect("found");
    }
    for k in killed {
        ok(sim.restart(k as usize));
    }
    finish(&mut sim);
}

#[test]
fn single_node_losing_its_state_keeps_committed_data() {
    let (mut sim, leader, _) = led_with_acks(51, 3, 1, 10);
    let follower = (0..3).find(|&n| n != leader).expect("three voters");
    sim.kill_and_delete_state(follower as usize);
    ok(sim.run_for(200));
    ok(sim.restart(follower as usize));
    wait_acks(&mut sim, 10, 10_000);
    wait_caught_up(&mut sim, follower, "the wiped node");
    finish(&mut sim);
}

#[test]
fn observers_with_bootstrap_servers_only_learn_the_quorum_and_replicate() {
    let mut cfg = SimConfig::scripted(71, 3, 2);
    cfg.bootstrap_observers = true;
    let mut sim = ok(Simulation::new(cfg));
    wait_leader(&mut sim, 10_000);
    wait_acks(&mut sim, 10, 10_000);
    let caught_up = |observers: &'static [NodeId], target: i64| {
        move |s: &Simulation| {
            observers.iter().all(|&o| {
                s.role(o) == Some(Role::Follower)
                    && s.high_watermark(o).is_some_and(|hw| hw >= target)
            })
        }
    };
    let target = sim.committed_end();
    assert!(ok(sim.run_until(10_000, caught_up(&[3, 4], target))));
    for o in [3, 4] {
        assert_eq!(
            sim.voters(o),
            Some(vec![0, 1, 2]),
            "observer {o} learned the voters"
        );
    }
    // One observer restarts from its quorum-state file, the other from an empty disk.
    sim.kill(3);
    sim.kill_and_delete_state(4);
    ok(sim.run_for(200));
    ok(sim.restart(3));
    ok(sim.restart(4));
    assert_eq!(
        sim.voters(3),
        Some(vec![0, 1, 2]),
        "from the quorum-state file"
    );
    assert_eq!(sim.voters(4), Some(vec![]), "nothing known yet");
    wait_acks(&mut sim, 10, 10_000);
    let target = sim.committed_end();
    assert!(ok(sim.run_until(10_000, caught_up(&[3, 4], target))));
    assert_eq!(sim.voters(4), Some(vec![0, 1, 2]), "learned again");
    finish(&mut sim);
}

/// Bootstrap-only observers under the random faults, some losing their disks.
#[test]
fn random_seeds_with_bootstrap_observers() {
    // Nothing to count: each seed passes or fails on its own.
    random_seeds(7_000_000..7_000_150, 2_000, (3, 2), |seed, cfg| {
        cfg.bootstrap_observers = true;
        cfg.delete_state = seed % 2 == 0;
    })
    .for_each(drop);
}

/// Pre-vote's point (docs/simulation.md, "Disruption"): a follower cut off from a healthy
/// leader for 1-5 s (isolated, deaf to the leader, or mute to it) and healed causes no election
/// and raises no epoch, and follows the leader again. `run_disruption` fails the seed otherwise.
#[test]
fn a_follower_cut_off_from_a_healthy_leader_disrupts_nothing() {
    let mut cuts = std::collections::BTreeSet::new();
    for (voters, seeds) in [(3, 60), (5, 30)] {
        for seed in 9_000_000..9_000_000 + seeds {
            let run = ok(run_disruption(seed, voters, true, false));
            assert!(!run.disrupted(), "{run:?}");
            cuts.insert(format!("{:?}, quiet {}", run.cut, run.quiet));
        }
    }
    assert_eq!(cuts.len(), 6, "every kind of cut, quiet or not: {cuts:?}");
}

/// The scenario has teeth: without pre-vote the same runs see the cut-off follower stand and
/// unseat the leader.
#[test]
fn without_pre_vote_a_follower_cut_off_from_a_healthy_leader_unseats_it() {
    let runs: Vec<_> = (9_000_000..9_000_040)
        .map(|seed| ok(run_disruption(seed, 3, false, false)))
        .collect();
    let disrupted = runs.iter().filter(|r| r.disrupted()).count();
    let elections: u64 = runs.iter().map(|r| r.elections).sum();
    assert_eq!(
        disrupted,
        runs.len(),
        "every seed raises an epoch without pre-vote"
    );
    assert!(
        elections >= runs.len() as u64,
        "{elections} elections in {} seeds",
        runs.len()
    );
}

#[test]
fn same_seed_same_trace() {
    let cfg = SimConfig::random(2024, 1_500, 3, 1);
    let a = ok(run_seed(cfg.clone()));
    let b = ok(run_seed(cfg));
    assert_eq!(a, b, "two runs of one seed must be identical");
    let c = ok(run_seed(SimConfig::random(2025, 1_500, 3, 1)));
    assert_ne!(a.trace_hash, c.trace_hash);
}

/// The fixed batch: 5,100 seeds of 3,000 fault events each (plus the final calm) across cluster
/// shapes, one shape also losing observers' disks, one without pre-vote, one ticking the cores
/// before every input, all with the liar. About a minute at the test profile on a small shared
/// machine; `ringraft-sim` runs more.
#[test]
fn fixed_batch_of_random_seeds() {
    // (voters, observers, seeds, delete_state)
    // (voters, observers, seeds, delete_state, pre_vote, tick_before_input)
    let shapes: [(usize, usize, u64, bool, bool, bool); 9] = [
        (1, 0, 300, false, true, false),
        (1, 2, 200, false, true, false),
        (3, 0, 1_200, false, true, false),
        (3, 2, 800, false, true, false),
        (5, 0, 800, false, true, false),
        (5, 1, 800, false, true, false),
        (3, 2, 400, true, true, false),
        // The election of the draft, without pre-vote (quorum.prevote.enable = false).
        (3, 1, 300, false, false, false),
        // Cores ticked before every input, as the node runtime does.
        (3, 1, 300, false, true, true),
    ];
    let events = 3_000;
    let (mut total_events, mut total_seeds, mut elections, mut commits) = (0, 0, 0, 0);
    let (mut lies, mut refused) = (0, 0);
    let (mut consumer_fetches, mut consumed) = (0, 0);
    let mut after_faults = (0, 0);
    for (shape, &(voters, observers, seeds, delete_state, pre_vote, tick)) in
        shapes.iter().enumerate()
    {
        let first = 1_000_000 * (shape as u64 + 1);
        let set_up = |_: u64, cfg: &mut SimConfig| {
            cfg.delete_state = delete_state;
            cfg.pre_vote = pre_vote;
            cfg.tick_before_input = tick;
        };
        for s in random_seeds(first..first + seeds, events, (voters, observers), set_up) {
            total_events += s.events;
            total_seeds += 1;
            elections += s.elections;
            commits += s.commits;
            lies += s.liar_messages;
            refused += s.refused_lies;
            consumer_fetches += s.consumer_fetches;
            consumed += s.consumed_batches;
            after_faults = (
                after_faults.0.max(s.final_elections),
                after_faults.1.max(s.final_epochs),
            );
        }
    }
    // Guards against a simulator that silently stopped doing anything.
    assert!(
        elections >= total_seeds,
        "{elections} elections in {total_seeds} seeds"
    );
    assert!(
        commits >= 10 * total_seeds,
        "{commits} commits in {total_seeds} seeds"
    );
    assert!(
        lies >= 20 * total_seeds,
        "{lies} hostile messages in {total_seeds} seeds"
    );
    // The consumers read, and were handed committed batches (each one checked).
    assert!(
        consumer_fetches >= 20 * total_seeds,
        "{consumer_fetches} consumer fetches in {total_seeds} seeds"
    );
    assert!(
        consumed >= 5 * total_seeds,
        "{consumed} batches consumed in {total_seeds} seeds"
    );
    // Most lies carry a field out of bounds or a spoofed id: admission must be what stops them.
    assert!(
        refused * 4 >= lies,
        "only {refused} of {lies} hostile messages refused on admission"
    );
    eprintln!("{total_seeds} seeds, {total_events} events, {elections} elections, {commits} commits, {lies} lies ({refused} refused on admission), {consumer_fetches} consumer fetches handing over {consumed} batches: no violation; at most {after_faults:?} elections, epochs raised after faults stopped");
}

/// The reassignment batch (docs/simulation.md, "Reassignment"): a reassigner sends AlterQuorum
/// requests with random targets drawn from every node, under every fault of the random runs;
/// the voter-set invariants are checked after every event, and at the end the last target must
/// be the committed set with nothing in progress.
#[test]
fn fixed_batch_of_reassignment_seeds() {
    // (voters, observers, seeds)
    let shapes: [(usize, usize, u64); 3] = [(3, 2, 1_000), (5, 2, 800), (1, 3, 200)];
    let events = 1_500;
    let (mut seeds, mut requests, mut accepted, mut completed, mut changes) = (0, 0, 0, 0, 0);
    let (mut changed_seeds, mut disks_lost) = (0, 0);
    for (shape, &(voters, observers, n)) in shapes.iter().enumerate() {
        let first = 20_000_000 + 1_000_000 * shape as u64;
        let set_up = |seed: u64, cfg: &mut SimConfig| {
            cfg.reassign = true;
            // Every other seed loses disks, voters' included (docs/simulation.md, "Faults").
            cfg.delete_state = seed % 2 == 1;
        };
        for s in random_seeds(first..first + n, events, (voters, observers), set_up) {
            disks_lost += s.voter_disks_lost;
            seeds += 1;
            requests += s.alter_requests;
            accepted += s.alter_accepted;
            completed += s.reassignments_completed;
            changes += s.voter_changes;
            changed_seeds += u64::from(s.voter_changes > 0);
        }
    }
    // Guards against a reassigner that silently stopped reassigning.
    assert!(
        requests >= 2 * seeds,
        "{requests} AlterQuorum requests in {seeds} seeds"
    );
    assert!(
        accepted * 4 >= seeds,
        "{accepted} targets accepted in {seeds} seeds"
    );
    assert!(
        completed * 2 >= seeds,
        "{completed} reassignments completed in {seeds} seeds"
    );
    assert!(
        changed_seeds * 2 >= seeds,
        "voter changes committed in only {changed_seeds} of {seeds} seeds"
    );
    // And against a fault that silently stopped hitting voters.
    assert!(
        disks_lost * 20 >= seeds,
        "{disks_lost} voter disks lost in {seeds} seeds"
    );
    eprintln!("{seeds} reassignment seeds: {requests} AlterQuorum requests, {accepted} accepted, {completed} reassignments completed, {changes} voter changes committed ({changed_seeds} seeds with one at least), {disks_lost} voter disks lost: no violation");
}

/// Retention (docs/simulation.md, "Retention"): nodes delete the front of their logs up to
/// what their cores allow, and followers behind a leader's log start reset their logs, under
/// every fault, with reassignments on every other seed.
#[test]
fn fixed_batch_of_retention_seeds() {
    let (first, n, events) = (30_000_000u64, 600u64, 1_500);
    let (mut starts_moved, mut resets, mut changes) = (0, 0, 0);
    let set_up = |seed: u64, cfg: &mut SimConfig| {
        cfg.retention = true;
        cfg.reassign = seed % 2 == 1;
        cfg.delete_state = seed % 4 == 3;
    };
    for s in random_seeds(first..first + n, events, (3, 2), set_up) {
        starts_moved += s.retentions;
        resets += s.resets;
        changes += s.voter_changes;
    }
    // Guards against retention that silently stopped deleting, or logs that never fall behind.
    assert!(
        starts_moved >= 5 * n,
        "{starts_moved} log starts moved in {n} seeds"
    );
    assert!(resets * 10 >= n, "{resets} logs reset in {n} seeds");
    assert!(changes >= n / 4, "{changes} voter changes in {n} seeds");
    eprintln!("{n} retention seeds: {starts_moved} log starts moved, {resets} logs reset, {changes} voter changes committed: no violation");
}

/// A node that wants producer ids asks its core for a fresh fetch (`Input::RefreshFetch`,
/// docs/protocol.md "Producer ids"): here one node in turn does so after every fourth event,
/// under every fault, with reassignments and retention on every other seed.
#[test]
fn fixed_batch_of_refresh_seeds() {
    let (first, n, events) = (40_000_000u64, 300u64, 1_500);
    let mut refreshes = 0;
    let set_up = |seed: u64, cfg: &mut SimConfig| {
        cfg.refresh_fetches = true;
        cfg.reassign = seed % 2 == 1;
        cfg.retention = seed % 2 == 1;
    };
    for s in random_seeds(first..first + n, events, (3, 2), set_up) {
        refreshes += s.refreshes;
    }
    // Guards against a flag that stopped reaching the cores.
    assert!(
        refreshes >= 100 * n,
        "{refreshes} refreshes to followers in {n} seeds"
    );
    eprintln!("{n} refresh seeds: {refreshes} refreshes to followers: no violation");
}

/// The whole replica (docs/simulation.md, "The whole replica"): two idempotent producers beside
/// the client, their retries reaching new leaders, under every fault of the random runs, with
/// retention, reassignment, lost observer disks, producers that stall after a lost
/// acknowledgement and the runtime's ticking mixed across the seeds. Every acknowledged
/// idempotent batch must be committed once, at the offsets each of its acknowledgements names.
#[test]
fn fixed_batch_of_whole_replica_seeds() {
    let (first, n, events) = (50_000_000u64, 5_000u64, 1_500);
    let (mut acks, mut retries, mut duplicates, mut reads, mut ids) = (0, 0, 0, 0, 0);
    let mut lost_acks = 0;
    let set_up = |seed: u64, cfg: &mut SimConfig| {
        cfg.idempotent_producers = 2;
        cfg.producer_stalls = seed % 3 != 2;
        cfg.retention = seed % 2 == 1;
        cfg.reassign = seed % 3 == 1;
        cfg.delete_state = seed % 5 == 4;
        cfg.tick_before_input = seed % 4 == 2;
    };
    for s in random_seeds(first..first + n, events, (3, 2), set_up) {
        acks += s.idempotent_acks;
        retries += s.idempotent_retries;
        duplicates += s.duplicates_suppressed;
        reads += s.consumer_fetches;
        ids += s.producer_ids_granted;
        lost_acks += s.idempotent_lost_acks;
    }
    // Guards against producers that stopped sending, retrying, stalling, or reaching a
    // duplicate.
    assert!(
        acks >= 50 * n,
        "{acks} idempotent acknowledgements in {n} seeds"
    );
    assert!(
        retries >= acks / 2,
        "{retries} retries for {acks} acknowledgements"
    );
    assert!(
        duplicates * 5 >= n,
        "{duplicates} duplicates recognised in {n} seeds"
    );
    assert!(ids >= 2 * n, "{ids} producer ids handed out in {n} seeds");
    assert!(
        lost_acks >= n / 2,
        "{lost_acks} lost acknowledgements in {n} seeds"
    );
    eprintln!("{n} whole-replica seeds: {acks} idempotent acknowledgements, {retries} retries, {lost_acks} of them after a stall, {duplicates} duplicates recognised, {ids} producer ids handed out, {reads} consumer reads checked: no violation");
}

/// Runs seeds from `first` (3 voters + 2 observers, 1,500 events, as `shape` sets them up) with
/// `bug` planted until one fails; panics unless that comes within `within` seeds and from one
/// of `caught_by`. The seed that caught it.
fn caught_within(
    bug: engine::raft::PlantedBug,
    first: u64,
    within: u64,
    caught_by: &[engine::sim::Invariant],
    shape: impl Fn(&mut SimConfig),
) -> u64 {
    let caught = (first..first + within).find_map(|seed| {
        let mut cfg = SimConfig::random(seed, 1_500, 3, 2);
        shape(&mut cfg);
        cfg.plant = Some(bug);
        run_seed(cfg).err().map(|v| (seed - first + 1, v))
    });
    let (seeds, v) = caught.unwrap_or_else(|| panic!("{bug:?} survived {within} seeds"));
    assert!(caught_by.contains(&v.invariant), "{bug:?}: {v}");
    eprintln!(
        "{bug:?}: caught by {:?} at seed {} ({seeds} seeds)",
        v.invariant, v.seed
    );
    v.seed
}

/// Proof of teeth (docs/simulation.md, "Planted bugs"): each bug planted in every core breaks
/// an invariant within a few seeds of the reassignment batch (the disruption scenario for the
/// pre-vote bug), and the same seeds pass without it (the batches above).
#[test]
fn planted_bugs_are_caught() {
    use engine::raft::PlantedBug::*;
    use engine::sim::{run_disruption_planted, Invariant};
    // (bug, seeds allowed, invariants that may catch it)
    let cases: [(engine::raft::PlantedBug, u64, &[Invariant]); 3] = [
        (
            ChangeBeforeOwnEpochCommit,
            400,
            &[
                Invariant::OneUncommittedVoterRecord,
                Invariant::SingleLeader,
                Invariant::ConsistentCommittedData,
                Invariant::LeaderCompleteness,
                Invariant::AcknowledgedAppendKept,
                Invariant::MajorityReachedHighWatermark,
            ],
        ),
        (ApplyOnCommit, 20, &[Invariant::VoterSetFromLog]),
        (NoRevertOnTruncation, 600, &[Invariant::VoterSetFromLog]),
    ];
    for (bug, within, caught_by) in cases {
        caught_within(bug, 20_000_000, within, caught_by, |cfg| {
            cfg.reassign = true
        });
    }
    // The log start (docs/protocol.md, "Retention and the log start").
    let retention_cases: [(engine::raft::PlantedBug, u64, &[Invariant]); 2] = [
        (
            FetchBehindLogStartServed,
            100,
            &[Invariant::LogContract, Invariant::FatalOutput],
        ),
        (ResetLogVotesAtOnce, 400, &[Invariant::VoterSetFromLog]),
    ];
    for (bug, within, caught_by) in retention_cases {
        caught_within(bug, 30_000_000, within, caught_by, |cfg| {
            cfg.retention = true;
            cfg.reassign = true;
        });
    }
    // The replica's idempotence (docs/protocol.md, "Idempotent producers").
    let idempotence_cases: [(engine::raft::PlantedBug, u64, &[Invariant]); 3] = [
        (DuplicateAppended, 40, &[Invariant::IdempotentExactlyOnce]),
        (
            ProducerIdBlockOverlaps,
            40,
            &[Invariant::ProducerIdGrantedOnce],
        ),
        (
            DuplicateAnsweredEarly,
            400,
            &[Invariant::AcknowledgedAppendKept],
        ),
    ];
    for (bug, within, caught_by) in idempotence_cases {
        caught_within(bug, 50_000_000, within, caught_by, |cfg| {
            cfg.idempotent_producers = 2
        });
    }
    // Retention past the producer-state snapshot: caught once producers stall after a lost
    // acknowledgement, so that a retry comes after retention and a restart; the seeds before
    // the one that catches it are checked to pass without it.
    let stalled = |cfg: &mut SimConfig| {
        cfg.idempotent_producers = 2;
        cfg.retention = true;
        cfg.producer_stalls = true;
    };
    let first = 60_000_000;
    let caught = caught_within(
        RetentionPassesSnapshot,
        first,
        700,
        &[Invariant::IdempotentExactlyOnce],
        stalled,
    );
    for seed in first..caught {
        let mut cfg = SimConfig::random(seed, 1_500, 3, 2);
        stalled(&mut cfg);
        if let Err(v) = run_seed(cfg) {
            panic!("seed {seed} fails without the bug: {v}");
        }
    }
    // The leader lease (docs/consistency.md): without its check a deposed leader answers a
    // consumer with a high watermark behind a write its successor acknowledged; the seeds
    // before the one that catches it pass with it.
    // Rare in random runs (a deposed leader must meet a consumer while producers found its
    // successor: about one seed in 1,000), so the search starts near the seed found.
    let reads_checked = |cfg: &mut SimConfig| {
        cfg.tick_before_input = true;
        cfg.idempotent_producers = 2;
    };
    let first = 70_001_400;
    let caught = caught_within(
        LeaseIgnored,
        first,
        100,
        &[Invariant::ConsumerReadFresh],
        reads_checked,
    );
    for seed in first..caught {
        let mut cfg = SimConfig::random(seed, 1_500, 3, 2);
        reads_checked(&mut cfg);
        if let Err(v) = run_seed(cfg) {
            panic!("seed {seed} fails without the bug: {v}");
        }
    }
    let first = 9_000_000;
    let caught = (first..first + 60).find_map(|seed| {
        run_disruption_planted(seed, 3, PreVoteDespiteLiveLeader)
            .err()
            .map(|v| (seed - first + 1, v))
    });
    let (seeds, v) = caught.expect("PreVoteDespiteLiveLeader survived 60 disruption seeds");
    assert_eq!(v.invariant, Invariant::DisruptedHealthyLeader, "{v}");
    eprintln!(
        "PreVoteDespiteLiveLeader: caught by {:?} at seed {} ({seeds} seeds)",
        v.invariant, v.seed
    );
}
