//! Largest Contentful Paint and Cumulative Layout Shift, as the page's own performance
//! observers report them.
//!
//! [`OBSERVER_SCRIPT`] is installed with `Page.addScriptToEvaluateOnNewDocument`, so it runs
//! in every new document before the page's own scripts: two buffered `PerformanceObserver`s
//! keep the latest `largest-contentful-paint` entry and every `layout-shift` entry without
//! recent input. The load reads them after the load event and the visual settle;
//! [`cumulative_layout_shift`] turns the shifts into CLS as Chrome defines it.

use serde_json::Value;

/// Most layout shifts the observer keeps (a page shifting more than this is broken anyway).
const MAX_SHIFTS: usize = 10_000;

/// A session window ends when the next shift comes more than this after the last one (ms).
const SESSION_GAP_MS: f64 = 1000.0;
/// A session window is at most this long (ms).
const SESSION_MAX_MS: f64 = 5000.0;

/// The observers, installed before any page script runs.
pub(crate) const OBSERVER_SCRIPT: &str = r#"(() => {
  if (window.__hxlabVitals) return;
  const v = { lcp: null, lcpSize: 0, shifts: [] };
  Object.defineProperty(window, '__hxlabVitals', { value: v, enumerable: false });
  try {
    new PerformanceObserver(list => {
      for (const e of list.getEntries()) { v.lcp = e.startTime; v.lcpSize = e.size; }
    }).observe({ type: 'largest-contentful-paint', buffered: true });
  } catch (e) {}
  try {
    new PerformanceObserver(list => {
      for (const e of list.getEntries()) {
        if (!e.hadRecentInput && v.shifts.length < 10000) v.shifts.push([e.startTime, e.value]);
      }
    }).observe({ type: 'layout-shift', buffered: true });
  } catch (e) {}
})();"#;

/// LCP and CLS of one page load.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Vitals {
    /// Largest Contentful Paint, ms after the navigation started.
    pub lcp_ms: Option<f64>,
    /// Cumulative Layout Shift; `None` when the observer did not run.
    pub cls: Option<f64>,
}

/// Reads `{"lcp": ms|null, "shifts": [[ms, value], …]}` (the observer's state); `Null` (no
/// observer ran) gives no figures.
pub(crate) fn parse(v: &Value) -> Vitals {
    if !v.is_object() {
        return Vitals::default();
    }
    let lcp_ms = v
        .get("lcp")
        .and_then(Value::as_f64)
        .filter(|t| t.is_finite() && *t >= 0.0);
    let shifts: Vec<(f64, f64)> = v
        .get("shifts")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .take(MAX_SHIFTS)
                .filter_map(|s| Some((s.get(0)?.as_f64()?, s.get(1)?.as_f64()?)))
                .filter(|(t, x)| t.is_finite() && x.is_finite() && *x >= 0.0)
                .collect()
        })
        .unwrap_or_default();
    Vitals {
        lcp_ms,
        cls: Some(cumulative_layout_shift(&shifts)),
    }
}

/// CLS as Chrome defines it: shifts (start ms, score) are grouped into session windows (a
/// window ends at a gap of more than 1 s or when it would grow beyond 5 s); CLS is the
/// largest window's sum. 0 without shifts.
pub(crate) fn cumulative_layout_shift(shifts: &[(f64, f64)]) -> f64 {
    let mut sorted = shifts.to_vec();
    sorted.sort_by(|a, b| a.0.total_cmp(&b.0));
    let (mut best, mut window) = (0.0f64, 0.0f64);
    let (mut window_start, mut last) = (f64::NEG_INFINITY, f64::NEG_INFINITY);
    for (t, score) in sorted {
        if t - last > SESSION_GAP_MS || t - window_start > SESSION_MAX_MS {
            window = 0.0;
            window_start = t;
        }
        window += score;
        last = t;
        best = best.max(window);
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn cls_is_the_largest_session_window() {
        assert_eq!(cumulative_layout_shift(&[]), 0.0);
        // One window: gaps under 1 s.
        let one = cumulative_layout_shift(&[(100.0, 0.1), (900.0, 0.2), (1800.0, 0.05)]);
        assert!((one - 0.35).abs() < 1e-12, "{one}");
        // A gap over 1 s starts a new window; the larger one counts.
        let two = cumulative_layout_shift(&[(0.0, 0.1), (500.0, 0.1), (2000.0, 0.15)]);
        assert!((two - 0.2).abs() < 1e-12, "{two}");
        // A window is at most 5 s long even without gaps: shifts every 900 ms.
        let steady: Vec<(f64, f64)> = (0..10).map(|i| (f64::from(i) * 900.0, 0.1)).collect();
        let capped = cumulative_layout_shift(&steady);
        assert!((capped - 0.6).abs() < 1e-12, "{capped}");
        // Order of arrival does not matter.
        let shuffled = cumulative_layout_shift(&[(2000.0, 0.15), (0.0, 0.1), (500.0, 0.1)]);
        assert!((shuffled - 0.2).abs() < 1e-12);
    }

    #[test]
    fn parses_the_observer_state() {
        let v = parse(&json!({ "lcp": 123.5, "shifts": [[10.0, 0.25], ["bad"], [20.0, -1.0]] }));
        assert_eq!(v.lcp_ms, Some(123.5));
        assert_eq!(v.cls, Some(0.25));
        let none = parse(&json!({ "lcp": null, "shifts": [] }));
        assert_eq!((none.lcp_ms, none.cls), (None, Some(0.0)));
        assert_eq!(parse(&Value::Null), Vitals::default());
    }
}
