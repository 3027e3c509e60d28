//! Timers, eventfd wake-ups and outbound connection failures.

mod transport_support;

use std::os::fd::AsRawFd;
use std::time::Duration;

use net::transport::{Config, ConnectError, Event, EventLoop, TimerId, TransportError};
use transport_support::{eventfd, poll_until, settle, write_eventfd};

fn fired(events: &[Event]) -> Vec<TimerId> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::TimerFired { id } => Some(*id),
            _ => None,
        })
        .collect()
}

#[test]
fn timers_fire_in_deadline_order() {
    let mut ring = EventLoop::new(Config::default()).unwrap();
    let late = ring.add_timer(Duration::from_millis(60)).unwrap();
    let early = ring.add_timer(Duration::from_millis(20)).unwrap();
    let middle = ring.add_timer(Duration::from_millis(40)).unwrap();
    let mut events = Vec::new();
    poll_until(&mut ring, &mut events, |e| fired(e).len() == 3);
    assert_eq!(fired(&events), vec![early, middle, late]);
    assert_eq!(ring.operations_in_flight(), 0);
}

#[test]
fn a_cancelled_timer_never_fires() {
    let mut ring = EventLoop::new(Config::default()).unwrap();
    let cancelled = ring.add_timer(Duration::from_millis(20)).unwrap();
    let sentinel = ring.add_timer(Duration::from_millis(80)).unwrap();
    assert!(ring.cancel_timer(cancelled).unwrap());
    assert!(!ring.cancel_timer(cancelled).unwrap(), "cancelled twice");
    let mut events = Vec::new();
    poll_until(&mut ring, &mut events, |e| fired(e).contains(&sentinel));
    assert_eq!(fired(&events), vec![sentinel]);
    assert!(!ring.cancel_timer(sentinel).unwrap(), "fired already");
    // The removal's completion is reaped too: nothing stays in flight.
    settle(&mut ring, &mut events);
    assert_eq!(fired(&events), vec![sentinel]);
}

#[test]
fn a_deadline_in_the_past_fires_at_once() {
    let mut ring = EventLoop::new(Config::default()).unwrap();
    let past = std::time::Instant::now() - Duration::from_millis(5);
    let id = ring.add_timer_at(past).unwrap();
    let mut events = Vec::new();
    poll_until(&mut ring, &mut events, |e| !fired(e).is_empty());
    assert_eq!(fired(&events), vec![id]);
}

#[test]
fn an_eventfd_write_from_another_thread_wakes_poll() {
    let mut ring = EventLoop::new(Config::default()).unwrap();
    let efd = eventfd();
    let watch = ring.watch_eventfd(efd.as_raw_fd()).unwrap();
    let writer_fd = efd.try_clone().unwrap();
    let writer = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(30));
        write_eventfd(&writer_fd, 5);
    });
    let mut events = Vec::new();
    // poll(None) blocks until something completes: only the eventfd can.
    ring.poll(None, &mut events).unwrap();
    while events.is_empty() {
        ring.poll(Some(Duration::from_secs(30)), &mut events)
            .unwrap();
    }
    writer.join().unwrap();
    assert!(matches!(
        events[..],
        [Event::EventFd { id, count: 5 }] if id == watch
    ));
    // The watch stays armed (multishot): a second write is seen too, counter reset in between.
    write_eventfd(&efd, 2);
    write_eventfd(&efd, 3);
    events.clear();
    poll_until(&mut ring, &mut events, |e| !e.is_empty());
    assert!(matches!(events[..], [Event::EventFd { count: 5, .. }]));
    assert!(ring.unwatch(watch).unwrap());
    settle(&mut ring, &mut events);
    write_eventfd(&efd, 1);
    events.clear();
    ring.poll(Some(Duration::from_millis(20)), &mut events)
        .unwrap();
    assert!(events.is_empty(), "unwatched eventfd reported: {events:?}");
}

#[test]
fn a_blocking_eventfd_is_refused() {
    let mut ring = EventLoop::new(Config::default()).unwrap();
    // SAFETY: plain syscall; closed below.
    let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC) };
    assert!(fd >= 0);
    let result = ring.watch_eventfd(fd);
    // SAFETY: we own fd.
    unsafe { libc::close(fd) };
    assert!(matches!(result, Err(TransportError::BadEventFd { .. })));
}

