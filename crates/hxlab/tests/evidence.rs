//! Evidence in the field's own formats: what a result says about where it came from is true,
//! and the TLS/QUIC key log hxlab writes lets tshark decrypt a capture and count the same
//! requests the RunResult counts.

mod common;

use common::{hxlab, run_with_timeout, PeerProcess};
use std::collections::BTreeSet;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

fn out_of(cmd: &mut Command) -> String {
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// `hxlab load --json -` of 12 requests over `proto` on `conns` connections against `url`,
/// with `SSLKEYLOGFILE=keys` (when given).
fn load(proto: &str, url: &str, keys: Option<&Path>, conns: &str) -> serde_json::Value {
    let mut cmd = Command::new(hxlab());
    cmd.args(["load", "--proto", proto, "-k", "-n", "12", "-c", conns])
        .args(["--no-progress", "-q", "--json", "-", url]);
    if let Some(k) = keys {
        cmd.env("SSLKEYLOGFILE", k);
    }
    let (code, out, err) = run_with_timeout(&mut cmd, Duration::from_secs(60));
    assert_eq!(code, Some(0), "{proto}: {err}");
    let v: serde_json::Value = out
        .lines()
        .find(|l| l.starts_with('{'))
        .and_then(|l| serde_json::from_str(l).ok())
        .unwrap_or_else(|| panic!("no RunResult: {out} {err}"));
    assert_eq!(v["status"]["200"], 12, "{v}");
    v
}

/// The commit and kernel a RunResult names are the ones it was produced with, and
/// `hxlab --version` names the same commit.
#[test]
fn a_result_names_the_commit_and_kernel_it_was_produced_with() {
    let server = common::Server::start(&[]);
    let v = load(
        "h2",
        &format!("https://127.0.0.1:{}/bytes/100", server.ready.tls.port()),
        None,
        "1",
    );
    let env = &v["environment"];
    let here = env!("CARGO_MANIFEST_DIR");
    let commit = out_of(Command::new("git").args(["-C", here, "rev-parse", "HEAD"]));
    assert_eq!(env["hxlab"]["commit"], commit.as_str(), "{env}");
    assert_eq!(env["hxlab"]["version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(
        env["kernel"],
        out_of(Command::new("uname").arg("-r")).as_str()
    );
    assert_eq!(
        env["machine"],
        out_of(Command::new("uname").arg("-m")).as_str()
    );
    let default_cc = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_congestion_control")
        .unwrap()
        .trim()
        .to_string();
    assert_eq!(env["default_cc"], default_cc.as_str());
    assert!(env["cpus"].as_u64().is_some_and(|n| n >= 1), "{env}");
    let version = out_of(Command::new(hxlab()).arg("--version"));
    assert!(version.contains(&commit), "{version}");
}

/// Fields of tshark's reading of `capture` (decrypted with `keys` when given, else with
/// the secrets it embeds), one line per packet matching `filter`, each field's occurrences
/// comma-separated.
fn tshark_fields(
    capture: &Path,
    keys: Option<&Path>,
    filter: &str,
    fields: &[&str],
) -> Vec<Vec<String>> {
    let tshark = common::require_peer("tshark").expect("tshark");
    let mut cmd = Command::new(tshark);
    cmd.arg("-r").arg(capture);
    if let Some(k) = keys {
        cmd.arg("-o")
            .arg(format!("tls.keylog_file:{}", k.display()));
    }
    cmd.args([
        "-Y",
        filter,
        "-T",
        "fields",
        "-E",
        "occurrence=a",
        "-E",
        "separator=/t",
    ]);
    for f in fields {
        cmd.args(["-e", f]);
    }
    out_of(&mut cmd)
        .lines()
        .map(|l| l.split('\t').map(str::to_string).collect())
        .collect()
}

/// HTTP/2 requests tshark finds in `capture` to `port`: HEADERS frames with END_STREAM from
/// the client, once per (client port, stream).
fn h2_requests(capture: &Path, keys: Option<&Path>, port: u16) -> usize {
    let mut requests = BTreeSet::new();
    for row in tshark_fields(
        capture,
        keys,
        &format!("http2 && tcp.dstport == {port}"),
        &["tcp.srcport", "http2.type", "http2.flags", "http2.streamid"],
    ) {
        let [src, types, flags, ids] = &row[..] else {
            continue;
        };
        for ((t, f), id) in types.split(',').zip(flags.split(',')).zip(ids.split(',')) {
            let f = u8::from_str_radix(f.trim_start_matches("0x"), 16).unwrap_or(0);
            if t == "1" && f & 1 == 1 {
                requests.insert((src.clone(), id.to_string()));
            }
        }
    }
    requests.len()
}

/// HTTP/3 requests tshark finds in `capture` to `port`: client-initiated bidirectional
/// streams whose STREAM frames end (FIN), once per (tshark's connection number, stream).
fn h3_requests(capture: &Path, keys: Option<&Path>, port: u16) -> usize {
    let mut requests = BTreeSet::new();
    for row in tshark_fields(
        capture,
        keys,
        &format!("quic.stream.fin == 1 && udp.dstport == {port}"),
        &[
            "quic.connection.number",
            "quic.stream.stream_id",
            "quic.stream.fin",
        ],
    ) {
        let [conn, ids, fins] = &row[..] else {
            continue;
        };
        for (id, fin) in ids.split(',').zip(fins.split(',')) {
            let id: u64 = id.parse().unwrap_or(1);
            if id & 3 == 0 && truthy(fin) {
                requests.insert((conn.clone(), id));
            }
        }
    }
    requests.len()
}

fn truthy(s: &str) -> bool {
    matches!(s, "1" | "True" | "true")
}

/// A capture of an h2 and an h3 run on loopback, decrypted by tshark with the key log
/// `hxlab load` wrote (and again with the one `hxlab serve` wrote), shows exactly the
/// requests the RunResults count: HEADERS frames with END_STREAM from the client on h2,
/// client request streams that end (FIN) on h3.
#[test]
fn the_key_log_lets_tshark_decrypt_and_count_the_requests() {
    let (Some(_), Some(dumpcap)) = (
        common::require_peer("tshark"),
        common::require_peer("dumpcap"),
    ) else {
        return;
    };
    let dir = common::tempfile_dir::TempDir::new("hxlab-evidence");
    let (client_keys, server_keys) = (
        dir.path().join("client.keys"),
        dir.path().join("server.keys"),
    );
    let ready = dir.path().join("ready.json");
    let mut server = PeerProcess::spawn(
        Command::new(hxlab())
            .args([
                "serve",
                "--bind",
                "127.0.0.1",
                "--tls-port",
                "0",
                "--plain-port",
                "0",
            ])
            .arg("--ready-file")
            .arg(&ready)
            .env("SSLKEYLOGFILE", &server_keys)
            .stdin(Stdio::null())
            .stdout(Stdio::null()),
    );
    let port = server
        .wait_until("ready", Duration::from_secs(20), || {
            hxlab_contract::ReadyFile::read(&ready).ok()
        })
        .tls
        .port();
    let capture = dir.path().join("run.pcapng");
    let mut cap = PeerProcess::spawn(
        Command::new(dumpcap)
            .args(["-q", "-i", "lo", "-f", &format!("port {port}"), "-w"])
            .arg(&capture)
            .stdin(Stdio::null())
            .stdout(Stdio::null()),
    );
    cap.wait_until("capturing", Duration::from_secs(15), || {
        std::fs::metadata(&capture)
            .ok()
            .filter(|m| m.len() > 0)
            .map(|_| ())
    });
    let url = format!("https://127.0.0.1:{port}/bytes/1000");
    let h2 = load("h2", &url, Some(&client_keys), "3");
    // One QUIC connection: hxlab load sends all its QUIC connections from one socket, and
    // tshark 4.0 then finds no keys for the short-header packets of all but one of them
    // (one 4-tuple, several connections), which would make this a test of tshark.
    let h3 = load("h3", &url, Some(&client_keys), "1");
    // Let dumpcap write out what it holds, then stop it.
    std::thread::sleep(Duration::from_millis(500));
    // SAFETY: kill has no memory preconditions; the pid is our child's.
    unsafe { libc::kill(cap.id() as i32, libc::SIGINT) };
    let stop_by = std::time::Instant::now() + Duration::from_secs(10);
    while cap.try_wait().ok().flatten().is_none() {
        assert!(std::time::Instant::now() < stop_by, "dumpcap did not stop");
        std::thread::sleep(Duration::from_millis(50));
    }
    drop(server);

    let text = std::fs::read_to_string(&client_keys).expect("client key log");
    let randoms: BTreeSet<&str> = text
        .lines()
        .filter(|l| l.starts_with("CLIENT_TRAFFIC_SECRET_0 "))
        .filter_map(|l| l.split(' ').nth(1))
        .collect();
    // Three h2 connections and one h3 connection, one line each.
    assert_eq!(randoms.len(), 4, "{text}");
    let served = std::fs::read_to_string(&server_keys).expect("server key log");
    for r in &randoms {
        assert!(served.contains(r), "the server logged no secret of {r}");
    }

    for keys in [&client_keys, &server_keys] {
        let k = Some(keys.as_path());
        assert_eq!(
            h2_requests(&capture, k, port) as u64,
            h2["requests_done"].as_u64().unwrap(),
            "h2 requests tshark decrypted with {}",
            keys.display()
        );
        assert_eq!(
            h3_requests(&capture, k, port) as u64,
            h3["requests_done"].as_u64().unwrap(),
            "h3 requests tshark decrypted with {}",
            keys.display()
        );
    }
}

/// GET `url` with curl; the body.
fn curl(url: &str) -> String {
    let (code, out, err) = run_with_timeout(
        Command::new("curl").args(["-s", "-g", "-m", "5", "-f", url]),
        Duration::from_secs(10),
    );
    assert_eq!(code, Some(0), "curl {url}: {err}");
    out
}

/// Prometheus' instant query `q`: the first result's value.
fn prometheus_value(port: u16, q: &str) -> Option<f64> {
    let url = format!("http://127.0.0.1:{port}/api/v1/query?query={q}");
    let v: serde_json::Value = serde_json::from_str(&curl(&url)).ok()?;
    v["data"]["result"][0]["value"][1]
        .as_str()
        .and_then(|s| s.parse().ok())
}

/// A real Prometheus scrapes `hxlab serve`'s /metrics and `hxlab load --metrics-listen`;
/// promtool accepts both, and the request counters Prometheus stores equal the RunResult's.
#[test]
fn prometheus_scrapes_serve_and_load_and_counts_what_the_run_counted() {
    let (Some(prometheus), Some(promtool)) = (
        common::require_peer("prometheus"),
        common::require_peer("promtool"),
    ) else {
        return;
    };
    let server = common::Server::start(&[]);
    let plain = server.ready.plain.port();
    let (load_port, prom_port) = (common::free_port(), common::free_port());
    let dir = common::tempfile_dir::TempDir::new("hxlab-prometheus");
    let config = dir.path().join("prometheus.yml");
    std::fs::write(
        &config,
        format!(
            "global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: serve\n    static_configs: [{{targets: ['127.0.0.1:{plain}']}}]\n  - job_name: load\n    static_configs: [{{targets: ['127.0.0.1:{load_port}']}}]\n"
        ),
    )
    .unwrap();
    let _prom = PeerProcess::start(
        Command::new(prometheus)
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.path().join("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{prom_port}"))
            .stdin(Stdio::null())
            .stdout(Stdio::null()),
        &[prom_port],
    );
    // 400 requests at 100/s: four seconds of scrapes while it runs, then four of its totals.
    let run = std::thread::spawn(move || {
        run_with_timeout(
            Command::new(hxlab())
                .args([
                    "load",
                    "-n",
                    "400",
                    "-c",
                    "2",
                    "--rate",
                    "100",
                    "--no-progress",
                ])
                .args([
                    "-q",
                    "--json",
                    "-",
                    "--metrics-linger",
                    "4s",
                    "--metrics-listen",
                ])
                .arg(format!("127.0.0.1:{load_port}"))
                .arg(format!("http://127.0.0.1:{plain}/bytes/100")),
            Duration::from_secs(60),
        )
    });
    // The load's totals, read while it lingers.
    let load_url = format!("http://127.0.0.1:{load_port}/metrics");
    let until = std::time::Instant::now() + Duration::from_secs(30);
    let load_text = loop {
        let text = run_with_timeout(
            Command::new("curl").args(["-s", "-m", "2", &load_url]),
            Duration::from_secs(5),
        )
        .1;
        if text.contains("\nhxlab_load_finished 1\n") {
            break text;
        }
        assert!(std::time::Instant::now() < until, "no totals at {load_url}");
        std::thread::sleep(Duration::from_millis(200));
    };
    let (code, out, err) = run.join().unwrap();
    assert_eq!(code, Some(0), "{err}");
    let result: hxlab_core::RunResult = out
        .lines()
        .find(|l| l.starts_with('{'))
        .and_then(|l| serde_json::from_str(l).ok())
        .expect("RunResult");
    let done = result.requests_done as f64;
    assert_eq!(done, 400.0);
    assert!(
        load_text.contains("hxlab_load_requests_done_total 400\n"),
        "{load_text}"
    );
    for text in [
        load_text,
        curl(&format!("http://127.0.0.1:{plain}/metrics")),
    ] {
        let mut lint = Command::new(&promtool);
        lint.args(["check", "metrics"]).stdin(Stdio::piped());
        let mut child = lint
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        use std::io::Write;
        child
            .stdin
            .take()
            .unwrap()
            .write_all(text.as_bytes())
            .unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "promtool: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    // Prometheus stored the load's totals (scraped during the linger) and the server's count.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let (mut load_seen, mut serve_seen, mut latency_seen) = (None, None, None);
    while std::time::Instant::now() < deadline {
        load_seen = prometheus_value(
            prom_port,
            "max_over_time(hxlab_load_requests_done_total[1m])",
        );
        serve_seen = prometheus_value(
            prom_port,
            "hxlab_serve_requests_total%7Bprotocol%3D%22h1%22%7D",
        );
        latency_seen = prometheus_value(
            prom_port,
            "hxlab_serve_latency_seconds_count%7Bprotocol%3D%22h1%22%7D",
        );
        if load_seen == Some(done) && serve_seen == Some(done) && latency_seen == Some(done) {
            break;
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    assert_eq!(
        load_seen,
        Some(done),
        "hxlab_load_requests_done_total in Prometheus"
    );
    assert_eq!(
        serve_seen,
        Some(done),
        "hxlab_serve_requests_total{{protocol=\"h1\"}}"
    );
    assert_eq!(
        latency_seen,
        Some(done),
        "hxlab_serve_latency_seconds_count{{protocol=\"h1\"}}: every response timed"
    );
}

/// The origin times every response it counts, per protocol: on h1, h2 and h3, six
/// `/delay/300` requests each are six in that protocol's latency histogram on `/stats`, none
/// in a bucket below 300 ms (the delay is a floor), their sum at least 6 × 300 ms; the
/// `/stats` requests themselves are not counted; `/metrics` carries the same histograms.
#[test]
fn serve_times_every_response_per_protocol() {
    let server = common::Server::start(&[]);
    let (plain, tls) = (server.ready.plain.port(), server.ready.tls.port());
    for (proto, url) in [
        ("h1", format!("http://127.0.0.1:{plain}/delay/300")),
        ("h2", format!("https://127.0.0.1:{tls}/delay/300")),
        ("h3", format!("https://127.0.0.1:{tls}/delay/300")),
    ] {
        let (code, _, err) = run_with_timeout(
            Command::new(hxlab())
                .args(["load", "-k", "--proto", proto, "-n", "6", "-c", "2"])
                .args(["--no-progress", "-q", &url]),
            Duration::from_secs(60),
        );
        assert_eq!(code, Some(0), "{proto}: {err}");
    }
    let stats =
        hxlab_contract::StatsSnapshot::from_json(&curl(&format!("http://127.0.0.1:{plain}/stats")))
            .expect("/stats");
    let floor = hxlab_contract::SERVE_LATENCY_BUCKETS_US
        .iter()
        .position(|b| *b >= 300_000)
        .unwrap();
    for key in ["h1", "h2", "h3"] {
        let p = &stats.by_protocol[key];
        assert_eq!(p.requests, 6, "{key}");
        assert_eq!(p.latency.count(), 6, "{key}: {:?}", p.latency);
        assert_eq!(
            p.latency.counts.len(),
            hxlab_contract::SERVE_LATENCY_BUCKETS_US.len() + 1
        );
        assert!(
            p.latency.counts[..floor].iter().all(|n| *n == 0),
            "{key}: a /delay/300 response under 300 ms: {:?}",
            p.latency
        );
        assert!(p.latency.sum_us >= 6 * 300_000, "{key}: {:?}", p.latency);
    }
    assert_eq!(stats.total.latency.count(), 18);
    let text = curl(&format!("http://127.0.0.1:{plain}/metrics"));
    for key in ["h1", "h2", "h3"] {
        for line in [
            format!("hxlab_serve_latency_seconds_count{{protocol=\"{key}\"}} 6\n"),
            format!("hxlab_serve_latency_seconds_bucket{{le=\"0.25\",protocol=\"{key}\"}} 0\n"),
            format!("hxlab_serve_latency_seconds_bucket{{le=\"+Inf\",protocol=\"{key}\"}} 6\n"),
        ] {
            assert!(text.contains(&line), "{line}not in:\n{text}");
        }
    }
}

/// The records of a JSON-SEQ file (RS-separated JSON texts), each parsed.
/// The same JSON, numbers that are not integers equal to f32 precision (the qlog crate keeps
/// RTTs as f32).
fn same_json(a: &serde_json::Value, b: &serde_json::Value) -> bool {
    use serde_json::Value::{Array, Number, Object};
    match (a, b) {
        (Number(x), Number(y)) if x.is_f64() || y.is_f64() => {
            let (x, y) = (
                x.as_f64().unwrap_or(f64::NAN),
                y.as_f64().unwrap_or(f64::NAN),
            );
            (x - y).abs() <= 1e-6 * x.abs().max(y.abs()).max(1.0)
        }
        (Array(x), Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(x, y)| same_json(x, y)),
        (Object(x), Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| same_json(v, w)))
        }
        _ => a == b,
    }
}

/// How many `frame_type` frames the events `name` (`http:frame_created` or
/// `http:frame_parsed`) record.
fn frames_of(records: &[serde_json::Value], name: &str, frame_type: &str) -> usize {
    frames(records, name, frame_type).count()
}

/// The `frame_type` frames of the events `name`.
fn frames<'a>(
    records: &'a [serde_json::Value],
    name: &'a str,
    frame_type: &'a str,
) -> impl Iterator<Item = &'a serde_json::Value> {
    records
        .iter()
        .filter(move |r| r["name"] == name && r["data"]["frame"]["frame_type"] == frame_type)
}

