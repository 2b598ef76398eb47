//! A BiDi session on a started Firefox: one view (and its repeat view) of the page, measured
//! with the same rules as Chromium's (view.rs): wait for the load and for open requests,
//! then read navigation, paint and LCP from the page with the same script.

use super::records::BidiRecords;
use crate::bidi::Bidi;
use crate::view::{self, ViewData, AFTER_LOAD_SETTLE, BLANK_LOAD_LIMIT};
use crate::{vitals, BrowserError, PageConfig, PageRun, View};
use serde_json::{json, Value};

/// The events a view listens to.
const EVENTS: [&str; 6] = [
    "network.beforeRequestSent",
    "network.responseStarted",
    "network.responseCompleted",
    "network.fetchError",
    "browsingContext.domContentLoaded",
    "browsingContext.load",
];

/// Most response bytes a recording keeps per response (`network.addDataCollector`).
const MAX_BODY: u64 = 64 * 1024 * 1024;

/// What `session.new` said about the browser: "Firefox 153.8.0" and its major version.
struct Version {
    browser: String,
    major: u32,
}

async fn new_session(cfg: &PageConfig, bidi: &mut Bidi) -> Result<Version, BrowserError> {
    // acceptInsecureCerts only for -k: otherwise the origin is trusted through the NSS store.
    let session = bidi
        .call(
            "session.new",
            json!({ "capabilities": { "alwaysMatch": { "acceptInsecureCerts": cfg.insecure } } }),
        )
        .await?;
    let caps = session.get("capabilities").cloned().unwrap_or(Value::Null);
    let version = caps
        .get("browserVersion")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    Ok(Version {
        major: version
            .split('.')
            .next()
            .and_then(|m| m.parse().ok())
            .unwrap_or(0),
        browser: format!("Firefox {version}"),
    })
}

/// Drives one browser: a session, the first view (or a returning visitor's), the repeat view
/// when asked for.
pub(crate) async fn drive(
    cfg: &PageConfig,
    bidi: &mut Bidi,
    which: View,
) -> Result<PageRun, BrowserError> {
    let version = new_session(cfg, bidi).await?;
    bidi.call("session.subscribe", json!({ "events": EVENTS }))
        .await?;
    let collector = if cfg.collect_bodies {
        let c = bidi
            .call(
                "network.addDataCollector",
                json!({ "dataTypes": ["response"], "maxEncodedDataSize": MAX_BODY }),
            )
            .await?;
        c.get("collector")
            .and_then(Value::as_str)
            .map(str::to_string)
    } else {
        None
    };
    let tree = bidi
        .call("browsingContext.getTree", json!({ "maxDepth": 0 }))
        .await?;
    let context = tree
        .get("contexts")
        .and_then(|c| c.get(0))
        .and_then(|c| c.get("context"))
        .and_then(Value::as_str)
        .ok_or_else(|| BrowserError::Protocol("Firefox has no browsing context".into()))?
        .to_string();
    // The same observers as Chromium's, installed before any page script.
    bidi.call(
        "script.addPreloadScript",
        json!({ "functionDeclaration": format!("() => {{ {} }}", vitals::OBSERVER_SCRIPT) }),
    )
    .await?;
    let tab = Tab {
        context: &context,
        collector: collector.as_deref(),
    };
    let first = load_view(cfg, bidi, &tab).await?;
    let repeat = if cfg.repeat_view && which == View::First {
        blank(bidi, &context).await?;
        Some(load_view(cfg, bidi, &tab).await?)
    } else {
        None
    };
    let mut run = finish(cfg, &version, &first, which);
    if let Some(repeat) = repeat {
        run.repeat_view = Some(Box::new(finish(cfg, &version, &repeat, View::Repeat)));
    }
    Ok(run)
}

/// A view's run, built as Chromium's is; what Firefox cannot measure is left out, not 0.
fn finish(cfg: &PageConfig, v: &Version, data: &ViewData, which: View) -> PageRun {
    let mut run = crate::load::build_view(cfg, &v.browser, v.major, data, which);
    // No `layout-shift` entries in Firefox: the observer's empty list is not a CLS of 0.
    run.cls = None;
    run
}

/// The browsing context a view runs in, and the data collector keeping bodies (`--record`).
struct Tab<'a> {
    context: &'a str,
    collector: Option<&'a str>,
}

/// Navigates, collects the network events until the load has ended, and reads the page's
/// timing.
async fn load_view(
    cfg: &PageConfig,
    bidi: &mut Bidi,
    tab: &Tab<'_>,
) -> Result<ViewData, BrowserError> {
    // "none": the answer comes at once and the events tell the rest, so a load event that
    // never comes is handled by the same deadlines as Chromium's.
    let nav = bidi
        .call(
            "browsingContext.navigate",
            json!({ "context": tab.context, "url": cfg.url, "wait": "none" }),
        )
        .await
        .map_err(|e| navigation_error(e, &cfg.url))?;
    let navigation = nav
        .get("navigation")
        .and_then(Value::as_str)
        .map(str::to_string);
    let mut seen = BidiRecords::of_navigation(navigation);
    let gave_up = until_loaded(cfg, bidi, tab, &mut seen).await?;
    if let Some(err) = seen.document_error() {
        return Err(navigation_error(
            BrowserError::Protocol(err.to_string()),
            &cfg.url,
        ));
    }
    let timing = bidi
        .call(
            "script.evaluate",
            json!({ "expression": view::timing_expression(seen.load_fired),
                    "target": { "context": tab.context }, "awaitPromise": true }),
        )
        .await?;
    let text = match timing.get("type").and_then(Value::as_str) {
        Some("success") => timing
            .get("result")
            .and_then(|r| r.get("value"))
            .and_then(Value::as_str)
            .unwrap_or("{}")
            .to_string(),
        _ => {
            let why = timing
                .get("exceptionDetails")
                .and_then(|d| d.get("text"))
                .and_then(Value::as_str)
                .unwrap_or("no result");
            return Err(BrowserError::Protocol(format!(
                "reading performance timing: {why}"
            )));
        }
    };
    let perf: Value = serde_json::from_str(&text)
        .map_err(|e| BrowserError::Protocol(format!("performance timing: {e}")))?;
    seen.fill_protocols(perf.get("resources").unwrap_or(&Value::Null));
    Ok(ViewData {
        seen: seen.into_collected(gave_up),
        perf,
        frames: Vec::new(),
    })
}

