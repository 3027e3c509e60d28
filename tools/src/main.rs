//! `ringraft`: the node and its admin tool.
use clap::Parser;

#[derive(Parser)]
#[command(
    name = "ringraft",
    version,
    about = "A Raft replicated log (KIP-595 draft) on io_uring"
)]
struct Cli {}

fn main() {
    let _ = Cli::parse();
}
