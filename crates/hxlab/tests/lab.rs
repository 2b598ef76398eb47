//! End-to-end tests of `hxlab run`, `hxlab compare` and `hxlab report`: experiments that
//! start the real `hxlab serve` and `hxlab load` (and `hxlab link` when this machine allows
//! it) and whose results must show the physics of HTTP/1.1 against HTTP/2.

mod common;

use common::tempfile_dir::TempDir;
use common::{hxlab, is_root, require_peer, require_root, run_with_timeout};
use hxlab_core::sched::Scheduler;
use hxlab_report::{Record, Report};
use std::net::IpAddr;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

/// Writes the experiment `spec` into `dir`, runs it (`hxlab run SPEC --out DIR/out
/// --no-progress` and `extra`) within `limit`, and returns its report and stdout; a run that
/// fails fails the test with both outputs.
fn run_spec(dir: &Path, spec: &str, extra: &[&str], limit: Duration) -> (Report, String) {
    let file = dir.join("spec.toml");
    std::fs::write(&file, spec).expect("write spec");
    let out = dir.join("out");
    let (code, stdout, stderr) = run_with_timeout(
        hxlab_cmd()
            .arg("run")
            .arg(&file)
            .arg("--out")
            .arg(&out)
            .arg("--no-progress")
            .args(extra),
        limit,
    );
    assert_eq!(
        code,
        Some(0),
        "hxlab run failed\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    (report_of(&out), stdout)
}

fn hxlab_cmd() -> Command {
    let mut c = Command::new(hxlab());
    // The lab starts serve/load/link from this same binary.
    c.env("HXLAB_BIN", hxlab());
    c
}

fn report_of(dir: &Path) -> Report {
    let (meta, records) = hxlab_report::load_dir(dir).expect("results directory");
    Report::build(meta, records)
}

/// Cell `key`, which must have at least one clean repetition.
fn clean_cell<'a>(r: &'a Report, key: &str) -> &'a hxlab_report::CellSummary {
    let c = r
        .cells
        .iter()
        .find(|c| c.key == key)
        .unwrap_or_else(|| panic!("no cell {key}"));
    assert!(
        !c.values.is_empty(),
        "cell {key} has no clean repetition: {:?}",
        c.warnings
    );
    c
}

fn median(r: &Report, key: &str) -> f64 {
    clean_cell(r, key).median
}

/// The fastest clean repetition of cell `key`: the closest to what the round trips alone
/// cost, since CPU contention (other tests, a debug build) can only add time.
fn fastest(r: &Report, key: &str) -> f64 {
    clean_cell(r, key)
        .values
        .iter()
        .copied()
        .fold(f64::INFINITY, f64::min)
}

