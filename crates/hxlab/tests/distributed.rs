//! Load in parts, checked with real tools: `hxlab k8s render`'s Job passes
//! `kubernetes-validate --strict` (the Kubernetes schemas), the Job's own container command
//! and environment run as local processes (one per completion index, as the Indexed Job
//! runs them) against `hxlab serve` and merge exactly, and the image built from the
//! Containerfile's final stage with podman runs a shard.

mod common;

use common::{hxlab, podman, run_with_timeout, tempfile_dir::TempDir, Server};
use serde_json::Value;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;
use yaml_rust2::{Yaml, YamlLoader};

const LIMIT: Duration = Duration::from_secs(120);

fn plain(s: &Server) -> String {
    s.ready.plain.to_string()
}

/// Renders a Job; panics on failure.
fn render(args: &[&str]) -> String {
    let mut cmd = Command::new(hxlab());
    cmd.args(["k8s", "render"]).args(args);
    let (code, out, err) = run_with_timeout(&mut cmd, LIMIT);
    assert_eq!(code, Some(0), "render {args:?}: {err}");
    out
}

/// The one container of a rendered Job: its command + args, and its environment with the
/// completion-index annotation resolved to `index`, as the kubelet would.
fn container_line(manifest: &str, index: u64) -> (Vec<String>, Vec<(String, String)>) {
    let docs = YamlLoader::load_from_str(manifest).expect("the manifest is YAML");
    assert_eq!(docs.len(), 1, "one document");
    let job = &docs[0];
    assert_eq!(job["kind"].as_str(), Some("Job"));
    assert_eq!(job["spec"]["completionMode"].as_str(), Some("Indexed"));
    let containers = job["spec"]["template"]["spec"]["containers"]
        .as_vec()
        .expect("containers");
    assert_eq!(containers.len(), 1);
    let c = &containers[0];
    let strings = |y: &Yaml| -> Vec<String> {
        y.as_vec()
            .expect("a list")
            .iter()
            .map(|s| s.as_str().expect("a string").to_string())
            .collect()
    };
    let mut argv = strings(&c["command"]);
    assert_eq!(argv, ["/usr/local/bin/hxlab"]);
    argv.extend(strings(&c["args"]));
    let mut env = Vec::new();
    for e in c["env"].as_vec().expect("env") {
        let name = e["name"].as_str().expect("env name").to_string();
        let value = match e["value"].as_str() {
            Some(v) => v.to_string(),
            None => {
                let path = e["valueFrom"]["fieldRef"]["fieldPath"]
                    .as_str()
                    .expect("a fieldRef");
                assert_eq!(
                    path,
                    "metadata.annotations['batch.kubernetes.io/job-completion-index']"
                );
                index.to_string()
            }
        };
        env.push((name, value));
    }
    (argv, env)
}

/// A pod's arguments as a process on this host runs them: pods have network namespaces of
/// their own, processes here share one, so each shard's metrics endpoint gets a free
/// loopback port instead of the pod's port; and nobody scrapes here, so no linger.
fn as_local_pod(argv: Vec<String>) -> Vec<String> {
    let mut out = Vec::with_capacity(argv.len());
    for a in argv {
        match out.last().map(String::as_str) {
            Some("--metrics-listen") => {
                assert_eq!(a, "0.0.0.0:9464", "the pod's metrics address");
                out.push(format!("127.0.0.1:{}", common::free_port()));
            }
            Some("--metrics-linger") => out.push("0s".into()),
            _ => out.push(a),
        }
    }
    out
}

/// Runs every completion index of the Job as a local process (all at once, as the Job's
/// parallelism does), returns their stdouts in index order.
fn run_shards(manifest: &str, shards: u64) -> Vec<String> {
    let mut children = Vec::new();
    for i in 0..shards {
        let (argv, env) = container_line(manifest, i);
        let argv = as_local_pod(argv);
        let mut cmd = Command::new(hxlab());
        cmd.args(&argv[1..])
            .envs(env)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        children.push(cmd.spawn().expect("start a shard"));
    }
    children
        .into_iter()
        .enumerate()
        .map(|(i, c)| {
            let out = c.wait_with_output().expect("shard output");
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(out.status.success(), "shard {i}: {err}");
            String::from_utf8(out.stdout).expect("utf-8")
        })
        .collect()
}

