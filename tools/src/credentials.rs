//! `ringraft credentials add|delete|list --file PATH`: the SASL credentials file
//! (docs/security.md, "Credentials file"). Passwords come from a file or standard input, never
//! from the command line (where `ps` and shell histories would show them), and are never
//! written anywhere: only their SCRAM credentials are.

use std::io::{BufRead, IsTerminal, Write};
use std::path::{Path, PathBuf};

use clap::{Args, Subcommand};
use net::security::credentials::{
    prepare_user_name, CredentialStore, ScramMechanism, DEFAULT_ITERATIONS, MAX_ITERATIONS,
    MIN_ITERATIONS,
};

use crate::Failure;

#[derive(Args)]
pub struct FileArg {
    /// The credentials file (created by the first `add`, with mode 0600).
    #[arg(long, value_name = "PATH")]
    file: PathBuf,
}

#[derive(Subcommand)]
pub enum CredentialsCommand {
    /// Add a user's SCRAM credential for one mechanism, or replace it. The password is read
    /// from --password-file, else as one line from standard input.
    Add {
        #[command(flatten)]
        file: FileArg,
        /// The user name (matched after SASLprep, as logins are).
        #[arg(long, value_name = "NAME")]
        user: String,
        /// SCRAM-SHA-256 or SCRAM-SHA-512 (PLAIN logins are checked against either).
        #[arg(long, value_name = "MECHANISM", value_parser = parse_mechanism)]
        mechanism: ScramMechanism,
        /// PBKDF2 iterations, 4096 to 65536.
        #[arg(long, default_value_t = DEFAULT_ITERATIONS)]
        iterations: u32,
        /// A file whose first and only line is the password.
        #[arg(long, value_name = "FILE")]
        password_file: Option<PathBuf>,
    },
    /// Delete a user's credential for one mechanism, or all of them (and so the user).
    Delete {
        #[command(flatten)]
        file: FileArg,
        /// The user name (matched after SASLprep, as logins are).
        #[arg(long, value_name = "NAME")]
        user: String,
        #[arg(long, value_name = "MECHANISM", value_parser = parse_mechanism)]
        mechanism: Option<ScramMechanism>,
    },
    /// Print each user and its mechanisms (never a secret): `NAME<TAB>MECHANISM,...`.
    List {
        #[command(flatten)]
        file: FileArg,
        #[arg(long)]
        json: bool,
    },
}

fn parse_mechanism(name: &str) -> Result<ScramMechanism, String> {
    ScramMechanism::from_name(name).ok_or_else(|| {
        let hint = if name.eq_ignore_ascii_case("PLAIN") {
            " (PLAIN logins are checked against the user's SCRAM credential: add one of those)"
        } else {
            ""
        };
        format!("expected SCRAM-SHA-256 or SCRAM-SHA-512{hint}")
    })
}

pub fn run(command: CredentialsCommand) -> Result<(), Failure> {
    match command {
        CredentialsCommand::Add {
            file,
            user,
            mechanism,
            iterations,
            password_file,
        } => add(
            &file.file,
            &user,
            mechanism,
            iterations,
            password_file.as_deref(),
        ),
        CredentialsCommand::Delete {
            file,
            user,
            mechanism,
        } => delete(&file.file, &user, mechanism),
        CredentialsCommand::List { file, json } => list(&file.file, json),
    }
}

fn add(
    path: &Path,
    user: &str,
    mechanism: ScramMechanism,
    iterations: u32,
    password_file: Option<&Path>,
) -> Result<(), Failure> {
    // Everything that can be refused is, before a password is asked for.
    if !(MIN_ITERATIONS..=MAX_ITERATIONS).contains(&iterations) {
        return Err(format!(
            "--iterations {iterations}: must be from {MIN_ITERATIONS} to {MAX_ITERATIONS}"
        )
        .into());
    }
    let user = prepare_user_name(user).map_err(|e| format!("--user: {e}"))?;
    let mut store = CredentialStore::load_or_empty(path).map_err(|e| e.to_string())?;
    let password = match password_file {
        Some(file) => read_password_file(file)?,
        None => read_password_line(&user)?,
    };
    let replaced = store
        .add_password(&user, mechanism, &password, iterations)
        .map_err(|e| e.to_string())?;
    store.save().map_err(|e| e.to_string())?;
    outln!(
        "{} {mechanism} credential of user {user:?} ({iterations} iterations) in {}",
        if replaced { "replaced the" } else { "added a" },
        path.display()
    )?;
    Ok(())
}

