//! The JSON Schemas of docs/schema/ (`hxlab schema`) against what hxlab really writes and
//! reads, judged by an independent validator (Python's `jsonschema`, Draft 2020-12): the
//! committed files are what the binary generates; real documents are valid — a RunResult
//! of `hxlab load --json` against `hxlab serve` (h2, h3), the ready file, `/stats`,
//! `/replay-stats`, `hxlab page --json`, `hxlab probe --json`, and every config, job line
//! and record the lab hands its children or writes (captured on the way through
//! `HXLAB_BIN`); documents with an unknown property, a missing required field or a wrongly
//! typed one are refused; and each schema's `required` is exactly what serde cannot do
//! without, at every depth.

mod common;

use common::{hxlab, run_with_timeout, tempfile_dir::TempDir, Server};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(60);

/// docs/schema/ of this checkout.
fn schema_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/schema")
}

/// The schema docs/schema/NAME.schema.json, parsed.
fn schema(name: &str) -> Value {
    let path = schema_dir().join(format!("{name}.schema.json"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    serde_json::from_str(&text).expect("a schema is JSON")
}

/// Checks the schema (against the 2020-12 meta-schema) and then each document of the JSON
/// array on stdin; prints one JSON line per document: its errors, empty when valid.
const VALIDATE_PY: &str = r#"
import json, sys
from jsonschema import Draft202012Validator as V
schema = json.load(open(sys.argv[1]))
V.check_schema(schema)
v = V(schema, format_checker=V.FORMAT_CHECKER)
for doc in json.load(sys.stdin):
    errs = sorted(v.iter_errors(doc), key=lambda e: list(map(str, e.absolute_path)))
    # With the errors of the branches an anyOf/oneOf tried, which say why.
    errs = [s for e in errs for s in [e] + sorted(e.context, key=lambda c: c.message)]
    print(json.dumps(["/".join(map(str, e.absolute_path)) + ": " + e.message for e in errs]))
"#;

/// Python's `jsonschema`, run on the committed schemas.
struct Validator {
    python: String,
}

impl Validator {
    /// The validator, or None after skipping (a failure under CI) when it is not installed.
    fn new() -> Option<Validator> {
        common::jsonschema_python().map(|python| Validator { python })
    }

    /// The errors of each document against docs/schema/NAME.schema.json (empty: valid).
    fn errors(&self, name: &str, docs: &[Value]) -> Vec<Vec<String>> {
        use std::io::Write;
        let path = schema_dir().join(format!("{name}.schema.json"));
        let mut child = Command::new(&self.python)
            .args(["-I", "-c", VALIDATE_PY])
            .arg(&path)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start python");
        let input = serde_json::to_vec(docs).expect("json");
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(&input)
            .expect("send the documents");
        let out = child.wait_with_output().expect("python");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "jsonschema on {name}: {stderr}");
        let lines: Vec<Vec<String>> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|l| serde_json::from_str(l).expect("a line of errors"))
            .collect();
        assert_eq!(lines.len(), docs.len(), "one answer per document: {stderr}");
        lines
    }

    /// Fails, naming the document and its errors, unless every one of `docs` is valid.
    fn assert_valid(&self, name: &str, docs: &[Value], what: &str) {
        assert!(!docs.is_empty(), "{what}: no {name} document to check");
        for (doc, errors) in docs.iter().zip(self.errors(name, docs)) {
            assert!(
                errors.is_empty(),
                "{what}: not a valid {name}: {errors:#?}\n{doc:#}"
            );
        }
    }

    /// Fails unless `doc` is refused with an error whose text holds `why`.
    fn assert_refused(&self, name: &str, doc: &Value, why: &str, case: &str) {
        let errors = self.errors(name, std::slice::from_ref(doc)).remove(0);
        assert!(
            errors.iter().any(|e| e.contains(why)),
            "{case}: {name} should refuse it with {why:?}, said {errors:?}"
        );
    }
}

/// `hxlab ARGS`: its exit code, stdout and stderr, within [`LIMIT`].
fn hxlab_run(args: &[&str]) -> (Option<i32>, String, String) {
    run_with_timeout(Command::new(hxlab()).args(args), LIMIT)
}

/// [`assert_required_as_serde`] for `value`, read back as `$ty`.
macro_rules! required_as_serde {
    ($name:literal, $ty:ty, $value:expr) => {
        assert_required_as_serde($name, serde_json::to_value(&$value).expect("json"), |d| {
            serde_json::from_value::<$ty>(d).is_ok()
        })
    };
}