/// `hxlab merge -` with `input` on stdin: the merged result and stderr.
fn merge_stdin(input: &str, extra: &[&str]) -> (Option<i32>, String, String) {
    let mut child = Command::new(hxlab())
        .arg("merge")
        .args(extra)
        .arg("-")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start merge");
    let mut stdin = child.stdin.take().expect("stdin");
    stdin.write_all(input.as_bytes()).expect("write stdin");
    drop(stdin);
    let out = child.wait_with_output().expect("merge output");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn hist_count(v: &Value, name: &str) -> u64 {
    hxlab_core::LatencyHistogram::from_base64(v["histograms"][name].as_str().expect("histogram"))
        .expect("decode")
        .len()
}

fn served(addr: &str) -> u64 {
    common::serve_stats(addr).total.requests
}

/// The Job's own command, run per completion index, adds up to the asked run exactly:
/// closed model (-n over -c) and open model (--rate × -D).
#[test]
fn the_jobs_shards_run_locally_merge_into_the_asked_run() {
    let server = Server::start(&["--no-h3"]);
    let addr = plain(&server);
    let url = format!("http://{addr}/bytes/100");
    let before = served(&addr);
    let manifest = render(&[
        "--shards", "3", "--lead", "2s", "--", "load", "-n", "3000", "-c", "6", "-m", "2", &url,
    ]);
    let outs = run_shards(&manifest, 3);
    let parts: Vec<Value> = outs
        .iter()
        .map(|o| serde_json::from_str(o.trim()).expect("each shard prints one RunResult"))
        .collect();
    let (code, out, err) = merge_stdin(&outs.concat(), &[]);
    assert_eq!(code, Some(0), "{err}");
    let m: Value = serde_json::from_str(&out).expect("merged json");
    assert_eq!(m["requests_done"], 3000, "{err}");
    assert_eq!(
        served(&addr) - before,
        3000,
        "the server answered what was counted"
    );
    for h in ["latency", "ttfb", "connect"] {
        let sum: u64 = parts.iter().map(|p| hist_count(p, h)).sum();
        assert_eq!(hist_count(&m, h), sum, "{h}");
    }
    assert_eq!(hist_count(&m, "latency"), 3000);
    let shards = m["shards"].as_array().expect("shards");
    let idx: Vec<u64> = shards
        .iter()
        .map(|s| s["index"].as_u64().unwrap())
        .collect();
    assert_eq!(idx, [0, 1, 2]);
    let run_id = &shards[0]["run_id"];
    assert!(shards
        .iter()
        .all(|s| &s["run_id"] == run_id && s["count"] == 3));
    assert_eq!(
        shards
            .iter()
            .map(|s| s["clients"].as_u64().unwrap())
            .sum::<u64>(),
        6
    );
    for s in shards {
        // Every shard waited for the agreed instant; none may start before it.
        let skew = s["start_skew_s"].as_f64().expect("skew recorded");
        assert!(skew >= 0.0, "{s}");
        assert_eq!(s["start_at_unix_s"], shards[0]["start_at_unix_s"]);
    }
    assert!(err.contains("shards: 3 of 3 of run"), "{err}");

    // A shard missing (a failed pod): refused, one line; with --allow-partial, named.
    let two = format!("{}{}", outs[0], outs[2]);
    let (code, _, err) = merge_stdin(&two, &[]);
    assert_eq!(code, Some(1));
    assert!(err.contains("shard 1)"), "{err}");
    let (code, _, err) = merge_stdin(&two, &["--allow-partial", "-q"]);
    assert_eq!(code, Some(0), "{err}");
    assert!(err.contains("shard 1 of 3 absent"), "{err}");

    // Open model: the shards' timetables are one generator's, so what was scheduled is
    // rate × duration exactly.
    let manifest = render(&[
        "--shards", "3", "--lead", "1s", "--", "load", "--rate", "300", "-D", "2s", "-c", "6", &url,
    ]);
    let outs = run_shards(&manifest, 3);
    let (code, out, err) = merge_stdin(&outs.concat(), &[]);
    assert_eq!(code, Some(0), "{err}");
    let m: Value = serde_json::from_str(&out).expect("merged json");
    assert_eq!(m["requests_scheduled"], 600, "{err}");
    assert_eq!(
        m["requests_started"].as_u64().unwrap() + m["requests_not_sent"].as_u64().unwrap(),
        600
    );
}

/// The `kubernetes-validate` program (.ci/run installs it from PyPI in a venv and links it
/// into /usr/local/bin), or a loud skip.
fn kubernetes_validate() -> Option<PathBuf> {
    common::require_peer("kubernetes-validate")
}

/// Writes `text` under `dir` and validates it strictly against two Kubernetes versions.
fn validate(kv: &Path, dir: &Path, name: &str, text: &str) -> (Option<i32>, String) {
    let path = dir.join(name);
    std::fs::write(&path, text).expect("write manifest");
    let mut cmd = Command::new(kv);
    cmd.args(["--strict", "-k", "1.30", "-k", "1.37"])
        .arg(&path);
    let (code, out, err) = run_with_timeout(&mut cmd, LIMIT);
    (code, format!("{out}{err}"))
}

#[test]
fn rendered_jobs_pass_kubernetes_validate_strict() {
    let Some(kv) = kubernetes_validate() else {
        return;
    };
    let dir = TempDir::new("hxlab-k8s");
    let cases: Vec<Vec<&str>> = vec![
        vec!["--shards", "1", "--", "load", "-n", "100", "http://origin/"],
        vec![
            "--shards",
            "3",
            "--name",
            "h2-sweep",
            "--namespace",
            "perf",
            "--spread",
            "required",
            "--node-selector",
            "pool=load",
            "--node-selector",
            "zone=a",
            "--cpu",
            "500m",
            "--memory",
            "256Mi",
            "--pull-policy",
            "Always",
            "--ttl",
            "1h",
            "--",
            "load",
            "-n",
            "30000",
            "-c",
            "30",
            "-m",
            "10",
            "--proto",
            "h2",
            "-H",
            "x-a: b",
            "-k",
            "https://origin:8443/bytes/100",
        ],
        vec![
            "--shards",
            "100",
            "--image",
            "registry.example/hxlab:1",
            "--start-at",
            "2026-11-23T20:30:00Z",
            "--",
            "load",
            "--rate",
            "50000",
            "-D",
            "60s",
            "--warm-up",
            "5s",
            "-c",
            "1000",
            "--proto",
            "h3",
            "https://origin/",
        ],
    ];
    for (i, args) in cases.iter().enumerate() {
        let text = render(args);
        let (code, out) = validate(&kv, dir.path(), &format!("job{i}.yaml"), &text);
        assert_eq!(code, Some(0), "{args:?}:\n{out}\n{text}");
        assert_eq!(out.matches("passed for resource job/").count(), 2, "{out}");
        assert!(!out.contains("WARN"), "{out}");
    }
    // The pods serve their figures for Prometheus: the port, the scrape annotations, and
    // with --pod-monitor a PodMonitor selecting the Job's pods on that port.
    let text = render(&[
        "--shards",
        "2",
        "--name",
        "m",
        "--pod-monitor",
        "--",
        "load",
        "-n",
        "10",
        "-c",
        "2",
        "http://o/",
    ]);
    let docs = YamlLoader::load_from_str(&text).expect("YAML");
    assert_eq!(docs.len(), 2, "{text}");
    let template = &docs[0]["spec"]["template"];
    let ann = &template["metadata"]["annotations"];
    assert_eq!(ann["prometheus.io/scrape"].as_str(), Some("true"));
    assert_eq!(ann["prometheus.io/port"].as_str(), Some("9464"));
    let c = &template["spec"]["containers"][0];
    assert_eq!(c["ports"][0]["containerPort"].as_i64(), Some(9464));
    assert_eq!(c["ports"][0]["name"].as_str(), Some("metrics"));
    let args: Vec<&str> = c["args"]
        .as_vec()
        .unwrap()
        .iter()
        .filter_map(|a| a.as_str())
        .collect();
    assert!(
        args.windows(2)
            .any(|w| w == ["--metrics-listen", "0.0.0.0:9464"]),
        "{args:?}"
    );
    let pm = &docs[1];
    assert_eq!(pm["kind"].as_str(), Some("PodMonitor"));
    assert_eq!(
        pm["spec"]["selector"]["matchLabels"]["hxlab.dev/run-id"].as_str(),
        Some("m")
    );
    assert_eq!(
        pm["spec"]["podMetricsEndpoints"][0]["port"].as_str(),
        Some("metrics")
    );
    let job_only = text.split("---\n").next().unwrap();
    let (code, out) = validate(&kv, dir.path(), "monitored.yaml", job_only);
    assert_eq!(code, Some(0), "{out}\n{job_only}");
    // The validator is awake: a misspelt field and a wrong type are refused.
    let text = render(&cases[0]);
    for (from, to) in [
        ("completionMode:", "completionsMode:"),
        ("completions: 1", "completions: \"1\""),
    ] {
        let bad = text.replacen(from, to, 1);
        let (code, out) = validate(&kv, dir.path(), "bad.yaml", &bad);
        assert_ne!(code, Some(0), "{from} → {to} passed:\n{out}");
    }
}

/// The Containerfile's final stage, built with podman from a root filesystem assembled by
/// deploy/rootfs.sh from this build's binary (no registry here), runs shard 0 of a rendered
/// Job while shard 1 runs on the host: the two merge into the whole run.
#[test]
fn the_image_runs_a_shard_that_merges_with_one_on_the_host() {
    let Some(podman) = common::require_peer("podman") else {
        return;
    };
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let ctx = TempDir::new("hxlab-image");
    let rootfs = ctx.path().join("rootfs");
    let mut cmd = Command::new("sh");
    cmd.arg(repo.join("deploy/rootfs.sh"))
        .arg(hxlab())
        .arg(&rootfs);
    let (code, _, err) = run_with_timeout(&mut cmd, LIMIT);
    assert_eq!(code, Some(0), "rootfs.sh: {err}");
    let tag = format!("localhost/hxlab-test:{}", std::process::id());
    let image = podman::build(&podman, "runtime", ("build", ctx.path()), &tag);

    let server = Server::start(&["--no-h3"]);
    let url = format!("http://{}/bytes/100", plain(&server));
    // The container may not set cubic (no CAP_NET_ADMIN in the host's network namespace)
    // where the host may: both parts run the system's controller, so they are one
    // configuration (merge refuses parts that ran different ones).
    let manifest = render(&[
        "--shards", "2", "--lead", "3s", "--", "load", "-n", "400", "-c", "4", "--cc", "system",
        &url,
    ]);
    let mut outs = Vec::new();
    let mut children = Vec::new();
    for i in 0..2 {
        let (argv, env) = container_line(&manifest, i);
        let argv = as_local_pod(argv);
        let mut cmd = if i == 0 {
            let mut c = podman::run_command(&podman);
            c.args(["--network", "host"]);
            for (k, v) in &env {
                c.arg("-e").arg(format!("{k}={v}"));
            }
            c.arg(&image.tag).args(&argv[1..]);
            c
        } else {
            let mut c = Command::new(hxlab());
            c.args(&argv[1..]).envs(env);
            c
        };
        cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
        children.push(cmd.spawn().expect("start a shard"));
    }
    for (i, c) in children.into_iter().enumerate() {
        let out = c.wait_with_output().expect("output");
        assert!(
            out.status.success(),
            "shard {i}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        outs.push(String::from_utf8(out.stdout).expect("utf-8"));
    }
    let (code, out, err) = merge_stdin(&outs.concat(), &[]);
    assert_eq!(code, Some(0), "{err}");
    let m: Value = serde_json::from_str(&out).expect("merged");
    assert_eq!(m["requests_done"], 400, "{err}");
}
