//! The state of one sendmsg in flight: the frames' pieces, a cursor into them that survives
//! short sends, and the iovec array and msghdr the kernel reads, capped at IOV_MAX iovecs.

use bytes::Bytes;

use super::IOV_MAX;

/// One sendmsg in flight: the pieces of one or more queued frames, a cursor into them, and the
/// iovec array and msghdr the kernel reads. Boxed so their addresses stay put.
pub(super) struct SendState {
    pieces: Vec<Bytes>,
    piece: usize,
    offset: usize,
    iovecs: Vec<libc::iovec>,
    msg: libc::msghdr,
}

/// Spent states kept by a loop for its next sendmsgs, so a send allocates nothing: at most this
/// many, each with room for at most [`KEPT_PIECES`] pieces.
pub(super) const SEND_STATE_POOL: usize = 64;
const KEPT_PIECES: usize = 256;

impl SendState {
    /// A state with no pieces yet ([`SendState::push_piece`] them before `prepare`).
    pub(super) fn empty() -> Box<Self> {
        Box::new(Self {
            iovecs: Vec::new(),
            pieces: Vec::new(),
            piece: 0,
            offset: 0,
            // SAFETY: msghdr is plain old data; zeroed means no name, no control data.
            msg: unsafe { std::mem::zeroed() },
        })
    }

    pub(super) fn push_piece(&mut self, piece: Bytes) {
        assert!(!piece.is_empty());
        self.pieces.push(piece);
    }

    pub(super) fn piece_count(&self) -> usize {
        self.pieces.len()
    }

    /// The pieces, for their owner to take back once the kernel is done with them; the state is
    /// left empty for [`SendState::recycle`].
    pub(super) fn take_pieces(&mut self) -> Vec<Bytes> {
        std::mem::take(&mut self.pieces)
    }

    /// Empties a spent state for another sendmsg, keeping its vectors' room; None when that
    /// room grew past what a pool keeps.
    pub(super) fn recycle(mut self: Box<Self>) -> Option<Box<Self>> {
        if self.pieces.capacity() > KEPT_PIECES || self.iovecs.capacity() > KEPT_PIECES {
            return None;
        }
        self.pieces.clear();
        self.iovecs.clear();
        self.piece = 0;
        self.offset = 0;
        // SAFETY: as in `empty`.
        self.msg = unsafe { std::mem::zeroed() };
        Some(self)
    }

    pub(super) fn remaining(&self) -> usize {
        self.pieces[self.piece..]
            .iter()
            .map(Bytes::len)
            .sum::<usize>()
            - self.offset
    }

    /// Point the msghdr at the unsent rest (at most IOV_MAX pieces of it).
    pub(super) fn prepare(&mut self) -> *const libc::msghdr {
        assert!(self.piece < self.pieces.len());
        debug_assert!(self.pieces.iter().all(|p| !p.is_empty()));
        self.iovecs.clear();
        for (i, piece) in self.pieces[self.piece..].iter().take(IOV_MAX).enumerate() {
            let skip = if i == 0 { self.offset } else { 0 };
            assert!(skip < piece.len());
            self.iovecs.push(libc::iovec {
                // The kernel only reads through this pointer.
                iov_base: piece[skip..].as_ptr() as *mut libc::c_void,
                iov_len: piece.len() - skip,
            });
        }
        self.msg.msg_iov = self.iovecs.as_mut_ptr();
        self.msg.msg_iovlen = self.iovecs.len();
        &self.msg
    }

    /// Account for `sent` bytes; true when everything is sent.
    pub(super) fn advance(&mut self, mut sent: usize) -> bool {
        assert!(
            sent <= self.remaining(),
            "kernel reported more sent than asked"
        );
        while sent > 0 {
            let left_in_piece = self.pieces[self.piece].len() - self.offset;
            if sent < left_in_piece {
                self.offset += sent;
                sent = 0;
            } else {
                sent -= left_in_piece;
                self.piece += 1;
                self.offset = 0;
            }
        }
        self.piece == self.pieces.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn iov_bytes(state: &SendState) -> Vec<u8> {
        state
            .iovecs
            .iter()
            .flat_map(|iov| {
                // SAFETY: the iovecs point into the state's live pieces.
                unsafe { std::slice::from_raw_parts(iov.iov_base as *const u8, iov.iov_len) }
                    .to_vec()
            })
            .collect()
    }

    #[test]
    fn send_state_resumes_mid_piece_and_caps_iovecs() {
        let pieces: Vec<Bytes> = (0..IOV_MAX + 10)
            .map(|i| Bytes::from(vec![i as u8; 3]))
            .collect();
        let all: Vec<u8> = pieces.iter().flat_map(|p| p.to_vec()).collect();
        let mut state = SendState::empty();
        pieces.into_iter().for_each(|p| state.push_piece(p));
        state.prepare();
        assert_eq!(state.iovecs.len(), IOV_MAX);
        assert_eq!(state.msg.msg_iovlen, IOV_MAX);
        // A short send ending inside the second piece.
        assert!(!state.advance(4));
        state.prepare();
        assert_eq!(iov_bytes(&state)[..], all[4..4 + iov_bytes(&state).len()]);
        assert_eq!(state.remaining(), all.len() - 4);
        assert!(!state.advance(3 * IOV_MAX));
        state.prepare();
        assert_eq!(iov_bytes(&state)[..], all[4 + 3 * IOV_MAX..]);
        assert!(state.advance(state.remaining()));
    }

    /// A recycled state starts its next sendmsg at the first new piece, whatever the last one
    /// left behind; one whose vectors grew past the pool's bound is not kept.
    #[test]
    fn a_recycled_state_starts_afresh_and_a_grown_one_is_dropped() {
        let mut state = SendState::empty();
        state.push_piece(Bytes::from_static(b"abc"));
        state.push_piece(Bytes::from_static(b"de"));
        state.prepare();
        assert!(!state.advance(4));
        let mut state = state.recycle().expect("small states are kept");
        assert_eq!(state.piece_count(), 0);
        state.push_piece(Bytes::from_static(b"xyz"));
        state.prepare();
        assert_eq!(iov_bytes(&state), b"xyz");
        assert_eq!(state.remaining(), 3);
        assert!(state.advance(3));

        // Exactly the bound, pieces and iovecs alike, is kept; one more is not.
        let mut full = SendState::empty();
        (0..KEPT_PIECES).for_each(|_| full.push_piece(Bytes::from_static(b"p")));
        full.prepare();
        assert_eq!(
            (full.pieces.capacity(), full.iovecs.capacity()),
            (KEPT_PIECES, KEPT_PIECES)
        );
        assert!(full.recycle().is_some());
        let mut grown = SendState::empty();
        (0..KEPT_PIECES + 1).for_each(|_| grown.push_piece(Bytes::from_static(b"p")));
        assert!(grown.recycle().is_none());
    }
}