/// With a fixed server delay of 50 ms, HTTP/1.1 on 6 connections needs one delay per round
/// of 6 requests: 12 resources take about 2 delays, 24 about 4. HTTP/2 sends every request
/// at once on one connection and pays the delay about once either way.
#[test]
fn h1_time_grows_in_delay_steps_while_h2_stays_near_one_delay() {
    let dir = TempDir::new("hxlab-lab-physics");
    let spec = dir.path().join("physics.toml");
    std::fs::write(
        &spec,
        "name = \"physics\"\nprotocol = [\"h1\", \"h2\"]\ndelay = \"50ms\"\nresources = [12, 24]\nsize = \"1KiB\"\nrepetitions = 3\ncolumns = \"resources\"\n",
    )
    .expect("write spec");
    let out = dir.path().join("out");
    let (code, stdout, stderr) = run_with_timeout(
        hxlab_cmd()
            .arg("run")
            .arg(&spec)
            .arg("--out")
            .arg(&out)
            .arg("--no-progress"),
        Duration::from_secs(60),
    );
    assert_eq!(
        code,
        Some(0),
        "hxlab run failed\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    let r = report_of(&out);
    let h1_12 = median(&r, "protocol=h1 delay=50ms resources=12 size=1KiB");
    let h1_24 = median(&r, "protocol=h1 delay=50ms resources=24 size=1KiB");
    let h2_12 = median(&r, "protocol=h2 delay=50ms resources=12 size=1KiB");
    let h2_24 = median(&r, "protocol=h2 delay=50ms resources=24 size=1KiB");
    eprintln!("h1: 12 → {h1_12:.3} s, 24 → {h1_24:.3} s; h2: 12 → {h2_12:.3} s, 24 → {h2_24:.3} s");
    // h1: 2 rounds, then 4 rounds of 50 ms.
    assert!(
        h1_12 >= 0.095,
        "h1 with 12 resources needs two 50 ms rounds: {h1_12}"
    );
    assert!(
        h1_24 >= 0.195,
        "h1 with 24 resources needs four 50 ms rounds: {h1_24}"
    );
    // Loose bounds for a loaded machine: physics says h1 adds 100 ms and h2 nothing.
    let step = h1_24 - h1_12;
    assert!(
        (0.06..0.50).contains(&step),
        "12 more resources on 6 connections add two delay steps (~100 ms), got {step:.3} s"
    );
    assert!(
        step - (h2_24 - h2_12) > 0.05,
        "h1 grows by delay steps, h2 does not: h1 +{step:.3} s, h2 +{:.3} s",
        h2_24 - h2_12
    );
    // h2: one delay, whatever the count.
    assert!(
        h2_12 >= 0.048 && h2_24 >= 0.048,
        "h2 still waits for the server's delay once: {h2_12} {h2_24}"
    );
    assert!(
        h2_24 - h2_12 < 0.08,
        "h2 does not add two delay steps for 12 more resources: {h2_12} → {h2_24}"
    );
    assert!(
        h2_24 < h1_24 * 0.6,
        "h2 ({h2_24}) should beat h1 on 6 connections ({h1_24}) at 24 resources"
    );
    // Every record carries the full RunResult, the negotiated protocol and the server's CPU.
    let records: Vec<&Record> = r.records.iter().collect();
    assert_eq!(records.len(), 12);
    for rec in records {
        let res = rec.result.as_ref().expect("result");
        assert!(res.requests_done >= 12);
        assert!(
            rec.server
                .as_ref()
                .is_some_and(|s| s.requests >= res.requests_done),
            "server cost: {:?}",
            rec.server
        );
        let proto = &rec.factors["protocol"];
        let want = if proto == "h2" { "h2" } else { "http/1.1" };
        assert!(
            res.negotiated
                .keys()
                .all(|k| k.eq_ignore_ascii_case(want) || (proto == "h1" && k == "h1")),
            "{:?}",
            res.negotiated
        );
    }
    // The comparison says h2 is faster at 24 resources.
    let c = r
        .comparisons
        .iter()
        .find(|c| c.condition == "resources 24")
        .expect("comparison at 24");
    assert!(c.ratio < 0.6, "{}", c.sentence());
    let md = std::fs::read_to_string(out.join("report.md")).expect("report.md");
    assert!(md.contains("| resources | 12 | 24 |"), "{md}");
    // The verdict comes first on the terminal and names the comparison at 24 resources.
    assert!(
        stdout.starts_with("verdict: ") || stdout.contains("\nverdict: "),
        "{stdout}"
    );
    assert!(
        stdout
            .lines()
            .any(|l| l.contains("h2 vs h1: ") && l.contains("resources 24")),
        "{stdout}"
    );
}

/// The same physics through `hxlab link` (WiFi profile: 2 ms each way, 30 Mbit/s): the
/// client runs in the link's namespace and reaches the server across the emulated link.
/// Needs root here; without it the test says loudly that it did not run.
#[test]
fn physics_through_the_link() {
    let spec = "protocol = [\"h1-tls\", \"h2\"]\ndelay = \"50ms\"\nresources = [12, 24]\nsize = \"1KiB\"\nprofile = \"WiFi\"\nrepetitions = 2\nseed = 3\n";
    let Some(r) = run_link_experiment("hxlab-lab-link", spec, Duration::from_secs(90)) else {
        return;
    };
    let k =
        |p: &str, n: u32| format!("protocol={p} profile=WiFi delay=50ms resources={n} size=1KiB");
    let (h1_12, h1_24) = (median(&r, &k("h1-tls", 12)), median(&r, &k("h1-tls", 24)));
    let (h2_12, h2_24) = (median(&r, &k("h2", 12)), median(&r, &k("h2", 24)));
    eprintln!("through WiFi: h1-tls 12 → {h1_12:.3} s, 24 → {h1_24:.3} s; h2 12 → {h2_12:.3} s, 24 → {h2_24:.3} s");
    assert!(
        (0.06..0.50).contains(&(h1_24 - h1_12)),
        "two more 50 ms rounds for h1: {h1_12} → {h1_24}"
    );
    assert!(
        (h1_24 - h1_12) - (h2_24 - h2_12) > 0.05,
        "h1 grows by delay steps, h2 does not: h1 {h1_12} → {h1_24}, h2 {h2_12} → {h2_24}"
    );
    // The link's round trip (2 × 2 ms) and handshakes come on top of the server's delay.
    assert!(
        h2_12 > 0.054,
        "h2 pays the delay plus the link's round trips: {h2_12}"
    );
}

/// Runs `spec` (TOML), whose every cell has a network, with `hxlab run` and returns its
/// report once every cell has run through the link; needs root for the link.
fn run_link_experiment(name: &str, spec: &str, limit: Duration) -> Option<Report> {
    if !require_root("network cells through `hxlab link` (network namespaces, TUN devices)") {
        return None;
    }
    let dir = TempDir::new(name);
    let path = dir.path().join("spec.toml");
    std::fs::write(&path, spec).expect("write spec");
    let out = dir.path().join("out");
    let (code, stdout, stderr) = run_with_timeout(
        hxlab_cmd()
            .arg("run")
            .arg(&path)
            .arg("--out")
            .arg(&out)
            .arg("--no-progress"),
        limit,
    );
    assert_eq!(
        code,
        Some(0),
        "hxlab run failed\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    let r = report_of(&out);
    assert_ran_through_the_link(&r.records.iter().collect::<Vec<_>>(), &r.meta.notes);
    Some(r)
}

/// As root, every repetition of a network cell ran, cleanly, with the load generator inside
/// the link reaching the server at the link's outside address, never loopback: a network
/// cell that was skipped or ran beside the link fails the test.
fn assert_ran_through_the_link(records: &[&Record], notes: &[String]) {
    assert!(!records.is_empty(), "no network cell was recorded");
    for rec in records {
        assert!(
            rec.skipped.is_none(),
            "{}: a network cell was skipped as root: {:?} (notes: {notes:?})",
            rec.cell,
            rec.skipped
        );
        assert!(rec.is_clean(), "{}: {}", rec.cell, rec.failure_text());
        let urls = &rec.result.as_ref().expect("result").config.urls;
        assert!(
            !urls.is_empty()
                && urls
                    .iter()
                    .all(|u| url_ip(u).is_some_and(|ip| !ip.is_loopback())),
            "{}: the load must reach the server across the link, not on loopback: {urls:?}",
            rec.cell
        );
    }
}

/// The IP address in `url`'s authority (`scheme://ip:port/...`), if it is one.
fn url_ip(url: &str) -> Option<IpAddr> {
    let authority = url.split_once("://")?.1.split('/').next()?;
    let host = match authority.strip_prefix('[') {
        Some(v6) => v6.split_once(']')?.0,
        None => authority.rsplit_once(':').map_or(authority, |(h, _)| h),
    };
    host.parse().ok()
}

/// Sets `net.ipv4.tcp_fastopen` (this network namespace) for as long as it lives, then puts
/// the old value back.
struct TfoSysctl(Option<String>);

impl TfoSysctl {
    const PATH: &'static str = "/proc/sys/net/ipv4/tcp_fastopen";
    fn set(v: &str) -> TfoSysctl {
        let old = std::fs::read_to_string(Self::PATH).ok();
        std::fs::write(Self::PATH, v).expect("set net.ipv4.tcp_fastopen (root)");
        TfoSysctl(old)
    }
}

impl Drop for TfoSysctl {
    fn drop(&mut self) {
        if let Some(old) = &self.0 {
            let _ = std::fs::write(Self::PATH, old.trim());
        }
    }
}

/// Through `hxlab link` at RTT 100 ms, one 1 KB response with full handshakes: h2 (TCP +
/// TLS 1.3) needs one round trip more than h3 (QUIC). With 0-RTT, h1-tls and h2 put the
/// ClientHello and the request (TLS 1.3 early data) on the SYN (TCP Fast Open, which the
/// server's kernel accepts only with net.ipv4.tcp_fastopen bit 2: set here for the test and
/// restored) and answer in one round trip; every repetition counts its accepted early data
/// and SYN data. Both ends run reno, as read back. Times are each cell's fastest of three
/// repetitions: the round trips are a floor that contention on a busy machine only adds to.
#[test]
fn handshakes_and_zero_rtt_cost_whole_round_trips_through_the_link() {
    let spec = "name = \"rtt\"\nprotocol = [\"h1-tls\", \"h2\", \"h3\"]\nresources = 1\nsize = \"1KB\"\nrtt = \"100ms\"\ncc = \"reno\"\nzero_rtt = [false, true]\nrepetitions = 3\nseed = 5\n";
    let _tfo = is_root().then(|| TfoSysctl::set("3"));
    let Some(r) = run_link_experiment("hxlab-lab-rtt", spec, Duration::from_secs(120)) else {
        return;
    };
    let k = |p: &str, z: &str| {
        format!("protocol={p} rtt=100ms cc=reno delay=0ms resources=1 size=1KB zero_rtt={z}")
    };
    let (h2, h3) = (fastest(&r, &k("h2", "off")), fastest(&r, &k("h3", "off")));
    let (h2z, h3z, h1z) = (
        fastest(&r, &k("h2", "on")),
        fastest(&r, &k("h3", "on")),
        fastest(&r, &k("h1-tls", "on")),
    );
    eprintln!(
        "RTT 100 ms: h2 {h2:.3} s, h3 {h3:.3} s; 0-RTT: h2 {h2z:.3}, h3 {h3z:.3}, h1-tls {h1z:.3}"
    );
    assert!(
        (0.07..=0.13).contains(&(h2 - h3)),
        "h2 − h3 = one RTT: {h2} − {h3}"
    );
    assert!(
        (0.09..=0.13).contains(&h3z),
        "h3 0-RTT within 1 RTT + 30 ms: {h3z}"
    );
    for (name, t, full) in [
        ("h2", h2z, h2),
        ("h1-tls", h1z, fastest(&r, &k("h1-tls", "off"))),
    ] {
        assert!(
            (0.09..=0.13).contains(&t),
            "{name} 0-RTT (TFO + early data) within 1 RTT + 30 ms: {t}"
        );
        assert!(
            (0.17..=0.23).contains(&(full - t)),
            "{name}: TFO and early data save two RTTs: {full} → {t}"
        );
    }
    for rec in &r.records {
        assert_eq!(
            rec.server_cc.keys().collect::<Vec<_>>(),
            ["reno"],
            "{}",
            rec.cell
        );
        assert_eq!(
            rec.client_cc.keys().collect::<Vec<_>>(),
            ["reno"],
            "{}",
            rec.cell
        );
        let res = rec.result.as_ref().expect("result");
        let accepted: u64 = res.early_data_accepted.values().sum();
        if rec.factors["zero_rtt"] == "on" {
            assert_eq!(accepted, 1, "{}: early data accepted", rec.cell);
            if rec.factors["protocol"] != "h3" {
                let syn: u64 = res.tfo_syn_data_acked.values().sum();
                assert_eq!(syn, 1, "{}: SYN data acknowledged", rec.cell);
            }
        } else {
            assert_eq!(accepted, 0, "{}", rec.cell);
        }
    }
}

/// Head-of-line blocking at 2 % loss, 30 × 100 KiB at RTT 50 ms, reno on both ends: with the
/// same congestion control, h3 and h2 stay within a factor of two of each other (the 13.5×
/// "h3 is slow" of bbr against cubic senders is gone).
#[test]
fn hol_blocking_with_the_same_cc_on_both_ends_stays_within_2x() {
    let spec = "name = \"hol\"\nprotocol = [\"h2\", \"h3\"]\nresources = 30\nsize = \"100KiB\"\nrtt = \"50ms\"\nloss = \"2%\"\ncc = \"reno\"\nrepetitions = 3\nseed = 11\n";
    let Some(r) = run_link_experiment("hxlab-lab-hol", spec, Duration::from_secs(300)) else {
        return;
    };
    let k = |p: &str| {
        format!("protocol={p} loss=2% rtt=50ms cc=reno delay=0ms resources=30 size=100KiB")
    };
    let (h2, h3) = (median(&r, &k("h2")), median(&r, &k("h3")));
    eprintln!(
        "hol-blocking 2 %: h2 {h2:.3} s, h3 {h3:.3} s, h3/h2 {:.2}",
        h3 / h2
    );
    assert!((0.5..=2.0).contains(&(h3 / h2)), "h3/h2 = {}", h3 / h2);
    for rec in &r.records {
        assert_eq!(
            rec.server_cc.keys().collect::<Vec<_>>(),
            ["reno"],
            "{}",
            rec.cell
        );
    }
}

/// The browser workload: headless Chromium (through `hxlab page`) loads the server's
/// synthetic page; the page and then its resources each wait for the server's delay.
#[test]
fn browser_workload_loads_the_page_in_chromium() {
    if require_peer("chromium").is_none() {
        return;
    }
    let dir = TempDir::new("hxlab-lab-browser");
    let (r, _) = run_spec(dir.path(), "workload = \"browser\"\nprotocol = [\"h1-tls\", \"h2\"]\ndelay = \"50ms\"\nresources = 12\nsize = \"20KiB\"\nrepetitions = 1\n", &[], Duration::from_secs(120));
    for p in ["h1-tls", "h2"] {
        let key = format!("protocol={p} delay=50ms resources=12 size=20KiB");
        let t = median(&r, &key);
        assert!(
            t >= 0.095,
            "{key}: the page and its resources each wait 50 ms: {t}"
        );
        let rec = r.records.iter().find(|x| x.cell == key).expect("record");
        let res = rec.result.as_ref().expect("result");
        assert_eq!(
            res.config.extra.get("workload").map(String::as_str),
            Some("browser")
        );
        let want = if p == "h2" { "h2" } else { "http/1.1" };
        assert!(
            res.negotiated.contains_key(want),
            "{p}: {:?}",
            res.negotiated
        );
        // The record keeps the load resource by resource, for the report's waterfalls.
        let w = rec.waterfall.as_ref().expect("the record's waterfall");
        assert_eq!(w.rows.len(), 13, "the page and its 12 resources");
        assert!(w
            .rows
            .iter()
            .all(|row| row.protocol == want && !row.failed()));
        assert!(w.mark("load").is_some_and(|t| t >= 95.0), "{:?}", w.marks);
    }
    let section = hxlab_report::waterfall::report_section(&r.records);
    assert!(section.starts_with("<h2>Waterfalls</h2>"));
    assert_eq!(
        section.matches("<svg ").count(),
        2,
        "one waterfall per cell"
    );
}

/// A discovery sweep in the lab: an h3 cell that forces nothing, measured as the returning
/// visitor, once with Alt-Svc over an open path and once behind a link that drops UDP. Both
/// cells run and record what the browser used; behind the blocked path no byte came over
/// QUIC (physics: every UDP packet is dropped), the page came over h2 all the same, and the
/// cell is judged, not flagged as a fallback.
#[test]
fn a_discovery_sweep_records_what_the_browser_found() {
    if require_peer("chromium").is_none() || !require_root("udp-blocked cells (hxlab link)") {
        return;
    }
    let dir = TempDir::new("hxlab-lab-discovery");
    let (r, _) = run_spec(dir.path(), "workload = \"browser\"\nprotocol = \"h3\"\ndiscovery = [\"alt-svc\", \"udp-blocked\"]\nrepeat_view = true\ndelay = \"10ms\"\nresources = 4\nsize = \"4KiB\"\nrepetitions = 1\n", &[], Duration::from_secs(240));
    for d in ["alt-svc", "udp-blocked"] {
        let rec = r
            .records
            .iter()
            .find(|x| x.cell.contains(&format!("discovery={d}")))
            .unwrap_or_else(|| panic!("no record of discovery={d}: {:?}", r.records));
        assert!(rec.error.is_none() && rec.skipped.is_none(), "{d}: {rec:?}");
        let res = rec.result.as_ref().expect("result");
        assert!(!res.negotiated.is_empty(), "{d}: {:?}", res.negotiated);
        if d == "udp-blocked" {
            assert!(
                !res.negotiated.contains_key("h3"),
                "{d}: QUIC through a path that drops UDP: {:?}",
                res.negotiated
            );
            assert!(
                res.negotiated.contains_key("h2"),
                "{d}: {:?}",
                res.negotiated
            );
        }
    }
    let cell = |d: &str| {
        r.cells
            .iter()
            .find(|c| c.key.contains(&format!("discovery={d}")))
            .expect("cell")
    };
    assert_eq!(
        cell("udp-blocked").values.len(),
        1,
        "judged with the others"
    );
    assert_eq!(cell("alt-svc").values.len(), 1);
}

/// The `browser` factor: the lab's synthetic page in Chromium and in Firefox, on loopback and
/// (as root) behind a link, where Firefox loads the loopback origin as origin.hxlab.test and
/// trusts its certificate through the NSS store. Every cell is one engine's, and the report
/// names both.
#[test]
fn browser_factor_runs_each_engine_in_its_own_cells() {
    if require_peer("chromium").is_none()
        || require_peer("firefox-esr").is_none()
        || require_peer("certutil").is_none()
    {
        return;
    }
    let dir = TempDir::new("hxlab-lab-engines");
    let profiles = if is_root() {
        "[\"none\", \"Regular 4G\"]"
    } else {
        "\"none\""
    };
    let (r, _) = run_spec(dir.path(), &format!("workload = \"browser\"\nprotocol = [\"h2\", \"h3\"]\nbrowser = [\"chromium\", \"firefox\"]\nprofile = {profiles}\nresources = 4\nsize = \"8KiB\"\nrepetitions = 1\n"), &[], Duration::from_secs(600));
    let cells = if is_root() { 8 } else { 4 };
    assert_eq!(r.records.len(), cells);
    for rec in &r.records {
        assert!(rec.error.is_none(), "{}: {:?}", rec.cell, rec.error);
        let engine = rec.factors.get("browser").expect("the browser factor");
        let res = rec.result.as_ref().expect("result");
        let named = res.config.extra.get("browser").cloned().unwrap_or_default();
        let label = if engine == "firefox" {
            "Firefox "
        } else {
            "Chromium "
        };
        assert!(named.starts_with(label), "{}: {named}", rec.cell);
        let want = rec.factors.get("protocol").expect("protocol");
        let w = rec.waterfall.as_ref().expect("waterfall");
        assert!(
            w.rows.iter().all(|row| row.protocol == *want),
            "{}",
            rec.cell
        );
    }
    assert!(
        r.meta
            .notes
            .iter()
            .any(|n| n.starts_with("two engines, never pooled")),
        "{:?}",
        r.meta.notes
    );
}

/// The browser workload on a recorded site: `har = "site.har"` replays the archive (the
/// two-host synthetic page recorded by `hxlab page --record`) over each protocol; every
/// resource comes from the archive on the cell's protocol, and the report says where the
/// page came from.
#[test]
fn browser_workload_replays_a_recorded_site() {
    if require_peer("chromium").is_none() {
        return;
    }
    let dir = TempDir::new("hxlab-lab-har");
    let har = dir.path().join("site.har");
    let (code, _, stderr) = run_with_timeout(
        hxlab_cmd()
            .args([
                "page",
                "--synthetic",
                "n=5,size=4KiB,delay=1ms,origins=2",
                "--proto",
                "h2",
                "--runs",
                "1",
                "--record",
            ])
            .arg(&har),
        Duration::from_secs(90),
    );
    assert_eq!(code, Some(0), "recording failed: {stderr}");
    let spec = dir.path().join("b.toml");
    std::fs::write(
        &spec,
        "workload = \"browser\"\nhar = \"site.har\"\nmetric = \"lcp\"\nprotocol = [\"h2\", \"h3\"]\nrepeat_view = [false, true]\nrepetitions = 2\n",
    )
    .expect("write spec");
    let out = dir.path().join("out");
    let (code, stdout, stderr) = run_with_timeout(
        hxlab_cmd()
            .arg("run")
            .arg(&spec)
            .arg("--out")
            .arg(&out)
            .arg("--no-progress"),
        Duration::from_secs(240),
    );
    assert_eq!(
        code,
        Some(0),
        "hxlab run failed\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    let r = report_of(&out);
    assert_eq!(r.records.len(), 8);
    // The cells are the protocol and the view: no synthetic page's resources or size.
    assert!(
        r.records
            .iter()
            .all(|x| x.cell.starts_with("protocol=h") && !x.cell.contains("resources")),
        "{:?}",
        r.records.iter().map(|x| &x.cell).collect::<Vec<_>>()
    );
    for rec in &r.records {
        assert!(rec.is_clean(), "{}: {}", rec.cell, rec.failure_text());
        // Like for like: the replay server sent over h2 and h3 with the same controller,
        // as its connections read it back.
        assert_eq!(
            rec.server_cc.keys().collect::<Vec<_>>(),
            ["cubic"],
            "{}",
            rec.cell
        );
        // The replay server's own defaults, read back: RFC 9218 priorities, and the 16 KiB
        // mark on every TCP connection (h3 has none).
        let seen = rec.scheduling.as_ref().expect("the origin's scheduling");
        assert_eq!(seen.scheduler, Some(Scheduler::Rfc9218), "{}", rec.cell);
        assert!(
            seen.scheduler_applies && !seen.priorities.is_empty(),
            "{seen:?}"
        );
        assert!(
            seen.notsent_lowat.keys().all(|k| k == "16384"),
            "{}: {seen:?}",
            rec.cell
        );
        // The repeat view reuses the first view's connection: no resource pays a handshake.
        if rec.factors["repeat_view"] == "on" {
            let w = rec.waterfall.as_ref().expect("the record's waterfall");
            let paid: Vec<_> = w
                .rows
                .iter()
                .filter(|row| row.phases.connect.is_some() || row.phases.tls.is_some())
                .map(|row| {
                    format!(
                        "{} at {:.0} ms: connect {:?} tls {:?} (connection {}, reused {})",
                        row.url,
                        row.start_ms,
                        row.phases.connect,
                        row.phases.tls,
                        row.connection_id,
                        row.connection_reused
                    )
                })
                .collect();
            assert!(
                paid.is_empty(),
                "{}: a handshake in the repeat view: {paid:#?}",
                rec.cell
            );
        }
        let want = &rec.factors["protocol"];
        let w = rec.waterfall.as_ref().expect("the record's waterfall");
        assert_eq!(
            w.rows.len(),
            6,
            "{}: the page and its 5 resources",
            rec.cell
        );
        assert!(
            w.rows
                .iter()
                .all(|row| &row.protocol == want && !row.failed()),
            "{}: {:?}",
            rec.cell,
            w.rows
        );
    }
    assert!(
        r.meta
            .notes
            .iter()
            .any(|n| n.starts_with("page: ") && n.contains("replayed by hxlab page --replay")),
        "{:?}",
        r.meta.notes
    );
    assert!(
        stdout.contains("· origin hxlab, read back: scheduler rfc9218; TCP_NOTSENT_LOWAT 16384"),
        "the report states the scheduler and the mark: {stdout}"
    );
    // metric = "lcp": every cell is judged by its largest contentful paint.
    assert_eq!(r.metric, hxlab_report::Metric::LcpS);
    for c in &r.cells {
        let lcps: Vec<f64> = r
            .records
            .iter()
            .filter(|x| x.cell == c.key)
            .map(|x| {
                x.result.as_ref().expect("result").config.extra["lcp_ms"]
                    .parse::<f64>()
                    .expect("lcp_ms")
                    / 1000.0
            })
            .collect();
        assert_eq!(c.values.len(), 2, "{}", c.key);
        assert!(
            c.values.iter().all(|v| lcps.contains(v)),
            "{}: {:?} vs {lcps:?}",
            c.key,
            c.values
        );
    }
    // A har with another workload, or a har that is not one, is refused before anything runs.
    std::fs::write(&spec, "har = \"site.har\"\nprotocol = \"h2\"\n").expect("write spec");
    let (code, _, stderr) = run_with_timeout(
        hxlab_cmd()
            .arg("run")
            .arg(&spec)
            .arg("--out")
            .arg(dir.path().join("o2")),
        Duration::from_secs(30),
    );
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("add workload = \"browser\""), "{stderr}");
    // metric names a page figure, and only for the browser workload.
    for (body, want) in [
        (
            "workload = \"browser\"\nhar = \"site.har\"\nprotocol = \"h2\"\nmetric = \"ttfb\"\n",
            "metric \"ttfb\": expected",
        ),
        (
            "protocol = \"h2\"\nmetric = \"lcp\"\n",
            "metric chooses among a page load's figures",
        ),
    ] {
        std::fs::write(&spec, body).expect("write spec");
        let (code, _, stderr) = run_with_timeout(
            hxlab_cmd()
                .arg("run")
                .arg(&spec)
                .arg("--out")
                .arg(dir.path().join("o5")),
            Duration::from_secs(30),
        );
        assert_eq!(code, Some(2), "{stderr}");
        assert!(stderr.contains(want), "{stderr}");
    }
    // The synthetic page's factors mean nothing for a recorded site.
    std::fs::write(
        &spec,
        "workload = \"browser\"\nhar = \"site.har\"\nprotocol = \"h2\"\nresources = 10\n",
    )
    .expect("write spec");
    let (code, _, stderr) = run_with_timeout(
        hxlab_cmd()
            .arg("run")
            .arg(&spec)
            .arg("--out")
            .arg(dir.path().join("o4")),
        Duration::from_secs(30),
    );
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("`resources` shapes the lab's synthetic page"),
        "{stderr}"
    );
    std::fs::write(dir.path().join("bad.har"), "not json").expect("write");
    std::fs::write(
        &spec,
        "workload = \"browser\"\nhar = \"bad.har\"\nprotocol = \"h2\"\n",
    )
    .expect("write spec");
    let (code, _, stderr) = run_with_timeout(
        hxlab_cmd()
            .arg("run")
            .arg(&spec)
            .arg("--out")
            .arg(dir.path().join("o3")),
        Duration::from_secs(30),
    );
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("har ") && stderr.contains("bad.har"),
        "{stderr}"
    );
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
}

