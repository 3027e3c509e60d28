//! `ringraft-bench check` (docs/testing.md, "The correctness checker"): a short run under the
//! nemesis (as root, as CI runs: kill, pause, restart, partition, sever, isolate and
//! disk-full; without root the first three) must come out clean, with the history, the timeline and the verdict written and
//! consistent with each other; and a run with planted violations (a lost acknowledgement, a
//! changed read) must fail and name them. The checks themselves are unit tests on synthetic
//! histories (`cargo test -p ringraft-bench check_history`). Every run is bounded and must
//! leave no node, directory or namespace behind.

mod support;

use std::path::Path;
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use support::{processes_mentioning, ringraft_binary};

/// The checks the verdict must name, each once.
const CHECKS: [&str; 9] = [
    "lost",
    "unseen",
    "duplicated",
    "reordered",
    "skipped",
    "non-monotonic",
    "changed",
    "unexpected",
    "final-read",
];

/// Runs `ringraft-bench check` with `args`, its nodes' directories under `dir/tmp` (TMPDIR)
/// and its outputs in `dir`; bounded, killed past `timeout`. (status, stdout, stderr).
fn run_check(dir: &Path, args: &[&str], timeout: Duration) -> (ExitStatus, String, String) {
    let temp = dir.join("tmp");
    std::fs::create_dir_all(&temp).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_ringraft-bench"))
        .env("TMPDIR", &temp)
        .arg("check")
        .args(args)
        .arg("--history")
        .arg(dir.join("history.jsonl"))
        .arg("--svg")
        .arg(dir.join("timeline.svg"))
        .arg("--json")
        .arg(dir.join("verdict.json"))
        .arg("--ringraft-bin")
        .arg(ringraft_binary())
        .stdout(std::fs::File::create(dir.join("stdout")).unwrap())
        .stderr(std::fs::File::create(dir.join("stderr")).unwrap())
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id();
    let deadline = Instant::now() + timeout;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("ringraft-bench check did not end within {timeout:?}");
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let read = |name: &str| std::fs::read_to_string(dir.join(name)).unwrap_or_default();
    let (stdout, stderr) = (read("stdout"), read("stderr"));
    assert_nothing_left(&temp, pid);
    (status, stdout, stderr)
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
    if let Ok(namespaces) = Command::new("ip").args(["netns", "list"]).output() {
        let listed = String::from_utf8_lossy(&namespaces.stdout);
        let ours = format!("rrlab-{pid}-");
        assert!(!listed.contains(&ours), "namespaces were left: {listed}");
    }
}

fn verdict(dir: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(dir.join("verdict.json")).unwrap();
    serde_json::from_str::<serde_json::Value>(&text).unwrap()["verdict"].clone()
}

/// The violations of each check, by name, in the verdict's order.
fn violations(verdict: &serde_json::Value) -> Vec<(String, u64)> {
    verdict["checks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["name"].as_str().unwrap().to_string(),
                c["violations"].as_u64().unwrap(),
            )
        })
        .collect()
}

