//! Which of the writer's two ways to make a group durable is faster on the disk that holds the
//! log, measured at every start: `log.sync.mode=auto` takes the faster, and the start-up check
//! warns when the one in use is slow (docs/operations.md, "Choosing the sync mode").
//!
//! The two differ by more than the disk: on one virtual machine RWF_DSYNC writes were 11-34x
//! slower than a write and an fdatasync, on another they were the faster of the two
//! (docs/benchmarks.md, "The sync mode"), and how each goes through io_uring matters too: an
//! fdatasync always runs on one of the ring's worker threads, a hand-off there and back, where
//! an RWF_DSYNC write may complete without one. So the node times both through an io_uring set
//! up as the writer's, on a scratch file in the log's own directory, in alternating pairs of one
//! 4 KiB O_DIRECT write each, and takes RWF_DSYNC when its median is no slower.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use io_uring::{opcode, squeue, types, IoUring};

use super::writer::build_ring;
use super::{RingInfo, SyncMode, WriterError};
use crate::os::aligned::AlignedBuf;
use crate::os::file;

/// The scratch file, in the log's directory; the log ignores names it did not give, and the
/// probe removes it (and one a crash left behind) every time it runs.
pub const PROBE_FILE_NAME: &str = ".sync-probe";
/// One write: the size of the log's smallest group, one block.
const PROBE_BLOCK: usize = 4096;
/// Blocks the writes cycle over, all written once (and synced) before the timing starts, so
/// that no timed write allocates or converts an extent: the log writes into blocks its
/// zero-fill has already written.
const PROBE_BLOCKS: usize = 16;
const PREWRITTEN_BYTES: usize = PROBE_BLOCK * PROBE_BLOCKS;
/// Pairs timed at most, and at least (however slow the disk).
pub const MAX_PAIRS: usize = 16;
pub const MIN_PAIRS: usize = 3;
/// Past this, no pair is started once [`MIN_PAIRS`] are done: a disk whose RWF_DSYNC write takes
/// tens of milliseconds delays the start by well under a second.
pub const TIME_BUDGET: Duration = Duration::from_millis(500);

/// How `log.sync.mode` asks the writer to make groups durable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SyncModeSetting {
    /// Whichever [`SyncProbe`] finds faster at start.
    Auto,
    /// This one, whatever the probe finds (it still runs, for the start-up check).
    Fixed(SyncMode),
}

impl SyncModeSetting {
    /// The mode the writer starts with: the fixed one, or what `probe` found faster
    /// (fdatasync, the kernel's oldest guarantee, when there is no probe to go by).
    pub fn choose(self, probe: Option<&SyncProbe>) -> SyncMode {
        match (self, probe) {
            (SyncModeSetting::Fixed(mode), _) => mode,
            (SyncModeSetting::Auto, Some(probe)) => probe.choice(),
            (SyncModeSetting::Auto, None) => SyncMode::LinkedFdatasync,
        }
    }
}

impl std::fmt::Display for SyncModeSetting {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SyncModeSetting::Auto => f.write_str("auto"),
            SyncModeSetting::Fixed(mode) => write!(f, "{mode}"),
        }
    }
}

#[derive(Debug, thiserror::Error)]
#[error("the start-up sync probe failed to {action} {path}: {source}")]
pub struct ProbeError {
    action: &'static str,
    path: PathBuf,
    source: io::Error,
}

/// The timings of one probe: one entry per pair, in the order taken.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SyncProbe {
    /// A 4 KiB O_DIRECT write, then fdatasync(2).
    pub fdatasync: Vec<Duration>,
    /// One 4 KiB O_DIRECT write with RWF_DSYNC.
    pub dsync: Vec<Duration>,
}

impl SyncProbe {
    /// Times both ways on a scratch file in `dir` (see the module's comment), then removes it.
    pub fn run(dir: &Path) -> Result<SyncProbe, ProbeError> {
        let path = dir.join(PROBE_FILE_NAME);
        let fail = |action, source| ProbeError {
            action,
            path: path.clone(),
            source,
        };
        file::remove_if_present(&path).map_err(|e| fail("remove a leftover", e))?;
        let timed = file::open_direct(&path, true)
            .map_err(|e| fail("create", e))
            .and_then(|scratch| Self::time_pairs(&scratch).map_err(|e| fail("write", e)));
        // Removed whether or not the timing succeeded; the timing's error comes first.
        let removed = file::remove_if_present(&path).map_err(|e| fail("remove", e));
        let probe = timed?;
        removed?;
        Ok(probe)
    }

