//! HAR 1.2 (<http://www.softwareishard.com/blog/har-12-spec/>) from the DevTools Network
//! events of one page load, in the shape Chromium's own "Save all as HAR" writes.

use crate::collected::RequestRecord;
use serde_json::{json, Value};

/// Builds the HAR log of one run.
pub(crate) fn build(
    browser: &str,
    url: &str,
    records: &[RequestRecord],
    nav: &Value,
    fcp_ms: Option<f64>,
) -> Value {
    let started = records.first().map(|r| r.wall_time).unwrap_or(0.0);
    let page_timing = |key: &str| nav.get(key).and_then(Value::as_f64).unwrap_or(-1.0);
    let mut page_timings = json!({
        "onContentLoad": page_timing("domContentLoadedEventStart"),
        "onLoad": page_timing("loadEventStart"),
    });
    if let Some(f) = fcp_ms {
        page_timings["_firstContentfulPaint"] = json!(f);
    }
    let entries: Vec<Value> = records.iter().map(entry).collect();
    let (name, version) = browser.split_once(' ').unwrap_or((browser, ""));
    json!({
        "log": {
            "version": "1.2",
            "creator": { "name": "hxlab", "version": env!("CARGO_PKG_VERSION") },
            "browser": { "name": name, "version": version },
            "pages": [{
                "startedDateTime": iso8601(started),
                "id": "page_1",
                "title": url,
                "pageTimings": page_timings,
            }],
            "entries": entries,
        }
    })
}

fn headers(v: Option<&Value>) -> Vec<Value> {
    v.and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .flat_map(|(name, value)| {
                    // CDP joins repeated headers with newlines; HAR lists each one.
                    let value = value.as_str().unwrap_or("").to_string();
                    value
                        .split('\n')
                        .map(|one| json!({ "name": name, "value": one }))
                        .collect::<Vec<_>>()
                })
                .collect()
        })
        .unwrap_or_default()
}

fn query_string(url: &str) -> Vec<Value> {
    let Some((_, q)) = url.split_once('?') else {
        return Vec::new();
    };
    let q = q.split('#').next().unwrap_or("");
    q.split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (n, v) = p.split_once('=').unwrap_or((p, ""));
            json!({ "name": n, "value": v })
        })
        .collect()
}

fn f(v: &Value, key: &str) -> f64 {
    v.get(key).and_then(Value::as_f64).unwrap_or(-1.0)
}