/// The committed schemas are exactly what this binary generates, and `--check` says so
/// file by file when they are not (changed, missing, or one hxlab no longer generates).
#[test]
fn committed_schemas_are_what_hxlab_generates() {
    let dir = schema_dir().display().to_string();
    let (code, _, err) = hxlab_run(&["schema", "--check", &dir]);
    assert_eq!(
        code,
        Some(0),
        "docs/schema is out of date; run `hxlab schema --out docs/schema`: {err}"
    );
    let tmp = TempDir::new("hxlab-schema-check");
    let out = tmp.path().display().to_string();
    let (code, _, err) = hxlab_run(&["schema", "--out", &out]);
    assert_eq!(code, Some(0), "{err}");
    let (code, _, err) = hxlab_run(&["schema", "--check", &out]);
    assert_eq!(code, Some(0), "{err}");
    let changed = tmp.path().join("run-result.schema.json");
    let text = std::fs::read_to_string(&changed).expect("written");
    std::fs::write(&changed, text.replace("\"uint64\"", "\"int64\"")).expect("change");
    std::fs::remove_file(tmp.path().join("load-config.schema.json")).expect("remove");
    std::fs::write(tmp.path().join("old.schema.json"), "{}").expect("add");
    let (code, _, err) = hxlab_run(&["schema", "--check", &out]);
    assert_eq!(code, Some(1), "{err}");
    for want in [
        "run-result.schema.json differs",
        "load-config.schema.json: ",
        "old.schema.json is no schema",
    ] {
        assert!(err.contains(want), "expected {want:?} in {err}");
    }
    // One schema by name, as the file holds it.
    let (code, printed, _) = hxlab_run(&["schema", "link-config"]);
    assert_eq!(code, Some(0));
    let file = std::fs::read_to_string(schema_dir().join("link-config.schema.json"));
    assert_eq!(Some(printed), file.ok());
    let (code, _, err) = hxlab_run(&["schema", "run-resutl"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("run-result"), "names the schemas: {err}");
}

/// `hxlab load ARGS --json FILE`: the document, parsed.
fn load_json(args: &[&str]) -> Value {
    let tmp = TempDir::new("hxlab-schema-load");
    let json = tmp.path().join("result.json");
    let mut all: Vec<&str> = vec!["load", "--no-progress", "-q"];
    all.extend_from_slice(args);
    let path = json.display().to_string();
    all.extend_from_slice(&["--json", &path]);
    let (code, _, err) = hxlab_run(&all);
    assert_eq!(code, Some(0), "hxlab {all:?}: {err}");
    serde_json::from_str(&std::fs::read_to_string(&json).expect("result")).expect("json")
}

/// RunResults of real h2 and h3 runs (one of them open-model, so its counts and send lags
/// are there too) are valid, with their optional parts present: the time series, the
/// environment, the shard record and the header tables.
#[test]
fn real_run_results_of_h2_and_h3_are_valid() {
    let Some(v) = Validator::new() else { return };
    let server = Server::start(&[]);
    let url = format!("https://127.0.0.1:{}/bytes/1k", server.ready.tls.port());
    // h2load's options too, so the result's config carries them.
    let to = format!("127.0.0.1:{}", server.ready.tls.port());
    let h2 = load_json(&[
        "-k",
        "-n",
        "20",
        "-c",
        "2",
        "-m",
        "4",
        "--proto",
        "h2",
        "--rps",
        "1000",
        "--sni",
        "localhost",
        "--connect-to",
        &to,
        "-T",
        "10s",
        "-N",
        "10s",
        "https://localhost:1/bytes/1k",
    ]);
    for key in ["rps", "sni", "connect_to", "connection_active_timeout_s"] {
        assert!(h2["config"].get(key).is_some(), "no config.{key} to check");
    }
    assert_eq!(h2["client_request_rates"].as_array().map(Vec::len), Some(2));
    let h3 = load_json(&["-k", "-n", "20", "--rate", "200", "--proto", "h3", &url]);
    for (proto, doc) in [("h2", &h2), ("h3", &h3)] {
        assert_eq!(doc["requests_done"], 20, "{proto}: {doc:#}");
        assert_eq!(doc["negotiated"][proto], doc["connections"], "{proto}");
        for part in ["intervals", "environment", "shards", "header_tables"] {
            assert!(doc.get(part).is_some(), "{proto}: no {part} to check");
        }
    }
    assert_eq!(h3["requests_scheduled"], 20);
    v.assert_valid("run-result", &[h2, h3], "hxlab load --json");
}

/// What `hxlab serve` says back: its ready file and `/stats` (after traffic on every
/// protocol, so the per-protocol counters and QPACK's are filled).
#[test]
fn the_ready_file_and_stats_of_a_real_server_are_valid() {
    let Some(v) = Validator::new() else { return };
    let server = Server::start(&[]);
    let ready: Value = serde_json::from_str(
        &std::fs::read_to_string(server.dir.path().join("ready.json")).expect("ready file"),
    )
    .expect("json");
    v.assert_valid("ready-file", &[ready], "hxlab serve --ready-file");
    let tls = server.ready.tls.port();
    let plain = server.ready.plain.port();
    for (proto, url) in [
        ("h2", format!("https://127.0.0.1:{tls}/bytes/100")),
        ("h3", format!("https://127.0.0.1:{tls}/bytes/100")),
        ("h1", format!("http://127.0.0.1:{plain}/bytes/100")),
    ] {
        load_json(&["-k", "-n", "3", "--proto", proto, &url]);
    }
    let body = body_of(&server.ready.plain.to_string(), "/stats", "127.0.0.1");
    let typed = hxlab_contract::StatsSnapshot::from_json(&body).expect("/stats");
    assert!(typed.protocol(hxlab_core::Protocol::H3).map(|p| p.requests) >= Some(3));
    let stats: Value = serde_json::from_str(&body).expect("/stats is JSON");
    v.assert_valid("stats", &[stats], "GET /stats");
}

/// The body of `GET path` with `Host: host` on the plain port `plain`, de-chunked.
fn body_of(plain: &str, path: &str, host: &str) -> String {
    let request = format!("GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n");
    let text = common::h1_exchange(plain, request.as_bytes()).expect("an answer");
    let (head, body) = text.split_once("\r\n\r\n").expect("a body");
    if !head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        return body.to_string();
    }
    let mut out = String::new();
    let mut rest = body;
    while let Some((size, after)) = rest.split_once("\r\n") {
        let n = usize::from_str_radix(size.trim(), 16).expect("a chunk size");
        if n == 0 {
            break;
        }
        out.push_str(&after[..n]);
        rest = &after[n + 2..];
    }
    out
}

