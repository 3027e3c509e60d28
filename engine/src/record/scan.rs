//! Splitting a buffer of back-to-back batches: a read of a log segment, the records of a fetch
//! response or of a produce request.

use bytes::Bytes;

use super::batch::Batch;
use super::error::RecordError;
use super::header::{peek_batch_len, LOG_OVERHEAD};
use super::view::BatchView;

/// Yields each batch of `bytes`, validated in full, in order. The first invalid or incomplete
/// batch yields its error and ends the iteration; [`BatchIter::position`] then tells where it
/// starts: recovery truncates the log there, a fetch client treats an incomplete last batch
/// (a response cut at its byte limit) as the end of the data.
#[derive(Clone, Debug)]
pub struct BatchIter {
    bytes: Bytes,
    position: usize,
    failed: bool,
}

impl BatchIter {
    pub fn new(bytes: Bytes) -> Self {
        Self {
            bytes,
            position: 0,
            failed: false,
        }
    }

    /// Byte offset of the next batch; after an error, of the batch that failed.
    pub fn position(&self) -> usize {
        self.position
    }

    /// True when the iteration ended at an error rather than at the end of the bytes.
    pub fn failed(&self) -> bool {
        self.failed
    }

    /// The next whole batch's bytes, checked by `check` (which also makes the item); an error
    /// ends the iteration where the failing batch starts.
    fn next_with<T>(
        &mut self,
        check: impl FnOnce(Bytes) -> Result<T, RecordError>,
    ) -> Option<Result<T, RecordError>> {
        if self.failed || self.position == self.bytes.len() {
            return None;
        }
        assert!(self.position < self.bytes.len());
        let rest = &self.bytes[self.position..];
        let located = match peek_batch_len(rest) {
            Ok(Some(len)) if len <= rest.len() => Ok(len),
            Ok(Some(len)) => Err(RecordError::TooShort {
                available: rest.len(),
                needed: len,
            }),
            Ok(None) => Err(RecordError::TooShort {
                available: rest.len(),
                needed: LOG_OVERHEAD,
            }),
            Err(error) => Err(error),
        };
        let checked = located.and_then(|len| {
            let item = check(self.bytes.slice(self.position..self.position + len))?;
            Ok((item, len))
        });
        match checked {
            Ok((item, len)) => {
                self.position += len;
                Some(Ok(item))
            }
            Err(error) => {
                self.failed = true;
                Some(Err(error))
            }
        }
    }

    /// The same batches as stored [`Batch`]es, checked only for framing and CRC-32C
    /// ([`Batch::from_stored`]): for batches that were validated in full when they entered the
    /// log (a follower's fetch answers, a replica's own log reads).
    pub fn stored(self) -> StoredBatchIter {
        StoredBatchIter(self)
    }
}

impl Iterator for BatchIter {
    type Item = Result<BatchView, RecordError>;

    fn next(&mut self) -> Option<Self::Item> {
        self.next_with(BatchView::parse)
    }
}

/// [`BatchIter::stored`].
#[derive(Clone, Debug)]
pub struct StoredBatchIter(BatchIter);

impl StoredBatchIter {
    /// Byte offset of the next batch; after an error, of the batch that failed.
    pub fn position(&self) -> usize {
        self.0.position
    }
}

impl Iterator for StoredBatchIter {
    type Item = Result<Batch, RecordError>;

    fn next(&mut self) -> Option<Self::Item> {
        self.0.next_with(Batch::from_stored)
    }
}
