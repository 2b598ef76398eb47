//! A real site nobody here wrote: a page of the Python 3.11 manual (Debian's python3.11-doc,
//! Sphinx HTML with its CSS, JavaScript and images) served by nginx under three host names
//! (pages, static, images), started by the test. It is recorded with `hxlab page --record`
//! through an http:// start URL that nginx redirects to https, replayed over h1, h2 and h3
//! (exit 0, no miss, every body identical to the file nginx served), and compared with
//! `hxlab compare --har` behind two networks (a report with the verdict and a waterfall per
//! cell).

mod common;

use common::tempfile_dir::TempDir;
use common::{
    free_port, hxlab, make_cert_for, require_peer, require_root, run_with_timeout, PeerProcess,
};
use hxlab_contract::{PageReport, PageRunEntry};
use hxlab_core::page::{Outcome, PageRun};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

/// The manual Debian's python3.11-doc installs.
const MANUAL: &str = "/usr/share/doc/python3.11/html";
/// The page: Sphinx HTML with stylesheets, scripts, an SVG logo and a PNG screenshot.
const PAGE: &str = "library/tkinter.messagebox.html";
const HOSTS: [&str; 3] = ["pages.localhost", "static.localhost", "images.localhost"];

/// nginx serving the manual: `pages` the page (its asset references pointed at the other two
/// hosts), `static` the manual's `_static/`, `images` its `_images/`; a plain port that
/// redirects every request to https; HTTP/2 and HTTP/1.1 over TLS on one port.
struct Site {
    _process: PeerProcess,
    dir: TempDir,
    plain: u16,
}

impl Site {
    fn start() -> Option<Site> {
        let nginx = require_peer("nginx")?;
        if !Path::new(MANUAL).join(PAGE).exists() {
            hxlab_testkit::skip(&format!(
                "{MANUAL}/{PAGE} is missing; apt-get install python3.11-doc (or run `bash .ci/run`)"
            ));
            return None;
        }
        let dir = TempDir::new("hxlab-real-site");
        let d = dir.path();
        let san = HOSTS
            .iter()
            .map(|h| format!("DNS:{h}"))
            .collect::<Vec<_>>()
            .join(",");
        let (cert, key) = make_cert_for(d, "pages.localhost", &san)?;
        let (plain, tls) = (free_port(), free_port());
        let www = d.join("www");
        std::fs::create_dir_all(www.join("library")).expect("www");
        let html = std::fs::read_to_string(Path::new(MANUAL).join(PAGE)).expect("page");
        let html = html
            .replace(
                "\"../_static/",
                &format!("\"https://static.localhost:{tls}/_static/"),
            )
            .replace(
                "\"../_images/",
                &format!("\"https://images.localhost:{tls}/_images/"),
            );
        assert!(
            html.contains("https://images.localhost"),
            "the page lost its image"
        );
        std::fs::write(www.join(PAGE), html).expect("write page");
        let p = d.display();
        let tls_server = |name: &str, root: &str| {
            format!(
                "server {{ listen 127.0.0.1:{tls} ssl http2; server_name {name}; root {root}; \
                 ssl_protocols TLSv1.2 TLSv1.3; ssl_certificate {}; ssl_certificate_key {}; }}\n",
                cert.display(),
                key.display()
            )
        };
        let conf = format!(
            "master_process off; worker_processes 1; daemon off; error_log {p}/error.log; pid {p}/nginx.pid;\n\
             events {{ worker_connections 1024; }}\n\
             http {{ access_log off; include /etc/nginx/mime.types; default_type application/octet-stream;\n\
               client_body_temp_path {p}/b; proxy_temp_path {p}/p; fastcgi_temp_path {p}/f; uwsgi_temp_path {p}/u; scgi_temp_path {p}/s;\n\
               server {{ listen 127.0.0.1:{plain}; server_name pages.localhost; return 301 https://pages.localhost:{tls}$request_uri; }}\n\
               {}{}{}}}\n",
            tls_server("pages.localhost", &www.display().to_string()),
            tls_server("static.localhost", MANUAL),
            tls_server("images.localhost", MANUAL),
        );
        std::fs::write(d.join("nginx.conf"), conf).expect("conf");
        let mut cmd = Command::new(nginx);
        cmd.arg("-p").arg(d).arg("-c").arg(d.join("nginx.conf"));
        let process = PeerProcess::start(cmd.stdout(Stdio::null()), &[plain, tls]);
        Some(Site {
            _process: process,
            dir,
            plain,
        })
    }

