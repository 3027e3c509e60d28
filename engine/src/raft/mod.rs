//! The sans-IO consensus core: KIP-595 (early draft) as a pure state machine.
//!
//! Inputs (messages, ticks, durability reports, client appends) go in through
//! `RaftCore::step`; outputs (messages, quorum-state writes, log operations, commits) come out,
//! to be carried out in order by the driver. No clock, socket, file or RNG inside.
//!
//! Modules, one concept each: `admission` (bounds every peer message must meet before it
//! can change anything), `epoch_state` (the role in the current epoch with the role's data),
//! `quorum_state` (holds the one `EpochState`: the only place role transitions happen),
//! `core` (dispatch, transitions' side effects, timers), `vote`, `quorum_epoch`
//! (Begin/EndQuorumEpoch), `fetch` (both sides of FetchQuorumRecords), `discovery`
//! (common response rules, FindQuorum, DescribeQuorum), `endpoints` (voter endpoints learned
//! through FindQuorum), `append` (client appends),
//! `consumer` (a consumer's read, ClientFetch, and the read-only queries of ListOffsets and
//! OffsetForLeaderEpoch), `leader` (replica progress, HW, parked fetches), `log_state`,
//! `tail_cache`,
//! `retention` (the log start: how far retention may go, a replica behind it),
//! `requests` (in-flight requests, timeouts, backoff), `rng`.

pub mod admission;
mod append;
mod consumer;
mod core;
mod discovery;
mod endpoints;
mod epoch_state;
pub mod error;
mod fetch;
pub(crate) mod leader;
mod log_state;
pub mod message;
mod quorum_epoch;
pub mod quorum_state;
pub(crate) mod reassign;
mod record_glue;
mod requests;
mod retention;
mod rng;
mod tail_cache;
pub mod types;
mod vote;
pub mod voter_set;

#[cfg(test)]
mod tests;

pub use self::core::RaftCore;
pub use consumer::UNDEFINED_EPOCH_END;
pub use discovery::NAMED_LEADER_UNKNOWINGLY;
pub use error::ErrorCode;
pub use leader::Lease;
pub use message::*;
pub use quorum_state::{InitError, QuorumState, TransitionError};
pub use types::*;

/// A node's role (docs/protocol.md section 2). Observers only ever are Unattached or Follower.
/// Derived from the one `EpochState` that `QuorumState` holds (`QuorumState::role`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Role {
    Unattached,
    Voted,
    /// Asking for pre-votes in its epoch before it stands (docs/protocol.md, "Pre-vote").
    Prospective,
    Candidate,
    Leader,
    Follower,
    Resigned,
}
