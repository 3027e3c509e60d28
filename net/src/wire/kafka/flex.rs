//! Kafka's two encodings of one schema: before a message's first flexible version, int16-length
//! strings and int32-length arrays; from it on, compact (varint) lengths and tagged fields.
//! The quorum RPCs and the broker list (`wire::quorum`, `wire::broker_list`), flexible in every
//! version, use it as `Flex(true)` for their arrays of structs.

use bytes::Bytes;

use crate::wire::api::ApiSpec;
use crate::wire::primitives::{WireError, WireReader, WireWriter};

/// A field that versions from `first` on carry: read by `read` there, `absent` (what stands
/// for it) in the versions before.
pub(in crate::wire) fn since<T>(
    version: i16,
    first: i16,
    absent: T,
    read: impl FnOnce() -> Result<T, WireError>,
) -> Result<T, WireError> {
    if version >= first {
        read()
    } else {
        Ok(absent)
    }
}

/// Reads and writes the field types whose encoding depends on whether the version is flexible.
pub(in crate::wire) struct Flex(pub(in crate::wire) bool);

impl Flex {
    /// The encoding of `spec`'s messages at `version`.
    pub(in crate::wire) fn of(spec: &ApiSpec, version: i16) -> Flex {
        Flex(spec.is_flexible(version))
    }

    pub(in crate::wire) fn read_string(
        &self,
        r: &mut WireReader,
        field: &'static str,
    ) -> Result<String, WireError> {
        if self.0 {
            r.compact_string(field)
        } else {
            r.string(field)
        }
    }

    pub(in crate::wire) fn read_nullable_string(
        &self,
        r: &mut WireReader,
        field: &'static str,
    ) -> Result<Option<String>, WireError> {
        if self.0 {
            r.compact_nullable_string(field)
        } else {
            r.nullable_string(field)
        }
    }

    pub(in crate::wire) fn read_array_len(
        &self,
        r: &mut WireReader,
        field: &'static str,
        min_element_bytes: usize,
    ) -> Result<usize, WireError> {
        let len = self.read_nullable_array_len(r, field, min_element_bytes)?;
        Ok(len.unwrap_or(0))
    }

    /// An array length where null is allowed: None for null.
    pub(in crate::wire) fn read_nullable_array_len(
        &self,
        r: &mut WireReader,
        field: &'static str,
        min_element_bytes: usize,
    ) -> Result<Option<usize>, WireError> {
        if self.0 {
            r.compact_array_len(field, min_element_bytes)
        } else {
            r.array_len(field, min_element_bytes)
        }
    }

    pub(in crate::wire) fn read_nullable_bytes(
        &self,
        r: &mut WireReader,
        field: &'static str,
    ) -> Result<Option<Bytes>, WireError> {
        if self.0 {
            r.compact_nullable_bytes(field)
        } else {
            r.nullable_bytes(field)
        }
    }

    /// BYTES (or COMPACT_BYTES): null is refused.
    pub(in crate::wire) fn read_bytes(
        &self,
        r: &mut WireReader,
        field: &'static str,
    ) -> Result<Bytes, WireError> {
        let at = r.position();
        self.read_nullable_bytes(r, field)?
            .ok_or(WireError::UnexpectedNull { field, at })
    }

    pub(in crate::wire) fn read_tags(&self, r: &mut WireReader) -> Result<(), WireError> {
        if self.0 {
            r.skip_tagged_fields()?;
        }
        Ok(())
    }

    /// An array of structs, each read by `read` and followed by its tagged fields (in flexible
    /// versions); null reads as empty. `min_element_bytes` as for any array.
    pub(in crate::wire) fn read_structs<T>(
        &self,
        r: &mut WireReader,
        field: &'static str,
        min_element_bytes: usize,
        read: impl FnMut(&mut WireReader) -> Result<T, WireError>,
    ) -> Result<Vec<T>, WireError> {
        let items = self.read_nullable_structs(r, field, min_element_bytes, read)?;
        Ok(items.unwrap_or_default())
    }

    /// [`Flex::read_structs`] where null is its own value: None.
    pub(in crate::wire) fn read_nullable_structs<T>(
        &self,
        r: &mut WireReader,
        field: &'static str,
        min_element_bytes: usize,
        mut read: impl FnMut(&mut WireReader) -> Result<T, WireError>,
    ) -> Result<Option<Vec<T>>, WireError> {
        let Some(count) = self.read_nullable_array_len(r, field, min_element_bytes)? else {
            return Ok(None);
        };
        let mut items = Vec::with_capacity(count);
        for _ in 0..count {
            items.push(read(r)?);
            self.read_tags(r)?;
        }
        Ok(Some(items))
    }

    /// An array of structs, each written by `write` and followed by an empty tagged-field
    /// section (in flexible versions).
    pub(in crate::wire) fn write_structs<T>(
        &self,
        w: &mut WireWriter,
        items: &[T],
        write: impl FnMut(&mut WireWriter, &T),
    ) {
        self.write_nullable_structs(w, Some(items), write)
    }

    /// [`Flex::write_structs`] of an array that may be null (None).
    pub(in crate::wire) fn write_nullable_structs<T>(
        &self,
        w: &mut WireWriter,
        items: Option<&[T]>,
        mut write: impl FnMut(&mut WireWriter, &T),
    ) {
        self.write_nullable_array_len(w, items.map(<[T]>::len));
        for item in items.into_iter().flatten() {
            write(w, item);
            self.write_tags(w);
        }
    }

    /// The end of a message body: its tagged fields (in flexible versions), then nothing.
    pub(in crate::wire) fn read_end(&self, r: &mut WireReader) -> Result<(), WireError> {
        self.read_tags(r)?;
        r.finish()
    }

    pub(in crate::wire) fn write_string(&self, w: &mut WireWriter, v: &str) {
        if self.0 {
            w.compact_string(v)
        } else {
            w.string(v)
        }
    }

    pub(in crate::wire) fn write_nullable_string(&self, w: &mut WireWriter, v: Option<&str>) {
        if self.0 {
            w.compact_nullable_string(v)
        } else {
            w.nullable_string(v)
        }
    }

    pub(in crate::wire) fn write_array_len(&self, w: &mut WireWriter, len: usize) {
        self.write_nullable_array_len(w, Some(len))
    }

    pub(in crate::wire) fn write_nullable_array_len(&self, w: &mut WireWriter, len: Option<usize>) {
        if self.0 {
            w.compact_array_len(len)
        } else {
            w.array_len(len)
        }
    }

    /// The length prefix of a BYTES or RECORDS field whose bytes the caller sends separately
    /// (a response chain's pieces); None for null.
    pub(in crate::wire) fn write_bytes_len(&self, w: &mut WireWriter, len: Option<usize>) {
        match (self.0, len) {
            (true, len) => w.compact_bytes_len(len),
            (false, None) => w.i32(-1),
            (false, Some(len)) => w.i32(i32::try_from(len).expect("records of at most 2 GiB")),
        }
    }

    pub(in crate::wire) fn write_nullable_bytes(&self, w: &mut WireWriter, v: Option<&[u8]>) {
        if self.0 {
            w.compact_nullable_bytes(v)
        } else {
            w.nullable_bytes(v)
        }
    }

    pub(in crate::wire) fn write_bytes(&self, w: &mut WireWriter, v: &[u8]) {
        self.write_nullable_bytes(w, Some(v))
    }

    pub(in crate::wire) fn write_tags(&self, w: &mut WireWriter) {
        if self.0 {
            w.no_tagged_fields();
        }
    }
}