    /// The file nginx served for `url` (None: not one of the site's files).
    fn file_of(&self, url: &str) -> Option<PathBuf> {
        let rest = url.strip_prefix("https://")?;
        let (authority, path) = rest.split_once('/')?;
        let path = path.split(['?', '#']).next()?;
        let host = authority.split(':').next()?;
        match host {
            "pages.localhost" => Some(self.dir.path().join("www").join(path)),
            "static.localhost" | "images.localhost" => Some(Path::new(MANUAL).join(path)),
            _ => None,
        }
    }
}

/// `hxlab page ARGS --json -` with TMPDIR=tmp; returns (exit code, the report if one was
/// written, stderr).
fn hxlab_page(
    tmp: &Path,
    args: &[&str],
    limit: Duration,
) -> (Option<i32>, Option<PageReport>, String) {
    let mut cmd = Command::new(hxlab());
    cmd.arg("page").args(args).env("TMPDIR", tmp);
    let (code, out, err) = run_with_timeout(&mut cmd, limit);
    (code, PageReport::from_json(&out).ok(), err)
}

/// The figures of a run that measured (a test failure otherwise).
fn measured(run: &PageRunEntry) -> &PageRun {
    match &run.outcome {
        Outcome::Measured(r) => r,
        Outcome::Failed(e) => panic!("run {} failed: {e}", run.run),
    }
}

/// A HAR entry's body, decoded.
fn body(e: &Value) -> Option<Vec<u8>> {
    use base64::Engine;
    let c = &e["response"]["content"];
    let text = c["text"].as_str()?;
    Some(if c["encoding"] == "base64" {
        base64::engine::general_purpose::STANDARD
            .decode(text)
            .expect("base64")
    } else {
        text.as_bytes().to_vec()
    })
}

/// FNV-1a, 64 bits: the bodies are compared by hash (and length) as the issue asks.
fn hash(b: &[u8]) -> (usize, u64) {
    let h = b.iter().fold(0xcbf2_9ce4_8422_2325_u64, |h, x| {
        (h ^ u64::from(*x)).wrapping_mul(0x100_0000_01b3)
    });
    (b.len(), h)
}

