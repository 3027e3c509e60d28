//! What the process tests of `ringraft-bench` share: the `ringraft` binary they start, and a
//! look for processes a run left behind.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The `ringraft` binary next to `ringraft-bench`. cargo builds only this package's binaries
/// for its tests, and a stale `ringraft` must not be measured: unless the one there is newer
/// than every source it is built from, it is built here (with the test profile these tests are
/// built with). `cargo test --workspace` has just built it for the tools' process tests, so
/// there it is used as it is: a second build cost CI 75 s with the dev profile, 117 s with this.
pub fn ringraft_binary() -> PathBuf {
    let bench = Path::new(env!("CARGO_BIN_EXE_ringraft-bench"));
    let ringraft = bench.with_file_name("ringraft");
    if is_newer_than_its_sources(&ringraft) {
        return ringraft;
    }
    let status = Command::new(env!("CARGO"))
        .args([
            "build",
            "--profile",
            "test",
            "-p",
            "ringraft-tools",
            "--bin",
            "ringraft",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .status()
        .expect("cargo runs");
    assert!(status.success(), "building ringraft failed");
    assert!(ringraft.is_file(), "{} missing", ringraft.display());
    ringraft
}

/// Whether `binary` exists and was written after every file of the crates `ringraft` is built
/// from (tools, net, engine, cli-out) and the workspace's manifest and lock file.
fn is_newer_than_its_sources(binary: &Path) -> bool {
    let Ok(built) = std::fs::metadata(binary).and_then(|m| m.modified()) else {
        return false;
    };
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let mut pending: Vec<PathBuf> = ["tools", "net", "engine", "cli-out"]
        .iter()
        .map(|crate_dir| workspace.join(crate_dir))
        .chain(
            ["Cargo.toml", "Cargo.lock"]
                .iter()
                .map(|f| workspace.join(f)),
        )
        .collect();
    // Bounded: the walk visits each entry of four crates once.
    while let Some(path) = pending.pop() {
        // Not following symlinks: each entry is visited once, whatever links there are.
        let Ok(meta) = std::fs::symlink_metadata(&path) else {
            return false;
        };
        if meta.is_dir() {
            let Ok(entries) = std::fs::read_dir(&path) else {
                return false;
            };
            pending.extend(entries.flatten().map(|e| e.path()));
        } else if meta.modified().map_or(true, |m| m > built) {
            return false;
        }
    }
    true
}

/// Pids of live processes whose command line mentions `needle`.
pub fn processes_mentioning(needle: &str) -> Vec<u32> {
    let mut pids = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        if String::from_utf8_lossy(&cmdline).contains(needle) {
            pids.push(pid);
        }
    }
    pids
}
