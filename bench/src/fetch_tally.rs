//! What a consumer of the load generator checks and counts in each Fetch answer, kept free of
//! sockets so the checks can be tested on their own: the records field is split into batches by
//! their headers (RecordBatch v2, 61 bytes: offsets, record count, the control flag), and each
//! batch must continue the offsets read so far. A gap (a batch starting past the next offset)
//! or a repeat (a batch wholly before it) is an error naming the offsets, never skipped.
//!
//! Only the headers are read: the node validated every batch in full (CRC, records) when it was
//! produced and again when it was read from the log (docs/storage.md, "Reads off the writer
//! thread"), and a consumer benchmark should measure the serving, not the client's CRC.

use engine::record::{peek_batch_len, BatchHeader, RecordError, BATCH_HEADER_LEN};

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum TallyError {
    /// The batch starts past the next offset: records in between were never delivered.
    #[error("gap: expected a batch from offset {expected}, got one from {base} (to {last})")]
    Gap { expected: i64, base: i64, last: i64 },
    /// The batch ends before the next offset: its records were delivered already.
    #[error("repeat: expected a batch from offset {expected}, got {base}..={last} again")]
    Repeat { expected: i64, base: i64, last: i64 },
    /// A batch after the first of an answer starts before the next offset (only the first may
    /// straddle the fetch offset, as Kafka answers a fetch from inside a batch).
    #[error("overlap: expected a batch from offset {expected}, got {base}..={last}")]
    Overlap { expected: i64, base: i64, last: i64 },
    #[error("undecodable batch at byte {at} of the answer: {source}")]
    Batch { at: usize, source: RecordError },
}

/// What one answer added.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Counts {
    /// Records of data batches (from each header's record count).
    pub records: u64,
    pub batches: u64,
    /// Control batches (a leader's LeaderChange, ...) and their records, counted apart.
    pub control_records: u64,
    pub control_batches: u64,
    /// Bytes of the whole records field, as received.
    pub bytes: u64,
    /// Bytes of an incomplete last batch (a server may cut its answer at the byte limit; Kafka
    /// does, ringraft sends whole batches): not counted, fetched again from its start.
    pub partial_bytes: u64,
}

/// The next offset a consumer expects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Position {
    pub next: i64,
}

impl Position {
    pub fn new(next: i64) -> Self {
        assert!(next >= 0, "an offset is never negative");
        Self { next }
    }

    /// Checks and counts the batches of one answer's records field; on success the position
    /// is past the last whole batch. On an error the position is left where it was.
    pub fn accept(&mut self, records: &[u8]) -> Result<Counts, TallyError> {
        let mut counts = Counts {
            bytes: records.len() as u64,
            ..Counts::default()
        };
        let mut next = self.next;
        let mut at = 0;
        while at < records.len() {
            let rest = &records[at..];
            let batch = |source| TallyError::Batch { at, source };
            let len = match peek_batch_len(rest).map_err(batch)? {
                Some(len) if len <= rest.len() && rest.len() >= BATCH_HEADER_LEN => len,
                // Fewer bytes than the batch holds: the answer was cut inside it.
                _ => {
                    counts.partial_bytes = rest.len() as u64;
                    break;
                }
            };
            let header = BatchHeader::read(rest).map_err(batch)?;
            let (base, last) = (header.base_offset, header.last_offset());
            let records_from = match base.cmp(&next) {
                std::cmp::Ordering::Equal => u64::try_from(header.records_count).expect(">= 1"),
                std::cmp::Ordering::Greater => {
                    return Err(TallyError::Gap {
                        expected: next,
                        base,
                        last,
                    })
                }
                std::cmp::Ordering::Less if last < next => {
                    return Err(TallyError::Repeat {
                        expected: next,
                        base,
                        last,
                    })
                }
                // Inside the batch: only the first batch of an answer may hold the fetch
                // offset past its base; count the records from it on.
                std::cmp::Ordering::Less if at == 0 => (last - next + 1) as u64,
                std::cmp::Ordering::Less => {
                    return Err(TallyError::Overlap {
                        expected: next,
                        base,
                        last,
                    })
                }
            };
            if header.is_control() {
                counts.control_batches += 1;
                counts.control_records += records_from;
            } else {
                counts.batches += 1;
                counts.records += records_from;
            }
            next = header.next_offset();
            at += len;
        }
        self.next = next;
        Ok(counts)
    }
}

#[cfg(test)]
mod tests {
    use engine::record::{control::LeaderChange, RecordBatchBuilder};