fn delete(path: &Path, user: &str, mechanism: Option<ScramMechanism>) -> Result<(), Failure> {
    let mut store = CredentialStore::load(path).map_err(|e| e.to_string())?;
    store
        .delete(user, mechanism)
        .map_err(|e| format!("{e} in {}", path.display()))?;
    store.save().map_err(|e| e.to_string())?;
    let user = prepare_user_name(user).map_err(|e| e.to_string())?;
    match mechanism {
        Some(mechanism) => outln!(
            "deleted the {mechanism} credential of user {user:?} from {}",
            path.display()
        )?,
        None => outln!("deleted user {user:?} from {}", path.display())?,
    }
    Ok(())
}

fn list(path: &Path, json: bool) -> Result<(), Failure> {
    let store = CredentialStore::load(path).map_err(|e| e.to_string())?;
    let users = store.list();
    if json {
        let users: Vec<serde_json::Value> = users
            .iter()
            .map(|entry| {
                serde_json::json!({
                    "name": entry.name,
                    "mechanisms": entry.mechanisms.iter().map(|m| m.name()).collect::<Vec<_>>(),
                })
            })
            .collect();
        outln!("{}", serde_json::json!({ "users": users }))?;
        return Ok(());
    }
    for entry in users {
        let mechanisms: Vec<&str> = entry.mechanisms.iter().map(|m| m.name()).collect();
        outln!("{}\t{}", entry.name, mechanisms.join(","))?;
    }
    Ok(())
}

/// The line without its line ending; refused if empty.
fn one_line(mut text: String, source: &str) -> Result<String, Failure> {
    if text.ends_with('\n') {
        text.pop();
        if text.ends_with('\r') {
            text.pop();
        }
    }
    if text.contains('\n') {
        return Err(format!("{source} holds more than one line: the password is one line").into());
    }
    if text.is_empty() {
        return Err(format!("{source}: empty password").into());
    }
    Ok(text)
}

fn read_password_file(file: &Path) -> Result<String, Failure> {
    let text = std::fs::read_to_string(file)
        .map_err(|e| format!("cannot read password file {}: {e}", file.display()))?;
    one_line(text, &format!("password file {}", file.display()))
}

/// One line from standard input; on a terminal, asked for on stderr with echo off.
fn read_password_line(user: &str) -> Result<String, Failure> {
    let stdin = std::io::stdin();
    let echo = if stdin.is_terminal() {
        let _ = write!(std::io::stderr(), "password for {user}: ");
        let _ = std::io::stderr().flush();
        EchoOff::new()
    } else {
        None
    };
    let mut line = String::new();
    let read = stdin.lock().read_line(&mut line);
    if echo.is_some() {
        let _ = writeln!(std::io::stderr());
    }
    match read {
        Ok(0) => Err("no password on standard input (or pass --password-file)".into()),
        Ok(_) => one_line(line, "standard input"),
        Err(error) => Err(format!("reading the password from standard input: {error}").into()),
    }
}

/// The terminal's echo, off while this lives.
struct EchoOff(libc::termios);

impl EchoOff {
    fn new() -> Option<Self> {
        // SAFETY: tcgetattr fills the termios it is given; zeroed is a valid termios to fill.
        let mut saved: libc::termios = unsafe { std::mem::zeroed() };
        // SAFETY: fd 0 and a valid pointer to a termios.
        if unsafe { libc::tcgetattr(0, &mut saved) } != 0 {
            return None;
        }
        let mut quiet = saved;
        quiet.c_lflag &= !libc::ECHO;
        // SAFETY: fd 0 and a valid termios.
        if unsafe { libc::tcsetattr(0, libc::TCSANOW, &quiet) } != 0 {
            return None;
        }
        Some(Self(saved))
    }
}

impl Drop for EchoOff {
    fn drop(&mut self) {
        // SAFETY: fd 0 and the termios saved before.
        unsafe { libc::tcsetattr(0, libc::TCSANOW, &self.0) };
    }
}
