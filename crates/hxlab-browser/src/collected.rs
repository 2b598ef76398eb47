//! What DevTools reported during one navigation, request by request: the records that the
//! run, its waterfall and its HAR are all built from. Below the load and the view that fill
//! it, so the builders read it without reaching back into the load.

use crate::cdp::{Cdp, Event};
use crate::BrowserError;
use serde_json::{json, Value};
use std::collections::HashMap;

/// What the browser told us about one request.
#[derive(Debug, Default, Clone)]
pub(crate) struct RequestRecord {
    pub url: String,
    pub method: String,
    pub resource_type: String,
    pub request_headers: Value,
    /// Monotonic seconds (CDP `timestamp`).
    pub started: f64,
    /// Wall clock, seconds since the epoch.
    pub wall_time: f64,
    pub response: Option<Value>,
    pub finished: Option<f64>,
    pub encoded_bytes: u64,
    /// Sums over `Network.dataReceived`: bytes on the wire and body bytes after decoding.
    pub data_encoded: u64,
    pub data_decoded: u64,
    pub error: Option<String>,
    /// Still open when the page had loaded (`error` then says so too).
    pub unfinished: bool,
    /// The response body as DevTools gave it: (text, base64-encoded).
    pub body: Option<(String, bool)>,
    /// `Network.requestServedFromCache` came for it (the memory or disk cache answered).
    pub served_from_cache: bool,
    /// The browser's priority for it: `initialPriority`, then the last
    /// `Network.resourceChangedPriority`.
    pub priority: String,
    /// The `priority` header it sent (`Network.requestWillBeSentExtraInfo`'s headers, what
    /// went on the wire).
    pub priority_header: Option<String>,
}

impl RequestRecord {
    fn done(&self) -> bool {
        self.finished.is_some() || self.error.is_some()
    }
}

/// Everything collected during one navigation.
#[derive(Debug, Default)]
pub(crate) struct Collected {
    pub records: Vec<RequestRecord>,
    index: HashMap<String, usize>,
    pub load_fired: bool,
    pub dcl_fired: bool,
    pub early_hints: u32,
    /// Body text kept so far (for [`MAX_BODIES`]).
    body_bytes: u64,
    /// `priority` headers of requests whose `requestWillBeSent` has not come yet.
    early_headers: HashMap<String, String>,
}

/// Most body text (base64 included) a recording keeps in memory, as a HAR may hold.
const MAX_BODIES: u64 = 512 * 1024 * 1024;

impl Collected {
    /// Records another engine gathered (Firefox's BiDi events), in request order.
    pub(crate) fn of_records(
        records: Vec<RequestRecord>,
        load_fired: bool,
        dcl_fired: bool,
    ) -> Collected {
        Collected {
            records,
            load_fired,
            dcl_fired,
            ..Collected::default()
        }
    }

