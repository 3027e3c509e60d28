//! A tracing subscriber for tests that counts WARN events, so a test can check what an
//! operator is told (once, or not at all) and not only what the code does.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// Counts WARN events; install it for one closure on one thread with
/// `tracing::subscriber::with_default`.
#[derive(Clone, Default)]
pub(crate) struct Warnings(Arc<AtomicUsize>);

impl Warnings {
    pub(crate) fn count(&self) -> usize {
        self.0.load(Ordering::Relaxed)
    }
}

impl tracing::Subscriber for Warnings {
    fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(1)
    }
    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, event: &tracing::Event<'_>) {
        if *event.metadata().level() == tracing::Level::WARN {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}
