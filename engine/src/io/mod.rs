//! The log's threads: the io_uring [`GroupCommitWriter`] thread that makes appends durable in groups, the reader thread that
//! serves catch-up reads and timestamp lookups off the writer's sequence, the bounded event
//! channel both report on, and the start-up probe that times the writer's two sync modes.

mod events;
mod group_plan;
pub mod reader;
pub mod sync_probe;
pub mod writer;

pub use events::EVENT_CAPACITY;
pub use reader::{LookupRequest, ReadRefused, ReadRequest, ReaderStats, READ_QUEUE_CAPACITY};
pub use sync_probe::{SyncModeSetting, SyncProbe};
pub use writer::{
    exit_on_fatal, GroupCommitWriter, RingInfo, SubmitError, SyncMode, WriterConfig, WriterError,
    WriterEvent, WriterRequest, WriterStats, READ_BYTES_PER_SEC, REQUEST_CAPACITY,
};
