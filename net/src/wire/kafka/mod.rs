//! The Kafka client APIs a node serves, in Kafka's own layouts so existing clients negotiate and
//! append as they do with a Kafka broker: one module per API, beside the quorum RPCs
//! (`wire::quorum`).

mod api_versions;
mod describe_cluster;
mod flex;
mod metadata;
mod produce;
mod sasl;

pub use api_versions::*;
pub use describe_cluster::*;
pub use metadata::*;
pub use produce::*;
pub use sasl::*;
