//! Setting up the ring (single-issuer if the kernel allows, the provided receive buffers) and
//! talking to it: entering it to submit and wait, copying completions out, pushing entries
//! while making room in a full submission queue, and the bounded cancel-and-drain shut-down
//! that `Drop` runs before the memory the operations point at is freed.

use std::io;
use std::time::Duration;

use io_uring::types::{CancelBuilder, SubmitArgs, Timespec};
use io_uring::{opcode, squeue, IoUring};
use tracing::{debug, warn};

use super::connections::Report;
use super::{EventLoop, Op, IGNORED, PUSH_ATTEMPTS, RECV_GROUP};
use crate::transport::buf_ring::ProvidedBuffers;
use crate::transport::error::{CloseReason, TransportError};
use crate::transport::slab::Slab;
use crate::transport::socket;
use crate::transport::{Config, Features, ListenerId, Stats};

fn is_unavailable(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::ENOSYS) | Some(libc::EPERM))
}

fn build_ring(config: &Config) -> Result<(IoUring, bool), TransportError> {
    let entries = config.ring_entries;
    let cq_entries = entries.saturating_mul(4);
    if config.try_single_issuer {
        let built = IoUring::builder()
            .setup_single_issuer()
            .setup_defer_taskrun()
            .setup_coop_taskrun()
            .setup_cqsize(cq_entries)
            .build(entries);
        match built {
            Ok(ring) => return Ok((ring, true)),
            Err(e) if is_unavailable(&e) => {
                return Err(TransportError::IoUringUnavailable { source: e })
            }
            Err(e) => warn!(
                error = %e,
                "kernel refused SINGLE_ISSUER|DEFER_TASKRUN|COOP_TASKRUN; using a plain ring (slower \
                 wake-ups; run on Linux 6.1 or later to get them)"
            ),
        }
    }
    match IoUring::builder().setup_cqsize(cq_entries).build(entries) {
        Ok(ring) => Ok((ring, false)),
        Err(e) if is_unavailable(&e) => Err(TransportError::IoUringUnavailable { source: e }),
        Err(e) => Err(TransportError::RingSetup { entries, source: e }),
    }
}

/// A kernel timespec for `d`; seconds beyond i64 (which would turn negative, EINVAL) saturate.
pub(super) fn timespec(d: Duration) -> Timespec {
    Timespec::new()
        .sec(d.as_secs().min(i64::MAX as u64))
        .nsec(d.subsec_nanos())
}

fn enter_error(source: io::Error) -> TransportError {
    TransportError::Enter { source }
}

impl EventLoop {
    /// Must be called on the thread that will poll it (the ring is set up single-issuer).
    pub fn new(config: Config) -> Result<Self, TransportError> {
        assert!(config.max_frame_bytes >= 8);
        let (ring, single_issuer) = build_ring(&config)?;
        let provided = if config.use_buf_ring {
            match ProvidedBuffers::register(
                &ring.submitter(),
                RECV_GROUP,
                config.recv_buffer_count,
                config.recv_buffer_size,
            ) {
                Ok(provided) => Some(provided),
                Err(e) => {
                    warn!(error = %e, "no provided buffer ring; one recv buffer per connection (more memory per connection; \
                         run on Linux 5.19 or later, or raise `ulimit -l` if it is memlock)");
                    None
                }
            }
        } else {
            None
        };
        let features = Features {
            single_issuer_defer_taskrun: single_issuer,
            buf_ring: provided.is_some(),
            multishot_accept: config.use_multishot_accept,
        };
        Ok(Self {
            ring,
            ops: Slab::new(),
            conns: Slab::new(),
            listeners: Slab::new(),
            provided,
            config,
            features,
            stats: Stats::default(),
            buffered_bytes: 0,
            outbound_buffered: 0,
            ready: Vec::new(),
            backlog: Vec::new(),
            unflushed: Vec::new(),
            tls_out_pool: Vec::new(),
            send_pool: Vec::new(),
            reaping: Vec::new(),
        })
    }

    pub(super) fn enter(&mut self, wait: Option<Duration>) -> Result<(), TransportError> {
        let result = match wait {
            None => self.ring.submit_and_wait(1),
            Some(wait) => {
                let timespec = timespec(wait);
                let args = SubmitArgs::new().timespec(&timespec);
                self.ring.submitter().submit_with_args(1, &args)
            }
        };
        match result {
            Ok(_) => Ok(()),
            // Timed out, interrupted, or the completion queue is full (we reap next).
            Err(e)
                if matches!(
                    e.raw_os_error(),
                    Some(libc::ETIME | libc::EINTR | libc::EBUSY)
                ) =>
            {
                Ok(())
            }
            Err(e) => Err(enter_error(e)),
        }
    }