    fn time_pairs(scratch: &File) -> io::Result<SyncProbe> {
        let mut ring = probe_ring()?;
        let mut block = AlignedBuf::zeroed(PROBE_BLOCK);
        block.set_len(PROBE_BLOCK);
        for (i, byte) in block.as_mut_slice().iter_mut().enumerate() {
            *byte = i as u8;
        }
        let written_before = AlignedBuf::zeroed(PREWRITTEN_BYTES);
        file::write_all_at(scratch, written_before.as_full_slice(), 0)?;
        file::fdatasync(scratch)?;
        let started = Instant::now();
        let mut probe = SyncProbe {
            fdatasync: Vec::with_capacity(MAX_PAIRS),
            dsync: Vec::with_capacity(MAX_PAIRS),
        };
        for pair in (0..).take_while(|&pair| another_pair(pair, started.elapsed())) {
            for (k, mode) in pair_order(pair).into_iter().enumerate() {
                let t = Instant::now();
                durable_write(
                    &mut ring,
                    scratch,
                    block.filled(),
                    block_offset(pair, k),
                    mode,
                )?;
                let took = t.elapsed();
                match mode {
                    SyncMode::LinkedFdatasync => probe.fdatasync.push(took),
                    SyncMode::RwfDsync => probe.dsync.push(took),
                }
            }
        }
        debug_assert_eq!(probe.fdatasync.len(), probe.dsync.len());
        Ok(probe)
    }

    /// The faster way at the median; a tie goes to RWF_DSYNC (no worker hand-off in the ring).
    pub fn choice(&self) -> SyncMode {
        match (median(&self.fdatasync), median(&self.dsync)) {
            (Some(fdatasync), Some(dsync)) if dsync <= fdatasync => SyncMode::RwfDsync,
            _ => SyncMode::LinkedFdatasync,
        }
    }

    pub fn median(&self, mode: SyncMode) -> Option<Duration> {
        median(self.samples(mode))
    }

    pub fn worst(&self, mode: SyncMode) -> Option<Duration> {
        self.samples(mode).iter().max().copied()
    }

    fn samples(&self, mode: SyncMode) -> &[Duration] {
        match mode {
            SyncMode::LinkedFdatasync => &self.fdatasync,
            SyncMode::RwfDsync => &self.dsync,
        }
    }
}

/// A ring set up as the log writer's ([`build_ring`]).
fn probe_ring() -> io::Result<IoUring> {
    build_ring(&mut RingInfo::default()).map_err(|e| match e {
        WriterError::Ring(e) => e,
        other => io::Error::other(other.to_string()),
    })
}

/// Whether to time pair number `pair` (from 0), `elapsed` after the first began: always until
/// [`MIN_PAIRS`] are done, then while within [`TIME_BUDGET`], up to [`MAX_PAIRS`].
fn another_pair(pair: usize, elapsed: Duration) -> bool {
    pair < MAX_PAIRS && (pair < MIN_PAIRS || elapsed < TIME_BUDGET)
}

/// Which goes first in pair `pair`: they alternate, so neither always follows the other's flush.
fn pair_order(pair: usize) -> [SyncMode; 2] {
    if pair.is_multiple_of(2) {
        [SyncMode::LinkedFdatasync, SyncMode::RwfDsync]
    } else {
        [SyncMode::RwfDsync, SyncMode::LinkedFdatasync]
    }
}

/// Where write `k` (0 or 1) of pair `pair` goes: the next block of the pre-written region, round
/// and round, so two writes in a row never hit the same block.
fn block_offset(pair: usize, k: usize) -> u64 {
    ((2 * pair + k) % PROBE_BLOCKS * PROBE_BLOCK) as u64
}

