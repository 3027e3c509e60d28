//! The event channel from the log's threads (the group-commit writer and the reader) to the
//! thread that drives them, and the eventfd that wakes that thread after each event.
//!
//! The channel is bounded ([`EVENT_CAPACITY`]); what a full channel does depends on the event
//! (docs/architecture.md, "Threads"): a durability report never waits (the writer keeps only the
//! newest one and delivers it when there is room, see [`EventSink::send_or_recv`]); a read result,
//! a fatal error and the final stop wait for room, unless the handle has shut down (then nobody
//! reads them).

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::Arc;

use crossbeam_channel::{Receiver, RecvError, Select, Sender, TrySendError};

use super::writer::{WriterError, WriterEvent};

/// Events the channel holds. Durability reports coalesce and a read result is at most
/// `fetch_max_bytes`, so this bounds the memory of finished reads the raft thread has not taken
/// yet to `EVENT_CAPACITY` x `fetch_max_bytes`.
pub const EVENT_CAPACITY: usize = 64;

/// The sending side, one per log thread.
#[derive(Clone)]
pub(crate) struct EventSink {
    events: Sender<WriterEvent>,
    eventfd: Arc<OwnedFd>,
    /// Disconnected once the handle shuts down or is dropped: nobody reads events any more.
    closed: Receiver<()>,
}

/// The channel's receiving side, the eventfd, and the handle that closes the sink.
pub(crate) struct EventChannel {
    pub sink: EventSink,
    pub events: Receiver<WriterEvent>,
    pub eventfd: Arc<OwnedFd>,
    /// Dropping it tells the log threads that nobody reads events any more.
    pub close: Sender<()>,
}

impl EventChannel {
    pub fn new(capacity: usize) -> Result<Self, WriterError> {
        // SAFETY: plain syscall.
        let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
        if fd < 0 {
            return Err(WriterError::EventFd(std::io::Error::last_os_error()));
        }
        // SAFETY: fd is a fresh eventfd we own.
        let eventfd = Arc::new(unsafe { OwnedFd::from_raw_fd(fd) });
        let (event_tx, event_rx) = crossbeam_channel::bounded(capacity);
        let (close_tx, close_rx) = crossbeam_channel::bounded(0);
        Ok(Self {
            sink: EventSink {
                events: event_tx,
                eventfd: Arc::clone(&eventfd),
                closed: close_rx,
            },
            events: event_rx,
            eventfd,
            close: close_tx,
        })
    }
}

/// What [`EventSink::send_or_recv`] did.
pub(crate) enum SendOrRecv<T> {
    /// The event went out (or nobody reads events any more and it was dropped).
    Sent,
    /// A request came first (or the request channel closed); the event is handed back.
    Received(Result<T, RecvError>, WriterEvent),
}

impl EventSink {
    /// Queues `event` and signals the eventfd, waiting for room if the channel is full. Returns
    /// false (the event dropped) when nobody reads events any more.
    pub fn send(&self, event: WriterEvent) -> bool {
        let event = match self.events.try_send(event) {
            Ok(()) => {
                self.signal();
                return true;
            }
            Err(TrySendError::Disconnected(_)) => return false,
            Err(TrySendError::Full(event)) => event,
        };
        let mut select = Select::new();
        let send = select.send(&self.events);
        let closed = select.recv(&self.closed);
        let operation = select.select();
        if operation.index() == send {
            let sent = operation.send(&self.events, event).is_ok();
            if sent {
                self.signal();
            }
            sent
        } else {
            debug_assert_eq!(operation.index(), closed);
            let _ = operation.recv(&self.closed);
            false
        }
    }

    /// Queues `event` if the channel has room and signals the eventfd; hands it back when full.
    /// (With nobody reading, the event is dropped.)
    pub fn try_send(&self, event: WriterEvent) -> Result<(), WriterEvent> {
        match self.events.try_send(event) {
            Ok(()) => {
                self.signal();
                Ok(())
            }
            Err(TrySendError::Disconnected(_)) => Ok(()),
            Err(TrySendError::Full(event)) => Err(event),
        }
    }

    /// Waits until either `event` can be queued or a request arrives on `requests`, whichever
    /// comes first: the writer, idle with a report the full channel could not take, delivers it
    /// as soon as the raft thread makes room, yet never stops taking requests meanwhile.
    pub fn send_or_recv<T>(&self, event: WriterEvent, requests: &Receiver<T>) -> SendOrRecv<T> {
        let mut select = Select::new();
        let send = select.send(&self.events);
        let recv = select.recv(requests);
        let closed = select.recv(&self.closed);
        let operation = select.select();
        match operation.index() {
            i if i == send => {
                if operation.send(&self.events, event).is_ok() {
                    self.signal();
                }
                SendOrRecv::Sent
            }
            i if i == recv => SendOrRecv::Received(operation.recv(requests), event),
            i => {
                debug_assert_eq!(i, closed);
                let _ = operation.recv(&self.closed);
                SendOrRecv::Sent
            }
        }
    }