/// `/replay-stats` of `hxlab serve --replay` after a near miss and a miss (and an entry it
/// skipped), so its lists and the flattened counts are all there.
#[test]
fn replay_stats_of_a_real_replay_are_valid() {
    let Some(v) = Validator::new() else { return };
    let tmp = TempDir::new("hxlab-schema-replay");
    let har = tmp.path().join("shop.har");
    let doc = json!({ "log": {
        "version": "1.2",
        "entries": [
            { "request": { "method": "GET", "url": "https://shop.example.test/?v=1", "headers": [] },
              "response": { "status": 200, "headers": [],
                "content": { "size": 2, "mimeType": "text/html", "text": "ok" } } },
            { "request": { "method": "GET", "url": "data:,x", "headers": [] },
              "response": { "status": 200, "headers": [], "content": { "size": 0 } } }
        ] } });
    std::fs::write(&har, doc.to_string()).expect("write the HAR");
    let server = Server::start(&["--replay", &har.display().to_string()]);
    let plain = server.ready.plain.to_string();
    body_of(&plain, "/?v=2", "shop.example.test");
    body_of(&plain, "/gone", "shop.example.test");
    let counts: Value =
        serde_json::from_str(&body_of(&plain, "/replay-stats", "127.0.0.1")).expect("json");
    assert_eq!(
        (&counts["near_misses"], &counts["misses"]),
        (&json!(1), &json!(1))
    );
    v.assert_valid("replay-stats", &[counts], "GET /replay-stats");
}

/// Sets `path` (keys and indices, `/`-separated) in `doc` to `value`, or removes it.
fn edit(doc: &Value, path: &str, value: Option<Value>) -> Value {
    let mut doc = doc.clone();
    let (parent, key) = path.rsplit_once('/').unwrap_or(("", path));
    let pointer = if parent.is_empty() {
        String::new()
    } else {
        format!("/{parent}")
    };
    let object = doc
        .pointer_mut(&pointer)
        .and_then(Value::as_object_mut)
        .unwrap_or_else(|| panic!("no object at {pointer}"));
    match value {
        Some(v) => object.insert(key.to_string(), v),
        None => object.remove(key),
    };
    doc
}

/// A real RunResult with one property too many (at the top, in the config, in the byte
/// counts, in a shard record), one required field missing (at the top and inside), or one
/// wrongly typed (a count as text, a histogram as a number, an unknown controller, a
/// negative count) is refused; the document as written is not.
#[test]
fn a_run_result_with_an_unknown_missing_or_mistyped_field_is_refused() {
    let Some(v) = Validator::new() else { return };
    let server = Server::start(&[]);
    let url = format!("http://127.0.0.1:{}/bytes/10", server.ready.plain.port());
    let doc = load_json(&["-n", "5", "--proto", "h1", &url]);
    v.assert_valid("run-result", std::slice::from_ref(&doc), "as written");
    let extra = "Additional properties are not allowed";
    let required = "is a required property";
    let cases = [
        ("requests_dne", Some(json!(5)), extra),
        ("config/clinets", Some(json!(2)), extra),
        ("bytes/body_sent", Some(json!(0)), extra),
        ("shards/0/node", Some(json!("a")), extra),
        ("requests_done", None, required),
        ("histograms/latency", None, required),
        ("config/urls", None, required),
        (
            "requests_done",
            Some(json!("5")),
            "is not of type 'integer'",
        ),
        ("requests_failed", Some(json!(-1)), "less than the minimum"),
        (
            "histograms/ttfb",
            Some(json!(12)),
            "is not of type 'string'",
        ),
        ("config/cc", Some(json!("vegas")), "vegas"),
        ("errors", Some(json!([0])), "is not of type 'object'"),
    ];
    for (path, value, why) in cases {
        let bad = edit(&doc, path, value.clone());
        v.assert_refused("run-result", &bad, why, &format!("{path} = {value:?}"));
    }
}

