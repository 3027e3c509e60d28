//! SaslHandshake (key 17, v0-v1, never flexible) and SaslAuthenticate (key 36, v0-v2, flexible
//! from v2): the client names a mechanism, then the mechanism's tokens travel in SaslAuthenticate
//! bodies (docs/security.md, "SASL"). The tokens themselves are `security::sasl`'s business; this
//! module only frames them, and refuses tokens above [`MAX_AUTH_BYTES`].

use bytes::Bytes;
use engine::raft::ErrorCode;
use thiserror::Error;

use super::flex::{since, Flex};
use crate::wire::api::ApiSpec;
use crate::wire::primitives::{WireError, WireReader, WireWriter};

pub const SASL_HANDSHAKE: i16 = 17;
pub const SASL_AUTHENTICATE: i16 = 36;

pub const SASL_HANDSHAKE_SPEC: ApiSpec = ApiSpec::new(SASL_HANDSHAKE, "SaslHandshake", 0..=1, None);

pub const SASL_AUTHENTICATE_SPEC: ApiSpec =
    ApiSpec::new(SASL_AUTHENTICATE, "SaslAuthenticate", 0..=2, Some(2));

/// The largest SASL token either side accepts in a SaslAuthenticate body. PLAIN and SCRAM
/// messages are a few hundred bytes; anything near this is not a real exchange.
pub const MAX_AUTH_BYTES: usize = 64 * 1024;

/// Kafka's error codes of the SASL APIs (not in the quorum's table, `engine::raft::ErrorCode`).
pub const UNSUPPORTED_SASL_MECHANISM: ErrorCode = ErrorCode(33);
pub const ILLEGAL_SASL_STATE: ErrorCode = ErrorCode(34);
pub const SASL_AUTHENTICATION_FAILED: ErrorCode = ErrorCode(58);

