//! What one metric update costs on the hot path, per library (docs/architecture.md,
//! "Metrics"): the project's single-writer cells (`engine::stats`) against prometheus-client
//! 0.26 and prometheus 0.14 (default features off), each uncontended and with a scraping
//! thread reading the same metric in a loop (what a scrape does to the raft thread's cache
//! lines and locks).
//!
//! `cargo bench -p ringraft-net --bench metrics`

use std::hint::black_box;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use criterion::measurement::WallTime;
use criterion::{criterion_group, criterion_main, BenchmarkGroup, Criterion};
use engine::stats::{LocalCounter, LocalHistogram, LATENCY_US_BOUNDS};

type ClientLabels = Vec<(&'static str, &'static str)>;

fn latency_bounds_seconds() -> Vec<f64> {
    LATENCY_US_BOUNDS
        .iter()
        .map(|us| *us as f64 / 1e6)
        .collect()
}

/// Benchmarks `observe` as `name` while another thread runs `read` in a loop, as a scraper
/// would.
fn bench_scraped<R: Fn() + Send + 'static>(
    g: &mut BenchmarkGroup<'_, WallTime>,
    name: &str,
    read: R,
    observe: impl Fn(),
) {
    let stop = Arc::new(AtomicBool::new(false));
    let stop2 = stop.clone();
    let scraper = std::thread::spawn(move || {
        while !stop2.load(Ordering::Relaxed) {
            read();
        }
    });
    g.bench_function(name, |b| b.iter(&observe));
    stop.store(true, Ordering::Relaxed);
    scraper.join().unwrap();
}

fn counters(c: &mut Criterion) {
    let mut g = c.benchmark_group("counter_add");
    let local = Arc::new(LocalCounter::new());
    g.bench_function("ringraft LocalCounter", |b| {
        b.iter(|| local.add(black_box(1)))
    });
    let atomic = AtomicU64::new(0);
    g.bench_function("AtomicU64 fetch_add", |b| {
        b.iter(|| atomic.fetch_add(black_box(1), Ordering::Relaxed))
    });
    let pc = prometheus_client::metrics::counter::Counter::<u64>::default();
    g.bench_function("prometheus-client Counter", |b| {
        b.iter(|| pc.inc_by(black_box(1)))
    });
    let p = prometheus::IntCounter::new("c", "c").unwrap();
    g.bench_function("prometheus IntCounter", |b| {
        b.iter(|| p.inc_by(black_box(1)))
    });

    // Labelled (requests by API): a lookup per update in both libraries; a fixed array here.
    let family = prometheus_client::metrics::family::Family::<
        ClientLabels,
        prometheus_client::metrics::counter::Counter,
    >::default();
    let labels: ClientLabels = vec![("api", "Produce"), ("error", "NONE")];
    g.bench_function("prometheus-client Family<2 labels>", |b| {
        b.iter(|| family.get_or_create(black_box(&labels)).inc())
    });
    let vec =
        prometheus::IntCounterVec::new(prometheus::Opts::new("r", "r"), &["api", "error"]).unwrap();
    g.bench_function("prometheus IntCounterVec<2 labels>", |b| {
        b.iter(|| vec.with_label_values(black_box(&["Produce", "NONE"])).inc())
    });
    let table: Vec<LocalCounter> = (0..80 * 128).map(|_| LocalCounter::new()).collect();
    g.bench_function("ringraft LocalCounter table [api][error]", |b| {
        b.iter(|| table[black_box(0usize) * 128 + black_box(1usize)].add(1))
    });
    g.finish();
}

fn histograms(c: &mut Criterion) {
    let mut g = c.benchmark_group("histogram_observe");
    let local = Arc::new(LocalHistogram::new(LATENCY_US_BOUNDS));
    g.bench_function("ringraft LocalHistogram", |b| {
        b.iter(|| local.observe(black_box(1_234)))
    });
    let pc = Arc::new(prometheus_client::metrics::histogram::Histogram::new(
        latency_bounds_seconds(),
    ));
    g.bench_function("prometheus-client Histogram", |b| {
        b.iter(|| pc.observe(black_box(0.001_234)))
    });
    let p = prometheus::Histogram::with_opts(
        prometheus::HistogramOpts::new("h", "h").buckets(latency_bounds_seconds()),
    )
    .unwrap();
    g.bench_function("prometheus Histogram", |b| {
        b.iter(|| p.observe(black_box(0.001_234)))
    });

    // The same while another thread scrapes the metric continuously.
    let reader = local.clone();
    bench_scraped(
        &mut g,
        "ringraft LocalHistogram, scraped",
        move || {
            black_box(reader.snapshot());
        },
        || local.observe(black_box(1_234)),
    );
    let reader = pc.clone();
    bench_scraped(
        &mut g,
        "prometheus-client Histogram, scraped",
        move || {
            use prometheus_client::encoding::text::encode;
            let mut registry = prometheus_client::registry::Registry::default();
            registry.register("h", "h", (*reader).clone());
            let mut out = String::new();
            encode(&mut out, &registry).unwrap();
            black_box(out);
        },
        || pc.observe(black_box(0.001_234)),
    );
    let reader = p.clone();
    bench_scraped(
        &mut g,
        "prometheus Histogram, scraped",
        move || {
            use prometheus::core::Collector;
            black_box(reader.collect());
        },
        || p.observe(black_box(0.001_234)),
    );
    g.finish();
}

criterion_group!(benches, counters, histograms);
criterion_main!(benches);
