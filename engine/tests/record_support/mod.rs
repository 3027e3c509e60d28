//! Shared by the record property tests (record_props) and the oracle tests (record_oracle).

use engine::record::control::LeaderChange;
use engine::record::RecordBatchBuilder;
use proptest::prelude::*;

/// One record as the property tests generate it: what goes into a batch, and what a parse
/// must give back.
#[derive(Clone, Debug)]
pub struct TestRecord {
    pub timestamp: i64,
    pub key: Option<Vec<u8>>,
    pub value: Option<Vec<u8>>,
    pub headers: Vec<(String, Option<Vec<u8>>)>,
}

impl TestRecord {
    /// Appends this record to `builder`.
    pub fn append_to(&self, builder: &mut RecordBatchBuilder) {
        let headers: Vec<(&str, Option<&[u8]>)> = self
            .headers
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_deref()))
            .collect();
        builder.append(
            self.timestamp,
            self.key.as_deref(),
            self.value.as_deref(),
            &headers,
        );
    }
}

/// A LeaderChange message of either version with up to `max_voters` voters and granting voters,
/// any ids: what both suites encode, ours against itself and against Kafka's.
pub fn leader_change(max_voters: usize) -> impl Strategy<Value = LeaderChange> {
    let ids = move || proptest::collection::vec(any::<i32>(), 0..max_voters);
    (0i16..=1, any::<i32>(), ids(), ids()).prop_map(
        |(version, leader_id, voters, granting_voters)| LeaderChange {
            version,
            leader_id,
            voters,
            granting_voters,
        },
    )
}
