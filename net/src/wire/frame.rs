//! Size-prefixed framing: an int32 byte count, then that many bytes (docs/protocol.md section 13).
//!
//! [`FrameDecoder`] takes bytes as they arrive from a socket and yields whole frames as
//! [`Bytes`], cut from its buffer without a copy (a large response frame gets an allocation of
//! its own: [`FrameDecoder::for_responses`]). A size below the smallest header or above the limit is a
//! [`FrameError`]: the connection cannot be resynchronised and must be closed.

use bytes::{Buf, Bytes, BytesMut};
use thiserror::Error;

use super::header::RequestPrefix;

/// Kafka's default `socket.request.max.bytes` (100 MiB).
pub const DEFAULT_MAX_FRAME_BYTES: usize = 100 * 1024 * 1024;

/// How far beyond the received bytes the buffer grows at a time while a frame arrives.
const RESERVE_STEP: usize = 64 * 1024;

/// Response frames of at least this size get an allocation of their own
/// ([`FrameDecoder::for_responses`]).
pub const OWN_ALLOCATION_BYTES: usize = 64 * 1024;

/// Up to this size such a frame's allocation is made whole when its size arrives, and its
/// body received straight into it; a larger one grows in steps with the bytes and is copied
/// out at the end, so that a declared size alone never reserves more than this. Twice the
/// largest fetch answer of the default `fetch_max_bytes` (1 MiB).
pub const OWN_ALLOCATION_UPFRONT_MAX: usize = 2 * 1024 * 1024;

#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum FrameError {
    #[error("frame size {size} is negative")]
    Negative { size: i32 },
    #[error("frame size {size} is below the {min}-byte minimum")]
    TooSmall { size: usize, min: usize },
    #[error("frame size {size} exceeds the limit of {max} bytes")]
    TooLarge { size: usize, max: usize },
}

pub struct FrameDecoder {
    buf: BytesMut,
    min_frame: usize,
    max_frame: usize,
    /// Frames of at least this size get an allocation of their own rather than being cut
    /// from `buf`.
    own_allocation_from: usize,
    /// The body of such a frame while it arrives, in an allocation of exactly its size, and
    /// that size: the bytes after its size prefix go here, not to `buf`.
    own_body: Option<(BytesMut, usize)>,
}

impl FrameDecoder {
    /// For a server reading requests: every frame holds at least a request prefix. Frames
    /// are never copied: the leader keeps no request frame, only the copy of each Produce
    /// batch that it stamps.
    pub fn for_requests(max_frame: usize) -> Self {
        Self::new(RequestPrefix::LEN, max_frame, usize::MAX)
    }

    /// For a client reading responses: every frame holds at least a correlation id. A frame of
    /// [`OWN_ALLOCATION_BYTES`] or more gets an allocation of its own: of exactly its size,
    /// made when its size arrives, its body received straight into it (up to
    /// [`OWN_ALLOCATION_UPFRONT_MAX`]; a larger one is copied out once whole). A follower
    /// keeps the batches of its fetch answers (up to a mebibyte each) in its tail cache, and
    /// a frame cut from the buffer would keep the whole buffer alive with them: grown by
    /// doubling, up to twice the frame, and holding the start of the next one. Measured
    /// before frames had allocations of their own (docs/operations.md, "Memory"): followers at 99-121 MB of resident
    /// memory beside a leader at 80 MB, all three with the same 64 MiB of cached batches.
    pub fn for_responses(max_frame: usize) -> Self {
        Self::new(4, max_frame, OWN_ALLOCATION_BYTES)
    }

    /// [`Self::for_responses`] with frames of their own from `own_allocation_from` bytes
    /// instead: the fuzz target reaches them with inputs of a few hundred bytes.
    #[doc(hidden)]
    pub fn for_responses_copying_from(max_frame: usize, own_allocation_from: usize) -> Self {
        Self::new(4, max_frame, own_allocation_from)
    }

