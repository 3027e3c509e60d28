//! `--metrics-scrape-ms`: every started node serves `/metrics` (`metrics.listener` on a free
//! port) and a thread scrapes all of them at that interval through the run, as Prometheus
//! would (more often): the load's figures then include what serving metrics costs
//! (docs/benchmarks.md, "Metrics on and off").

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde::Serialize;

/// What the scraper did.
#[derive(Clone, Debug, Default, Serialize)]
pub struct ScrapeReport {
    pub interval_ms: u64,
    pub scrapes: u64,
    pub failures: u64,
    pub mean_scrape_us: f64,
    pub mean_bytes: f64,
}

pub struct Scraper {
    stop: Arc<AtomicBool>,
    thread: JoinHandle<ScrapeReport>,
}

/// One GET of `http://127.0.0.1:port/metrics`: the body's length when answered 200.
fn scrape(port: u16) -> Result<usize, String> {
    let timeout = Duration::from_secs(5);
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    let mut stream = TcpStream::connect_timeout(&addr, timeout).map_err(|e| e.to_string())?;
    stream
        .set_read_timeout(Some(timeout))
        .map_err(|e| e.to_string())?;
    stream
        .write_all(b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        .map_err(|e| e.to_string())?;
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).map_err(|e| e.to_string())?;
    if !answer.starts_with(b"HTTP/1.1 200") {
        return Err("not 200".into());
    }
    Ok(answer.len())
}

impl Scraper {
    pub fn start(ports: Vec<u16>, interval: Duration) -> Scraper {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut report = ScrapeReport {
                interval_ms: interval.as_millis() as u64,
                ..ScrapeReport::default()
            };
            let (mut total_us, mut total_bytes) = (0f64, 0f64);
            while !flag.load(Ordering::Relaxed) {
                for &port in &ports {
                    let started = Instant::now();
                    match scrape(port) {
                        Ok(bytes) => {
                            report.scrapes += 1;
                            total_us += started.elapsed().as_secs_f64() * 1e6;
                            total_bytes += bytes as f64;
                        }
                        Err(_) => report.failures += 1,
                    }
                }
                std::thread::sleep(interval);
            }
            if report.scrapes > 0 {
                report.mean_scrape_us = total_us / report.scrapes as f64;
                report.mean_bytes = total_bytes / report.scrapes as f64;
            }
            report
        });
        Scraper { stop, thread }
    }

    pub fn finish(self) -> ScrapeReport {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.join().unwrap_or_default()
    }
}
