//! `ringraft-sim`: runs the deterministic simulator over a range of seeds.
//!
//! Every seed is one reproducible run (faults, then a calm period that checks liveness). The
//! first violation stops the run, is printed with the last events and the exact command that
//! replays it, and makes the exit status non-zero. A closed stdout stops the run quietly with
//! status 141 (docs/operations.md).

use std::process::ExitCode;

use clap::Parser;
use engine::sim::{run_disruption, run_seed, SimConfig};

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
    /// Judge by outcomes only: skip the invariants that watch the mechanism
    /// (MajorityReachedHighWatermark, VotePersistedBeforeGranted, PreVoteChangesNothing).
    #[arg(long)]
    outcome_only: bool,
    /// No liar: no hostile requests or stray responses from outside the cluster (replays runs
    /// made before the liar existed, event for event).
    #[arg(long)]
    no_liar: bool,
    /// The cores stand for election at once, without a pre-vote round (quorum.prevote.enable
    /// = false; replays runs made before pre-vote existed, event for event).
    #[arg(long)]
    no_prevote: bool,
    /// Tick each core at the present before every other input, as the node runtime does on
    /// every wake-up (by default a core is ticked only at its deadlines and handles a message
    /// with the clock of its last tick; docs/simulation.md, "How a run works").
    #[arg(long)]
    tick_before_input: bool,
    /// Run the disruption scenario instead (docs/simulation.md, "Disruption"): per seed, a
    /// healthy cluster of --voters voters (at least 3) with one follower cut off from the leader
    /// for 1-5 s and healed. With pre-vote any election or epoch raise is a violation; with
    /// --no-prevote the tool counts the seeds that saw one.
    #[arg(long)]
    disruption: bool,
    /// A reassigner sends AlterQuorum requests with random targets drawn from every node
    /// (voters and observers: use --observers to give it nodes to add), and the voter-set
    /// invariants are checked (docs/simulation.md, "Reassignment").
    #[arg(long)]
    reassign: bool,
    /// Nodes delete the front of their logs as retention would (up to what each core allows),
    /// and followers behind a leader's log start reset their logs (docs/simulation.md,
    /// "Retention").
    #[arg(long)]
    retention: bool,
    /// After every fourth event one node in turn asks its core for a fresh fetch
    /// (`Input::RefreshFetch`, as a node that wants producer ids does).
    #[arg(long)]
    refresh_fetches: bool,
    /// Idempotent producers sending beside the client: batches with producer ids and
    /// sequences, retried to new leaders until acknowledged, each checked to be committed once
    /// at the offsets every acknowledgement names (docs/simulation.md, "The whole replica").
    #[arg(long, default_value_t = 0)]
    producers: usize,
    /// Now and then an acknowledgement never reaches its producer, which stalls for up to 3 s
    /// before it retries (its retry then comes after retention and restarts; docs/simulation.md,
    /// "The whole replica")
    #[arg(long)]
    producer_stalls: bool,
    /// A committer sends OffsetCommits for two groups, and every replica's committed offsets
    /// are checked against the acknowledged ones (docs/simulation.md, "Committed offsets")
    #[arg(long)]
    group_commits: bool,
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
    alter_requests: u64,
    reassignments: u64,
    voter_changes: u64,
    voter_disks_lost: u64,
    retentions: u64,
    resets: u64,
    producer_snapshots: u64,
    torn_tails: u64,
    idempotent_acks: u64,
    idempotent_retries: u64,
    idempotent_lost_acks: u64,
    group_commits: u64,
    duplicates_suppressed: u64,
    producer_ids: u64,
    consumer_reads: u64,
}

fn main() -> ExitCode {
    let cli: Cli = out::parse_args();
    if cli.voters == 0 {
        eprintln!("--voters must be at least 1");
        return ExitCode::from(2);
    }
    if cli.disruption && cli.voters < 3 {
        eprintln!("--disruption needs at least 3 voters");
        return ExitCode::from(2);
    }
    let outcome = if cli.disruption {
        run_disruption_seeds(&cli)
    } else {
        run(&cli)
    };
    match outcome {
        Ok(code) => code,
        Err(error) if out::is_closed_pipe(&error) => ExitCode::from(out::CLOSED_STATUS),
        Err(error) => {
            use std::io::Write;
            let _ = writeln!(std::io::stderr(), "ringraft-sim: {}", out::describe(&error));
            ExitCode::FAILURE
        }
    }
}

