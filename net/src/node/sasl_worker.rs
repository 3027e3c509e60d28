//! SASL steps that derive keys, off the raft thread. A PLAIN login costs the server one PBKDF2
//! (about 12 ms for SCRAM-SHA-512 at 8192 iterations, docs/security.md, "SASL"): on the raft
//! thread that would stall every heartbeat and commit behind it. One worker thread takes such
//! steps from a bounded queue and hands each finished step back through a channel, writing an
//! eventfd the raft thread's ring watches so the loop wakes for it (the resolver's pattern,
//! resolver.rs, with a wake-up).
//!
//! SCRAM's server steps need no key derivation (a lookup, a few HMACs and hashes: the client
//! pays the PBKDF2) and run inline on the raft thread.

use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::thread::JoinHandle;

use bytes::Bytes;

use super::eventfd;
use crate::security::sasl::{SaslError, SaslServer, SaslStep};

/// Steps queued or running at most; beyond that a step is refused at once.
pub(crate) const MAX_PENDING: usize = 16;

/// One step for the worker: the connection's server and the client's token.
pub(crate) struct StepJob {
    pub(crate) token: u64,
    pub(crate) server: Box<SaslServer>,
    pub(crate) client_token: Bytes,
}

/// A finished step: the server back (its state moved on) and what the step gave.
pub(crate) struct StepDone {
    pub(crate) token: u64,
    pub(crate) server: Box<SaslServer>,
    pub(crate) result: Result<SaslStep, SaslError>,
}

pub(crate) struct SaslWorker {
    jobs: Option<Sender<StepJob>>,
    done: Receiver<StepDone>,
    wake: OwnedFd,
    pending: usize,
    thread: Option<JoinHandle<()>>,
}

impl SaslWorker {
    /// Starts the worker thread.
    pub(crate) fn start() -> std::io::Result<SaslWorker> {
        let wake = eventfd()?;
        let wake_fd = wake.try_clone()?;
        let (jobs_tx, jobs_rx) = channel::<StepJob>();
        let (done_tx, done_rx) = channel();
        let thread = std::thread::Builder::new()
            .name("ringraft-sasl".into())
            .spawn(move || {
                for mut job in jobs_rx {
                    let result = job.server.step(&job.client_token);
                    let done = StepDone {
                        token: job.token,
                        server: job.server,
                        result,
                    };
                    if done_tx.send(done).is_err() {
                        return;
                    }
                    let one: u64 = 1;
                    // SAFETY: write(2) of a local u64 to an eventfd this thread holds open.
                    unsafe { libc::write(wake_fd.as_raw_fd(), (&one as *const u64).cast(), 8) };
                }
            })?;
        Ok(SaslWorker {
            jobs: Some(jobs_tx),
            done: done_rx,
            wake,
            pending: 0,
            thread: Some(thread),
        })
    }

    /// The eventfd written after every finished step.
    pub(crate) fn eventfd(&self) -> RawFd {
        self.wake.as_raw_fd()
    }

    /// Queues `job`; Err(job) when [`MAX_PENDING`] steps are queued or running already (or the
    /// worker is gone).
    pub(crate) fn submit(&mut self, job: StepJob) -> Result<(), Box<StepJob>> {
        if self.pending >= MAX_PENDING {
            return Err(Box::new(job));
        }
        let Some(jobs) = &self.jobs else {
            return Err(Box::new(job));
        };
        match jobs.send(job) {
            Ok(()) => {
                self.pending += 1;
                Ok(())
            }
            Err(refused) => Err(Box::new(refused.0)),
        }
    }

    /// Steps that finished since the last call.
    pub(crate) fn finished(&mut self) -> Vec<StepDone> {
        let done: Vec<StepDone> = self.done.try_iter().collect();
        self.pending -= done.len();
        done
    }
}

impl Drop for SaslWorker {
    fn drop(&mut self) {
        // Closing the queue ends the thread after the step it may be running.
        self.jobs = None;
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    use crate::security::credentials::{CredentialStore, ScramMechanism};
    use crate::security::sasl::{Mechanism, SaslClient};

    fn store() -> Arc<CredentialStore> {
        // Never saved: the path is only the store's name.
        let alice = ("alice", ScramMechanism::Sha512, "alice-secret", 4096);
        Arc::new(CredentialStore::with_passwords(
            "credentials.json",
            &[alice],
        ))
    }

    fn plain_job(token: u64, store: &Arc<CredentialStore>, password: &str) -> StepJob {
        let client = SaslClient::new(Mechanism::Plain, "alice", password).unwrap();
        StepJob {
            token,
            server: Box::new(SaslServer::new(Mechanism::Plain, Arc::clone(store))),
            client_token: Bytes::from(client.first_message()),
        }
    }

    fn wait_for(worker: &mut SaslWorker, count: usize) -> Vec<StepDone> {
        let deadline = Instant::now() + Duration::from_secs(20);
        let mut done = Vec::new();
        while done.len() < count && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
            done.extend(worker.finished());
        }
        done
    }

    #[test]
    fn plain_steps_come_back_with_their_outcome() {
        let store = store();
        let mut worker = SaslWorker::start().unwrap();
        worker
            .submit(plain_job(1, &store, "alice-secret"))
            .ok()
            .unwrap();
        worker.submit(plain_job(2, &store, "wrong")).ok().unwrap();
        let mut done = wait_for(&mut worker, 2);
        done.sort_by_key(|d| d.token);
        assert_eq!(done.len(), 2);
        assert!(matches!(&done[0].result, Ok(SaslStep::Done { user, .. }) if user == "alice"));
        assert_eq!(done[1].result, Err(SaslError::AuthenticationFailed));
        assert!(done.iter().all(|d| d.server.is_over()));
        let mut count = 0u64;
        // SAFETY: read(2) of 8 bytes into a local u64 from the worker's eventfd.
        let read = unsafe {
            libc::read(
                worker.eventfd(),
                (&mut count as *mut u64).cast(),
                std::mem::size_of::<u64>(),
            )
        };
        assert_eq!(read, 8);
        assert!(count >= 1, "the eventfd was written");
    }

    #[test]
    fn the_queue_is_bounded() {
        let store = store();
        let mut worker = SaslWorker::start().unwrap();
        worker.pending = MAX_PENDING;
        let refused = worker.submit(plain_job(9, &store, "x")).unwrap_err();
        assert_eq!(refused.token, 9);
    }
}
