//! Request and response headers (docs/protocol.md section 13).
//!
//! Request header v1: ApiKey int16, ApiVersion int16, CorrelationId int32, ClientId
//! NULLABLE_STRING. v2 (flexible APIs) adds a tagged-field section; ClientId stays an int16-length
//! string so any server can read an ApiVersions header. Response header v0: CorrelationId;
//! v1 adds tagged fields; ApiVersions responses always use v0.

use super::primitives::{WireError, WireReader, WireStr, WireWriter};

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RequestHeader {
    pub api_key: i16,
    pub api_version: i16,
    pub correlation_id: i32,
    /// A slice of the request's frame: read on every request, used by none of this server's
    /// handlers, so it is not copied.
    pub client_id: Option<WireStr>,
}

/// The fixed part every request header starts with, readable before the API is known.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RequestPrefix {
    pub api_key: i16,
    pub api_version: i16,
    pub correlation_id: i32,
}

impl RequestPrefix {
    /// Bytes of the fixed prefix: the smallest frame that can be routed or answered.
    pub const LEN: usize = 8;

    pub fn read(r: &mut WireReader) -> Result<Self, WireError> {
        Ok(Self {
            api_key: r.i16("request api key")?,
            api_version: r.i16("request api version")?,
            correlation_id: r.i32("correlation id")?,
        })
    }
}

impl RequestHeader {
    /// Reads the header; `flexible` says whether the API version uses header v2.
    pub fn read(r: &mut WireReader, flexible: bool) -> Result<Self, WireError> {
        let prefix = RequestPrefix::read(r)?;
        Self::read_rest(r, prefix, flexible)
    }

    /// Reads what follows an already-read [`RequestPrefix`].
    pub fn read_rest(
        r: &mut WireReader,
        prefix: RequestPrefix,
        flexible: bool,
    ) -> Result<Self, WireError> {
        let client_id = r.nullable_wire_str("client id")?;
        if flexible {
            r.skip_tagged_fields()?;
        }
        Ok(Self {
            api_key: prefix.api_key,
            api_version: prefix.api_version,
            correlation_id: prefix.correlation_id,
            client_id,
        })
    }

    pub fn write(&self, w: &mut WireWriter, flexible: bool) {
        w.i16(self.api_key);
        w.i16(self.api_version);
        w.i32(self.correlation_id);
        w.nullable_string(self.client_id.as_deref());
        if flexible {
            w.no_tagged_fields();
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ResponseHeader {
    pub correlation_id: i32,
}

impl ResponseHeader {
    /// `flexible` selects header v1 (with tagged fields).
    pub fn read(r: &mut WireReader, flexible: bool) -> Result<Self, WireError> {
        let correlation_id = r.i32("correlation id")?;
        if flexible {
            r.skip_tagged_fields()?;
        }
        Ok(Self { correlation_id })
    }

    pub fn write(&self, w: &mut WireWriter, flexible: bool) {
        w.i32(self.correlation_id);
        if flexible {
            w.no_tagged_fields();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_v2_keeps_a_classic_client_id() {
        let header = RequestHeader {
            api_key: 18,
            api_version: 3,
            correlation_id: 7,
            client_id: Some("ab".into()),
        };
        let mut w = WireWriter::new();
        header.write(&mut w, true);
        let bytes = w.into_inner().freeze();
        assert_eq!(&bytes[..], &[0, 18, 0, 3, 0, 0, 0, 7, 0, 2, b'a', b'b', 0]);
        let mut r = WireReader::new(bytes);
        assert_eq!(RequestHeader::read(&mut r, true).unwrap(), header);
        r.finish().unwrap();
    }

    #[test]
    fn response_header_versions() {
        for flexible in [false, true] {
            let mut w = WireWriter::new();
            ResponseHeader { correlation_id: -5 }.write(&mut w, flexible);
            assert_eq!(w.len(), if flexible { 5 } else { 4 });
            let mut r = WireReader::new(w.into_inner().freeze());
            assert_eq!(
                ResponseHeader::read(&mut r, flexible)
                    .unwrap()
                    .correlation_id,
                -5
            );
        }
    }
}