/// How many HEADERS frames of the events `name` carry the field `field: value`.
fn headers_with(records: &[serde_json::Value], name: &str, field: &str, value: &str) -> usize {
    frames(records, name, "headers")
        .filter(|r| {
            r["data"]["frame"]["headers"]
                .as_array()
                .is_some_and(|h| h.iter().any(|f| f["name"] == field && f["value"] == value))
        })
        .count()
}

/// Checks a qlog file against qlog's own data model, strictly:
/// - the header and every event read with the `qlog` crate (the one quinn-proto writes its
///   transport events with), and every event but QPACK's (transport, recovery, http, ...)
///   written back from the crate's types is the same JSON, so no name or field is unknown,
///   misnamed, missing or extra;
/// - every `qpack:instruction_*` event has exactly the fields draft-ietf-quic-qlog-h3-events
///   (-01 to -04, qlog 0.3) defines for its instruction type (the crate models QPACK
///   instructions in a shape of its own, so they are checked here).
fn check_qlog_schema(path: &Path) {
    let file = std::fs::File::open(path).expect("qlog file");
    let mut reader = qlog::reader::QlogSeqReader::new(Box::new(std::io::BufReader::new(file)))
        .unwrap_or_else(|e| panic!("{}: header: {e}", path.display()));
    assert_eq!(reader.qlog.qlog_version, "0.3", "{}", path.display());
    let mut read = 0;
    for _ in reader.by_ref() {
        read += 1;
    }
    let records = json_seq(path);
    assert_eq!(
        read,
        records.len() - 1,
        "{}: events the qlog crate read",
        path.display()
    );
    for r in &records[1..] {
        let name = r["name"].as_str().unwrap_or_default();
        if !name.starts_with("qpack:") {
            let ev: qlog::events::Event = serde_json::from_value(r.clone())
                .unwrap_or_else(|e| panic!("{}: {e}: {r}", path.display()));
            let back = serde_json::to_value(&ev.data).unwrap();
            let want = serde_json::json!({"name": r["name"], "data": r["data"]});
            assert!(
                same_json(&back, &want),
                "{}: the qlog crate reads it otherwise:\n{back}\n{want}",
                path.display()
            );
        } else if name.starts_with("qpack:instruction_") {
            let d = r["data"].as_object().expect("data");
            let keys: BTreeSet<&str> = d.keys().map(|k| k.as_str()).collect();
            assert_eq!(keys, BTreeSet::from(["instruction", "raw"]), "{r}");
            assert!(d["raw"]["length"].as_u64().is_some_and(|n| n > 0), "{r}");
            let ins = d["instruction"].as_object().expect("instruction");
            let t = ins["instruction_type"].as_str().unwrap_or_default();
            let fields: &[&str] = match t {
                "set_dynamic_table_capacity" => &["capacity"],
                "insert_with_name_reference" => &[
                    "table_type",
                    "name_index",
                    "huffman_encoded_value",
                    "value_length",
                ],
                "insert_without_name_reference" => &[
                    "huffman_encoded_name",
                    "name_length",
                    "huffman_encoded_value",
                    "value_length",
                ],
                "duplicate" => &["index"],
                "section_acknowledgement" | "stream_cancellation" => &["stream_id"],
                "insert_count_increment" => &["increment"],
                _ => panic!("{}: unknown instruction type: {r}", path.display()),
            };
            let mut want: BTreeSet<&str> = fields.iter().copied().collect();
            want.insert("instruction_type");
            let keys: BTreeSet<&str> = ins.keys().map(|k| k.as_str()).collect();
            assert_eq!(keys, want, "{r}");
        } else {
            panic!(
                "{}: a QPACK event qlog does not define: {r}",
                path.display()
            );
        }
    }
}

