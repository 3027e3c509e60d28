//! Real network partitions for process tests: a [`NetLab`] is a set of network namespaces that
//! the test creates (as root, as CI runs), one per host, each with a veth pair whose other end
//! sits on a bridge in a hub namespace of the lab's own. Addresses (10.77.0.0/24) exist only
//! inside those namespaces, so labs of tests running at once never meet, and nothing of the
//! machine's own network changes. Nodes run in their host's namespace (`ip netns exec`); the
//! test's clients enter the lab's client namespace ([`Host::enter`]). A host is cut off by
//! taking its interface down inside its namespace, and healed by bringing it up; two hosts are
//! severed from each other alone by a blackhole route to each other's address.
//!
//! Everything is deleted when the lab drops, also when the test fails; labs left behind by a
//! test process that was killed are deleted by the next lab created on the machine.

use std::fs::File;
use std::net::Ipv4Addr;
use std::os::fd::AsRawFd;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};

/// Every lab namespace's name starts with this, then the creating process's pid.
const PREFIX: &str = "rrlab-";
/// The interface of each host, inside its namespace.
const HOST_IF: &str = "eth0";
/// The first three octets of every lab's subnet (a /24 per lab, private to its namespaces).
const SUBNET: [u8; 3] = [10, 77, 0];
/// The client namespace's host octet: above every node's.
const CLIENT_OCTET: u8 = 250;

static NEXT_LAB: AtomicU32 = AtomicU32::new(0);

/// One host of a lab: a network namespace and its address.
#[derive(Clone, Debug)]
pub struct Host {
    /// The namespace's name (`ip netns`).
    pub netns: String,
    pub ip: Ipv4Addr,
}

/// A set of namespaces on one bridge; see the module's comment.
pub struct NetLab {
    hub: String,
    hosts: Vec<Host>,
    client: Host,
    /// Every namespace created, hub first: deleted in reverse on drop.
    created: Vec<String>,
}

/// Runs `ip args`; Err with its stderr when it fails.
pub fn ip(args: &[&str]) -> Result<(), String> {
    let output = Command::new("ip")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run `ip` (iproute2, which .ci/run installs): {e}"))?;
    if output.status.success() {
        Ok(())
    } else {
        Err(format!(
            "ip {}: {} {}",
            args.join(" "),
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        ))
    }
}

impl NetLab {
    /// A hub with `hosts` node namespaces (10.77.0.1 to 10.77.0.`hosts`) and one client
    /// namespace (10.77.0.250), every interface up.
    pub fn create(hosts: usize) -> Result<NetLab, String> {
        assert!(hosts < usize::from(CLIENT_OCTET), "too many hosts: {hosts}");
        delete_orphans();
        let name = format!(
            "{PREFIX}{}-{}",
            std::process::id(),
            NEXT_LAB.fetch_add(1, Ordering::Relaxed)
        );
        let hub = format!("{name}-hub");
        let mut lab = NetLab {
            hub: hub.clone(),
            hosts: Vec::new(),
            client: Host {
                netns: format!("{name}-client"),
                ip: ipv4(CLIENT_OCTET),
            },
            created: Vec::new(),
        };
        lab.add_namespace(&hub)?;
        ip(&["-n", &hub, "link", "add", "br0", "type", "bridge"])?;
        ip(&["-n", &hub, "link", "set", "br0", "up"])?;
        let client = lab.client.clone();
        lab.attach(&client, 0)?;
        for i in 0..hosts {
            let host = Host {
                netns: format!("{name}-{}", i + 1),
                ip: ipv4(i as u8 + 1),
            };
            lab.attach(&host, i + 1)?;
            lab.hosts.push(host);
        }
        Ok(lab)
    }

    fn add_namespace(&mut self, name: &str) -> Result<(), String> {
        ip(&["netns", "add", name])?;
        self.created.push(name.to_owned());
        ip(&["-n", name, "link", "set", "lo", "up"])
    }

