//! One view of the page in an open tab: the screencast on, navigate, collect the Network and
//! Page events and the painted frames until the load has ended and the picture has settled,
//! then read navigation, paint, LCP and CLS from the page.

use crate::cdp::{Cdp, Event};
use crate::collected::Collected;
use crate::visual::{self, CapturedFrame};
use crate::{vitals, BrowserError, PageConfig, PageRun};
use serde_json::{json, Value};
use std::time::Duration;

/// How long requests may stay open after the load event before they count as unfinished.
pub(crate) const AFTER_LOAD_SETTLE: Duration = Duration::from_secs(5);

/// After the load, the picture counts as settled when no frame came for this long…
const VISUAL_QUIET: Duration = Duration::from_millis(500);
/// …or, for a page that never stops painting (an animation), this long after the load.
const VISUAL_SETTLE_MAX: Duration = Duration::from_secs(3);

/// Frames kept per view; once full, each new frame replaces the last one kept, so the final
/// picture is always there.
const MAX_FRAMES: usize = 400;

/// Screencast frames are scaled down to at most this size: enough for the histograms and the
/// filmstrip, small enough to decode quickly and keep in the JSON.
const FRAME_MAX_WIDTH: u32 = 480;
const FRAME_MAX_HEIGHT: u32 = 300;
/// JPEG quality of the frames.
const FRAME_QUALITY: u32 = 70;

/// What a run keeps of its time limit for after the load: the visual settle, the timing
/// read and the browser's close. A page whose load event has not fired by then is measured
/// as it is (unless `strict`): its open requests unfinished, its largest paint if it had one.
const AFTER_LOAD_RESERVE: Duration = Duration::from_secs(10);

/// How long `about:blank` may take to load between the first and the repeat view.
pub(crate) const BLANK_LOAD_LIMIT: Duration = Duration::from_secs(5);

/// Reads navigation and paint timing, the time origin and the LCP/CLS observer's state once
/// the load event has ended (when `waitLoad`: it fired) and the first contentful paint is
/// known (or 3 s have passed: a page may paint nothing contentful). A function of
/// `waitLoad`, called by [`timing_expression`].
const TIMING_SCRIPT: &str = r#"(waitLoad => new Promise(resolve => {
  const t0 = performance.now();
  (function check() {
    const nav = performance.getEntriesByType('navigation')[0];
    const paint = performance.getEntriesByType('paint');
    const fcp = paint.find(p => p.name === 'first-contentful-paint');
    if ((nav && (nav.loadEventEnd > 0 || !waitLoad) && fcp) || performance.now() - t0 > 3000) {
      resolve(JSON.stringify({
        nav: nav ? nav.toJSON() : null,
        paint: paint.map(p => ({ name: p.name, startTime: p.startTime })),
        timeOrigin: performance.timeOrigin,
        vitals: window.__hxlabVitals || null,
        resources: performance.getEntriesByType('resource').slice(0, 5000)
          .map(e => ({ name: e.name, protocol: e.nextHopProtocol })),
      }));
    } else {
      setTimeout(check, 10);
    }
  })();
})"#;

/// The timing read: [`TIMING_SCRIPT`] waiting for the end of the load event when it fired
/// (a load the wait gave up on has no end to wait for).
pub(crate) fn timing_expression(load_fired: bool) -> String {
    format!("{TIMING_SCRIPT})({load_fired})")
}

/// The tab a view runs in.
pub(crate) struct Tab<'a> {
    /// Its CDP session.
    pub session: &'a str,
    /// Its target id (for crash events that arrive outside the session).
    pub target_id: &'a str,
}

/// What one view collected: the events, the page's timing, and the frames as
/// (epoch seconds, base64 JPEG).
pub(crate) struct ViewData {
    pub seen: Collected,
    pub perf: Value,
    pub frames: Vec<(f64, String)>,
}

/// A failed navigation as its error: DevTools names the failure only by Chromium's net
/// error name (`net::ERR_CERT_AUTHORITY_INVALID`), so the certificate errors are told apart
/// here, once, by that name's `ERR_CERT` prefix.
fn navigation_error(err: &str, url: &str) -> BrowserError {
    let text = format!("{err} ({url})");
    let name = err.strip_prefix("net::").unwrap_or(err);
    if name.starts_with("ERR_CERT") {
        BrowserError::Certificate(text)
    } else {
        BrowserError::Navigation(text)
    }
}

/// When to stop waiting for a load event that has not come, from now. Without `--strict` a
/// load event that never comes (a resource that hangs) does not cost the run: the wait ends
/// in time to measure what the page showed.
pub(crate) fn load_deadline(cfg: &PageConfig) -> Option<tokio::time::Instant> {
    (!cfg.strict)
        .then(|| cfg.timeout.checked_sub(AFTER_LOAD_RESERVE))
        .flatten()
        .filter(|d| !d.is_zero())
        .map(|d| tokio::time::Instant::now() + d)
}

