//! Smoke test of the default benchmark: `ringraft-bench cluster` starts 3 real nodes, drives a
//! short load, writes the JSON report and leaves no node behind.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The `ringraft` binary next to `ringraft-bench`, (re)built here: cargo builds only this
/// package's binaries for its tests, and a stale one must not be measured.
fn ringraft_binary() -> PathBuf {
    let bench = Path::new(env!("CARGO_BIN_EXE_ringraft-bench"));
    let ringraft = bench.with_file_name("ringraft");
    let status = Command::new(env!("CARGO"))
        .args(["build", "-p", "ringraft-tools", "--bin", "ringraft"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .status()
        .expect("cargo runs");
    assert!(status.success(), "building ringraft failed");
    assert!(ringraft.is_file(), "{} missing", ringraft.display());
    ringraft
}

/// Pids of live processes whose command line mentions `needle`.
fn processes_mentioning(needle: &str) -> Vec<u32> {
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

#[test]
fn default_benchmark_runs_a_three_node_cluster_and_cleans_up() {
    let ringraft = ringraft_binary();
    let out = tempfile::tempdir().unwrap();
    let json = out.path().join("report.json");
    let mut child = Command::new(env!("CARGO_BIN_EXE_ringraft-bench"))
        .args(["--duration", "2", "--warmup", "0", "--connections", "4"])
        .arg("--ringraft-bin")
        .arg(&ringraft)
        .arg("--json")
        .arg(&json)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(120);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("ringraft-bench did not finish within 120 s");
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let stdout = std::io::read_to_string(child.stdout.take().unwrap()).unwrap();
    assert!(
        status.success(),
        "ringraft-bench failed: {status}\n{stdout}"
    );
    assert!(
        stdout.contains("acks=-1"),
        "summary lacks the durability mode:\n{stdout}"
    );

    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert!(report["records_per_sec"].as_f64().unwrap() > 0.0);
    assert!(report["mb_per_sec"].as_f64().unwrap() > 0.0);
    for key in ["p50", "p99", "p999", "max"] {
        assert!(
            report["commit_latency_us"][key].as_u64().unwrap() > 0,
            "commit_latency_us.{key}"
        );
    }
    assert_eq!(report["replication_factor"], 3);
    assert_eq!(report["acks"], -1);
    assert_eq!(report["fsync"], true);
    assert_eq!(report["connections"], 4);
    assert_eq!(report["interrupted"], false);
    let exits = report["node_exits"].as_array().unwrap();
    assert_eq!(exits.len(), 3);
    assert!(exits
        .iter()
        .all(|e| e.as_str().unwrap().ends_with("exit status: 0")));
    // The nodes ran from a config under a directory named ringraft-bench-*; none is left.
    assert!(
        processes_mentioning("ringraft-bench-")
            .iter()
            .all(|pid| *pid == std::process::id()),
        "a node started by ringraft-bench survived"
    );
}
