//! The running node: configuration, thread wiring, request routing.

pub mod config;

pub use config::{ConfigError, NodeConfig, VoterAddress};
