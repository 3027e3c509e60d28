//! Timers (one-shot ring timeouts, cancellable until they fire) and eventfd watches (a
//! multishot poll per descriptor; the loop reads the counter and reports the wake-up).

use std::os::fd::RawFd;
use std::time::{Duration, Instant};

use io_uring::opcode;
use io_uring::types::{Fd, Timespec};
use tracing::warn;

use super::ring::timespec;
use super::{EventLoop, Op};
use crate::transport::error::{Errno, TransportError};
use crate::transport::{Event, TimerId, WatchId};

impl EventLoop {
    /// A timer that fires once after `after` (a ring timeout, so `poll` wakes for it).
    pub fn add_timer(&mut self, after: Duration) -> Result<TimerId, TransportError> {
        let timespec = Box::new(timespec(after));
        let ptr: *const Timespec = &*timespec;
        let op = self.ops.insert(Op::Timer {
            _timespec: timespec,
            cancelled: false,
        });
        self.push(opcode::Timeout::new(ptr).build().user_data(op))?;
        Ok(TimerId(op))
    }

    pub fn add_timer_at(&mut self, deadline: Instant) -> Result<TimerId, TransportError> {
        self.add_timer(deadline.saturating_duration_since(Instant::now()))
    }

    /// True if the timer was pending; it will not be reported after this.
    pub fn cancel_timer(&mut self, id: TimerId) -> Result<bool, TransportError> {
        let removal = opcode::TimeoutRemove::new(id.0).build();
        self.cancel_pending(id.0, |op| matches!(op, Op::Timer { .. }), removal)
    }

    pub(super) fn on_timer(&mut self, op: u64, res: i32) {
        if res != -libc::ETIME && res != -libc::ECANCELED {
            // Reported anyway: waking early is harmless, never waking is not.
            warn!(error = %Errno(-res), "timer failed (the kernel refused an io_uring timeout); if it repeats, report it \
                 with the kernel version");
        }
        match self.ops.remove(op) {
            Some(Op::Timer { cancelled, .. }) => {
                if !cancelled {
                    self.ready.push(Event::TimerFired { id: TimerId(op) })
                }
            }
            _ => unreachable!("timer completion of a non-timer op"),
        }
    }

    /// Report writes to a non-blocking eventfd (EFD_NONBLOCK) as `Event::EventFd`; the loop
    /// reads (and so resets) the counter. The caller keeps the descriptor open until
    /// [`EventLoop::unwatch`] and the loop's drop.
    pub fn watch_eventfd(&mut self, fd: RawFd) -> Result<WatchId, TransportError> {
        // SAFETY: plain syscall.
        let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
        if flags < 0 {
            return Err(TransportError::BadEventFd {
                fd,
                reason: "not an open descriptor",
            });
        }
        if flags & libc::O_NONBLOCK == 0 {
            return Err(TransportError::BadEventFd {
                fd,
                reason:
                    "must be non-blocking (EFD_NONBLOCK): a second wake-up would block the loop",
            });
        }
        let op = self.ops.insert(Op::EventFdPoll {
            fd,
            cancelled: false,
        });
        self.arm_eventfd(op, fd)?;
        Ok(WatchId(op))
    }

    pub fn unwatch(&mut self, id: WatchId) -> Result<bool, TransportError> {
        let removal = opcode::PollRemove::new(id.0).build();
        self.cancel_pending(id.0, |op| matches!(op, Op::EventFdPoll { .. }), removal)
    }

    fn arm_eventfd(&mut self, op: u64, fd: RawFd) -> Result<(), TransportError> {
        self.push(
            opcode::PollAdd::new(Fd(fd), libc::POLLIN as u32)
                .multi(true)
                .build()
                .user_data(op),
        )
    }

    pub(super) fn on_eventfd(
        &mut self,
        op: u64,
        res: i32,
        more: bool,
    ) -> Result<(), TransportError> {
        let (fd, cancelled) = match self.ops.get(op) {
            Some(Op::EventFdPoll { fd, cancelled }) => (*fd, *cancelled),
            _ => unreachable!("eventfd completion of another op"),
        };
        if !cancelled && res > 0 {
            let mut count = [0u8; 8];
            // SAFETY: reads at most 8 bytes into a live 8-byte array.
            let n = unsafe { libc::read(fd, count.as_mut_ptr().cast(), 8) };
            // Short or EAGAIN: a wake-up already consumed by an earlier read.
            if n == 8 {
                self.ready.push(Event::EventFd {
                    id: WatchId(op),
                    count: u64::from_ne_bytes(count),
                });
            }
        } else if res < 0 && res != -libc::ECANCELED {
            warn!(error = %Errno(-res), fd, "eventfd poll failed (the kernel refused an io_uring poll); if it repeats, report \
                 it with the kernel version");
        }
        if more {
            return Ok(());
        }
        if cancelled || (res < 0 && res != -libc::ECANCELED) {
            self.ops.remove(op);
            return Ok(());
        }
        self.arm_eventfd(op, fd)
    }
}
