//! Process tests of the command-line tools' output into a closed pipe (docs/operations.md,
//! "Output into a closed pipe"): `ringraft ... | head -1` must end the command quietly with
//! status 141, never with a panic ("failed printing to stdout: Broken pipe", status 101).
//! Every wait is bounded and every process is killed when its guard drops.

mod support;

use std::io::{BufRead, BufReader, Read};
use std::os::fd::{FromRawFd, OwnedFd};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use support::*;

const TIMEOUT: Duration = Duration::from_secs(20);
/// The status of a command whose stdout was closed under it (docs/operations.md).
const CLOSED_STATUS: i32 = 141;

/// A pipe whose read end is already closed: the first write to the other end fails (EPIPE).
fn pipe_without_reader() -> Stdio {
    let mut fds = [0; 2];
    // SAFETY: plain syscall filling two descriptors we then own.
    assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
    // SAFETY: both descriptors were just created and are owned by nobody else.
    let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    drop(read);
    Stdio::from(write)
}

fn ringraft_sim() -> &'static str {
    env!("CARGO_BIN_EXE_ringraft-sim")
}

/// Waits (bounded) for the command, then checks it exited with [`CLOSED_STATUS`] and wrote
/// nothing to stderr (no panic message, no error).
fn assert_quiet_closed_exit(mut guard: ProcessGuard, what: &str) {
    let status = guard
        .wait_exit(TIMEOUT)
        .unwrap_or_else(|| panic!("{what}: still running {TIMEOUT:?} after its stdout closed"));
    let stderr = read_stderr(&mut guard);
    assert!(
        !stderr.contains("panicked") && !stderr.contains("Broken pipe"),
        "{what}: {stderr}"
    );
    assert_eq!(
        status.code(),
        Some(CLOSED_STATUS),
        "{what}: {status}; {stderr}"
    );
    assert!(stderr.is_empty(), "{what} wrote to stderr: {stderr}");
}

/// Runs `program args` with stdout a pipe without reader.
fn run_into_closed_pipe(program: &str, args: &[&str]) -> ProcessGuard {
    ProcessGuard {
        child: Command::new(program)
            .args(args)
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(pipe_without_reader())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    }
}

/// Runs `program args` with stdout piped, reads its first line, then closes the pipe (what
/// `| head -1` does). Returns the guard and the line.
fn run_and_close_after_one_line(program: &str, args: &[&str]) -> (ProcessGuard, String) {
    let mut child = Command::new(program)
        .args(args)
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut reader = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    reader.read_line(&mut line).unwrap();
    drop(reader);
    (ProcessGuard { child }, line)
}

/// A stopped node's log directory holding `batches` one-record batches (written with the log's
/// own append), so `dump-log` prints far more than a pipe buffer holds.
fn write_log(dir: &Path, batches: i64) {
    std::fs::create_dir_all(dir).unwrap();
    let config = engine::log::LogConfig {
        preallocate: false,
        ..Default::default()
    };
    let mut log = engine::log::Log::open(dir, config).unwrap();
    let all: Vec<bytes::Bytes> = (0..batches)
        .map(|offset| {
            let mut builder = engine::record::RecordBatchBuilder::new(offset, 1);
            builder.append(0, None, Some(b"a value to dump"), &[]);
            builder.build().freeze()
        })
        .collect();
    assert_eq!(log.append(&all).unwrap(), batches);
}

#[test]
fn dump_log_and_the_simulator_end_quietly_when_stdout_closes() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("log");
    // About 90 bytes a line: 3000 lines are four times a 64 KiB pipe buffer.
    write_log(&dir, 3000);
    let dir = dir.to_str().unwrap();

    let (guard, first) = run_and_close_after_one_line(binary(), &["dump-log", dir]);
    assert!(first.starts_with("log "), "first line {first:?}");
    assert_quiet_closed_exit(guard, "dump-log | head -1");
    assert_quiet_closed_exit(
        run_into_closed_pipe(binary(), &["dump-log", dir]),
        "dump-log > closed pipe",
    );

    let sim_args = ["--seeds", "3000", "--events", "50", "--verbose"];
    let (guard, first) = run_and_close_after_one_line(ringraft_sim(), &sim_args);
    assert!(first.starts_with("seed 0: "), "first line {first:?}");
    assert_quiet_closed_exit(guard, "ringraft-sim | head -1");
    assert_quiet_closed_exit(
        run_into_closed_pipe(ringraft_sim(), &sim_args),
        "ringraft-sim > closed pipe",
    );

    // clap's own output (help, version) follows the same rule.
    for args in [&["--help"][..], &["--version"], &["dump-log", "--help"]] {
        assert_quiet_closed_exit(
            run_into_closed_pipe(binary(), args),
            &format!("ringraft {args:?} > closed pipe"),
        );
    }
    assert_quiet_closed_exit(
        run_into_closed_pipe(ringraft_sim(), &["--help"]),
        "ringraft-sim --help > closed pipe",
    );
}

#[test]
fn quorum_describe_and_quorum_state_end_quietly_when_stdout_closes() {
    let (mut cluster, leader) = Cluster::started(1);
    let server = cluster.addr(leader).to_string();
    for json in [false, true] {
        let mut args = vec!["quorum", "--bootstrap-server", &server, "--describe"];
        if json {
            args.push("--json");
        }
        // Its output (two lines, or one JSON line) fits in the pipe buffer, so `| head -1` may
        // well read it all before closing: the write that must fail is the first one.
        assert_quiet_closed_exit(
            run_into_closed_pipe(binary(), &args),
            &format!("{args:?} > closed pipe"),
        );
        let (mut guard, first) = run_and_close_after_one_line(binary(), &args);
        assert!(!first.is_empty(), "{args:?}: no output");
        let status = guard.wait_exit(TIMEOUT).expect("quorum --describe exits");
        let stderr = read_stderr(&mut guard);
        assert!(
            matches!(status.code(), Some(0) | Some(CLOSED_STATUS)) && stderr.is_empty(),
            "{args:?} | head -1: {status}; {stderr}"
        );
    }
    cluster.stop_all_cleanly();
    let dir = cluster.node(1).dir.to_str().unwrap().to_string();
    assert_quiet_closed_exit(
        run_into_closed_pipe(binary(), &["quorum-state", "--dir", &dir]),
        "quorum-state > closed pipe",
    );
    // And with a reader, quorum-state prints the state (the recovery tests read it in detail).
    let output = Command::new(binary())
        .args(["quorum-state", "--dir", &dir])
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    let mut text = String::new();
    output.stdout.as_slice().read_to_string(&mut text).unwrap();
    assert!(text.contains("last batch epoch"), "{text}");
}
