//! `ringraft`: the node (`serve`) and its admin tools (`quorum --describe`, `dump-log`,
//! `quorum-state`). Load generation lives in `ringraft-bench`. Output goes through
//! [`out::line`]: a closed stdout ends a command quietly with status 141 (docs/operations.md).
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use engine::quorum_state_store::QuorumStateStore;
use engine::raft::ElectionState;
use engine::record::BatchView;
use net::node::lock::{DirLock, LockError};
use net::node::NodeConfig;

#[macro_use]
extern crate cli_out;
use cli_out as out;

/// mimalloc instead of glibc's malloc: 16% less of the leader's CPU per one-record request
/// (docs/architecture.md, "Memory and the allocator").
#[cfg(feature = "mimalloc")]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod admin;
mod client_config;
mod credentials;
mod log_format;
mod quorum_cmd;
mod quorum_reassign;

/// The highest epoch `quorum-state --reset-epoch` writes: the first election after it, in
/// E + 1, must be in an epoch the other voters accept (docs/protocol.md section 14).
const RESET_EPOCH_MAX: i64 = engine::raft::admission::MAX_PEER_EPOCH as i64 - 1;

/// The safety rule of `quorum-state --reset-epoch`, shown in its help (docs/operations.md).
const RESET_RULE: &str = "\
SAFETY: --reset-epoch forgets the node's vote and leader. It is safe ONLY when EVERY voter of \
the cluster is stopped, and the same E is applied to EVERY voter, with E at least the highest \
`last batch epoch` printed for ALL the voters' logs (run `ringraft quorum-state --dir DIR` on \
each voter first). Reset one voter alone, or below another voter's last batch epoch, and two \
leaders can be elected in one epoch.";

#[derive(Parser)]
#[command(
    name = "ringraft",
    version,
    about = "A Raft replicated log (KIP-595 draft) on io_uring"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a node.
    Serve {
        #[arg(long)]
        config: PathBuf,
        /// `key=value`, applied after the file (repeatable).
        #[arg(long = "override")]
        overrides: Vec<String>,
        #[arg(long)]
        raft_cpu: Option<usize>,
        #[arg(long)]
        log_cpu: Option<usize>,
    },
    /// Describe the quorum (`describe --status`, `describe --replication`; the older
    /// `--describe`), as Kafka's `kafka-metadata-quorum` does.
    Quorum(quorum_cmd::QuorumArgs),
    /// Print a log directory's batches.
    DumpLog { dir: PathBuf },
    /// Print a stopped node's stored election state (quorum-state file) and its log's last
    /// batch epoch; with --reset-epoch, rewrite the state (recovery from an epoch at its limit).
    #[command(after_help = RESET_RULE)]
    QuorumState {
        /// The node's log directory (`log.dirs`), which holds its quorum-state file.
        #[arg(long)]
        dir: PathBuf,
        /// Rewrite the quorum-state file with epoch E, leader -1 and vote -1, keeping the voter
        /// set. Refused while the node runs, for E below this log's last batch epoch, for a
        /// negative E and above 2147483645 (the first election, in E + 1, must be in an epoch
        /// the other voters accept). See SAFETY below.
        #[arg(long, value_name = "E", allow_hyphen_values = true)]
        reset_epoch: Option<i64>,
    },
    /// Manage the SASL credentials file: SCRAM credentials per user and mechanism, against
    /// which PLAIN logins are checked too. No password is stored (docs/security.md).
    Credentials {
        #[command(subcommand)]
        command: credentials::CredentialsCommand,
    },
}

/// Why a command failed.
pub(crate) enum Failure {
    /// Standard output was closed under the command: exit [`out::CLOSED_STATUS`], silently.
    StdoutClosed,
    Message(String),
}

impl From<String> for Failure {
    fn from(message: String) -> Self {
        Failure::Message(message)
    }
}

impl From<&str> for Failure {
    fn from(message: &str) -> Self {
        Failure::Message(message.into())
    }
}

/// Only the writes to standard output ([`out::line`]) come back as a bare `io::Error`.
impl From<std::io::Error> for Failure {
    fn from(error: std::io::Error) -> Self {
        if out::is_closed_pipe(&error) {
            Failure::StdoutClosed
        } else {
            Failure::Message(out::describe(&error))
        }
    }
}

