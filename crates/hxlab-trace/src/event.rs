//! Trace events and the sink that prints them as they happen (text like `nghttp -v`, or one
//! JSON object per line).

use serde_json::{Map, Value};
use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Which way a frame travelled, seen from the client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dir {
    /// Written by the client.
    Send,
    /// Read by the client.
    Recv,
}

impl Dir {
    /// "send" or "recv".
    pub fn as_str(self) -> &'static str {
        match self {
            Dir::Send => "send",
            Dir::Recv => "recv",
        }
    }
}

/// One thing that happened on the connection: a connect, a handshake, a frame, a request line.
#[derive(Debug, Clone)]
pub struct Event {
    /// The event kind in JSON (`connect`, `tls`, `frame`, `h1_request`, `info`, ...).
    pub kind: &'static str,
    /// The main line of text output (without timestamp).
    pub line: String,
    /// Extra indented lines (settings, header fields).
    pub detail: Vec<String>,
    /// Machine-readable fields for `--json`.
    pub fields: Map<String, Value>,
}

impl Event {
    /// A new event with a main line.
    pub fn new(kind: &'static str, line: impl Into<String>) -> Event {
        Event {
            kind,
            line: line.into(),
            detail: Vec::new(),
            fields: Map::new(),
        }
    }

    /// Adds a JSON field.
    pub fn field(mut self, key: &str, value: impl Into<Value>) -> Event {
        self.fields.insert(key.to_string(), value.into());
        self
    }

    /// Adds an indented text line.
    pub fn detail(mut self, line: impl Into<String>) -> Event {
        self.detail.push(line.into());
        self
    }
}

/// Where events go. Cloning shares the sink and the start time.
#[derive(Clone)]
pub struct Tracer {
    inner: Arc<TracerInner>,
}

struct TracerInner {
    start: Instant,
    json: bool,
    out: Mutex<Box<dyn Write + Send>>,
    /// Kept only when asked for: a long download must not grow memory with its DATA frames.
    events: Option<Mutex<Vec<(Duration, Event)>>>,
}

impl Tracer {
    /// A tracer writing to `out`; `json` selects one JSON object per line.
    pub fn new(json: bool, out: Box<dyn Write + Send>) -> Tracer {
        Tracer::build(json, out, false)
    }

    /// Like [`Tracer::new`], and also keeps every event for [`Tracer::events`].
    pub fn capturing(json: bool, out: Box<dyn Write + Send>) -> Tracer {
        Tracer::build(json, out, true)
    }

    fn build(json: bool, out: Box<dyn Write + Send>, keep: bool) -> Tracer {
        Tracer {
            inner: Arc::new(TracerInner {
                start: Instant::now(),
                json,
                out: Mutex::new(out),
                events: keep.then(|| Mutex::new(Vec::new())),
            }),
        }
    }

    /// The instant all timestamps are relative to.
    pub fn start(&self) -> Instant {
        self.inner.start
    }

    /// Time since the start.
    pub fn elapsed(&self) -> Duration {
        self.inner.start.elapsed()
    }

    /// Prints the event now (timestamped) and keeps a copy for [`Tracer::events`].
    pub fn emit(&self, event: Event) {
        let t = self.elapsed();
        let text = render(t, &event, self.inner.json);
        if let Ok(mut out) = self.inner.out.lock() {
            // A closed stdout (e.g. `| head`) must not abort the trace midway.
            let _ = out.write_all(text.as_bytes());
            let _ = out.flush();
        }
        if let Some(Ok(mut events)) = self.inner.events.as_ref().map(|e| e.lock()) {
            events.push((t, event));
        }
    }

    /// Every event emitted so far with its time since the start (empty unless
    /// [`Tracer::capturing`]).
    pub fn events(&self) -> Vec<(Duration, Event)> {
        match self.inner.events.as_ref().map(|e| e.lock()) {
            Some(Ok(e)) => e.clone(),
            _ => Vec::new(),
        }
    }
}

/// Milliseconds with microsecond precision.
fn ms(t: Duration) -> f64 {
    (t.as_micros() as f64) / 1000.0
}

fn render(t: Duration, event: &Event, json: bool) -> String {
    if json {
        let mut obj = Map::new();
        obj.insert("t_ms".into(), Value::from(ms(t)));
        obj.insert("event".into(), Value::from(event.kind));
        obj.insert("text".into(), Value::from(event.line.as_str()));
        for (k, v) in &event.fields {
            obj.insert(k.clone(), v.clone());
        }
        let mut s = Value::Object(obj).to_string();
        s.push('\n');
        s
    } else {
        let mut s = format!("[{:>10.3}ms] {}\n", ms(t), event.line);
        for d in &event.detail {
            s.push_str("               ");
            s.push_str(d);
            s.push('\n');
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_and_json_rendering() {
        let e = Event::new("frame", "send SETTINGS")
            .field("type", "SETTINGS")
            .detail("[MAX_CONCURRENT_STREAMS(0x03): 100]");
        let text = render(Duration::from_micros(1234), &e, false);
        assert!(text.starts_with("[     1.234ms] send SETTINGS\n"), "{text}");
        assert!(text.contains("MAX_CONCURRENT_STREAMS"));
        let json = render(Duration::from_micros(1234), &e, true);
        let v: Value = serde_json::from_str(json.trim()).expect("json");
        assert_eq!(v["event"], "frame");
        assert_eq!(v["type"], "SETTINGS");
        assert_eq!(v["t_ms"], 1.234);
        assert_eq!(v["text"], "send SETTINGS");
    }
}
