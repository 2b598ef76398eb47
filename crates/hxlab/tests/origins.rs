//! The lab against servers other than its own (issue 12): a command origin the lab starts
//! (nginx from examples/origins-nginx.toml), a url origin it does not run (an h2o the test
//! starts), `hxlab compare --url` against an nginx that speaks only HTTP/1.1 and against
//! hxlab serve, and a command origin that never listens. Real servers, installed by .ci/run.

mod common;

use common::tempfile_dir::TempDir;
use common::{hxlab, make_cert, require_peer, run_with_timeout, PeerProcess, Server};
use hxlab_report::Record;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn hxlab_cmd() -> Command {
    let mut c = Command::new(hxlab());
    c.env("HXLAB_BIN", hxlab());
    c
}

fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples")
}

fn records(dir: &Path) -> (hxlab_report::ExperimentMeta, Vec<Record>) {
    hxlab_report::load_dir(dir).expect("results directory")
}

/// What a record's connections negotiated, for a protocol name of the matrix.
fn negotiated_as_asked(proto: &str, r: &Record) -> bool {
    let want = match proto {
        "h1" | "h1-tls" => "http/1.1",
        other => other,
    };
    let res = r.result.as_ref().expect("result");
    !res.negotiated.is_empty() && res.negotiated.keys().all(|k| k == want)
}

/// nginx in the foreground from `conf` (rendered by the caller), every file under `dir`.
fn start_nginx(nginx: &Path, dir: &Path, conf: &str, port: u16) -> PeerProcess {
    let path = dir.join("nginx.conf");
    std::fs::write(&path, conf).expect("write nginx.conf");
    let mut cmd = Command::new(nginx);
    cmd.arg("-p").arg(dir).arg("-e").arg(dir.join("error.log"));
    let cmd = cmd.arg("-c").arg(&path).stdin(Stdio::null());
    PeerProcess::start(cmd.stdout(Stdio::null()), &[port])
}

/// The example comparing hxlab serve with nginx, 2 repetitions: every cell ran clean, each
/// negotiated the protocol it asked for, nginx's cells carry its process tree's CPU, and
/// both origins were sent exactly the same number of requests per cell.
#[test]
fn the_nginx_example_runs_every_cell_on_both_origins() {
    if require_peer("nginx").is_none() {
        return;
    }
    let tmp = TempDir::new("hxlab-origins-nginx");
    let out = tmp.path().join("out");
    let (code, stdout, stderr) = run_with_timeout(
        hxlab_cmd()
            .arg("run")
            .arg(examples().join("origins-nginx.toml"))
            .args(["-r", "2", "--no-progress", "-o"])
            .arg(&out),
        Duration::from_secs(300),
    );
    assert_eq!(code, Some(0), "stdout:\n{stdout}\nstderr:\n{stderr}");
    let (meta, recs) = records(&out);
    assert_eq!(recs.len(), 16, "2 origins × 4 protocols × 2 repetitions");
    for r in &recs {
        assert!(
            r.is_clean(),
            "{} rep {}: {}",
            r.cell,
            r.repetition,
            r.failure_text()
        );
        let proto = &r.factors["protocol"];
        assert!(
            negotiated_as_asked(proto, r),
            "{}: {:?}",
            r.cell,
            r.result.as_ref().map(|x| &x.negotiated)
        );
        let cost = r
            .server
            .as_ref()
            .unwrap_or_else(|| panic!("{}: no server cost", r.cell));
        assert!(cost.cpu_s > 0.0, "{}: server CPU {}", r.cell, cost.cpu_s);
        assert_eq!(r.result.as_ref().unwrap().requests_done, 2000, "{}", r.cell);
    }
    for proto in ["h1", "h1-tls", "h2", "h2c"] {
        let count = |origin: &str| -> u64 {
            recs.iter()
                .filter(|r| r.factors["origin"] == origin && r.factors["protocol"] == proto)
                .map(|r| r.result.as_ref().unwrap().requests_done)
                .sum()
        };
        assert_eq!(
            count("hxlab"),
            count("nginx"),
            "{proto}: request counts differ"
        );
        // nginx's own cost: its tree, per request the client completed.
        let nginx = recs
            .iter()
            .find(|r| r.factors["origin"] == "nginx" && r.factors["protocol"] == proto)
            .unwrap();
        assert_eq!(nginx.server.as_ref().unwrap().requests, 2000);
    }
    assert!(
        meta.notes
            .iter()
            .any(|n| n.starts_with("origin nginx: server CPU is its whole process tree's")),
        "{:?}",
        meta.notes
    );
    let md = std::fs::read_to_string(out.join("report.md")).expect("report.md");
    assert!(md.contains("origin=nginx protocol=h2c"), "{md}");
}