/// Logs on stderr, as `log.format` says (`serve` reads it from its configuration first; every
/// other command logs text).
fn init_logging(format: net::node::LogFormat) {
    let builder = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        // Colour codes only on a terminal: log files and test captures stay plain text.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        // A log line that cannot be written (stderr on a full disk) is dropped; the default
        // reports it with eprintln!, which panics, and would take the log thread down with it.
        .log_internal_errors(false);
    match format {
        net::node::LogFormat::Text => builder.init(),
        net::node::LogFormat::Json => builder.event_format(log_format::JsonLines).init(),
    }
}

fn main() -> ExitCode {
    let cli: Cli = out::parse_args();
    if !matches!(cli.command, Command::Serve { .. }) {
        init_logging(net::node::LogFormat::Text);
    }
    let result: Result<(), Failure> = match cli.command {
        Command::Serve {
            config,
            mut overrides,
            raft_cpu,
            log_cpu,
        } => {
            if let Some(cpu) = raft_cpu {
                overrides.push(format!("raft.cpu={cpu}"));
            }
            if let Some(cpu) = log_cpu {
                overrides.push(format!("log.cpu={cpu}"));
            }
            serve(&config, &overrides).map_err(Failure::from)
        }
        Command::Quorum(args) => quorum_cmd::run(args),
        Command::DumpLog { dir } => dump_log(&dir),
        Command::QuorumState { dir, reset_epoch } => quorum_state(&dir, reset_epoch),
        Command::Credentials { command } => credentials::run(command),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::StdoutClosed) => ExitCode::from(out::CLOSED_STATUS),
        Err(Failure::Message(message)) => {
            use std::io::Write;
            // Not eprintln!: a closed stderr must not turn the failure into a panic either.
            let _ = writeln!(std::io::stderr(), "ringraft: {message}");
            ExitCode::FAILURE
        }
    }
}

fn serve(config: &std::path::Path, overrides: &[String]) -> Result<(), String> {
    let config = NodeConfig::load(config, overrides);
    init_logging(
        config
            .as_ref()
            .map_or(net::node::LogFormat::Text, |c| c.log_format),
    );
    let config = config.map_err(|e| format!("config: {e}"))?;
    net::node::serve(config).map_err(|e| format!("cannot run the node: {e}"))
}

/// Prints every batch of a log directory, read with the log's own reader (read-only use: the
/// directory must not be in use by a running node).
fn dump_log(dir: &Path) -> Result<(), Failure> {
    let log = engine::log::Log::open(dir, engine::log::LogConfig::for_reading())
        .map_err(|e| format!("opening the log in {}: {e}", dir.display()))?;
    let mut offset = log.start_offset();
    let end = log.end_offset();
    outln!("log {}  start {}  end {}", dir.display(), offset, end)?;
    while offset < end {
        let pieces = log
            .read(offset, 1 << 20)
            .map_err(|e| format!("reading at {offset}: {e}"))?;
        if pieces.is_empty() {
            break;
        }
        for piece in pieces {
            let len = piece.len();
            match BatchView::parse(piece) {
                Ok(view) => {
                    let control = if view.is_control() {
                        engine::record::control::ControlRecord::decode_batch(&view)
                            .ok()
                            .and_then(|records| records.first().map(|r| format!("{r:?}")))
                            .unwrap_or_else(|| "control".into())
                    } else {
                        "data".into()
                    };
                    outln!(
                        "offsets {}..={}  epoch {}  records {}  bytes {}  crc ok  {}",
                        view.base_offset(),
                        view.last_offset(),
                        view.partition_leader_epoch(),
                        view.record_count(),
                        len,
                        control
                    )?;
                    offset = view.next_offset();
                }
                Err(error) => {
                    outln!("at offset {offset}: bad batch ({len} bytes): {error}")?;
                    return Err(format!("bad batch at offset {offset}").into());
                }
            }
        }
    }
    Ok(())
}