/// One write of `block` at `at`, made durable through `ring` the way the writer does in `mode`
/// (an O_DIRECT write with RWF_DSYNC, or one with an fdatasync linked behind it), waited for.
fn durable_write(
    ring: &mut IoUring,
    scratch: &File,
    block: &[u8],
    at: u64,
    mode: SyncMode,
) -> io::Result<()> {
    let fd = types::Fd(scratch.as_raw_fd());
    let len = u32::try_from(block.len()).expect("a probe block fits a u32");
    let write = opcode::Write::new(fd, block.as_ptr(), len).offset(at);
    let entries = match mode {
        SyncMode::RwfDsync => vec![write.rw_flags(libc::RWF_DSYNC).build()],
        SyncMode::LinkedFdatasync => vec![
            write.build().flags(squeue::Flags::IO_LINK),
            opcode::Fsync::new(fd)
                .flags(types::FsyncFlags::DATASYNC)
                .build(),
        ],
    };
    // SAFETY: `block` outlives the operations: they are waited for below before it returns.
    unsafe { ring.submission().push_multiple(&entries) }
        .map_err(|_| io::Error::other("the probe's ring has no room"))?;
    ring.submit_and_wait(entries.len())?;
    let results: Vec<i32> = ring.completion().map(|cqe| cqe.result()).collect();
    if results.len() != entries.len() {
        return Err(io::Error::other(format!(
            "{} completions for {} probe operations",
            results.len(),
            entries.len()
        )));
    }
    if let Some(&errno) = results.iter().find(|&&r| r < 0) {
        return Err(io::Error::from_raw_os_error(-errno));
    }
    if results[0] != len as i32 {
        return Err(io::Error::new(
            io::ErrorKind::WriteZero,
            format!("a short probe write: {} of {len} bytes", results[0]),
        ));
    }
    Ok(())
}

