//! The compression codecs of RecordBatch v2 (attributes bits 0-2), decompression only: a
//! compressed batch is stored and served as it came (its offsets live in the uncompressed batch
//! header, so nothing is ever recompressed), but its records are decompressed once, when it is
//! validated, so a batch whose records do not decode is refused before it is acknowledged
//! (docs/protocol.md, "Record batches").
//!
//! Every decoder is bounded: at most `limit` bytes come out, whatever the input claims, so a
//! small batch cannot expand into unbounded memory (a "decompression bomb").

use std::io::Read;

use super::error::RecordError;

/// The codec named by a batch's attributes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Compression {
    None,
    Gzip,
    Snappy,
    Lz4,
    Zstd,
}

impl Compression {
    /// The codec of attribute bits 0-2; 5, 6 and 7 name none.
    pub fn from_attributes(attributes: i16) -> Result<Compression, RecordError> {
        match attributes & 0x07 {
            0 => Ok(Compression::None),
            1 => Ok(Compression::Gzip),
            2 => Ok(Compression::Snappy),
            3 => Ok(Compression::Lz4),
            4 => Ok(Compression::Zstd),
            codec => Err(RecordError::UnsupportedCompression {
                attributes,
                codec: codec as u8,
            }),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Compression::None => "none",
            Compression::Gzip => "gzip",
            Compression::Snappy => "snappy",
            Compression::Lz4 => "lz4",
            Compression::Zstd => "zstd",
        }
    }
}

/// The most a batch's records may decompress to: the largest batch the log takes, so a
/// compressed batch never holds more than an uncompressed one could.
pub const MAX_DECOMPRESSED_BYTES: usize = super::header::MAX_BATCH_SIZE;

/// The records section of a batch compressed with `codec`, decompressed; at most `limit` bytes.
pub fn decompress(codec: Compression, input: &[u8], limit: usize) -> Result<Vec<u8>, RecordError> {
    let failed = |reason: String| RecordError::Decompression {
        codec: codec.name(),
        reason,
    };
    match codec {
        // Nothing to undo; BatchView::parse never asks, but the bound holds here too.
        Compression::None if input.len() > limit => Err(RecordError::DecompressedTooLarge {
            codec: codec.name(),
            limit,
        }),
        Compression::None => Ok(input.to_vec()),
        Compression::Gzip => {
            read_bounded(&mut flate2::read::MultiGzDecoder::new(input), codec, limit)
        }
        Compression::Lz4 => {
            let mut decoder = lz4::Decoder::new(input).map_err(|e| failed(e.to_string()))?;
            let out = read_bounded(&mut decoder, codec, limit)?;
            // The decoder reports a frame cut short only here: its reads just end early.
            decoder.finish().1.map_err(|e| failed(e.to_string()))?;
            Ok(out)
        }
        Compression::Zstd => {
            let mut decoder =
                zstd::stream::read::Decoder::new(input).map_err(|e| failed(e.to_string()))?;
            read_bounded(&mut decoder, codec, limit)
        }
        Compression::Snappy => snappy(input, limit),
    }
}

/// Reads `reader` to its end, refusing more than `limit` bytes.
fn read_bounded(
    reader: &mut impl Read,
    codec: Compression,
    limit: usize,
) -> Result<Vec<u8>, RecordError> {
    let mut out = Vec::new();
    // One byte past the limit tells "exactly at the limit" from "over it".
    let cap = u64::try_from(limit).unwrap_or(u64::MAX).saturating_add(1);
    reader
        .take(cap)
        .read_to_end(&mut out)
        .map_err(|e| RecordError::Decompression {
            codec: codec.name(),
            reason: e.to_string(),
        })?;
    if out.len() > limit {
        return Err(RecordError::DecompressedTooLarge {
            codec: codec.name(),
            limit,
        });
    }
    Ok(out)
}

/// snappy-java's framing, which Kafka's Java clients write: this magic, two version words, then
/// blocks of (big-endian u32 length, raw snappy block).
const XERIAL_MAGIC: &[u8; 8] = b"\x82SNAPPY\x00";
const XERIAL_HEADER_LEN: usize = 16;

/// Snappy as Kafka reads it: xerial-framed blocks when the magic is there (Java clients),
/// otherwise one raw snappy block (librdkafka).
fn snappy(input: &[u8], limit: usize) -> Result<Vec<u8>, RecordError> {
    if input.len() >= XERIAL_HEADER_LEN && input.starts_with(XERIAL_MAGIC) {
        let mut out = Vec::new();
        let mut rest = &input[XERIAL_HEADER_LEN..];
        while !rest.is_empty() {
            let Some((length, tail)) = rest.split_first_chunk::<4>() else {
                return Err(snappy_error("a block length is cut short".into()));
            };
            let length = u32::from_be_bytes(*length) as usize;
            if length > tail.len() {
                return Err(snappy_error(format!(
                    "a block of {length} bytes with {} left",
                    tail.len()
                )));
            }
            let (block, after) = tail.split_at(length);
            snappy_block(block, limit - out.len(), &mut out)?;
            rest = after;
        }
        Ok(out)
    } else {
        let mut out = Vec::new();
        snappy_block(input, limit, &mut out)?;
        Ok(out)
    }
}

