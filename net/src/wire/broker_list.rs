//! The brokers' client endpoints as they travel between nodes in FetchQuorumRecords tagged
//! fields (docs/protocol.md, "Client endpoints"): a fetcher's own endpoints in its request, and
//! the leader's whole broker list (with the in-sync voters) in a response, sent only to a
//! fetcher that holds another version of it. Every count and length is bounded on decode.

use bytes::Bytes;
use engine::raft::NodeId;
use thiserror::Error;

use super::kafka::flex::Flex;
use super::primitives::{WireError, WireReader, WireWriter};

/// Client endpoints a node may advertise (one per client listener).
pub const MAX_ENDPOINTS: usize = 16;
/// Bytes of a host name or a listener name.
pub const MAX_NAME_BYTES: usize = 255;
/// Brokers in a list: the voters plus the 1,024 observers a leader tracks, with room for a
/// voter set of up to 1,024.
pub const MAX_BROKERS: usize = 2048;

/// One advertised client endpoint: the listener's name (upper case, as configured), where to
/// connect.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct ClientEndpoint {
    pub listener: String,
    pub host: String,
    pub port: u16,
}

/// A broker and its client endpoints.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BrokerInfo {
    pub id: NodeId,
    pub endpoints: Vec<ClientEndpoint>,
}

/// The leader's broker list: every broker it knows (itself, the voters and the live observers
/// that sent endpoints) and the voters in sync with it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BrokerList {
    /// A fingerprint of the rest (never 0, which means "none held").
    pub version: u64,
    pub brokers: Vec<BrokerInfo>,
    pub in_sync: Vec<NodeId>,
}