/// `--set protocol=h2,h3` leaves out the built-in compare's baseline (h1-tls): the first
/// protocol given is the baseline, and h3 is compared with it (it was refused with exit 2).
#[test]
fn compare_of_some_protocols_takes_its_baseline_among_them() {
    let dir = TempDir::new("hxlab-lab-compare-h2-h3");
    let out = dir.path().join("cmp");
    let (code, stdout, stderr) = run_with_timeout(
        hxlab_cmd()
            .args(["compare", "--set", "protocol=h2,h3", "-r", "2"])
            .args(["--set", "profile=none", "--no-progress", "--out"])
            .arg(&out),
        Duration::from_secs(90),
    );
    assert_eq!(code, Some(0), "stdout:\n{stdout}\nstderr:\n{stderr}");
    let r = report_of(&out);
    assert_eq!(r.baseline_protocol().as_deref(), Some("h2"));
    assert!(stdout.contains("h3 vs h2"), "{stdout}");
}

/// `hxlab compare` with a tiny override finishes, prints the table and the runner's
/// overhead, and writes report.md, results.csv and report.html. As root its network cells
/// must run through the link; otherwise they are skipped with a note saying why, and the
/// test skips that part through the one skip rule.
#[test]
fn compare_small_writes_the_reports() {
    let dir = TempDir::new("hxlab-lab-compare");
    let out = dir.path().join("cmp");
    let (code, stdout, stderr) = run_with_timeout(
        hxlab_cmd()
            .args([
                "compare",
                "--repetitions",
                "2",
                "--set",
                "protocol=h1,h1-tls,h2,h3",
                "--set",
                "delay=10ms",
            ])
            .args(["--set", "resources=6", "--no-progress", "--out"])
            .arg(&out),
        Duration::from_secs(90),
    );
    assert_eq!(
        code,
        Some(0),
        "hxlab compare failed\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    for f in [
        "report.md",
        "results.csv",
        "report.html",
        "results.jsonl",
        "experiment.json",
    ] {
        assert!(out.join(f).is_file(), "{f} missing");
    }
    assert!(stdout.contains("runner overhead:"), "{stdout}");
    // Every record, experiment.json and summary.json say where they were produced, and the
    // report ends with it.
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").expect("osrelease");
    let records = std::fs::read_to_string(out.join("results.jsonl")).expect("records");
    for line in records.lines() {
        let r: serde_json::Value = serde_json::from_str(line).expect("record");
        assert_eq!(r["environment"]["kernel"], kernel.trim(), "{line}");
        assert_eq!(
            r["environment"]["hxlab"]["version"],
            env!("CARGO_PKG_VERSION")
        );
    }
    for f in ["experiment.json", "summary.json"] {
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(out.join(f)).expect(f)).expect(f);
        assert_eq!(v["environment"]["kernel"], kernel.trim(), "{f}");
    }
    let md = std::fs::read_to_string(out.join("report.md")).expect("report.md");
    assert!(md.contains("Produced by hxlab "), "{md}");
    // Every cell spoke the protocol it asked for, and warnings name the right cell (network
    // cells sharing one link once all warned with the first cell's name).
    assert!(
        !stdout.contains("but connections negotiated")
            && !stderr.contains("but connections negotiated"),
        "a fallback warning where none happened\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    let csv = std::fs::read_to_string(out.join("results.csv")).expect("csv");
    assert!(csv
        .lines()
        .next()
        .is_some_and(|h| h.starts_with("experiment,cell,protocol,")));
    assert!(
        csv.lines().filter(|l| l.contains(",ok,")).count() >= 8,
        "{csv}"
    );
    let html = std::fs::read_to_string(out.join("report.html")).expect("html");
    assert!(
        html.contains("<svg") && !html.contains("<script"),
        "self-contained with SVG charts"
    );
    let r = report_of(&out);
    for p in ["h1", "h1-tls", "h2", "h3"] {
        let key = format!("protocol={p} profile=none cc=cubic delay=10ms resources=6 size=10KiB");
        assert!(
            median(&r, &key) > 0.009,
            "{key}: a 10 ms server delay at least"
        );
    }
    let net: Vec<&Record> = r
        .records
        .iter()
        .filter(|x| x.factors.get("profile").is_some_and(|p| p != "none"))
        .collect();
    assert!(
        !net.is_empty(),
        "the network cells are recorded, run or skipped"
    );
    if is_root() {
        assert_ran_through_the_link(&net, &r.meta.notes);
    } else {
        assert!(net.iter().all(|x| x.skipped.is_some()), "{net:?}");
        assert!(
            r.meta
                .notes
                .iter()
                .any(|n| n.contains("link emulation is not available here")),
            "{:?}",
            r.meta.notes
        );
        assert!(
            stdout.contains("link emulation is not available here"),
            "the skip is said, not silent: {stdout}"
        );
        require_root("the network cells (through `hxlab link`)");
    }
}

