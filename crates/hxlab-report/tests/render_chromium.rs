//! report.html as a reader sees it: rendered by real headless Chromium at 1400 px. A script
//! added to a copy of the report (the report itself has none) inspects the laid-out page:
//! every SVG has a non-zero size, no legend box intersects a plotting area, the verdict comes
//! before the first chart; and `--screenshot` produces a PNG of the page's width.

mod common;

use hxlab_report::export::HtmlExporter;
use hxlab_report::{Exporter, FactorLevels, Report};
use hxlab_testkit::require_peer;
use std::path::Path;
use std::process::Command;

/// The fixture with a categorical factor added (two profiles), so the page has grouped
/// categorical panels, numeric panels and percentile plots.
fn report() -> Report {
    let (mut meta, records) = common::experiment();
    let mut all = Vec::new();
    for (profile, scale) in [("none", 1.0), ("Regular 4G", 3.0)] {
        for r in &records {
            let mut r = r.clone();
            r.factors.insert("profile".into(), profile.into());
            r.cell = format!("{} profile={profile}", r.cell);
            if let Some(res) = r.result.as_mut() {
                res.duration_s *= scale;
            }
            all.push(r);
        }
    }
    meta.factors.push(FactorLevels {
        name: "profile".into(),
        levels: vec!["none".into(), "Regular 4G".into()],
    });
    Report::build(meta, all)
}

const CHECK: &str = r#"<script>
(function () {
  const problems = [];
  const svgs = Array.from(document.querySelectorAll('svg'));
  for (const s of svgs) {
    const b = s.getBoundingClientRect();
    if (!(b.width > 0 && b.height > 0)) problems.push('empty svg ' + (s.id || s.className.baseVal));
  }
  const overlap = (a, b) => a.left < b.right && b.left < a.right && a.top < b.bottom && b.top < a.bottom;
  let pairs = 0;
  for (const s of svgs) {
    const legends = Array.from(s.querySelectorAll('.legend')).map(g => g.getBoundingClientRect());
    const plots = Array.from(s.querySelectorAll('.plot-area, svg.waterfall > g.plot')).map(g => g.getBoundingClientRect());
    for (const l of legends) for (const p of plots) {
      pairs++;
      if (overlap(l, p)) problems.push('legend over plot in ' + s.id);
    }
  }
  const verdict = document.getElementById('verdict');
  const firstChart = document.querySelector('svg.chart');
  if (!verdict || !firstChart || !(verdict.compareDocumentPosition(firstChart) & Node.DOCUMENT_POSITION_FOLLOWING)) problems.push('verdict is not before the charts');
  const panels = document.querySelectorAll('.plot-area').length;
  document.body.setAttribute('data-check', JSON.stringify({svgs: svgs.length, panels: panels, pairs: pairs, problems: problems}));
})();
</script>"#;

fn chromium(chromium: &Path, args: &[&str]) -> (bool, String, String) {
    let out = Command::new("timeout")
        .arg("90")
        .arg(chromium)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            "--window-size=1400,3000",
        ])
        .args(args)
        .output()
        .expect("run chromium");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn report_html_lays_out_in_chromium_with_legends_outside_the_plots() {
    let Some(bin) = require_peer("chromium") else {
        return;
    };
    let dir = std::env::temp_dir().join(format!("hxlab-render-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let html = HtmlExporter.render(&report()).expect("render");
    assert!(!html.contains("<script"), "the report itself has no script");
    let checked = html.replace("</body>", &format!("{CHECK}</body>"));
    let page = dir.join("checked.html");
    std::fs::write(&page, checked).expect("write page");
    let url = format!("file://{}", page.display());
    let (ok, dom, err) = chromium(&bin, &["--dump-dom", &url]);
    assert!(ok, "chromium --dump-dom failed: {err}");
    let attr = dom
        .split("data-check=\"")
        .nth(1)
        .and_then(|s| s.split('"').next())
        .unwrap_or_else(|| panic!("no data-check in the DOM: {}", &dom[..dom.len().min(500)]))
        .replace("&quot;", "\"");
    let v: serde_json::Value = serde_json::from_str(&attr).expect("check result is JSON");
    assert_eq!(v["problems"], serde_json::json!([]), "{v}");
    // delay and profile charts (2 + 2 panels), latency and TTFB percentiles (4 + 4 panels).
    assert_eq!(v["svgs"], 4, "{v}");
    assert_eq!(v["panels"], 12, "{v}");
    assert_eq!(
        v["pairs"], 12,
        "every panel's plot area checked against its chart's legend: {v}"
    );

    let shot = dir.join("report.png");
    let (ok, _, err) = chromium(
        &bin,
        &[
            &format!("--screenshot={}", shot.display()),
            &format!("file://{}", page.display()),
        ],
    );
    assert!(ok, "chromium --screenshot failed: {err}");
    let png = std::fs::read(&shot).expect("screenshot written");
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n", "a PNG");
    let width = u32::from_be_bytes([png[16], png[17], png[18], png[19]]);
    assert_eq!(width, 1400);
    // A page of text and charts, not a blank image (a white 1400×3000 PNG is ~10 KB).
    assert!(png.len() > 40_000, "{} bytes", png.len());
    let _ = std::fs::remove_dir_all(&dir);
}