    fn new(min_frame: usize, max_frame: usize, own_allocation_from: usize) -> Self {
        assert!(min_frame <= max_frame);
        Self {
            buf: BytesMut::new(),
            min_frame,
            max_frame,
            own_allocation_from,
            own_body: None,
        }
    }

    /// Bytes received but not yet handed out as frames.
    pub fn buffered(&self) -> usize {
        self.buf.len() + self.own_body.as_ref().map_or(0, |(body, _)| body.len())
    }

    pub fn extend(&mut self, mut data: &[u8]) {
        if let Some((body, size)) = &mut self.own_body {
            let take = (*size - body.len()).min(data.len());
            body.extend_from_slice(&data[..take]);
            debug_assert!(body.len() <= body.capacity() && body.len() <= *size);
            data = &data[take..];
        }
        self.buf.extend_from_slice(data);
    }

    /// The next whole frame, if one has arrived. The size is checked as soon as its 4 bytes are
    /// in, so an oversized frame is refused before its body is buffered.
    pub fn next_frame(&mut self) -> Result<Option<Bytes>, FrameError> {
        if let Some((body, size)) = &self.own_body {
            if body.len() < *size {
                return Ok(None);
            }
            let (body, _) = self.own_body.take().expect("checked above");
            return Ok(Some(body.freeze()));
        }
        if self.buf.len() < 4 {
            return Ok(None);
        }
        let size = i32::from_be_bytes([self.buf[0], self.buf[1], self.buf[2], self.buf[3]]);
        let size = usize::try_from(size).map_err(|_| FrameError::Negative { size })?;
        if size < self.min_frame {
            return Err(FrameError::TooSmall {
                size,
                min: self.min_frame,
            });
        }
        if size > self.max_frame {
            return Err(FrameError::TooLarge {
                size,
                max: self.max_frame,
            });
        }
        if (self.own_allocation_from..=OWN_ALLOCATION_UPFRONT_MAX).contains(&size) {
            return Ok(self.start_own_body(size));
        }
        if self.buf.len() < 4 + size {
            // Grow toward the declared size in steps: a peer that declares 100 MiB and sends
            // nothing must not make us reserve 100 MiB.
            let missing = 4 + size - self.buf.len();
            self.buf.reserve(missing.min(RESERVE_STEP));
            return Ok(None);
        }
        self.buf.advance(4);
        if size >= self.own_allocation_from {
            let frame = Bytes::copy_from_slice(&self.buf[..size]);
            self.buf.advance(size);
            return Ok(Some(frame));
        }
        Ok(Some(self.buf.split_to(size).freeze()))
    }

    /// Moves what has arrived of a frame of `size` into an allocation of exactly that size,
    /// which the rest of its body then goes to; the frame itself if it is all there.
    fn start_own_body(&mut self, size: usize) -> Option<Bytes> {
        self.buf.advance(4);
        let arrived = self.buf.len().min(size);
        let mut body = BytesMut::with_capacity(size);
        body.extend_from_slice(&self.buf[..arrived]);
        self.buf.advance(arrived);
        if arrived == size {
            return Some(body.freeze());
        }
        self.own_body = Some((body, size));
        None
    }
}

/// A chain of pieces (an encoded response, a records field of several batches) as one buffer,
/// as the peer receives it: the piece itself when there is one, else a copy of the pieces
/// joined. For clients and tests, which read what a chain holds; a send path hands the chain
/// to the transport as it is.
pub fn joined(chain: &[Bytes]) -> Bytes {
    match chain {
        [] => Bytes::new(),
        [one] => one.clone(),
        many => {
            let mut joined = BytesMut::with_capacity(many.iter().map(Bytes::len).sum());
            for piece in many {
                joined.extend_from_slice(piece);
            }
            joined.freeze()
        }
    }
}

