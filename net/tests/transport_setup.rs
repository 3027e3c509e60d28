//! Ring set-up: a seccomp filter that refuses io_uring_setup (as container runtimes' default
//! profiles do) gives the distinct `IoUringUnavailable` error, whose message names the fixes.

use net::transport::{Config, EventLoop, TransportError};

/// Install, on the calling thread only (no TSYNC), a filter failing io_uring_setup with `errno`.
fn refuse_io_uring_setup_on_this_thread(errno: u32) {
    const LD_W_ABS: u16 = 0x20; // BPF_LD | BPF_W | BPF_ABS
    const JEQ_K: u16 = 0x15; // BPF_JMP | BPF_JEQ | BPF_K
    const RET_K: u16 = 0x06; // BPF_RET | BPF_K
    let nr = u32::try_from(libc::SYS_io_uring_setup).unwrap();
    let mut filter = [
        // seccomp_data.nr is at offset 0.
        libc::sock_filter {
            code: LD_W_ABS,
            jt: 0,
            jf: 0,
            k: 0,
        },
        libc::sock_filter {
            code: JEQ_K,
            jt: 0,
            jf: 1,
            k: nr,
        },
        libc::sock_filter {
            code: RET_K,
            jt: 0,
            jf: 0,
            k: libc::SECCOMP_RET_ERRNO | errno,
        },
        libc::sock_filter {
            code: RET_K,
            jt: 0,
            jf: 0,
            k: libc::SECCOMP_RET_ALLOW,
        },
    ];
    let program = libc::sock_fprog {
        len: filter.len() as u16,
        filter: filter.as_mut_ptr(),
    };
    // SAFETY: prctl with a valid program that outlives the call; the filter only affects this
    // thread, which the test spawned for the purpose.
    unsafe {
        assert_eq!(libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), 0);
        assert_eq!(
            libc::prctl(
                libc::PR_SET_SECCOMP,
                libc::SECCOMP_MODE_FILTER,
                &program as *const libc::sock_fprog,
            ),
            0,
            "installing the seccomp filter: {}",
            std::io::Error::last_os_error()
        );
    }
}

fn new_loop_under_filter(errno: i32) -> Result<(), TransportError> {
    std::thread::spawn(move || {
        refuse_io_uring_setup_on_this_thread(errno as u32);
        EventLoop::new(Config::default()).map(drop)
    })
    .join()
    .expect("filtered thread")
}

#[test]
fn io_uring_refused_by_seccomp_is_a_distinct_error_naming_the_fix() {
    for errno in [libc::EPERM, libc::ENOSYS] {
        let error = new_loop_under_filter(errno).expect_err("io_uring_setup was refused");
        match &error {
            TransportError::IoUringUnavailable { source } => {
                assert_eq!(source.raw_os_error(), Some(errno))
            }
            other => panic!("expected IoUringUnavailable, got {other:?}"),
        }
        let message = error.to_string();
        assert!(message.contains("kernel.io_uring_disabled"), "{message}");
        assert!(message.contains("seccomp"), "{message}");
    }
    // Other threads are unaffected.
    assert!(EventLoop::new(Config::default()).is_ok());
}

#[test]
fn features_report_what_the_kernel_granted() {
    let full = EventLoop::new(Config::default()).unwrap().features();
    let plain = EventLoop::new(Config {
        try_single_issuer: false,
        use_buf_ring: false,
        use_multishot_accept: false,
        ..Config::default()
    })
    .unwrap()
    .features();
    println!("granted: {full:?}; with fallbacks forced: {plain:?}");
    assert!(!plain.single_issuer_defer_taskrun && !plain.buf_ring && !plain.multishot_accept);
}
