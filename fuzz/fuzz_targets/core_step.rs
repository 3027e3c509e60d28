//! Arbitrary bytes into the Raft core itself: a small simulated cluster of real `RaftCore`s,
//! driven by a script of ordinary simulation events interleaved with well-formed hostile
//! messages from a liar outside the cluster, every value and target drawn from the bytes
//! (`engine::sim::run_script`, docs/simulation.md). Nothing may panic, no safety invariant may
//! break after any step, and the cluster must elect and commit again once the script ends.
//!
//! A crash found here belongs in `fuzz/regressions/core_step/`, which
//! `cargo test -p ringraft-engine --test core_fuzz_regressions` replays.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Err(violation) = engine::sim::run_script(data) {
        panic!("{violation}");
    }
});
