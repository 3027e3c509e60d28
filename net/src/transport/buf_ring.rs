//! A provided buffer ring (IORING_REGISTER_PBUF_RING): a page-aligned array of buffer
//! descriptors shared with the kernel plus the buffers themselves. A multishot recv picks a free
//! buffer per completion; the loop copies the bytes into the connection's frame decoder and hands
//! the buffer straight back by advancing the ring's tail. So all connections share
//! `count * size` bytes of receive buffers instead of one buffer each.

use std::io;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU16, Ordering};

use io_uring::types::BufRingEntry;
use io_uring::Submitter;

pub(crate) struct ProvidedBuffers {
    ring: NonNull<BufRingEntry>,
    ring_bytes: usize,
    buffers: Box<[u8]>,
    count: u16,
    size: u32,
    group: u16,
    /// Our copy of the tail; the shared one is written with release ordering.
    tail: u16,
}

impl ProvidedBuffers {
    /// `count` must be a power of two no larger than 32768 (the kernel's rule).
    pub(crate) fn register(
        submitter: &Submitter<'_>,
        group: u16,
        count: u16,
        size: u32,
    ) -> io::Result<Self> {
        assert!(count.is_power_of_two() && count <= 32768);
        assert!(size > 0);
        let ring_bytes = usize::from(count) * std::mem::size_of::<BufRingEntry>();
        // SAFETY: an anonymous private mapping; checked for MAP_FAILED below. mmap gives the
        // page alignment the kernel requires of the ring.
        let addr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                ring_bytes,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if addr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let ring = NonNull::new(addr.cast::<BufRingEntry>()).expect("mmap returned a non-null");
        let mut this = Self {
            ring,
            ring_bytes,
            buffers: vec![0u8; usize::from(count) * size as usize].into_boxed_slice(),
            count,
            size,
            group,
            tail: 0,
        };
        // SAFETY: the mapping lives until Drop, which runs only after the owner unregistered
        // the group (or dropped the ring, which unregisters it).
        unsafe { submitter.register_buf_ring_with_flags(addr as u64, count, group, 0)? };
        for bid in 0..count {
            this.push(bid);
        }
        this.publish();
        Ok(this)
    }

    pub(crate) fn group(&self) -> u16 {
        self.group
    }

    /// The first `len` bytes of buffer `bid`, as the kernel filled them.
    pub(crate) fn filled(&self, bid: u16, len: usize) -> &[u8] {
        assert!(bid < self.count, "buffer id {bid} out of range");
        assert!(len <= self.size as usize);
        let start = usize::from(bid) * self.size as usize;
        &self.buffers[start..start + len]
    }

    /// Give buffer `bid` back to the kernel.
    pub(crate) fn recycle(&mut self, bid: u16) {
        assert!(bid < self.count, "buffer id {bid} out of range");
        self.push(bid);
        self.publish();
    }

    fn push(&mut self, bid: u16) {
        let mask = self.count - 1;
        let index = usize::from(self.tail & mask);
        let addr = self.buffers.as_ptr() as u64 + u64::from(bid) * u64::from(self.size);
        // SAFETY: index < count, inside the mapping. The kernel does not read entries between
        // the published tail and ours.
        let entry = unsafe { &mut *self.ring.as_ptr().add(index) };
        entry.set_addr(addr);
        entry.set_len(self.size);
        entry.set_bid(bid);
        self.tail = self.tail.wrapping_add(1);
    }

    fn publish(&self) {
        // SAFETY: the tail field overlays entry 0's reserved field, inside the mapping, and is
        // a naturally aligned u16 the kernel reads with acquire ordering.
        let tail = unsafe { &*(BufRingEntry::tail(self.ring.as_ptr()) as *const AtomicU16) };
        tail.store(self.tail, Ordering::Release);
    }
}

impl Drop for ProvidedBuffers {
    fn drop(&mut self) {
        // SAFETY: the mapping was created in register with this length.
        unsafe { libc::munmap(self.ring.as_ptr().cast(), self.ring_bytes) };
    }
}
