//! A page where priorities decide the answer, in real Chromium behind WebPageTest's 4G
//! (9 Mbit/s, 170 ms RTT), from `hxlab serve --dir` under each scheduler. The HTML asks
//! first for 2 MB of low-priority data (two `fetchpriority=low` preloads in its head), then,
//! 60 kB further down the document, for a render-blocking stylesheet (u=0) and a font (u=1)
//! that the page's one heading, its Largest Contentful Paint, needs. The heading can paint
//! only once the stylesheet and the font are in, so:
//! - `rfc9218` sends them ahead of the bulk: the lowest LCP;
//! - `round-robin` shares the link three ways while they load: later;
//! - `fifo` sends them after the 2 MB: later by about 2 MB at 9 Mbit/s (1.8 s).
//!
//! Asserted on h2 and h3 on the medians of 3 runs: rfc9218 < round-robin < fifo, and fifo
//! later than rfc9218 by at least half of one bulk's transmission time (in quiet runs here
//! every run under one scheduler beat every run under the next; a loaded machine can
//! disturb one run).

mod common;

use common::{hxlab, page_report_of, run_with_timeout};
use hxlab_testkit::require_peer;
use std::process::Command;
use std::time::Duration;

const BULK: usize = 1_000_000;
/// WebPageTest's 4G downlink, bytes per ms.
const RATE: f64 = 9_000.0 / 8.0;

fn write_site(dir: &std::path::Path) {
    let www = dir.join("www");
    std::fs::create_dir_all(&www).unwrap();
    let mut rng = hxlab_core::SplitMix64::new(7);
    let mut bytes = |n: usize| -> Vec<u8> { (0..n).map(|_| rng.next_u64() as u8).collect() };
    std::fs::write(www.join("big1.bin"), bytes(BULK)).unwrap();
    std::fs::write(www.join("big2.bin"), bytes(BULK)).unwrap();
    std::fs::write(www.join("font.woff2"), bytes(60_000)).unwrap();
    let css = format!(
        "/* {} */\n@font-face {{ font-family: Hx; src: url(font.woff2) format('woff2'); font-display: block; }}\nh1 {{ font-family: Hx, sans-serif; font-size: 64px; }}\n",
        "x".repeat(100_000)
    );
    std::fs::write(www.join("style.css"), css).unwrap();
    let html = format!(
        "<!doctype html><html><head><meta charset=utf-8><title>priorities</title><link rel=icon href=\"data:,\">\n\
         <link rel=preload href=big1.bin as=fetch crossorigin fetchpriority=low>\n\
         <link rel=preload href=big2.bin as=fetch crossorigin fetchpriority=low>\n\
         </head><body>\n<!-- {} -->\n\
         <link rel=stylesheet href=style.css>\n\
         <link rel=preload href=font.woff2 as=font type=font/woff2 crossorigin>\n\
         <h1>The heading is the largest paint</h1></body></html>\n",
        "p".repeat(60_000)
    );
    std::fs::write(www.join("index.html"), html).unwrap();
}

/// The LCPs (ms) of `runs` loads of the page over `proto` from a server under `scheduler`.
fn lcps(dir: &std::path::Path, scheduler: &str, proto: &str, runs: u32) -> Vec<f64> {
    let www = dir.join("www");
    let www = www.to_str().expect("a UTF-8 temp path");
    let server = common::Server::start_bound(
        "0.0.0.0",
        &["--cc", "cubic", "--scheduler", scheduler, "--dir", www],
    );
    let r = &server.ready;
    let url = format!("https://127.0.0.1:{}/static/index.html", r.tls.port());
    let (code, out, err) = run_with_timeout(
        Command::new(hxlab()).args([
            "page",
            &url,
            "--proto",
            proto,
            "--profile",
            "wpt:4G",
            "--runs",
            &runs.to_string(),
            "--spki",
            &r.spki_sha256,
            "--json",
            "-",
        ]),
        Duration::from_secs(300),
    );
    assert_eq!(code, Some(0), "{scheduler} {proto}: {err}");
    let report = page_report_of(&out).expect("page JSON");
    report
        .runs
        .iter()
        .map(|run| {
            let m = common::measured(run);
            // The heading waited for the stylesheet and the font, which were sent with the
            // priorities Chromium gave them.
            let css = m.resources.iter().find(|x| x.url.ends_with("style.css"));
            assert_eq!(
                css.and_then(|c| c.priority_header.as_deref()),
                Some("u=0"),
                "{scheduler} {proto}: the stylesheet's priority header"
            );
            m.lcp_ms.expect("LCP")
        })
        .collect()
}

fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

#[test]
fn lcp_follows_the_scheduler_on_a_page_where_priority_matters() {
    if !common::require_root("the link (network namespaces, TUN devices)")
        || require_peer("chromium").is_none()
    {
        return;
    }
    let dir = common::tempfile_dir::TempDir::new("hxlab-page-priorities");
    write_site(dir.path());
    for proto in ["h2", "h3"] {
        let rfc = lcps(dir.path(), "rfc9218", proto, 3);
        let rr = lcps(dir.path(), "round-robin", proto, 3);
        let fifo = lcps(dir.path(), "fifo", proto, 3);
        let what = format!("{proto}: rfc9218 {rfc:?}, round-robin {rr:?}, fifo {fifo:?}");
        // Medians, so one run disturbed by the machine does not decide.
        let (rfc, rr, fifo) = (median(&rfc), median(&rr), median(&fifo));
        assert!(rfc < rr && rr < fifo, "{what}");
        // Under fifo at least one of the two bulks (1 MB, 0.9 s at 9 Mbit/s) goes ahead of
        // the stylesheet; half of that is the bound.
        let bulk_ms = BULK as f64 / RATE;
        assert!(
            fifo - rfc >= bulk_ms / 2.0,
            "{what}: fifo is not later by the bulk's time ({bulk_ms:.0} ms)"
        );
    }
}