#[test]
fn connecting_to_a_closed_port_reports_connect_failed() {
    let port = {
        let probe = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        probe.local_addr().unwrap().port()
    };
    let mut ring = EventLoop::new(Config::default()).unwrap();
    let conn = ring
        .connect(format!("127.0.0.1:{port}").parse().unwrap())
        .unwrap();
    let mut events = Vec::new();
    poll_until(&mut ring, &mut events, |e| !e.is_empty());
    match &events[..] {
        [Event::ConnectFailed {
            conn: c,
            error: ConnectError::Failed(errno),
        }] => {
            assert_eq!(*c, conn);
            assert_eq!(errno.0, libc::ECONNREFUSED);
        }
        other => panic!("expected a refused connect, got {other:?}"),
    }
    assert_eq!(ring.connection_count(), 0);
    assert_eq!(ring.operations_in_flight(), 0);
}

/// A listener with a zero backlog that nobody accepts from holds one connection; the kernel
/// drops the SYNs of the next ones, so their connects hang until the connect timeout.
#[test]
fn a_connect_that_gets_no_answer_times_out() {
    // SAFETY: plain syscalls on a descriptor closed at the end of the test.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) };
    assert!(fd >= 0);
    let addr = libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: 0,
        sin_addr: libc::in_addr {
            s_addr: u32::from_ne_bytes([127, 0, 0, 1]),
        },
        sin_zero: [0; 8],
    };
    let len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
    // SAFETY: addr is a valid sockaddr_in of len bytes.
    assert_eq!(
        unsafe { libc::bind(fd, (&addr as *const libc::sockaddr_in).cast(), len) },
        0
    );
    // SAFETY: plain syscall.
    assert_eq!(unsafe { libc::listen(fd, 0) }, 0);
    let mut bound: libc::sockaddr_in = unsafe { std::mem::zeroed() };
    let mut bound_len = len;
    // SAFETY: bound has room for a sockaddr_in.
    assert_eq!(
        unsafe {
            libc::getsockname(
                fd,
                (&mut bound as *mut libc::sockaddr_in).cast(),
                &mut bound_len,
            )
        },
        0
    );
    let target = format!("127.0.0.1:{}", u16::from_be(bound.sin_port))
        .parse()
        .unwrap();

    let mut ring = EventLoop::new(Config {
        connect_timeout: Duration::from_millis(300),
        ..Config::default()
    })
    .unwrap();
    let conns: Vec<_> = (0..4).map(|_| ring.connect(target).unwrap()).collect();
    let mut events = Vec::new();
    poll_until(&mut ring, &mut events, |e| {
        e.iter()
            .filter(|e| matches!(e, Event::Connected { .. } | Event::ConnectFailed { .. }))
            .count()
            == conns.len()
    });
    let timed_out = events
        .iter()
        .filter(|e| {
            matches!(
                e,
                Event::ConnectFailed {
                    error: ConnectError::TimedOut,
                    ..
                }
            )
        })
        .count();
    assert!(timed_out >= 1, "no connect timed out: {events:?}");
    for conn in conns {
        let _ = ring.close(conn);
    }
    settle(&mut ring, &mut events);
    assert_eq!(ring.connection_count(), 0);
    // SAFETY: we own fd.
    unsafe { libc::close(fd) };
}

#[test]
fn a_huge_timer_does_not_fire_and_can_be_cancelled() {
    let mut ring = EventLoop::new(Config::default()).unwrap();
    let forever = ring.add_timer(Duration::MAX).unwrap();
    let soon = ring.add_timer(Duration::from_millis(20)).unwrap();
    let mut events = Vec::new();
    poll_until(&mut ring, &mut events, |e| fired(e).contains(&soon));
    ring.poll(Some(Duration::from_millis(20)), &mut events)
        .unwrap();
    assert_eq!(fired(&events), vec![soon]);
    // A huge poll timeout is clamped the same way (returns at once: the cancel completes).
    assert!(ring.cancel_timer(forever).unwrap());
    ring.poll(Some(Duration::MAX), &mut events).unwrap();
    settle(&mut ring, &mut events);
    assert_eq!(fired(&events), vec![soon]);
}
