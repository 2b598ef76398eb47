//! Open-model pacing, in a test binary of its own: cargo runs test binaries one after
//! another, so no other test competes for the two cores while the send lag is measured.

mod common;

use common::{hxlab, run_with_timeout};
use serde_json::Value;
use std::process::Command;
use std::time::Duration;

fn load(args: &[&str]) -> (i32, Value, String) {
    let mut cmd = Command::new(hxlab());
    cmd.arg("load")
        .args(args)
        .args(["--json", "-", "--no-progress"]);
    let (code, out, err) = run_with_timeout(&mut cmd, Duration::from_secs(60));
    let json = out
        .lines()
        .find(|l| l.starts_with('{'))
        .and_then(|l| serde_json::from_str(l).ok())
        .unwrap_or(Value::Null);
    (code.unwrap_or(-1), json, err)
}

fn hist(v: &Value, name: &str) -> hxlab_core::LatencyHistogram {
    hxlab_core::LatencyHistogram::from_base64(v["histograms"][name].as_str().expect("histogram"))
        .expect("histogram")
}

/// Open-model sends leave at their due time: the send lag histogram holds every request,
/// and its p99 stays under 1 ms (tokio's 1 ms timer alone puts it at ~1 ms); the benchmark
/// (bench/pacing.sh) holds the real goal.
#[test]
fn open_model_sends_on_time_and_records_send_lag() {
    let server = common::Server::start(&[]);
    let plain = server.ready.plain.to_string();
    let url = format!("http://{plain}/delay/0");
    let (code, v, err) = load(&["--rate", "1000", "-D", "3s", "--proto", "h1", &url]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(v["requests_scheduled"].as_u64(), Some(3000), "{v}");
    let lag = hist(&v, "send_lag");
    assert_eq!(Some(lag.len()), v["requests_started"].as_u64());
    let p99 = lag.quantile(0.99);
    assert!(p99 < 1000, "send lag p99 {p99} us\n{err}");
    assert!(err.contains("send lag:"), "{err}");
    assert!(!err.contains("fell behind"), "{err}");
}
