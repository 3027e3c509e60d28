//! Process-test support: a cluster of real `ringraft serve` processes on 127.0.0.1, each killed
//! when its guard drops, and a checker that reads every voter's log after the fact.

#![allow(dead_code)]

use std::io::Read;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use engine::raft::{ErrorCode, Request, Response};
use engine::record::{BatchView, RecordBatchBuilder};
use net::client::BlockingClient;
use net::wire::{quorum, RequestHeader, ResponseHeader, WireReader, WireWriter};

pub const WAIT: Duration = Duration::from_secs(20);
pub const CLUSTER_ID: &str = "process-test";

/// A child process killed (SIGKILL) and reaped when dropped.
pub struct ProcessGuard {
    pub child: Child,
}

impl ProcessGuard {
    pub fn signal(&self, signal: i32) {
        // SAFETY: plain syscall on our own child's pid.
        unsafe { libc::kill(self.child.id() as i32, signal) };
    }

    /// Waits (bounded) for the process to exit; Some(status) if it did.
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<std::process::ExitStatus> {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    }
}

impl Drop for ProcessGuard {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub struct Node {
    pub id: i32,
    pub addr: SocketAddr,
    pub dir: PathBuf,
    pub config: PathBuf,
    pub process: Option<ProcessGuard>,
}

pub struct Cluster {
    pub root: tempfile::TempDir,
    pub nodes: Vec<Node>,
}

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

pub fn binary() -> &'static str {
    env!("CARGO_BIN_EXE_ringraft")
}

impl Cluster {
    /// Writes the server.properties of `count` voters (not started).
    pub fn new(count: i32) -> Cluster {
        let root = tempfile::tempdir().unwrap();
        let ports: Vec<u16> = (0..count).map(|_| free_port()).collect();
        let voters = (1..=count)
            .map(|id| format!("{id}@127.0.0.1:{}", ports[(id - 1) as usize]))
            .collect::<Vec<_>>()
            .join(",");
        let nodes = (1..=count)
            .map(|id| {
                let port = ports[(id - 1) as usize];
                let dir = root.path().join(format!("node-{id}"));
                let config = root.path().join(format!("server-{id}.properties"));
                std::fs::write(
                    &config,
                    format!(
                        "broker.id={id}\ncluster.id={CLUSTER_ID}\nlisteners=PLAINTEXT://127.0.0.1:{port}\n\
                         log.dirs={}\nquorum.voters={voters}\n",
                        dir.display()
                    ),
                )
                .unwrap();
                Node {
                    id,
                    addr: SocketAddr::from(([127, 0, 0, 1], port)),
                    dir,
                    config,
                    process: None,
                }
            })
            .collect();
        Cluster { root, nodes }
    }

    pub fn node(&mut self, id: i32) -> &mut Node {
        &mut self.nodes[(id - 1) as usize]
    }

    pub fn start_all(&mut self) {
        for id in 1..=self.nodes.len() as i32 {
            self.start(id, &[]);
        }
    }

    pub fn start(&mut self, id: i32, overrides: &[&str]) {
        let node = self.node(id);
        let child = spawn(&node.config, overrides, Stdio::null());
        node.process = Some(ProcessGuard { child });
    }