/// Loads `cfg.url` in `tab` and collects everything one view measures.
pub(crate) async fn load_view(
    cfg: &PageConfig,
    cdp: &mut Cdp,
    tab: &Tab<'_>,
) -> Result<ViewData, BrowserError> {
    let s = Some(tab.session);
    cdp.call(
        "Page.startScreencast",
        json!({ "format": "jpeg", "quality": FRAME_QUALITY, "maxWidth": FRAME_MAX_WIDTH,
                "maxHeight": FRAME_MAX_HEIGHT, "everyNthFrame": 1 }),
        s,
    )
    .await?;
    let nav = cdp
        .call("Page.navigate", json!({ "url": cfg.url }), s)
        .await?;
    if let Some(err) = nav.get("errorText").and_then(Value::as_str) {
        if !err.is_empty() {
            return Err(navigation_error(err, &cfg.url));
        }
    }
    let mut seen = Collected::default();
    let mut frames = Vec::new();
    let load_deadline = load_deadline(cfg);
    until_loaded(
        cdp,
        tab,
        &mut seen,
        &mut frames,
        cfg.collect_bodies,
        load_deadline,
    )
    .await?;
    until_settled(cdp, tab, &mut frames).await?;

    let timing = cdp
        .call(
            "Runtime.evaluate",
            json!({ "expression": timing_expression(seen.load_fired), "awaitPromise": true,
                    "returnByValue": true }),
            s,
        )
        .await?;
    cdp.call("Page.stopScreencast", json!({}), s).await?;
    if let Some(exc) = timing.get("exceptionDetails") {
        return Err(BrowserError::Protocol(format!(
            "reading performance timing: {}",
            exc.get("text").and_then(Value::as_str).unwrap_or("")
        )));
    }
    let text = timing
        .get("result")
        .and_then(|r| r.get("value"))
        .and_then(Value::as_str)
        .unwrap_or("{}");
    let perf: Value = serde_json::from_str(text)
        .map_err(|e| BrowserError::Protocol(format!("performance timing: {e}")))?;
    Ok(ViewData { seen, perf, frames })
}

/// Collects events until the load event has fired and every request has ended (requests
/// still open [`AFTER_LOAD_SETTLE`] after the load, long polls or stuck streams, are
/// recorded as unfinished instead of holding the run until its timeout), or until
/// `load_deadline` when the load event has not fired by then (the requests still open are
/// unfinished). With `collect_bodies`, each response's body is read as its request
/// finishes (for `--record`).
async fn until_loaded(
    cdp: &mut Cdp,
    tab: &Tab<'_>,
    seen: &mut Collected,
    frames: &mut Vec<(f64, String)>,
    collect_bodies: bool,
    load_deadline: Option<tokio::time::Instant>,
) -> Result<(), BrowserError> {
    let mut settle_deadline: Option<tokio::time::Instant> = load_deadline;
    let mut settling = false;
    while !(seen.load_fired && seen.all_done()) {
        if seen.load_fired && !settling {
            settling = true;
            settle_deadline = Some(tokio::time::Instant::now() + AFTER_LOAD_SETTLE);
        }
        let e = match settle_deadline {
            Some(d) => match tokio::time::timeout_at(d, cdp.next_event()).await {
                Ok(e) => e?,
                Err(_) => {
                    seen.mark_unfinished();
                    break;
                }
            },
            None => cdp.next_event().await?,
        };
        if e.session_id.as_deref() == Some(tab.session) {
            if !on_frame(cdp, tab, &e, frames).await? {
                seen.on_event(&e)?;
                if collect_bodies && e.method == "Network.loadingFinished" {
                    seen.fetch_body(cdp, &e.params, Some(tab.session)).await?;
                }
            }
        } else {
            check_target(&e, tab)?;
        }
    }
    Ok(())
}

/// Keeps taking frames after the load until none came for [`VISUAL_QUIET`] (at most
/// [`VISUAL_SETTLE_MAX`]), so the last frame is the page as it ends up.
async fn until_settled(
    cdp: &mut Cdp,
    tab: &Tab<'_>,
    frames: &mut Vec<(f64, String)>,
) -> Result<(), BrowserError> {
    let hard = tokio::time::Instant::now() + VISUAL_SETTLE_MAX;
    let mut quiet = tokio::time::Instant::now() + VISUAL_QUIET;
    loop {
        let until = quiet.min(hard);
        let e = match tokio::time::timeout_at(until, cdp.next_event()).await {
            Ok(e) => e?,
            Err(_) => return Ok(()),
        };
        if e.session_id.as_deref() == Some(tab.session) {
            if on_frame(cdp, tab, &e, frames).await? {
                quiet = tokio::time::Instant::now() + VISUAL_QUIET;
            } else if e.method == "Inspector.targetCrashed" {
                return Err(BrowserError::Crashed("the page's renderer crashed".into()));
            }
        } else {
            check_target(&e, tab)?;
        }
    }
}