/// The load config's schema refuses what `hxlab load --config` refuses (unknown key, a
/// duration without a unit's form, an unknown protocol, a number where text goes) and
/// accepts what it accepts.
#[test]
fn the_load_config_schema_refuses_what_hxlab_load_refuses() {
    let Some(v) = Validator::new() else { return };
    let tmp = TempDir::new("hxlab-schema-config");
    let file = tmp.path().join("config.json");
    let url = json!(["http://127.0.0.1:1/"]);
    let good = json!({ "urls": url, "timeout": "1.5s", "cc": "bbr", "duration": null });
    v.assert_valid("load-config", std::slice::from_ref(&good), "a small config");
    let cases = [
        (
            json!({ "urls": url, "clinets": 2 }),
            "Additional properties",
        ),
        (json!({ "urls": url, "timeout": "soon" }), "does not match"),
        (json!({ "urls": url, "proto": "h4" }), "h4"),
        (
            json!({ "urls": url, "warm_up": 5 }),
            "is not of type 'string'",
        ),
        (
            json!({ "urls": url, "shard": { "index": 0 } }),
            "'count' is a required",
        ),
        (
            json!({ "urls": url, "connect_to": "a b" }),
            "does not match",
        ),
        (json!({ "urls": url, "no_tls_proto": "h4" }), "h4"),
        (
            json!({ "urls": url, "connection_inactivity_timeout": 5 }),
            "is not valid",
        ),
    ];
    for (doc, why) in cases {
        v.assert_refused("load-config", &doc, why, &doc.to_string());
        std::fs::write(&file, doc.to_string()).expect("write");
        let path = file.display().to_string();
        let (code, _, err) = hxlab_run(&["load", "--config", &path]);
        assert_eq!(code, Some(2), "hxlab load refuses {doc} too: {err}");
    }
}

/// A stand-in for hxlab named in `HXLAB_BIN`: keeps a copy of every `--config` file the lab
/// hands a child (`SUBCOMMAND-config.*.json`), and of the job lines `hxlab load --jobs`
/// reads and answers inside a link (`load-job.*.jsonl`, `job-done.*.jsonl`), then runs the
/// real hxlab.
const CAPTURE_SH: &str = r#"#!/bin/bash
set -o pipefail
stamp="$(date +%s%N).$$"
prev=
for a in "$@"; do
  if [ "$prev" = --config ] && [ -f "$a" ]; then
    cp -- "$a" "$HXLAB_CAPTURE/$1-config.$stamp.json"
  fi
  prev=$a
done
if [ "$1" = load ] && [ "$2" = --jobs ]; then
  tee "$HXLAB_CAPTURE/load-job.$stamp.jsonl" | "$HXLAB_REAL" "$@" |
    tee "$HXLAB_CAPTURE/job-done.$stamp.jsonl"
  exit
fi
exec "$HXLAB_REAL" "$@"
"#;

/// One `hxlab run` of an experiment, with what the lab handed its children on the way.
struct LabRun {
    dir: TempDir,
}

impl LabRun {
    /// Runs the experiment `spec` (TOML) through the capturing stand-in; fails unless it
    /// exits 0.
    fn run(spec: &str, limit: Duration) -> LabRun {
        use std::os::unix::fs::PermissionsExt;
        let dir = TempDir::new("hxlab-schema-lab");
        let capture = dir.path().join("capture");
        std::fs::create_dir_all(&capture).expect("capture dir");
        let wrapper = dir.path().join("hxlab");
        std::fs::write(&wrapper, CAPTURE_SH).expect("write the stand-in");
        std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755))
            .expect("make it executable");
        let path = dir.path().join("spec.toml");
        std::fs::write(&path, spec).expect("write the experiment");
        let (code, out, err) = run_with_timeout(
            Command::new(hxlab())
                .arg("run")
                .arg(&path)
                .arg("--out")
                .arg(dir.path().join("out"))
                .arg("--no-progress")
                .env("HXLAB_BIN", &wrapper)
                .env("HXLAB_REAL", hxlab())
                .env("HXLAB_CAPTURE", &capture),
            limit,
        );
        assert_eq!(code, Some(0), "hxlab run failed\n{out}\n{err}");
        LabRun { dir }
    }

    /// The captured documents whose file names start with `prefix`: one per `.json` file,
    /// one per line of a `.jsonl` file.
    fn captured(&self, prefix: &str) -> Vec<Value> {
        let mut docs = Vec::new();
        let entries = std::fs::read_dir(self.dir.path().join("capture")).expect("capture dir");
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if !name.starts_with(prefix) {
                continue;
            }
            let text = std::fs::read_to_string(entry.path()).expect("captured file");
            let lines: Vec<&str> = if name.ends_with(".jsonl") {
                text.lines().filter(|l| !l.trim().is_empty()).collect()
            } else {
                vec![&text]
            };
            for line in lines {
                docs.push(serde_json::from_str(line).unwrap_or_else(|e| panic!("{name}: {e}")));
            }
        }
        docs
    }

    /// Every record of results.jsonl.
    fn records(&self) -> Vec<Value> {
        let path = self.dir.path().join("out/results.jsonl");
        let text = std::fs::read_to_string(&path).expect("results.jsonl");
        text.lines()
            .map(|l| serde_json::from_str(l).expect("a record"))
            .collect()
    }

    /// The `result` of every record that has one (a RunResult each).
    fn results(&self) -> Vec<Value> {
        let results = self.records().into_iter().map(|mut r| r["result"].take());
        results.filter(|r| !r.is_null()).collect()
    }
}