    pub(super) fn collect_completions(&mut self) {
        let mut cq = self.ring.completion();
        cq.sync();
        for cqe in &mut cq {
            self.backlog
                .push((cqe.user_data(), cqe.result(), cqe.flags()));
        }
    }

    /// Cancels the op `key` if it is still pending and `is_kind` accepts it (an id cancels only
    /// an op of its own kind): marks it cancelled, so its completion is not reported, and pushes
    /// `removal` to take it out of the ring. False when there was nothing to cancel.
    pub(super) fn cancel_pending(
        &mut self,
        key: u64,
        is_kind: fn(&Op) -> bool,
        removal: squeue::Entry,
    ) -> Result<bool, TransportError> {
        let pending = self.ops.get_mut(key).filter(|op| is_kind(op));
        match pending.and_then(Op::cancelled_mut) {
            Some(cancelled) if !*cancelled => {
                *cancelled = true;
                self.push(removal.user_data(IGNORED))?;
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    pub(super) fn push(&mut self, entry: squeue::Entry) -> Result<(), TransportError> {
        self.make_room(1)?;
        // SAFETY: every pointer in the entry (timespecs, addresses, msghdrs, iovecs, recv
        // buffers) is owned by an op-slab entry or its connection and stays alive until the
        // operation's final completion has been reaped.
        unsafe { self.ring.submission().push(&entry) }.expect("room was made");
        Ok(())
    }

    /// Two linked entries must enter the queue together, or the link would break.
    pub(super) fn push_linked(
        &mut self,
        first: squeue::Entry,
        second: squeue::Entry,
    ) -> Result<(), TransportError> {
        self.make_room(2)?;
        // SAFETY: as in `push`.
        unsafe { self.ring.submission().push_multiple(&[first, second]) }.expect("room was made");
        Ok(())
    }

    fn make_room(&mut self, needed: usize) -> Result<(), TransportError> {
        for _ in 0..PUSH_ATTEMPTS {
            {
                let sq = self.ring.submission();
                if sq.capacity() - sq.len() >= needed {
                    return Ok(());
                }
            }
            match self.ring.submit() {
                Ok(_) => {}
                Err(e) if matches!(e.raw_os_error(), Some(libc::EBUSY | libc::EAGAIN)) => {
                    // The completion queue is full: take completions out (handled in poll).
                    self.collect_completions();
                }
                Err(e) => return Err(enter_error(e)),
            }
        }
        Err(enter_error(io::Error::other(
            "submission queue stayed full after repeated submits",
        )))
    }

    /// Cancel everything and wait (bounded) for the kernel to finish with the memory the
    /// operations point at.
    fn shut_down(&mut self) -> Result<(), TransportError> {
        for key in self.listeners.keys() {
            self.close_listener(ListenerId(key))?;
        }
        for key in self.conns.keys() {
            self.begin_close(key, Report::Closed(CloseReason::Local))?;
        }
        for key in self.ops.keys() {
            if let Some(cancelled) = self.ops.get_mut(key).and_then(Op::cancelled_mut) {
                *cancelled = true;
            }
        }
        self.push(
            opcode::AsyncCancel2::new(CancelBuilder::any())
                .build()
                .user_data(IGNORED),
        )?;
        for _ in 0..100 {
            if self.ops.is_empty() {
                break;
            }
            self.enter(Some(Duration::from_millis(10)))?;
            self.reap()?;
        }
        self.ready.clear();
        Ok(())
    }
}

impl Drop for EventLoop {
    fn drop(&mut self) {
        if let Err(e) = self.shut_down() {
            warn!(error = %e, "event loop shut down uncleanly (at a stop; nothing to do)");
        }
        if !self.ops.is_empty() {
            warn!(
                ops = self.ops.len(),
                "operations still in flight at drop (at a stop; nothing to do)"
            );
        }
        for key in self.conns.keys() {
            socket::close(self.conns.get(key).expect("listed key").fd);
        }
        for key in self.listeners.keys() {
            socket::close(self.listeners.get(key).expect("listed key").fd);
        }
        if let Some(provided) = &self.provided {
            if let Err(e) = self.ring.submitter().unregister_buf_ring(provided.group()) {
                debug!(error = %e, "unregistering the provided buffers");
            }
        }
    }
}