/// An h2o the test starts, measured as a url origin: the lab does not run it, so the cells
/// run and the server's CPU is unavailable (absent, and said so), not zero.
#[test]
fn a_url_origin_runs_without_server_cpu() {
    let Some(h2o) = require_peer("h2o") else {
        return;
    };
    let tmp = TempDir::new("hxlab-origins-url");
    let Some((cert, key)) = make_cert(tmp.path()) else {
        return;
    };
    let www = tmp.path().join("www/bytes");
    std::fs::create_dir_all(&www).unwrap();
    std::fs::write(www.join("1024"), vec![b'x'; 1024]).unwrap();
    let (plain, tls) = (common::free_port(), common::free_port());
    let conf = format!(
        "pid-file: {d}/h2o.pid\nerror-log: {d}/error.log\ntemp-buffer-path: {d}\nnum-threads: 1\n{user}\
         listen:\n  host: 127.0.0.1\n  port: {plain}\n\
         listen:\n  host: 127.0.0.1\n  port: {tls}\n  ssl:\n    certificate-file: {c}\n    key-file: {k}\n    ocsp-update-interval: 0\n\
         hosts:\n  default:\n    paths:\n      /:\n        file.dir: {w}\n",
        d = tmp.path().display(),
        user = if common::is_root() { "user: root\n" } else { "" },
        c = cert.display(),
        k = key.display(),
        w = tmp.path().join("www").display(),
    );
    std::fs::write(tmp.path().join("h2o.conf"), conf).unwrap();
    let _h2o = PeerProcess::start(
        Command::new(h2o)
            .args(["-m", "worker", "-c"])
            .arg(tmp.path().join("h2o.conf"))
            .stdin(Stdio::null())
            .stdout(Stdio::null()),
        &[tls, plain],
    );
    let spec = format!(
        "name = \"url-origin\"\nworkload = \"throughput\"\nrepetitions = 2\nrequests = 200\nclients = 2\nstreams = 5\nsize = \"1KiB\"\n\
         origin = \"edge\"\nprotocol = [\"h1\", \"h1-tls\", \"h2\", \"h2c\"]\n\
         [origins.edge]\ncacert = {c:?}\n[origins.edge.urls]\nh1 = \"http://127.0.0.1:{plain}\"\nh2c = \"http://127.0.0.1:{plain}\"\n\"h1-tls\" = \"https://localhost:{tls}\"\nh2 = \"https://localhost:{tls}\"\n",
        c = cert.display().to_string(),
    );
    let file = tmp.path().join("url.toml");
    std::fs::write(&file, spec).unwrap();
    let out = tmp.path().join("out");
    let (code, stdout, stderr) = run_with_timeout(
        hxlab_cmd()
            .arg("run")
            .arg(&file)
            .args(["--no-progress", "-o"])
            .arg(&out),
        Duration::from_secs(180),
    );
    assert_eq!(code, Some(0), "stdout:\n{stdout}\nstderr:\n{stderr}");
    let (meta, recs) = records(&out);
    assert_eq!(recs.len(), 8);
    for r in &recs {
        assert!(r.is_clean(), "{}: {}", r.cell, r.failure_text());
        assert!(negotiated_as_asked(&r.factors["protocol"], r), "{}", r.cell);
        assert_eq!(r.result.as_ref().unwrap().requests_done, 200);
        assert!(
            r.server.is_none(),
            "{}: a url origin has no server cost",
            r.cell
        );
    }
    assert!(
        meta.notes
            .iter()
            .any(|n| n.contains("origin edge: server CPU unavailable")),
        "{:?}",
        meta.notes
    );
    assert!(stdout.contains("server CPU unavailable"), "{stdout}");
}

