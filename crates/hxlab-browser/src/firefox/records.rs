//! WebDriver BiDi network events as the [`RequestRecord`]s every run, waterfall and HAR is
//! built from (collected.rs), so the rest of the crate sees one page-load model.
//!
//! BiDi names a request by `request.request` and keeps that id across redirects (with
//! `redirectCount` going up); its timings are wall-clock milliseconds (0: did not happen).
//! A record's `response` takes the DevTools shape the builders read: `protocol`, `status`,
//! `headers` as an object, and `timing` with `requestTime` in seconds and every phase in ms
//! after it. BiDi names no connection: a request that had a connect phase opened one (its
//! own id), one without reused one (id 0, left out of the count).

use crate::cdp::Event;
use crate::collected::{Collected, RequestRecord};
use serde_json::{json, Map, Value};
use std::collections::HashMap;

/// The network events of one navigation in one browsing context.
#[derive(Default)]
pub(crate) struct BidiRecords {
    records: Vec<RequestRecord>,
    /// (request id, redirect count) → index in `records`.
    index: HashMap<(String, u64), usize>,
    /// Connections seen opening so far (the ids handed out).
    connections: u64,
    pub load_fired: bool,
    pub dcl_fired: bool,
    /// The navigation these records belong to (`browsingContext.navigate`'s answer): a load
    /// event of another (the `about:blank` before a repeat view, still queued) is not its.
    navigation: Option<String>,
}

/// Milliseconds since the epoch as seconds, or None for BiDi's "did not happen" (0).
fn secs(ms: Option<f64>) -> Option<f64> {
    ms.filter(|v| *v > 0.0).map(|v| v / 1000.0)
}

fn num(v: &Value, key: &str) -> Option<f64> {
    v.get(key).and_then(Value::as_f64)
}

/// BiDi's header list `[{name, value: {type, value}}]` as CDP's object (repeats joined by
/// newlines).
fn header_object(list: Option<&Value>) -> Value {
    let mut out = Map::new();
    for h in list.and_then(Value::as_array).into_iter().flatten() {
        let name = h.get("name").and_then(Value::as_str).unwrap_or("");
        let value = h
            .get("value")
            .and_then(|v| v.get("value"))
            .and_then(Value::as_str)
            .unwrap_or("");
        if name.is_empty() {
            continue;
        }
        match out.get_mut(name) {
            Some(Value::String(prev)) => {
                prev.push('\n');
                prev.push_str(value);
            }
            _ => {
                out.insert(name.to_string(), Value::String(value.to_string()));
            }
        }
    }
    Value::Object(out)
}

/// The request's `priority` header as sent.
fn priority_header(request: &Value) -> Option<String> {
    request
        .get("headers")
        .and_then(Value::as_array)?
        .iter()
        .find(|h| {
            h.get("name")
                .and_then(Value::as_str)
                .is_some_and(|n| n.eq_ignore_ascii_case("priority"))
        })
        .and_then(|h| h.get("value")?.get("value")?.as_str())
        .map(str::to_string)
}

/// BiDi's timings as CDP's `response.timing`: `requestTime` in seconds, phases in ms after
/// it, -1 for a phase that did not happen. Returns it and whether a connection was opened.
fn cdp_timing(t: &Value) -> (Value, bool) {
    let base = num(t, "requestTime").unwrap_or(0.0);
    let rel = |key: &str| match num(t, key) {
        Some(v) if v > 0.0 && base > 0.0 => ((v - base) * 1000.0).round() / 1000.0,
        _ => -1.0,
    };
    let connect_start = rel("connectStart");
    let connect_end = rel("connectEnd");
    let opened = connect_start >= 0.0 && connect_end > connect_start;
    let timing = json!({
        "requestTime": base / 1000.0,
        "dnsStart": rel("dnsStart"),
        "dnsEnd": rel("dnsEnd"),
        "connectStart": if opened { connect_start } else { -1.0 },
        "connectEnd": if opened { connect_end } else { -1.0 },
        "sslStart": if opened { rel("tlsStart") } else { -1.0 },
        "sslEnd": if opened { rel("tlsEnd") } else { -1.0 },
        "sendStart": rel("requestStart"),
        "sendEnd": rel("requestStart"),
        "receiveHeadersEnd": rel("responseStart"),
    });
    (timing, opened)
}

impl BidiRecords {
    /// Records for the navigation BiDi named `navigation` (None: any).
    pub(crate) fn of_navigation(navigation: Option<String>) -> BidiRecords {
        BidiRecords {
            navigation,
            ..BidiRecords::default()
        }
    }

    /// Whether a page event belongs to this navigation.
    fn ours(&self, p: &Value) -> bool {
        match &self.navigation {
            Some(id) => p.get("navigation").and_then(Value::as_str) == Some(id.as_str()),
            None => true,
        }
    }

