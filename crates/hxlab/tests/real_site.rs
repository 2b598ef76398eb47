//! A real site nobody here wrote: a page of the Python 3.11 manual (Debian's python3.11-doc,
//! Sphinx HTML with its CSS, JavaScript and images) served by nginx under three host names
//! (pages, static, images), started by the test. Like real pages it is not perfect: a script
//! fetches an API on a host that does not resolve ([`BROKEN_API`]), and the page declares
//! its icon on the asset host (`<link rel="icon">`, a file nothing else loads). It is
//! recorded with `hxlab page --record` through an http:// start URL that nginx redirects to
//! https (every run counts, the failed fetch listed beside the figures, exit 0), replayed
//! over h1, h2 and h3 (exit 0, no miss, the fetch failing again as recorded, every body
//! identical to the file nginx served; with `--strict` the run is left out), and compared
//! with `hxlab compare --har` behind two networks (a report with the verdict, LCP and load
//! in every cell, the failed fetch among the grouped problems, and a waterfall per cell).

mod common;

use common::tempfile_dir::TempDir;
use common::{
    free_port, hxlab, make_cert_for, require_peer, require_root, run_with_timeout, PeerProcess,
};
use hxlab_contract::{PageReport, PageRunEntry};
use hxlab_core::page::{Outcome, PageRun, Party};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

