//! Variable-length integers of the Kafka protocol (docs/protocol.md section 13).
//!
//! - Unsigned varint: little-endian base 128, 7 data bits per byte, the high bit says "more".
//!   At most 5 bytes for 32 bits and 10 bytes for 64 bits. Used for compact lengths and tags.
//! - Signed varint / varlong: zigzag (`(n << 1) ^ (n >> 31)`) then unsigned; used inside records.
//!
//! Decoders take the bytes that remain and return the value and how many bytes it used. They
//! accept non-minimal encodings (as Kafka does) but reject input that ends mid-varint and
//! encodings whose value does not fit the type.
//!
//! Encoders append to a `Vec<u8>` (or any [`bytes::BufMut`]) without allocating beyond its growth.

use bytes::BufMut;
use thiserror::Error;

/// Longest unsigned varint holding 32 bits.
pub const MAX_VARINT_LEN: usize = 5;
/// Longest unsigned varint holding 64 bits.
pub const MAX_VARLONG_LEN: usize = 10;

/// Why a varint could not be decoded. Positions are relative to the slice given to the decoder;
/// callers add their own base to name a byte of a batch or frame.
#[derive(Clone, Copy, Debug, Error, PartialEq, Eq)]
pub enum VarintError {
    /// The input ended after `read` bytes, all with the continuation bit set (or no bytes at all).
    #[error("varint truncated after {read} bytes")]
    Truncated { read: usize },
    /// More than `max_len` bytes, or the last byte carries bits the type cannot hold.
    #[error("varint does not fit in {max_len} bytes")]
    Overflow { max_len: usize },
}

/// Bytes an unsigned varint of `value` takes.
#[inline]
pub fn uvarint_len(value: u32) -> usize {
    uvarlong_len(u64::from(value))
}

/// Bytes an unsigned varlong of `value` takes.
#[inline]
pub fn uvarlong_len(value: u64) -> usize {
    // Bits needed (at least 1), 7 per byte, rounded up.
    let bits = 64 - (value | 1).leading_zeros() as usize;
    bits.div_ceil(7)
}

/// Bytes a zigzag varint of `value` takes.
#[inline]
pub fn varint_len(value: i32) -> usize {
    uvarint_len(zigzag32(value))
}

/// Bytes a zigzag varlong of `value` takes.
#[inline]
pub fn varlong_len(value: i64) -> usize {
    uvarlong_len(zigzag64(value))
}

#[inline]
pub fn zigzag32(value: i32) -> u32 {
    ((value << 1) ^ (value >> 31)) as u32
}

#[inline]
pub fn zigzag64(value: i64) -> u64 {
    ((value << 1) ^ (value >> 63)) as u64
}

#[inline]
pub fn unzigzag32(value: u32) -> i32 {
    ((value >> 1) as i32) ^ -((value & 1) as i32)
}

#[inline]
pub fn unzigzag64(value: u64) -> i64 {
    ((value >> 1) as i64) ^ -((value & 1) as i64)
}

/// Appends `value` as an unsigned varint.
#[inline]
pub fn put_uvarint(out: &mut impl BufMut, value: u32) {
    put_uvarlong(out, u64::from(value));
}

/// Appends `value` as an unsigned varlong.
#[inline]
pub fn put_uvarlong(out: &mut impl BufMut, mut value: u64) {
    // One put_slice of a stack buffer: cheaper than a put_u8 per byte on Vec and BytesMut.
    let mut scratch = [0u8; MAX_VARLONG_LEN];
    let mut len = 0;
    while value >= 0x80 {
        scratch[len] = (value as u8) | 0x80;
        value >>= 7;
        len += 1;
    }
    scratch[len] = value as u8;
    out.put_slice(&scratch[..=len]);
}

/// Appends `value` as a zigzag varint.
#[inline]
pub fn put_varint(out: &mut impl BufMut, value: i32) {
    put_uvarint(out, zigzag32(value));
}

/// Appends `value` as a zigzag varlong.
#[inline]
pub fn put_varlong(out: &mut impl BufMut, value: i64) {
    put_uvarlong(out, zigzag64(value));
}

/// Decodes an unsigned varint from the start of `buf`: `(value, bytes used)`.
#[inline(always)]
pub fn get_uvarint(buf: &[u8]) -> Result<(u32, usize), VarintError> {
    // Fast path: one byte, by far the most common case for lengths and deltas.
    if let Some(&first) = buf.first() {
        if first < 0x80 {
            return Ok((u32::from(first), 1));
        }
    }
    let (value, used) = get_unsigned(buf, MAX_VARINT_LEN)?;
    let value = u32::try_from(value).map_err(|_| VarintError::Overflow {
        max_len: MAX_VARINT_LEN,
    })?;
    Ok((value, used))
}

/// Decodes an unsigned varlong from the start of `buf`: `(value, bytes used)`.
#[inline(always)]
pub fn get_uvarlong(buf: &[u8]) -> Result<(u64, usize), VarintError> {
    get_unsigned(buf, MAX_VARLONG_LEN)
}