/// A loopback experiment on hxlab's origin: the ServeConfig and the LoadConfigs the lab
/// writes for its children, and the RunResults it records, are valid.
#[test]
fn the_configs_the_lab_hands_serve_and_load_are_valid() {
    let Some(v) = Validator::new() else { return };
    let spec = "protocol = [\"h2\", \"h3\"]\nresources = 3\nsize = \"1KiB\"\nrepetitions = 1\nscheduler = \"fifo\"\nnotsent_lowat = \"off\"\ncc = \"cubic\"\n";
    let lab = LabRun::run(spec, Duration::from_secs(120));
    let serve = lab.captured("serve-config");
    let load = lab.captured("load-config");
    assert!(
        serve
            .iter()
            .any(|c| c["scheduler"] == "fifo" && c["cc"] == "cubic"),
        "the lab's serve config carries the cell's factors: {serve:?}"
    );
    assert_eq!(load.len(), 2, "one load per cell: {load:?}");
    v.assert_valid("serve-config", &serve, "the lab's hxlab serve --config");
    v.assert_valid("load-config", &load, "the lab's hxlab load --config");
    let results = lab.results();
    assert_eq!(results.len(), 2, "a result per cell");
    v.assert_valid("run-result", &results, "results.jsonl");
    let records = lab.records();
    v.assert_valid("record", &records, "results.jsonl");
    let seen = required_as_serde!("record", hxlab_report::Record, records[0]);
    assert!(
        seen.iter().any(|p| p == "/scheduling/scheduler"),
        "{seen:?}"
    );
}

/// Network cells: the LinkConfig the lab starts `hxlab link` with (a profile with
/// Gilbert-Elliott loss, jitter and a byte queue), the LoadJob lines it hands
/// `hxlab load --jobs` inside the link and the JobDone answers, and `hxlab link --stats`.
#[test]
fn the_link_config_and_jobs_of_network_cells_are_valid() {
    if !common::require_root("network cells through `hxlab link` (namespaces, TUN devices)") {
        return;
    }
    let Some(v) = Validator::new() else { return };
    let spec = "protocol = [\"h2\", \"h3\"]\nresources = 3\nsize = \"1KiB\"\nrepetitions = 1\nprofile = \"WiFi\"\nloss = \"ge:0.1%,50%,1%,0%\"\njitter = \"1ms\"\nqueue = \"64KiB\"\nseed = 3\n";
    let lab = LabRun::run(spec, Duration::from_secs(180));
    let links = lab.captured("link-config");
    assert!(!links.is_empty(), "no hxlab link started");
    assert!(
        links
            .iter()
            .all(|l| l["down"]["loss"].get("gilbert_elliott").is_some()),
        "{links:?}"
    );
    v.assert_valid("link-config", &links, "the lab's hxlab link --config");
    let jobs = lab.captured("load-job");
    assert_eq!(jobs.len(), 2, "one job per cell: {jobs:?}");
    v.assert_valid("load-job", &jobs, "the lab's hxlab load --jobs lines");
    let done = lab.captured("job-done");
    assert!(done.iter().all(|d| d["exit"] == 0), "{done:?}");
    v.assert_valid("job-done", &done, "hxlab load --jobs answers");
    v.assert_valid("record", &lab.records(), "results.jsonl of network cells");
    let tmp = TempDir::new("hxlab-schema-link-stats");
    let stats = tmp.path().join("stats.json");
    let path = stats.display().to_string();
    let (code, _, err) = hxlab_run(&["link", "--profile", "WiFi", "--stats", &path, "--", "true"]);
    assert_eq!(code, Some(0), "{err}");
    let doc: Value =
        serde_json::from_str(&std::fs::read_to_string(&stats).expect("stats")).expect("json");
    v.assert_valid("link-stats", &[doc], "hxlab link --stats");
}

