//! A minimal DevTools-protocol client over Chromium's debugging pipe.
//!
//! CDP is JSON messages `{id, method, params, sessionId?}` answered by `{id, result|error}`, with
//! events `{method, params, sessionId?}` in between; on the pipe each message ends with a NUL
//! byte. One task owns both ends: [`Cdp::call`] writes a command and reads until its answer,
//! keeping the events it passes in a bounded queue that [`Cdp::next_event`] drains.

use crate::process::DevtoolsPipe;
use crate::BrowserError;
use serde_json::{json, Value};
use std::collections::VecDeque;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A single message larger than this is refused (a page load's largest is a few KiB).
const MAX_MESSAGE: usize = 32 * 1024 * 1024;
/// Bytes read from the pipe at a time.
const READ_CHUNK: usize = 64 * 1024;
/// Events queued while waiting for an answer; a page load produces a few per resource.
const MAX_QUEUED_EVENTS: usize = 200_000;

/// One event from the browser.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Event {
    pub method: String,
    pub params: Value,
    pub session_id: Option<String>,
}

pub(crate) struct Cdp {
    pipe: DevtoolsPipe,
    next_id: u64,
    buf: Vec<u8>,
    chunk: Vec<u8>,
    events: VecDeque<Event>,
}

impl Cdp {
    pub(crate) fn new(pipe: DevtoolsPipe) -> Cdp {
        Cdp {
            pipe,
            next_id: 1,
            buf: Vec::with_capacity(READ_CHUNK),
            chunk: vec![0; READ_CHUNK],
            events: VecDeque::new(),
        }
    }

    /// Sends `method` (on `session` when given) and returns its `result`.
    pub(crate) async fn call(
        &mut self,
        method: &str,
        params: Value,
        session: Option<&str>,
    ) -> Result<Value, BrowserError> {
        let id = self.next_id;
        self.next_id += 1;
        let mut msg = json!({ "id": id, "method": method, "params": params });
        if let Some(s) = session {
            msg["sessionId"] = Value::String(s.to_string());
        }
        let mut bytes = serde_json::to_vec(&msg)
            .map_err(|e| BrowserError::Protocol(format!("encode {method}: {e}")))?;
        bytes.push(0);
        self.pipe
            .to_browser
            .write_all(&bytes)
            .await
            .map_err(|e| BrowserError::Crashed(format!("writing {method} to the browser: {e}")))?;
        loop {
            let msg = self.read_message().await?;
            match msg.get("id").and_then(Value::as_u64) {
                Some(got) if got == id => {
                    if let Some(err) = msg.get("error") {
                        let text = err
                            .get("message")
                            .and_then(Value::as_str)
                            .unwrap_or("unknown error");
                        return Err(BrowserError::Protocol(format!("{method}: {text}")));
                    }
                    return Ok(msg.get("result").cloned().unwrap_or(Value::Null));
                }
                Some(_) => continue,
                None => self.queue_event(msg)?,
            }
        }
    }

    /// The next event, queued or read from the pipe.
    pub(crate) async fn next_event(&mut self) -> Result<Event, BrowserError> {
        if let Some(e) = self.events.pop_front() {
            return Ok(e);
        }
        loop {
            let msg = self.read_message().await?;
            if msg.get("id").is_none() {
                if let Some(e) = to_event(msg) {
                    return Ok(e);
                }
            }
        }
    }

    fn queue_event(&mut self, msg: Value) -> Result<(), BrowserError> {
        if let Some(e) = to_event(msg) {
            if self.events.len() >= MAX_QUEUED_EVENTS {
                return Err(BrowserError::Protocol(
                    "too many DevTools events queued".into(),
                ));
            }
            self.events.push_back(e);
        }
        Ok(())
    }

    /// Reads one NUL-terminated JSON message.
    async fn read_message(&mut self) -> Result<Value, BrowserError> {
        loop {
            if let Some(pos) = self.buf.iter().position(|&b| b == 0) {
                let parsed = serde_json::from_slice::<Value>(&self.buf[..pos]);
                self.buf.drain(..=pos);
                return parsed.map_err(|e| BrowserError::Protocol(format!("bad message: {e}")));
            }
            if self.buf.len() > MAX_MESSAGE {
                return Err(BrowserError::Protocol(
                    "DevTools message larger than 32 MiB".into(),
                ));
            }
            // A heap chunk: a 64 KiB array here would live in every future that awaits a
            // message, and nested futures would outgrow a thread's stack. Cancelling the read
            // (a timeout) leaves `buf` untouched.
            let n = self
                .pipe
                .from_browser
                .read(&mut self.chunk)
                .await
                .map_err(|e| BrowserError::Crashed(format!("reading from the browser: {e}")))?;
            if n == 0 {
                return Err(BrowserError::Crashed(
                    "the browser closed the DevTools pipe".into(),
                ));
            }
            self.buf.extend_from_slice(&self.chunk[..n]);
        }
    }
}

fn to_event(msg: Value) -> Option<Event> {
    let method = msg.get("method")?.as_str()?.to_string();
    let session_id = msg
        .get("sessionId")
        .and_then(Value::as_str)
        .map(str::to_string);
    let params = msg.get("params").cloned().unwrap_or(Value::Null);
    Some(Event {
        method,
        params,
        session_id,
    })
}
