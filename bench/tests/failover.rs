//! `ringraft-bench failover`: one cycle of every fault kind on a cluster in network
//! namespaces (root, as CI runs, as tools/tests/partition.rs needs), and a run interrupted with
//! Ctrl-C. The report must be complete and consistent and every acknowledged record in every
//! voter's log; no figure is held to a target (the machine is shared). Every run is bounded,
//! and must leave no node, node directory or namespace behind.

mod support;

use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use support::{processes_mentioning, ringraft_binary};

const KINDS: [&str; 5] = [
    "kill",
    "stop",
    "partition",
    "follower-restart",
    "follower-partition",
];
const LEADER_KINDS: [&str; 3] = ["kill", "stop", "partition"];

/// `ringraft-bench failover` with `args`, its nodes' directories under `temp` (TMPDIR) and its
/// stdout and stderr in files there.
fn spawn_bench(temp: &Path, args: &[&str]) -> Child {
    Command::new(env!("CARGO_BIN_EXE_ringraft-bench"))
        .env("TMPDIR", temp)
        .arg("failover")
        .args(args)
        .arg("--ringraft-bin")
        .arg(ringraft_binary())
        .stdout(std::fs::File::create(temp.join("../stdout")).unwrap())
        .stderr(std::fs::File::create(temp.join("../stderr")).unwrap())
        .spawn()
        .unwrap()
}

