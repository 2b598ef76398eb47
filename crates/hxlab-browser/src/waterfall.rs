//! A resource's phases from the browser's own timing, and a page run as a
//! [`Waterfall`] for reports to draw.
//!
//! CDP's `response.timing` (on `Network.responseReceived`) gives `requestTime` in monotonic
//! seconds and, relative to it in ms, `dnsStart/End`, `connectStart/End` (TLS included),
//! `sslStart/End`, `sendStart/End` and `receiveHeadersEnd`; -1 means "did not happen". With
//! `Network.requestWillBeSent`'s timestamp (the request issued) and `Network.loadingFinished`'s
//! (the last byte), that is every phase of the load.

use crate::collected::RequestRecord;
use hxlab_core::waterfall::{Phases, Span};
use serde_json::Value;

/// The phases of one request, in ms since `nav_start` (monotonic seconds). A request without
/// a response timing (failed before one, served from memory) has none.
pub(crate) fn phases(r: &RequestRecord, nav_start: f64) -> Phases {
    // Nothing of the page happens before the navigation: a few µs of clock skew between the
    // request's timestamp and its requestTime are not a phase. The browser's clock has µs
    // resolution; more digits would only be noise in the JSON.
    let to_ms = |t_s: f64| (((t_s - nav_start) * 1000.0).max(0.0) * 1000.0).round() / 1000.0;
    let Some(timing) = r.response.as_ref().and_then(|v| v.get("timing")) else {
        return Phases::default();
    };
    let Some(request_time) = timing.get("requestTime").and_then(Value::as_f64) else {
        return Phases::default();
    };
    let base = to_ms(request_time);
    let at = |key: &str| {
        timing
            .get(key)
            .and_then(Value::as_f64)
            .filter(|v| *v >= 0.0)
            .map(|v| ((base + v) * 1000.0).round() / 1000.0)
    };
    let span = |a: Option<f64>, b: Option<f64>| Span::new(a?, b?);
    let dns = span(at("dnsStart"), at("dnsEnd"));
    let tls = span(at("sslStart"), at("sslEnd"));
    // connectEnd includes the TLS handshake; the connect phase stops where TLS starts, and a
    // QUIC handshake that is all TLS has no connect phase of its own.
    let connect = match tls {
        Some(t) => span(at("connectStart"), Some(t.start_ms)).filter(|c| c.len_ms() > 0.0),
        None => span(at("connectStart"), at("connectEnd")),
    };
    let request = span(at("sendStart"), at("sendEnd"));
    let headers_end = at("receiveHeadersEnd");
    let wait = span(at("sendEnd"), headers_end);
    let download = span(headers_end, r.finished.map(to_ms));
    let first = [dns, connect, tls, request]
        .iter()
        .flatten()
        .map(|s| s.start_ms)
        .reduce(f64::min)
        .or(headers_end)
        .unwrap_or(base);
    Phases {
        queued: Span::new(to_ms(r.started), first),
        dns,
        connect,
        tls,
        request,
        wait,
        download,
    }
}

#[cfg(test)]
mod tests {
    use crate::cdp::Event;
    use crate::collected::Collected;
    use crate::load::build_run;
    use crate::{PageConfig, Proto};
    use hxlab_core::waterfall::{Phase, Span};
    use serde_json::{json, Value};

    fn event(method: &str, params: Value) -> Event {
        Event {
            method: method.into(),
            params,
            session_id: None,
        }
    }

    /// `Network.requestWillBeSent` of a GET.
    fn sent(id: &str, timestamp: f64, kind: &str, url: &str) -> Event {
        event(
            "Network.requestWillBeSent",
            json!({ "requestId": id, "timestamp": timestamp, "wallTime": 1.7e9, "type": kind,
                "request": { "url": url, "method": "GET" } }),
        )
    }

    /// `Network.loadingFinished` with the bytes the response took on the wire.
    fn finished(id: &str, timestamp: f64, bytes: u64) -> Event {
        event(
            "Network.loadingFinished",
            json!({ "requestId": id, "timestamp": timestamp, "encodedDataLength": bytes }),
        )
    }