fn entry(r: &RequestRecord) -> Value {
    let resp = r.response.clone().unwrap_or(Value::Null);
    let timing = resp.get("timing").cloned().unwrap_or(Value::Null);
    let span = |a: &str, b: &str| {
        let (s, e) = (f(&timing, a), f(&timing, b));
        if s >= 0.0 && e >= s {
            e - s
        } else {
            -1.0
        }
    };
    let total = r.finished.map(|t| (t - r.started) * 1000.0).unwrap_or(0.0);
    let timings = if timing.is_null() {
        json!({ "blocked": -1, "dns": -1, "connect": -1, "send": 0, "wait": 0,
                "receive": total.max(0.0), "ssl": -1 })
    } else {
        let request_time = f(&timing, "requestTime");
        let queued = ((request_time - r.started) * 1000.0).max(0.0);
        let first = ["dnsStart", "connectStart", "sendStart"]
            .iter()
            .map(|k| f(&timing, k))
            .find(|v| *v >= 0.0)
            .unwrap_or(0.0);
        let dns = span("dnsStart", "dnsEnd");
        let connect = span("connectStart", "connectEnd");
        let send = span("sendStart", "sendEnd").max(0.0);
        let wait = (f(&timing, "receiveHeadersEnd") - f(&timing, "sendEnd")).max(0.0);
        let receive = r
            .finished
            .map(|t| ((t - request_time) * 1000.0 - f(&timing, "receiveHeadersEnd")).max(0.0))
            .unwrap_or(0.0);
        json!({ "blocked": queued + first, "dns": dns, "connect": connect, "send": send,
                "wait": wait, "receive": receive, "ssl": span("sslStart", "sslEnd") })
    };
    let time: f64 = ["blocked", "dns", "connect", "send", "wait", "receive"]
        .iter()
        .map(|k| {
            timings
                .get(*k)
                .and_then(Value::as_f64)
                .unwrap_or(0.0)
                .max(0.0)
        })
        .sum();
    let protocol = resp
        .get("protocol")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let mut e = json!({
        "pageref": "page_1",
        "startedDateTime": iso8601(r.wall_time),
        "time": time,
        "request": {
            "method": r.method,
            "url": r.url,
            "httpVersion": protocol,
            "cookies": [],
            "headers": headers(Some(&r.request_headers)),
            "queryString": query_string(&r.url),
            "headersSize": -1,
            "bodySize": 0,
        },
        "response": {
            "status": resp.get("status").and_then(Value::as_u64).unwrap_or(0),
            "statusText": resp.get("statusText").and_then(Value::as_str).unwrap_or(""),
            "httpVersion": protocol,
            "cookies": [],
            "headers": headers(resp.get("headers")),
            "content": {
                "size": content_size(&resp, r),
                "mimeType": resp.get("mimeType").and_then(Value::as_str).unwrap_or("x-unknown"),
            },
            "redirectURL": "",
            "headersSize": -1,
            "bodySize": -1,
            "_transferSize": r.encoded_bytes,
        },
        "cache": {},
        "timings": timings,
        "_resourceType": r.resource_type,
    });
    if let Some(ip) = resp.get("remoteIPAddress").and_then(Value::as_str) {
        e["serverIPAddress"] = json!(ip.trim_start_matches('[').trim_end_matches(']'));
    }
    if let Some(id) = resp.get("connectionId").and_then(Value::as_f64) {
        e["connection"] = json!(format!("{}", id as u64));
    }
    if let Some(err) = &r.error {
        // Where Chrome DevTools' HAR export puts it: on the response, whose status is 0
        // when the request got no answer.
        e["response"]["_error"] = json!(err);
    }
    // As DevTools' own HAR export has it.
    if !r.priority.is_empty() {
        e["_priority"] = json!(r.priority);
    }
    add_body_and_redirect(&mut e, r);
    e
}

/// `content.size`: the body's decoded length (HAR 1.2), 0 for a response that has no body
/// (1xx, 204, 304, and a redirect whose body nobody read); never the bytes on the wire,
/// which include the head.
fn content_size(resp: &Value, r: &RequestRecord) -> u64 {
    let status = resp.get("status").and_then(Value::as_u64).unwrap_or(0);
    let bodiless = matches!(status, 100..=199 | 204 | 304)
        || ((300..=399).contains(&status) && r.body.is_none())
        || r.method.eq_ignore_ascii_case("HEAD");
    if bodiless {
        0
    } else {
        r.data_decoded
    }
}

/// The recorded body (`content.text`, base64 when binary) and, for a 3xx, `redirectURL`.
fn add_body_and_redirect(e: &mut Value, r: &RequestRecord) {
    if let Some((text, base64)) = &r.body {
        let content = &mut e["response"]["content"];
        content["text"] = json!(text);
        content["size"] = json!(if *base64 {
            // Decoded length of padded base64.
            (text.len() / 4 * 3)
                .saturating_sub(text.bytes().rev().take_while(|b| *b == b'=').count())
        } else {
            text.len()
        });
        if *base64 {
            content["encoding"] = json!("base64");
        }
    }
    let status = e["response"]["status"].as_u64().unwrap_or(0);
    if (300..400).contains(&status) {
        let location = e["response"]["headers"]
            .as_array()
            .and_then(|hs| {
                hs.iter().find(|h| {
                    h["name"]
                        .as_str()
                        .is_some_and(|n| n.eq_ignore_ascii_case("location"))
                })
            })
            .and_then(|h| h["value"].as_str())
            .map(str::to_string);
        if let Some(l) = location {
            e["response"]["redirectURL"] = json!(l);
        }
    }
}

