//! `ringraft-bench`: load generator and log benchmark.
//!
//! `ringraft-bench log --dir DIR ...` measures the storage engine alone (GroupCommitWriter on one
//! node's log). A cluster mode joins as another subcommand.

mod log_bench;

use clap::{Parser, Subcommand};

#[derive(Parser, Debug)]
#[command(
    name = "ringraft-bench",
    about = "ringraft load generator and benchmarks"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Closed-loop appenders against the log's group-commit writer on one disk.
    Log(log_bench::LogArgs),
}

fn main() {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Log(args) => log_bench::run(args),
    };
    if let Err(error) = result {
        eprintln!("ringraft-bench: {error}");
        std::process::exit(1);
    }
}