fn json_seq(path: &Path) -> Vec<serde_json::Value> {
    let text = std::fs::read_to_string(path).expect("qlog file");
    assert!(
        text.starts_with('\u{1e}'),
        "{}: not JSON-SEQ",
        path.display()
    );
    text.split('\u{1e}')
        .filter(|r| !r.trim().is_empty())
        .map(|r| {
            serde_json::from_str(r.trim())
                .unwrap_or_else(|e| panic!("{}: a record is no JSON ({e}): {r}", path.display()))
        })
        .collect()
}

/// `hxlab load --qlog DIR` (and h2load's `--qlog-file-base`) writes one JSON-SEQ qlog per
/// QUIC connection, named as h2load names them (`BASE.WORKER.CLIENT.sqlog`): a qlog 0.3
/// header, quinn's packet events, and an HTTP/3 HEADERS frame created and one parsed for
/// every request the RunResult counts. `hxlab serve --qlog DIR`
/// writes one per connection it served, with its packet events and, in the same trace, an
/// HTTP/3 HEADERS frame parsed and one created (and a DATA frame created) for every request
/// the clients counted, and the clients' QPACK encoder-stream instructions parsed.
#[test]
fn load_and_serve_write_a_qlog_per_quic_connection_with_every_request() {
    let dir = common::tempfile_dir::TempDir::new("hxlab-qlog");
    let served = dir.path().join("served");
    let server = common::Server::start(&["--qlog", served.to_str().unwrap()]);
    let url = format!("https://127.0.0.1:{}/bytes/1000", server.ready.tls.port());
    for (flag, value, prefix) in [
        ("--qlog", dir.path().join("q"), "load"),
        (
            "--qlog-file-base",
            dir.path().join("h2load-style"),
            "h2load-style",
        ),
    ] {
        let (code, out, err) = run_with_timeout(
            Command::new(hxlab())
                .args([
                    "load",
                    "--proto",
                    "h3",
                    "-k",
                    "-n",
                    "12",
                    "-c",
                    "3",
                    "--no-progress",
                ])
                .args(["-q", "--json", "-", flag])
                .arg(&value)
                .arg(&url),
            Duration::from_secs(60),
        );
        assert_eq!(code, Some(0), "{flag}: {err}");
        let v: hxlab_core::RunResult = out
            .lines()
            .find(|l| l.starts_with('{'))
            .and_then(|l| serde_json::from_str(l).ok())
            .expect("RunResult");
        let folder = if flag == "--qlog" {
            value.clone()
        } else {
            dir.path().to_path_buf()
        };
        let files: Vec<_> = std::fs::read_dir(&folder)
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .filter(|p| {
                let name = p.file_name().unwrap().to_string_lossy().into_owned();
                name.starts_with(prefix) && name.ends_with(".sqlog")
            })
            .collect();
        assert_eq!(files.len() as u64, v.connections, "{flag}: {files:?}");
        // h2load's names: BASE.WORKER.CLIENT.sqlog (one worker, three clients here).
        let mut names: Vec<String> = files
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        names.sort();
        let want: Vec<String> = (0..3).map(|c| format!("{prefix}.0.{c}.sqlog")).collect();
        assert_eq!(names, want, "{flag}");
        let (mut created, mut parsed) = (0, 0);
        for f in &files {
            check_qlog_schema(f);
            let records = json_seq(f);
            assert_eq!(records[0]["qlog_version"], "0.3", "{}", f.display());
            assert_eq!(records[0]["qlog_format"], "JSON-SEQ");
            // Every response's fields, decoded (through the dynamic table, rebuilt from the
            // server's encoder stream): `:status: 200`.
            assert!(
                headers_with(&records, "http:frame_parsed", ":status", "200")
                    == frames_of(&records, "http:frame_parsed", "headers"),
                "{}",
                f.display()
            );
            let named = |n: &str| records.iter().filter(|r| r["name"] == n).count();
            assert!(named("transport:packet_sent") > 0, "{}", f.display());
            assert!(named("transport:packet_received") > 0, "{}", f.display());
            created += frames_of(&records, "http:frame_created", "headers");
            parsed += frames_of(&records, "http:frame_parsed", "headers");
            // The QPACK streams' instructions: our table's capacity set on our encoder stream,
            // and the server's inserts or acknowledgements read.
            let instruction = |n: &str, t: &str| {
                records
                    .iter()
                    .any(|r| r["name"] == n && r["data"]["instruction"]["instruction_type"] == t)
            };
            assert!(
                instruction("qpack:instruction_created", "set_dynamic_table_capacity"),
                "{}",
                f.display()
            );
            assert!(
                records
                    .iter()
                    .any(|r| r["name"] == "qpack:instruction_parsed"),
                "{}",
                f.display()
            );
            assert!(
                records.iter().skip(1).all(|r| r["time"].is_number()),
                "{}",
                f.display()
            );
        }
        let done = v.requests_done as usize;
        assert_eq!(done, 12);
        assert_eq!(created, done, "{flag}: HEADERS sent");
        assert_eq!(parsed, done, "{flag}: HEADERS read");
    }
    // Both runs' connections, each in a file of the server's, with its packets.
    let files: Vec<_> = std::fs::read_dir(&served)
        .expect("serve --qlog DIR")
        .flatten()
        .map(|e| e.path())
        .collect();
    assert_eq!(files.len(), 6, "{files:?}");
    let (mut parsed, mut created, mut data) = (0, 0, 0);
    for f in &files {
        check_qlog_schema(f);
        let records = json_seq(f);
        assert_eq!(records[0]["qlog_version"], "0.3", "{}", f.display());
        assert_eq!(records[0]["trace"]["description"], "server");
        // Each request's fields as the origin decoded them, and each response's as it wrote
        // them; the client's three unidirectional streams typed.
        let requests = frames_of(&records, "http:frame_parsed", "headers");
        assert_eq!(
            headers_with(&records, "http:frame_parsed", ":path", "/bytes/1000"),
            requests,
            "{}",
            f.display()
        );
        assert_eq!(
            headers_with(&records, "http:frame_created", ":status", "200"),
            frames_of(&records, "http:frame_created", "headers"),
            "{}",
            f.display()
        );
        let types: BTreeSet<String> = records
            .iter()
            .filter(|r| r["name"] == "http:stream_type_set" && r["data"]["owner"] == "remote")
            .map(|r| {
                r["data"]["stream_type"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string()
            })
            .collect();
        assert_eq!(
            types,
            BTreeSet::from(["control", "qpack_decode", "qpack_encode"].map(String::from)),
            "{}",
            f.display()
        );
        assert!(
            records.iter().any(|r| r["name"] == "transport:packet_sent"),
            "{}",
            f.display()
        );
        // Each side's control stream opens with SETTINGS: ours created, the client's parsed.
        assert_eq!(
            frames_of(&records, "http:frame_created", "settings"),
            1,
            "{}",
            f.display()
        );
        assert_eq!(
            frames_of(&records, "http:frame_parsed", "settings"),
            1,
            "{}",
            f.display()
        );
        parsed += frames_of(&records, "http:frame_parsed", "headers");
        created += frames_of(&records, "http:frame_created", "headers");
        data += frames(&records, "http:frame_created", "data")
            .filter(|r| r["data"]["length"] == 1000)
            .count();
        // The client's encoder stream set its table's capacity; this side read it.
        assert!(
            records
                .iter()
                .any(|r| r["name"] == "qpack:instruction_parsed"
                    && r["data"]["instruction"]["instruction_type"]
                        == "set_dynamic_table_capacity"),
            "{}",
            f.display()
        );
    }
    assert_eq!(parsed, 24, "request HEADERS read by the origin");
    assert_eq!(created, 24, "response HEADERS written by the origin");
    assert_eq!(data, 24, "1000-byte DATA frames written by the origin");
}

/// `hxlab link --pcap` of an h2 and an h3 run, with SSLKEYLOGFILE set: tshark decrypts it
/// with the secrets the file embeds (no key log given to it) and counts the requests the
/// RunResults count; with loss, every packet the link dropped is in the capture on the
/// `dropped` interface, as many as the link's counters say.
#[test]
fn a_link_capture_opens_decrypted_in_tshark_with_its_drops() {
    if !common::require_root("the link (network namespaces, TUN devices)") {
        return;
    }
    let Some(tshark) = common::require_peer("tshark") else {
        return;
    };
    let server = common::Server::start(&[]);
    let port = server.ready.tls.port();
    let dir = common::tempfile_dir::TempDir::new("hxlab-pcap");
    let capture = dir.path().join("run.pcapng");
    let (h2_json, h3_json) = (dir.path().join("h2.json"), dir.path().join("h3.json"));
    let script = format!(
        "{hx} load --proto h2 -k -n 20 -c 2 --no-progress -q --json {a} https://$HXLAB_LINK_HOST:{port}/bytes/5000 && \
         {hx} load --proto h3 -k -n 10 -c 1 --no-progress -q --json {b} https://$HXLAB_LINK_HOST:{port}/bytes/5000",
        hx = hxlab().display(),
        a = h2_json.display(),
        b = h3_json.display()
    );
    let (code, _, err) = run_with_timeout(
        Command::new(hxlab())
            .env("SSLKEYLOGFILE", dir.path().join("keys"))
            .args([
                "link",
                "--delay",
                "5ms",
                "--expose",
                &port.to_string(),
                "--pcap",
            ])
            .arg(&capture)
            .args(["--", "sh", "-c", &script]),
        Duration::from_secs(90),
    );
    assert_eq!(code, Some(0), "{err}");
    let done = |f: &Path| -> u64 {
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(f).unwrap()).unwrap();
        v["requests_done"].as_u64().unwrap()
    };
    assert_eq!(
        h2_requests(&capture, None, port) as u64,
        done(&h2_json),
        "h2 requests decrypted from the capture"
    );
    assert_eq!(
        h3_requests(&capture, None, port) as u64,
        done(&h3_json),
        "h3 requests decrypted from the capture"
    );

    // Drops: 10 % loss each way on an h2 run; the capture's `dropped` interface holds
    // exactly the segments the link counted as lost.
    let lossy = dir.path().join("lossy.pcapng");
    let stats = dir.path().join("stats.json");
    let script = format!(
        "{} load --proto h2 -k -n 20 -c 1 --no-progress -q https://$HXLAB_LINK_HOST:{port}/bytes/20000",
        hxlab().display()
    );
    let (code, _, err) = run_with_timeout(
        Command::new(hxlab())
            .args(["link", "--delay", "2ms", "--loss", "10%", "--seed", "7"])
            .args(["--expose", &port.to_string(), "--stats"])
            .arg(&stats)
            .arg("--pcap")
            .arg(&lossy)
            .args(["--", "sh", "-c", &script]),
        Duration::from_secs(90),
    );
    assert_eq!(code, Some(0), "{err}");
    let s = hxlab_contract::LinkStatsFile::from_json(&std::fs::read_to_string(&stats).unwrap())
        .expect("hxlab link --stats");
    let lost = s.down.dropped_loss + s.up.dropped_loss;
    assert!(lost > 0, "10 % loss dropped nothing: {s:?}");
    let mut cmd = Command::new(&tshark);
    cmd.arg("-r").arg(&lossy).args([
        "-Y",
        "frame.interface_id == 2",
        "-T",
        "fields",
        "-e",
        "frame.comment",
    ]);
    let dropped = out_of(&mut cmd);
    assert_eq!(dropped.lines().count() as u64, lost, "{dropped}");
    assert!(
        dropped.lines().all(|l| l.starts_with("dropped by loss, ")),
        "{dropped}"
    );
}

