//! The few socket calls the ring cannot make: creating, binding and configuring sockets, and
//! reading addresses. Each wraps one libc call and turns -1 into `io::Error`.

use std::io;
use std::mem;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::os::fd::RawFd;

/// A socket address in the kernel's layout, kept alive while an SQE points at it.
pub(crate) struct RawAddr {
    pub(crate) storage: libc::sockaddr_storage,
    pub(crate) len: libc::socklen_t,
}

impl RawAddr {
    pub(crate) fn from_socket_addr(addr: SocketAddr) -> Self {
        // SAFETY: sockaddr_storage is plain old data; all zeroes is a valid value.
        let mut storage: libc::sockaddr_storage = unsafe { mem::zeroed() };
        let len = match addr {
            SocketAddr::V4(a) => {
                let sin = libc::sockaddr_in {
                    sin_family: libc::AF_INET as libc::sa_family_t,
                    sin_port: a.port().to_be(),
                    sin_addr: libc::in_addr {
                        s_addr: u32::from_ne_bytes(a.ip().octets()),
                    },
                    sin_zero: [0; 8],
                };
                // SAFETY: sockaddr_storage is larger than and aligned for sockaddr_in.
                unsafe {
                    std::ptr::write((&mut storage as *mut libc::sockaddr_storage).cast(), sin)
                };
                mem::size_of::<libc::sockaddr_in>()
            }
            SocketAddr::V6(a) => {
                let sin6 = libc::sockaddr_in6 {
                    sin6_family: libc::AF_INET6 as libc::sa_family_t,
                    sin6_port: a.port().to_be(),
                    sin6_flowinfo: a.flowinfo(),
                    sin6_addr: libc::in6_addr {
                        s6_addr: a.ip().octets(),
                    },
                    sin6_scope_id: a.scope_id(),
                };
                // SAFETY: sockaddr_storage is larger than and aligned for sockaddr_in6.
                unsafe {
                    std::ptr::write((&mut storage as *mut libc::sockaddr_storage).cast(), sin6)
                };
                mem::size_of::<libc::sockaddr_in6>()
            }
        };
        Self {
            storage,
            len: len as libc::socklen_t,
        }
    }

    fn empty() -> Self {
        Self {
            // SAFETY: as above.
            storage: unsafe { mem::zeroed() },
            len: mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t,
        }
    }

    pub(crate) fn as_ptr(&self) -> *const libc::sockaddr {
        (&self.storage as *const libc::sockaddr_storage).cast()
    }

    fn to_socket_addr(&self) -> io::Result<SocketAddr> {
        match i32::from(self.storage.ss_family) {
            libc::AF_INET => {
                // SAFETY: the family says the storage holds a sockaddr_in.
                let sin: libc::sockaddr_in = unsafe {
                    std::ptr::read((&self.storage as *const libc::sockaddr_storage).cast())
                };
                let ip = Ipv4Addr::from(sin.sin_addr.s_addr.to_ne_bytes());
                Ok(SocketAddr::V4(SocketAddrV4::new(
                    ip,
                    u16::from_be(sin.sin_port),
                )))
            }
            libc::AF_INET6 => {
                // SAFETY: the family says the storage holds a sockaddr_in6.
                let sin6: libc::sockaddr_in6 = unsafe {
                    std::ptr::read((&self.storage as *const libc::sockaddr_storage).cast())
                };
                Ok(SocketAddr::V6(SocketAddrV6::new(
                    Ipv6Addr::from(sin6.sin6_addr.s6_addr),
                    u16::from_be(sin6.sin6_port),
                    sin6.sin6_flowinfo,
                    sin6.sin6_scope_id,
                )))
            }
            family => Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("unexpected address family {family}"),
            )),
        }
    }
}

fn check(ret: libc::c_int) -> io::Result<libc::c_int> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

fn domain(addr: SocketAddr) -> libc::c_int {
    match addr {
        SocketAddr::V4(_) => libc::AF_INET,
        SocketAddr::V6(_) => libc::AF_INET6,
    }
}

