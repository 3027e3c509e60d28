//! The running node: configuration, the directory lock, shutdown signals and the raft thread's
//! event loop ([`runtime::Node`]).

mod api_table;
mod brokers;
pub mod config;
pub mod counters;
pub mod lock;
pub mod metrics;
mod resolver;
pub mod runtime;
mod sasl_worker;
mod session;
pub mod signals;
pub mod startup_checks;
mod stepping;

pub use config::{ConfigError, LogFormat, NodeConfig, VoterAddress};
pub use runtime::{serve, Node, NodeError};