#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum BrokerListError {
    #[error(transparent)]
    Wire(#[from] WireError),
    #[error("{what}: {count} is over the bound of {max}")]
    TooMany {
        what: &'static str,
        count: usize,
        max: usize,
    },
    #[error("{what}: {len} bytes is over the bound of {MAX_NAME_BYTES}")]
    NameTooLong { what: &'static str, len: usize },
    #[error("port {0} is not a TCP port")]
    BadPort(i32),
}

fn bounded(what: &'static str, count: usize, max: usize) -> Result<usize, BrokerListError> {
    if count > max {
        return Err(BrokerListError::TooMany { what, count, max });
    }
    Ok(count)
}

fn name(r: &mut WireReader, what: &'static str) -> Result<String, BrokerListError> {
    let value = r.compact_string(what)?;
    if value.len() > MAX_NAME_BYTES {
        return Err(BrokerListError::NameTooLong {
            what,
            len: value.len(),
        });
    }
    Ok(value)
}

/// A node's own endpoints (request tag 1).
pub fn encode_endpoints(w: &mut WireWriter, endpoints: &[ClientEndpoint]) {
    Flex(true).write_structs(w, endpoints, |w, e| {
        w.compact_string(&e.listener);
        w.compact_string(&e.host);
        w.i32(i32::from(e.port));
    });
}

pub fn decode_endpoints(r: &mut WireReader) -> Result<Vec<ClientEndpoint>, BrokerListError> {
    let count = r.compact_array_len("endpoints", 7)?.unwrap_or(0);
    let count = bounded("endpoints", count, MAX_ENDPOINTS)?;
    let mut endpoints = Vec::with_capacity(count);
    for _ in 0..count {
        let listener = name(r, "listener name")?;
        let host = name(r, "host")?;
        let port = r.i32("port")?;
        let port = u16::try_from(port)
            .ok()
            .filter(|p| *p != 0)
            .ok_or(BrokerListError::BadPort(port))?;
        r.skip_tagged_fields()?;
        endpoints.push(ClientEndpoint {
            listener,
            host,
            port,
        });
    }
    Ok(endpoints)
}

/// FNV-1a over the list's body: the same brokers and in-sync set give the same version on every
/// leader, so a new leader resends nothing a follower already holds.
fn fingerprint(body: &[u8]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in body {
        hash ^= u64::from(*byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    hash.max(1)
}

impl BrokerList {
    /// The list with its version, and its bytes for the response's tagged field.
    pub fn build(brokers: Vec<BrokerInfo>, in_sync: Vec<NodeId>) -> (BrokerList, Bytes) {
        let mut body = WireWriter::new();
        Flex(true).write_structs(&mut body, &brokers, |w, b| {
            w.i32(b.id);
            encode_endpoints(w, &b.endpoints);
        });
        body.compact_array_len(Some(in_sync.len()));
        for id in &in_sync {
            body.i32(*id);
        }
        body.no_tagged_fields();
        let body = body.into_inner();
        let version = fingerprint(&body);
        let mut w = WireWriter::with_capacity(body.len() + 8);
        w.i64(version as i64);
        let mut bytes = w.into_inner();
        bytes.extend_from_slice(&body);
        let list = BrokerList {
            version,
            brokers,
            in_sync,
        };
        (list, bytes.freeze())
    }

    pub fn decode(payload: Bytes) -> Result<BrokerList, BrokerListError> {
        let mut r = WireReader::new(payload);
        let version = r.i64("broker list version")? as u64;
        let count = r.compact_array_len("brokers", 6)?.unwrap_or(0);
        let count = bounded("brokers", count, MAX_BROKERS)?;
        let mut brokers = Vec::with_capacity(count);
        for _ in 0..count {
            let id = r.i32("broker id")?;
            let endpoints = decode_endpoints(&mut r)?;
            r.skip_tagged_fields()?;
            brokers.push(BrokerInfo { id, endpoints });
        }
        let count = r.compact_array_len("in sync", 4)?.unwrap_or(0);
        let count = bounded("in sync", count, MAX_BROKERS)?;
        let in_sync = (0..count)
            .map(|_| r.i32("in sync voter"))
            .collect::<Result<_, _>>()?;
        r.skip_tagged_fields()?;
        r.finish()?;
        Ok(BrokerList {
            version,
            brokers,
            in_sync,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn endpoint(listener: &str, port: u16) -> ClientEndpoint {
        ClientEndpoint {
            listener: listener.into(),
            host: "127.0.0.1".into(),
            port,
        }
    }

    fn sample() -> (BrokerList, Bytes) {
        BrokerList::build(
            vec![
                BrokerInfo {
                    id: 1,
                    endpoints: vec![endpoint("CLIENT", 9092), endpoint("INTERNAL", 9094)],
                },
                BrokerInfo {
                    id: 7,
                    endpoints: vec![],
                },
            ],
            vec![1],
        )
    }

    #[test]
    fn a_list_round_trips_and_its_version_follows_its_content() {
        let (list, bytes) = sample();
        assert_eq!(BrokerList::decode(bytes).unwrap(), list);
        assert_eq!(
            sample().0.version,
            list.version,
            "same content, same version"
        );
        let (other, _) = BrokerList::build(list.brokers.clone(), vec![1, 7]);
        assert_ne!(other.version, list.version, "the in-sync set is part of it");
        assert_ne!(list.version, 0);
    }

    #[test]
    fn every_prefix_is_an_error_not_a_panic() {
        let (_, bytes) = sample();
        for cut in 0..bytes.len() {
            assert!(BrokerList::decode(bytes.slice(..cut)).is_err(), "cut {cut}");
        }
    }

    /// At the bounds exactly (16 endpoints, a 255-byte name) is still accepted.
    #[test]
    fn at_the_bounds_is_accepted() {
        let mut many: Vec<ClientEndpoint> = (1..=16).map(|p| endpoint("L", p)).collect();
        many[0].host = "h".repeat(255);
        let mut w = WireWriter::new();
        encode_endpoints(&mut w, &many);
        let mut r = WireReader::new(w.into_inner().freeze());
        assert_eq!(decode_endpoints(&mut r).unwrap(), many);
    }

    /// The version is FNV-1a (64-bit) exactly, so leaders of every release agree on it: the
    /// reference values of the algorithm's published test vectors.
    #[test]
    fn the_version_is_fnv1a() {
        assert_eq!(fingerprint(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fingerprint(b"foobar"), 0x8594_4171_f739_67e8);
        assert_eq!(fingerprint(b""), 0xcbf2_9ce4_8422_2325);
    }

    #[test]
    fn over_the_bounds_is_refused() {
        let many: Vec<ClientEndpoint> = (1..=17).map(|p| endpoint("L", p)).collect();
        let mut w = WireWriter::new();
        encode_endpoints(&mut w, &many);
        let mut r = WireReader::new(w.into_inner().freeze());
        assert!(matches!(
            decode_endpoints(&mut r),
            Err(BrokerListError::TooMany { max: 16, .. })
        ));

        let long = ClientEndpoint {
            listener: "L".into(),
            host: "h".repeat(256),
            port: 1,
        };
        let mut w = WireWriter::new();
        encode_endpoints(&mut w, &[long]);
        let mut r = WireReader::new(w.into_inner().freeze());
        assert!(matches!(
            decode_endpoints(&mut r),
            Err(BrokerListError::NameTooLong { len: 256, .. })
        ));

        let mut w = WireWriter::new();
        w.compact_array_len(Some(1));
        w.compact_string("L");
        w.compact_string("h");
        w.i32(70_000);
        w.no_tagged_fields();
        let mut r = WireReader::new(w.into_inner().freeze());
        assert_eq!(
            decode_endpoints(&mut r),
            Err(BrokerListError::BadPort(70_000))
        );

        // A broker count over the bound is refused before anything is allocated for it.
        let mut w = WireWriter::new();
        w.i64(5);
        w.compact_array_len(Some(MAX_BROKERS + 1));
        let mut payload = w.into_inner();
        payload.extend_from_slice(&vec![0u8; 6 * (MAX_BROKERS + 1)]);
        assert!(matches!(
            BrokerList::decode(payload.freeze()),
            Err(BrokerListError::TooMany {
                what: "brokers",
                ..
            })
        ));
    }
}
