//! `ringraft-sim`: runs the deterministic simulator over a range of seeds.
//!
//! Every seed is one reproducible run (faults, then a calm period that checks liveness). The
//! first violation stops the run, is printed with the last events and the exact command that
//! replays it, and makes the exit status non-zero. A closed stdout stops the run quietly with
//! status 141 (docs/operations.md).

use std::process::ExitCode;

use clap::Parser;
use engine::sim::{run_seed, SimConfig};

#[macro_use]
extern crate cli_out;
use cli_out as out;

#[derive(Parser)]
#[command(
    name = "ringraft-sim",
    about = "Seeded deterministic simulation of the Raft core"
)]
struct Cli {
    /// How many seeds to run.
    #[arg(long, default_value_t = 100)]
    seeds: u64,
    /// The first seed; seeds run first-seed, first-seed+1, ...
    #[arg(long, default_value_t = 0)]
    first_seed: u64,
    /// Events of each seed's fault phase (the final calm period comes on top).
    #[arg(long, default_value_t = 5_000)]
    events: u64,
    /// Number of voters.
    #[arg(long, default_value_t = 3)]
    voters: usize,
    /// Number of observers.
    #[arg(long, default_value_t = 1)]
    observers: usize,
    /// Observers start with bootstrap servers only (no voter set) and learn the voters and the
    /// leader through FindQuorum.
    #[arg(long)]
    bootstrap_observers: bool,
    /// Also kill observers and delete their persistent state (voters: scripted scenario only).
    #[arg(long)]
    delete_state: bool,
    /// Judge by outcomes only: skip the two invariants that watch the mechanism
    /// (MajorityReachedHighWatermark, VotePersistedBeforeGranted).
    #[arg(long)]
    outcome_only: bool,
    /// No liar: no hostile requests or stray responses from outside the cluster (replays runs
    /// made before the liar existed, event for event).
    #[arg(long)]
    no_liar: bool,
    /// Events shown before a violation.
    #[arg(long, default_value_t = 40)]
    trace: usize,
    /// Print a summary line for every seed (default: about 20 lines per run).
    #[arg(long)]
    verbose: bool,
}

#[derive(Default)]
struct Totals {
    seeds: u64,
    events: u64,
    elections: u64,
    commits: u64,
    lies: u64,
}

fn main() -> ExitCode {
    let cli: Cli = out::parse_args();
    if cli.voters == 0 {
        eprintln!("--voters must be at least 1");
        return ExitCode::from(2);
    }
    match run(&cli) {
        Ok(code) => code,
        Err(error) if out::is_closed_pipe(&error) => ExitCode::from(out::CLOSED_STATUS),
        Err(error) => {
            use std::io::Write;
            let _ = writeln!(std::io::stderr(), "ringraft-sim: {}", out::describe(&error));
            ExitCode::FAILURE
        }
    }
}

/// Runs the seeds; the exit code, or the error of a write to stdout.
// `u64::is_multiple_of` needs Rust 1.87; the workspace's rust-version is 1.85.
#[allow(clippy::manual_is_multiple_of)]
fn run(cli: &Cli) -> std::io::Result<ExitCode> {
    let mut totals = Totals::default();
    let every = (cli.seeds / 20).max(1);
    for seed in cli.first_seed..cli.first_seed.saturating_add(cli.seeds) {
        let mut cfg = SimConfig::random(seed, cli.events, cli.voters, cli.observers);
        cfg.delete_state = cli.delete_state;
        cfg.bootstrap_observers = cli.bootstrap_observers;
        cfg.trace_len = cli.trace;
        cfg.outcome_only = cli.outcome_only;
        cfg.liar = !cli.no_liar;
        let replay = cfg.replay_command();
        // A panic inside the core (an assertion) is a failure of this seed like any other.
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run_seed(cfg)));
        let Ok(outcome) = outcome else {
            outln!("PANIC at seed {seed} (message above)\nreplay: {replay}")?;
            print_totals(&totals, 1)?;
            return Ok(ExitCode::FAILURE);
        };
        match outcome {
            Ok(s) => {
                totals.seeds += 1;
                totals.events += s.events;
                totals.elections += s.elections;
                totals.commits += s.commits;
                totals.lies += s.liar_messages;
                if cli.verbose || (seed - cli.first_seed) % every == 0 {
                    outln!(
                        "seed {seed}: {} events, {} elections, {} commits, {} offsets, {} lies, {} ms simulated, trace {:016x}",
                        s.events, s.elections, s.commits, s.committed_offsets, s.liar_messages, s.sim_time_ms, s.trace_hash
                    )?;
                }
            }
            Err(v) => {
                outln!("{v}")?;
                print_totals(&totals, 1)?;
                return Ok(ExitCode::FAILURE);
            }
        }
    }
    print_totals(&totals, 0)?;
    Ok(ExitCode::SUCCESS)
}

fn print_totals(t: &Totals, violations: u64) -> std::io::Result<()> {
    outln!(
        "total: {} seeds passed, {} events, {} elections, {} commits, {} lies, {violations} violations",
        t.seeds,
        t.events,
        t.elections,
        t.commits,
        t.lies
    )
}