/// Takes a screencast frame (and acknowledges it, or the browser sends no more); false for
/// any other event.
async fn on_frame(
    cdp: &mut Cdp,
    tab: &Tab<'_>,
    e: &Event,
    frames: &mut Vec<(f64, String)>,
) -> Result<bool, BrowserError> {
    if e.method != "Page.screencastFrame" {
        return Ok(false);
    }
    let p = &e.params;
    let data = p.get("data").and_then(Value::as_str).unwrap_or("");
    let at = p
        .get("metadata")
        .and_then(|m| m.get("timestamp"))
        .and_then(Value::as_f64)
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs_f64())
                .unwrap_or(0.0)
        });
    if !data.is_empty() {
        let frame = (at, data.to_string());
        if frames.len() < MAX_FRAMES {
            frames.push(frame);
        } else if let Some(last) = frames.last_mut() {
            *last = frame;
        }
    }
    if let Some(id) = p.get("sessionId").and_then(Value::as_u64) {
        cdp.call(
            "Page.screencastFrameAck",
            json!({ "sessionId": id }),
            Some(tab.session),
        )
        .await?;
    }
    Ok(true)
}

/// A crash or detach of the tab, reported outside its session, ends the run.
fn check_target(e: &Event, tab: &Tab<'_>) -> Result<(), BrowserError> {
    if e.method == "Target.targetCrashed" || e.method == "Target.detachedFromTarget" {
        let id = e.params.get("targetId").and_then(Value::as_str);
        if id == Some(tab.target_id) || e.method == "Target.detachedFromTarget" {
            return Err(BrowserError::Crashed(format!("page target: {}", e.method)));
        }
    }
    Ok(())
}

/// Navigates the tab to `about:blank` and waits for it to load (at most
/// [`BLANK_LOAD_LIMIT`]), dropping the events of the view before: the repeat view then starts
/// from a blank page, as a returning visitor's tab would.
pub(crate) async fn blank(cdp: &mut Cdp, tab: &Tab<'_>) -> Result<(), BrowserError> {
    let s = Some(tab.session);
    cdp.call("Page.navigate", json!({ "url": "about:blank" }), s)
        .await?;
    let deadline = tokio::time::Instant::now() + BLANK_LOAD_LIMIT;
    loop {
        let e = match tokio::time::timeout_at(deadline, cdp.next_event()).await {
            Ok(e) => e?,
            Err(_) => return Ok(()),
        };
        if e.session_id.as_deref() == Some(tab.session) {
            if e.method == "Page.loadEventFired" {
                return Ok(());
            }
        } else {
            check_target(&e, tab)?;
        }
    }
}

/// Adds what the frames and the observers measured to a run: LCP, CLS, Speed Index, first
/// visual change, visually complete and the filmstrip. Frame times are taken relative to
/// the page's `performance.timeOrigin`, the zero of every navigation timing.
pub(crate) fn add_page_metrics(run: &mut PageRun, perf: &Value, frames: &[(f64, String)]) {
    let v = vitals::parse(perf.get("vitals").unwrap_or(&Value::Null));
    run.lcp_ms = v.lcp_ms;
    run.cls = v.cls;
    let Some(origin_ms) = perf.get("timeOrigin").and_then(Value::as_f64) else {
        return;
    };
    let mut captured: Vec<CapturedFrame> = frames
        .iter()
        .map(|(at_s, data)| CapturedFrame {
            at_ms: at_s * 1000.0 - origin_ms,
            jpeg_base64: data.clone(),
        })
        .collect();
    captured.sort_by(|a, b| a.at_ms.total_cmp(&b.at_ms));
    let m = visual::analyse(&captured);
    let round = |v: Option<f64>| v.map(|x| (x * 10.0).round() / 10.0);
    run.speed_index_ms = round(m.speed_index_ms);
    run.first_visual_change_ms = round(m.first_visual_change_ms);
    run.visually_complete_ms = round(m.visually_complete_ms);
    run.filmstrip = m.filmstrip;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn certificate_errors_are_their_own_variant() {
        let url = "https://127.0.0.1:8443/";
        for name in [
            "net::ERR_CERT_AUTHORITY_INVALID",
            "net::ERR_CERT_COMMON_NAME_INVALID",
            "net::ERR_CERTIFICATE_TRANSPARENCY_REQUIRED",
        ] {
            let e = navigation_error(name, url);
            assert!(matches!(e, BrowserError::Certificate(_)), "{name}: {e:?}");
            assert_eq!(e.to_string(), format!("navigation failed: {name} ({url})"));
        }
        let e = navigation_error("net::ERR_CONNECTION_REFUSED", url);
        assert!(matches!(e, BrowserError::Navigation(_)), "{e:?}");
    }
}
