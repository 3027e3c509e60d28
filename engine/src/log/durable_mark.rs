//! The durable mark: a small checksummed block written just after the data of the active
//! segment, saying how much of the segment was already known to be on disk (written and
//! fdatasync'd) when it was written. Recovery reads it to tell a torn tail (damage past what
//! was durable: cut it) from damage to acknowledged data (below it: refuse to open).
//! docs/storage.md, "Torn tail or corruption: the durable mark".
//!
//! Layout (big-endian, like the Kafka batches around it), in the first [`MARK_LEN`] bytes of a
//! block, the rest of the block zeros:
//!
//! | bytes  | field |
//! |--------|-------|
//! | 0..8   | magic `\xffRRDMARK` (the first byte makes it a negative BaseOffset: never a batch) |
//! | 8..12  | version (1) |
//! | 12..20 | base offset of the segment it was written in |
//! | 20..28 | byte position of the block itself |
//! | 28..36 | durable position: bytes of batches in the segment known durable |
//! | 36..44 | durable end offset: one past the last offset known durable |
//! | 44..48 | CRC-32C of bytes 0..44 |

use crate::base::Offset;

/// The mark's magic: first byte 0xff, so read as a batch header its BaseOffset is negative.
pub const MAGIC: [u8; 8] = *b"\xffRRDMARK";
const VERSION: u32 = 1;
/// Bytes of a block the mark uses.
pub const MARK_LEN: usize = 48;

/// What one mark says: in segment `segment_base`, the first `durable_position` bytes of
/// batches, up to offset `durable_offset`, were on disk when the block at `mark_position` was
/// written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DurableMark {
    pub segment_base: Offset,
    pub mark_position: u64,
    pub durable_position: u64,
    pub durable_offset: Offset,
}

impl DurableMark {
    /// Writes the mark into the first [`MARK_LEN`] bytes of `block` and zeros the rest.
    pub fn encode_into(&self, block: &mut [u8]) {
        assert!(block.len() >= MARK_LEN);
        block.fill(0);
        block[0..8].copy_from_slice(&MAGIC);
        block[8..12].copy_from_slice(&VERSION.to_be_bytes());
        block[12..20].copy_from_slice(&self.segment_base.to_be_bytes());
        block[20..28].copy_from_slice(&self.mark_position.to_be_bytes());
        block[28..36].copy_from_slice(&self.durable_position.to_be_bytes());
        block[36..44].copy_from_slice(&self.durable_offset.to_be_bytes());
        let crc = crc32c::crc32c(&block[0..44]);
        block[44..48].copy_from_slice(&crc.to_be_bytes());
    }

    /// True when `bytes` start with the mark's magic (cheap; [`Self::decode`] checks the rest).
    pub fn looks_like_mark(bytes: &[u8]) -> bool {
        bytes.len() >= MAGIC.len() && bytes[..MAGIC.len()] == MAGIC
    }

    /// The mark at the start of `bytes`, if it is whole, its checksum matches, and it is
    /// consistent in itself. Whether it belongs to this segment and this place is
    /// [`Self::belongs_at`]'s question.
    pub fn decode(bytes: &[u8]) -> Option<DurableMark> {
        if bytes.len() < MARK_LEN || !Self::looks_like_mark(bytes) {
            return None;
        }
        let u64_at = |at: usize| u64::from_be_bytes(bytes[at..at + 8].try_into().expect("8"));
        let version = u32::from_be_bytes(bytes[8..12].try_into().expect("4"));
        let crc = u32::from_be_bytes(bytes[44..48].try_into().expect("4"));
        if version != VERSION || crc != crc32c::crc32c(&bytes[0..44]) {
            return None;
        }
        let mark = DurableMark {
            segment_base: u64_at(12) as i64,
            mark_position: u64_at(20),
            durable_position: u64_at(28),
            durable_offset: u64_at(36) as i64,
        };
        let sane = mark.segment_base >= 0
            && mark.durable_offset >= mark.segment_base
            && mark.durable_position <= mark.mark_position;
        sane.then_some(mark)
    }

    /// Whether this mark was written into segment `segment_base` at `position`: a mark from
    /// an earlier life of a recycled file names another base (always a smaller one), and a
    /// block found anywhere but where it was written is not a mark of this file.
    pub fn belongs_at(&self, segment_base: Offset, position: u64) -> bool {
        self.segment_base == segment_base && self.mark_position == position
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mark() -> DurableMark {
        DurableMark {
            segment_base: 1_000,
            mark_position: 8_192,
            durable_position: 5_000,
            durable_offset: 1_042,
        }
    }

    #[test]
    fn a_mark_reads_back_and_every_flipped_bit_is_refused() {
        let mut block = vec![0xAAu8; 4096];
        mark().encode_into(&mut block);
        assert!(block[MARK_LEN..].iter().all(|&b| b == 0));
        assert_eq!(DurableMark::decode(&block), Some(mark()));
        for at in 0..MARK_LEN {
            for bit in 0..8 {
                let mut bad = block.clone();
                bad[at] ^= 1 << bit;
                assert_eq!(DurableMark::decode(&bad), None, "byte {at} bit {bit}");
            }
        }
        assert_eq!(DurableMark::decode(&block[..MARK_LEN - 1]), None);
    }

    /// Read as a Kafka batch header, a mark has a negative BaseOffset: the scan can never take
    /// it for a batch.
    #[test]
    fn a_mark_is_never_a_batch() {
        let mut block = vec![0u8; 4096];
        mark().encode_into(&mut block);
        assert!(i64::from_be_bytes(block[0..8].try_into().unwrap()) < 0);
        assert!(!matches!(
            super::super::batch_meta::peek(&block),
            super::super::batch_meta::Peek::Header(_) | super::super::batch_meta::Peek::End
        ));
    }

    /// A mark claiming more than lies before it, or an offset below its segment, is not one.
    #[test]
    fn an_inconsistent_mark_is_refused_and_belonging_is_checked() {
        for bad in [
            DurableMark {
                durable_position: 9_000,
                ..mark()
            },
            DurableMark {
                durable_offset: 999,
                ..mark()
            },
        ] {
            let mut block = vec![0u8; 4096];
            bad.encode_into(&mut block);
            assert_eq!(DurableMark::decode(&block), None, "{bad:?}");
        }
        assert!(mark().belongs_at(1_000, 8_192));
        assert!(!mark().belongs_at(900, 8_192), "a recycled file's old life");
        assert!(!mark().belongs_at(1_000, 4_096), "a block moved");
    }
}
