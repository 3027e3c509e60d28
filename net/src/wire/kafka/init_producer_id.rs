//! InitProducerId (key 22, v0-v4, flexible from v2): an idempotent producer asks for its
//! producer id and epoch before its first Produce.

use engine::raft::ErrorCode;

use super::flex::Flex;
use crate::wire::api::ApiSpec;
use crate::wire::primitives::{WireError, WireReader, WireWriter};

pub const INIT_PRODUCER_ID: i16 = 22;

pub const INIT_PRODUCER_ID_SPEC: ApiSpec =
    ApiSpec::new(INIT_PRODUCER_ID, "InitProducerId", 0..=4, Some(2));

/// A transactional id is an int16-length string before v2; the compact form could be longer,
/// so the same bound applies to it.
const MAX_TRANSACTIONAL_ID_BYTES: usize = i16::MAX as usize;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InitProducerIdRequest {
    /// None for an idempotent (non-transactional) producer.
    pub transactional_id: Option<String>,
    pub transaction_timeout_ms: i32,
    /// v3+; -1 when absent (a new producer).
    pub producer_id: i64,
    /// v3+; -1 when absent.
    pub producer_epoch: i16,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InitProducerIdResponse {
    pub throttle_time_ms: i32,
    pub error: ErrorCode,
    pub producer_id: i64,
    pub producer_epoch: i16,
}

impl InitProducerIdRequest {
    pub fn decode(r: &mut WireReader, version: i16) -> Result<Self, WireError> {
        let flex = Flex::of(&INIT_PRODUCER_ID_SPEC, version);
        let at = r.position();
        let transactional_id = flex.read_nullable_string(r, "transactional id")?;
        if let Some(id) = &transactional_id {
            if id.len() > MAX_TRANSACTIONAL_ID_BYTES {
                return Err(WireError::TooLong {
                    field: "transactional id",
                    at,
                    len: id.len(),
                    limit: MAX_TRANSACTIONAL_ID_BYTES,
                });
            }
        }
        let transaction_timeout_ms = r.i32("transaction timeout ms")?;
        let (producer_id, producer_epoch) = if version >= 3 {
            (r.i64("producer id")?, r.i16("producer epoch")?)
        } else {
            (-1, -1)
        };
        flex.read_end(r)?;
        Ok(Self {
            transactional_id,
            transaction_timeout_ms,
            producer_id,
            producer_epoch,
        })
    }

    pub fn encode(&self, w: &mut WireWriter, version: i16) {
        let flex = Flex::of(&INIT_PRODUCER_ID_SPEC, version);
        flex.write_nullable_string(w, self.transactional_id.as_deref());
        w.i32(self.transaction_timeout_ms);
        if version >= 3 {
            w.i64(self.producer_id);
            w.i16(self.producer_epoch);
        }
        flex.write_tags(w);
    }
}

impl InitProducerIdResponse {
    pub fn encode(&self, w: &mut WireWriter, version: i16) {
        let flex = Flex::of(&INIT_PRODUCER_ID_SPEC, version);
        w.i32(self.throttle_time_ms);
        w.i16(self.error.0);
        w.i64(self.producer_id);
        w.i16(self.producer_epoch);
        flex.write_tags(w);
    }

    pub fn decode(r: &mut WireReader, version: i16) -> Result<Self, WireError> {
        let flex = Flex::of(&INIT_PRODUCER_ID_SPEC, version);
        let response = Self {
            throttle_time_ms: r.i32("throttle time")?,
            error: ErrorCode(r.i16("error code")?),
            producer_id: r.i64("producer id")?,
            producer_epoch: r.i16("producer epoch")?,
        };
        flex.read_end(r)?;
        Ok(response)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A transactional id is at most what a classic STRING holds (32,767 bytes), in the compact
    /// encoding too: that length is read, one byte more is refused before the rest.
    #[test]
    fn a_transactional_id_is_bounded_by_what_a_classic_string_holds() {
        let version = INIT_PRODUCER_ID_SPEC.max_version;
        assert!(INIT_PRODUCER_ID_SPEC.is_flexible(version));
        for len in [32_767, 32_768] {
            let request = InitProducerIdRequest {
                transactional_id: Some("t".repeat(len)),
                transaction_timeout_ms: 60_000,
                producer_id: -1,
                producer_epoch: -1,
            };
            let mut w = WireWriter::new();
            request.encode(&mut w, version);
            let decoded = InitProducerIdRequest::decode(
                &mut WireReader::new(w.into_inner().freeze()),
                version,
            );
            if len == 32_767 {
                assert_eq!(decoded.unwrap(), request);
            } else {
                assert!(matches!(
                    decoded,
                    Err(WireError::TooLong {
                        len: 32_768,
                        limit: 32_767,
                        ..
                    })
                ));
            }
        }
    }
}
