//! Kafka wire format: framing, headers and primitive types (docs/protocol.md section 13).
//! Message codecs (one module per API) build on these.

pub mod api;
pub mod broker_list;
pub mod frame;
pub mod header;
pub mod kafka;
pub mod primitives;
pub mod quorum;

pub use frame::{FrameDecoder, FrameError};
pub use header::{RequestHeader, RequestPrefix, ResponseHeader};
pub use primitives::{WireError, WireReader, WireStr, WireWriter};