/// A new TCP socket (blocking: io_uring drives it without O_NONBLOCK), closed on exec.
pub(crate) fn tcp_socket(addr: SocketAddr) -> io::Result<RawFd> {
    // SAFETY: plain syscall.
    check(unsafe {
        libc::socket(
            domain(addr),
            libc::SOCK_STREAM | libc::SOCK_CLOEXEC,
            libc::IPPROTO_TCP,
        )
    })
}

fn set_int_option(
    fd: RawFd,
    level: libc::c_int,
    name: libc::c_int,
    value: libc::c_int,
) -> io::Result<()> {
    // SAFETY: the pointer and length describe a live c_int.
    check(unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            (&value as *const libc::c_int).cast(),
            mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    })
    .map(drop)
}

pub(crate) fn set_nodelay(fd: RawFd) -> io::Result<()> {
    set_int_option(fd, libc::IPPROTO_TCP, libc::TCP_NODELAY, 1)
}

pub(crate) fn set_send_buffer(fd: RawFd, bytes: usize) -> io::Result<()> {
    let bytes = libc::c_int::try_from(bytes).unwrap_or(libc::c_int::MAX);
    set_int_option(fd, libc::SOL_SOCKET, libc::SO_SNDBUF, bytes)
}

/// A bound, listening socket.
pub(crate) fn listener(addr: SocketAddr, backlog: u32) -> io::Result<RawFd> {
    let fd = tcp_socket(addr)?;
    let raw = RawAddr::from_socket_addr(addr);
    let backlog = libc::c_int::try_from(backlog).unwrap_or(libc::c_int::MAX);
    let setup = set_int_option(fd, libc::SOL_SOCKET, libc::SO_REUSEADDR, 1)
        // SAFETY: raw describes a valid sockaddr of raw.len bytes.
        .and_then(|()| check(unsafe { libc::bind(fd, raw.as_ptr(), raw.len) }))
        // SAFETY: plain syscall.
        .and_then(|_| check(unsafe { libc::listen(fd, backlog) }));
    match setup {
        Ok(_) => Ok(fd),
        Err(e) => {
            close(fd);
            Err(e)
        }
    }
}

pub(crate) fn local_addr(fd: RawFd) -> io::Result<SocketAddr> {
    queried_addr(fd, libc::getsockname)
}

pub(crate) fn peer_addr(fd: RawFd) -> io::Result<SocketAddr> {
    queried_addr(fd, libc::getpeername)
}

/// The address of `fd` that `query` (getsockname or getpeername, which share a signature)
/// reports.
fn queried_addr(
    fd: RawFd,
    query: unsafe extern "C" fn(
        libc::c_int,
        *mut libc::sockaddr,
        *mut libc::socklen_t,
    ) -> libc::c_int,
) -> io::Result<SocketAddr> {
    let mut raw = RawAddr::empty();
    // SAFETY: raw has room for any address; the kernel writes at most raw.len bytes.
    check(unsafe {
        query(
            fd,
            (&mut raw.storage as *mut libc::sockaddr_storage).cast(),
            &mut raw.len,
        )
    })?;
    raw.to_socket_addr()
}

/// One non-blocking send outside the ring (a TLS alert or close_notify just before a close);
/// whatever the socket does not take at once is dropped.
pub(crate) fn send_now(fd: RawFd, bytes: &[u8]) {
    // SAFETY: the pointer and length describe a live slice; MSG_DONTWAIT keeps the call from
    // blocking on a full socket and MSG_NOSIGNAL a dead peer from raising SIGPIPE.
    unsafe {
        libc::send(
            fd,
            bytes.as_ptr().cast(),
            bytes.len(),
            libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
        )
    };
}

pub(crate) fn close(fd: RawFd) {
    // SAFETY: the caller owns fd and never uses it again. An error from close on a socket
    // leaves nothing to retry (the descriptor is released either way).
    unsafe { libc::close(fd) };
}