/// `hxlab compare --pcap --qlog` keeps a capture of every network cell and the qlogs of
/// every HTTP/3 cell's connections under evidence/, named by cell.
#[test]
fn the_lab_keeps_a_capture_and_qlogs_per_cell() {
    if !common::require_root("the link (network namespaces, TUN devices)") {
        return;
    }
    let Some(tshark) = common::require_peer("tshark") else {
        return;
    };
    let dir = common::tempfile_dir::TempDir::new("hxlab-lab-evidence");
    let out = dir.path().join("cmp");
    let (code, _, err) = run_with_timeout(
        Command::new(hxlab())
            .args([
                "compare",
                "--set",
                "protocol=h1-tls,h2,h3",
                "--set",
                "delay=10ms",
            ])
            .args([
                "--set",
                "resources=4",
                "-r",
                "1",
                "--no-progress",
                "--pcap",
                "--qlog",
            ])
            .arg("--out")
            .arg(&out),
        Duration::from_secs(300),
    );
    assert_eq!(code, Some(0), "{err}");
    let evidence: Vec<String> = std::fs::read_dir(out.join("evidence"))
        .expect("evidence/")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    for proto in ["h1-tls", "h2", "h3"] {
        let name = evidence
            .iter()
            .find(|n| {
                n.starts_with(&format!("protocol={proto}_profile=Regular_4G"))
                    && n.ends_with(".pcapng")
            })
            .unwrap_or_else(|| panic!("no capture of the {proto} network cell in {evidence:?}"));
        let frames = out_of(
            Command::new(&tshark)
                .arg("-r")
                .arg(out.join("evidence").join(name))
                .args(["-T", "fields", "-e", "frame.number"]),
        );
        assert!(frames.lines().count() > 10, "{name}: {frames}");
    }
    let qlogs: Vec<_> = evidence
        .iter()
        .filter(|n| n.starts_with("protocol=h3") && !n.ends_with(".pcapng"))
        .collect();
    assert_eq!(qlogs.len(), 2, "{evidence:?}");
    for q in qlogs {
        let files: Vec<_> = std::fs::read_dir(out.join("evidence").join(q))
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .collect();
        assert!(!files.is_empty(), "{q}");
        for f in files {
            assert_eq!(json_seq(&f)[0]["qlog_version"], "0.3");
        }
    }
    assert!(
        !evidence
            .iter()
            .any(|n| n.starts_with("protocol=h2") && !n.ends_with(".pcapng")),
        "{evidence:?}"
    );
}

