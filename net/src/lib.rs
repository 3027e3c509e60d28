//! Bytes on the wire and (later) the running node.
//!
//! - [`wire`]: Kafka framing, request/response headers and primitive types.

pub mod wire;
