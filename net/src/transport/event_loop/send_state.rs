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

impl SendState {
    pub(super) fn new(pieces: Vec<Bytes>) -> Box<Self> {
        assert!(!pieces.is_empty());
        assert!(pieces.iter().all(|p| !p.is_empty()));
        Box::new(Self {
            iovecs: Vec::with_capacity(pieces.len().min(IOV_MAX)),
            pieces,
            piece: 0,
            offset: 0,
            // SAFETY: msghdr is plain old data; zeroed means no name, no control data.
            msg: unsafe { std::mem::zeroed() },
        })
    }

    /// The pieces, for their owner to take back once the kernel is done with them.
    pub(super) fn into_pieces(self) -> Vec<Bytes> {
        self.pieces
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
        let mut state = SendState::new(pieces);
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
}
