//! Process tests of `ringraft credentials add|delete|list` (docs/security.md, "Credentials
//! file"): the built binary writes the file (mode 0600, no password in it), the credentials it
//! writes authenticate through the SASL state machines, and every refusal exits 1 (2 for a
//! usage error) with a clear message and the file unchanged. Every wait is bounded.

use std::io::{Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use net::security::credentials::{CredentialStore, ScramMechanism};
use net::security::sasl::{Mechanism, SaslClient, SaslError, SaslServer, SaslStep};

const TIMEOUT: Duration = Duration::from_secs(20);

struct Run {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

/// Runs `ringraft credentials ARGS` with `stdin` as its standard input, bounded by TIMEOUT.
fn credentials<S: AsRef<str> + std::fmt::Debug>(args: &[S], stdin: &str) -> Run {
    let mut child = Command::new(env!("CARGO_BIN_EXE_ringraft"))
        .arg("credentials")
        .args(args.iter().map(AsRef::as_ref))
        .env("RUST_LOG", "warn")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The tool may exit before reading (a refused argument): a broken pipe here is fine.
    let _ = child.stdin.take().unwrap().write_all(stdin.as_bytes());
    let deadline = Instant::now() + TIMEOUT;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("ringraft credentials {args:?} still running after {TIMEOUT:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let mut stdout = String::new();
    let mut stderr = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut stdout)
        .unwrap();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    Run {
        code: status.code(),
        stdout,
        stderr,
    }
}

fn ok<S: AsRef<str> + std::fmt::Debug>(args: &[S], stdin: &str) -> String {
    let run = credentials(args, stdin);
    assert_eq!(run.code, Some(0), "{args:?}: {}", run.stderr);
    assert!(run.stderr.is_empty(), "{args:?}: {}", run.stderr);
    run.stdout
}

/// [`ok`], and what it printed says `says`.
fn ok_saying<S: AsRef<str> + std::fmt::Debug>(args: &[S], stdin: &str, says: &str) {
    let out = ok(args, stdin);
    assert!(out.contains(says), "{out}");
}

/// `VERB --file FILE --user USER --mechanism MECHANISM EXTRA...`.
fn user_args(verb: &str, file: &str, user: &str, mechanism: &str, extra: &[&str]) -> Vec<String> {
    let mut args = vec![
        verb,
        "--file",
        file,
        "--user",
        user,
        "--mechanism",
        mechanism,
    ];
    args.extend_from_slice(extra);
    args.into_iter().map(String::from).collect()
}

/// Expects exit status `code` and a message containing `expected` on stderr.
fn fails<S: AsRef<str> + std::fmt::Debug>(args: &[S], stdin: &str, code: i32, expected: &str) {
    let run = credentials(args, stdin);
    assert_eq!(
        run.code,
        Some(code),
        "{args:?}: {} {}",
        run.stdout,
        run.stderr
    );
    assert!(
        run.stderr.contains(expected),
        "{args:?}: expected {expected:?} in {}",
        run.stderr
    );
    assert!(!run.stderr.contains("panicked"), "{}", run.stderr);
}

/// A whole exchange of `mechanism` against the file's credentials.
fn login(
    path: &Path,
    mechanism: Mechanism,
    user: &str,
    password: &str,
) -> Result<String, SaslError> {
    let store = Arc::new(CredentialStore::load(path).unwrap());
    let mut server = SaslServer::new(mechanism, store);
    let mut client = SaslClient::new(mechanism, user, password)?;
    let mut token = client.first_message();
    loop {
        match server.step(&token)? {
            SaslStep::Continue(challenge) => token = client.step(&challenge)?.unwrap(),
            SaslStep::Done { user, token } => {
                assert_eq!(client.step(&token)?, None);
                return Ok(user);
            }
        }
    }
}

#[test]
fn add_list_delete_and_log_in() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("credentials.json");
    let file = path.to_str().unwrap();

    ok_saying(
        &user_args("add", file, "alice", "SCRAM-SHA-512", &[]),
        "s3cret password\n",
        "added a SCRAM-SHA-512 credential of user \"alice\" (8192 iterations)",
    );
    let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);

    let password_file = dir.path().join("bob.pw");
    std::fs::write(&password_file, "bob's password\r\n").unwrap();
    ok(
        &user_args(
            "add",
            file,
            "bob",
            "SCRAM-SHA-256",
            &[
                "--iterations",
                "4096",
                "--password-file",
                password_file.to_str().unwrap(),
            ],
        ),
        "",
    );
    ok(
        &user_args("add", file, "alice", "SCRAM-SHA-256", &[]),
        "s3cret password",
    );

    let text = std::fs::read_to_string(&path).unwrap();
    assert!(
        !text.contains("s3cret") && !text.contains("bob's"),
        "{text}"
    );
    let store = CredentialStore::load(&path).unwrap();
    assert_eq!(
        store
            .get("alice", ScramMechanism::Sha512)
            .unwrap()
            .iterations(),
        8192
    );
    assert_eq!(
        store
            .get("bob", ScramMechanism::Sha256)
            .unwrap()
            .iterations(),
        4096
    );

    assert_eq!(
        ok(&["list", "--file", file], ""),
        "alice\tSCRAM-SHA-256,SCRAM-SHA-512\nbob\tSCRAM-SHA-256\n"
    );
    let json: serde_json::Value =
        serde_json::from_str(&ok(&["list", "--file", file, "--json"], "")).unwrap();
    assert_eq!(json["users"][1]["name"], "bob");
    assert_eq!(json["users"][0]["mechanisms"][1], "SCRAM-SHA-512");

    // The file's credentials work for every mechanism, PLAIN included.
    for mechanism in Mechanism::ALL {
        assert_eq!(
            login(&path, mechanism, "alice", "s3cret password"),
            Ok("alice".into())
        );
        assert_eq!(
            login(&path, mechanism, "alice", "s3cret passwore"),
            Err(SaslError::AuthenticationFailed)
        );
    }
    assert_eq!(
        login(&path, Mechanism::Plain, "bob", "bob's password"),
        Ok("bob".into())
    );

    // Replacing changes the password.
    ok_saying(
        &user_args("add", file, "alice", "SCRAM-SHA-512", &[]),
        "new password\n",
        "replaced the SCRAM-SHA-512 credential",
    );
    assert_eq!(
        login(&path, Mechanism::ScramSha512, "alice", "new password"),
        Ok("alice".into())
    );
    assert_eq!(
        login(&path, Mechanism::ScramSha512, "alice", "s3cret password"),
        Err(SaslError::AuthenticationFailed)
    );

    ok_saying(
        &user_args("delete", file, "alice", "SCRAM-SHA-256", &[]),
        "",
        "deleted the SCRAM-SHA-256 credential of user \"alice\"",
    );
    ok(&["delete", "--file", file, "--user", "bob"], "");
    assert_eq!(ok(&["list", "--file", file], ""), "alice\tSCRAM-SHA-512\n");
    assert_eq!(
        login(&path, Mechanism::Plain, "bob", "bob's password"),
        Err(SaslError::AuthenticationFailed)
    );
    assert_eq!(
        std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
        0o600
    );
}