/// Every 200 body in `har` is byte for byte the file nginx serves; returns how many.
fn bodies_intact(site: &Site, har: &Path, what: &str) -> usize {
    let log: Value = serde_json::from_slice(&std::fs::read(har).expect("HAR")).expect("JSON");
    let mut n = 0;
    for e in log["log"]["entries"].as_array().expect("entries") {
        let url = e["request"]["url"].as_str().unwrap_or("");
        if e["response"]["status"] != 200 {
            continue;
        }
        let file = site
            .file_of(url)
            .unwrap_or_else(|| panic!("{what}: {url} is none of the site's"));
        let want = std::fs::read(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        let got = body(e).unwrap_or_else(|| panic!("{what}: {url} has no body"));
        assert_eq!(hash(&got), hash(&want), "{what}: body of {url}");
        n += 1;
    }
    n
}

#[test]
fn a_real_site_records_through_a_redirect_and_replays_over_h1_h2_h3() {
    if require_peer("chromium").is_none() {
        return;
    }
    let Some(site) = Site::start() else { return };
    let tmp = TempDir::new("hxlab-real-site-run");
    let har = tmp.path().join("python-doc.har");
    let start = format!("http://pages.localhost:{}/{PAGE}", site.plain);
    let (code, json, err) = hxlab_page(
        tmp.path(),
        &[
            "-k",
            &start,
            "--proto",
            "h2",
            "--runs",
            "1",
            "--timeout",
            "60s",
            "--record",
            &har.display().to_string(),
            "--json",
            "-",
        ],
        Duration::from_secs(120),
    );
    assert_eq!(code, Some(0), "record: stderr: {err}");
    let json = json.expect("a --json document");
    assert!(json.runs[0].counted(), "{:?}", measured(&json.runs[0]).flag);
    let recorded: Value =
        serde_json::from_slice(&std::fs::read(&har).expect("HAR written")).expect("JSON");
    let entries = recorded["log"]["entries"].as_array().expect("entries");
    // The redirect is recorded as the server sent it, with no body.
    let first = &entries[0];
    assert_eq!(first["request"]["url"], start.as_str());
    assert_eq!(first["response"]["status"], 301);
    assert_eq!(first["response"]["content"]["size"], 0, "{first}");
    let hosts: std::collections::BTreeSet<&str> = entries
        .iter()
        .filter_map(|e| e["request"]["url"].as_str())
        .filter_map(|u| u.split('/').nth(2)?.split(':').next())
        .collect();
    assert_eq!(hosts.len(), 3, "{hosts:?}");
    let served = bodies_intact(&site, &har, "recording");
    assert!(served >= 10, "only {served} bodies recorded");
    for (proto, want) in [("h1", "http/1.1"), ("h2", "h2"), ("h3", "h3")] {
        let again = tmp.path().join(format!("again-{proto}.har"));
        let (code, json, err) = hxlab_page(
            tmp.path(),
            &[
                "--replay",
                &har.display().to_string(),
                "--proto",
                proto,
                "--runs",
                "1",
                "--timeout",
                "60s",
                "--record",
                &again.display().to_string(),
                "--json",
                "-",
            ],
            Duration::from_secs(120),
        );
        assert_eq!(code, Some(0), "{proto}: stderr: {err}");
        let json = json.expect("a --json document");
        let entry = &json.runs[0];
        let run = measured(entry);
        assert!(entry.counted(), "{proto}: {:?}", run.flag);
        let counts = entry
            .replay
            .clone()
            .flatten()
            .expect("the run's replay counts");
        assert_eq!(counts.tally.misses, 0, "{proto}: {counts:?}");
        assert_eq!(counts.tally.near_misses, 0, "{proto}: {counts:?}");
        assert!(counts.tally.hits >= served as u64, "{proto}: {counts:?}");
        for r in &run.resources {
            if r.url.starts_with("https://") {
                assert_eq!(r.protocol, want, "{proto}: {}", r.url);
            }
        }
        assert_eq!(
            bodies_intact(&site, &again, proto),
            served,
            "{proto}: every recorded body replayed"
        );
    }
    if !require_root("hxlab compare --har behind an emulated network") {
        return;
    }
    let out = tmp.path().join("compare");
    let mut cmd = Command::new(hxlab());
    cmd.args(["compare", "--har"])
        .arg(&har)
        .args([
            "--set",
            "profile=none,Regular 4G",
            "-r",
            "2",
            "--no-progress",
            "-o",
        ])
        .arg(&out)
        .env("TMPDIR", tmp.path());
    let (code, stdout, stderr) = run_with_timeout(&mut cmd, Duration::from_secs(600));
    assert_eq!(code, Some(0), "compare --har: {stdout}\n{stderr}");
    let md = std::fs::read_to_string(out.join("report.md")).expect("report.md");
    assert!(md.contains("## Verdict"), "{md}");
    let html = std::fs::read_to_string(out.join("report.html")).expect("report.html");
    let results = std::fs::read_to_string(out.join("results.jsonl")).expect("results");
    let records: Vec<hxlab_report::Record> = results
        .lines()
        .map(|l| serde_json::from_str(l).expect("record"))
        .collect();
    assert_eq!(
        records.len(),
        3 * 2 * 2,
        "3 protocols × 2 networks × 2 repetitions"
    );
    let cells: std::collections::BTreeSet<&str> = records.iter().map(|r| r.cell.as_str()).collect();
    for r in &records {
        let replay = r.replay.as_ref().map(|o| o.tally).unwrap_or_default();
        assert_eq!(replay.misses, 0, "{}", r.cell);
        assert!(replay.hits > 0, "{}", r.cell);
        assert!(r.error.is_none(), "{}: {:?}", r.cell, r.error);
    }
    assert_eq!(cells.len(), 6, "{cells:?}");
    // One waterfall per cell: its median repetition.
    assert_eq!(
        html.matches("<figure class=\"waterfall\">").count(),
        cells.len(),
        "a waterfall per cell"
    );
    for cell in &cells {
        let escaped = cell.replace('&', "&amp;").replace('"', "&quot;");
        assert!(
            html.contains(&format!("<figcaption>{escaped} — repetition")),
            "no waterfall for {cell}"
        );
    }
}