/// The manual Debian's python3.11-doc installs.
const MANUAL: &str = "/usr/share/doc/python3.11/html";
/// The page: Sphinx HTML with stylesheets, scripts, an SVG logo and a PNG screenshot.
const PAGE: &str = "library/tkinter.messagebox.html";
const HOSTS: [&str; 3] = ["pages.localhost", "static.localhost", "images.localhost"];
/// What the page's script fetches: a host under `.invalid` (RFC 6761), which never resolves.
const BROKEN_API: &str = "https://api.hxlab.invalid/v1/beacon?page=messagebox";

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
        // The imperfections of a real page: a third-party API that does not answer, and an
        // icon on the asset host that only the browser itself asks for.
        let declared = format!(
            "<link rel=\"shortcut icon\" type=\"image/png\" href=\"https://static.localhost:{tls}/_static/py.svg\" />"
        );
        assert!(html.contains(&declared), "the page lost its icon");
        let html = html
            .replacen(
                &declared,
                &format!("<link rel=\"icon\" type=\"image/png\" href=\"https://static.localhost:{tls}/_static/py.png\" />"),
                1,
            )
            .replacen(
                "</head>",
                &format!("<script>fetch(\"{BROKEN_API}\").catch(() => {{}});</script>\n</head>"),
                1,
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

/// The run counted the page's fetch of [`BROKEN_API`] as its one failed resource, a third
/// party's name that did not resolve.
fn broken_api_failed(run: &PageRun, what: &str) {
    let p = &run.problems;
    assert_eq!(
        (p.failed, p.http_errors, p.unfinished),
        (1, 0, 0),
        "{what}: {p:?}"
    );
    let failed = &p.first[0];
    assert_eq!(failed.url, BROKEN_API, "{what}");
    assert_eq!(failed.detail, "net::ERR_NAME_NOT_RESOLVED", "{what}");
    assert_eq!(failed.party, Party::Third, "{what}");
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
            "2",
            "--timeout",
            "60s",
            "--record",
            &har.display().to_string(),
            "--json",
            "-",
        ],
        Duration::from_secs(120),
    );
    // The failed fetch neither voids a run nor the recording.
    assert_eq!(code, Some(0), "record: stderr: {err}");
    let json = json.expect("a --json document");
    assert_eq!(json.summary.valid_runs, 2, "{:?}", json.summary.left_out);
    for entry in &json.runs {
        assert!(entry.counted(), "{:?}", measured(entry).flag);
        broken_api_failed(measured(entry), "record");
    }
    assert!(
        err.contains("1 resource failed in 2 of 2 runs: GET https://api.hxlab.invalid/"),
        "{err}"
    );
    assert!(
        err.contains("note: the recording keeps 1 request(s)"),
        "{err}"
    );
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
    assert_eq!(hosts.len(), 4, "{hosts:?}");
    // The failed fetch is kept, as Chrome's HAR keeps one: status 0 and the error.
    let failed: Vec<&Value> = entries
        .iter()
        .filter(|e| e["request"]["url"] == BROKEN_API)
        .collect();
    assert_eq!(failed.len(), 1, "{failed:?}");
    assert_eq!(failed[0]["response"]["status"], 0);
    assert_eq!(
        failed[0]["response"]["_error"], "net::ERR_NAME_NOT_RESOLVED",
        "{:?}",
        failed[0]
    );
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
        assert_eq!(counts.tally.outside, 0, "{proto}: {counts:?}");
        assert!(counts.tally.hits >= served as u64, "{proto}: {counts:?}");
        // The recorded failure fails again, the same way, and no faster path stands in.
        broken_api_failed(run, proto);
        for r in &run.resources {
            if r.url.starts_with("https://") && r.error.is_none() {
                assert_eq!(r.protocol, want, "{proto}: {}", r.url);
            }
        }
        assert_eq!(
            bodies_intact(&site, &again, proto),
            served,
            "{proto}: every recorded body replayed"
        );
    }
    // --strict keeps the old rule: the failed fetch leaves the run out, so nothing counts.
    let (code, json, err) = hxlab_page(
        tmp.path(),
        &[
            "--replay",
            &har.display().to_string(),
            "--proto",
            "h2",
            "--runs",
            "1",
            "--strict",
            "--json",
            "-",
        ],
        Duration::from_secs(120),
    );
    assert_eq!(code, Some(1), "--strict: stderr: {err}");
    let json = json.expect("a --json document");
    assert!(!json.runs[0].counted());
    let flag = measured(&json.runs[0]).flag.clone().unwrap_or_default();
    assert!(flag.contains("1 resource(s) failed"), "{flag}");
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
    // Every cell has its figures, and the failed fetch is among the grouped problems.
    assert!(!md.contains("not recorded: LCP"), "{md}");
    assert!(
        md.contains("page resources failed")
            && md.contains("1 resource failed in 2 of 2 runs: GET https://api.hxlab.invalid/"),
        "{md}"
    );
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
        assert!(r.is_clean(), "{}: {}", r.cell, r.failure_text());
        let problems = r.page_problems.clone().unwrap_or_default();
        assert_eq!(
            problems.named(),
            vec![format!("GET {BROKEN_API}")],
            "{}",
            r.cell
        );
        let extra = &r.result.as_ref().expect("a result").config.extra;
        for metric in ["lcp_ms", "load_ms"] {
            assert!(extra.contains_key(metric), "{}: no {metric}", r.cell);
        }
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

/// Records the real site in Chromium (the HAR's bodies come from Chromium, see docs/page.md)
/// and returns the recording.
fn record_in_chromium(site: &Site, tmp: &Path) -> PathBuf {
    let har = tmp.join("python-doc.har");
    let start = format!("http://pages.localhost:{}/{PAGE}", site.plain);
    let args = [
        "-k",
        start.as_str(),
        "--proto",
        "h2",
        "--runs",
        "1",
        "--record",
        &har.display().to_string(),
    ];
    let (code, _, err) = hxlab_page(tmp, &args, Duration::from_secs(120));
    assert_eq!(code, Some(0), "record: stderr: {err}");
    har
}