/// Why a SASL request or response could not be decoded: a wire error, or a token above the
/// limit.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum SaslCodecError {
    #[error(transparent)]
    Wire(#[from] WireError),
    #[error("{field}: {len} bytes, above the limit of {limit}")]
    TooLong {
        field: &'static str,
        len: usize,
        limit: usize,
    },
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SaslHandshakeRequest {
    /// The mechanism the client wants, e.g. "SCRAM-SHA-512".
    pub mechanism: String,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SaslHandshakeResponse {
    pub error: ErrorCode,
    /// The mechanisms this server enables.
    pub mechanisms: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SaslAuthenticateRequest {
    /// The client's token, a slice of the request frame.
    pub auth_bytes: Bytes,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SaslAuthenticateResponse {
    pub error: ErrorCode,
    pub error_message: Option<String>,
    /// The server's token (challenge or final message; empty when there is none).
    pub auth_bytes: Bytes,
    /// v1+: milliseconds until the client must re-authenticate, 0 for never.
    pub session_lifetime_ms: i64,
}

/// BYTES / COMPACT_BYTES: never null, at most [`MAX_AUTH_BYTES`].
fn read_auth_bytes(flex: &Flex, r: &mut WireReader) -> Result<Bytes, SaslCodecError> {
    let at = r.position();
    let bytes = flex
        .read_nullable_bytes(r, "auth bytes")?
        .ok_or(WireError::UnexpectedNull {
            field: "auth bytes",
            at,
        })?;
    if bytes.len() > MAX_AUTH_BYTES {
        return Err(SaslCodecError::TooLong {
            field: "auth bytes",
            len: bytes.len(),
            limit: MAX_AUTH_BYTES,
        });
    }
    Ok(bytes)
}

impl SaslHandshakeRequest {
    pub fn decode(r: &mut WireReader, _version: i16) -> Result<Self, SaslCodecError> {
        let mechanism = r.string("mechanism")?;
        r.finish()?;
        Ok(Self { mechanism })
    }

    pub fn encode(&self, w: &mut WireWriter, _version: i16) {
        w.string(&self.mechanism);
    }
}

impl SaslHandshakeResponse {
    pub fn encode(&self, w: &mut WireWriter, _version: i16) {
        w.i16(self.error.0);
        w.array_len(Some(self.mechanisms.len()));
        for mechanism in &self.mechanisms {
            w.string(mechanism);
        }
    }

    pub fn decode(r: &mut WireReader, _version: i16) -> Result<Self, SaslCodecError> {
        let error = ErrorCode(r.i16("error code")?);
        let count = r.array_len("mechanisms", 2)?.unwrap_or(0);
        let mut mechanisms = Vec::with_capacity(count);
        for _ in 0..count {
            mechanisms.push(r.string("mechanism")?);
        }
        r.finish()?;
        Ok(Self { error, mechanisms })
    }
}

impl SaslAuthenticateRequest {
    pub fn decode(r: &mut WireReader, version: i16) -> Result<Self, SaslCodecError> {
        let flex = Flex::of(&SASL_AUTHENTICATE_SPEC, version);
        let auth_bytes = read_auth_bytes(&flex, r)?;
        flex.read_end(r)?;
        Ok(Self { auth_bytes })
    }

    pub fn encode(&self, w: &mut WireWriter, version: i16) {
        let flex = Flex::of(&SASL_AUTHENTICATE_SPEC, version);
        flex.write_nullable_bytes(w, Some(&self.auth_bytes));
        flex.write_tags(w);
    }
}

impl SaslAuthenticateResponse {
    pub fn encode(&self, w: &mut WireWriter, version: i16) {
        let flex = Flex::of(&SASL_AUTHENTICATE_SPEC, version);
        w.i16(self.error.0);
        flex.write_nullable_string(w, self.error_message.as_deref());
        flex.write_nullable_bytes(w, Some(&self.auth_bytes));
        if version >= 1 {
            w.i64(self.session_lifetime_ms);
        }
        flex.write_tags(w);
    }

    pub fn decode(r: &mut WireReader, version: i16) -> Result<Self, SaslCodecError> {
        let flex = Flex::of(&SASL_AUTHENTICATE_SPEC, version);
        let error = ErrorCode(r.i16("error code")?);
        let error_message = flex.read_nullable_string(r, "error message")?;
        let auth_bytes = read_auth_bytes(&flex, r)?;
        let session_lifetime_ms = since(version, 1, 0, || r.i64("session lifetime ms"))?;
        flex.read_end(r)?;
        Ok(Self {
            error,
            error_message,
            auth_bytes,
            session_lifetime_ms,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::primitives::assert_every_prefix_refused;

    #[test]
    fn sasl_messages_round_trip_in_every_version() {
        let handshake = SaslHandshakeRequest {
            mechanism: "SCRAM-SHA-256".into(),
        };
        let handshake_response = SaslHandshakeResponse {
            error: UNSUPPORTED_SASL_MECHANISM,
            mechanisms: vec!["PLAIN".into(), "SCRAM-SHA-512".into()],
        };
        for version in SASL_HANDSHAKE_SPEC.min_version..=SASL_HANDSHAKE_SPEC.max_version {
            let mut r = WireReader::new(WireWriter::bytes_of(|w| handshake.encode(w, version)));
            assert_eq!(
                SaslHandshakeRequest::decode(&mut r, version),
                Ok(handshake.clone())
            );
            let mut r = WireReader::new(WireWriter::bytes_of(|w| {
                handshake_response.encode(w, version)
            }));
            assert_eq!(
                SaslHandshakeResponse::decode(&mut r, version),
                Ok(handshake_response.clone())
            );
        }
        let authenticate = SaslAuthenticateRequest {
            auth_bytes: Bytes::from_static(b"n,,n=user,r=abc"),
        };
        for version in SASL_AUTHENTICATE_SPEC.min_version..=SASL_AUTHENTICATE_SPEC.max_version {
            let response = SaslAuthenticateResponse {
                error: SASL_AUTHENTICATION_FAILED,
                error_message: Some("no".into()),
                auth_bytes: Bytes::from_static(b"v=xyz"),
                session_lifetime_ms: if version >= 1 { 3_600_000 } else { 0 },
            };
            let mut r = WireReader::new(WireWriter::bytes_of(|w| authenticate.encode(w, version)));
            assert_eq!(
                SaslAuthenticateRequest::decode(&mut r, version),
                Ok(authenticate.clone())
            );
            let mut r = WireReader::new(WireWriter::bytes_of(|w| response.encode(w, version)));
            assert_eq!(
                SaslAuthenticateResponse::decode(&mut r, version),
                Ok(response)
            );
        }
    }

    /// The bound is 64 KiB (docs/security.md's figure), tokens up to it are read, one byte more
    /// is refused, and a null token is malformed.
    #[test]
    fn auth_bytes_are_bounded_and_never_null() {
        for version in 0..=2 {
            let at_limit = SaslAuthenticateRequest {
                auth_bytes: Bytes::from(vec![b'x'; 64 * 1024]),
            };
            let mut r = WireReader::new(WireWriter::bytes_of(|w| at_limit.encode(w, version)));
            assert!(SaslAuthenticateRequest::decode(&mut r, version).is_ok());

            let above = SaslAuthenticateRequest {
                auth_bytes: Bytes::from(vec![b'x'; MAX_AUTH_BYTES + 1]),
            };
            let mut r = WireReader::new(WireWriter::bytes_of(|w| above.encode(w, version)));
            assert_eq!(
                SaslAuthenticateRequest::decode(&mut r, version),
                Err(SaslCodecError::TooLong {
                    field: "auth bytes",
                    len: MAX_AUTH_BYTES + 1,
                    limit: MAX_AUTH_BYTES,
                })
            );

            // A null length: compact 0 (then the empty tag section), or int32 -1.
            let null: &'static [u8] = if version >= 2 {
                &[0, 0]
            } else {
                &[0xff, 0xff, 0xff, 0xff]
            };
            let null = Bytes::from_static(null);
            assert!(matches!(
                SaslAuthenticateRequest::decode(&mut WireReader::new(null), version),
                Err(SaslCodecError::Wire(WireError::UnexpectedNull { .. }))
            ));
        }
    }

    #[test]
    fn every_prefix_of_a_valid_encoding_fails_cleanly() {
        let response = SaslAuthenticateResponse {
            error: ErrorCode::NONE,
            error_message: None,
            auth_bytes: Bytes::from_static(b"v=signature"),
            session_lifetime_ms: 0,
        };
        for version in 0..=2 {
            let full = WireWriter::bytes_of(|w| response.encode(w, version));
            assert_every_prefix_refused(format_args!("v{version}"), &full, |r| {
                SaslAuthenticateResponse::decode(r, version)
            });
            let mut trailing = full.to_vec();
            trailing.push(0);
            let mut r = WireReader::new(Bytes::from(trailing));
            assert!(matches!(
                SaslAuthenticateResponse::decode(&mut r, version),
                Err(SaslCodecError::Wire(WireError::TrailingBytes {
                    trailing: 1
                }))
            ));
        }
    }
}