/// The main job is like for like by itself: a short default `hxlab compare` runs one
/// congestion controller on both ends of every connection of every protocol, as each end
/// read it back, and its verdict has no "not like for like" line.
#[test]
fn the_default_compare_runs_one_controller_on_both_ends() {
    let dir = TempDir::new("hxlab-lab-compare-cc");
    let out = dir.path().join("cmp");
    let (code, stdout, stderr) = run_with_timeout(
        hxlab_cmd()
            .args([
                "compare",
                "-r",
                "2",
                "--set",
                "resources=30",
                "--no-progress",
            ])
            .arg("--out")
            .arg(&out),
        Duration::from_secs(300),
    );
    assert_eq!(code, Some(0), "stdout:\n{stdout}\nstderr:\n{stderr}");
    assert!(
        !stdout.contains("not like for like") && !stderr.contains("not like for like"),
        "{stdout}"
    );
    let r = report_of(&out);
    let ran: Vec<&Record> = r.records.iter().filter(|x| x.skipped.is_none()).collect();
    assert!(ran.len() >= 2 * 4 * 2, "{} records ran", ran.len());
    for x in &ran {
        let names =
            |m: &std::collections::BTreeMap<String, u64>| m.keys().cloned().collect::<Vec<_>>();
        assert_eq!(
            names(&x.server_cc),
            vec!["cubic"],
            "{}: server {:?}",
            x.cell,
            x.server_cc
        );
        assert_eq!(
            names(&x.client_cc),
            vec!["cubic"],
            "{}: client {:?}",
            x.cell,
            x.client_cc
        );
        assert!(x.cell.contains("cc=cubic"), "{}", x.cell);
        // The origin's response encoder, read back: the default 4096-byte table on h2 and
        // h3, none on HTTP/1.1.
        let tables = names(&x.server_encoder_tables);
        if x.cell.contains("protocol=h1") {
            assert!(tables.is_empty(), "{}: {tables:?}", x.cell);
        } else {
            assert_eq!(tables, vec!["4096"], "{}", x.cell);
        }
    }
    if !is_root() {
        require_root("the network cells of hxlab compare (through `hxlab link`)");
    }
}