/// Seconds since the Unix epoch as `YYYY-MM-DDTHH:MM:SS.mmmZ`.
pub(crate) fn iso8601(unix_s: f64) -> String {
    let ms_total = if unix_s.is_finite() && unix_s > 0.0 {
        (unix_s * 1000.0).round() as i64
    } else {
        0
    };
    let (days, ms_of_day) = (
        ms_total.div_euclid(86_400_000),
        ms_total.rem_euclid(86_400_000),
    );
    // Howard Hinnant's days-to-civil algorithm.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    let (h, m, s, ms) = (
        ms_of_day / 3_600_000,
        ms_of_day / 60_000 % 60,
        ms_of_day / 1000 % 60,
        ms_of_day % 1000,
    );
    format!("{year:04}-{month:02}-{day:02}T{h:02}:{m:02}:{s:02}.{ms:03}Z")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_dates() {
        assert_eq!(iso8601(0.0), "1970-01-01T00:00:00.000Z");
        assert_eq!(iso8601(951_782_400.5), "2000-02-29T00:00:00.500Z");
        assert_eq!(iso8601(1_795_216_917.25), "2026-11-20T23:21:57.250Z");
    }

    #[test]
    fn content_size_is_the_decoded_body_and_zero_without_one() {
        let r = RequestRecord {
            method: "GET".into(),
            encoded_bytes: 412,
            data_decoded: 0,
            ..RequestRecord::default()
        };
        // A bodiless 301: its wire bytes are the head alone.
        assert_eq!(content_size(&json!({"status": 301}), &r), 0);
        assert_eq!(content_size(&json!({"status": 304}), &r), 0);
        let page = RequestRecord {
            data_decoded: 5120,
            encoded_bytes: 1800,
            ..r.clone()
        };
        assert_eq!(content_size(&json!({"status": 200}), &page), 5120);
        let head = RequestRecord {
            method: "HEAD".into(),
            ..page
        };
        assert_eq!(content_size(&json!({"status": 200}), &head), 0);
    }

    #[test]
    fn priorities_come_from_the_browser_events_and_go_into_the_har() {
        use crate::cdp::Event;
        use crate::collected::Collected;
        let ev = |method: &str, params: Value| Event {
            method: method.into(),
            params,
            session_id: None,
        };
        let mut c = Collected::default();
        // The headers that went on the wire may come before the request itself.
        c.on_event(&ev(
            "Network.requestWillBeSentExtraInfo",
            json!({"requestId": "7", "headers": {":path": "/a.png", "Priority": "u=4, i"}}),
        ))
        .unwrap();
        c.on_event(&ev(
            "Network.requestWillBeSent",
            json!({"requestId": "7", "timestamp": 1.0, "wallTime": 1.7e9, "type": "Image",
                "request": {"url": "https://h/a.png", "method": "GET", "initialPriority": "Low"}}),
        ))
        .unwrap();
        assert_eq!(c.records[0].priority, "Low");
        c.on_event(&ev(
            "Network.resourceChangedPriority",
            json!({"requestId": "7", "newPriority": "High", "timestamp": 1.1}),
        ))
        .unwrap();
        let r = &c.records[0];
        assert_eq!(
            (r.priority.as_str(), r.priority_header.as_deref()),
            ("High", Some("u=4, i"))
        );
        let e = entry(r);
        assert_eq!(e["_priority"], "High");
    }

    #[test]
    fn splits_query_strings() {
        let q = query_string("https://h/page?n=3&size=10#x");
        assert_eq!(q.len(), 2);
        assert_eq!(q[1]["name"], "size");
        assert_eq!(q[1]["value"], "10");
    }
}
