//! The quorum-state file.