/// `hxlab compare --url` at an nginx that speaks only HTTP/1.1 over TLS: a report, not an
/// error, saying plainly that h2 and h3 are not offered; at hxlab serve: all three.
#[test]
fn compare_url_says_what_the_host_does_not_offer() {
    let Some(nginx) = require_peer("nginx") else {
        return;
    };
    let tmp = TempDir::new("hxlab-compare-url");
    let Some((cert, key)) = make_cert(tmp.path()) else {
        return;
    };
    std::fs::create_dir_all(tmp.path().join("www")).unwrap();
    std::fs::write(tmp.path().join("www/app.js"), vec![b'a'; 5000]).unwrap();
    let port = common::free_port();
    let d = tmp.path().display();
    let conf = format!(
        "daemon off;\nmaster_process off;\npid {d}/nginx.pid;\nerror_log {d}/error.log;\nevents {{}}\n\
         http {{\n access_log off;\n client_body_temp_path {d}/cb; proxy_temp_path {d}/px; fastcgi_temp_path {d}/fc; uwsgi_temp_path {d}/uw; scgi_temp_path {d}/sc;\n\
         server {{ listen 127.0.0.1:{port} ssl; ssl_certificate {c}; ssl_certificate_key {k}; root {d}/www; }}\n}}\n",
        c = cert.display(),
        k = key.display()
    );
    let _nginx = start_nginx(&nginx, tmp.path(), &conf, port);
    let out = tmp.path().join("out");
    let (code, stdout, stderr) = run_with_timeout(
        hxlab_cmd()
            .args([
                "compare",
                "--url",
                &format!("https://localhost:{port}/app.js"),
                "--cacert",
            ])
            .arg(&cert)
            .args(["-r", "2", "--no-progress", "-o"])
            .arg(&out),
        Duration::from_secs(180),
    );
    assert_eq!(code, Some(0), "stdout:\n{stdout}\nstderr:\n{stderr}");
    assert!(
        stdout.contains(&format!("h1-tls offered by localhost:{port}")),
        "{stdout}"
    );
    assert!(
        stdout.contains(&format!(
            "h2 not offered by localhost:{port}: the server chose HTTP/1.1"
        )),
        "{stdout}"
    );
    assert!(
        stdout.contains(&format!("h3 not offered by localhost:{port}")),
        "{stdout}"
    );
    for sub in ["resources", "throughput"] {
        let (meta, recs) = records(&out.join(sub));
        assert!(
            meta.notes.iter().any(|n| n.starts_with("h2 not offered")),
            "{sub}: {:?}",
            meta.notes
        );
        let ran: Vec<&Record> = recs.iter().filter(|r| r.skipped.is_none()).collect();
        assert!(
            !ran.is_empty()
                && ran
                    .iter()
                    .all(|r| r.is_clean() && r.factors["protocol"] == "h1-tls"),
            "{sub}"
        );
        assert!(
            recs.iter()
                .any(|r| r.factors["protocol"] == "h3" && r.skipped.is_some()),
            "{sub}"
        );
        let md = std::fs::read_to_string(out.join(sub).join("report.md")).unwrap();
        assert!(
            md.contains("h2 not offered") && md.contains("h3 not offered"),
            "{sub}: {md}"
        );
    }
    // The same at hxlab serve: every protocol offered and measured.
    let server = Server::start(&[]);
    let tls = server.ready.tls.port().to_string();
    let out = tmp.path().join("out2");
    let (code, stdout, stderr) = run_with_timeout(
        hxlab_cmd()
            .args([
                "compare",
                "--url",
                &format!("https://localhost:{tls}/bytes/4096"),
                "--cacert",
            ])
            .arg(server.cert())
            .args(["-r", "1", "--no-progress", "-o"])
            .arg(&out),
        Duration::from_secs(180),
    );
    assert_eq!(code, Some(0), "stdout:\n{stdout}\nstderr:\n{stderr}");
    for p in ["h1-tls", "h2", "h3"] {
        assert!(
            stdout.contains(&format!("{p} offered by localhost:{tls}")),
            "{p}: {stdout}"
        );
    }
    let (_, recs) = records(&out.join("resources"));
    assert_eq!(recs.len(), 6);
    assert!(recs
        .iter()
        .all(|r| r.is_clean() && negotiated_as_asked(&r.factors["protocol"], r)));
}

