//! FindCoordinator (key 10, v0-v4, flexible from v3): which broker coordinates a consumer
//! group. One key in v0-v3, a batch of keys from v4 (docs/protocol.md, "Consumer groups").

use engine::raft::ErrorCode;

use super::flex::{since, Flex};
use crate::wire::api::ApiSpec;
use crate::wire::primitives::{WireError, WireReader, WireWriter};

pub const FIND_COORDINATOR: i16 = 10;

pub const FIND_COORDINATOR_SPEC: ApiSpec =
    ApiSpec::new(FIND_COORDINATOR, "FindCoordinator", 0..=4, Some(3));

/// KeyType: a consumer group (0) or a transactional id (1).
pub const KEY_TYPE_GROUP: i8 = 0;
pub const KEY_TYPE_TRANSACTION: i8 = 1;

/// Keys one request may name (v4+).
pub const MAX_COORDINATOR_KEYS: usize = 1_000;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FindCoordinatorRequest {
    /// v0-v3: the one key; v4+: the batch.
    pub keys: Vec<String>,
    /// v1+; [`KEY_TYPE_GROUP`] before.
    pub key_type: i8,
}

/// One coordinator found, or not.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Coordinator {
    /// v4+ only (the key it answers).
    pub key: String,
    pub node_id: i32,
    pub host: String,
    pub port: i32,
    pub error: ErrorCode,
    pub error_message: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FindCoordinatorResponse {
    pub throttle_time_ms: i32,
    /// v0-v3: exactly one, written in the top-level fields; v4+: one per key.
    pub coordinators: Vec<Coordinator>,
}

impl FindCoordinatorRequest {
    pub fn decode(r: &mut WireReader, version: i16) -> Result<Self, WireError> {
        let flex = Flex::of(&FIND_COORDINATOR_SPEC, version);
        let key = match version <= 3 {
            true => Some(flex.read_string(r, "key")?),
            false => None,
        };
        let key_type = since(version, 1, KEY_TYPE_GROUP, || r.i8("key type"))?;
        let keys = match key {
            Some(key) => vec![key],
            None => {
                let count = flex.read_array_len(r, "coordinator keys", 1)?;
                if count > MAX_COORDINATOR_KEYS {
                    return Err(WireError::TooMany {
                        field: "coordinator keys",
                        count,
                        limit: MAX_COORDINATOR_KEYS,
                    });
                }
                (0..count)
                    .map(|_| flex.read_string(r, "coordinator key"))
                    .collect::<Result<_, _>>()?
            }
        };
        flex.read_end(r)?;
        Ok(Self { keys, key_type })
    }

    pub fn encode(&self, w: &mut WireWriter, version: i16) {
        let flex = Flex::of(&FIND_COORDINATOR_SPEC, version);
        if version <= 3 {
            assert_eq!(self.keys.len(), 1, "v0-v3 carry one key");
            flex.write_string(w, &self.keys[0]);
        }
        if version >= 1 {
            w.i8(self.key_type);
        }
        if version >= 4 {
            flex.write_array_len(w, self.keys.len());
            for key in &self.keys {
                flex.write_string(w, key);
            }
        }
        flex.write_tags(w);
    }
}

impl FindCoordinatorResponse {
    pub fn encode(&self, w: &mut WireWriter, version: i16) {
        let flex = Flex::of(&FIND_COORDINATOR_SPEC, version);
        if version >= 1 {
            w.i32(self.throttle_time_ms);
        }
        if version <= 3 {
            assert_eq!(self.coordinators.len(), 1, "v0-v3 answer one key");
            let c = &self.coordinators[0];
            w.i16(c.error.0);
            if version >= 1 {
                flex.write_nullable_string(w, c.error_message.as_deref());
            }
            w.i32(c.node_id);
            flex.write_string(w, &c.host);
            w.i32(c.port);
        } else {
            flex.write_structs(w, &self.coordinators, |w, c| {
                flex.write_string(w, &c.key);
                w.i32(c.node_id);
                flex.write_string(w, &c.host);
                w.i32(c.port);
                w.i16(c.error.0);
                flex.write_nullable_string(w, c.error_message.as_deref());
            });
        }
        flex.write_tags(w);
    }

    pub fn decode(r: &mut WireReader, version: i16) -> Result<Self, WireError> {
        let flex = Flex::of(&FIND_COORDINATOR_SPEC, version);
        let throttle_time_ms = since(version, 1, 0, || r.i32("throttle time"))?;
        let coordinators = if version <= 3 {
            let error = ErrorCode(r.i16("error code")?);
            let error_message = since(version, 1, None, || {
                flex.read_nullable_string(r, "error message")
            })?;
            vec![Coordinator {
                key: String::new(),
                node_id: r.i32("node id")?,
                host: flex.read_string(r, "host")?,
                port: r.i32("port")?,
                error,
                error_message,
            }]
        } else {
            flex.read_structs(r, "coordinators", 13, |r| {
                Ok(Coordinator {
                    key: flex.read_string(r, "key")?,
                    node_id: r.i32("node id")?,
                    host: flex.read_string(r, "host")?,
                    port: r.i32("port")?,
                    error: ErrorCode(r.i16("error code")?),
                    error_message: flex.read_nullable_string(r, "error message")?,
                })
            })?
        };
        flex.read_end(r)?;
        Ok(Self {
            throttle_time_ms,
            coordinators,
        })
    }
}