    /// Creates `host`'s namespace, its interface and address, and its port `p<port>` on the
    /// hub's bridge.
    fn attach(&mut self, host: &Host, port: usize) -> Result<(), String> {
        self.add_namespace(&host.netns)?;
        let peer = format!("p{port}");
        ip(&[
            "link",
            "add",
            HOST_IF,
            "netns",
            &host.netns,
            "type",
            "veth",
            "peer",
            "name",
            &peer,
            "netns",
            &self.hub,
        ])?;
        ip(&["-n", &self.hub, "link", "set", &peer, "master", "br0"])?;
        ip(&["-n", &self.hub, "link", "set", &peer, "up"])?;
        let address = format!("{}/24", host.ip);
        ip(&["-n", &host.netns, "addr", "add", &address, "dev", HOST_IF])?;
        ip(&["-n", &host.netns, "link", "set", HOST_IF, "up"])
    }

    /// Node host `i` (from 0).
    pub fn host(&self, i: usize) -> &Host {
        &self.hosts[i]
    }

    pub fn hosts(&self) -> usize {
        self.hosts.len()
    }

    /// The namespace the test's clients connect from.
    pub fn client(&self) -> &Host {
        &self.client
    }

    /// Cuts host `i` off from every other: its interface goes down inside its namespace.
    pub fn cut(&self, i: usize) -> Result<(), String> {
        ip(&["-n", &self.hosts[i].netns, "link", "set", HOST_IF, "down"])
    }

    /// Undoes [`NetLab::cut`]: the interface comes up, and with it the address's route.
    pub fn heal(&self, i: usize) -> Result<(), String> {
        ip(&["-n", &self.hosts[i].netns, "link", "set", HOST_IF, "up"])
    }

    /// Severs hosts `i` and `j` from each other only: inside each namespace a blackhole route
    /// to the other's address drops what it would send there (its sender gets an error), while
    /// both still reach every other host and the client. A partial partition, which a cut
    /// cannot make.
    pub fn sever(&self, i: usize, j: usize) -> Result<(), String> {
        self.blackhole("add", i, j)?;
        self.blackhole("add", j, i)
    }

    /// Undoes [`NetLab::sever`]: both routes are deleted (the second also when the first was
    /// not there, which is then the error).
    pub fn mend(&self, i: usize, j: usize) -> Result<(), String> {
        let one = self.blackhole("del", i, j);
        let other = self.blackhole("del", j, i);
        one.and(other)
    }

    fn blackhole(&self, verb: &str, from: usize, to: usize) -> Result<(), String> {
        let destination = format!("{}/32", self.hosts[to].ip);
        ip(&[
            "-n",
            &self.hosts[from].netns,
            "route",
            verb,
            "blackhole",
            &destination,
        ])
    }
}

impl Drop for NetLab {
    fn drop(&mut self) {
        for name in self.created.iter().rev() {
            if let Err(error) = ip(&["netns", "del", name]) {
                eprintln!("testkit: deleting network namespace {name}: {error}");
            }
        }
    }
}

fn ipv4(host: u8) -> Ipv4Addr {
    Ipv4Addr::new(SUBNET[0], SUBNET[1], SUBNET[2], host)
}

/// Deletes the lab namespaces of test processes that no longer run (killed before their labs
/// dropped).
fn delete_orphans() {
    let Ok(entries) = std::fs::read_dir("/run/netns") else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let pid = name
            .strip_prefix(PREFIX)
            .and_then(|rest| rest.split('-').next())
            .and_then(|pid| pid.parse::<u32>().ok());
        if let Some(pid) = pid {
            if !std::path::Path::new(&format!("/proc/{pid}")).exists() {
                let _ = ip(&["netns", "del", &name]);
            }
        }
    }
}

impl Host {
    /// `ip netns exec <namespace> program`: `program` runs in this host's namespace.
    pub fn command(&self, program: &std::path::Path) -> Command {
        let mut command = Command::new("ip");
        command.args(["netns", "exec", &self.netns]).arg(program);
        command
    }

