//! Kafka's primitive types (docs/protocol.md section 13): fixed-width big-endian integers, classic
//! and compact strings, bytes and arrays, unsigned varints and tagged-field sections.
//!
//! [`WireReader`] reads from a [`Bytes`] so that byte fields (record batches above all) come out
//! as slices of the frame, never copies. Every read is bounds-checked and returns a typed
//! [`WireError`] naming the field and position; nothing here panics on input.

use bytes::{BufMut, Bytes, BytesMut};
use engine::record::varint;
use thiserror::Error;

/// Why a frame could not be decoded. `at` is the byte position within the frame body.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum WireError {
    #[error("{field}: frame ends at byte {at}, {needed} more bytes needed")]
    Truncated {
        field: &'static str,
        at: usize,
        needed: usize,
    },
    #[error("{field}: bad varint at byte {at}: {source}")]
    Varint {
        field: &'static str,
        at: usize,
        source: varint::VarintError,
    },
    #[error("{field}: negative length {len} at byte {at}")]
    NegativeLength {
        field: &'static str,
        at: usize,
        len: i64,
    },
    #[error("{field}: null where a value is required, at byte {at}")]
    UnexpectedNull { field: &'static str, at: usize },
    #[error("{field}: not UTF-8 at byte {at}")]
    BadUtf8 { field: &'static str, at: usize },
    #[error("{field}: invalid boolean {value} at byte {at}")]
    BadBool {
        field: &'static str,
        at: usize,
        value: u8,
    },
    #[error("{field}: array of {count} elements cannot fit in the {remaining} bytes left")]
    ArrayTooLong {
        field: &'static str,
        count: usize,
        remaining: usize,
    },
    #[error("tagged fields: tag {tag} after tag {previous} (tags must strictly increase)")]
    TagOrder { previous: u32, tag: u32 },
    #[error("{trailing} bytes left over after the message body")]
    TrailingBytes { trailing: usize },
    #[error("{field}: {len} bytes at byte {at}, above the limit of {limit}")]
    TooLong {
        field: &'static str,
        at: usize,
        len: usize,
        limit: usize,
    },
    #[error("{api} v{version} is not decoded by this codec")]
    UnsupportedVersion { api: &'static str, version: i16 },
    #[error("{field}: {count} elements, above the limit of {limit} per request")]
    TooMany {
        field: &'static str,
        count: usize,
        limit: usize,
    },
}

/// A cursor over one frame (a clone looks ahead without moving this one).
#[derive(Clone)]
pub struct WireReader {
    buf: Bytes,
    pos: usize,
}

impl WireReader {
    pub fn new(buf: Bytes) -> Self {
        Self { buf, pos: 0 }
    }

    pub fn position(&self) -> usize {
        self.pos
    }

    pub fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    /// Fails unless every byte was consumed.
    pub fn finish(&self) -> Result<(), WireError> {
        match self.remaining() {
            0 => Ok(()),
            trailing => Err(WireError::TrailingBytes { trailing }),
        }
    }

    /// `payload` (a tagged field's, a nested structure's) read by `read`, which must consume
    /// every byte of it.
    pub fn whole<T, E: From<WireError>>(
        payload: Bytes,
        read: impl FnOnce(&mut WireReader) -> Result<T, E>,
    ) -> Result<T, E> {
        let mut r = WireReader::new(payload);
        let value = read(&mut r)?;
        r.finish()?;
        Ok(value)
    }

    /// Consumes the next `len` bytes and says where they are in the frame.
    fn advance(
        &mut self,
        field: &'static str,
        len: usize,
    ) -> Result<std::ops::Range<usize>, WireError> {
        if self.remaining() < len {
            return Err(WireError::Truncated {
                field,
                at: self.pos,
                needed: len - self.remaining(),
            });
        }
        let range = self.pos..self.pos + len;
        self.pos += len;
        Ok(range)
    }

    /// The next `len` bytes as a slice of the frame that outlives the reader (one reference
    /// count taken: for values kept, not for fields copied out at once).
    fn take(&mut self, field: &'static str, len: usize) -> Result<Bytes, WireError> {
        let range = self.advance(field, len)?;
        Ok(self.buf.slice(range))
    }

    /// The next `N` bytes copied out, read in place: a fixed-size field takes no reference
    /// count (a slice of the frame per integer cost two atomic operations; reading one
    /// one-record Produce took 314 ns that way and 169-183 ns this way: docs/benchmarks.md,
    /// "Wire reads in place").
    fn array<const N: usize>(&mut self, field: &'static str) -> Result<[u8; N], WireError> {
        let range = self.advance(field, N)?;
        Ok(self.buf[range].try_into().expect("advance gave N bytes"))
    }

    pub fn i8(&mut self, field: &'static str) -> Result<i8, WireError> {
        Ok(i8::from_be_bytes(self.array(field)?))
    }

    pub fn i16(&mut self, field: &'static str) -> Result<i16, WireError> {
        Ok(i16::from_be_bytes(self.array(field)?))
    }

    pub fn i32(&mut self, field: &'static str) -> Result<i32, WireError> {
        Ok(i32::from_be_bytes(self.array(field)?))
    }

    pub fn i64(&mut self, field: &'static str) -> Result<i64, WireError> {
        Ok(i64::from_be_bytes(self.array(field)?))
    }

    /// Kafka's UUID: 16 bytes, most significant first.
    pub fn uuid(&mut self, field: &'static str) -> Result<[u8; 16], WireError> {
        self.array(field)
    }

    pub fn bool(&mut self, field: &'static str) -> Result<bool, WireError> {
        let at = self.pos;
        match self.array::<1>(field)?[0] {
            0 => Ok(false),
            1 => Ok(true),
            value => Err(WireError::BadBool { field, at, value }),
        }
    }

    pub fn uvarint(&mut self, field: &'static str) -> Result<u32, WireError> {
        let at = self.pos;
        let (value, used) = varint::get_uvarint(&self.buf[self.pos..])
            .map_err(|source| WireError::Varint { field, at, source })?;
        self.pos += used;
        Ok(value)
    }

    /// A compact length: uvarint of (length + 1), 0 = null.
    fn compact_len(&mut self, field: &'static str) -> Result<Option<usize>, WireError> {
        Ok(match self.uvarint(field)? {
            0 => None,
            n => Some(n as usize - 1),
        })
    }

    /// A classic int16-length length, -1 = null.
    fn classic_string_len(&mut self, field: &'static str) -> Result<Option<usize>, WireError> {
        let at = self.pos;
        let len = self.i16(field)?;
        classic_len(field, at, len.into())
    }

    /// A classic int32 length or count, -1 = null.
    fn classic_i32_len(&mut self, field: &'static str) -> Result<Option<usize>, WireError> {
        let at = self.pos;
        let len = self.i32(field)?;
        classic_len(field, at, len)
    }

    /// `len` bytes of UTF-8 copied into a String, read in place (no reference count taken).
    fn utf8(&mut self, field: &'static str, len: usize) -> Result<String, WireError> {
        let at = self.pos;
        let range = self.advance(field, len)?;
        std::str::from_utf8(&self.buf[range])
            .map(str::to_owned)
            .map_err(|_| WireError::BadUtf8 { field, at })
    }

    /// A length-prefixed value: the length `read_len` reads (None: null), then that many bytes
    /// made a value by `body`.
    fn sized<T>(
        &mut self,
        field: &'static str,
        read_len: fn(&mut Self, &'static str) -> Result<Option<usize>, WireError>,
        body: fn(&mut Self, &'static str, usize) -> Result<T, WireError>,
    ) -> Result<Option<T>, WireError> {
        let len = read_len(self, field)?;
        len.map(|len| body(self, field, len)).transpose()
    }

    /// `field` read by `read` where null is not allowed; the error points at its start.
    fn required<T>(
        &mut self,
        field: &'static str,
        read: fn(&mut Self, &'static str) -> Result<Option<T>, WireError>,
    ) -> Result<T, WireError> {
        let at = self.pos;
        read(self, field)?.ok_or(WireError::UnexpectedNull { field, at })
    }

    /// STRING / NULLABLE_STRING (int16 length).
    pub fn nullable_string(&mut self, field: &'static str) -> Result<Option<String>, WireError> {
        self.sized(field, Self::classic_string_len, Self::utf8)
    }

    /// [`WireReader::nullable_string`] kept as a slice of the frame: no copy, no allocation.
    pub fn nullable_wire_str(&mut self, field: &'static str) -> Result<Option<WireStr>, WireError> {
        self.sized(field, Self::classic_string_len, Self::wire_str)
    }

    /// `len` bytes of UTF-8, as a slice of the frame.
    fn wire_str(&mut self, field: &'static str, len: usize) -> Result<WireStr, WireError> {
        let at = self.pos;
        let bytes = self.take(field, len)?;
        WireStr::new(bytes).ok_or(WireError::BadUtf8 { field, at })
    }

    pub fn string(&mut self, field: &'static str) -> Result<String, WireError> {
        self.required(field, Self::nullable_string)
    }

    /// STRING (or COMPACT_STRING when `compact`) of at most `limit` bytes: the length is
    /// checked before anything is copied out of the frame.
    pub fn string_at_most(
        &mut self,
        compact: bool,
        field: &'static str,
        limit: usize,
    ) -> Result<String, WireError> {
        let len = self.string_len_at_most(compact, field, limit)?;
        self.utf8(field, len)
    }

    /// [`WireReader::string_at_most`] kept as a slice of the frame: no copy, no allocation.
    pub fn wire_str_at_most(
        &mut self,
        compact: bool,
        field: &'static str,
        limit: usize,
    ) -> Result<WireStr, WireError> {
        let len = self.string_len_at_most(compact, field, limit)?;
        self.wire_str(field, len)
    }

    /// The length of a non-null STRING (COMPACT_STRING when `compact`), refused above `limit`.
    fn string_len_at_most(
        &mut self,
        compact: bool,
        field: &'static str,
        limit: usize,
    ) -> Result<usize, WireError> {
        let at = self.pos;
        let len = if compact {
            self.compact_len(field)?
        } else {
            self.classic_string_len(field)?
        };
        let len = len.ok_or(WireError::UnexpectedNull { field, at })?;
        if len > limit {
            return Err(WireError::TooLong {
                field,
                at,
                len,
                limit,
            });
        }
        Ok(len)
    }

    /// COMPACT_NULLABLE_STRING.
    pub fn compact_nullable_string(
        &mut self,
        field: &'static str,
    ) -> Result<Option<String>, WireError> {
        self.sized(field, Self::compact_len, Self::utf8)
    }

    /// COMPACT_STRING.
    pub fn compact_string(&mut self, field: &'static str) -> Result<String, WireError> {
        self.required(field, Self::compact_nullable_string)
    }

    /// COMPACT_NULLABLE_BYTES / COMPACT_RECORDS, as a slice of the frame.
    pub fn compact_nullable_bytes(
        &mut self,
        field: &'static str,
    ) -> Result<Option<Bytes>, WireError> {
        self.sized(field, Self::compact_len, Self::take)
    }

    /// NULLABLE_BYTES / RECORDS (int32 length, -1 = null), as a slice of the frame.
    pub fn nullable_bytes(&mut self, field: &'static str) -> Result<Option<Bytes>, WireError> {
        self.sized(field, Self::classic_i32_len, Self::take)
    }

    /// The element count of a COMPACT_ARRAY (None = null). Each element takes at least
    /// `min_element_bytes`, so a count that cannot fit is refused before anything is allocated.
    pub fn compact_array_len(
        &mut self,
        field: &'static str,
        min_element_bytes: usize,
    ) -> Result<Option<usize>, WireError> {
        let count = self.compact_len(field)?;
        self.check_array_fits(field, count, min_element_bytes)
    }

    /// The element count of a classic ARRAY (int32 count, -1 = null).
    pub fn array_len(
        &mut self,
        field: &'static str,
        min_element_bytes: usize,
    ) -> Result<Option<usize>, WireError> {
        let count = self.classic_i32_len(field)?;
        self.check_array_fits(field, count, min_element_bytes)
    }

    fn check_array_fits(
        &self,
        field: &'static str,
        count: Option<usize>,
        min_element_bytes: usize,
    ) -> Result<Option<usize>, WireError> {
        if let Some(count) = count {
            let remaining = self.remaining();
            if count.saturating_mul(min_element_bytes.max(1)) > remaining {
                return Err(WireError::ArrayTooLong {
                    field,
                    count,
                    remaining,
                });
            }
        }
        Ok(count)
    }

    /// A tagged-field section. Known tags are handed to `on_tag` with their payload; unknown ones
    /// (where `on_tag` returns false) are skipped, as KIP-482 requires.
    pub fn tagged_fields(
        &mut self,
        mut on_tag: impl FnMut(u32, Bytes) -> Result<bool, WireError>,
    ) -> Result<(), WireError> {
        let count = self.uvarint("tagged field count")?;
        let mut previous: Option<u32> = None;
        for _ in 0..count {
            let tag = self.uvarint("tag")?;
            if let Some(previous) = previous {
                if tag <= previous {
                    return Err(WireError::TagOrder { previous, tag });
                }
            }
            previous = Some(tag);
            let size = self.uvarint("tag size")? as usize;
            let payload = self.take("tag payload", size)?;
            // Unknown tags are skipped: the payload was consumed either way.
            let _known = on_tag(tag, payload)?;
        }
        Ok(())
    }

    /// A tagged-field section whose every tag is skipped.
    pub fn skip_tagged_fields(&mut self) -> Result<(), WireError> {
        self.tagged_fields(|_, _| Ok(false))
    }
}

/// A classic (int16 or int32) length or count `len`, read at `at`: -1 is null, any other
/// negative value is refused.
fn classic_len(field: &'static str, at: usize, len: i32) -> Result<Option<usize>, WireError> {
    match len {
        -1 => Ok(None),
        len if len < 0 => Err(WireError::NegativeLength {
            field,
            at,
            len: len.into(),
        }),
        len => Ok(Some(len as usize)),
    }
}

/// A string as a frame carried it: a slice of the frame's bytes, checked to be UTF-8 once.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct WireStr(Bytes);

impl WireStr {
    /// None unless `bytes` are UTF-8.
    pub fn new(bytes: Bytes) -> Option<Self> {
        std::str::from_utf8(&bytes).is_ok().then_some(Self(bytes))
    }

    pub fn as_str(&self) -> &str {
        // SAFETY: `new` (and the conversions from strings) admit UTF-8 only.
        unsafe { std::str::from_utf8_unchecked(&self.0) }
    }
}

impl std::ops::Deref for WireStr {
    type Target = str;
    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl std::fmt::Debug for WireStr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.as_str().fmt(f)
    }
}

impl From<String> for WireStr {
    fn from(s: String) -> Self {
        Self(Bytes::from(s))
    }
}

impl From<&str> for WireStr {
    fn from(s: &str) -> Self {
        Self(Bytes::copy_from_slice(s.as_bytes()))
    }
}

/// Writes a frame body. Wraps a [`BytesMut`] so encoders can hand out the result without a copy.
#[derive(Default)]
pub struct WireWriter {
    buf: BytesMut,
}

impl WireWriter {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn with_capacity(capacity: usize) -> Self {
        Self {
            buf: BytesMut::with_capacity(capacity),
        }
    }

    /// What `write` writes into a fresh writer: a message body on its own.
    pub fn bytes_of(write: impl FnOnce(&mut WireWriter)) -> Bytes {
        let mut w = WireWriter::new();
        write(&mut w);
        w.into_inner().freeze()
    }

    pub fn len(&self) -> usize {
        self.buf.len()
    }

    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    pub fn into_inner(self) -> BytesMut {
        self.buf
    }

    /// Bytes that can be written before the buffer must grow.
    pub fn room(&self) -> usize {
        self.buf.capacity() - self.buf.len()
    }

    /// Room for at least `additional` more bytes: the same allocation when it is unshared and
    /// large enough, else a new one.
    pub fn reserve(&mut self, additional: usize) {
        self.buf.reserve(additional)
    }

    /// Overwrites bytes already written, from `at` (a length known only after what it measures).
    pub fn overwrite(&mut self, at: usize, bytes: &[u8]) {
        self.buf[at..at + bytes.len()].copy_from_slice(bytes);
    }

    /// Hands out what was written so far as one piece of a response chain and keeps writing
    /// into the same allocation (`BytesMut::split`: no copy).
    pub fn split_piece(&mut self) -> Bytes {
        self.split_mut().freeze()
    }

    /// [`WireWriter::split_piece`], still writable (its owner may patch it; no one else sees it).
    pub fn split_mut(&mut self) -> BytesMut {
        self.buf.split()
    }

    /// Bytes as they are, with no length before them.
    pub fn raw(&mut self, v: &[u8]) {
        self.buf.put_slice(v);
    }

    pub fn i8(&mut self, v: i8) {
        self.buf.put_i8(v);
    }

    pub fn i16(&mut self, v: i16) {
        self.buf.put_i16(v);
    }

    pub fn i32(&mut self, v: i32) {
        self.buf.put_i32(v);
    }

    pub fn i64(&mut self, v: i64) {
        self.buf.put_i64(v);
    }

    pub fn bool(&mut self, v: bool) {
        self.buf.put_u8(u8::from(v));
    }

    pub fn uuid(&mut self, v: &[u8; 16]) {
        self.buf.put_slice(v);
    }

    pub fn uvarint(&mut self, v: u32) {
        varint::put_uvarint(&mut self.buf, v);
    }

    fn compact_len(&mut self, len: Option<usize>) {
        match len {
            None => self.uvarint(0),
            Some(len) => {
                let len = u32::try_from(len + 1).expect("compact length fits in u32");
                self.uvarint(len);
            }
        }
    }

    pub fn nullable_string(&mut self, v: Option<&str>) {
        match v {
            None => self.i16(-1),
            Some(s) => {
                let len = i16::try_from(s.len()).expect("string of at most 32767 bytes");
                self.i16(len);
                self.buf.put_slice(s.as_bytes());
            }
        }
    }

    pub fn string(&mut self, v: &str) {
        self.nullable_string(Some(v));
    }

    pub fn compact_nullable_string(&mut self, v: Option<&str>) {
        self.compact_len(v.map(str::len));
        if let Some(s) = v {
            self.buf.put_slice(s.as_bytes());
        }
    }

    pub fn compact_string(&mut self, v: &str) {
        self.compact_nullable_string(Some(v));
    }

    /// The compact length prefix of COMPACT_BYTES/RECORDS of `len` bytes; the caller appends the
    /// bytes (or sends them as separate slices, which is how fetch responses avoid a copy).
    pub fn compact_bytes_len(&mut self, len: Option<usize>) {
        self.compact_len(len);
    }

    pub fn compact_nullable_bytes(&mut self, v: Option<&[u8]>) {
        self.compact_len(v.map(<[u8]>::len));
        if let Some(b) = v {
            self.buf.put_slice(b);
        }
    }

    pub fn nullable_bytes(&mut self, v: Option<&[u8]>) {
        match v {
            None => self.i32(-1),
            Some(b) => {
                let len = i32::try_from(b.len()).expect("bytes of at most 2 GiB");
                self.i32(len);
                self.buf.put_slice(b);
            }
        }
    }

    pub fn compact_array_len(&mut self, count: Option<usize>) {
        self.compact_len(count);
    }

    pub fn array_len(&mut self, count: Option<usize>) {
        match count {
            None => self.i32(-1),
            Some(n) => self.i32(i32::try_from(n).expect("array of at most 2^31 elements")),
        }
    }

    /// A tagged-field section from (tag, payload) pairs in strictly increasing tag order.
    pub fn tagged_fields(&mut self, fields: &[(u32, &[u8])]) {
        assert!(
            fields.windows(2).all(|w| w[0].0 < w[1].0),
            "tags strictly increase"
        );
        self.uvarint(u32::try_from(fields.len()).expect("tag count fits"));
        for (tag, payload) in fields {
            self.uvarint(*tag);
            self.uvarint(u32::try_from(payload.len()).expect("tag payload fits"));
            self.buf.put_slice(payload);
        }
    }

    /// A tagged-field section of the fields that have a payload, from (tag, payload) pairs in
    /// strictly increasing tag order: a field whose payload is None is left out.
    pub fn present_tagged_fields(&mut self, fields: &[(u32, Option<&[u8]>)]) {
        let present: Vec<(u32, &[u8])> = fields
            .iter()
            .filter_map(|&(tag, payload)| Some((tag, payload?)))
            .collect();
        self.tagged_fields(&present);
    }

    /// An empty tagged-field section.
    pub fn no_tagged_fields(&mut self) {
        self.uvarint(0);
    }
}

/// Asserts that `decode` refuses every proper prefix of `full`, a valid encoding: a message cut
/// short is an error, never a panic or a success. The check each codec's tests make of its
/// messages; `what` names the case in a failure.
#[cfg(test)]
#[track_caller]
pub(crate) fn assert_every_prefix_refused<T, E>(
    what: impl std::fmt::Display,
    full: &Bytes,
    mut decode: impl FnMut(&mut WireReader) -> Result<T, E>,
) {
    for cut in 0..full.len() {
        let mut r = WireReader::new(full.slice(..cut));
        assert!(
            decode(&mut r).is_err(),
            "{what}: the first {cut} of {} bytes decoded",
            full.len()
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reader(w: WireWriter) -> WireReader {
        WireReader::new(w.into_inner().freeze())
    }

    #[test]
    fn compact_encodings_match_kip_482_examples() {
        let mut w = WireWriter::new();
        w.compact_string("");
        w.compact_array_len(Some(0));
        w.compact_nullable_string(None);
        assert_eq!(&w.into_inner()[..], &[0x01, 0x01, 0x00]);
    }

    #[test]
    fn round_trips_every_type() {
        let mut w = WireWriter::new();
        w.i8(-3);
        w.i16(-2);
        w.i32(70_000);
        w.i64(-1);
        w.bool(true);
        w.uvarint(300);
        w.string("abc");
        w.nullable_string(None);
        w.compact_string("héllo");
        w.compact_nullable_bytes(Some(b"xyz"));
        w.nullable_bytes(Some(b""));
        w.array_len(Some(2));
        w.tagged_fields(&[(0, &[1, 2]), (7, &[])]);
        let mut r = reader(w);
        assert_eq!(r.i8("a").unwrap(), -3);
        assert_eq!(r.i16("a").unwrap(), -2);
        assert_eq!(r.i32("a").unwrap(), 70_000);
        assert_eq!(r.i64("a").unwrap(), -1);
        assert!(r.bool("a").unwrap());
        assert_eq!(r.uvarint("a").unwrap(), 300);
        assert_eq!(r.string("a").unwrap(), "abc");
        assert_eq!(r.nullable_string("a").unwrap(), None);
        assert_eq!(r.compact_string("a").unwrap(), "héllo");
        assert_eq!(&r.compact_nullable_bytes("a").unwrap().unwrap()[..], b"xyz");
        assert_eq!(&r.nullable_bytes("a").unwrap().unwrap()[..], b"");
        // Elements of 0 bytes are impossible; with a 1-byte minimum 2 elements need 2 bytes.
        assert_eq!(r.array_len("a", 0).unwrap(), Some(2));
        let mut tags = Vec::new();
        r.tagged_fields(|tag, payload| {
            tags.push((tag, payload.to_vec()));
            Ok(true)
        })
        .unwrap();
        assert_eq!(tags, vec![(0, vec![1, 2]), (7, vec![])]);
        r.finish().unwrap();
    }

    #[test]
    fn truncation_and_bad_values_are_typed_errors() {
        let mut r = WireReader::new(Bytes::from_static(&[0, 5, b'a']));
        assert!(matches!(
            r.string("name"),
            Err(WireError::Truncated { field: "name", .. })
        ));
        let mut r = WireReader::new(Bytes::from_static(&[0xff, 0xfe]));
        assert!(matches!(
            r.nullable_string("s"),
            Err(WireError::NegativeLength { .. })
        ));
        // Bytes that are not UTF-8: the same error, at the string's first byte, whether the
        // string is copied out or kept as a slice of the frame.
        let bad: &'static [u8] = &[0xaa, 0, 2, 0xc3, 0x28];
        let mut r = WireReader::new(Bytes::from_static(bad));
        r.i8("pad").unwrap();
        assert!(matches!(
            r.string("s"),
            Err(WireError::BadUtf8 { field: "s", at: 3 })
        ));
        let mut r = WireReader::new(Bytes::from_static(bad));
        r.i8("pad").unwrap();
        assert!(matches!(
            r.wire_str_at_most(false, "s", 8),
            Err(WireError::BadUtf8 { field: "s", at: 3 })
        ));
        let mut r = WireReader::new(Bytes::from_static(&[2]));
        assert!(matches!(
            r.bool("b"),
            Err(WireError::BadBool { value: 2, .. })
        ));
        let mut r = WireReader::new(Bytes::from_static(&[0x80, 0x80]));
        assert!(matches!(r.uvarint("v"), Err(WireError::Varint { .. })));
        // A huge array count is refused before allocation.
        let mut r = WireReader::new(Bytes::from_static(&[0x7f, 0xff, 0xff, 0xff]));
        assert!(matches!(
            r.array_len("arr", 4),
            Err(WireError::ArrayTooLong { .. })
        ));
        // Tags out of order.
        let mut r = WireReader::new(Bytes::from_static(&[2, 3, 0, 1, 0]));
        assert!(matches!(
            r.skip_tagged_fields(),
            Err(WireError::TagOrder { .. })
        ));
    }

    /// The operator reads where a frame went wrong and by how much: the position, the bytes
    /// missing, and a negative length (other than -1, null) for what it is.
    #[test]
    fn errors_say_where_and_how_much() {
        let mut r = WireReader::new(Bytes::from_static(&[0, 0, 0, 1, 9, 9]));
        assert_eq!(r.position(), 0);
        assert_eq!(r.i32("first").unwrap(), 1);
        assert_eq!(r.position(), 4);
        assert_eq!(
            r.i32("second"),
            Err(WireError::Truncated {
                field: "second",
                at: 4,
                needed: 2
            })
        );
        for negative in [-2i32, i32::MIN] {
            let bytes = Bytes::copy_from_slice(&negative.to_be_bytes());
            assert_eq!(
                WireReader::new(bytes.clone()).nullable_bytes("records"),
                Err(WireError::NegativeLength {
                    field: "records",
                    at: 0,
                    len: negative.into()
                })
            );
            assert_eq!(
                WireReader::new(bytes).array_len("topics", 1),
                Err(WireError::NegativeLength {
                    field: "topics",
                    at: 0,
                    len: negative.into()
                })
            );
        }
    }

    #[test]
    fn a_writer_knows_its_length_and_reserves_what_it_is_asked() {
        let mut w = WireWriter::with_capacity(1000);
        assert!(w.is_empty());
        w.i8(1);
        assert!(!w.is_empty());
        assert_eq!(w.len(), 1);
        assert!(w.into_inner().capacity() >= 1000);
    }

    #[test]
    fn every_prefix_of_a_valid_encoding_fails_cleanly() {
        let mut w = WireWriter::new();
        w.compact_string("cluster");
        w.i32(1);
        w.i64(99);
        w.tagged_fields(&[(0, &[0, 0, 0, 0, 0, 0, 0, 7])]);
        let full = w.into_inner().freeze();
        assert_every_prefix_refused("fields", &full, |r| {
            r.compact_string("s")?;
            r.i32("i")?;
            r.i64("l")?;
            r.skip_tagged_fields()
        });
    }
}