/// The browser workload: the PageJobs the lab hands `hxlab page` (on loopback and behind a
/// link, so one carries a LinkConfig) and the ServeConfig `hxlab page` starts its synthetic
/// origin with.
#[test]
fn the_page_jobs_of_the_browser_workload_are_valid() {
    if common::require_peer("chromium").is_none() {
        return;
    }
    if !common::require_root("a page behind `hxlab link` (namespaces, TUN devices)") {
        return;
    }
    let Some(v) = Validator::new() else { return };
    let spec = "workload = \"browser\"\nprotocol = \"h2\"\nresources = 2\nsize = \"1KiB\"\nrepetitions = 1\nprofile = [\"none\", \"WiFi\"]\n";
    let lab = LabRun::run(spec, Duration::from_secs(240));
    let jobs = lab.captured("page-config");
    assert_eq!(jobs.len(), 2, "one page job per cell: {jobs:?}");
    assert!(
        jobs.iter().any(|j| j["link"].is_object()) && jobs.iter().any(|j| j["link"].is_null()),
        "{jobs:?}"
    );
    v.assert_valid("page-job", &jobs, "the lab's hxlab page --config");
    let records = lab.records();
    assert!(
        records.iter().all(|r| r["waterfall"].is_object()),
        "{records:?}"
    );
    v.assert_valid("record", &records, "results.jsonl of browser cells");
    let seen = required_as_serde!("record", hxlab_report::Record, records[0]);
    assert!(
        seen.iter().any(|p| p == "/waterfall/rows/0/phases"),
        "{seen:?}"
    );
    v.assert_valid(
        "serve-config",
        &lab.captured("serve-config"),
        "hxlab page's origin",
    );
}

/// The schema node `node` stands for, with `$ref`s into `$defs` followed.
fn resolve<'a>(root: &'a Value, node: &'a Value) -> &'a Value {
    match node["$ref"].as_str() {
        Some(r) => {
            let name = r.strip_prefix("#/$defs/").expect("a local $ref");
            resolve(root, &root["$defs"][name])
        }
        None => node,
    }
}

/// The branch of an `anyOf`/`oneOf` that `doc` takes: the one of its JSON type (an object
/// whose required keys it holds), else `node` itself.
fn branch<'a>(root: &'a Value, node: &'a Value, doc: &Value) -> &'a Value {
    let node = resolve(root, node);
    let options = node["anyOf"].as_array().or(node["oneOf"].as_array());
    let Some(options) = options else { return node };
    let fits = |o: &&Value| {
        let o = resolve(root, o);
        match doc {
            Value::Object(m) => {
                o["type"] == "object"
                    && o["required"]
                        .as_array()
                        .is_none_or(|r| r.iter().all(|k| m.contains_key(k.as_str().unwrap_or(""))))
            }
            Value::Null => o["type"] == "null",
            _ => o["type"] != "null" && o["type"] != "object",
        }
    };
    options
        .iter()
        .find(fits)
        .map_or(node, |o| branch(root, o, doc))
}

/// Every property `doc` holds where the schema names it, at any depth: its JSON pointer and
/// whether the schema requires it.
fn properties(root: &Value, node: &Value, doc: &Value, at: &str, out: &mut Vec<(String, bool)>) {
    let node = branch(root, node, doc);
    match doc {
        Value::Object(m) => {
            let Some(props) = node["properties"].as_object() else {
                return;
            };
            let required = node["required"].as_array().cloned().unwrap_or_default();
            for (key, value) in m {
                let Some(sub) = props.get(key) else { continue };
                let path = format!("{at}/{key}");
                out.push((path.clone(), required.contains(&json!(key))));
                properties(root, sub, value, &path, out);
            }
        }
        Value::Array(items) if node["items"].is_object() => {
            for (i, item) in items.iter().enumerate() {
                properties(root, &node["items"], item, &format!("{at}/{i}"), out);
            }
        }
        _ => {}
    }
}

/// `doc` without the property at `pointer`.
fn without(doc: &Value, pointer: &str) -> Value {
    let (parent, key) = pointer.rsplit_once('/').expect("a pointer");
    let mut doc = doc.clone();
    doc.pointer_mut(parent)
        .and_then(Value::as_object_mut)
        .expect("an object")
        .remove(key);
    doc
}

/// For every property of `doc` (a JSON form), at every depth: `reads` takes the document
/// without it exactly when the schema NAME does not require it. Returns the properties'
/// JSON pointers.
fn assert_required_as_serde(name: &str, doc: Value, reads: fn(Value) -> bool) -> Vec<String> {
    let root = schema(name);
    assert!(reads(doc.clone()), "{name}: the type reads its own JSON");
    let mut found = Vec::new();
    properties(&root, &root, &doc, "", &mut found);
    assert!(!found.is_empty(), "{name}: no property found");
    for (pointer, required) in &found {
        let read = reads(without(&doc, pointer));
        let serde_says = if read { "reads" } else { "refuses" };
        let schema_says = if *required {
            "requires"
        } else {
            "does not require"
        };
        assert_eq!(
            read, !required,
            "{name}: without {pointer} serde {serde_says} it, the schema {schema_says} it"
        );
    }
    found.into_iter().map(|(pointer, _)| pointer).collect()
}