    /// Moves the calling thread into this host's namespace until the guard drops: sockets
    /// created meanwhile belong to the namespace, and stay in it afterwards.
    pub fn enter(&self) -> Result<Entered, String> {
        let own = File::open("/proc/thread-self/ns/net")
            .map_err(|e| format!("opening this thread's network namespace: {e}"))?;
        let path = format!("/run/netns/{}", self.netns);
        let target = File::open(&path).map_err(|e| format!("opening {path}: {e}"))?;
        set_namespace(&target).map_err(|e| format!("entering {}: {e}", self.netns))?;
        Ok(Entered { own })
    }
}

fn set_namespace(file: &File) -> std::io::Result<()> {
    // SAFETY: a plain syscall on a file descriptor we own; it affects only this thread.
    if unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) } == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// The calling thread is in a lab namespace until this drops (see [`Host::enter`]).
pub struct Entered {
    own: File,
}

impl Drop for Entered {
    fn drop(&mut self) {
        // A thread left in the lab would give every later socket of the test the wrong network.
        if let Err(error) = set_namespace(&self.own) {
            if !std::thread::panicking() {
                panic!("returning to this thread's network namespace: {error}");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{SocketAddr, TcpListener, TcpStream};
    use std::time::Duration;

    /// Whether a TCP connection from `from` to port `port` on `to` succeeds. Tried for up to 3 s
    /// while it fails (a new lab's first connections wait for neighbour discovery, longer on a
    /// loaded machine): a "no" is one that never succeeded in that time.
    fn reaches(from: &Host, to: &Host, port: u16) -> bool {
        let _entered = from.enter().unwrap();
        let addr = SocketAddr::from((to.ip, port));
        let deadline = std::time::Instant::now() + Duration::from_secs(3);
        loop {
            if TcpStream::connect_timeout(&addr, Duration::from_secs(1)).is_ok() {
                return true;
            }
            if std::time::Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// A sever stops two hosts reaching each other, both ways, and nothing else; a mend undoes
    /// it; a cut stops everything. Needs root, as the lab does.
    #[test]
    fn a_sever_parts_two_hosts_alone_and_a_mend_joins_them() {
        let lab = NetLab::create(3).unwrap();
        let listeners: Vec<(TcpListener, u16)> = (0..3)
            .map(|i| {
                let _entered = lab.host(i).enter().unwrap();
                let listener = TcpListener::bind((lab.host(i).ip, 0)).unwrap();
                let port = listener.local_addr().unwrap().port();
                (listener, port)
            })
            .collect();
        let port = |i: usize| listeners[i].1;
        let all = |lab: &NetLab| {
            let mut pairs = Vec::new();
            for from in 0..3 {
                for to in (0..3).filter(|&to| to != from) {
                    pairs.push(((from, to), reaches(lab.host(from), lab.host(to), port(to))));
                }
            }
            pairs
        };
        assert!(all(&lab).iter().all(|(_, ok)| *ok), "{:?}", all(&lab));

        lab.sever(0, 1).unwrap();
        for ((from, to), ok) in all(&lab) {
            let severed = (from, to) == (0, 1) || (from, to) == (1, 0);
            assert_eq!(ok, !severed, "{from} -> {to} with 0 and 1 severed");
        }
        assert!(reaches(lab.client(), lab.host(0), port(0)));
        assert!(reaches(lab.client(), lab.host(1), port(1)));

        lab.mend(0, 1).unwrap();
        assert!(all(&lab).iter().all(|(_, ok)| *ok), "{:?}", all(&lab));

        lab.cut(2).unwrap();
        assert!(!reaches(lab.host(0), lab.host(2), port(2)));
        assert!(!reaches(lab.client(), lab.host(2), port(2)));
        lab.heal(2).unwrap();
        assert!(reaches(lab.host(0), lab.host(2), port(2)));
    }
}
