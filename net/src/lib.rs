//! Bytes on the wire, the transport, the running node, and a client.
//!
//! - [`wire`]: Kafka framing, headers and primitive types; the quorum RPCs (`wire::quorum`) and
//!   the Kafka client APIs (`wire::kafka`).
//! - [`transport`]: the per-thread io_uring TCP event loop.
//! - [`node`]: configuration (`server.properties`) and the node runtime.
//! - [`client`]: a small blocking client for the tools, the load generator and the tests.

pub mod client;
pub mod node;
pub mod security;
pub mod transport;
pub mod wire;
