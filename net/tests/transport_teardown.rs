//! Dropping a loop in the middle of everything (open and connecting connections, queued sends,
//! pending timers, a watched eventfd, a listener) cancels it all and closes every descriptor.
//! One test in its own binary, so no other test's descriptors move the count.

mod transport_support;

use std::os::fd::AsRawFd;
use std::time::Duration;

use net::transport::{Config, Event, EventLoop};
use transport_support::{eventfd, frame_chain, loopback, pattern, poll_until};

fn open_descriptors() -> usize {
    std::fs::read_dir("/proc/self/fd").unwrap().count()
}

#[test]
fn dropping_a_busy_loop_closes_every_descriptor() {
    let efd = eventfd();
    let before = open_descriptors();
    {
        let mut server = EventLoop::new(Config::default()).unwrap();
        let mut client = EventLoop::new(Config::default()).unwrap();
        let listener = server.listen(loopback()).unwrap();
        let addr = server.local_addr(listener).unwrap();
        server.watch_eventfd(efd.as_raw_fd()).unwrap();
        server.add_timer(Duration::from_secs(3600)).unwrap();
        client.add_timer(Duration::from_secs(3600)).unwrap();
        let conns: Vec<_> = (0..10).map(|_| client.connect(addr).unwrap()).collect();
        let (mut server_events, mut client_events) = (Vec::new(), Vec::new());
        poll_until(&mut client, &mut client_events, |e| {
            e.iter()
                .filter(|e| matches!(e, Event::Connected { .. }))
                .count()
                == conns.len()
        });
        poll_until(&mut server, &mut server_events, |e| {
            e.iter()
                .filter(|e| matches!(e, Event::Accepted { .. }))
                .count()
                == conns.len()
        });
        // Large sends the server never reads to the end: still in flight at the drop.
        for conn in &conns {
            client
                .send(*conn, frame_chain(pattern(4 << 20, 1)))
                .unwrap();
        }
        client
            .poll(Some(Duration::from_millis(10)), &mut client_events)
            .unwrap();
        // And one connect still pending.
        client.connect(addr).unwrap();
        assert!(open_descriptors() > before + 2 * conns.len());
    }
    assert_eq!(open_descriptors(), before, "descriptors leaked");
}
