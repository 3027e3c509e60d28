//! The Kafka client APIs a node serves, in Kafka's own layouts so existing clients negotiate and
//! append as they do with a Kafka broker: one module per API, beside the quorum RPCs
//! (`wire::quorum`). Request decoders apply the bounds of `limits`.

mod api_versions;
mod describe_cluster;
mod fetch;
mod find_coordinator;
pub(super) mod flex;
mod group_admin;
mod init_producer_id;
mod join_group;
mod limits;
mod list_offsets;
mod metadata;
mod offset_commit;
mod offset_for_leader_epoch;
mod produce;
mod produce_legacy;
mod sasl;
mod topics;

pub use api_versions::*;
pub use describe_cluster::*;
pub use fetch::*;
pub use find_coordinator::*;
pub use group_admin::*;
pub use init_producer_id::*;
pub use join_group::*;
pub use limits::{MAX_ENTRIES_PER_REQUEST, MAX_TOPIC_NAME_BYTES};
pub use list_offsets::*;
pub use metadata::*;
pub use offset_commit::*;
pub use offset_for_leader_epoch::*;
pub use produce::*;
pub use produce_legacy::*;
pub use sasl::*;
pub use topics::Topic;