    /// What Chromium sends for a page and one image: a fresh TLS connection for the page, a
    /// reused one for the image, and a request that fails.
    fn captured() -> Vec<Event> {
        vec![
            sent("1", 100.000, "Document", "https://h:8443/"),
            event(
                "Network.responseReceived",
                json!({ "requestId": "1", "response": { "protocol": "h2", "status": 200,
                "connectionId": 3, "connectionReused": false, "timing": { "requestTime": 100.002,
                "dnsStart": -1, "dnsEnd": -1, "connectStart": 1.0, "connectEnd": 9.0,
                "sslStart": 3.0, "sslEnd": 9.0, "sendStart": 9.5, "sendEnd": 9.75,
                "receiveHeadersEnd": 20.0 } } }),
            ),
            finished("1", 100.030, 900),
            sent("2", 100.040, "Image", "https://h:8443/a.png"),
            event(
                "Network.responseReceived",
                json!({ "requestId": "2", "response": { "protocol": "h2", "status": 200,
                "connectionId": 3, "connectionReused": true, "timing": { "requestTime": 100.045,
                "dnsStart": -1, "dnsEnd": -1, "connectStart": -1, "connectEnd": -1,
                "sslStart": -1, "sslEnd": -1, "sendStart": 0.5, "sendEnd": 0.5,
                "receiveHeadersEnd": 10.0 } } }),
            ),
            finished("2", 100.070, 5000),
            sent("3", 100.050, "Script", "https://h:8443/gone.js"),
            event(
                "Network.loadingFailed",
                json!({ "requestId": "3", "timestamp": 100.060, "errorText": "net::ERR_FAILED" }),
            ),
            event("Page.loadEventFired", json!({})),
        ]
    }

    fn close(span: Option<Span>, want: (f64, f64)) {
        let s = span.expect("phase present");
        assert!(
            (s.start_ms - want.0).abs() < 1e-6 && (s.end_ms - want.1).abs() < 1e-6,
            "{s:?} != {want:?}"
        );
    }

    #[test]
    fn phases_come_from_the_response_timing() {
        let mut seen = Collected::default();
        for e in captured() {
            seen.on_event(&e).expect("event");
        }
        let perf = json!({ "nav": { "responseStart": 21.0, "domContentLoadedEventStart": 35.0,
            "loadEventStart": 72.0 }, "paint": [{ "name": "first-contentful-paint", "startTime": 40.0 }] });
        let cfg = PageConfig::new("https://h:8443/", Proto::H2);
        let run = build_run(&cfg, "Chromium 1".into(), 1, &seen, &perf);

        let doc = run.resources[0].phases;
        close(doc.queued, (0.0, 3.0));
        assert_eq!(doc.dns, None);
        close(doc.connect, (3.0, 5.0));
        close(doc.tls, (5.0, 11.0));
        close(doc.request, (11.5, 11.75));
        close(doc.wait, (11.75, 22.0));
        close(doc.download, (22.0, 30.0));

        let img = run.resources[1].phases;
        close(img.queued, (40.0, 45.5));
        assert_eq!((img.connect, img.tls), (None, None));
        close(img.wait, (45.5, 55.0));
        close(img.download, (55.0, 70.0));

        assert!(run.resources[2].phases.is_empty());

        let w = run.waterfall();
        assert_eq!(w.rows.len(), 3);
        assert_eq!(w.rows[1].label, "/a.png");
        assert!(w.rows[1].connection_reused && !w.rows[0].connection_reused);
        assert!(w.rows[2].failed());
        assert!((w.rows[2].end_ms.unwrap_or(0.0) - 60.0).abs() < 1e-6);
        let names: Vec<&str> = w.marks.iter().map(|m| m.name.as_str()).collect();
        assert_eq!(names, ["TTFB", "FCP", "DCL", "load"]);
        assert_eq!(w.mark("load"), Some(72.0));
        // Phases follow each other in order.
        for row in &w.rows {
            let starts: Vec<f64> = Phase::ALL
                .iter()
                .filter_map(|p| row.phases.get(*p))
                .map(|s| s.start_ms)
                .collect();
            assert!(starts.windows(2).all(|w| w[0] <= w[1]), "{starts:?}");
        }
    }

    #[test]
    fn a_quic_handshake_is_all_tls() {
        let r = crate::collected::RequestRecord {
            started: 1.0,
            response: Some(json!({ "timing": { "requestTime": 1.0, "connectStart": 0.0,
                "connectEnd": 4.0, "sslStart": 0.0, "sslEnd": 4.0, "sendStart": 4.0,
                "sendEnd": 4.0, "receiveHeadersEnd": 9.0 } })),
            finished: Some(1.010),
            ..Default::default()
        };
        let p = super::phases(&r, 1.0);
        assert_eq!(p.connect, None);
        close(p.tls, (0.0, 4.0));
        close(p.queued, (0.0, 0.0));
        close(p.download, (9.0, 10.0));
    }
}
