//! Api keys and the versions this server speaks (docs/protocol.md section 1).

use std::ops::RangeInclusive;

/// An API this server knows, with its key and supported version range.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ApiSpec {
    pub key: i16,
    pub name: &'static str,
    pub min_version: i16,
    pub max_version: i16,
    /// The first flexible version (request header v2 / response header v1), if any.
    pub first_flexible: Option<i16>,
}

impl ApiSpec {
    /// API `key` spoken at `versions`, flexible from `first_flexible` (None: never). Checked
    /// where a constant is made: an empty range, or a first flexible version outside it, does
    /// not compile.
    pub const fn new(
        key: i16,
        name: &'static str,
        versions: RangeInclusive<i16>,
        first_flexible: Option<i16>,
    ) -> Self {
        let (min_version, max_version) = (*versions.start(), *versions.end());
        assert!(min_version >= 0 && min_version <= max_version);
        if let Some(first) = first_flexible {
            assert!(first >= min_version && first <= max_version);
        }
        ApiSpec {
            key,
            name,
            min_version,
            max_version,
            first_flexible,
        }
    }

    pub fn supports(&self, version: i16) -> bool {
        (self.min_version..=self.max_version).contains(&version)
    }

    /// Whether `version` uses the flexible headers (KIP-482).
    pub fn is_flexible(&self, version: i16) -> bool {
        self.first_flexible.is_some_and(|first| version >= first)
    }

    /// The response header is flexible too, except for ApiVersions, whose response header is
    /// always v0 so a client can read it before it knows what the server speaks.
    pub fn response_header_flexible(&self, version: i16) -> bool {
        self.key != API_VERSIONS && self.is_flexible(version)
    }
}

pub use engine::raft::api_key::{
    ALTER_QUORUM, BEGIN_QUORUM_EPOCH, DESCRIBE_QUORUM, END_QUORUM_EPOCH, FETCH_QUORUM_RECORDS,
    FIND_QUORUM, VOTE,
};
pub const API_VERSIONS: i16 = 18;

const fn quorum_rpc(key: i16, name: &'static str, max_version: i16) -> ApiSpec {
    ApiSpec::new(key, name, 0..=max_version, Some(0))
}

/// The first Vote version with PreVote (docs/protocol.md, "Pre-vote").
pub const VOTE_PRE_VOTE_VERSION: i16 = 1;

/// The quorum RPCs: flexible; version 0, and Vote 0-1 (v1 adds PreVote).
pub const QUORUM_APIS: [ApiSpec; 6] = [
    quorum_rpc(VOTE, "Vote", VOTE_PRE_VOTE_VERSION),
    quorum_rpc(BEGIN_QUORUM_EPOCH, "BeginQuorumEpoch", 0),
    quorum_rpc(END_QUORUM_EPOCH, "EndQuorumEpoch", 0),
    quorum_rpc(DESCRIBE_QUORUM, "DescribeQuorum", 0),
    quorum_rpc(FETCH_QUORUM_RECORDS, "FetchQuorumRecords", 0),
    quorum_rpc(FIND_QUORUM, "FindQuorum", 0),
];

/// AlterQuorum (docs/protocol.md, "AlterQuorum"): flexible v0. Not in [`QUORUM_APIS`] until a
/// node serves it (the API table advertises every entry there).
pub const ALTER_QUORUM_SPEC: ApiSpec = quorum_rpc(ALTER_QUORUM, "AlterQuorum", 0);

/// The spec of a quorum RPC by key.
pub fn quorum_api(key: i16) -> Option<&'static ApiSpec> {
    QUORUM_APIS.iter().find(|spec| spec.key == key)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_unique_and_private_ones_avoid_kafkas_range() {
        let mut keys: Vec<i16> = QUORUM_APIS.iter().map(|a| a.key).collect();
        keys.sort_unstable();
        keys.dedup();
        assert_eq!(keys.len(), QUORUM_APIS.len());
        for key in [FETCH_QUORUM_RECORDS, FIND_QUORUM, ALTER_QUORUM] {
            assert!(key >= 1000);
        }
        let vote = quorum_api(VOTE).unwrap();
        assert!(vote.is_flexible(0) && vote.is_flexible(1));
        assert!(vote.supports(0) && vote.supports(1) && !vote.supports(2));
        for spec in QUORUM_APIS.iter().filter(|s| s.key != VOTE) {
            assert_eq!(
                (spec.min_version, spec.max_version),
                (0, 0),
                "{}",
                spec.name
            );
        }
    }
}