fn history(dir: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(dir.join("history.jsonl"))
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

/// A short run under every fault the machine allows: clean, and what it reports agrees with
/// the history it wrote.
#[test]
fn a_short_run_under_the_nemesis_is_clean() {
    let out = tempfile::tempdir().unwrap();
    let (status, stdout, stderr) = run_check(
        out.path(),
        &["--duration", "40", "--hold-max-ms", "2500"],
        Duration::from_secs(300),
    );
    assert!(status.success(), "{status}\n{stdout}\n{stderr}");
    assert!(stdout.contains("verdict: clean"), "{stdout}");
    let verdict = verdict(out.path());
    let found = violations(&verdict);
    assert_eq!(
        found.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>(),
        CHECKS
    );
    assert!(found.iter().all(|(_, v)| *v == 0), "{found:?}");
    for name in CHECKS {
        assert!(
            stdout.contains(&format!("{name:<14} ok")),
            "{name}: {stdout}"
        );
    }

    // The verdict's counts are the history's.
    let events = history(out.path());
    let of = |kind: &str| events.iter().filter(|e| e["type"] == kind).count() as u64;
    let counts = &verdict["counts"];
    assert_eq!(counts["acknowledged"], of("ack"));
    assert_eq!(counts["sends"], of("send"));
    assert_eq!(counts["reads"], of("read"));
    assert_eq!(counts["faults"], of("fault-start"));
    assert_eq!(of("fault-start"), of("fault-end"), "every fault undone");
    assert_eq!(of("final"), 1);
    assert_eq!(counts["planted"], 0);
    assert!(of("fault-start") > 0 && of("leader") > 0);
    // Both kinds of producer were acknowledged, and the consumers read.
    for idempotent in [false, true] {
        let producers: std::collections::HashSet<u64> = events
            .iter()
            .filter(|e| e["type"] == "send" && e["idempotent"] == idempotent)
            .map(|e| e["producer"].as_u64().unwrap())
            .collect();
        assert!(
            events
                .iter()
                .any(|e| e["type"] == "ack" && producers.contains(&e["producer"].as_u64().unwrap())),
            "no acknowledgement for an idempotent={idempotent} producer"
        );
    }
    assert!(counts["records_read"].as_u64().unwrap() > 0);
    // Every acknowledged record is below the final high watermark and in the final read.
    let final_hw = counts["final_high_watermark"].as_i64().unwrap();
    assert!(events
        .iter()
        .filter(|e| e["type"] == "ack")
        .all(|e| e["offset"].as_i64().unwrap() < final_hw));
    assert!(counts["final_records"].as_u64().unwrap() >= of("ack"));

    let svg = std::fs::read_to_string(out.path().join("timeline.svg")).unwrap();
    assert!(svg.starts_with("<svg") && svg.contains("verdict: clean"));
    assert!(svg.contains(">leader<") && svg.contains("records acknowledged per second"));

    // The same history checked again on its own: the same verdict.
    let again = out.path().join("again");
    std::fs::create_dir(&again).unwrap();
    let history = out.path().join("history.jsonl");
    let (status, stdout, _) = run_check(
        &again,
        &["--history-in", history.to_str().unwrap()],
        Duration::from_secs(60),
    );
    assert!(status.success(), "{stdout}");
    assert_eq!(crate::verdict(&again), verdict);
}

/// Planted violations in a real run's history are reported, each by its check, and fail the
/// run: a producer claiming an acknowledgement that never happened (lost, unseen), a consumer
/// shown a record that was never committed at an offset it read (changed).
#[test]
fn planted_violations_are_reported() {
    let out = tempfile::tempdir().unwrap();
    let (status, stdout, stderr) = run_check(
        out.path(),
        &[
            "--duration",
            "5",
            "--faults",
            "pause",
            "--plant",
            "lost-ack,changed-read",
        ],
        Duration::from_secs(240),
    );
    assert_eq!(status.code(), Some(1), "{status}\n{stdout}\n{stderr}");
    assert!(stderr.contains("violations"), "{stderr}");
    let verdict = verdict(out.path());
    let found = violations(&verdict);
    let count = |name: &str| found.iter().find(|(n, _)| n == name).unwrap().1;
    assert_eq!(count("lost"), 1, "{found:?}");
    assert_eq!(count("unseen"), 1, "{found:?}");
    // One changed read can be found more than once: each later read of that offset, and the
    // final read, disagree with it.
    assert!(count("changed") >= 1, "{found:?}");
    for name in [
        "duplicated",
        "skipped",
        "non-monotonic",
        "unexpected",
        "final-read",
    ] {
        assert_eq!(count(name), 0, "{name}: {found:?}");
    }
    assert_eq!(verdict["counts"]["planted"], 2);
    assert!(stdout.contains("lost           FAIL"), "{stdout}");
    assert!(stdout.contains("changed        FAIL"), "{stdout}");

    // The written history says what was planted, and checked again it fails the same way.
    let planted: Vec<String> = history(out.path())
        .iter()
        .filter(|e| e["type"] == "planted")
        .map(|e| e["what"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(planted.len(), 2, "{planted:?}");
    assert!(planted[0].starts_with("lost-ack") && planted[1].starts_with("changed-read"));
    let again = out.path().join("again");
    std::fs::create_dir(&again).unwrap();
    let history = out.path().join("history.jsonl");
    let (status, stdout, _) = run_check(
        &again,
        &["--history-in", history.to_str().unwrap()],
        Duration::from_secs(60),
    );
    assert_eq!(status.code(), Some(1), "{stdout}");
    assert_eq!(violations(&crate::verdict(&again)), found);
}
