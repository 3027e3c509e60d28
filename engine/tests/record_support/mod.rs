//! Shared by the record property tests (record_props) and the oracle tests (record_oracle).

use engine::record::RecordBatchBuilder;

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