/// `--set scheduler=rfc9218,fifo` restarts hxlab's origin with each scheduler, every record
/// reads back the scheduler its server ran (HTTP/1.1's saying it has nothing to schedule)
/// and the marks of its connections, and the verdict says whether h2 against h1-tls holds
/// across the scheduler, level by level, under a line naming what the origin ran.
#[test]
fn a_scheduler_sweep_is_read_back_and_judged_across_its_levels() {
    let dir = TempDir::new("hxlab-lab-scheduler");
    let (r, stdout) = run_spec(
        dir.path(),
        "protocol = [\"h1-tls\", \"h2\"]\ndelay = \"5ms\"\nresources = 12\nsize = \"4KiB\"\nrepetitions = 2\n",
        &["--set", "scheduler=rfc9218,fifo"],
        Duration::from_secs(60),
    );
    assert_eq!(r.records.len(), 8);
    for rec in &r.records {
        let asked = &rec.factors["scheduler"];
        let seen = rec
            .scheduling
            .as_ref()
            .unwrap_or_else(|| panic!("{}: nothing read back", rec.cell));
        assert_eq!(
            seen.scheduler.map(|s| s.name()),
            Some(asked.as_str()),
            "{}: {seen:?}",
            rec.cell
        );
        assert_eq!(
            seen.notsent_lowat.keys().collect::<Vec<_>>(),
            ["16384"],
            "{}: the origin's default mark on every connection",
            rec.cell
        );
        let h2 = rec.factors["protocol"] == "h2";
        assert_eq!(seen.scheduler_applies, h2, "{}", rec.cell);
        assert_eq!(!seen.priorities.is_empty(), h2, "{}: {seen:?}", rec.cell);
    }
    let v = r.verdict();
    let pair = v
        .lines
        .iter()
        .find(|l| l.text.starts_with("h2 vs h1-tls: "))
        .unwrap_or_else(|| panic!("no pair line: {:?}", v.plain()));
    assert!(
        pair.text.contains(" across scheduler — ") || pair.text.contains(" on scheduler — "),
        "{}",
        pair.text
    );
    assert!(
        pair.text.contains("under scheduler rfc9218 (") && pair.text.contains("fifo ("),
        "{}",
        pair.text
    );
    assert_eq!(pair.across[0].factor, "scheduler");
    let levels: Vec<&str> = pair.across[0]
        .levels
        .iter()
        .map(|l| l.level.as_str())
        .collect();
    assert_eq!(levels, ["rfc9218", "fifo"]);
    let origin = "origin hxlab, read back: scheduler rfc9218 and fifo (h1-tls: none, one response at a time per connection); TCP_NOTSENT_LOWAT 16384";
    assert!(stdout.contains(origin), "{stdout}");
}

