//! Hostile runs scripted by a byte string: the harness of the `core_step` fuzz target and of
//! the inputs it found (`engine/tests/core_fuzz_regressions.rs`). See docs/simulation.md.
//!
//! The bytes choose the cluster (seed, voters, observers, bootstrap observers, random faults or
//! none), then a sequence of operations: run some simulation events, or have the liar send one
//! message, drawn from the bytes that follow, to one node. The simulator's invariants are
//! checked after every event and every injected message; at the end the final calm must bring
//! the cluster back (liveness), as in a seeded run. Same bytes, same run.

use super::liar::{ByteDraw, Draw};
use super::{SimConfig, Simulation, Summary, Violation};

/// Bounds on one input, so that every execution stays short (a few milliseconds).
const MAX_EVENTS: u64 = 20_000;
const MAX_LIES: u64 = 2_000;
/// The most events one "run" operation handles.
const MAX_RUN: usize = 256;

/// Runs the script in `bytes`; Err is the first broken invariant. A panic in the core is a
/// panic here (the fuzzer's crash).
pub fn run_script(bytes: &[u8]) -> Result<Summary, Box<Violation>> {
    run(&mut ByteDraw::new(bytes)).map_err(|mut v| {
        v.replay = "this input: cd fuzz && cargo fuzz run -s none core_step FILE, or add FILE to \
                    fuzz/regressions/core_step/ and run cargo test -p ringraft-engine --test \
                    core_fuzz_regressions"
            .to_owned();
        v
    })
}

fn run(d: &mut ByteDraw<'_>) -> Result<Summary, Box<Violation>> {
    let mut sim = Simulation::new(config(d))?;
    let mut lies = 0;
    while !d.is_empty() && sim.events() < MAX_EVENTS && lies < MAX_LIES {
        if d.pick(4) == 0 {
            let events = 1 + d.pick(MAX_RUN);
            run_events(&mut sim, events)?;
        } else {
            let target = d.pick(sim.node_count());
            sim.inject_drawn(target, d)?;
            lies += 1;
        }
    }
    let fault_events = sim.events();
    sim.check_liveness()?;
    sim.check_acknowledged()?;
    Ok(sim.summary(fault_events))
}

/// The cluster the script runs on. The script is the only liar: the random one is off.
fn config(d: &mut ByteDraw<'_>) -> SimConfig {
    let seed = d.bits();
    let voters = 1 + d.pick(5);
    let observers = d.pick(3);
    let mut cfg = SimConfig::random(seed, MAX_EVENTS, voters, observers);
    cfg.faults = d.pick(2) == 1;
    cfg.bootstrap_observers = d.pick(2) == 1;
    cfg.liar = false;
    cfg.trace_len = 60;
    cfg
}

fn run_events(sim: &mut Simulation, n: usize) -> Result<(), Box<Violation>> {
    for _ in 0..n {
        if !sim.step_event()? {
            break;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::run_script;

    #[test]
    fn empty_and_short_scripts_run_to_a_live_cluster() {
        for bytes in [&[][..], &[1, 2, 3][..], &[0; 64][..]] {
            let s = run_script(bytes).unwrap_or_else(|v| panic!("{v}"));
            assert!(s.commits >= 3, "the final calm commits: {s:?}");
        }
    }

    /// The run's outcome as text; a panic in the core counts as an outcome too, so this
    /// checks determinism whatever the core does with the input.
    fn outcome(bytes: &[u8]) -> String {
        match std::panic::catch_unwind(|| run_script(bytes)) {
            Ok(Ok(s)) => format!("{s:?}"),
            Ok(Err(v)) => v.to_string(),
            Err(_) => "panic".to_owned(),
        }
    }

    #[test]
    fn same_bytes_same_run() {
        let bytes: Vec<u8> = (0..300u32).map(|i| (i * 37 % 251) as u8).collect();
        assert_eq!(outcome(&bytes), outcome(&bytes));
    }
}