/// Waits (at most `timeout`) for `child` to exit; kills it and panics past that.
fn wait_exit(child: &mut Child, timeout: Duration) -> ExitStatus {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("ringraft-bench failover did not end within {timeout:?}");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Nothing of the run `pid` is left: no process started from a config under `temp`, no
/// directory there, no namespace of its lab.
fn assert_nothing_left(temp: &Path, pid: u32) {
    let temp_text = temp.to_str().unwrap();
    assert!(
        processes_mentioning(temp_text).is_empty(),
        "a node started by ringraft-bench survived"
    );
    assert_eq!(
        std::fs::read_dir(temp).unwrap().count(),
        0,
        "the nodes' directory was not removed"
    );
    let namespaces = Command::new("ip").args(["netns", "list"]).output().unwrap();
    let listed = String::from_utf8_lossy(&namespaces.stdout);
    let ours = format!("rrlab-{pid}-");
    assert!(
        !listed.contains(&ours),
        "namespaces of the run were left: {listed}"
    );
}

fn read(dir: &Path, name: &str) -> String {
    std::fs::read_to_string(dir.join(name)).unwrap_or_default()
}

/// One cycle of each kind: every cycle measured, the summaries agree with the cycles and
/// with the CSV, and each voter's log holds every acknowledged record once, at its offset.
#[test]
fn every_fault_kind_is_measured_and_no_acknowledged_record_is_lost() {
    let out = tempfile::tempdir().unwrap();
    let temp = out.path().join("tmp");
    std::fs::create_dir(&temp).unwrap();
    let (json, csv) = (
        out.path().join("report.json"),
        out.path().join("cycles.csv"),
    );
    // One cycle of each kind keeps the test at CI size; the figures come from the bench's own
    // runs (docs/benchmarks.md, "Failover").
    let cycles = 1usize;
    let mut child = spawn_bench(
        &temp,
        &[
            "--cycles",
            "1",
            "--faults",
            &KINDS.join(","),
            "--hold-ms",
            "1500",
            "--calm-ms",
            "500",
            "--json",
            json.to_str().unwrap(),
            "--csv",
            csv.to_str().unwrap(),
        ],
    );
    let pid = child.id();
    let status = wait_exit(&mut child, Duration::from_secs(600));
    let (stdout, stderr) = (read(out.path(), "stdout"), read(out.path(), "stderr"));
    assert!(status.success(), "{status}\n{stdout}\n{stderr}");
    assert_nothing_left(&temp, pid);
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(
        report["namespaces"], true,
        "partitions asked for, as root: the nodes ran in namespaces"
    );

    let all = report["cycles"].as_array().unwrap();
    assert_eq!(all.len(), cycles * KINDS.len(), "{stdout}");
    for (i, cycle) in all.iter().enumerate() {
        // The kinds take turns, numbered from 1.
        assert_eq!(cycle["cycle"], i + 1, "{cycle}");
        let kind = cycle["kind"].as_str().unwrap();
        assert_eq!(kind, KINDS[i % KINDS.len()], "{cycle}");
        let f = |key: &str| cycle[key].as_f64().unwrap();
        assert!(
            f("unavailable_ms") > 0.0,
            "every cycle got acknowledgements again: {cycle}"
        );
        assert!(f("longest_gap_ms") >= f("unavailable_ms"), "{cycle}");
        assert!(f("held_ms") > 0.0 && f("settle_ms") >= 500.0, "{cycle}");
        let e = |key: &str| cycle[key].as_i64().unwrap();
        assert!(
            e("epoch_before") <= e("epoch_at_undo") && e("epoch_at_undo") <= e("epoch_end"),
            "{cycle}"
        );
        assert_eq!(
            e("elections_during") + e("elections_after_undo"),
            e("epoch_end") - e("epoch_before"),
            "{cycle}"
        );
        if LEADER_KINDS.contains(&kind) {
            // Another node acknowledged after the fault: it was elected in a later epoch.
            assert!(e("elections_during") >= 1, "{cycle}");
        }
        assert!((1..=3).contains(&e("node")) && (1..=3).contains(&e("leader_end")));
    }

    let kinds = report["kinds"].as_array().unwrap();
    assert_eq!(kinds.len(), KINDS.len());
    for (kind, summary) in KINDS.iter().zip(kinds) {
        assert_eq!(summary["kind"], *kind);
        assert_eq!(summary["cycles"], cycles);
        let of_kind: Vec<&serde_json::Value> = all.iter().filter(|c| c["kind"] == *kind).collect();
        for (figure, key) in [
            ("unavailable", "unavailable_ms"),
            ("longest_gap", "longest_gap_ms"),
        ] {
            let s = &summary[figure];
            assert_eq!(s["count"], cycles, "{summary}");
            let (p50, p99, max) = (
                s["p50_ms"].as_f64().unwrap(),
                s["p99_ms"].as_f64().unwrap(),
                s["max_ms"].as_f64().unwrap(),
            );
            assert!(p50 <= p99 && p99 <= max, "{summary}");
            let cycle_max = of_kind
                .iter()
                .map(|c| c[key].as_f64().unwrap())
                .fold(f64::MIN, f64::max);
            assert_eq!(max, cycle_max, "{summary}");
        }
        let sum = |key: &str| {
            of_kind
                .iter()
                .map(|c| c[key].as_i64().unwrap())
                .sum::<i64>()
        };
        assert_eq!(summary["elections_during"], sum("elections_during"));
        assert_eq!(summary["elections_after_undo"], sum("elections_after_undo"));
    }

    // Every voter's log against every acknowledged record.
    let acknowledged = report["acknowledged"].as_u64().unwrap();
    assert!(acknowledged > 0);
    assert_eq!(report["client"]["acknowledged"], acknowledged);
    let read_back = report["read_back"].as_array().unwrap();
    assert_eq!(read_back.len(), 3);
    for entry in read_back {
        let r = &entry[1];
        assert_eq!(r["found"], acknowledged, "{entry}");
        assert_eq!(
            (r["missing"].as_u64(), r["misplaced"].as_u64()),
            (Some(0), Some(0))
        );
    }
    // A killed leader's connection closes: the client noticed at least one that way.
    assert!(
        report["client"]["closed"].as_u64().unwrap() >= 1,
        "{}",
        report["client"]
    );
    let exits = report["node_exits"].as_array().unwrap();
    assert_eq!(exits.len(), 3);
    assert!(exits
        .iter()
        .all(|e| e.as_str().unwrap().ends_with("exit status: 0")));

    // The CSV: a header and one row per cycle, as in the JSON.
    let csv = std::fs::read_to_string(&csv).unwrap();
    let rows: Vec<&str> = csv.lines().collect();
    assert!(rows[0].starts_with("cycle,kind,node,fault_at_sec,unavailable_ms,"));
    assert_eq!(rows.len(), 1 + all.len());
    for (row, cycle) in rows[1..].iter().zip(all) {
        let fields: Vec<&str> = row.split(',').collect();
        assert_eq!(fields[1], cycle["kind"].as_str().unwrap(), "{row}");
        let unavailable: f64 = fields[4].parse().unwrap();
        assert!((unavailable - cycle["unavailable_ms"].as_f64().unwrap()).abs() <= 0.05);
    }
    for kind in KINDS {
        assert!(
            stdout
                .lines()
                .any(|l| l.starts_with(&format!("{kind:<18} {cycles:>6}"))),
            "{kind}: {stdout}"
        );
    }
}

/// Ctrl-C during a fault's cycle: the run ends with an error, and the nodes (a stopped one
/// among them, perhaps) and the namespaces are gone.
#[test]
fn an_interrupted_run_leaves_nothing_behind() {
    let out = tempfile::tempdir().unwrap();
    let temp = out.path().join("tmp");
    std::fs::create_dir(&temp).unwrap();
    let mut child = spawn_bench(
        &temp,
        &[
            "--cycles",
            "50",
            "--faults",
            "stop,partition",
            "--calm-ms",
            "500",
        ],
    );
    let pid = child.id();
    // Interrupted once the first cycle is done (bounded), that is during the second (a
    // partition) or the settling before it.
    let deadline = Instant::now() + Duration::from_secs(240);
    while !read(out.path(), "stdout")
        .lines()
        .any(|l| l.trim_start().starts_with("1 stop"))
    {
        assert!(
            child.try_wait().unwrap().is_none(),
            "{}\n{}",
            read(out.path(), "stdout"),
            read(out.path(), "stderr")
        );
        assert!(Instant::now() < deadline, "no cycle within 240 s");
        std::thread::sleep(Duration::from_millis(100));
    }
    // SAFETY: a plain syscall to our own, not yet reaped, child.
    unsafe { libc::kill(pid as libc::pid_t, libc::SIGINT) };
    let status = wait_exit(&mut child, Duration::from_secs(120));
    let stderr = read(out.path(), "stderr");
    assert!(!status.success(), "{status}");
    assert!(stderr.contains("interrupted"), "{stderr}");
    assert_nothing_left(&temp, pid);
}

/// A fault kind that does not exist is refused before anything starts.
#[test]
fn an_unknown_fault_kind_is_refused() {
    let output = Command::new(env!("CARGO_BIN_EXE_ringraft-bench"))
        .args(["failover", "--faults", "kill,reboot"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("unknown fault kind \"reboot\"") && stderr.contains("follower-partition"),
        "{stderr}"
    );
}