    /// Starts every node with its stderr appended to [`Cluster::stderr_path`] (for a failure's
    /// message: [`Cluster::stderr_tail`]).
    pub fn start_all_logged(&mut self) {
        for id in 1..=self.nodes.len() as i32 {
            let path = self.stderr_path(id);
            let file = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&path)
                .unwrap();
            let node = self.node(id);
            let child = spawn(&node.config, &[], Stdio::from(file));
            node.process = Some(ProcessGuard { child });
        }
    }

    pub fn stderr_path(&self, id: i32) -> PathBuf {
        self.root.path().join(format!("node-{id}.stderr"))
    }

    /// What node `id` wrote to its stderr file last: from its last panic message on (without
    /// the backtrace), or else its last 15 lines (empty if none).
    pub fn stderr_tail(&self, id: i32) -> String {
        let text = std::fs::read_to_string(self.stderr_path(id)).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        match lines.iter().rposition(|l| l.contains("panicked at")) {
            Some(panic) => lines[panic..]
                .iter()
                .take_while(|l| !l.starts_with("stack backtrace:"))
                .copied()
                .collect::<Vec<_>>()
                .join("\n"),
            None => lines[lines.len().saturating_sub(15)..].join("\n"),
        }
    }

    /// Stops every running node: SIGTERM, then SIGKILL (the guard) if it has not exited in
    /// time. Returns (id, exit status) per node that was running; None = had to be killed.
    pub fn stop_all(&mut self) -> Vec<(i32, Option<std::process::ExitStatus>)> {
        for node in &mut self.nodes {
            if let Some(p) = node.process.as_ref() {
                p.signal(libc::SIGTERM);
            }
        }
        let mut statuses = Vec::new();
        for node in &mut self.nodes {
            if let Some(mut p) = node.process.take() {
                statuses.push((node.id, p.wait_exit(Duration::from_secs(15))));
            }
        }
        statuses
    }

    /// Waits (bounded) until the leader reports every voter's log end offset at `offset` or
    /// beyond.
    pub fn wait_for_voters_at(&self, leader: i32, offset: i64) {
        let deadline = Instant::now() + WAIT;
        while Instant::now() < deadline {
            if let Ok(mut client) =
                BlockingClient::connect(self.addr(leader), Duration::from_secs(1))
            {
                if let Ok(d) = client.describe_quorum() {
                    if d.current_voters.iter().all(|v| v.log_end_offset >= offset) {
                        return;
                    }
                }
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("voters did not reach offset {offset} within {WAIT:?}");
    }

    /// Polls DescribeQuorum on every running node until one answers as leader (bounded).
    pub fn wait_for_leader(&self, exclude: Option<i32>) -> i32 {
        let deadline = Instant::now() + WAIT;
        while Instant::now() < deadline {
            for node in &self.nodes {
                if Some(node.id) == exclude || node.process.is_none() {
                    continue;
                }
                let Ok(mut client) = BlockingClient::connect(node.addr, Duration::from_secs(1))
                else {
                    continue;
                };
                if let Ok(d) = client.describe_quorum() {
                    if d.error == ErrorCode::NONE && d.leader_id == node.id {
                        return node.id;
                    }
                }
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("no leader within {WAIT:?}");
    }

    pub fn addr(&self, id: i32) -> SocketAddr {
        self.nodes[(id - 1) as usize].addr
    }
}

pub fn spawn(config: &Path, overrides: &[&str], stderr: Stdio) -> Child {
    let mut command = Command::new(binary());
    command.arg("serve").arg("--config").arg(config);
    for o in overrides {
        command.arg("--override").arg(o);
    }
    command
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(stderr)
        .spawn()
        .unwrap()
}

/// One batch of one record whose value is `value`.
pub fn batch(value: &str) -> Bytes {
    let mut builder = RecordBatchBuilder::new(0, 0);
    builder.append(0, None, Some(value.as_bytes()), &[]);
    builder.build().freeze()
}

/// Every data record in a log directory as (offset, value), read with the log's reader.
pub fn read_log(dir: &Path) -> Vec<(i64, String)> {
    let log = engine::log::Log::open(dir, engine::log::LogConfig::default()).unwrap();
    let mut out = Vec::new();
    let mut offset = log.start_offset();
    while offset < log.end_offset() {
        let pieces = log.read(offset, 1 << 20).unwrap();
        assert!(
            !pieces.is_empty(),
            "log {} ends early at {offset}",
            dir.display()
        );
        for piece in pieces {
            let view = BatchView::parse(piece).unwrap();
            if !view.is_control() {
                for record in view.records() {
                    let value = record.value.clone().unwrap_or_default();
                    out.push((
                        record.offset(view.base_offset()),
                        String::from_utf8(value.to_vec()).unwrap(),
                    ));
                }
            }
            offset = view.next_offset();
        }
    }
    out
}

/// True if every acknowledged record is in `log` exactly once, at its acknowledged offset, and
/// in the acknowledged order.
pub fn log_holds_once_in_order(log: &[(i64, String)], acked: &[(i64, String)]) -> bool {
    let mut previous_position = None;
    for (offset, value) in acked {
        let positions: Vec<usize> = log
            .iter()
            .enumerate()
            .filter(|(_, (_, v))| v == value)
            .map(|(p, _)| p)
            .collect();
        let [position] = positions[..] else {
            return false;
        };
        if log[position].0 != *offset || previous_position.is_some_and(|p| p >= position) {
            return false;
        }
        previous_position = Some(position);
    }
    true
}

/// The correlation id of [`raw_request_frame`].
pub const RAW_CORRELATION_ID: i32 = 77;

/// `request` as one frame (size prefix, request header v2, body), the way a peer sends it.
pub fn raw_request_frame(request: &Request) -> Vec<u8> {
    let mut w = WireWriter::with_capacity(128);
    w.i32(0);
    RequestHeader {
        api_key: request.api_key(),
        api_version: 0,
        correlation_id: RAW_CORRELATION_ID,
        client_id: Some("hostile-test".into()),
    }
    .write(&mut w, true);
    quorum::encode_request(request, &mut w);
    let mut frame = w.into_inner().to_vec();
    let size = (frame.len() - 4) as i32;
    frame[..4].copy_from_slice(&size.to_be_bytes());
    frame
}

/// Sends `request` on a fresh connection to `addr`, as a peer would, and reads its response
/// (bounded by `timeout`). Err when the connection fails, or closes without an answer (the
/// node died or refused the frame).
pub fn send_raw_request(
    addr: SocketAddr,
    request: &Request,
    timeout: Duration,
) -> Result<Response, String> {
    use std::io::Write;
    let mut stream =
        TcpStream::connect_timeout(&addr, timeout).map_err(|e| format!("{addr}: connect: {e}"))?;
    stream.set_read_timeout(Some(timeout)).unwrap();
    stream.set_write_timeout(Some(timeout)).unwrap();
    stream
        .write_all(&raw_request_frame(request))
        .map_err(|e| format!("{addr}: send: {e}"))?;
    let mut size = [0u8; 4];
    stream
        .read_exact(&mut size)
        .map_err(|e| format!("{addr}: no response: {e}"))?;
    let mut body = vec![0u8; i32::from_be_bytes(size) as usize];
    stream
        .read_exact(&mut body)
        .map_err(|e| format!("{addr}: truncated response: {e}"))?;
    let mut r = WireReader::new(Bytes::from(body));
    let header = ResponseHeader::read(&mut r, true).map_err(|e| format!("{addr}: header: {e}"))?;
    if header.correlation_id != RAW_CORRELATION_ID {
        return Err(format!(
            "{addr}: correlation id {} in the response",
            header.correlation_id
        ));
    }
    quorum::decode_response(request.api_key(), &mut r)
        .map_err(|e| format!("{addr}: undecodable response: {e}"))
}

/// Produces `value` with acks=-1 to `addr`; Ok(base offset) when acknowledged.
pub fn produce_one(client: &mut BlockingClient, value: &str) -> Result<i64, String> {
    let response = client
        .produce(9, -1, batch(value))
        .map_err(|e| e.to_string())?
        .expect("acks=-1 is answered");
    let partition = &response.topics[0].partitions[0];
    if partition.error == ErrorCode::NONE {
        Ok(partition.base_offset)
    } else {
        Err(format!("error {}", partition.error))
    }
}

/// Acknowledged (offset, value) pairs, shared with the producing thread.
pub type Acked = Arc<Mutex<Vec<(i64, String)>>>;

/// Produces `load-N` records from a thread, moving to the next node on any error, until
/// `stop`; every acknowledged (offset, value) goes into the returned list.
pub fn start_load(
    addrs: Vec<SocketAddr>,
    stop: Arc<AtomicBool>,
) -> (Acked, std::thread::JoinHandle<()>) {
    let acked: Acked = Arc::new(Mutex::new(Vec::new()));
    let handle = {
        let acked = Arc::clone(&acked);
        std::thread::spawn(move || {
            let mut i = 0u64;
            let mut target = 0usize;
            while !stop.load(Ordering::Relaxed) {
                let Ok(mut client) = BlockingClient::connect(addrs[target], Duration::from_secs(2))
                else {
                    target = (target + 1) % addrs.len();
                    std::thread::sleep(Duration::from_millis(20));
                    continue;
                };
                while !stop.load(Ordering::Relaxed) {
                    let value = format!("load-{i}");
                    i += 1;
                    match produce_one(&mut client, &value) {
                        Ok(offset) => acked.lock().unwrap().push((offset, value)),
                        Err(_) => break,
                    }
                }
                target = (target + 1) % addrs.len();
            }
        })
    };
    (acked, handle)
}

/// What `guard`'s process wrote to its piped stderr (read to the end: the process must exit).
pub fn read_stderr(guard: &mut ProcessGuard) -> String {
    use std::io::Read;
    let mut out = String::new();
    guard
        .child
        .stderr
        .take()
        .expect("stderr is piped")
        .read_to_string(&mut out)
        .unwrap();
    out
}

/// Starts `ringraft serve --config config` in a private user and mount namespace
/// (`unshare -rm`, no privilege needed) after `mount {mount_args} dir` there, so the node sees a
/// filesystem nobody else does. `redirect` is appended to the node's command line in the shell
/// (e.g. `2>/dev/full`); the shell's own stderr is piped. A failed mount exits 99 with "mount:".
pub fn spawn_on_private_mount(
    mount_args: &str,
    dir: &Path,
    config: &Path,
    redirect: &str,
    rust_log: &str,
) -> ProcessGuard {
    let script = format!(
        r#"mount {mount_args} "$1" || {{ echo "mount: failed" >&2; exit 99; }}
           exec "$2" serve --config "$3" {redirect}"#
    );
    let child = Command::new("unshare")
        .args(["-rm", "sh", "-c", &script, "sh"])
        .arg(dir)
        .arg(binary())
        .arg(config)
        .env("RUST_LOG", rust_log)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| {
            panic!("cannot run `unshare` (util-linux), which this test needs: {e}")
        });
    ProcessGuard { child }
}