    use super::*;

    fn batch(base: i64, records: usize) -> Vec<u8> {
        let mut builder = RecordBatchBuilder::new(base, 1);
        for _ in 0..records {
            builder.append(0, None, Some(b"value"), &[]);
        }
        builder.build().to_vec()
    }

    fn control(base: i64) -> Vec<u8> {
        let change = LeaderChange {
            version: 0,
            leader_id: 1,
            voters: vec![1, 2, 3],
            granting_voters: vec![1, 2],
        };
        change.to_batch(base, 1, 0).to_vec()
    }

    fn concat(parts: &[Vec<u8>]) -> Vec<u8> {
        parts.concat()
    }

    #[test]
    fn counts_records_from_the_headers_and_control_batches_apart() {
        let answer = concat(&[control(0), batch(1, 3), batch(4, 1)]);
        let mut position = Position::new(0);
        let counts = position.accept(&answer).unwrap();
        assert_eq!(
            counts,
            Counts {
                records: 4,
                batches: 2,
                control_records: 1,
                control_batches: 1,
                bytes: answer.len() as u64,
                partial_bytes: 0,
            }
        );
        assert_eq!(position.next, 5);
        // The next answer continues there; an empty one changes nothing.
        assert_eq!(position.accept(&[]).unwrap(), Counts::default());
        assert_eq!(position.accept(&batch(5, 2)).unwrap().records, 2);
        assert_eq!(position.next, 7);
    }

    #[test]
    fn a_gap_is_an_error_and_the_position_stays() {
        let mut position = Position::new(0);
        let answer = concat(&[batch(0, 2), batch(3, 1)]);
        assert_eq!(
            position.accept(&answer),
            Err(TallyError::Gap {
                expected: 2,
                base: 3,
                last: 3
            })
        );
        assert_eq!(position.next, 0);
        let mut later = Position::new(10);
        assert!(matches!(
            later.accept(&batch(11, 1)),
            Err(TallyError::Gap { expected: 10, .. })
        ));
    }

    #[test]
    fn a_repeat_is_an_error() {
        let mut position = Position::new(0);
        position.accept(&batch(0, 2)).unwrap();
        assert_eq!(
            position.accept(&batch(0, 2)),
            Err(TallyError::Repeat {
                expected: 2,
                base: 0,
                last: 1
            })
        );
        // Within one answer too.
        let mut fresh = Position::new(0);
        let twice = concat(&[batch(0, 2), batch(0, 2)]);
        assert!(matches!(
            fresh.accept(&twice),
            Err(TallyError::Repeat { expected: 2, .. })
        ));
    }

    #[test]
    fn only_the_first_batch_may_hold_the_fetch_offset_inside() {
        // A fetch from offset 2 answered from the batch 0..=4: records 2, 3, 4 are new.
        let mut position = Position::new(2);
        let counts = position
            .accept(&concat(&[batch(0, 5), batch(5, 1)]))
            .unwrap();
        assert_eq!((counts.records, position.next), (4, 6));
        // Past the first, a batch overlapping what was read is refused.
        let mut position = Position::new(0);
        let overlapping = concat(&[batch(0, 3), batch(1, 4)]);
        assert_eq!(
            position.accept(&overlapping),
            Err(TallyError::Overlap {
                expected: 3,
                base: 1,
                last: 4
            })
        );
    }

    #[test]
    fn an_incomplete_last_batch_is_left_for_the_next_fetch() {
        let whole = batch(0, 2);
        let cut = batch(2, 3);
        for keep in [5, BATCH_HEADER_LEN - 1, BATCH_HEADER_LEN + 3, cut.len() - 1] {
            let answer = concat(&[whole.clone(), cut[..keep].to_vec()]);
            let mut position = Position::new(0);
            let counts = position.accept(&answer).unwrap();
            assert_eq!((counts.records, counts.batches), (2, 1), "kept {keep}");
            assert_eq!(counts.partial_bytes, keep as u64);
            assert_eq!(position.next, 2);
        }
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        let mut position = Position::new(0);
        let mut bad = batch(0, 1);
        bad[16] = 1; // magic
        assert!(matches!(
            position.accept(&bad),
            Err(TallyError::Batch { at: 0, .. })
        ));
        let mut negative = batch(0, 1);
        negative[8..12].copy_from_slice(&(-5i32).to_be_bytes());
        assert!(position.accept(&negative).is_err());
        assert_eq!(position.next, 0);
    }
}
