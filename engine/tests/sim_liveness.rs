//! Liveness as named properties of the simulator, with fixed seeds (docs/simulation.md,
//! "Liveness properties"): a regression fails one of these tests, naming what broke, in
//! seconds, instead of making a run hang.
//!
//! Two of the properties are invariants every simulated run checks (so the fixed batch of
//! `sim_seeds` checks them too): `FetchAnsweredByDeadline` and `ElectionsAfterFaultsBounded`.

use engine::raft::{NodeId, Role};
use engine::sim::{run_seed, SimConfig, Simulation, Violation};

fn ok<T>(r: Result<T, Box<Violation>>) -> T {
    r.unwrap_or_else(|v| panic!("{v}"))
}

fn wait_leader(sim: &mut Simulation, ms: u64) -> (NodeId, i32) {
    let found = ok(sim.run_until(ms, |s| {
        s.current_leader()
            .is_some_and(|(l, _)| s.high_watermark(l).is_some())
    }));
    assert!(found, "no leader with a high watermark within {ms} ms");
    sim.current_leader().expect("found")
}

fn wait_acks(sim: &mut Simulation, n: usize, ms: u64) {
    let target = sim.acked() + n;
    let done = ok(sim.run_until(ms, |s| s.acked() >= target));
    assert!(done, "only {} of {target} acks within {ms} ms", sim.acked());
}

/// A healthy cluster with no faults (a client appending, consumers reading, the network's
/// ordinary latency with its rare long tail) holds no election and raises no epoch over a
/// quiet minute once it has a leader. The cores are ticked before every input, as the node's
/// runtime ticks them (docs/simulation.md, "The core's clock"), and as the disruption scenario
/// does: with the default clock a follower handles fetch answers at the time of its last tick,
/// so its fetch timer can fire while the leader still answers, which no real node does. (Seed
/// 8100003 met that artifact once voter records started binding directories; it holds no
/// election with the node's clocking.)
#[test]
fn a_healthy_cluster_holds_no_election_over_a_quiet_minute() {
    for (voters, observers, seeds) in [(3, 1, 0..4u64), (5, 2, 10..13)] {
        for seed in seeds {
            let mut cfg = SimConfig::scripted(8_100_000 + seed, voters, observers);
            cfg.tick_before_input = true;
            let mut sim = ok(Simulation::new(cfg));
            let (leader, epoch) = wait_leader(&mut sim, 10_000);
            wait_acks(&mut sim, 5, 10_000);
            let (elections, max_epoch, acked) = (sim.elections(), sim.max_epoch(), sim.acked());
            ok(sim.run_for(60_000));
            assert_eq!(
                (sim.elections(), sim.max_epoch(), sim.current_leader()),
                (elections, max_epoch, Some((leader, epoch))),
                "seed {seed}, {voters} voters: an election in a quiet minute"
            );
            assert!(sim.acked() > acked + 100, "the client kept committing");
            ok(sim.check_liveness());
        }
    }
}

/// Several lagging replicas (two voters and two observers of a 5-voter cluster, back from a
/// stop, far behind the tail cache) read the leader's log at once; every fetch is answered by
/// its deadline (the `FetchAnsweredByDeadline` invariant, checked on every fetch) and they
/// catch up. The cores are ticked before every input, as the node runtime ticks them: with the
/// default clock, seed 8200000 (once the leader announced itself to the stopped voters, which
/// changed the run's timings) had a follower's fetch timer fire while the leader answered it,
/// and the two restarted voters, which had heard of no leader yet, granted its pre-vote.
#[test]
fn every_fetch_is_answered_by_its_deadline_with_several_lagging_replicas() {
    for seed in 0..3u64 {
        let mut cfg = SimConfig::scripted(8_200_000 + seed, 5, 2);
        cfg.tick_before_input = true;
        let mut sim = ok(Simulation::new(cfg));
        let (leader, _) = wait_leader(&mut sim, 10_000);
        wait_acks(&mut sim, 5, 10_000);
        let mut lagging: Vec<usize> = (0..5).filter(|&n| n != leader as usize).collect();
        lagging.truncate(2);
        lagging.extend([5, 6]);
        for &n in &lagging {
            sim.kill(n);
        }
        // Far more than the leader's tail cache (8 KiB) holds: they must read the log.
        wait_acks(&mut sim, 300, 30_000);
        for &n in &lagging {
            ok(sim.restart(n));
        }
        let target = sim.committed_end();
        let caught_up = ok(sim.run_until(15_000, |s| {
            lagging
                .iter()
                .all(|&n| s.high_watermark(n as NodeId).is_some_and(|hw| hw >= target))
        }));
        assert!(caught_up, "seed {seed}: the lagging replicas catch up");
        assert!(
            sim.max_concurrent_reads() >= 2,
            "seed {seed}: the reads never overlapped ({})",
            sim.max_concurrent_reads()
        );
        assert_eq!(sim.role(leader), Some(Role::Leader));
        ok(sim.check_liveness());
    }
}

/// After faults stop, the cluster is live again within a bounded number of elections (the
/// `ElectionsAfterFaultsBounded` invariant, checked at the end of every random run): seeds of
/// every cluster shape, with and without pre-vote.
#[test]
fn elections_after_faults_stop_are_bounded() {
    let mut worst = (0, 0);
    for (voters, observers, pre_vote, first) in [
        (3, 1, true, 8_300_000u64),
        (5, 1, true, 8_310_000),
        (3, 1, false, 8_320_000),
    ] {
        for seed in first..first + 60 {
            let mut cfg = SimConfig::random(seed, 1_500, voters, observers);
            cfg.pre_vote = pre_vote;
            let s = ok(run_seed(cfg));
            worst = (worst.0.max(s.final_elections), worst.1.max(s.final_epochs));
        }
    }
    eprintln!("most elections, epochs after faults stopped: {worst:?}");
}
