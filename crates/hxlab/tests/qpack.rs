//! Header compression with independent peers: `hxlab load` and `hxlab trace` against an
//! aioquic server (pylsqpack, which inserts into the QPACK dynamic table when allowed;
//! `tests/peers/qpack_server.py` parses every field section itself and counts the lines that
//! reference the table), and the header-table figures both protocols give against
//! `hxlab serve`.

mod common;

use common::{free_port, hxlab, make_cert, run_with_timeout, tempfile_dir::TempDir, PeerProcess};
use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(60);

/// The aioquic QPACK server on a free port, with its certificate directory.
struct Aioquic {
    process: PeerProcess,
    stdout: BufReader<std::process::ChildStdout>,
    port: u16,
    _dir: TempDir,
}

impl Aioquic {
    fn start() -> Option<Aioquic> {
        let py = common::aioquic_python()?;
        let dir = TempDir::new("hxlab-qpack-aioquic");
        let (cert, key) = make_cert(dir.path())?;
        let port = free_port();
        let mut cmd = Command::new(py);
        cmd.arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/peers/qpack_server.py"
        ))
        .arg(port.to_string())
        .arg(&cert)
        .arg(&key)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
        let mut process = PeerProcess::spawn(&mut cmd).with_grace(Duration::from_secs(5));
        // It says "listening" once its socket is bound.
        let mut stdout = BufReader::new(process.stdout.take().expect("stdout"));
        let mut line = String::new();
        stdout.read_line(&mut line).expect("read");
        assert_eq!(line.trim(), "listening", "{}", process.stderr_text());
        Some(Aioquic {
            process,
            stdout,
            port,
            _dir: dir,
        })
    }

    fn url(&self, path: &str) -> String {
        format!("https://127.0.0.1:{}{path}", self.port)
    }

    /// Stops it (SIGTERM: it prints its counts and exits) and returns the counts.
    fn counts(mut self) -> Value {
        // SAFETY: kill(2) on the PID of a child this test started and has not reaped.
        unsafe { libc::kill(self.process.id() as libc::pid_t, libc::SIGTERM) };
        let mut line = String::new();
        self.stdout.read_line(&mut line).expect("read");
        serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("no counts ({e}): {line:?}\n{}", self.process.stderr_text()))
    }
}

fn load_json(args: &[&str]) -> Value {
    let mut cmd = Command::new(hxlab());
    cmd.arg("load").args(args).args(["--json", "-"]);
    let (code, out, err) = run_with_timeout(&mut cmd, LIMIT);
    assert_eq!(code, Some(0), "hxlab load {args:?}: {err}\n{out}");
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("not JSON ({e}): {out}"))
}

fn trace_json(args: &[&str]) -> Vec<Value> {
    let mut cmd = Command::new(hxlab());
    cmd.arg("trace")
        .args(args)
        .args(["--json", "--timeout", "20s"]);
    let (code, out, err) = run_with_timeout(&mut cmd, LIMIT);
    assert_eq!(code, Some(0), "hxlab trace {args:?}: {err}\n{out}");
    out.lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect()
}

/// The HEADERS frames of one direction, in order: (stream id, length, dynamic refs).
fn headers(events: &[Value], dir: &str) -> Vec<(u64, u64, u64)> {
    events
        .iter()
        .filter(|e| e["event"] == "frame" && e["dir"] == dir && e["type"] == "HEADERS")
        .map(|e| {
            (
                e["stream_id"].as_u64().unwrap(),
                e["length"].as_u64().unwrap(),
                e["dynamic_refs"].as_u64().unwrap_or(0),
            )
        })
        .collect()
}