/// A failed navigation command as its error: Firefox names a certificate failure
/// (`SEC_ERROR_UNKNOWN_ISSUER`, `SSL_ERROR_BAD_CERT_DOMAIN`, `MOZILLA_PKIX_ERROR_*`) in the
/// message; those are [`BrowserError::Certificate`], so the caller can say how to trust
/// the origin.
fn navigation_error(e: BrowserError, url: &str) -> BrowserError {
    let BrowserError::Protocol(text) = e else {
        return e;
    };
    let cert = ["SEC_ERROR_", "SSL_ERROR_BAD_CERT", "MOZILLA_PKIX_ERROR_"]
        .iter()
        .any(|k| text.contains(k));
    if cert {
        BrowserError::Certificate(format!("{text} ({url})"))
    } else {
        BrowserError::Navigation(format!("{text} ({url})"))
    }
}

/// Collects events until the load event has fired and every request has ended (or
/// [`AFTER_LOAD_SETTLE`] after the load, or the load deadline), reading each body as its
/// response completes when recording. True when it gave up on requests still open.
async fn until_loaded(
    cfg: &PageConfig,
    bidi: &mut Bidi,
    tab: &Tab<'_>,
    seen: &mut BidiRecords,
) -> Result<bool, BrowserError> {
    let mut deadline = view::load_deadline(cfg);
    let mut settling = false;
    while !(seen.load_fired && seen.all_done()) {
        if seen.load_fired && !settling {
            settling = true;
            deadline = Some(tokio::time::Instant::now() + AFTER_LOAD_SETTLE);
        }
        let e = match deadline {
            Some(d) => match tokio::time::timeout_at(d, bidi.next_event()).await {
                Ok(e) => e?,
                Err(_) => return Ok(true),
            },
            None => bidi.next_event().await?,
        };
        seen.on_event(&e, tab.context);
        if e.method == "network.responseCompleted" {
            if let Some(collector) = tab.collector {
                fetch_body(bidi, collector, &e.params, seen).await?;
            }
        }
    }
    Ok(false)
}

/// Reads a completed response's body from the data collector; one it no longer has is left
/// out (the HAR then has no text for it).
async fn fetch_body(
    bidi: &mut Bidi,
    collector: &str,
    params: &Value,
    seen: &mut BidiRecords,
) -> Result<(), BrowserError> {
    let Some(id) = params
        .get("request")
        .and_then(|r| r.get("request"))
        .and_then(Value::as_str)
    else {
        return Ok(());
    };
    let hop = params
        .get("redirectCount")
        .and_then(Value::as_u64)
        .unwrap_or(0);
    let got = bidi
        .call(
            "network.getData",
            json!({ "dataType": "response", "collector": collector, "request": id }),
        )
        .await;
    match got {
        Ok(v) => {
            let bytes = v.get("bytes").cloned().unwrap_or(Value::Null);
            let base64 = bytes.get("type").and_then(Value::as_str) == Some("base64");
            let text = bytes
                .get("value")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string();
            seen.set_body(id, hop, (text, base64));
            Ok(())
        }
        // "no such network data" and the like: no body to keep.
        Err(BrowserError::Protocol(_)) => Ok(()),
        Err(e) => Err(e),
    }
}

/// Navigates to `about:blank` and waits for it (at most [`BLANK_LOAD_LIMIT`]): the repeat view
/// starts from a blank page, as in Chromium.
async fn blank(bidi: &mut Bidi, context: &str) -> Result<(), BrowserError> {
    let navigate = bidi.call(
        "browsingContext.navigate",
        json!({ "context": context, "url": "about:blank", "wait": "complete" }),
    );
    match tokio::time::timeout(BLANK_LOAD_LIMIT, navigate).await {
        Ok(r) => r.map(|_| ()),
        Err(_) => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn certificate_failures_are_their_own_variant() {
        let url = "https://a.hxlab.test:8443/";
        let e = navigation_error(
            BrowserError::Protocol(
                "browsingContext.navigate: unknown error: Error: SEC_ERROR_UNKNOWN_ISSUER".into(),
            ),
            url,
        );
        assert!(matches!(e, BrowserError::Certificate(_)), "{e:?}");
        let e = navigation_error(
            BrowserError::Protocol("browsingContext.navigate: NS_ERROR_CONNECTION_REFUSED".into()),
            url,
        );
        assert!(matches!(e, BrowserError::Navigation(_)), "{e:?}");
        let e = navigation_error(
            BrowserError::Timeout(std::time::Duration::from_secs(1)),
            url,
        );
        assert!(matches!(e, BrowserError::Timeout(_)));
    }
}