/// The lower median (None for no samples).
fn median(samples: &[Duration]) -> Option<Duration> {
    let mut sorted = samples.to_vec();
    sorted.sort_unstable();
    sorted.get(sorted.len().saturating_sub(1) / 2).copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn us(v: &[u64]) -> Vec<Duration> {
        v.iter().map(|&u| Duration::from_micros(u)).collect()
    }

    #[test]
    fn the_median_is_the_lower_middle() {
        assert_eq!(median(&[]), None);
        assert_eq!(median(&us(&[7])), Some(Duration::from_micros(7)));
        assert_eq!(median(&us(&[9, 1, 5])), Some(Duration::from_micros(5)));
        assert_eq!(median(&us(&[9, 1, 5, 3])), Some(Duration::from_micros(3)));
    }

    /// The choice goes by the medians, not by the means or the single worst write: one slow
    /// outlier of an otherwise faster way does not lose it.
    #[test]
    fn the_faster_median_is_chosen_and_a_tie_goes_to_dsync() {
        let cases: [(&[u64], &[u64], SyncMode); 5] = [
            (&[50, 55, 60], &[30, 31, 9000], SyncMode::RwfDsync),
            (
                &[50, 55, 60],
                &[40_000, 35_000, 30],
                SyncMode::LinkedFdatasync,
            ),
            (&[50, 50, 50], &[50, 50, 50], SyncMode::RwfDsync),
            (&[50, 50, 50], &[51, 51, 51], SyncMode::LinkedFdatasync),
            (&[], &[], SyncMode::LinkedFdatasync),
        ];
        for (fdatasync, dsync, chosen) in cases {
            let probe = SyncProbe {
                fdatasync: us(fdatasync),
                dsync: us(dsync),
            };
            assert_eq!(probe.choice(), chosen, "{probe:?}");
        }
    }

    #[test]
    fn pairs_run_to_the_minimum_then_within_the_budget_up_to_the_maximum() {
        let over = TIME_BUDGET + Duration::from_millis(1);
        assert!(another_pair(0, Duration::ZERO));
        assert!(
            another_pair(MIN_PAIRS - 1, over),
            "the minimum whatever the time"
        );
        assert!(another_pair(
            MIN_PAIRS,
            TIME_BUDGET - Duration::from_millis(1)
        ));
        assert!(!another_pair(MIN_PAIRS, TIME_BUDGET), "the budget is spent");
        assert!(!another_pair(MIN_PAIRS, over));
        assert!(another_pair(MAX_PAIRS - 1, Duration::ZERO));
        assert!(
            !another_pair(MAX_PAIRS, Duration::ZERO),
            "never past the maximum"
        );
    }

    #[test]
    fn the_modes_alternate_and_every_write_is_on_a_block_of_its_own_written_before() {
        for pair in 0..MAX_PAIRS {
            let order = pair_order(pair);
            assert_ne!(order[0], order[1], "pair {pair}: one of each");
            assert_eq!(order, pair_order(pair + 2), "pair {pair}");
            assert_ne!(
                order,
                pair_order(pair + 1),
                "pair {pair}: the next goes the other way"
            );
        }
        let offsets: Vec<u64> = (0..MAX_PAIRS)
            .flat_map(|pair| [block_offset(pair, 0), block_offset(pair, 1)])
            .collect();
        for (i, at) in offsets.iter().enumerate() {
            assert_eq!(at % PROBE_BLOCK as u64, 0, "write {i} at {at}: aligned");
            assert!(
                at + PROBE_BLOCK as u64 <= PREWRITTEN_BYTES as u64,
                "write {i} at {at}: within the blocks written before the timing"
            );
        }
        for window in offsets.windows(PROBE_BLOCKS) {
            let distinct: std::collections::BTreeSet<_> = window.iter().collect();
            assert_eq!(distinct.len(), PROBE_BLOCKS, "{window:?}");
        }
    }

    /// Each way really writes the block where asked (read back), and an error comes back as
    /// the errno the kernel gave.
    #[test]
    fn a_durable_write_lands_and_its_error_is_the_kernels() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(PROBE_FILE_NAME);
        let scratch = file::open_direct(&path, true).unwrap();
        let mut ring = probe_ring().unwrap();
        let mut block = AlignedBuf::zeroed(PROBE_BLOCK);
        block.set_len(PROBE_BLOCK);
        for (at, mode, fill) in [
            (0, SyncMode::LinkedFdatasync, 7u8),
            (PROBE_BLOCK as u64, SyncMode::RwfDsync, 9u8),
        ] {
            block.as_mut_slice().fill(fill);
            durable_write(&mut ring, &scratch, block.filled(), at, mode).unwrap();
        }
        let back = std::fs::read(&path).unwrap();
        assert_eq!(back.len(), 2 * PROBE_BLOCK);
        assert!(back[..PROBE_BLOCK].iter().all(|&b| b == 7));
        assert!(back[PROBE_BLOCK..].iter().all(|&b| b == 9));
        let read_only = File::open(&path).unwrap();
        for mode in [SyncMode::LinkedFdatasync, SyncMode::RwfDsync] {
            let error = durable_write(&mut ring, &read_only, block.filled(), 0, mode).unwrap_err();
            assert_eq!(error.raw_os_error(), Some(libc::EBADF), "{mode}: {error}");
        }
    }

    #[test]
    fn a_setting_shows_as_configured() {
        assert_eq!(SyncModeSetting::Auto.to_string(), "auto");
        let fixed = SyncModeSetting::Fixed(SyncMode::RwfDsync);
        assert_eq!(fixed.to_string(), SyncMode::RwfDsync.to_string());
    }

    #[test]
    fn a_fixed_mode_is_kept_and_auto_without_a_probe_is_fdatasync() {
        let dsync_faster = SyncProbe {
            fdatasync: us(&[50, 60, 70]),
            dsync: us(&[30, 35, 40]),
        };
        let fixed = SyncModeSetting::Fixed(SyncMode::LinkedFdatasync);
        assert_eq!(fixed.choose(Some(&dsync_faster)), SyncMode::LinkedFdatasync);
        let fixed = SyncModeSetting::Fixed(SyncMode::RwfDsync);
        assert_eq!(fixed.choose(None), SyncMode::RwfDsync);
        let auto = SyncModeSetting::Auto;
        assert_eq!(auto.choose(Some(&dsync_faster)), SyncMode::RwfDsync);
        assert_eq!(auto.choose(None), SyncMode::LinkedFdatasync);
        assert_eq!(
            dsync_faster.median(SyncMode::RwfDsync),
            Some(Duration::from_micros(35))
        );
        assert_eq!(
            dsync_faster.worst(SyncMode::LinkedFdatasync),
            Some(Duration::from_micros(70))
        );
    }
}
