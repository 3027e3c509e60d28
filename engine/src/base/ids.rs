//! The plain numbers everything is counted in. They stay Kafka's wire types (int32 ids and
//! epochs, int64 offsets); -1 for "none" appears only at the wire edge and in stored formats.

pub type NodeId = i32;
pub type Epoch = i32;
pub type Offset = i64;

/// Milliseconds on the driver's monotonic clock. Only differences matter to the core.
pub type TimeMs = u64;

/// An (offset, epoch) position, ordered by epoch first (docs/protocol.md, Vote: the log
/// up-to-date rule compares (last epoch, log end offset)).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct OffsetAndEpoch {
    pub offset: Offset,
    pub epoch: Epoch,
}

impl PartialOrd for OffsetAndEpoch {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for OffsetAndEpoch {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.epoch, self.offset).cmp(&(other.epoch, other.offset))
    }
}

/// A log directory's identity (docs/protocol.md, "Directory ids"): 16 random bytes written when
/// the directory is first formatted, Kafka's uuid on the wire. A voter is (node id, directory
/// id), so a node that comes back with an empty directory under a voter's id is a different
/// replica and cannot vote twice in an epoch. [`DirectoryId::ZERO`] means "unknown / not given".
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct DirectoryId(pub [u8; 16]);

const BASE64URL: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/// A directory id that is not 22 characters of base64url (no padding) naming 16 bytes.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not a directory id (22 characters of base64url)")]
pub struct DirectoryIdParseError(pub String);

impl DirectoryId {
    pub const ZERO: DirectoryId = DirectoryId([0; 16]);

    pub fn is_zero(self) -> bool {
        self == Self::ZERO
    }

    /// Big-endian halves, as Kafka writes a uuid (most significant 8 bytes first).
    pub fn from_halves(most: u64, least: u64) -> Self {
        let mut bytes = [0u8; 16];
        bytes[..8].copy_from_slice(&most.to_be_bytes());
        bytes[8..].copy_from_slice(&least.to_be_bytes());
        DirectoryId(bytes)
    }
}

/// Kafka's `Uuid.toString`: base64url without padding (22 characters).
impl std::fmt::Display for DirectoryId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut text = String::with_capacity(22);
        for chunk in self.0.chunks(3) {
            let mut n = 0u32;
            for (i, b) in chunk.iter().enumerate() {
                n |= u32::from(*b) << (16 - 8 * i);
            }
            for i in 0..=chunk.len() {
                text.push(char::from(BASE64URL[((n >> (18 - 6 * i)) & 63) as usize]));
            }
        }
        f.write_str(&text)
    }
}

impl std::str::FromStr for DirectoryId {
    type Err = DirectoryIdParseError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || DirectoryIdParseError(s.to_string());
        if s.len() != 22 {
            return Err(bad());
        }
        let mut bytes = [0u8; 16];
        let mut filled = 0;
        for chunk in s.as_bytes().chunks(4) {
            let mut n = 0u32;
            for (i, c) in chunk.iter().enumerate() {
                let v = BASE64URL.iter().position(|b| b == c).ok_or_else(bad)?;
                n |= (v as u32) << (18 - 6 * i);
            }
            for i in 0..chunk.len() - 1 {
                bytes[filled] = (n >> (16 - 8 * i)) as u8;
                filled += 1;
            }
            // The last character of a 2-character tail carries 4 unused bits: they must be zero,
            // so every id has exactly one spelling.
            if chunk.len() == 2 && n & 0xffff != 0 {
                return Err(bad());
            }
        }
        Ok(DirectoryId(bytes))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn directory_ids_print_as_kafka_does_and_parse_back() {
        // Kafka: new Uuid(0x0123456789abcdefL, 0xfedcba9876543210L).toString()
        let id = DirectoryId::from_halves(0x0123_4567_89ab_cdef, 0xfedc_ba98_7654_3210);
        assert_eq!(id.to_string(), "ASNFZ4mrze_-3LqYdlQyEA");
        assert_eq!("ASNFZ4mrze_-3LqYdlQyEA".parse::<DirectoryId>().unwrap(), id);
        assert_eq!(DirectoryId::ZERO.to_string(), "AAAAAAAAAAAAAAAAAAAAAA");
        assert!(DirectoryId::ZERO.is_zero() && !id.is_zero());
        let all = DirectoryId([0xff; 16]);
        assert_eq!(all.to_string().parse::<DirectoryId>().unwrap(), all);
        for bad in [
            "",
            "ASNFZ4mrze_-3LqYdlQyE",
            "ASNFZ4mrze_-3LqYdlQyE=",
            "ASNFZ4mrze_-3LqYdlQyEB",
            "ASNFZ4mrze+-3LqYdlQyEA",
        ] {
            assert!(bad.parse::<DirectoryId>().is_err(), "{bad}");
        }
    }

    #[test]
    fn offset_and_epoch_orders_by_epoch_first() {
        let a = OffsetAndEpoch {
            offset: 100,
            epoch: 1,
        };
        let b = OffsetAndEpoch {
            offset: 5,
            epoch: 2,
        };
        assert!(a < b);
        assert!(
            OffsetAndEpoch {
                offset: 4,
                epoch: 2
            } < b
        );
    }
}
