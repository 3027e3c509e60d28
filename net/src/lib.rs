//! Bytes on the wire and (later) the running node.
//!
//! - [`node`]: configuration (`server.properties`) and, later, the node runtime.
//! - [`wire`]: Kafka framing, request/response headers and primitive types.
//! - [`transport`]: the per-thread io_uring TCP event loop.

pub mod node;
pub mod transport;
pub mod wire;
