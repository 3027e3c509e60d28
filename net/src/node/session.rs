//! What an inbound connection is: the listener it came in on, the peer's address, and what it
//! has proven about who it is (docs/security.md). Logic only; the runtime owns one per inbound
//! connection.

use std::net::SocketAddr;

/// One inbound connection's standing.
#[derive(Debug)]
pub(crate) struct Session {
    /// Index in `NodeConfig::listeners.all`.
    pub(crate) listener: usize,
    pub(crate) addr: SocketAddr,
}

impl Session {
    pub(crate) fn new(listener: usize, addr: SocketAddr) -> Self {
        Self { listener, addr }
    }
}
