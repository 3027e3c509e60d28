//! What /proc says about a process: CPU time used (utime + stime) and resident memory (VmRSS),
//! for the leader's CPU per committed record and the nodes' memory over a run; and pinning the
//! load threads to CPUs.

use std::time::Duration;

/// One reading of a process's counters.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ProcSample {
    /// User + system CPU time so far.
    pub cpu: Duration,
    pub rss_kib: u64,
}

/// Reads `/proc/PID/stat` and `/proc/PID/status`; None when the process is gone.
pub fn sample(pid: u32) -> Option<ProcSample> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    Some(ProcSample {
        cpu: cpu_time(&stat, clock_ticks_per_sec())?,
        rss_kib: rss_kib(&status)?,
    })
}

fn clock_ticks_per_sec() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    assert!(ticks > 0, "sysconf(_SC_CLK_TCK) failed");
    ticks as u64
}

/// utime + stime (fields 14 and 15 of /proc/PID/stat, in clock ticks). The command name (field
/// 2) is in parentheses and may hold spaces, so fields are counted after its closing one.
pub fn cpu_time(stat: &str, ticks_per_sec: u64) -> Option<Duration> {
    let after_name = &stat[stat.rfind(')')? + 1..];
    let mut fields = after_name.split_whitespace();
    // After the name: state is field 3, so utime (14) is the 12th entry here.
    let utime: u64 = fields.nth(11)?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    let ticks = utime + stime;
    Some(Duration::from_nanos(ticks * 1_000_000_000 / ticks_per_sec))
}

/// `VmRSS:   1234 kB` of /proc/PID/status.
pub fn rss_kib(status: &str) -> Option<u64> {
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Pins the calling thread to `cpu`; fails if the CPU is not in this process's allowed set.
pub fn pin_current_thread(cpu: usize) -> Result<(), String> {
    // SAFETY: cpu_set_t is plain data; the calls get valid pointers and its size.
    unsafe {
        let mut allowed: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut allowed) != 0 {
            return Err(format!(
                "sched_getaffinity: {}",
                std::io::Error::last_os_error()
            ));
        }
        if cpu >= libc::CPU_SETSIZE as usize || !libc::CPU_ISSET(cpu, &allowed) {
            return Err(format!("cpu {cpu} is not in this process's allowed set"));
        }
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            return Err(format!(
                "sched_setaffinity({cpu}): {}",
                std::io::Error::last_os_error()
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_time_counts_fields_after_the_name() {
        // A name with spaces and a parenthesis; utime 250, stime 50 ticks at 100 per second.
        let stat = "4242 (ring raft) x) S 1 4242 4242 0 -1 4194560 500 0 0 0 250 50 0 0 20 0 \
                    9 0 100 1000000 300 18446744073709551615";
        assert_eq!(cpu_time(stat, 100), Some(Duration::from_secs(3)));
        assert_eq!(cpu_time("garbage", 100), None);
    }

    #[test]
    fn rss_is_read_from_the_status_line() {
        let status = "Name:\tringraft\nVmPeak:\t  9000 kB\nVmRSS:\t    5120 kB\nThreads:\t4\n";
        assert_eq!(rss_kib(status), Some(5120));
        assert_eq!(rss_kib("Name:\tx\n"), None);
    }

    #[test]
    fn this_process_can_be_sampled() {
        let now = sample(std::process::id()).expect("own /proc entry");
        assert!(now.rss_kib > 0);
    }
}