/// A link with every kind of stage set: Gilbert-Elliott loss down, random loss up, a rate,
/// jitter, a byte queue and CoDel.
fn busy_link() -> hxlab_link::LinkConfig {
    use hxlab_link::{Aqm, LinkConfig, Loss, QueueLimit};
    let mut link = LinkConfig::from_profile("WiFi").expect("a profile");
    link.down.loss = Loss::GilbertElliott {
        p: 0.01,
        r: 0.5,
        loss_bad: 0.1,
        loss_good: 0.0,
    };
    link.up.loss = Loss::Random(0.01);
    link.down.jitter = Duration::from_millis(2);
    link.down.queue = QueueLimit::Bytes(64 << 10);
    link.up.aqm = Aqm::Codel;
    link
}

/// A RunResult with every optional part there (a shard, a time series, the environment,
/// header tables, an open-model config).
fn full_run_result() -> hxlab_core::RunResult {
    use hxlab_core::result::{HeaderTableSeen, Interval, ShardInfo};
    let mut r = hxlab_core::RunResult {
        shards: vec![ShardInfo {
            run_id: "r".into(),
            count: 1,
            start_at_unix_s: Some(1.0),
            ..Default::default()
        }],
        interval_s: 1.0,
        intervals: vec![Interval::default()],
        environment: Some(Default::default()),
        header_tables: vec![HeaderTableSeen {
            protocol: "h3".into(),
            server_advertised: Some(4096),
            client_blocked_streams: Some(100),
            ..Default::default()
        }],
        error_samples: vec!["reset".into()],
        ..Default::default()
    };
    r.config.rate = Some(10.0);
    r.config.cc = Some(hxlab_core::cc::CongestionControl::Bbr);
    r
}

/// Each schema's `required` is exactly what serde cannot do without, at every depth: a
/// field the schema requires is one whose absence the type refuses, and every other one
/// the type reads without. (Strictness the other way, no unknown keys, is what the
/// validator tests above check.)
#[test]
fn required_properties_are_exactly_those_serde_cannot_do_without() {
    use hxlab_contract::*;
    use std::path::PathBuf;
    let seen = required_as_serde!("run-result", hxlab_core::RunResult, full_run_result());
    for deep in [
        "/histograms/latency",
        "/shards/0/start_at_unix_s",
        "/intervals/0/send_lag",
    ] {
        assert!(
            seen.iter().any(|p| p == deep),
            "{deep} not reached: {seen:?}"
        );
    }
    let load = LoadConfig {
        urls: vec!["https://127.0.0.1/".into()],
        duration: Some(Duration::from_secs(2)),
        body: Some(b"x".to_vec()),
        shard: Some(Shard { index: 0, count: 2 }),
        qlog_base: Some(PathBuf::from("/tmp/q")),
        ..Default::default()
    };
    required_as_serde!("load-config", LoadConfig, load);
    let serve = ServeConfig {
        qlog_dir: Some(PathBuf::from("/tmp/q")),
        ..Default::default()
    };
    required_as_serde!("serve-config", ServeConfig, serve);
    let page = PageJob {
        synthetic: Some(Synthetic {
            cache: Some(Duration::from_secs(60)),
            ..Default::default()
        }),
        link: Some(busy_link()),
        qlog_dir: Some(PathBuf::from("/tmp/q")),
        ..Default::default()
    };
    let seen = required_as_serde!("page-job", PageJob, page);
    for deep in [
        "/synthetic/cache",
        "/link/down/loss/gilbert_elliott/loss_bad",
    ] {
        assert!(
            seen.iter().any(|p| p == deep),
            "{deep} not reached: {seen:?}"
        );
    }
    required_as_serde!("link-config", hxlab_link::LinkConfig, busy_link());
    let job = LoadJob {
        config: load,
        result: PathBuf::from("/tmp/r.json"),
        limit_ms: 1000,
    };
    required_as_serde!("load-job", LoadJob, job);
    let done = JobDone {
        exit: Some(0),
        error: Some("late".into()),
    };
    required_as_serde!("job-done", JobDone, done);
    required_as_serde!("ready-file", ReadyFile, ready_file());
    required_as_serde!("stats", StatsSnapshot, stats_snapshot());
    required_as_serde!("replay-stats", ReplayCounts, replay_counts());
    let link_stats = LinkStatsFile {
        profile: Some("WiFi".into()),
        seed: 1,
        host: "100.64.0.1".into(),
        client: "100.64.0.2".into(),
        down: Default::default(),
        up: Default::default(),
    };
    required_as_serde!("link-stats", LinkStatsFile, link_stats);
}

/// A ready file with its optional parts.
fn ready_file() -> hxlab_contract::ReadyFile {
    hxlab_contract::ReadyFile {
        pid: 1,
        tls: "127.0.0.1:8443".parse().expect("address"),
        plain: "127.0.0.1:8080".parse().expect("address"),
        h3: Some("127.0.0.1:8443".parse().expect("address")),
        cert: Some("/tmp/cert.pem".into()),
        spki_sha256: "AAAA".into(),
    }
}

