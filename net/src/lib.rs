//! Bytes on the wire and (later) the running node.
//!
//! - [`node`]: configuration (`server.properties`) and, later, the node runtime.
//! - [`wire`]: Kafka framing, request/response headers and primitive types.

pub mod node;
pub mod wire;
