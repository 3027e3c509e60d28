//! Bounds every client API request decoder applies (docs/protocol.md, "Kafka client APIs"):
//! topic names no longer than Kafka allows, and a fixed number of topics and of partitions per
//! request, so a hostile request costs at most a known amount of memory and work however its
//! length fields lie.

use super::flex::Flex;
use crate::wire::primitives::{WireError, WireReader, WireStr};

/// Kafka's longest legal topic name (`Topic.MAX_NAME_LENGTH`).
pub const MAX_TOPIC_NAME_BYTES: usize = 249;

/// At most this many topics, and this many partitions over all topics, in one request. This
/// server hosts one partition; real clients name it once (or a few times when they batch).
pub const MAX_ENTRIES_PER_REQUEST: usize = 1000;

/// What a request may still name: topics and partitions left before the limits.
#[derive(Debug)]
pub(super) struct Budget {
    topics: usize,
    partitions: usize,
}

/// Which of the two limits an array counts against.
#[derive(Clone, Copy, Debug)]
pub(super) enum Entries {
    Topics,
    Partitions,
}

impl Budget {
    pub(super) fn new() -> Self {
        Self {
            topics: MAX_ENTRIES_PER_REQUEST,
            partitions: MAX_ENTRIES_PER_REQUEST,
        }
    }

    /// Reads an array's length and spends it on `entries`; `min_element_bytes` as for any
    /// array.
    pub(super) fn read_len(
        &mut self,
        entries: Entries,
        flex: &Flex,
        r: &mut WireReader,
        field: &'static str,
        min_element_bytes: usize,
    ) -> Result<usize, WireError> {
        let left = match entries {
            Entries::Topics => &mut self.topics,
            Entries::Partitions => &mut self.partitions,
        };
        let count = flex.read_array_len(r, field, min_element_bytes)?;
        if count > *left {
            return Err(WireError::TooMany {
                field,
                count: MAX_ENTRIES_PER_REQUEST - *left + count,
                limit: MAX_ENTRIES_PER_REQUEST,
            });
        }
        *left -= count;
        Ok(count)
    }
}

/// A topic name (STRING or COMPACT_STRING) of at most [`MAX_TOPIC_NAME_BYTES`], its length
/// checked first. It stays a slice of the frame: a server reads one in every request.
pub(super) fn read_topic_name(flex: &Flex, r: &mut WireReader) -> Result<WireStr, WireError> {
    r.wire_str_at_most(flex.0, "topic name", MAX_TOPIC_NAME_BYTES)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::primitives::WireWriter;

    #[test]
    fn budget_counts_partitions_over_every_topic() {
        let mut w = WireWriter::new();
        for count in [600, 400, 1] {
            w.i32(count);
        }
        w.i32(0);
        let mut body = w.into_inner();
        body.resize(body.len() + 4000, 0);
        let mut r = WireReader::new(body.freeze());
        let flex = Flex(false);
        let mut budget = Budget::new();
        let mut read = |r: &mut WireReader| budget.read_len(Entries::Partitions, &flex, r, "p", 1);
        assert_eq!(read(&mut r), Ok(600));
        assert_eq!(read(&mut r), Ok(400));
        assert_eq!(
            read(&mut r),
            Err(WireError::TooMany {
                field: "p",
                count: 1001,
                limit: 1000
            })
        );
    }

    #[test]
    fn topic_names_above_kafkas_limit_are_refused() {
        for (len, ok) in [
            (MAX_TOPIC_NAME_BYTES, true),
            (MAX_TOPIC_NAME_BYTES + 1, false),
        ] {
            let mut w = WireWriter::new();
            w.compact_string(&"t".repeat(len));
            let mut r = WireReader::new(w.into_inner().freeze());
            let got = read_topic_name(&Flex(true), &mut r);
            assert_eq!(got.is_ok(), ok, "{len} bytes");
            if !ok {
                assert!(matches!(got, Err(WireError::TooLong { len: 250, .. })));
            }
        }
    }
}