    /// Sleeps for `timeout` unless the handle shuts down first; returns true if it did.
    pub fn wait_closed(&self, timeout: std::time::Duration) -> bool {
        matches!(
            self.closed.recv_timeout(timeout),
            Err(crossbeam_channel::RecvTimeoutError::Disconnected)
        )
    }

    fn signal(&self) {
        let one: u64 = 1;
        // SAFETY: writes 8 bytes from a valid u64 to our eventfd. A full counter (EAGAIN) is
        // fine: the reader is already due to wake.
        unsafe { libc::write(self.eventfd.as_raw_fd(), (&one as *const u64).cast(), 8) };
    }
}

#[cfg(test)]
mod tests {
    use std::thread;
    use std::time::Duration;

    use super::*;

    fn stopped(at: i64) -> WriterEvent {
        WriterEvent::Stopped { end_offset: at }
    }

    fn stopped_at(event: WriterEvent) -> i64 {
        match event {
            WriterEvent::Stopped { end_offset } => end_offset,
            other => panic!("not a Stopped event: {other:?}"),
        }
    }

    /// The eventfd's counter, read (and so reset) without blocking: 0 when never signalled.
    fn signals(channel: &EventChannel) -> u64 {
        let mut count: u64 = 0;
        // SAFETY: reads 8 bytes into a valid u64 from our non-blocking eventfd.
        let n = unsafe {
            libc::read(
                channel.eventfd.as_raw_fd(),
                (&mut count as *mut u64).cast(),
                8,
            )
        };
        if n == 8 {
            count
        } else {
            0
        }
    }

    #[test]
    fn try_send_signals_hands_back_when_full_and_drops_when_nobody_reads() {
        let channel = EventChannel::new(1).unwrap();
        assert!(channel.sink.try_send(stopped(1)).is_ok());
        assert_eq!(signals(&channel), 1);
        let back = channel.sink.try_send(stopped(2)).unwrap_err();
        assert_eq!(stopped_at(back), 2);
        assert_eq!(
            signals(&channel),
            0,
            "a full channel is not signalled again"
        );
        let EventChannel { sink, events, .. } = channel;
        drop(events);
        assert!(sink.try_send(stopped(3)).is_ok(), "nobody reads: dropped");
    }

    #[test]
    fn send_waits_for_room_and_gives_up_when_the_handle_closes() {
        let channel = EventChannel::new(1).unwrap();
        assert!(channel.sink.send(stopped(1)));
        let events = channel.events.clone();
        let reader = thread::spawn(move || {
            thread::sleep(Duration::from_millis(50));
            stopped_at(events.recv_timeout(Duration::from_secs(10)).unwrap())
        });
        assert!(
            channel.sink.send(stopped(2)),
            "sent once the reader made room"
        );
        assert_eq!(reader.join().unwrap(), 1);
        assert_eq!(signals(&channel), 2);
        assert_eq!(stopped_at(channel.events.try_recv().unwrap()), 2);

        assert!(channel.sink.send(stopped(3)));
        let EventChannel {
            sink,
            events,
            close,
            ..
        } = channel;
        let closer = thread::spawn(move || {
            thread::sleep(Duration::from_millis(50));
            drop(close);
        });
        assert!(!sink.send(stopped(4)), "full, and the handle closed");
        closer.join().unwrap();
        assert_eq!(stopped_at(events.try_recv().unwrap()), 3);
        assert!(events.try_recv().is_err());
    }

    #[test]
    fn send_or_recv_takes_whichever_comes_first() {
        let channel = EventChannel::new(1).unwrap();
        let (requests_tx, requests) = crossbeam_channel::bounded::<u32>(1);
        assert!(channel.sink.send(stopped(1)));
        signals(&channel);

        // Full, a request waiting: the request, and the event handed back.
        requests_tx.send(7).unwrap();
        match channel.sink.send_or_recv(stopped(2), &requests) {
            SendOrRecv::Received(request, event) => {
                assert_eq!(request.unwrap(), 7);
                assert_eq!(stopped_at(event), 2);
            }
            SendOrRecv::Sent => panic!("the channel was full"),
        }
        assert_eq!(signals(&channel), 0);

        // Room, no request: the event goes out, signalled.
        assert_eq!(stopped_at(channel.events.try_recv().unwrap()), 1);
        assert!(matches!(
            channel.sink.send_or_recv(stopped(3), &requests),
            SendOrRecv::Sent
        ));
        assert_eq!(signals(&channel), 1);

        // Full, no request, the handle closed: the event is dropped.
        let EventChannel {
            sink,
            events,
            close,
            ..
        } = channel;
        drop(close);
        assert!(matches!(
            sink.send_or_recv(stopped(4), &requests),
            SendOrRecv::Sent
        ));
        assert_eq!(stopped_at(events.try_recv().unwrap()), 3);
        assert!(events.try_recv().is_err());
    }

    #[test]
    fn wait_closed_sleeps_out_its_time_unless_the_handle_closes() {
        let channel = EventChannel::new(1).unwrap();
        assert!(!channel.sink.wait_closed(Duration::from_millis(10)));
        let EventChannel { sink, close, .. } = channel;
        drop(close);
        assert!(sink.wait_closed(Duration::from_secs(10)));
    }
}