/// Firefox replays the recording over h1, h2 and h3: no miss, every https response that
/// came on the protocol forced, the third party's failed fetch failing again (Firefox is
/// sent to the replay server's address for every name, where nothing answers its port).
fn firefox_replays(har: &Path, tmp: &Path) {
    for (proto, want) in [("h1", "http/1.1"), ("h2", "h2"), ("h3", "h3")] {
        let args = [
            "--browser",
            "firefox",
            "--replay",
            &har.display().to_string(),
            "--proto",
            proto,
            "--runs",
            "1",
            "--json",
            "-",
        ];
        let (code, json, err) = hxlab_page(tmp, &args, Duration::from_secs(120));
        assert_eq!(code, Some(0), "firefox {proto}: stderr: {err}");
        let json = json.expect("a --json document");
        assert_eq!(json.engine, hxlab_core::page::Engine::Firefox);
        let entry = &json.runs[0];
        let run = measured(entry);
        assert!(entry.counted(), "firefox {proto}: {:?}", run.flag);
        let counts = entry.replay.clone().flatten().expect("replay counts");
        assert_eq!(counts.tally.misses, 0, "firefox {proto}: {counts:?}");
        assert!(counts.tally.hits >= 10, "firefox {proto}: {counts:?}");
        assert_eq!(
            run.problems.failed, 1,
            "firefox {proto}: {:?}",
            run.problems
        );
        assert_eq!(run.problems.first[0].url, BROKEN_API);
        let https: Vec<_> = run
            .resources
            .iter()
            .filter(|r| r.url.starts_with("https://") && r.error.is_none())
            .collect();
        assert!(https.len() >= 10, "firefox {proto}: {https:?}");
        for r in https {
            assert_eq!(r.protocol, want, "firefox {proto}: {}", r.url);
        }
    }
}

#[test]
fn firefox_replays_the_real_site_and_compare_names_both_engines() {
    if require_peer("chromium").is_none()
        || require_peer("firefox-esr").is_none()
        || require_peer("certutil").is_none()
    {
        return;
    }
    let Some(site) = Site::start() else { return };
    let tmp = TempDir::new("hxlab-real-site-firefox");
    let har = record_in_chromium(&site, tmp.path());
    firefox_replays(&har, tmp.path());
    let out = tmp.path().join("compare");
    let mut cmd = Command::new(hxlab());
    cmd.args(["compare", "--har"])
        .arg(&har)
        .args([
            "--set",
            "browser=chromium,firefox",
            "--set",
            "profile=none",
            "-r",
            "2",
            "--no-progress",
            "-o",
        ])
        .arg(&out)
        .env("TMPDIR", tmp.path());
    let (code, stdout, stderr) = run_with_timeout(&mut cmd, Duration::from_secs(900));
    assert_eq!(code, Some(0), "compare --har: {stdout}\n{stderr}");
    let results = std::fs::read_to_string(out.join("results.jsonl")).expect("results");
    let records: Vec<hxlab_report::Record> = results
        .lines()
        .map(|l| serde_json::from_str(l).expect("record"))
        .collect();
    assert_eq!(
        records.len(),
        3 * 2 * 2,
        "3 protocols × 2 engines × 2 repetitions"
    );
    for engine in ["chromium", "firefox"] {
        let mine: Vec<_> = records
            .iter()
            .filter(|r| r.factors.get("browser").map(String::as_str) == Some(engine))
            .collect();
        assert_eq!(mine.len(), 6, "{engine}");
        for r in mine {
            assert!(r.error.is_none(), "{}: {:?}", r.cell, r.error);
            let replay = r.replay.as_ref().map(|o| o.tally).unwrap_or_default();
            assert_eq!(replay.misses, 0, "{}", r.cell);
        }
    }
    let md = std::fs::read_to_string(out.join("report.md")).expect("report.md");
    let verdict = md
        .split("## Verdict")
        .nth(1)
        .expect("a verdict")
        .split("\n## ")
        .next()
        .unwrap_or("");
    assert!(
        verdict.contains("Chromium") && verdict.contains("Firefox"),
        "the verdict names both engines: {verdict}"
    );
    // Each engine has its own medians: never pooled.
    assert!(
        verdict.contains("medians in Chromium: ") && verdict.contains(" — in Firefox: "),
        "{verdict}"
    );
    println!("{verdict}");
}
