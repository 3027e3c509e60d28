//! Buffers that small pieces are written into one after another and split off whole: every
//! Produce answer, every fetch answer's head and tail, and every small client batch the leader
//! copies to stamp. A piece costs no allocation of its own; a chunk is written again, or freed,
//! once every piece cut from it has been dropped (docs/architecture.md, "Node runtime").

use super::*;

/// One chunked buffer: pieces are written into `w` and split off; a piece starts in a fresh
/// chunk when the room left is below `min_room` (growing mid-piece would copy what the piece had
/// written so far).
struct Chunks {
    w: WireWriter,
    chunk_bytes: usize,
    min_room: usize,
}

impl Chunks {
    fn new(chunk_bytes: usize, min_room: usize) -> Self {
        assert!(min_room <= chunk_bytes);
        Self {
            w: WireWriter::new(),
            chunk_bytes,
            min_room,
        }
    }

    /// The writer, empty, with at least `min_room` bytes of room.
    fn writer(&mut self) -> &mut WireWriter {
        assert!(self.w.is_empty(), "a piece left unfinished in the arena");
        if self.w.room() < self.min_room {
            self.w.reserve(self.chunk_bytes);
        }
        &mut self.w
    }
}

/// Where response frames are written: each stamped with its size before it is split off.
pub(super) struct FrameArena(Chunks);

impl Default for FrameArena {
    /// 16 KiB chunks, a few hundred Produce answers each.
    fn default() -> Self {
        Self(Chunks::new(16 << 10, 1 << 10))
    }
}

impl FrameArena {
    /// One response frame whose body `body` writes: the size and header first, stamped.
    pub(super) fn frame(
        &mut self,
        correlation_id: i32,
        flexible: bool,
        body: impl FnOnce(&mut WireWriter),
    ) -> Bytes {
        let w = self.0.writer();
        w.i32(0);
        ResponseHeader { correlation_id }.write(w, flexible);
        body(w);
        let size = size_prefix(w.len() - 4);
        w.overwrite(0, &size);
        w.split_piece()
    }

    /// A FetchQuorumRecords answer's frame: its head and tail cut from the arena, its records
    /// the log's buffers, its size stamped (every fetcher gets one per fetch).
    pub(super) fn fetch_frame(
        &mut self,
        correlation_id: i32,
        flexible: bool,
        answer: &engine::raft::FetchQuorumRecordsResponse,
        broker_list: Option<&Bytes>,
    ) -> Vec<Bytes> {
        quorum::encode_fetch_response_frame(answer, broker_list, self.0.writer(), |w| {
            ResponseHeader { correlation_id }.write(w, flexible)
        })
    }
}

/// Where a client's batch is copied before the core stamps it (the request's bytes share the
/// receive buffer, so they are not stamped in place). A copy and the shared header its first
/// clone needs (the writer and the tail cache each hold one) cost no allocation; batches larger
/// than [`BatchCopies::MAX_SHARED_BYTES`] get one of their own, as they would leave a chunk
/// mostly unused.
pub(super) struct BatchCopies(Chunks);

impl Default for BatchCopies {
    /// 64 KiB chunks.
    fn default() -> Self {
        Self(Chunks::new(64 << 10, Self::MAX_SHARED_BYTES))
    }
}

impl BatchCopies {
    pub(super) const MAX_SHARED_BYTES: usize = 4 << 10;

    pub(super) fn copy(&mut self, bytes: &[u8]) -> BytesMut {
        if bytes.len() > Self::MAX_SHARED_BYTES {
            return BytesMut::from(bytes);
        }
        let w = self.0.writer();
        w.raw(bytes);
        w.split_mut()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Copies are exact and independent (stamping one leaves its neighbours alone), small ones
    /// share a chunk, and a large one is a copy of its own.
    #[test]
    fn batch_copies_are_exact_and_independent() {
        let mut copies = BatchCopies::default();
        let mut a = copies.copy(b"first batch");
        let b = copies.copy(b"second");
        a[..5].copy_from_slice(b"FIRST");
        assert_eq!(&a[..], b"FIRST batch");
        assert_eq!(&b[..], b"second");
        let (a, b) = (a.freeze(), b.freeze());
        assert_eq!(
            b.as_ptr(),
            a.as_ptr().wrapping_add(a.len()),
            "small copies share a chunk"
        );
        let largest_shared = vec![6u8; BatchCopies::MAX_SHARED_BYTES];
        let c = copies.copy(&largest_shared);
        assert_eq!(&c[..], &largest_shared[..]);
        assert_eq!(c.as_ptr(), b.as_ptr().wrapping_add(b.len()), "still shared");
        let c = c.freeze();
        let large = vec![7u8; BatchCopies::MAX_SHARED_BYTES + 1];
        let d = copies.copy(&large);
        assert_eq!(&d[..], &large[..]);
        let e = copies.copy(b"after");
        assert_eq!(&e[..], b"after");
        assert_eq!(
            e.as_ptr(),
            c.as_ptr().wrapping_add(c.len()),
            "a large batch is copied on its own, outside the chunk"
        );
    }

    /// A fetch answer's frame is its size, the header, and the body the quorum codec writes.
    #[test]
    fn a_fetch_frame_is_stamped_and_whole() {
        let answer = engine::raft::FetchQuorumRecordsResponse {
            error: ErrorCode::NONE,
            leader_id: 1,
            leader_epoch: 3,
            next_fetch_offset: -1,
            next_fetch_offset_epoch: -1,
            batches: Vec::new(),
            high_watermark: 9,
            first_dirty_offset: -1,
            last_caught_up_time_ms: -1,
            log_start: None,
            producer_state: None,
            lease_stamp: None,
        };
        let chain = FrameArena::default().fetch_frame(5, true, &answer, None);
        let frame: Vec<u8> = chain.iter().flat_map(|piece| piece.to_vec()).collect();
        let body: Vec<u8> =
            quorum::encode_response(&Response::FetchQuorumRecords(answer), WireWriter::new())
                .iter()
                .flat_map(|piece| piece.to_vec())
                .collect();
        assert_eq!(frame[..4], size_prefix(frame.len() - 4));
        assert_eq!(frame[4..8], 5i32.to_be_bytes());
        assert_eq!(
            frame[9..],
            body[..],
            "after the flexible header's empty tags"
        );
    }

    /// Each frame carries its own size and correlation id; small ones share a chunk, and one
    /// larger than a chunk is whole.
    #[test]
    fn frames_are_stamped_with_their_size_and_share_a_chunk() {
        let mut frames = FrameArena::default();
        let body = |len: usize| move |w: &mut WireWriter| w.raw(&vec![9u8; len]);
        let first = frames.frame(1, false, body(10));
        let second = frames.frame(2, true, body(20));
        let large = frames.frame(3, false, body(40 << 10));
        for (frame, correlation_id, body_len, flexible) in [
            (&first, 1, 10, false),
            (&second, 2, 20, true),
            (&large, 3, 40 << 10, false),
        ] {
            assert_eq!(frame[..4], size_prefix(frame.len() - 4));
            assert_eq!(frame[4..8], i32::to_be_bytes(correlation_id));
            let header_len = 8 + usize::from(flexible);
            assert_eq!(frame.len(), header_len + body_len);
            assert!(frame[header_len..].iter().all(|b| *b == 9));
        }
        assert_eq!(
            second.as_ptr(),
            first.as_ptr().wrapping_add(first.len()),
            "small frames share a chunk"
        );
    }
}