/// `hxlab page` hands SSLKEYLOGFILE to Chromium (its TLS and QUIC secrets land there) and
/// keeps its NetLog per run with `--qlog DIR`.
#[test]
fn page_gives_the_browser_the_key_log_and_keeps_its_netlog() {
    if common::require_peer("chromium").is_none() {
        return;
    }
    let dir = common::tempfile_dir::TempDir::new("hxlab-page-evidence");
    let keys = dir.path().join("keys");
    let netlogs = dir.path().join("netlog");
    let (code, _, err) = run_with_timeout(
        Command::new(hxlab())
            .env("SSLKEYLOGFILE", &keys)
            .args([
                "page",
                "--synthetic",
                "n=2,size=1KiB",
                "--proto",
                "h3",
                "--runs",
                "2",
            ])
            .arg("--qlog")
            .arg(&netlogs),
        Duration::from_secs(120),
    );
    assert_eq!(code, Some(0), "{err}");
    let text = std::fs::read_to_string(&keys).expect("the browser's key log");
    assert!(
        text.lines()
            .any(|l| l.starts_with("CLIENT_TRAFFIC_SECRET_0 ")),
        "{text}"
    );
    for run in 1..=2 {
        let f = netlogs.join(format!("netlog.run-{run}.json"));
        let v: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(&f).unwrap_or_else(|e| panic!("{}: {e}", f.display())),
        )
        .unwrap_or_else(|e| panic!("{}: not JSON ({e})", f.display()));
        assert!(v["constants"].is_object(), "{}", f.display());
        let events = v["events"].as_array().expect("events");
        assert!(!events.is_empty(), "{}", f.display());
    }
}
