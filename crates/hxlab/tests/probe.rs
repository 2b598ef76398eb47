//! `hxlab probe URL` against a real `hxlab serve`: the protocols it offers, read from the
//! typed `ProbeReport` (`--json -`), and the exit codes.

mod common;

use common::{hxlab, run_with_timeout, Server};
use hxlab_contract::ProbeReport;
use std::process::Command;
use std::time::Duration;

fn probe(args: &[&str]) -> (Option<i32>, String, String) {
    run_with_timeout(
        Command::new(hxlab()).arg("probe").args(args),
        Duration::from_secs(30),
    )
}

/// (protocol, offered) in the report's order.
fn offers(r: &ProbeReport) -> Vec<(String, bool)> {
    r.protocols
        .iter()
        .map(|p| (p.protocol.clone(), p.offered))
        .collect()
}

#[test]
fn probe_finds_what_the_server_offers() {
    let server = Server::start(&[]);
    let url = format!("https://{}/bytes/10", server.ready.tls);
    let (code, out, err) = probe(&["-k", &url, "--json", "-"]);
    assert_eq!(code, Some(0), "{err}");
    let r = ProbeReport::from_json(&out).expect("a ProbeReport");
    let yes = |p: &str| (p.to_string(), true);
    assert_eq!(offers(&r), vec![yes("h1-tls"), yes("h2"), yes("h3")]);
    let alt_svc = r.alt_svc.clone().unwrap_or_default();
    assert!(alt_svc.contains("h3="), "Alt-Svc: {alt_svc}");

    let plain = format!("http://{}/", server.ready.plain);
    let (code, out, err) = probe(&[&plain, "--json", "-"]);
    assert_eq!(code, Some(0), "{err}");
    let r = ProbeReport::from_json(&out).expect("a ProbeReport");
    assert_eq!(offers(&r), vec![yes("h1"), yes("h2c")]);

    // The lines name each protocol.
    let (code, out, _) = probe(&["-k", &url]);
    assert_eq!(code, Some(0));
    assert!(out.contains("h3 offered by"), "{out}");
}

#[test]
fn without_alt_svc_h3_is_not_offered_and_nothing_offered_exits_1() {
    let server = Server::start(&["--no-h3"]);
    let url = format!("https://{}/", server.ready.tls);
    let (code, out, err) = probe(&["-k", &url, "--json", "-", "--timeout", "2s"]);
    assert_eq!(code, Some(0), "{err}");
    let r = ProbeReport::from_json(&out).expect("a ProbeReport");
    let h3 = r.protocols.iter().find(|p| p.protocol == "h3").expect("h3");
    assert!(!h3.offered);
    let why = h3.why_not.clone().unwrap_or_default();
    assert!(why.contains("no Alt-Svc"), "{why}");

    let closed = format!("https://127.0.0.1:{}/", common::free_port());
    let (code, _, _) = probe(&["-k", &closed, "--timeout", "1s"]);
    assert_eq!(code, Some(1), "nothing offered");
    for bad in [vec!["ftp://x/"], vec!["-k", &url, "--timeout", "soon"]] {
        let (code, _, err) = probe(&bad);
        assert_eq!(code, Some(2), "{bad:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "one line: {err}");
    }
}