/// An interrupted run continues where it stopped: finished repetitions are kept, the
/// half-written line is dropped, and only the missing repetitions run again.
#[test]
fn resume_runs_only_what_is_missing() {
    let dir = TempDir::new("hxlab-lab-resume");
    let spec = dir.path().join("r.toml");
    std::fs::write(&spec, "protocol = [\"h1\", \"h2\"]\ndelay = \"5ms\"\nresources = 6\nsize = \"1KiB\"\nrepetitions = 2\n").expect("spec");
    let out = dir.path().join("out");
    let run = |extra: &[&str]| {
        run_with_timeout(
            hxlab_cmd()
                .arg("run")
                .arg(&spec)
                .arg("--out")
                .arg(&out)
                .arg("--no-progress")
                .args(extra),
            Duration::from_secs(60),
        )
    };
    let (code, so, se) = run(&[]);
    assert_eq!(code, Some(0), "{so}\n{se}");
    // A second run into the same directory without --resume is refused.
    let (code, _, se) = run(&[]);
    assert_eq!(code, Some(1), "{se}");
    assert!(se.contains("already holds results; pass --resume"), "{se}");
    // Simulate an interruption: keep the first record and half of the second.
    let path = out.join("results.jsonl");
    let text = std::fs::read_to_string(&path).expect("results");
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 4);
    let first = lines[0].to_string();
    std::fs::write(
        &path,
        format!("{first}\n{}", &lines[1][..lines[1].len() / 2]),
    )
    .expect("truncate");
    let (code, so, se) = run(&["--resume"]);
    assert_eq!(code, Some(0), "{so}\n{se}");
    assert!(so.contains("1 already done"), "{so}");
    let r = report_of(&out);
    assert_eq!(r.records.len(), 4, "1 kept + 3 re-run");
    let kept: serde_json::Value = serde_json::from_str(&first).expect("json");
    assert_eq!(
        r.records[0].started_unix_s,
        kept["started_unix_s"].as_f64().expect("time")
    );
    let mut pairs: Vec<(String, u32)> = r
        .records
        .iter()
        .map(|x| (x.cell.clone(), x.repetition))
        .collect();
    pairs.sort();
    pairs.dedup();
    assert_eq!(pairs.len(), 4, "every (cell, repetition) exactly once");
    // Resuming with a different experiment is refused.
    let (code, _, se) = run(&["--resume", "--set", "resources=7"]);
    assert_eq!(code, Some(1));
    assert!(se.contains("holds a different experiment"), "{se}");
}

