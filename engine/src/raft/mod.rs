//! The sans-IO consensus core: KIP-595 (early draft) as a pure state machine.
//!
//! Inputs (messages, ticks, durability reports, client appends) go in through
//! `RaftCore::step`; outputs (messages, quorum-state writes, log operations, commits) come out,
//! to be carried out in order by the driver. No clock, socket, file or RNG inside.

pub mod error;
pub mod message;
pub mod types;

pub use error::ErrorCode;
pub use message::*;
pub use types::*;

/// A node's role (protocol.md 2.2). Observers only ever are Unattached or Follower.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Role {
    Unattached,
    Voted,
    Candidate,
    Leader,
    Follower,
    Resigned,
}