/// `quorum-state --dir DIR [--reset-epoch E]`: prints the stored election state and the log's
/// last batch epoch; with E, rewrites the state as epoch E, no leader, no vote, same voters,
/// through the node's own store (write, fsync, rename, fsync the directory). Holds the
/// directory's lock throughout, so it refuses to run next to a live node.
fn quorum_state(dir: &Path, reset_epoch: Option<i64>) -> Result<(), Failure> {
    use engine::quorum_state_store::{COPY_B_FILE_NAME, FILE_NAME};
    let path = dir.join(FILE_NAME);
    if !path.exists() && !dir.join(COPY_B_FILE_NAME).exists() {
        return Err(format!(
            "no quorum-state file in {}: not a node's log directory (log.dirs)",
            dir.display()
        )
        .into());
    }
    let reset_epoch = reset_epoch.map(checked_reset_epoch).transpose()?;
    let _lock = DirLock::acquire(dir).map_err(|error| match error {
        LockError::Busy { .. } => format!(
            "the log directory {} is locked by a running ringraft process: stop every voter \
             before using quorum-state",
            dir.display()
        ),
        other => other.to_string(),
    })?;
    // The cluster and node id the copies name: the store checks them on every read, and a
    // tool pointed at a directory knows neither. Opening repairs a damaged or older copy as
    // the node's start would (with the same warning).
    let (cluster_id, node_id) = engine::quorum_state_store::stored_identity(dir)
        .map_err(|e| e.to_string())?
        .ok_or_else(|| format!("{} disappeared", path.display()))?;
    let mut file =
        QuorumStateStore::open(dir, node_id, cluster_id.clone()).map_err(|e| e.to_string())?;
    let state = file
        .read()
        .map_err(|e| e.to_string())?
        .ok_or_else(|| format!("{} disappeared", path.display()))?;
    let log = engine::log::Log::open(dir, engine::log::LogConfig::for_reading())
        .map_err(|e| format!("opening the log in {}: {e}", dir.display()))?;
    let last_epoch = log.last_epoch();
    outln!(
        "quorum-state {} (and {COPY_B_FILE_NAME}): cluster {cluster_id:?}  node {node_id}  \
         generation {}",
        path.display(),
        file.generation()
    )?;
    print_election_state(&state)?;
    outln!(
        "log {}: start offset {}  end offset {}  last batch epoch {last_epoch}",
        dir.display(),
        log.start_offset(),
        log.end_offset()
    )?;
    drop(log);
    let Some(epoch) = reset_epoch else {
        return Ok(());
    };
    if epoch < last_epoch {
        return Err(format!(
            "--reset-epoch {epoch} is below this log's last batch epoch {last_epoch}: refused \
             (E must be at least the highest last batch epoch of every voter's log)"
        )
        .into());
    }
    let reset = ElectionState {
        epoch,
        leader_id: -1,
        voted_id: -1,
        ..state
    };
    file.write(&reset).map_err(|e| e.to_string())?;
    let written = file
        .read()
        .map_err(|e| e.to_string())?
        .ok_or_else(|| format!("{} disappeared", path.display()))?;
    if written != reset {
        return Err(format!(
            "{} reads back as {written:?} after the reset",
            path.display()
        )
        .into());
    }
    outln!("reset to:")?;
    print_election_state(&written)?;
    Ok(())
}

fn checked_reset_epoch(epoch: i64) -> Result<i32, Failure> {
    if epoch < 0 {
        return Err(format!("--reset-epoch {epoch}: an epoch cannot be negative").into());
    }
    if epoch > RESET_EPOCH_MAX {
        return Err(format!(
            "--reset-epoch {epoch}: above {RESET_EPOCH_MAX} no election is left (the other \
             voters refuse epochs above {RESET_EPOCH_MAX} + 1)"
        )
        .into());
    }
    Ok(epoch as i32)
}

fn print_election_state(state: &ElectionState) -> std::io::Result<()> {
    let ids = |ids: &[i32]| {
        ids.iter()
            .map(|id| id.to_string())
            .collect::<Vec<_>>()
            .join(",")
    };
    outln!(
        "  epoch {}  leader {}  voted for {}",
        state.epoch,
        state.leader_id,
        state.voted_id
    )?;
    outln!(
        "  voters {}  target voters {}  applied offset {}",
        ids(&state.current_voters),
        state.target_voters.as_deref().map_or("none".into(), ids),
        state.applied_offset
    )
}
