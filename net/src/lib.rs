//! Bytes on the wire and (later) the running node.
//!
//! - [`wire`]: Kafka framing, request/response headers and primitive types.
//! - [`transport`]: the per-thread io_uring TCP event loop.

pub mod transport;
pub mod wire;