#[test]
fn load_uses_the_dynamic_table_with_aioquic_both_ways() {
    let Some(peer) = Aioquic::start() else { return };
    let url = peer.url("/bytes/100");
    let r = load_json(&[
        "-k", "--proto", "h3", "-n", "100", "-c", "1", "-m", "10", &url,
    ]);
    let counts = peer.counts();
    assert_eq!(r["requests_succeeded"], 100, "{r}");
    assert_eq!(r["bytes"]["body_received"], 100 * 100, "every body intact");
    assert_eq!(counts["requests"], 100, "{counts}");
    // Our SETTINGS as the peer read them.
    assert_eq!(counts["client_max_table_capacity"], 4096, "{counts}");
    assert_eq!(counts["client_blocked_streams"], 100, "{counts}");
    // Our request heads really referenced the table (counted in the field sections the
    // peer received), and so did its responses, which we decoded (all succeeded).
    let refs = counts["request_dynamic_refs"].as_u64().unwrap();
    assert!(refs >= 3 * 90, "{counts}");
    assert!(
        counts["response_dynamic_refs"].as_u64().unwrap() >= 3 * 90,
        "{counts}"
    );
    // Compression shows in the record: h2load's space savings, QPACK streams included.
    let b = &r["bytes"];
    let savings =
        1.0 - b["header_received"].as_f64().unwrap() / b["header_uncompressed"].as_f64().unwrap();
    assert!(savings > 0.7, "{b}");
    // The tables read back from the SETTINGS exchanged: ours, and aioquic's 4096 and 16.
    let t = &r["header_tables"][0];
    assert_eq!(t["protocol"], "h3", "{r}");
    assert_eq!(
        (
            &t["client_advertised"],
            &t["server_advertised"],
            &t["server_blocked_streams"]
        ),
        (&Value::from(4096), &Value::from(4096), &Value::from(16)),
        "{t}"
    );
    assert_eq!(
        (&t["encoder_table"], &t["connections"]),
        (&Value::from(4096), &Value::from(1))
    );
}

#[test]
fn a_table_of_zero_is_static_only_both_ways_from_the_first_request() {
    let Some(peer) = Aioquic::start() else { return };
    let url = peer.url("/bytes/100");
    let r = load_json(&[
        "-k",
        "--proto",
        "h3",
        "-n",
        "20",
        "-c",
        "1",
        "-m",
        "5",
        "--header-table",
        "0",
        &url,
    ]);
    let counts = peer.counts();
    assert_eq!(r["requests_succeeded"], 20, "{r}");
    assert_eq!(counts["client_max_table_capacity"], 0, "{counts}");
    assert_eq!(counts["client_blocked_streams"], 0, "{counts}");
    // No reference either way: we used no table, and allowed the server none.
    assert_eq!(counts["request_dynamic_refs"], 0, "{counts}");
    assert_eq!(counts["response_dynamic_refs"], 0, "{counts}");
    let sizes = counts["request_header_bytes"].as_array().unwrap();
    assert!(sizes.iter().all(|s| s == &sizes[0]), "{sizes:?}");
    let t = &r["header_tables"][0];
    assert_eq!(
        (&t["client_advertised"], &t["encoder_table"]),
        (&Value::from(0), &Value::from(0))
    );
}

#[test]
fn trace_shows_three_requests_shrinking_and_the_peers_inserts() {
    let Some(peer) = Aioquic::start() else { return };
    let url = peer.url("/bytes/100");
    let events = trace_json(&["-k", "--proto", "h3", "-m", "3", &url]);
    let counts = peer.counts();
    let sent = headers(&events, "send");
    let recv = headers(&events, "recv");
    assert_eq!((sent.len(), recv.len()), (3, 3), "{sent:?} {recv:?}");
    // Our third request: a prefix and one byte per field.
    assert!(sent[2].1 <= 10, "{sent:?}");
    assert!(sent.iter().all(|h| h.2 >= 3), "{sent:?}");
    assert_eq!(counts["request_dynamic_refs"], 9, "{counts}");
    // The server's inserts and our acknowledgements are shown as instructions.
    let instr = |dir: &str, what: &str| {
        events.iter().any(|e| {
            e["event"] == "qpack_instruction"
                && e["dir"] == dir
                && e["instruction"].as_str().unwrap_or("").starts_with(what)
        })
    };
    assert!(instr("recv", "Insert With Name Reference"), "{events:?}");
    assert!(instr("send", "Section Acknowledgment"), "{events:?}");
    assert!(
        instr("send", "Set Dynamic Table Capacity 4096"),
        "{events:?}"
    );
    assert!(
        recv[2].1 < recv[0].1 || recv.iter().any(|h| h.2 > 0),
        "{recv:?}"
    );
}