/// A command origin that never listens: its cells fail with one line naming the port and
/// the end of its stderr, within its ready timeout; the built-in origin's cells still ran
/// and are kept.
#[test]
fn a_command_origin_that_never_listens_fails_its_cells_only() {
    let tmp = TempDir::new("hxlab-origins-mute");
    let spec = "name = \"mute\"\nworkload = \"throughput\"\nrepetitions = 1\nrequests = 50\norigin = [\"hxlab\", \"mute\"]\nprotocol = \"h1\"\n\
        [origins.mute]\ncommand = [\"sh\", \"-c\", \"echo mute: cannot bind port {{plain_port}} >&2; sleep 60\"]\nprotocols = [\"h1\"]\nready_timeout = \"2s\"\n";
    let file = tmp.path().join("mute.toml");
    std::fs::write(&file, spec).unwrap();
    let out = tmp.path().join("out");
    let t = Instant::now();
    let (code, stdout, stderr) = run_with_timeout(
        hxlab_cmd()
            .arg("run")
            .arg(&file)
            .args(["--no-progress", "-o"])
            .arg(&out),
        Duration::from_secs(60),
    );
    assert!(
        t.elapsed() < Duration::from_secs(30),
        "took {:?}",
        t.elapsed()
    );
    assert_eq!(
        code,
        Some(0),
        "the hxlab cell is clean: stdout:\n{stdout}\nstderr:\n{stderr}"
    );
    let (_, recs) = records(&out);
    assert_eq!(recs.len(), 2);
    let hx = recs
        .iter()
        .find(|r| r.factors["origin"] == "hxlab")
        .unwrap();
    assert!(hx.is_clean(), "{}", hx.failure_text());
    let mute = recs.iter().find(|r| r.factors["origin"] == "mute").unwrap();
    let e = mute.error.as_deref().expect("an error");
    let port: String = e
        .split("TCP port ")
        .nth(1)
        .and_then(|s| s.split(' ').next())
        .unwrap_or_else(|| panic!("no port in {e:?}"))
        .to_string();
    assert!(
        e.starts_with("the server did not start: origin mute did not listen on TCP port"),
        "{e}"
    );
    assert!(
        e.contains(&format!("its stderr ends: mute: cannot bind port {port}")),
        "{e}"
    );
    assert!(stderr.contains("did not listen"), "{stderr}");
}

/// A network cell reaches a command origin through `hxlab link` as it reaches hxlab serve:
/// with 100 ms added per round trip, fetching 6 small files from nginx over h1-tls and h2
/// costs at least the TCP, TLS and request round trips (3 × 100 ms), and far less than 10.
#[test]
fn network_cells_reach_a_command_origin_through_the_link() {
    if require_peer("nginx").is_none() || !common::require_root("hxlab link") {
        return;
    }
    let tmp = TempDir::new("hxlab-origins-link");
    let example = std::fs::read_to_string(examples().join("origins-nginx.toml")).unwrap();
    let table = &example[example.find("\n[origins.nginx]\n").expect("nginx table")..];
    let spec = format!(
        "name = \"nginx-link\"\nworkload = \"resources\"\nrepetitions = 1\norigin = \"nginx\"\nprotocol = [\"h1-tls\", \"h2\"]\nresources = 6\nsize = \"1KiB\"\nrtt = \"100ms\"\n{table}"
    );
    let file = tmp.path().join("link.toml");
    std::fs::write(&file, spec).unwrap();
    let out = tmp.path().join("out");
    let (code, stdout, stderr) = run_with_timeout(
        hxlab_cmd()
            .arg("run")
            .arg(&file)
            .args(["--no-progress", "-o"])
            .arg(&out),
        Duration::from_secs(180),
    );
    assert_eq!(code, Some(0), "stdout:\n{stdout}\nstderr:\n{stderr}");
    let (_, recs) = records(&out);
    assert_eq!(recs.len(), 2);
    for r in &recs {
        assert!(r.is_clean(), "{}: {}", r.cell, r.failure_text());
        assert!(negotiated_as_asked(&r.factors["protocol"], r), "{}", r.cell);
        let res = r.result.as_ref().unwrap();
        assert_eq!(res.requests_done, 6);
        assert!(
            (0.3..1.0).contains(&res.duration_s),
            "{}: {} s for 3 round trips of 100 ms",
            r.cell,
            res.duration_s
        );
        assert!(
            r.server.as_ref().is_some_and(|s| s.cpu_s > 0.0),
            "{}",
            r.cell
        );
    }
}