    /// Takes one event of `context` (events of other contexts, e.g. a new-tab page, are not
    /// the page's and are left out).
    pub(crate) fn on_event(&mut self, e: &Event, context: &str) {
        let p = &e.params;
        if p.get("context").and_then(Value::as_str) != Some(context) {
            return;
        }
        match e.method.as_str() {
            "network.beforeRequestSent" => self.on_request(p),
            "network.responseStarted" => self.on_response(p, false),
            "network.responseCompleted" => self.on_response(p, true),
            "network.fetchError" => self.on_error(p),
            "browsingContext.domContentLoaded" => self.dcl_fired |= self.ours(p),
            "browsingContext.load" => self.load_fired |= self.ours(p),
            _ => {}
        }
    }

    /// The key of an event's request, and the request itself.
    fn key(p: &Value) -> Option<((String, u64), &Value)> {
        let request = p.get("request")?;
        let id = request.get("request")?.as_str()?.to_string();
        let hop = p.get("redirectCount").and_then(Value::as_u64).unwrap_or(0);
        Some(((id, hop), request))
    }

    fn on_request(&mut self, p: &Value) {
        let Some((key, request)) = Self::key(p) else {
            return;
        };
        let url = request.get("url").and_then(Value::as_str).unwrap_or("");
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            return;
        }
        let started = request
            .get("timings")
            .and_then(|t| secs(num(t, "requestTime")))
            .or_else(|| secs(num(p, "timestamp")))
            .unwrap_or(0.0);
        let destination = request
            .get("destination")
            .and_then(Value::as_str)
            .filter(|d| !d.is_empty())
            .unwrap_or("other");
        self.index.insert(key, self.records.len());
        self.records.push(RequestRecord {
            url: url.to_string(),
            method: request
                .get("method")
                .and_then(Value::as_str)
                .unwrap_or("GET")
                .to_string(),
            resource_type: resource_type(destination).to_string(),
            request_headers: header_object(request.get("headers")),
            started,
            wall_time: started,
            priority_header: priority_header(request),
            ..Default::default()
        });
    }

    fn on_response(&mut self, p: &Value, completed: bool) {
        let Some((key, request)) = Self::key(p) else {
            return;
        };
        let Some(&i) = self.index.get(&key) else {
            return;
        };
        let resp = p.get("response").cloned().unwrap_or(Value::Null);
        let timings = request.get("timings").cloned().unwrap_or(Value::Null);
        let (timing, opened) = cdp_timing(&timings);
        let known = self.records[i].response.is_some();
        let connection_id = if opened {
            // Count each connection once, on the first of the two events.
            if !known {
                self.connections += 1;
            }
            self.connections
        } else {
            0
        };
        let r = &mut self.records[i];
        if let Some(h) = priority_header(request) {
            r.priority_header = Some(h);
        }
        r.response = Some(json!({
            "url": resp.get("url").cloned().unwrap_or(Value::Null),
            "protocol": resp.get("protocol").and_then(Value::as_str).unwrap_or(""),
            "status": resp.get("status").and_then(Value::as_u64).unwrap_or(0),
            "statusText": resp.get("statusText").cloned().unwrap_or(Value::Null),
            "mimeType": resp.get("mimeType").cloned().unwrap_or(Value::Null),
            "headers": header_object(resp.get("headers")),
            "fromDiskCache": resp.get("fromCache").and_then(Value::as_bool).unwrap_or(false),
            "connectionId": connection_id,
            "connectionReused": !opened,
            "timing": timing,
        }));
        r.served_from_cache = resp
            .get("fromCache")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        if completed {
            r.finished = secs(num(&timings, "responseEnd"))
                .or_else(|| secs(num(p, "timestamp")))
                .or(Some(r.started));
            r.encoded_bytes = num(&resp, "bytesReceived").unwrap_or(0.0).max(0.0) as u64;
            r.data_decoded = num(&resp, "bodySize").unwrap_or(0.0).max(0.0) as u64;
        }
    }

    fn on_error(&mut self, p: &Value) {
        let Some((key, _)) = Self::key(p) else {
            return;
        };
        if let Some(&i) = self.index.get(&key) {
            let r = &mut self.records[i];
            r.error = Some(
                p.get("errorText")
                    .and_then(Value::as_str)
                    .unwrap_or("failed")
                    .to_string(),
            );
            r.finished
                .get_or_insert(secs(num(p, "timestamp")).unwrap_or(r.started));
        }
    }

    /// Keeps a response body (for `--record`) on the request that finished.
    pub(crate) fn set_body(&mut self, request_id: &str, redirects: u64, body: (String, bool)) {
        if let Some(&i) = self.index.get(&(request_id.to_string(), redirects)) {
            self.records[i].body = Some(body);
        }
    }

    /// Why the page's document failed, when it did (no response came for it): a failed
    /// navigation, e.g. `SEC_ERROR_UNKNOWN_ISSUER` for an untrusted certificate.
    pub(crate) fn document_error(&self) -> Option<&str> {
        let doc = self.records.first()?;
        match (&doc.error, &doc.response) {
            (Some(e), None) => Some(e),
            _ => None,
        }
    }

    /// Every request ended (or none started yet).
    pub(crate) fn all_done(&self) -> bool {
        self.records
            .iter()
            .all(|r| r.finished.is_some() || r.error.is_some())
    }

    /// The protocol of responses BiDi did not see come over the network: one served from
    /// the cache takes the protocol its URL came over in this view (BiDi says `http/1.1`
    /// for a cache hit whatever carried it); one BiDi names no protocol for takes the one
    /// Resource Timing names (`nextHopProtocol`).
    pub(crate) fn fill_protocols(&mut self, resources: &Value) {
        let fetched: HashMap<String, String> = self
            .records
            .iter()
            .filter(|r| !r.served_from_cache)
            .filter_map(|r| {
                let p = r.response.as_ref()?.get("protocol")?.as_str()?;
                (!p.is_empty()).then(|| (r.url.clone(), p.to_string()))
            })
            .collect();
        for r in self.records.iter_mut().filter(|r| r.served_from_cache) {
            if let (Some(resp), Some(p)) = (r.response.as_mut(), fetched.get(&r.url)) {
                resp["protocol"] = Value::String(p.clone());
            }
        }
        self.fill_from_resource_timing(resources);
    }

    fn fill_from_resource_timing(&mut self, resources: &Value) {
        let named: HashMap<&str, &str> = resources
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|e| {
                Some((
                    e.get("name")?.as_str()?,
                    e.get("protocol")?.as_str().filter(|p| !p.is_empty())?,
                ))
            })
            .collect();
        for r in &mut self.records {
            let Some(resp) = r.response.as_mut() else {
                continue;
            };
            if resp.get("protocol").and_then(Value::as_str) == Some("") {
                if let Some(p) = named.get(r.url.as_str()) {
                    resp["protocol"] = Value::String((*p).to_string());
                }
            }
        }
    }

    /// The records as a [`Collected`], in request order; requests still open are marked
    /// unfinished.
    pub(crate) fn into_collected(self, unfinished_open: bool) -> Collected {
        let mut c = Collected::of_records(self.records, self.load_fired, self.dcl_fired);
        if unfinished_open {
            c.mark_unfinished();
        }
        c
    }
}

