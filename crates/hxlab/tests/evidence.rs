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

/// Fields of tshark's reading of `capture` decrypted with `keys`, one line per packet
/// matching `filter`, each field's occurrences comma-separated.
fn tshark_fields(capture: &Path, keys: &Path, filter: &str, fields: &[&str]) -> Vec<Vec<String>> {
    let tshark = common::require_peer("tshark").expect("tshark");
    let mut cmd = Command::new(tshark);
    cmd.arg("-r")
        .arg(capture)
        .arg("-o")
        .arg(format!("tls.keylog_file:{}", keys.display()))
        .args([
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
        // h2: frames in order with their types and flags, from the client's side.
        let mut requests = BTreeSet::new();
        for row in tshark_fields(
            &capture,
            keys,
            &format!("http2 && tcp.dstport == {port}"),
            &["tcp.srcport", "http2.type", "http2.flags", "http2.streamid"],
        ) {
            let [src, types, flags, ids] = &row[..] else {
                continue;
            };
            let (types, flags, ids): (Vec<_>, Vec<_>, Vec<_>) = (
                types.split(',').collect(),
                flags.split(',').collect(),
                ids.split(',').collect(),
            );
            for ((t, f), id) in types.iter().zip(&flags).zip(&ids) {
                let f = u8::from_str_radix(f.trim_start_matches("0x"), 16).unwrap_or(0);
                if *t == "1" && f & 1 == 1 {
                    requests.insert((src.clone(), id.to_string()));
                }
            }
        }
        assert_eq!(
            requests.len() as u64,
            h2["requests_done"].as_u64().unwrap(),
            "h2 requests tshark decrypted with {}",
            keys.display()
        );

        // h3: STREAM frames with FIN on client-initiated bidirectional streams, by tshark's
        // connection number.
        let mut requests = BTreeSet::new();
        for row in tshark_fields(
            &capture,
            keys,
            &format!("quic.stream.fin == 1 && udp.dstport == {port}"),
            &[
                "quic.connection.number",
                "quic.stream.stream_id",
                "quic.stream.fin",
            ],
        ) {
            let [src, ids, fins] = &row[..] else {
                continue;
            };
            for (id, fin) in ids.split(',').zip(fins.split(',')) {
                let id: u64 = id.parse().unwrap_or(1);
                if id & 3 == 0 && truthy(fin) {
                    requests.insert((src.clone(), id));
                }
            }
        }
        assert_eq!(
            requests.len() as u64,
            h3["requests_done"].as_u64().unwrap(),
            "h3 requests tshark decrypted with {}",
            keys.display()
        );
    }
}