/// The 4-byte size prefix of a frame of `body_len` bytes.
pub fn size_prefix(body_len: usize) -> [u8; 4] {
    let size = i32::try_from(body_len).expect("frame below 2 GiB");
    size.to_be_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_arrive_in_pieces() {
        let mut d = FrameDecoder::for_requests(1024);
        let mut stream = Vec::new();
        for body in [&[1u8; 8][..], &[2u8; 20][..]] {
            stream.extend_from_slice(&size_prefix(body.len()));
            stream.extend_from_slice(body);
        }
        let mut frames = Vec::new();
        for byte in stream {
            d.extend(&[byte]);
            while let Some(frame) = d.next_frame().unwrap() {
                frames.push(frame);
            }
        }
        assert_eq!(frames.len(), 2);
        assert_eq!(&frames[1][..], &[2u8; 20]);
        assert_eq!(d.buffered(), 0);
    }

    #[test]
    fn a_declared_size_reserves_memory_only_as_bytes_arrive() {
        let mut d = FrameDecoder::for_requests(DEFAULT_MAX_FRAME_BYTES);
        d.extend(&size_prefix(DEFAULT_MAX_FRAME_BYTES));
        assert_eq!(d.next_frame().unwrap(), None);
        assert!(
            d.buf.capacity() <= 4 * RESERVE_STEP,
            "reserved {}",
            d.buf.capacity()
        );
    }

    /// Growth toward a declared size: a large frame grows the buffer in 64 KiB steps (not one
    /// small reallocation per read), a small one by what is still missing, so its bytes fit
    /// without another allocation and without doubling it.
    #[test]
    fn a_partly_arrived_frame_reserves_what_is_missing() {
        let mut d = FrameDecoder::for_requests(DEFAULT_MAX_FRAME_BYTES);
        d.extend(&size_prefix(1 << 20));
        assert_eq!(d.next_frame().unwrap(), None);
        assert!(
            d.buf.capacity() >= 64 * 1024,
            "reserved {}",
            d.buf.capacity()
        );

        // Under a third of the frame in, then over half of it.
        for arrived in [296, 596] {
            let mut d = FrameDecoder::for_requests(DEFAULT_MAX_FRAME_BYTES);
            d.extend(&size_prefix(1000));
            d.extend(&vec![5; arrived]);
            assert_eq!(d.next_frame().unwrap(), None);
            assert_eq!(d.buffered(), 4 + arrived);
            let capacity = d.buf.capacity();
            assert!((1004..2 * 1004).contains(&capacity), "reserved {capacity}");
            d.extend(&vec![5; 1000 - arrived]);
            assert_eq!(d.next_frame().unwrap().map(|f| f.len()), Some(1000));
            assert_eq!(d.buffered(), 0);
        }
    }

    /// Kafka's default request limit, 100 MiB: a frame of exactly that size is waited for, one
    /// byte more is refused.
    #[test]
    fn the_default_limit_is_kafkas_100_mib() {
        let mut d = FrameDecoder::for_requests(DEFAULT_MAX_FRAME_BYTES);
        d.extend(&size_prefix(100 * 1024 * 1024));
        assert_eq!(d.next_frame().unwrap(), None);
        let mut d = FrameDecoder::for_requests(DEFAULT_MAX_FRAME_BYTES);
        d.extend(&size_prefix(100 * 1024 * 1024 + 1));
        assert!(matches!(
            d.next_frame(),
            Err(FrameError::TooLarge {
                max: 104_857_600,
                ..
            })
        ));
    }

    /// A large response frame that arrives in pieces is received into an allocation of
    /// exactly its size, not into the shared buffer: no copy at the end, nothing else kept
    /// alive with it, and the bytes after it still go to the buffer.
    #[test]
    fn a_large_response_frame_is_received_into_its_own_allocation() {
        let large = OWN_ALLOCATION_BYTES + 1000;
        let mut stream = size_prefix(large).to_vec();
        stream.extend((0..large).map(|i| i as u8));
        stream.extend_from_slice(&size_prefix(10));
        stream.extend([8u8; 10]);
        let mut d = FrameDecoder::for_responses(DEFAULT_MAX_FRAME_BYTES);
        let mut frames = Vec::new();
        for piece in stream.chunks(4096 + 7) {
            d.extend(piece);
            assert!(d.buffered() <= stream.len());
            while let Some(frame) = d.next_frame().unwrap() {
                frames.push(frame);
            }
        }
        assert_eq!(frames.len(), 2);
        assert_eq!(&frames[0][..], &stream[4..4 + large]);
        assert_eq!(&frames[1][..], &[8u8; 10]);
        assert_eq!(d.buffered(), 0);
        let mut d = FrameDecoder::for_responses(DEFAULT_MAX_FRAME_BYTES);
        d.extend(&stream[..100]);
        assert_eq!(d.next_frame().unwrap(), None);
        let (body, size) = d.own_body.as_ref().expect("assembled on its own");
        assert_eq!((body.capacity(), *size, body.len()), (large, large, 96));
        assert_eq!(d.buf.len(), 0);
    }

    /// Above [`OWN_ALLOCATION_UPFRONT_MAX`] a declared size reserves nothing up front: the
    /// buffer grows with the bytes, as for requests.
    #[test]
    fn a_response_frame_above_the_upfront_bound_reserves_in_steps() {
        let mut d = FrameDecoder::for_responses(DEFAULT_MAX_FRAME_BYTES);
        d.extend(&size_prefix(OWN_ALLOCATION_UPFRONT_MAX + 1));
        assert_eq!(d.next_frame().unwrap(), None);
        assert!(d.own_body.is_none());
        assert!(d.buf.capacity() <= 4 * RESERVE_STEP, "{}", d.buf.capacity());
    }

    /// A large response frame is copied out, so the decoder's buffer stays its own and is
    /// reused for the next frame; a small one, and any request frame, is cut from the buffer.
    #[test]
    fn a_large_response_frame_gets_an_allocation_of_its_own() {
        let large = OWN_ALLOCATION_BYTES;
        let mut stream = size_prefix(large).to_vec();
        stream.extend(vec![7u8; large]);
        stream.extend_from_slice(&size_prefix(10));
        stream.extend([8u8; 10]);
        for (mut d, copied) in [
            (FrameDecoder::for_responses(DEFAULT_MAX_FRAME_BYTES), true),
            (FrameDecoder::for_requests(DEFAULT_MAX_FRAME_BYTES), false),
        ] {
            d.extend(&stream);
            let buffer_start = d.buf.as_ptr() as usize;
            let buffer = buffer_start..buffer_start + d.buf.capacity();
            let frame = d.next_frame().unwrap().unwrap();
            assert_eq!(&frame[..], &vec![7u8; large][..]);
            let frame_start = frame.as_ptr() as usize;
            assert_eq!(buffer.contains(&frame_start), !copied);
            let small = d.next_frame().unwrap().unwrap();
            assert_eq!(&small[..], &[8u8; 10]);
            assert!(buffer.contains(&(small.as_ptr() as usize)));
        }
    }

    #[test]
    fn bad_sizes_are_refused_before_buffering() {
        let mut d = FrameDecoder::for_requests(DEFAULT_MAX_FRAME_BYTES);
        d.extend(&0x7fff_ffffu32.to_be_bytes());
        assert!(matches!(d.next_frame(), Err(FrameError::TooLarge { .. })));
        let mut d = FrameDecoder::for_requests(1024);
        d.extend(&(-1i32).to_be_bytes());
        assert!(matches!(
            d.next_frame(),
            Err(FrameError::Negative { size: -1 })
        ));
        let mut d = FrameDecoder::for_requests(1024);
        d.extend(&3i32.to_be_bytes());
        assert!(matches!(
            d.next_frame(),
            Err(FrameError::TooSmall { size: 3, .. })
        ));
    }
}
