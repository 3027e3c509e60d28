//! ApiVersions (key 18, v0-v4, flexible from v3): what a client asks first, and what this node
//! answers with every API it serves and its version range.

use engine::raft::ErrorCode;

use super::flex::{since, Flex};
use crate::wire::api::{self, ApiSpec};
use crate::wire::primitives::{WireError, WireReader, WireWriter};

pub const API_VERSIONS_SPEC: ApiSpec =
    ApiSpec::new(api::API_VERSIONS, "ApiVersions", 0..=4, Some(3));

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ApiVersionsRequest {
    pub client_software_name: Option<String>,
    pub client_software_version: Option<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ApiVersionRange {
    pub api_key: i16,
    pub min_version: i16,
    pub max_version: i16,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApiVersionsResponse {
    pub error: ErrorCode,
    pub api_keys: Vec<ApiVersionRange>,
    pub throttle_time_ms: i32,
}

impl ApiVersionsRequest {
    pub fn decode(r: &mut WireReader, version: i16) -> Result<Self, WireError> {
        let mut request = Self::default();
        if version >= 3 {
            request.client_software_name = Some(r.compact_string("client software name")?);
            request.client_software_version = Some(r.compact_string("client software version")?);
            r.skip_tagged_fields()?;
        }
        r.finish()?;
        Ok(request)
    }

    pub fn encode(&self, w: &mut WireWriter, version: i16) {
        if version >= 3 {
            w.compact_string(self.client_software_name.as_deref().unwrap_or(""));
            w.compact_string(self.client_software_version.as_deref().unwrap_or(""));
            w.no_tagged_fields();
        }
    }
}

impl ApiVersionsResponse {
    /// Versions above what the server supports are answered with UNSUPPORTED_VERSION in the v0
    /// body (docs/protocol.md section 13): the caller encodes such a response with `version = 0`.
    pub fn encode(&self, w: &mut WireWriter, version: i16) {
        let flex = Flex(version >= 3);
        w.i16(self.error.0);
        flex.write_structs(w, &self.api_keys, |w, key| {
            w.i16(key.api_key);
            w.i16(key.min_version);
            w.i16(key.max_version);
        });
        if version >= 1 {
            w.i32(self.throttle_time_ms);
        }
        flex.write_tags(w);
    }

    pub fn decode(r: &mut WireReader, version: i16) -> Result<Self, WireError> {
        let flex = Flex(version >= 3);
        let error = ErrorCode(r.i16("error code")?);
        let api_keys = flex.read_structs(r, "api keys", 6, |r| {
            Ok(ApiVersionRange {
                api_key: r.i16("api key")?,
                min_version: r.i16("min version")?,
                max_version: r.i16("max version")?,
            })
        })?;
        let throttle_time_ms = since(version, 1, 0, || r.i32("throttle time"))?;
        flex.read_end(r)?;
        Ok(Self {
            error,
            api_keys,
            throttle_time_ms,
        })
    }
}
