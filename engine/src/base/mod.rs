//! The bottom layer: ids, offsets, epochs and time, and the leader-epoch cache. The record
//! format, the log, the writer, the quorum-state store, the consensus core and the simulator all
//! build on these; this module imports nothing else of the crate (docs/architecture.md, "Layers").

mod epoch_cache;
pub mod ids;
pub mod sealed_line;

pub use epoch_cache::{EpochCache, EpochCacheError};
pub use ids::{DirectoryId, Epoch, NodeId, Offset, OffsetAndEpoch, TimeMs};
