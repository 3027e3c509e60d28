//! Binding a listener whose address the previous run of this node may still hold.
//!
//! A node that exits, killed or stopped, leaves its listening socket to the kernel's io_uring
//! teardown, which finishes after the process is gone: the accept it had armed keeps the socket
//! LISTENing for some milliseconds more (longer on a loaded host), and
//! SO_REUSEADDR does not let a second socket bind beside a listening one. A node restarted at
//! once, by systemd or by hand, would fail with EADDRINUSE. So the bind is retried while the
//! address is in use, for at most [`BIND_PATIENCE`] (docs/operations.md, "Start-up errors").

use std::time::{Duration, Instant};

use super::NodeError;
use crate::transport::TransportError;

/// How long a listener waits for its address to be let go before the node gives up.
pub(super) const BIND_PATIENCE: Duration = Duration::from_secs(5);

/// The first pause between attempts; it doubles up to [`MAX_PAUSE`].
const FIRST_PAUSE: Duration = Duration::from_millis(5);
const MAX_PAUSE: Duration = Duration::from_millis(200);

/// Runs `bind` until it succeeds, fails for another reason than an address in use, or
/// `patience` has passed since the first attempt (then its last error is returned).
/// `on_first_wait` is called once, before the first pause, so the operator hears why the
/// start is slow.
pub(super) fn bind_when_free<T>(
    patience: Duration,
    mut bind: impl FnMut() -> Result<T, NodeError>,
    on_first_wait: impl FnOnce(&NodeError),
) -> Result<T, NodeError> {
    let deadline = Instant::now() + patience;
    let mut on_first_wait = Some(on_first_wait);
    let mut pause = FIRST_PAUSE;
    loop {
        let error = match bind() {
            Ok(bound) => return Ok(bound),
            Err(error) if address_in_use(&error) => error,
            Err(error) => return Err(error),
        };
        let now = Instant::now();
        if now >= deadline {
            return Err(error);
        }
        if let Some(warn) = on_first_wait.take() {
            warn(&error);
        }
        std::thread::sleep(pause.min(deadline - now));
        pause = (pause * 2).min(MAX_PAUSE);
    }
}

fn address_in_use(error: &NodeError) -> bool {
    matches!(
        error,
        NodeError::Transport(TransportError::Socket { source, .. })
            if source.kind() == std::io::ErrorKind::AddrInUse
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::{Config, EventLoop};
    use std::net::{SocketAddr, TcpListener};

    fn listen(ring: &mut EventLoop, addr: SocketAddr) -> Result<(), NodeError> {
        ring.listen(addr)?;
        Ok(())
    }

    /// The address is held by another listener for 150 ms: the bind waits it out, and the
    /// operator is told once.
    #[test]
    fn a_bind_waits_until_the_holder_lets_the_address_go() {
        let holder = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = holder.local_addr().unwrap();
        let mut ring = EventLoop::new(Config::default()).unwrap();
        let mut warnings = 0;
        let mut attempts = 0;
        let started = Instant::now();
        let release = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(150));
            drop(holder);
        });
        bind_when_free(
            Duration::from_secs(20),
            || {
                attempts += 1;
                listen(&mut ring, addr)
            },
            |error| {
                warnings += 1;
                assert!(address_in_use(error), "{error}");
            },
        )
        .unwrap();
        release.join().unwrap();
        assert!(started.elapsed() >= Duration::from_millis(150));
        assert_eq!(warnings, 1);
        assert!(attempts >= 2, "{attempts}");
        // Bounded: pauses double from 5 ms, so 20 s allows no more than a few hundred.
        assert!(attempts < 200, "{attempts}");
    }

    /// An address held for good: the node gives up once its patience is spent, with the
    /// error that names the address.
    #[test]
    fn an_address_held_for_good_fails_after_the_patience() {
        let holder = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = holder.local_addr().unwrap();
        let mut ring = EventLoop::new(Config::default()).unwrap();
        let started = Instant::now();
        let error = bind_when_free(
            Duration::from_millis(100),
            || listen(&mut ring, addr),
            |_| {},
        )
        .unwrap_err();
        assert!(started.elapsed() >= Duration::from_millis(100));
        assert!(address_in_use(&error), "{error}");
        assert!(error.to_string().contains(&addr.to_string()), "{error}");
    }

    /// Any other error is returned at once, without a wait or a warning.
    #[test]
    fn another_error_is_not_retried() {
        let mut attempts = 0;
        let error = bind_when_free(
            Duration::from_secs(20),
            || -> Result<(), NodeError> {
                attempts += 1;
                Err(NodeError::Listener(
                    "PLAINTEXT://nowhere:1".into(),
                    std::io::Error::from(std::io::ErrorKind::NotFound),
                ))
            },
            |_| panic!("no warning for an error that is not retried"),
        )
        .unwrap_err();
        assert_eq!(attempts, 1);
        assert!(!address_in_use(&error));
    }
}