    pub(crate) fn on_event(&mut self, e: &Event) -> Result<(), BrowserError> {
        let p = &e.params;
        let req_id = p.get("requestId").and_then(Value::as_str).unwrap_or("");
        match e.method.as_str() {
            "Network.requestWillBeSent" => {
                let request = p.get("request").cloned().unwrap_or(Value::Null);
                let url = str_of(&request, "url");
                if !(url.starts_with("http://") || url.starts_with("https://")) {
                    return Ok(());
                }
                let ts = num(p, "timestamp");
                // A redirect reuses the request id: the old hop ends here, a new one begins.
                if let Some(redirect) = p.get("redirectResponse") {
                    if let Some(&i) = self.index.get(req_id) {
                        let r = &mut self.records[i];
                        r.response = Some(redirect.clone());
                        r.finished = Some(ts);
                        r.encoded_bytes = num(redirect, "encodedDataLength").max(0.0) as u64;
                    }
                }
                self.index.insert(req_id.to_string(), self.records.len());
                self.records.push(RequestRecord {
                    url,
                    method: str_of(&request, "method"),
                    resource_type: p
                        .get("type")
                        .and_then(Value::as_str)
                        .unwrap_or("Other")
                        .to_string(),
                    request_headers: request.get("headers").cloned().unwrap_or(Value::Null),
                    started: ts,
                    wall_time: num(p, "wallTime"),
                    priority: str_of(&request, "initialPriority"),
                    priority_header: self.early_headers.remove(req_id),
                    ..Default::default()
                });
            }
            "Network.requestWillBeSentExtraInfo" => {
                let value = p
                    .get("headers")
                    .and_then(Value::as_object)
                    .and_then(|h| h.iter().find(|(k, _)| k.eq_ignore_ascii_case("priority")))
                    .and_then(|(_, v)| v.as_str())
                    .map(str::to_string);
                if let Some(v) = value {
                    match self.index.get(req_id) {
                        Some(&i) => self.records[i].priority_header = Some(v),
                        // It may come before requestWillBeSent; a page's worth at most.
                        None if self.early_headers.len() < 10_000 => {
                            self.early_headers.insert(req_id.to_string(), v);
                        }
                        None => {}
                    }
                }
            }
            "Network.resourceChangedPriority" => {
                if let Some(&i) = self.index.get(req_id) {
                    self.records[i].priority = str_of(p, "newPriority");
                }
            }
            "Network.responseReceived" => {
                if let Some(&i) = self.index.get(req_id) {
                    self.records[i].response = p.get("response").cloned();
                }
            }
            "Network.loadingFinished" => {
                if let Some(&i) = self.index.get(req_id) {
                    let r = &mut self.records[i];
                    r.finished = Some(num(p, "timestamp"));
                    r.encoded_bytes = num(p, "encodedDataLength").max(0.0) as u64;
                }
            }
            "Network.dataReceived" => {
                if let Some(&i) = self.index.get(req_id) {
                    let r = &mut self.records[i];
                    r.data_encoded += num(p, "encodedDataLength").max(0.0) as u64;
                    r.data_decoded += num(p, "dataLength").max(0.0) as u64;
                }
            }
            "Network.loadingFailed" => {
                if let Some(&i) = self.index.get(req_id) {
                    let r = &mut self.records[i];
                    r.error = Some(str_of(p, "errorText"));
                    r.finished.get_or_insert(num(p, "timestamp"));
                }
            }
            "Network.requestServedFromCache" => {
                if let Some(&i) = self.index.get(req_id) {
                    self.records[i].served_from_cache = true;
                }
            }
            "Network.responseReceivedEarlyHints" => self.early_hints += 1,
            "Page.domContentEventFired" => self.dcl_fired = true,
            "Page.loadEventFired" => self.load_fired = true,
            "Inspector.targetCrashed" => {
                return Err(BrowserError::Crashed("the page's renderer crashed".into()))
            }
            "Inspector.detached" => {
                return Err(BrowserError::Crashed(format!(
                    "DevTools detached: {}",
                    str_of(p, "reason")
                )))
            }
            _ => {}
        }
        Ok(())
    }

    /// Reads the body of a request that just finished; a body DevTools no longer has (or
    /// beyond the total cap) is left out, and the HAR then says so by having no text.
    pub(crate) async fn fetch_body(
        &mut self,
        cdp: &mut Cdp,
        params: &Value,
        session: Option<&str>,
    ) -> Result<(), BrowserError> {
        let id = params
            .get("requestId")
            .and_then(Value::as_str)
            .unwrap_or("");
        let Some(&i) = self.index.get(id) else {
            return Ok(());
        };
        if self.body_bytes > MAX_BODIES {
            return Ok(());
        }
        match cdp
            .call(
                "Network.getResponseBody",
                json!({ "requestId": id }),
                session,
            )
            .await
        {
            Ok(v) => {
                let text = str_of(&v, "body");
                let base64 = v
                    .get("base64Encoded")
                    .and_then(Value::as_bool)
                    .unwrap_or(false);
                self.body_bytes += text.len() as u64;
                self.records[i].body = Some((text, base64));
                Ok(())
            }
            // "No resource with given identifier found" and the like: no body to keep.
            Err(BrowserError::Protocol(_)) => Ok(()),
            Err(e) => Err(e),
        }
    }

    pub(crate) fn mark_unfinished(&mut self) {
        for r in self.records.iter_mut().filter(|r| !r.done()) {
            r.error = Some("unfinished when the page had loaded".into());
            r.unfinished = true;
        }
    }

    pub(crate) fn all_done(&self) -> bool {
        self.records.iter().all(RequestRecord::done)
    }
}

/// A number field of a CDP value; -1 when absent (CDP's own "not measured").
pub(crate) fn num(v: &Value, key: &str) -> f64 {
    v.get(key).and_then(Value::as_f64).unwrap_or(-1.0)
}

/// A string field of a CDP value; empty when absent.
pub(crate) fn str_of(v: &Value, key: &str) -> String {
    v.get(key).and_then(Value::as_str).unwrap_or("").to_string()
}