/// BiDi's `destination` (Fetch's request destination) as the DevTools resource type names
/// the same kind, so tables read alike for both engines.
fn resource_type(destination: &str) -> &'static str {
    match destination {
        "document" | "iframe" | "frame" => "Document",
        "style" => "Stylesheet",
        "script" | "worker" | "sharedworker" | "serviceworker" => "Script",
        "image" => "Image",
        "font" => "Font",
        "audio" | "video" | "track" => "Media",
        "manifest" => "Manifest",
        _ => "Other",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(method: &str, params: Value) -> Event {
        Event {
            method: method.into(),
            params,
            session_id: None,
        }
    }

    fn request(id: &str, url: &str, t: Value) -> Value {
        json!({ "request": id, "url": url, "method": "GET", "destination": "image",
            "headers": [{ "name": "Priority", "value": { "type": "string", "value": "u=4" } }],
            "timings": t })
    }

    #[test]
    fn network_events_become_records_of_the_one_model() {
        let mut r = BidiRecords::default();
        let t0 = json!({ "requestTime": 1000.0, "connectStart": 0, "responseEnd": 0 });
        let fresh = json!({ "requestTime": 1000.0, "dnsStart": 1001.0, "dnsEnd": 1002.0,
            "connectStart": 1002.0, "connectEnd": 1010.0, "tlsStart": 1003.0, "tlsEnd": 1010.0,
            "requestStart": 1011.0, "responseStart": 1050.0, "responseEnd": 1060.0 });
        let reused = json!({ "requestTime": 1061.0, "requestStart": 1062.0,
            "responseStart": 1070.0, "responseEnd": 1075.0 });
        let ctx = "c1";
        r.on_event(
            &event(
                "network.beforeRequestSent",
                json!({ "context": ctx,
                "request": request("1", "https://h/a.png", t0.clone()), "timestamp": 1000 }),
            ),
            ctx,
        );
        // Another context's request (a new-tab page) is not the page's.
        r.on_event(
            &event(
                "network.beforeRequestSent",
                json!({ "context": "other",
                "request": request("9", "https://x/", t0.clone()) }),
            ),
            ctx,
        );
        r.on_event(
            &event("network.responseCompleted", json!({ "context": ctx,
                "request": request("1", "https://h/a.png", fresh),
                "response": { "protocol": "h3", "status": 200, "bytesReceived": 500,
                    "bodySize": 400, "fromCache": false,
                    "headers": [{ "name": "content-length", "value": { "type": "string", "value": "400" } }] } })),
            ctx,
        );
        r.on_event(
            &event(
                "network.beforeRequestSent",
                json!({ "context": ctx,
                "request": request("2", "https://h/b.png", t0) }),
            ),
            ctx,
        );
        assert!(!r.all_done());
        r.on_event(
            &event(
                "network.responseCompleted",
                json!({ "context": ctx,
                "request": request("2", "https://h/b.png", reused),
                "response": { "protocol": "", "status": 404, "bytesReceived": 90 } }),
            ),
            ctx,
        );
        // The same image again, from the cache: BiDi says http/1.1.
        let again = json!({ "requestTime": 1080.0 });
        r.on_event(
            &event(
                "network.beforeRequestSent",
                json!({ "context": ctx,
                "request": request("3", "https://h/a.png", again.clone()) }),
            ),
            ctx,
        );
        r.on_event(
            &event(
                "network.responseCompleted",
                json!({ "context": ctx,
                "request": request("3", "https://h/a.png", again),
                "response": { "protocol": "http/1.1", "status": 200, "fromCache": true } }),
            ),
            ctx,
        );
        r.on_event(
            &event("browsingContext.load", json!({ "context": ctx })),
            ctx,
        );
        assert!(r.all_done() && r.load_fired);
        r.fill_protocols(&json!([{ "name": "https://h/b.png", "protocol": "h3" }]));
        let c = r.into_collected(false);
        assert_eq!(c.records.len(), 3);
        let cached = c.records[2].response.as_ref().unwrap();
        assert_eq!(cached["protocol"], "h3");
        assert!(c.records[2].served_from_cache);
        let a = &c.records[0];
        assert_eq!(a.resource_type, "Image");
        assert_eq!(a.priority_header.as_deref(), Some("u=4"));
        let resp = a.response.as_ref().unwrap();
        assert_eq!(
            (resp["protocol"].as_str(), resp["connectionId"].as_u64()),
            (Some("h3"), Some(1))
        );
        assert_eq!(resp["timing"]["requestTime"], 1.0);
        assert_eq!(resp["timing"]["sslStart"], 3.0);
        assert_eq!(resp["timing"]["receiveHeadersEnd"], 50.0);
        assert_eq!(resp["headers"]["content-length"], "400");
        assert_eq!(
            (a.encoded_bytes, a.data_decoded, a.finished),
            (500, 400, Some(1.06))
        );
        let b = c.records[1].response.as_ref().unwrap();
        // No connect phase: a reused connection, and Resource Timing named the protocol.
        assert_eq!(
            (b["connectionId"].as_u64(), b["protocol"].as_str()),
            (Some(0), Some("h3"))
        );
        assert_eq!(b["timing"]["connectStart"], -1.0);
    }

    #[test]
    fn a_load_event_of_another_navigation_is_not_this_ones() {
        let mut r = BidiRecords::of_navigation(Some("n2".into()));
        // The about:blank before a repeat view, still queued when the view starts.
        r.on_event(
            &event(
                "browsingContext.load",
                json!({ "context": "c", "navigation": "n1" }),
            ),
            "c",
        );
        assert!(!r.load_fired);
        r.on_event(
            &event(
                "browsingContext.load",
                json!({ "context": "c", "navigation": "n2" }),
            ),
            "c",
        );
        assert!(r.load_fired);
    }

    #[test]
    fn a_redirect_is_two_hops_and_an_error_ends_a_request() {
        let mut r = BidiRecords::default();
        let t = json!({ "requestTime": 5.0 });
        for hop in [0, 1] {
            r.on_event(
                &event(
                    "network.beforeRequestSent",
                    json!({ "context": "c",
                    "redirectCount": hop, "request": request("7", "https://h/", t.clone()) }),
                ),
                "c",
            );
        }
        r.on_event(
            &event(
                "network.fetchError",
                json!({ "context": "c", "redirectCount": 1,
                "errorText": "NS_ERROR_NET_RESET", "timestamp": 9000,
                "request": request("7", "https://h/", t) }),
            ),
            "c",
        );
        assert!(!r.all_done());
        let c = r.into_collected(true);
        assert_eq!(c.records.len(), 2);
        assert_eq!(c.records[1].error.as_deref(), Some("NS_ERROR_NET_RESET"));
        assert!(c.records[0].unfinished);
    }
}
