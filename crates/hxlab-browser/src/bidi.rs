//! A minimal WebDriver BiDi client over a WebSocket (ws.rs).
//!
//! BiDi is JSON messages: a command `{id, method, params}` is answered by
//! `{type: "success", id, result}` or `{type: "error", id, error, message}`, with events
//! `{type: "event", method, params}` in between. As with CDP (cdp.rs), [`Bidi::call`] writes a
//! command and reads until its answer, keeping the events it passes in a bounded queue that
//! [`Bidi::next_event`] drains; the events have CDP's [`Event`] shape (no session).

use crate::cdp::Event;
use crate::ws::WebSocket;
use crate::BrowserError;
use serde_json::{json, Value};
use std::collections::VecDeque;

/// Events queued while waiting for an answer; a page load produces a few per resource.
const MAX_QUEUED_EVENTS: usize = 200_000;

/// One BiDi connection (one session once `session.new` has been called).
pub(crate) struct Bidi {
    socket: WebSocket,
    next_id: u64,
    events: VecDeque<Event>,
}

/// What one incoming message is.
#[derive(Debug, PartialEq)]
enum Incoming {
    /// The answer to command `id`: its result, or the error as one line.
    Answer {
        id: u64,
        outcome: Result<Value, String>,
    },
    Event(Event),
    /// A message that is neither (ignored).
    Other,
}

fn classify(msg: Value) -> Incoming {
    let id = msg.get("id").and_then(Value::as_u64);
    match (msg.get("type").and_then(Value::as_str), id) {
        (Some("success"), Some(id)) => Incoming::Answer {
            id,
            outcome: Ok(msg.get("result").cloned().unwrap_or(Value::Null)),
        },
        (Some("error"), Some(id)) => {
            let text = |k: &str| msg.get(k).and_then(Value::as_str).unwrap_or("");
            Incoming::Answer {
                id,
                outcome: Err(format!("{}: {}", text("error"), text("message"))),
            }
        }
        (Some("event"), _) => match msg.get("method").and_then(Value::as_str) {
            Some(method) => Incoming::Event(Event {
                method: method.to_string(),
                params: msg.get("params").cloned().unwrap_or(Value::Null),
                session_id: None,
            }),
            None => Incoming::Other,
        },
        _ => Incoming::Other,
    }
}

impl Bidi {
    pub(crate) fn new(socket: WebSocket) -> Bidi {
        Bidi {
            socket,
            next_id: 1,
            events: VecDeque::new(),
        }
    }

    /// Sends `method` and returns its `result`; an error answer is [`BrowserError::Protocol`]
    /// naming the method.
    pub(crate) async fn call(
        &mut self,
        method: &str,
        params: Value,
    ) -> Result<Value, BrowserError> {
        let id = self.next_id;
        self.next_id += 1;
        let msg = json!({ "id": id, "method": method, "params": params });
        let bytes = serde_json::to_vec(&msg)
            .map_err(|e| BrowserError::Protocol(format!("encode {method}: {e}")))?;
        self.socket.send_text(&bytes).await?;
        loop {
            match classify(self.read_message().await?) {
                Incoming::Answer { id: got, outcome } if got == id => {
                    return outcome.map_err(|e| BrowserError::Protocol(format!("{method}: {e}")))
                }
                Incoming::Answer { .. } | Incoming::Other => continue,
                Incoming::Event(e) => {
                    if self.events.len() >= MAX_QUEUED_EVENTS {
                        return Err(BrowserError::Protocol(
                            "too many WebDriver BiDi events queued".into(),
                        ));
                    }
                    self.events.push_back(e);
                }
            }
        }
    }

    /// The next event, queued or read from the socket.
    pub(crate) async fn next_event(&mut self) -> Result<Event, BrowserError> {
        if let Some(e) = self.events.pop_front() {
            return Ok(e);
        }
        loop {
            if let Incoming::Event(e) = classify(self.read_message().await?) {
                return Ok(e);
            }
        }
    }

    async fn read_message(&mut self) -> Result<Value, BrowserError> {
        let text = self.socket.recv_text().await?;
        serde_json::from_slice(&text)
            .map_err(|e| BrowserError::Protocol(format!("bad WebDriver BiDi message: {e}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tells_answers_errors_and_events_apart() {
        let ok = classify(json!({ "type": "success", "id": 3, "result": { "a": 1 } }));
        assert_eq!(
            ok,
            Incoming::Answer {
                id: 3,
                outcome: Ok(json!({ "a": 1 }))
            }
        );
        let err = classify(
            json!({ "type": "error", "id": 4, "error": "invalid argument",
            "message": "bad url" }),
        );
        assert_eq!(
            err,
            Incoming::Answer {
                id: 4,
                outcome: Err("invalid argument: bad url".into())
            }
        );
        match classify(
            json!({ "type": "event", "method": "network.responseCompleted",
            "params": { "x": 1 } }),
        ) {
            Incoming::Event(e) => {
                assert_eq!(e.method, "network.responseCompleted");
                assert_eq!(e.params["x"], 1);
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(classify(json!({ "type": "event" })), Incoming::Other);
        assert_eq!(classify(json!([1, 2])), Incoming::Other);
    }
}