/// The configuration of random seed `seed` under the command line's flags.
fn seed_config(cli: &Cli, seed: u64) -> SimConfig {
    let mut cfg = SimConfig::random(seed, cli.events, cli.voters, cli.observers);
    cfg.delete_state = cli.delete_state;
    cfg.bootstrap_observers = cli.bootstrap_observers;
    cfg.trace_len = cli.trace;
    cfg.outcome_only = cli.outcome_only;
    cfg.liar = !cli.no_liar;
    cfg.pre_vote = !cli.no_prevote;
    cfg.tick_before_input = cli.tick_before_input;
    cfg.reassign = cli.reassign;
    cfg.retention = cli.retention;
    cfg.refresh_fetches = cli.refresh_fetches;
    cfg.idempotent_producers = cli.producers;
    cfg.producer_stalls = cli.producer_stalls;
    cfg.group_commits = cli.group_commits;
    cfg
}

/// Runs the seeds; the exit code, or the error of a write to stdout.
// `u64::is_multiple_of` needs Rust 1.87; the workspace's rust-version is 1.85.
#[allow(clippy::manual_is_multiple_of)]
fn run(cli: &Cli) -> std::io::Result<ExitCode> {
    let mut totals = Totals::default();
    let every = (cli.seeds / 20).max(1);
    for seed in cli.first_seed..cli.first_seed.saturating_add(cli.seeds) {
        let cfg = seed_config(cli, seed);
        let replay = cfg.replay_command();
        // A panic inside the core (an assertion) is a failure of this seed like any other.
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run_seed(cfg)));
        let Ok(outcome) = outcome else {
            outln!("PANIC at seed {seed} (message above)\nreplay: {replay}")?;
            print_totals(cli, &totals, 1)?;
            return Ok(ExitCode::FAILURE);
        };
        match outcome {
            Ok(s) => {
                totals.seeds += 1;
                totals.events += s.events;
                totals.elections += s.elections;
                totals.commits += s.commits;
                totals.lies += s.liar_messages;
                totals.alter_requests += s.alter_requests;
                totals.reassignments += s.reassignments_completed;
                totals.voter_changes += s.voter_changes;
                totals.voter_disks_lost += s.voter_disks_lost;
                totals.retentions += s.retentions;
                totals.resets += s.resets;
                totals.producer_snapshots += s.producer_snapshots;
                totals.torn_tails += s.torn_tails;
                totals.idempotent_acks += s.idempotent_acks;
                totals.idempotent_retries += s.idempotent_retries;
                totals.idempotent_lost_acks += s.idempotent_lost_acks;
                totals.group_commits += s.group_commits_acked;
                totals.duplicates_suppressed += s.duplicates_suppressed;
                totals.consumer_reads += s.consumer_fetches;
                totals.producer_ids += s.producer_ids_granted;
                if cli.verbose || (seed - cli.first_seed) % every == 0 {
                    outln!(
                        "seed {seed}: {} events, {} elections, {} commits, {} offsets, {} lies, {} ms simulated, trace {:016x}",
                        s.events, s.elections, s.commits, s.committed_offsets, s.liar_messages, s.sim_time_ms, s.trace_hash
                    )?;
                }
            }
            Err(v) => {
                outln!("{v}")?;
                print_totals(cli, &totals, 1)?;
                return Ok(ExitCode::FAILURE);
            }
        }
    }
    print_totals(cli, &totals, 0)?;
    Ok(ExitCode::SUCCESS)
}

/// The disruption scenario over the seeds: the exit code, or the error of a write to stdout.
#[allow(clippy::manual_is_multiple_of)]
fn run_disruption_seeds(cli: &Cli) -> std::io::Result<ExitCode> {
    let pre_vote = !cli.no_prevote;
    let every = (cli.seeds / 20).max(1);
    let (mut seeds, mut disrupted, mut elections) = (0u64, 0u64, 0u64);
    let mut first_disrupted = None;
    for seed in cli.first_seed..cli.first_seed.saturating_add(cli.seeds) {
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            run_disruption(seed, cli.voters, pre_vote, cli.outcome_only)
        }));
        let run = match outcome {
            Ok(Ok(run)) => run,
            Ok(Err(v)) => {
                outln!("{v}")?;
                outln!("total: {seeds} seeds passed, 1 violation")?;
                return Ok(ExitCode::FAILURE);
            }
            Err(_) => {
                outln!("PANIC at seed {seed} (message above)")?;
                return Ok(ExitCode::FAILURE);
            }
        };
        seeds += 1;
        elections += run.elections;
        if run.disrupted() {
            disrupted += 1;
            first_disrupted.get_or_insert(seed);
        }
        if cli.verbose || (seed - cli.first_seed) % every == 0 {
            outln!(
                "seed {seed}: {:?} follower {} for {} ms under leader {} of epoch {}{}: {} elections, epoch +{}",
                run.cut, run.follower, run.cut_ms, run.leader, run.epoch,
                if run.quiet { " (quiet)" } else { "" }, run.elections, run.epoch_raise
            )?;
        }
    }
    outln!(
        "total: {seeds} seeds, {disrupted} disrupted (first: {first_disrupted:?}), {elections} elections, pre-vote {}",
        if pre_vote { "on" } else { "off" }
    )?;
    Ok(ExitCode::SUCCESS)
}

