//! ringraft's engine: everything a node keeps and decides, with no sockets.
//!
//! - [`base`]: ids, offsets, epochs, time and the leader-epoch cache (the bottom layer).
//! - [`record`]: Kafka RecordBatch v2 (the format on disk and on the wire).
//! - [`os`]: aligned buffers, file syscalls, CPU pinning (below the log).
//! - [`log`]: the segmented log, its offset index and leader-epoch cache, recovery.
//! - [`fail_stop`]: stopping the process on a durability failure or a panic.
//! - [`io`]: the io_uring `GroupCommitWriter` that makes appends durable.
//! - [`producers`]: idempotent-producer state rebuilt from batch headers (logic only);
//!   [`producer_ids`]: producer ids unique across leaders.
//! - [`quorum_state_store`]: the quorum-state file (election state), replaced atomically (IO).
//! - [`raft`]: the sans-IO consensus core of KIP-595 (draft): inputs in, outputs out.
//! - [`replica`]: the sans-IO replica around the core: the node's own decisions (idempotent
//!   produce), stepped like the core by the node and the simulator alike.
//! - [`stats`]: metric cells one thread writes and a scrape reads (counters, histograms).
//! - `sim` (feature `sim`): the seeded deterministic simulator that drives many cores.

pub mod base;
pub mod fail_stop;
pub mod groups;
pub mod io;
pub mod log;
pub mod os;
pub mod producer_ids;
pub mod producer_snapshot;
pub mod producer_snapshot_store;
pub mod producers;
pub mod quorum_state_store;
pub mod raft;
pub mod record;
pub mod replica;
#[cfg(feature = "sim")]
pub mod sim;
pub mod stats;
#[cfg(test)]
mod warnings_counter;