/// A `/stats` document with one protocol.
fn stats_snapshot() -> hxlab_contract::StatsSnapshot {
    let mut s = hxlab_contract::StatsSnapshot {
        uptime_s: 1.0,
        cpu_user_s: 0.5,
        cpu_sys_s: 0.25,
        by_protocol: Default::default(),
        total: Default::default(),
        scheduler: "rfc9218".into(),
        h3_qpack: Default::default(),
    };
    s.by_protocol.insert("h3".into(), Default::default());
    s
}

/// A `/replay-stats` document with a near miss, a miss and a skipped entry.
fn replay_counts() -> hxlab_contract::ReplayCounts {
    hxlab_contract::ReplayCounts {
        entries: 2,
        near_miss_urls: vec![hxlab_contract::NearMiss {
            url: "http://a/?v=2".into(),
            served: "http://a/?v=1".into(),
            rule: hxlab_contract::NearMissRule::Query,
        }],
        miss_urls: vec!["GET http://a/gone".into()],
        outside_urls: vec!["GET http://b/".into()],
        skipped: Some("skipped 1 entries: 1 data:".into()),
        ..Default::default()
    }
}

/// `hxlab page --json` of a synthetic page with a repeat view (a measured run, its repeat
/// view counted too) and of a page that cannot load (a failed run) are valid, and the
/// schema requires of them what PageReport requires.
#[test]
fn real_page_reports_are_valid() {
    if common::require_peer("chromium").is_none() {
        return;
    }
    let Some(v) = Validator::new() else { return };
    let tmp = TempDir::new("hxlab-schema-page");
    let page = |name: &str, args: &[&str]| -> Value {
        let json = tmp.path().join(name).display().to_string();
        let mut all = vec!["page", "--runs", "1", "--timeout", "30s", "--json", &json];
        all.extend_from_slice(args);
        let mut cmd = Command::new(hxlab());
        cmd.args(&all).env("TMPDIR", tmp.path());
        let (_, _, err) = run_with_timeout(&mut cmd, Duration::from_secs(120));
        let text = std::fs::read_to_string(&json).unwrap_or_else(|e| panic!("{e}: {err}"));
        serde_json::from_str(&text).expect("json")
    };
    let measured = page(
        "synthetic.json",
        &[
            "--synthetic",
            "n=3,size=1KiB",
            "--proto",
            "h2",
            "--repeat-view",
        ],
    );
    assert_eq!(
        measured["runs"][0]["repeat_view"]["counted"], true,
        "{measured:#}"
    );
    let failed = page("failed.json", &["http://127.0.0.1:1/", "--proto", "h1"]);
    assert!(failed["runs"][0]["error"].is_string(), "{failed:#}");
    v.assert_valid(
        "page-report",
        &[measured.clone(), failed.clone()],
        "hxlab page --json",
    );
    for doc in [measured, failed] {
        required_as_serde!("page-report", hxlab_contract::PageReport, doc);
    }
}

/// `hxlab probe --json` against `hxlab serve`, and as root with `--priorities` (every
/// scorecard's figures), is valid, and the schema requires of it what ProbeReport requires.
#[test]
fn real_probe_reports_are_valid() {
    let Some(v) = Validator::new() else { return };
    let server = Server::start_bound("0.0.0.0", &[]);
    let base = format!("https://127.0.0.1:{}", server.ready.tls.port());
    let probe = |args: &[&str]| -> Value {
        let mut all = vec!["probe", "-k", "--json", "-"];
        all.extend_from_slice(args);
        let (code, out, err) = run_with_timeout(Command::new(hxlab()).args(&all), LIMIT * 2);
        assert_eq!(code, Some(0), "{err}");
        serde_json::from_str(&out).expect("json")
    };
    let plain = probe(&[&format!("{base}/")]);
    v.assert_valid(
        "probe-report",
        std::slice::from_ref(&plain),
        "hxlab probe --json",
    );
    required_as_serde!("probe-report", hxlab_contract::ProbeReport, plain);
    if !common::require_root("hxlab probe --priorities (behind hxlab link)") {
        return;
    }
    let (bulk, small) = (format!("{base}/bytes/3MB"), format!("{base}/bytes/20KB"));
    let scored = probe(&[
        &bulk,
        "--priorities",
        "--small",
        &small,
        "--rate",
        "40mbit",
        "--rtt",
        "10ms",
    ]);
    let cards = &scored["priorities"]["scorecards"];
    assert!(cards[0]["urgency"].is_object(), "{scored:#}");
    v.assert_valid(
        "probe-report",
        std::slice::from_ref(&scored),
        "--priorities",
    );
    let seen = required_as_serde!("probe-report", hxlab_contract::ProbeReport, scored);
    assert!(
        seen.iter().any(|p| p.ends_with("/urgency/wait_ms")),
        "{seen:?}"
    );
}