/// The run's totals: a sentence, then one line of `key=value` pairs for scripts
/// (docs/simulation.md, "Running it").
fn print_totals(cli: &Cli, t: &Totals, violations: u64) -> std::io::Result<()> {
    outln!(
        "total: {} seeds passed, {} events, {} elections, {} commits, {} lies, {} AlterQuorum \
         requests, {} reassignments completed, {} voter changes committed, {} voter disks lost, \
         {} log starts moved, {} logs reset, {violations} violations",
        t.seeds,
        t.events,
        t.elections,
        t.commits,
        t.lies,
        t.alter_requests,
        t.reassignments,
        t.voter_changes,
        t.voter_disks_lost,
        t.retentions,
        t.resets,
    )?;
    // storage_faults: crashes that tore or lost unsynced log writes, the simulated disk's only
    // fault so far; repairs_or_halts: none of those needs one (recovery keeps the durable
    // prefix), so it counts what no fault yet causes.
    outln!(
        "summary: replicas={} seeds={} events={} storage_faults={} repairs_or_halts=0 \
         idempotent_acks={} idempotent_retries={} idempotent_lost_acks={} duplicates_suppressed={} \
         producer_ids_granted={} producer_snapshots={} consumer_reads_checked={} \
         group_commits_acked={} violations={violations}",
        cli.voters + cli.observers,
        t.seeds + violations,
        t.events,
        t.torn_tails,
        t.idempotent_acks,
        t.idempotent_retries,
        t.idempotent_lost_acks,
        t.duplicates_suppressed,
        t.producer_ids,
        t.producer_snapshots,
        t.consumer_reads,
        t.group_commits,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The command line of a replay string (what follows `--`).
    fn parsed(replay: &str) -> Cli {
        let args = replay.split("  #").next().unwrap();
        let args = args.split(" -- ").nth(1).expect("cargo run ... -- args");
        Cli::try_parse_from(std::iter::once("ringraft-sim").chain(args.split_whitespace()))
            .unwrap_or_else(|e| panic!("{replay}: {e}"))
    }

    /// Every replay command a failing seed prints runs that seed again under the same flags:
    /// parsed back, it gives the same configuration, for all 1,024 settings of its ten flags.
    #[test]
    fn a_replay_command_gives_back_its_configuration() {
        for bits in 0u32..1024 {
            let on = |i: u32| bits & (1 << i) != 0;
            let mut cfg = SimConfig::random(41, 300, 5, 2);
            cfg.bootstrap_observers = on(0);
            cfg.delete_state = on(1);
            cfg.outcome_only = on(2);
            cfg.liar = on(3);
            cfg.pre_vote = on(4);
            cfg.tick_before_input = on(5);
            cfg.retention = on(6);
            cfg.reassign = on(7);
            cfg.refresh_fetches = on(8);
            cfg.idempotent_producers = (bits % 3) as usize;
            cfg.producer_stalls = cfg.idempotent_producers > 0 && on(9);
            cfg.group_commits = on(2) != on(9);
            let replay = cfg.replay_command();
            let cli = parsed(&replay);
            assert_eq!((cli.seeds, cli.first_seed), (1, 41), "{replay}");
            let again = seed_config(&cli, cli.first_seed);
            assert_eq!(again.replay_command(), replay);
            assert_eq!(again.group_commits, on(2) != on(9), "{replay}");
            assert_eq!(
                (
                    again.liar,
                    again.pre_vote,
                    again.retention,
                    again.reassign,
                    again.refresh_fetches,
                    again.idempotent_producers,
                    again.producer_stalls
                ),
                (
                    on(3),
                    on(4),
                    on(6),
                    on(7),
                    on(8),
                    (bits % 3) as usize,
                    (bits % 3) > 0 && on(9)
                ),
                "{replay}"
            );
        }
    }
    /// A disruption seed's replay command runs the disruption scenario for that seed again,
    /// with its voters and both of its flags.
    #[test]
    fn a_disruption_replay_command_gives_back_its_run() {
        use engine::sim::disruption_replay_command;
        for (pre_vote, outcome_only) in [(true, false), (false, true), (false, false), (true, true)]
        {
            let replay = disruption_replay_command(17, 5, pre_vote, outcome_only);
            let cli = parsed(&replay);
            assert!(cli.disruption, "{replay}");
            assert_eq!(
                (cli.seeds, cli.first_seed, cli.voters),
                (1, 17, 5),
                "{replay}"
            );
            assert_eq!(
                (!cli.no_prevote, cli.outcome_only),
                (pre_vote, outcome_only)
            );
        }
    }
}