/// Errors in experiment files say file:line:column and exit 2 before anything runs.
#[test]
fn bad_experiments_are_refused_before_anything_runs() {
    let dir = TempDir::new("hxlab-lab-bad");
    let cases = [
        (
            "protocol = \"h2\"\ndelay = 30\n",
            "bad.toml:2:9: delay: a duration needs a unit",
        ),
        (
            "protocol = [\"h1\", \"h2\"]\npush = true\n",
            "bad.toml:2:8: impossible cell `protocol=h1",
        ),
        ("protocol = \"h3c\"\n", "there is no h3 without TLS"),
        (
            "protocol = \"h2\"\nprofile = \"Regular 5G\"\n",
            "bad.toml:2:11: profile: unknown profile \"Regular 5G\"",
        ),
        (
            "workload = \"browser\"\nprotocol = \"h2c\"\n",
            "browsers speak HTTP/2 only over TLS",
        ),
        ("protocol = [\"h2\"\n", "bad.toml:"),
        (
            "protocol = \"h2\"\nscheduler = \"lifo\"\n",
            "bad.toml:2:13: unknown scheduler \"lifo\": use rfc9218, round-robin or fifo",
        ),
        (
            "strict = true\nprotocol = \"h2\"\n",
            "strict applies to the browser workload",
        ),
    ];
    for (src, want) in cases {
        let f = dir.path().join("bad.toml");
        std::fs::write(&f, src).expect("write");
        let out = dir.path().join("never");
        let (code, _, stderr) = run_with_timeout(
            Command::new(hxlab())
                .current_dir(dir.path())
                .args(["run", "bad.toml", "--out"])
                .arg(&out),
            Duration::from_secs(20),
        );
        assert_eq!(code, Some(2), "{src:?}: {stderr}");
        assert!(
            stderr.contains(want),
            "{src:?}: expected {want:?} in {stderr:?}"
        );
        assert_eq!(stderr.lines().count(), 1, "one line: {stderr:?}");
        assert!(!out.exists(), "nothing ran");
    }
    let (code, _, stderr) = run_with_timeout(
        Command::new(hxlab()).args(["run", "--scenario", "seed-999"]),
        Duration::from_secs(20),
    );
    assert_eq!(code, Some(2));
    assert!(stderr.contains("unknown scenario \"seed-999\""), "{stderr}");
    let (code, _, stderr) = run_with_timeout(
        Command::new(hxlab()).args(["compare", "--set", "resources=-1"]),
        Duration::from_secs(20),
    );
    assert_eq!(code, Some(2), "{stderr}");
    // --strict is for page loads: the default comparison (requests) refuses it.
    let (code, _, stderr) = run_with_timeout(
        Command::new(hxlab()).args(["compare", "--strict"]),
        Duration::from_secs(20),
    );
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("strict applies to the browser workload"),
        "{stderr}"
    );
}

/// Scenarios are listed, and a dry run shows the cells without running anything.
#[test]
fn scenarios_list_and_dry_run() {
    let (code, stdout, _) = run_with_timeout(
        Command::new(hxlab()).args(["run", "--list-scenarios"]),
        Duration::from_secs(20),
    );
    assert_eq!(code, Some(0));
    for s in [
        "seed-003-delay",
        "seed-003-requests",
        "seed-003-size",
        "seed-003-network",
        "seed-003-push",
        "seed-004-tls",
        "seed-002-multiplex",
        "seed-000-https-cpu",
        "seed-001-h3",
    ] {
        assert!(stdout.contains(s), "{s} missing from {stdout}");
    }
    let (code, stdout, _) = run_with_timeout(
        Command::new(hxlab()).args([
            "run",
            "--scenario",
            "seed-003-delay",
            "--repetitions",
            "2",
            "--set",
            "protocol=h1-tls,h2",
            "--dry-run",
        ]),
        Duration::from_secs(20),
    );
    assert_eq!(code, Some(0));
    assert!(
        stdout.starts_with("seed-003-delay: 10 cells × 2 repetitions = 20 runs"),
        "{stdout}"
    );
    assert!(
        stdout.contains("protocol=h2 cc=cubic delay=40ms resources=100 size=0.1MiB"),
        "{stdout}"
    );
}

