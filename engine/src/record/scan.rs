//! Splitting a buffer of back-to-back batches: a read of a log segment, the records of a fetch
//! response or of a produce request.

use bytes::Bytes;

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

    fn fail(&mut self, error: RecordError) -> Option<Result<BatchView, RecordError>> {
        self.failed = true;
        Some(Err(error))
    }
}

impl Iterator for BatchIter {
    type Item = Result<BatchView, RecordError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.position == self.bytes.len() {
            return None;
        }
        assert!(self.position < self.bytes.len());
        let rest = &self.bytes[self.position..];
        let len = match peek_batch_len(rest) {
            Ok(Some(len)) => len,
            Ok(None) => {
                return self.fail(RecordError::TooShort {
                    available: rest.len(),
                    needed: LOG_OVERHEAD,
                })
            }
            Err(error) => return self.fail(error),
        };
        if len > rest.len() {
            return self.fail(RecordError::TooShort {
                available: rest.len(),
                needed: len,
            });
        }
        match BatchView::parse(self.bytes.slice(self.position..self.position + len)) {
            Ok(view) => {
                self.position += len;
                Some(Ok(view))
            }
            Err(error) => self.fail(error),
        }
    }
}
