//! `log.format=json`: one JSON object per line, `{"ts", "level", "target", "message",
//! "fields"}` (docs/operations.md, "Logs"), for log shippers that parse lines. The text format
//! stays tracing-subscriber's own.

use std::fmt;

use serde_json::{Map, Value};
use tracing::field::{Field, Visit};
use tracing::{Event, Subscriber};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::time::{FormatTime, SystemTime};
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;

/// The JSON line formatter.
pub struct JsonLines;

/// Collects an event's fields: `message` apart, the rest as JSON values.
#[derive(Default)]
struct Fields {
    message: String,
    fields: Map<String, Value>,
}

impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.put(field, Value::from(value));
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.put(field, Value::from(value));
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.put(field, Value::from(value));
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.put(field, Value::from(value));
    }
    fn record_f64(&mut self, field: &Field, value: f64) {
        self.put(field, Value::from(value));
    }
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.put(field, Value::from(format!("{value:?}")));
    }
}

impl Fields {
    fn put(&mut self, field: &Field, value: Value) {
        if field.name() == "message" {
            self.message = match value {
                Value::String(s) => s,
                other => other.to_string(),
            };
        } else {
            self.fields.insert(field.name().to_string(), value);
        }
    }
}

/// The line for an event at `ts` (RFC 3339).
fn line(ts: String, level: &str, target: &str, fields: Fields) -> String {
    let mut object = Map::new();
    object.insert("ts".into(), Value::from(ts));
    object.insert("level".into(), Value::from(level));
    object.insert("target".into(), Value::from(target));
    object.insert("message".into(), Value::from(fields.message));
    object.insert("fields".into(), Value::Object(fields.fields));
    Value::Object(object).to_string()
}

impl<S, N> FormatEvent<S, N> for JsonLines
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        _ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let mut ts = String::new();
        SystemTime.format_time(&mut Writer::new(&mut ts))?;
        let mut fields = Fields::default();
        event.record(&mut fields);
        let meta = event.metadata();
        writeln!(
            writer,
            "{}",
            line(ts, meta.level().as_str(), meta.target(), fields)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    /// Captures what the subscriber writes.
    #[derive(Clone, Default)]
    struct Capture(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Capture {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn each_event_is_one_json_object_with_its_fields() {
        let capture = Capture::default();
        let writer = capture.clone();
        let subscriber = tracing_subscriber::fmt()
            .event_format(JsonLines)
            .with_writer(move || writer.clone())
            .finish();
        tracing::subscriber::with_default(subscriber, || {
            tracing::warn!(
                node = 3,
                worst_us = 250u64,
                dir = "/x",
                "fdatasync \"slow\"\nreally"
            );
            tracing::info!(target: "ringraft::stats", "node stats: {}", 7);
        });
        let text = String::from_utf8(capture.0.lock().unwrap().clone()).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2, "{text}");
        let first: Value = serde_json::from_str(lines[0]).unwrap();
        assert_eq!(first["level"], "WARN");
        assert_eq!(first["message"], "fdatasync \"slow\"\nreally");
        assert_eq!(first["fields"]["node"], 3);
        assert_eq!(first["fields"]["worst_us"], 250);
        assert_eq!(first["fields"]["dir"], "/x");
        assert!(first["target"].as_str().unwrap().contains("log_format"));
        let ts = first["ts"].as_str().unwrap();
        assert!(ts.len() >= 20 && ts.contains('T'), "RFC 3339: {ts}");
        let second: Value = serde_json::from_str(lines[1]).unwrap();
        assert_eq!(second["target"], "ringraft::stats");
        assert_eq!(second["message"], "node stats: 7");
        assert_eq!(second["fields"], serde_json::json!({}));
    }
}