/// `hxlab report DIR` re-renders from results.jsonl alone, published figures included.
#[test]
fn report_rerenders_from_records() {
    let dir = TempDir::new("hxlab-lab-report");
    // A results directory as `hxlab run --scenario seed-003-delay` leaves it, with records
    // made here from synthetic RunResults (h1 grows with the delay, h2 stays flat).
    let meta = serde_json::json!({
        "name": "seed-003-delay", "title": "delay", "workload": "resources", "repetitions": 4,
        "factors": [{"name": "protocol", "levels": ["h1-tls", "h2"]}, {"name": "delay", "levels": ["0ms", "40ms"]},
                    {"name": "resources", "levels": ["100"]}, {"name": "size", "levels": ["0.1MiB"]}],
        "columns": "delay", "baseline": "h1-tls",
        "published": [{"title": "seeds/003", "source": "seed", "column_factor": "delay", "columns": ["0ms", "40ms"],
                       "rows": [{"label": "h2", "factors": {"protocol": "h2"}, "values": [0.48, 0.50]}]}],
    });
    std::fs::write(dir.path().join("experiment.json"), meta.to_string()).expect("meta");
    let mut lines = String::new();
    for (proto, delay, base) in [
        ("h1-tls", "0ms", 0.30),
        ("h1-tls", "40ms", 0.90),
        ("h2", "0ms", 0.40),
        ("h2", "40ms", 0.45),
    ] {
        for rep in 0..4u32 {
            let mut res = hxlab_core::RunResult {
                schema: 1,
                duration_s: base + rep as f64 * 0.01,
                requests_started: 100,
                requests_done: 100,
                requests_succeeded: 100,
                ..Default::default()
            };
            res.negotiated
                .insert(if proto == "h2" { "h2" } else { "http/1.1" }.into(), 1);
            let rec = Record {
                experiment: "seed-003-delay".into(),
                cell: format!("protocol={proto} delay={delay} resources=100 size=0.1MiB"),
                factors: [
                    ("protocol", proto),
                    ("delay", delay),
                    ("resources", "100"),
                    ("size", "0.1MiB"),
                ]
                .into_iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
                repetition: rep,
                result: Some(res),
                ..Default::default()
            };
            lines.push_str(&serde_json::to_string(&rec).expect("record"));
            lines.push('\n');
        }
    }
    std::fs::write(dir.path().join("results.jsonl"), lines).expect("records");
    let (code, stdout, stderr) = run_with_timeout(
        Command::new(hxlab()).arg("report").arg(dir.path()),
        Duration::from_secs(20),
    );
    assert_eq!(code, Some(0), "{stderr}");
    let md = std::fs::read_to_string(dir.path().join("report.md")).expect("md");
    assert!(md.contains("| delay | 0ms | 40ms |"), "{md}");
    assert!(
        md.contains("| *h2 (published)* | 0.48 | 0.5 |")
            || md.contains("| *h2 (published)* | 0.480 | 0.500 |"),
        "{md}"
    );
    assert!(md.contains("delay 40ms: h2 vs h1-tls: 0.51× ("), "{md}");
    assert!(stdout.contains("h2 (published)"), "{stdout}");
    let html = std::fs::read_to_string(dir.path().join("report.html")).expect("html");
    assert!(html.contains("<svg") && html.contains("class=\"published\""));
    let csv = std::fs::read_to_string(dir.path().join("results.csv")).expect("csv");
    assert_eq!(csv.lines().count(), 17);
    let (code, _, stderr) = run_with_timeout(
        Command::new(hxlab()).args(["report", "/nonexistent/dir"]),
        Duration::from_secs(20),
    );
    assert_eq!(code, Some(2));
    assert!(stderr.contains("is not a results directory"), "{stderr}");
}

/// The typed contracts the lab drives the binary through: `hxlab serve`'s ready file reads as
/// `ReadyFile`, and a `LoadConfig` written as JSON (as the lab writes it for every repetition)
/// is the run `hxlab load --config` makes; a bad file is one line and exit 2.
#[test]
fn ready_file_and_load_config_are_the_lab_contracts() {
    let server = common::Server::start(&[]);
    let ready = hxlab_contract::ReadyFile::read(&server.dir.path().join("ready.json"))
        .expect("the ready file reads as ReadyFile");
    assert_eq!(ready.pid, server.child.id());
    assert_eq!(ready, server.ready);
    let dir = TempDir::new("hxlab-load-config");
    let config = hxlab_load::LoadConfig {
        urls: vec![format!("http://127.0.0.1:{}/bytes/100", ready.plain.port())],
        requests: 7,
        clients: 2,
        proto: hxlab_load::Proto::H1,
        ..Default::default()
    };
    let file = dir.path().join("config.json");
    std::fs::write(&file, config.to_json()).expect("write config");
    let json = dir.path().join("result.json");
    let (code, _, stderr) = run_with_timeout(
        Command::new(hxlab())
            .args(["load", "--no-progress", "-q", "--config"])
            .arg(&file)
            .arg("--json")
            .arg(&json),
        Duration::from_secs(30),
    );
    assert_eq!(code, Some(0), "{stderr}");
    let r: hxlab_core::RunResult =
        serde_json::from_str(&std::fs::read_to_string(&json).expect("result")).expect("parse");
    assert_eq!((r.requests_done, r.connections), (7, 2));
    assert_eq!(r.bytes.body_received, 700);
    for (text, want) in [
        (
            r#"{"urls":["http://127.0.0.1:1/"],"clinets":2}"#.to_string(),
            "unknown field `clinets`",
        ),
        (
            r#"{"urls":["http://127.0.0.1:1/"],"timeout":"soon"}"#.to_string(),
            "soon",
        ),
        (
            r#"{"urls":["http://127.0.0.1:1/"],"push":true,"proto":"h3"}"#.to_string(),
            "--push",
        ),
        (r#"{"urls":[]}"#.to_string(), "URL"),
        ("not json".to_string(), "--config"),
    ] {
        std::fs::write(&file, &text).expect("write");
        let (code, _, stderr) = run_with_timeout(
            Command::new(hxlab()).args(["load", "--config"]).arg(&file),
            Duration::from_secs(20),
        );
        assert_eq!(code, Some(2), "{text}: {stderr}");
        assert!(
            stderr.contains(want),
            "{text}: expected {want:?} in {stderr:?}"
        );
        assert_eq!(stderr.trim().lines().count(), 1, "one line: {stderr:?}");
    }
    // The file is the whole run: run flags beside it are refused.
    let (code, _, _) = run_with_timeout(
        Command::new(hxlab())
            .args(["load", "-n", "3", "--config"])
            .arg(&file),
        Duration::from_secs(20),
    );
    assert_eq!(code, Some(2));
}