/// Decodes a zigzag varint from the start of `buf`: `(value, bytes used)`.
#[inline(always)]
pub fn get_varint(buf: &[u8]) -> Result<(i32, usize), VarintError> {
    let (raw, used) = get_uvarint(buf)?;
    Ok((unzigzag32(raw), used))
}

/// Decodes a zigzag varlong from the start of `buf`: `(value, bytes used)`.
#[inline(always)]
pub fn get_varlong(buf: &[u8]) -> Result<(i64, usize), VarintError> {
    let (raw, used) = get_uvarlong(buf)?;
    Ok((unzigzag64(raw), used))
}

/// Reads up to `max_len` bytes of base-128 groups. The value is checked to fit 64 bits here;
/// narrower callers check their own range.
#[inline(always)]
fn get_unsigned(buf: &[u8], max_len: usize) -> Result<(u64, usize), VarintError> {
    assert!(max_len <= MAX_VARLONG_LEN);
    let mut value: u64 = 0;
    for (index, &byte) in buf.iter().take(max_len).enumerate() {
        let shift = 7 * index as u32;
        let bits = u64::from(byte & 0x7f);
        // The 10th byte of a varlong may only carry the single remaining bit.
        if shift == 63 && bits > 1 {
            return Err(VarintError::Overflow { max_len });
        }
        value |= bits << shift;
        if byte & 0x80 == 0 {
            return Ok((value, index + 1));
        }
    }
    if buf.len() >= max_len {
        Err(VarintError::Overflow { max_len })
    } else {
        Err(VarintError::Truncated { read: buf.len() })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn encoded_uvarlong(value: u64) -> Vec<u8> {
        let mut out = Vec::new();
        put_uvarlong(&mut out, value);
        out
    }

    #[test]
    fn known_encodings() {
        assert_eq!(encoded_uvarlong(0), [0x00]);
        assert_eq!(encoded_uvarlong(1), [0x01]);
        assert_eq!(encoded_uvarlong(127), [0x7f]);
        assert_eq!(encoded_uvarlong(128), [0x80, 0x01]);
        assert_eq!(encoded_uvarlong(300), [0xac, 0x02]);
        let mut out = Vec::new();
        put_varint(&mut out, -1);
        put_varint(&mut out, 1);
        put_varint(&mut out, -64);
        assert_eq!(out, [0x01, 0x02, 0x7f]);
    }

    #[test]
    fn zigzag_extremes_round_trip() {
        for value in [0, 1, -1, i32::MAX, i32::MIN, 63, -64, 64, -65] {
            let mut out = Vec::new();
            put_varint(&mut out, value);
            assert_eq!(out.len(), varint_len(value));
            assert_eq!(get_varint(&out), Ok((value, out.len())));
        }
        for value in [0, 1, -1, i64::MAX, i64::MIN] {
            let mut out = Vec::new();
            put_varlong(&mut out, value);
            assert_eq!(out.len(), varlong_len(value));
            assert_eq!(get_varlong(&out), Ok((value, out.len())));
        }
        assert_eq!(varlong_len(i64::MIN), MAX_VARLONG_LEN);
        assert_eq!(varint_len(i32::MIN), MAX_VARINT_LEN);
    }

    #[test]
    fn truncated_input_is_an_error() {
        assert_eq!(get_uvarint(&[]), Err(VarintError::Truncated { read: 0 }));
        assert_eq!(
            get_uvarint(&[0x80, 0x80]),
            Err(VarintError::Truncated { read: 2 })
        );
        assert_eq!(
            get_varlong(&[0xff; 9]),
            Err(VarintError::Truncated { read: 9 })
        );
    }

    #[test]
    fn overlong_input_is_an_error() {
        assert_eq!(
            get_uvarint(&[0x80, 0x80, 0x80, 0x80, 0x80, 0x00]),
            Err(VarintError::Overflow { max_len: 5 })
        );
        // Five bytes, but the value needs 33 bits.
        assert_eq!(
            get_uvarint(&[0xff, 0xff, 0xff, 0xff, 0x1f]),
            Err(VarintError::Overflow { max_len: 5 })
        );
        assert_eq!(
            get_uvarint(&[0xff, 0xff, 0xff, 0xff, 0x0f]),
            Ok((u32::MAX, 5))
        );
        let mut ten = [0xffu8; 10];
        ten[9] = 0x02;
        assert_eq!(
            get_uvarlong(&ten),
            Err(VarintError::Overflow { max_len: 10 })
        );
        ten[9] = 0x01;
        assert_eq!(get_uvarlong(&ten), Ok((u64::MAX, 10)));
    }

    #[test]
    fn non_minimal_encoding_is_accepted() {
        assert_eq!(get_uvarint(&[0x80, 0x00]), Ok((0, 2)));
    }
}
