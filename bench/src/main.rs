//! `ringraft-bench`: load generator and log benchmark.
//!
//! With no subcommand (or `cluster`) it starts a local cluster of `ringraft serve` processes (or
//! joins one with `--bootstrap-server`) and drives Produce load at its leader.
//! `ringraft-bench log --dir DIR ...` measures the storage engine alone (GroupCommitWriter on one
//! node's log). `ringraft-bench consume ...` reads the log with Fetch, alone or beside the
//! produce load. `ringraft-bench failover ...` measures how long the client waits for
//! acknowledgements when the leader fails. `ringraft-bench check ...` runs a cluster under a
//! nemesis with producers and consumers and checks the history (docs/testing.md, "The
//! correctness checker").
//!
//! Output goes through `out::line`: a closed stdout stops a run quietly, status 141
//! (docs/operations.md).

#[macro_use]
extern crate cli_out;
use cli_out as out;

mod catch_up;
mod check;
mod check_clients;
mod check_history;
mod check_svg;
mod cluster_bench;
mod consume_bench;
mod consume_load;
mod failover;
mod failover_client;
mod failover_figures;
mod fetch_tally;
mod idle_conns;
mod log_bench;
mod metrics_scrape;
mod observers;
mod open_loop;
mod proc_sample;
mod produce_load;
mod svg_chart;

use clap::{Parser, Subcommand};

#[derive(Parser, Debug)]
#[command(
    name = "ringraft-bench",
    about = "ringraft load generator and benchmarks",
    args_conflicts_with_subcommands = true
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    /// With no subcommand: the `cluster` benchmark with these options.
    #[command(flatten)]
    cluster: cluster_bench::ClusterArgs,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Start a local cluster (or join one) and drive Produce load at its leader (the default).
    Cluster(cluster_bench::ClusterArgs),
    /// Closed-loop appenders against the log's group-commit writer on one disk.
    Log(log_bench::LogArgs),
    /// Consumers reading the log with Fetch (from the start by default), alone or beside the
    /// produce load, in phases on one cluster (started here, or `--bootstrap-server`).
    Consume(consume_bench::ConsumeArgs),
    /// A local 3-voter cluster under acks=-1 load while the leader is killed, stopped or cut
    /// off and a follower restarted or cut off, cycle after cycle: the client-seen
    /// unavailability per fault kind and the elections the undoing caused (docs/benchmarks.md,
    /// "Failover").
    Failover(failover::FailoverArgs),
    /// A correctness checker: a local 3-voter cluster under a nemesis (kill, pause, restart;
    /// partition, sever, isolate and disk-full as root) while plain and idempotent producers and consumers run,
    /// then the history checked as Jepsen's queue workload checks it: a verdict per check,
    /// the history (JSON lines) and an SVG timeline; exit 1 on any violation
    /// (docs/testing.md, "The correctness checker").
    Check(check::CheckArgs),
}

fn main() {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli: Cli = out::parse_args();
    let result = match cli.command {
        None => cluster_bench::run(cli.cluster),
        Some(Command::Cluster(args)) => cluster_bench::run(args),
        Some(Command::Log(args)) => log_bench::run(args),
        Some(Command::Consume(args)) => consume_bench::run(args),
        Some(Command::Failover(args)) => failover::run(args),
        Some(Command::Check(args)) => check::run(args),
    };
    // A closed stdout is no failure of the run: status 141, no message (docs/operations.md).
    if out::closed() {
        std::process::exit(out::CLOSED_STATUS.into());
    }
    if let Err(error) = result {
        use std::io::Write;
        let _ = writeln!(std::io::stderr(), "ringraft-bench: {error}");
        std::process::exit(1);
    }
}
