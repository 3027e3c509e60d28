//! Disk IO for the log: block-aligned buffers, file syscalls, and the io_uring
//! [`GroupCommitWriter`] thread that makes appends durable in groups.

pub mod aligned;
pub mod file;
pub mod writer;

pub use writer::{
    exit_on_fatal, GroupCommitWriter, RingInfo, SyncMode, WriterConfig, WriterError, WriterEvent,
    WriterRequest, WriterStats,
};