#[test]
fn refusals_exit_non_zero_with_a_message_and_leave_the_file_alone() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("credentials.json");
    let file = path.to_str().unwrap();
    let add = |user: &str, extra: &[&str]| user_args("add", file, user, "SCRAM-SHA-256", extra);

    // Nothing exists yet: list and delete name the file.
    fails(&["list", "--file", file], "", 1, "credentials.json");
    fails(
        &["delete", "--file", file, "--user", "a"],
        "",
        1,
        "cannot read credentials file",
    );
    assert!(!path.exists());

    fails(
        &add("alice", &["--iterations", "4095"]),
        "pw\n",
        1,
        "--iterations 4095",
    );
    fails(
        &add("alice", &["--iterations", "100000"]),
        "pw\n",
        1,
        "65536",
    );
    fails(&add("alice", &[]), "", 1, "no password on standard input");
    fails(&add("alice", &[]), "\n", 1, "empty password");
    fails(&add("", &[]), "pw\n", 1, "--user");
    fails(&add("bell\u{7}", &[]), "pw\n", 1, "--user");
    fails(&add("alice", &[]), "bell\u{7}\n", 1, "invalid password");
    let two_lines = dir.path().join("two.pw");
    std::fs::write(&two_lines, "one\ntwo\n").unwrap();
    fails(
        &add("alice", &["--password-file", two_lines.to_str().unwrap()]),
        "",
        1,
        "more than one line",
    );
    fails(
        &add("alice", &["--password-file", "/nonexistent/pw"]),
        "",
        1,
        "cannot read password file /nonexistent/pw",
    );
    assert!(!path.exists(), "a refused add wrote the file");

    // Usage errors are clap's: status 2.
    fails(
        &user_args("add", file, "a", "SCRAM-SHA-1", &[]),
        "pw\n",
        2,
        "expected SCRAM-SHA-256 or SCRAM-SHA-512",
    );
    fails(
        &["add", "--file", file, "--user", "a", "--mechanism", "PLAIN"],
        "pw\n",
        2,
        "PLAIN logins are checked against",
    );
    fails(&["list"], "", 2, "--file");

    ok(&add("alice", &[]), "pw\n");
    let good = std::fs::read(&path).unwrap();
    fails(
        &["delete", "--file", file, "--user", "mallory"],
        "",
        1,
        "no user \"mallory\"",
    );
    fails(
        &user_args("delete", file, "alice", "SCRAM-SHA-512", &[]),
        "",
        1,
        "has no SCRAM-SHA-512 credential",
    );
    assert_eq!(std::fs::read(&path).unwrap(), good);

    // A corrupt file is reported, never replaced.
    std::fs::write(&path, &good[..good.len() / 2]).unwrap();
    let corrupt = std::fs::read(&path).unwrap();
    fails(&add("bob", &[]), "pw\n", 1, "is corrupt");
    fails(&["list", "--file", file], "", 1, "is corrupt");
    assert_eq!(std::fs::read(&path).unwrap(), corrupt);
}
