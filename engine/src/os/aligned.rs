//! Block-aligned heap buffers for O_DIRECT IO.

use std::alloc::{self, Layout};
use std::ptr::NonNull;

/// The alignment and granularity of every O_DIRECT transfer (a page; covers 512 B and 4 KiB
/// logical block sizes alike).
pub const BLOCK: usize = 4096;

/// Rounds `n` down to a multiple of [`BLOCK`].
pub const fn align_down(n: u64) -> u64 {
    n & !(BLOCK as u64 - 1)
}

/// Rounds `n` up to a multiple of [`BLOCK`].
pub const fn align_up(n: u64) -> u64 {
    align_down(n + BLOCK as u64 - 1)
}

/// A zero-initialised, [`BLOCK`]-aligned byte buffer of fixed capacity with a fill length.
///
/// The capacity is a multiple of [`BLOCK`] so a write of the filled part rounded up to the block
/// is always in bounds. The buffer never moves, so its address can be registered with a ring.
pub struct AlignedBuf {
    ptr: NonNull<u8>,
    capacity: usize,
    len: usize,
}

// SAFETY: the buffer is plain owned memory; moving it between threads is like moving a Vec<u8>.
unsafe impl Send for AlignedBuf {}

impl AlignedBuf {
    /// Allocates `capacity` bytes (rounded up to a block, at least one block), all zero.
    pub fn zeroed(capacity: usize) -> Self {
        let capacity = align_up(capacity.max(BLOCK) as u64) as usize;
        let layout = Self::layout(capacity);
        // SAFETY: the layout has a non-zero size.
        let raw = unsafe { alloc::alloc_zeroed(layout) };
        let Some(ptr) = NonNull::new(raw) else {
            alloc::handle_alloc_error(layout)
        };
        Self {
            ptr,
            capacity,
            len: 0,
        }
    }

    fn layout(capacity: usize) -> Layout {
        Layout::from_size_align(capacity, BLOCK).expect("aligned buffer layout")
    }

    pub fn capacity(&self) -> usize {
        self.capacity
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn as_ptr(&self) -> *const u8 {
        self.ptr.as_ptr()
    }

    /// The filled part.
    pub fn filled(&self) -> &[u8] {
        // SAFETY: len <= capacity and the memory is initialised (allocated zeroed).
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }

    /// The whole capacity, filled or not.
    pub fn as_full_slice(&self) -> &[u8] {
        // SAFETY: the allocation is `capacity` initialised bytes.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.capacity) }
    }

    /// The whole capacity, filled or not, writable.
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: the allocation is `capacity` initialised bytes, borrowed mutably through self.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.capacity) }
    }

    /// Bytes still free after the filled part.
    pub fn remaining(&self) -> usize {
        self.capacity - self.len
    }

    /// Appends `bytes` to the filled part. The caller checks [`Self::remaining`] first.
    pub fn extend_from_slice(&mut self, bytes: &[u8]) {
        assert!(bytes.len() <= self.remaining(), "aligned buffer overflow");
        let start = self.len;
        self.as_mut_slice()[start..start + bytes.len()].copy_from_slice(bytes);
        self.len += bytes.len();
    }

    /// Zeroes the bytes from the filled length up to the next block boundary, so that the
    /// block-rounded write of the filled part carries zeros (the log's end marker) after the data.
    /// Returns the rounded length.
    pub fn pad_to_block(&mut self) -> usize {
        let end = align_up(self.len as u64) as usize;
        let start = self.len;
        self.as_mut_slice()[start..end].fill(0);
        end
    }

    /// Keeps only the last partial block of the filled part, moved to the front. Returns how many
    /// bytes (a multiple of [`BLOCK`]) were dropped from the front.
    pub fn keep_partial_tail(&mut self) -> usize {
        let dropped = align_down(self.len as u64) as usize;
        let tail = self.len - dropped;
        if dropped > 0 {
            self.as_mut_slice().copy_within(dropped..dropped + tail, 0);
        }
        self.len = tail;
        dropped
    }

    /// Sets the filled length; bytes past it keep whatever they held.
    pub fn set_len(&mut self, len: usize) {
        assert!(len <= self.capacity);
        self.len = len;
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        // SAFETY: allocated in `zeroed` with exactly this layout.
        unsafe { alloc::dealloc(self.ptr.as_ptr(), Self::layout(self.capacity)) }
    }
}

impl std::fmt::Debug for AlignedBuf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AlignedBuf")
            .field("capacity", &self.capacity)
            .field("len", &self.len)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffer_is_block_aligned_and_zeroed() {
        let buf = AlignedBuf::zeroed(10);
        assert_eq!(buf.capacity(), BLOCK);
        assert_eq!(buf.as_ptr() as usize % BLOCK, 0);
        let mut buf = buf;
        assert!(buf.as_mut_slice().iter().all(|&b| b == 0));
    }

    #[test]
    fn partial_tail_moves_to_front() {
        let mut buf = AlignedBuf::zeroed(3 * BLOCK);
        let data: Vec<u8> = (0..BLOCK + 100).map(|i| (i % 251) as u8).collect();
        buf.extend_from_slice(&data);
        assert_eq!(buf.pad_to_block(), 2 * BLOCK);
        assert_eq!(buf.keep_partial_tail(), BLOCK);
        assert_eq!(buf.filled(), &data[BLOCK..]);
    }

    #[test]
    fn alignment_helpers() {
        assert_eq!(align_down(4097), 4096);
        assert_eq!(align_up(4097), 8192);
        assert_eq!(align_up(4096), 4096);
        assert_eq!(align_up(0), 0);
    }
}
