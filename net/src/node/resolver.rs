//! Name resolution off the raft thread, for addresses that peers advertise. A host name can take
//! seconds to resolve (or fail to); the raft thread must not wait on a name that anybody can put
//! in a FindQuorum. IP literals need no lookup and are answered at once.

use std::net::{IpAddr, SocketAddr};
use std::sync::mpsc::{channel, Receiver, Sender};

/// Lookups in flight at most; beyond that a lookup fails at once (the caller may retry later).
const MAX_IN_FLIGHT: usize = 4;

pub(crate) type Lookup = (u64, std::io::Result<SocketAddr>);

pub(crate) struct Resolver {
    in_flight: usize,
    done_tx: Sender<Lookup>,
    done_rx: Receiver<Lookup>,
}

impl Default for Resolver {
    fn default() -> Self {
        let (done_tx, done_rx) = channel();
        Resolver {
            in_flight: 0,
            done_tx,
            done_rx,
        }
    }
}

impl Resolver {
    /// Resolves `host:port` under `token`. An IP literal is answered now (Some); a name is looked
    /// up on a thread of its own and comes back from [`Resolver::finished`].
    pub(crate) fn resolve(
        &mut self,
        token: u64,
        host: &str,
        port: u16,
    ) -> Option<std::io::Result<SocketAddr>> {
        if let Ok(ip) = host.parse::<IpAddr>() {
            return Some(Ok(SocketAddr::new(ip, port)));
        }
        if self.in_flight >= MAX_IN_FLIGHT {
            return Some(Err(std::io::Error::other(format!(
                "{MAX_IN_FLIGHT} name lookups already in flight"
            ))));
        }
        self.in_flight += 1;
        let done = self.done_tx.clone();
        let host = host.to_string();
        let spawned = std::thread::Builder::new()
            .name("ringraft-resolve".into())
            .spawn(move || {
                let result = crate::client::resolve_host_port(&host, port);
                let _ = done.send((token, result));
            });
        if let Err(error) = spawned {
            self.in_flight -= 1;
            return Some(Err(error));
        }
        None
    }

    /// Lookups that finished since the last call.
    pub(crate) fn finished(&mut self) -> Vec<Lookup> {
        let done: Vec<Lookup> = self.done_rx.try_iter().collect();
        self.in_flight -= done.len();
        done
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    #[test]
    fn literals_at_once_names_later() {
        let mut r = Resolver::default();
        let now = r
            .resolve(1, "127.0.0.1", 9092)
            .expect("a literal is answered now");
        assert_eq!(now.unwrap(), "127.0.0.1:9092".parse().unwrap());
        assert!(r.resolve(2, "localhost", 9092).is_none());
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut done = Vec::new();
        while done.is_empty() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
            done = r.finished();
        }
        assert_eq!(done.len(), 1);
        assert_eq!(done[0].0, 2);
        assert_eq!(done[0].1.as_ref().unwrap().port(), 9092);
    }

    #[test]
    fn lookups_in_flight_are_bounded() {
        let mut r = Resolver {
            in_flight: MAX_IN_FLIGHT,
            ..Resolver::default()
        };
        let refused = r.resolve(9, "localhost", 1).expect("refused at once");
        assert!(refused.is_err());
    }
}
