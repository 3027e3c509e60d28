//! Replays every input the `core_step` fuzz target has crashed on (fuzz/regressions/core_step/,
//! one file per input) through the same harness, `engine::sim::run_script`: no panic, no broken
//! invariant, liveness after the final calm. See docs/simulation.md.

use std::path::{Path, PathBuf};

fn regression_inputs() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/regressions/core_step");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| entry.expect("directory entry").path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    files
}

/// None when the input runs clean; otherwise what went wrong.
fn failure(path: &Path) -> Option<String> {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    match std::panic::catch_unwind(|| engine::sim::run_script(&bytes)) {
        Ok(Ok(_)) => None,
        Ok(Err(violation)) => Some(violation.to_string()),
        Err(panic) => Some(format!("panic: {}", panic_message(&*panic))),
    }
}

fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = panic.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = panic.downcast_ref::<String>() {
        s.clone()
    } else {
        "(not a string)".to_owned()
    }
}

#[test]
fn every_fuzz_regression_input_runs_clean() {
    let inputs = regression_inputs();
    // An empty (or misplaced) directory must not pass for a clean run.
    assert!(!inputs.is_empty(), "no regression inputs found");
    let failures: Vec<String> = inputs
        .iter()
        .filter_map(|p| failure(p).map(|f| format!("{}:\n{f}", p.display())))
        .collect();
    assert!(
        failures.is_empty(),
        "{} of {} inputs fail:\n\n{}",
        failures.len(),
        inputs.len(),
        failures.join("\n\n")
    );
}
