//! The real Kafka clients the process tests drive (docs/clients.md): Debian's `kcat` on the PATH
//! and the Python clients in the venv at `target/venv`, both installed by
//! `.ci/install-clients.sh`. A missing client fails the test with that hint; it never skips.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

pub const INSTALL_HINT: &str = "run .ci/install-clients.sh (README.md's test command does)";

pub fn workspace() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap()
}

pub fn venv_python() -> PathBuf {
    let python = workspace().join("target/venv/bin/python");
    assert!(
        python.exists(),
        "{} is missing: {INSTALL_HINT}",
        python.display()
    );
    python
}

pub fn kcat() -> PathBuf {
    let found = std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .map(|dir| dir.join("kcat"))
        .find(|path| path.is_file());
    found.unwrap_or_else(|| panic!("kcat is not on the PATH: {INSTALL_HINT}"))
}

/// kcat's arguments (after any security settings) for partition 0 of `__cluster_metadata` at
/// `servers` in `mode` (-P or -C), then `more`.
fn kcat_partition_args<'a>(mode: &'a str, servers: &'a str, more: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec![mode, "-b", servers, "-t", "__cluster_metadata", "-p", "0"];
    args.extend_from_slice(more);
    args
}

/// kcat's arguments that produce to the partition with acks=all, a record per line of its
/// standard input.
pub fn kcat_produce_args(servers: &str) -> Vec<&str> {
    kcat_partition_args("-P", servers, &["-X", "acks=all"])
}

/// kcat's arguments that read the partition from its start to its end (`-e`), a line
/// `offset value` per record.
pub fn kcat_consume_args(servers: &str) -> Vec<&str> {
    kcat_partition_args("-C", servers, &["-o", "beginning", "-e", "-f", "%o %s\\n"])
}

/// A script beside the client tests (`tools/tests/clients/NAME`).
pub fn script(name: &str) -> PathBuf {
    workspace().join("tools/tests/clients").join(name)
}

/// `program args` under coreutils `timeout`: SIGTERM after `limit`, SIGKILL 5 s later, so a
/// hung client ends the run instead of the test. `stdin` is written to the program's standard
/// input (then closed). Returns how it exited and everything it printed.
pub fn run_bounded(program: &Path, args: &[&str], stdin: &[u8], limit: Duration) -> Output {
    use std::io::Write;
    let mut child = Command::new("timeout")
        .arg("--kill-after=5")
        .arg(format!("{}", limit.as_secs().max(1)))
        .arg(program)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("timeout {}: {e}", program.display()));
    let mut input = child.stdin.take().unwrap();
    // A client that exits before reading everything closes the pipe: not this run's error.
    let _ = input.write_all(stdin);
    drop(input);
    child.wait_with_output().unwrap()
}

/// What a consumer read, checked against what a producer had acknowledged, both as (offset,
/// value): offsets strictly rising (nothing read twice or out of order), and each acknowledged
/// value read exactly once, at the offset it was acknowledged at.
pub fn assert_read_once_where_acked(acked: &[(i64, String)], consumed: &[(i64, String)]) {
    assert!(
        consumed.windows(2).all(|w| w[0].0 < w[1].0),
        "consumed out of offset order or twice: {consumed:?}"
    );
    super::assert_each_once_at_its_offset(consumed, acked);
}