/// Appends one raw snappy block to `out`, refusing one that says it holds more than `room`
/// bytes before anything is allocated for it.
fn snappy_block(block: &[u8], room: usize, out: &mut Vec<u8>) -> Result<(), RecordError> {
    let length = snap::raw::decompress_len(block).map_err(|e| snappy_error(e.to_string()))?;
    if length > room {
        return Err(RecordError::DecompressedTooLarge {
            codec: Compression::Snappy.name(),
            limit: room + out.len(),
        });
    }
    let start = out.len();
    out.resize(start + length, 0);
    let written = snap::raw::Decoder::new()
        .decompress(block, &mut out[start..])
        .map_err(|e| snappy_error(e.to_string()))?;
    out.truncate(start + written);
    Ok(())
}

fn snappy_error(reason: String) -> RecordError {
    RecordError::Decompression {
        codec: Compression::Snappy.name(),
        reason,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn gzip(data: &[u8]) -> Vec<u8> {
        let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        encoder.write_all(data).unwrap();
        encoder.finish().unwrap()
    }

    fn lz4(data: &[u8]) -> Vec<u8> {
        let mut encoder = lz4::EncoderBuilder::new().build(Vec::new()).unwrap();
        encoder.write_all(data).unwrap();
        let (out, result) = encoder.finish();
        result.unwrap();
        out
    }

    fn zstd(data: &[u8]) -> Vec<u8> {
        zstd::stream::encode_all(data, 1).unwrap()
    }

    fn raw_snappy(data: &[u8]) -> Vec<u8> {
        snap::raw::Encoder::new().compress_vec(data).unwrap()
    }

    /// xerial framing with blocks of at most `block` bytes of input.
    fn xerial(data: &[u8], block: usize) -> Vec<u8> {
        let mut out = b"\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01".to_vec();
        for chunk in data.chunks(block) {
            let compressed = raw_snappy(chunk);
            out.extend_from_slice(&(compressed.len() as u32).to_be_bytes());
            out.extend_from_slice(&compressed);
        }
        out
    }

    /// `data` under each codec, snappy both raw and in snappy-java's framing.
    fn compressed_every_way(data: &[u8]) -> [(Compression, Vec<u8>); 5] {
        [
            (Compression::Gzip, gzip(data)),
            (Compression::Lz4, lz4(data)),
            (Compression::Zstd, zstd(data)),
            (Compression::Snappy, raw_snappy(data)),
            (Compression::Snappy, xerial(data, 32 * 1024)),
        ]
    }

    fn sample() -> Vec<u8> {
        (0..100_000u32)
            .flat_map(|i| (i % 251).to_le_bytes())
            .collect()
    }

    #[test]
    fn every_codec_round_trips() {
        let data = sample();
        for (codec, compressed) in compressed_every_way(&data) {
            assert!(compressed.len() < data.len(), "{codec:?}");
            let out = decompress(codec, &compressed, MAX_DECOMPRESSED_BYTES).unwrap();
            assert_eq!(out, data, "{codec:?}");
        }
    }

    #[test]
    fn the_codec_comes_from_the_low_three_bits_and_5_to_7_are_refused() {
        assert_eq!(
            Compression::from_attributes(0x0010 | 4),
            Ok(Compression::Zstd)
        );
        assert_eq!(Compression::from_attributes(0x0020), Ok(Compression::None));
        for codec in 5..=7 {
            assert!(matches!(
                Compression::from_attributes(codec),
                Err(RecordError::UnsupportedCompression { .. })
            ));
        }
    }

    #[test]
    fn output_past_the_limit_is_refused_for_every_codec() {
        let zeros = vec![0u8; 1 << 20];
        assert!(matches!(
            decompress(Compression::None, &zeros, (1 << 20) - 1),
            Err(RecordError::DecompressedTooLarge { .. })
        ));
        assert_eq!(
            decompress(Compression::None, &zeros, 1 << 20).unwrap(),
            zeros
        );
        for (codec, compressed) in compressed_every_way(&zeros) {
            let limit = (1 << 20) - 1;
            match decompress(codec, &compressed, limit) {
                Err(RecordError::DecompressedTooLarge { .. }) => {}
                other => panic!("{codec:?}: {other:?}"),
            }
            // Exactly at the limit is fine.
            assert_eq!(
                decompress(codec, &compressed, 1 << 20).unwrap().len(),
                1 << 20
            );
        }
    }

    #[test]
    fn damaged_input_is_an_error_for_every_codec() {
        let data = sample();
        for (codec, compressed) in compressed_every_way(&data) {
            let cut = &compressed[..compressed.len() / 2];
            assert!(
                decompress(codec, cut, MAX_DECOMPRESSED_BYTES).is_err(),
                "{codec:?} cut in half"
            );
            assert!(
                decompress(codec, b"not compressed at all", MAX_DECOMPRESSED_BYTES).is_err(),
                "{codec:?} garbage"
            );
        }
    }

    #[test]
    fn a_xerial_block_longer_than_what_is_left_is_an_error() {
        let mut framed = xerial(&sample(), 32 * 1024);
        framed.truncate(XERIAL_HEADER_LEN + 6);
        assert!(matches!(
            decompress(Compression::Snappy, &framed, MAX_DECOMPRESSED_BYTES),
            Err(RecordError::Decompression { .. })
        ));
    }
}
