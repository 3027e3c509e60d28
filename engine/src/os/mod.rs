//! Operating-system helpers below the log: block-aligned buffers for O_DIRECT, file syscalls
//! (preallocation, fsync of a directory, reads), CPU pinning and memory-lock limits.

pub mod aligned;
pub mod file;
