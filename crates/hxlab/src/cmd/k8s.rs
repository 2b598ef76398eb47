//! `hxlab k8s render`: a Kubernetes Indexed Job that runs one `hxlab load` command as N
//! shards, one pod each, starting together at an instant fixed when the manifest is made;
//! with the commands that collect the pods' results and merge them exactly.
//!
//! The load arguments are checked here as `hxlab load` would check them, for every shard, so
//! a manifest that renders is one whose pods start. Files named by flags (--config,
//! --data-file, --cacert) would not exist in the pod and are refused.

use super::load;
use clap::Parser;
use hxlab_core::shard::{format_compact, format_instant, parse_instant};
use hxlab_core::units::parse_duration;
use serde_json::{json, Value};
use std::process::ExitCode;
use std::time::Duration;

/// `hxlab k8s`.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(subcommand)]
    pub command: Sub,
}

/// The `hxlab k8s` subcommands.
#[derive(clap::Subcommand, Debug)]
pub enum Sub {
    /// Print an Indexed Job (YAML) running `hxlab load ARGS` as N shards started together.
    Render(RenderArgs),
}

/// Options of `hxlab k8s render`.
#[derive(clap::Args, Debug)]
pub struct RenderArgs {
    /// Shards (pods), each with its share of -c and -n, or of --rate's timetable.
    #[arg(long = "shards", default_value_t = 2)]
    pub shards: u64,
    /// Container image with hxlab at /usr/local/bin/hxlab (see Containerfile).
    #[arg(long = "image", default_value = concat!("localhost/hxlab:", env!("CARGO_PKG_VERSION")))]
    pub image: String,
    /// Namespace of the Job.
    #[arg(long = "namespace", default_value = "default")]
    pub namespace: String,
    /// Job name, also the run id (default: hxlab-load- and the start time).
    #[arg(long = "name")]
    pub name: Option<String>,
    /// How long after rendering the shards start (time to apply, schedule, pull the image).
    #[arg(long = "lead", default_value = "2m", value_name = "DUR")]
    pub lead: String,
    /// Start at this instant instead (RFC 3339 or Unix seconds).
    #[arg(long = "start-at", value_name = "TIME", conflicts_with = "lead")]
    pub start_at: Option<String>,
    /// CPU per pod, request = limit (Guaranteed QoS, so a shard is not throttled unseen).
    #[arg(long = "cpu", default_value = "2")]
    pub cpu: String,
    /// Memory per pod, request = limit.
    #[arg(long = "memory", default_value = "1Gi")]
    pub memory: String,
    /// Keep shards on different nodes: "preferred" (spread when there are enough nodes) or
    /// "required" (a shard waits for a node of its own).
    #[arg(long = "spread", default_value = "preferred")]
    pub spread: String,
    /// Run only on nodes with this label, KEY=VALUE (repeatable).
    #[arg(long = "node-selector", value_name = "KEY=VALUE")]
    pub node_selector: Vec<String>,
    /// Image pull policy: IfNotPresent, Always or Never.
    #[arg(long = "pull-policy", default_value = "IfNotPresent")]
    pub pull_policy: String,
    /// Delete the finished Job (and its pods' logs) this long after it ends.
    #[arg(long = "ttl", default_value = "24h", value_name = "DUR")]
    pub ttl: String,
    /// `load` and its arguments, after `--`.
    #[arg(last = true, required = true, value_name = "load ARGS")]
    pub command: Vec<String>,
}

/// `hxlab load`'s flags on their own, to check the arguments a pod will get.
#[derive(Parser, Debug)]
#[command(name = "hxlab load", no_binary_name = true)]
struct LoadLine {
    #[command(flatten)]
    args: load::Args,
}

/// Runs `hxlab k8s`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    match args.command {
        Sub::Render(r) => {
            let text = render(&r, hxlab_load::parts::unix_now())?;
            print!("{text}");
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// The manifest, with the collect commands as comments on top. `now` is Unix seconds.
pub fn render(r: &RenderArgs, now: f64) -> anyhow::Result<String> {
    let shards = r.shards;
    if shards == 0 || shards > 10_000 {
        return Err(super::usage("--shards: must be between 1 and 10000"));
    }
    let start_at = match &r.start_at {
        Some(t) => parse_instant(t).map_err(|e| super::usage(format!("--start-at {e}")))?,
        None => {
            let lead = parse_duration(&r.lead).map_err(|e| super::usage(format!("--lead: {e}")))?;
            (now + lead.as_secs_f64()).ceil()
        }
    };
    let name = match &r.name {
        Some(n) => n.clone(),
        None => format!("hxlab-load-{}", format_compact(start_at)),
    };
    check_name(&name)?;
    let ttl = parse_duration(&r.ttl).map_err(|e| super::usage(format!("--ttl: {e}")))?;
    for (flag, q) in [("--cpu", &r.cpu), ("--memory", &r.memory)] {
        check_quantity(flag, q)?;
    }
    if !["preferred", "required"].contains(&r.spread.as_str()) {
        return Err(super::usage(format!(
            "--spread {:?}: use preferred or required",
            r.spread
        )));
    }
    if !["IfNotPresent", "Always", "Never"].contains(&r.pull_policy.as_str()) {
        return Err(super::usage(format!(
            "--pull-policy {:?}: use IfNotPresent, Always or Never",
            r.pull_policy
        )));
    }
    let load_args = check_load_args(&r.command, shards)?;
    let mut args: Vec<String> = vec![
        "load".into(),
        "--shards".into(),
        shards.to_string(),
        "--start-at".into(),
        format_instant(start_at),
        "--run-id".into(),
        name.clone(),
        "--json".into(),
        "-".into(),
    ];
    if !load_args.quiet {
        args.push("-q".into());
    }
    if !load_args.no_progress {
        args.push("--no-progress".into());
    }
    args.extend(r.command[1..].iter().cloned());
    let job = job(r, &name, args, ttl)?;
    let mut out = header(r, &name, start_at, &load_args, now);
    out.push_str(&to_yaml(&job));
    Ok(out)
}

/// Load flags a pod cannot take, in the order `check_load_args` tests them, with why.
const REFUSED: [(&str, &str); 8] = [
    ("--shard", "the Job gives each pod its shard"),
    ("--shards", "use k8s render --shards"),
    ("--start-at", "use k8s render --start-at or --lead"),
    ("--run-id", "the Job name is the run id (--name)"),
    ("--json", "each pod prints its result on stdout"),
    ("--config", "the file is not in the pod; give the flags"),
    ("--data-file", "the file is not in the pod; use -d"),
    (
        "--cacert",
        "the file is not in the pod; build it into the image or use -k",
    ),
];

/// Checks `load ARGS` for every shard as `hxlab load --shard I/N` would, and refuses what a
/// pod cannot have or what the manifest sets itself.
fn check_load_args(command: &[String], shards: u64) -> anyhow::Result<load::Args> {
    if command.first().map(String::as_str) != Some("load") {
        return Err(super::usage(
            "k8s render: give the load command after --, e.g. -- load -c 100 -D 30s https://host/",
        ));
    }
    let line = LoadLine::try_parse_from(&command[1..]).map_err(|e| {
        let first = e.to_string();
        let first = first
            .lines()
            .next()
            .unwrap_or("bad arguments")
            .trim()
            .to_string();
        super::usage(format!(
            "k8s render: load {}",
            first.trim_start_matches("error: ")
        ))
    })?;
    let a = line.args;
    let set = [
        a.shard.is_some(),
        a.shards.is_some(),
        a.start_at.is_some(),
        a.run_id.is_some(),
        a.json.is_some(),
        a.config.is_some(),
        a.data_file.is_some(),
        a.cacert.is_some(),
    ];
    if let Some((flag, why)) = set.iter().zip(REFUSED).find(|(s, _)| **s).map(|(_, r)| r) {
        return Err(super::usage(format!("k8s render: load {flag}: {why}")));
    }
    let mut cfg = load::config_from_args(&a)?;
    for index in 0..shards {
        cfg.shard = Some(hxlab_load::Shard {
            index,
            count: shards,
        });
        cfg.validate()
            .map_err(|e| super::usage(format!("k8s render: {e}")))?;
    }
    Ok(a)
}

/// A Job name: a DNS label short enough for its pods' names (NAME-INDEX-xxxxx).
fn check_name(name: &str) -> anyhow::Result<()> {
    let ok = !name.is_empty()
        && name.len() <= 52
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !name.starts_with('-')
        && !name.ends_with('-');
    if ok {
        Ok(())
    } else {
        Err(super::usage(format!(
            "--name {name:?}: use 1 to 52 lowercase letters, digits and '-', not at either end"
        )))
    }
}

/// A Kubernetes quantity: digits with an optional fraction and suffix (2, 500m, 1.5, 1Gi).
fn check_quantity(flag: &str, q: &str) -> anyhow::Result<()> {
    let digits = q.trim_end_matches(|c: char| c.is_ascii_alphabetic());
    let suffix = &q[digits.len()..];
    let ok = !digits.is_empty()
        && digits
            .parse::<f64>()
            .is_ok_and(|v| v > 0.0 && v.is_finite())
        && digits.bytes().all(|b| b.is_ascii_digit() || b == b'.')
        && ["", "m", "k", "M", "G", "T", "Ki", "Mi", "Gi", "Ti"].contains(&suffix);
    if ok {
        Ok(())
    } else {
        Err(super::usage(format!(
            "{flag} {q:?}: a Kubernetes quantity, e.g. 2, 500m, 1Gi"
        )))
    }
}

/// The Job object.
fn job(r: &RenderArgs, name: &str, args: Vec<String>, ttl: Duration) -> anyhow::Result<Value> {
    let labels = json!({
        "app.kubernetes.io/name": "hxlab",
        "app.kubernetes.io/component": "load",
        "hxlab.dev/run-id": name,
    });
    let term = json!({
        "labelSelector": {"matchLabels": {"hxlab.dev/run-id": name}},
        "topologyKey": "kubernetes.io/hostname",
    });
    let anti = if r.spread == "required" {
        json!({"requiredDuringSchedulingIgnoredDuringExecution": [term]})
    } else {
        json!({"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 100, "podAffinityTerm": term}
        ]})
    };
    let mut selector = serde_json::Map::new();
    for s in &r.node_selector {
        let (k, v) = s
            .split_once('=')
            .filter(|(k, _)| !k.is_empty())
            .ok_or_else(|| super::usage(format!("--node-selector {s:?}: expected KEY=VALUE")))?;
        selector.insert(k.into(), Value::String(v.into()));
    }
    let resources = json!({"cpu": r.cpu, "memory": r.memory});
    let mut pod = json!({
        "restartPolicy": "Never",
        "enableServiceLinks": false,
        "automountServiceAccountToken": false,
        "terminationGracePeriodSeconds": 10,
        "affinity": {"podAntiAffinity": anti},
        "securityContext": {
            "runAsNonRoot": true,
            "runAsUser": 65532,
            "runAsGroup": 65532,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "containers": [{
            "name": "load",
            "image": r.image,
            "imagePullPolicy": r.pull_policy,
            "command": ["/usr/local/bin/hxlab"],
            "args": args,
            "env": [{
                "name": "JOB_COMPLETION_INDEX",
                "valueFrom": {"fieldRef": {
                    "fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']"
                }},
            }],
            "resources": {"requests": resources, "limits": resources},
            "securityContext": {
                "allowPrivilegeEscalation": false,
                "readOnlyRootFilesystem": true,
                "capabilities": {"drop": ["ALL"]},
            },
        }],
    });
    if !selector.is_empty() {
        pod["nodeSelector"] = Value::Object(selector);
    }
    let ttl_s = ttl.as_secs().min(i32::MAX as u64);
    Ok(json!({
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": r.namespace, "labels": labels},
        "spec": {
            "completionMode": "Indexed",
            "completions": r.shards,
            "parallelism": r.shards,
            "backoffLimitPerIndex": 0,
            "ttlSecondsAfterFinished": ttl_s,
            "template": {
                "metadata": {"labels": labels},
                "spec": pod,
            },
        },
    }))
}

/// The comment block: what the Job does and the commands that run and collect it.
fn header(r: &RenderArgs, name: &str, start_at: f64, a: &load::Args, now: f64) -> String {
    let ns = &r.namespace;
    // Long enough for the lead, the run and a slow pull; a -n run has no known length.
    let run_s = a
        .duration
        .as_deref()
        .and_then(|d| parse_duration(d).ok())
        .map(|d| d.as_secs_f64())
        .unwrap_or(3600.0)
        + a.warm_up
            .as_deref()
            .and_then(|d| parse_duration(d).ok())
            .map_or(0.0, |d| d.as_secs_f64());
    let wait_s = ((start_at - now).max(0.0) + run_s + 300.0).ceil() as u64;
    let quoted: Vec<String> = r.command.iter().map(|s| shell_quote(s)).collect();
    format!(
        "# hxlab k8s render: `hxlab {}` as {} shards (an Indexed Job, one pod per shard),\n\
         # all starting at {} (run id {name}).\n\
         # Run and collect:\n\
         #   kubectl apply -f THIS_FILE\n\
         #   kubectl wait --for=condition=complete job/{name} -n {ns} --timeout={wait_s}s\n\
         #   kubectl logs -l job-name={name} -n {ns} --tail=-1 | hxlab merge - -o {name}.json\n\
         # hxlab merge refuses a result with a shard missing or twice; see which pods failed with\n\
         #   kubectl get pods -l job-name={name} -n {ns}\n\
         # The shards start at the instant above: apply before it (render again if it has passed).\n",
        quoted.join(" "),
        r.shards,
        format_instant(start_at)
    )
}

/// A word for a shell comment line, quoted when it needs to be.
fn shell_quote(s: &str) -> String {
    if !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_./:=,@%+".contains(&b))
    {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

/// The manifest as YAML, written by yaml-rust2's emitter (a maintained YAML 1.2
/// implementation), mappings in [`KEY_ORDER`] then alphabetically. The emitter quotes every
/// string YAML would read as something else (`"yes"`, `"2"`, `"null"`).
pub fn to_yaml(v: &Value) -> String {
    let mut out = String::new();
    let mut emitter = yaml_rust2::YamlEmitter::new(&mut out);
    // Writing into a String cannot fail.
    let _ = emitter.dump(&yaml_of(v));
    // The emitter opens the document with `---`; the manifest is one document.
    let body = out.strip_prefix("---\n").unwrap_or(&out);
    format!("{body}\n")
}

/// Keys in the order Kubernetes manifests are read (kind first, then name, ...); the rest
/// alphabetically.
const KEY_ORDER: [&str; 12] = [
    "apiVersion",
    "kind",
    "name",
    "namespace",
    "metadata",
    "labels",
    "spec",
    "image",
    "imagePullPolicy",
    "command",
    "args",
    "env",
];

/// A JSON value as a YAML node, mapping keys in [`KEY_ORDER`].
fn yaml_of(v: &Value) -> yaml_rust2::Yaml {
    use yaml_rust2::Yaml;
    match v {
        Value::Null => Yaml::Null,
        Value::Bool(b) => Yaml::Boolean(*b),
        Value::Number(n) => match n.as_i64() {
            Some(i) => Yaml::Integer(i),
            None => Yaml::Real(n.to_string()),
        },
        Value::String(s) => Yaml::String(s.clone()),
        Value::Array(a) => Yaml::Array(a.iter().map(yaml_of).collect()),
        Value::Object(o) => {
            let mut entries: Vec<(&String, &Value)> = o.iter().collect();
            let rank = |k: &str| {
                KEY_ORDER
                    .iter()
                    .position(|x| *x == k)
                    .unwrap_or(KEY_ORDER.len())
            };
            entries.sort_by(|a, b| (rank(a.0), a.0).cmp(&(rank(b.0), b.0)));
            let mut h = yaml_rust2::yaml::Hash::new();
            for (k, val) in entries {
                h.insert(Yaml::String(k.clone()), yaml_of(val));
            }
            Yaml::Hash(h)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(extra: &[&str]) -> RenderArgs {
        let mut v = vec!["render"];
        v.extend_from_slice(extra);
        #[derive(Parser)]
        #[command(no_binary_name = true)]
        struct Top {
            #[command(subcommand)]
            sub: Sub,
        }
        match Top::try_parse_from(v).unwrap().sub {
            Sub::Render(r) => r,
        }
    }

    #[test]
    fn yaml_reads_back_as_the_value_in_manifest_order() {
        let v = json!({"a": {"b": [1, "2", {"c": true, "d": ["x"]}], "e": []}, "f": "yes",
            "kind": "Job", "apiVersion": "v1", "g": null, "h": 2.5});
        let text = to_yaml(&v);
        assert!(text.starts_with("apiVersion: v1\nkind: Job\n"), "{text}");
        // Strings YAML would read as a boolean or a number stay strings.
        let docs = yaml_rust2::YamlLoader::load_from_str(&text).expect("valid YAML");
        let back = &docs[0];
        assert_eq!(back["f"].as_str(), Some("yes"));
        assert_eq!(back["a"]["b"][1].as_str(), Some("2"));
        assert_eq!(back["a"]["b"][0].as_i64(), Some(1));
        assert_eq!(back["a"]["b"][2]["c"].as_bool(), Some(true));
        assert_eq!(back["a"]["b"][2]["d"][0].as_str(), Some("x"));
        assert!(back["a"]["e"].as_vec().is_some_and(Vec::is_empty));
        assert!(back["g"].is_null());
        assert_eq!(back["h"].as_f64(), Some(2.5));
    }

    #[test]
    fn the_job_runs_the_load_as_shards_starting_together() {
        let r = args(&[
            "--shards",
            "4",
            "--name",
            "t1",
            "--start-at",
            "2026-11-23T20:30:00Z",
            "--",
            "load",
            "-c",
            "8",
            "-D",
            "30s",
            "http://origin:8080/bytes/100",
        ]);
        let text = render(&r, 1_795_000_000.0).unwrap();
        assert!(text.contains("kubectl wait --for=condition=complete job/t1 -n default"));
        assert!(text.contains("kubectl logs -l job-name=t1 -n default --tail=-1 | hxlab merge -"));
        for want in [
            "completionMode: Indexed",
            "completions: 4",
            "parallelism: 4",
            "backoffLimitPerIndex: 0",
            "restartPolicy: Never",
            "- \"--shards\"\n            - \"4\"\n            - \"--start-at\"\n            - \"2026-11-23T20:30:00Z\"",
            "- \"http://origin:8080/bytes/100\"",
        ] {
            assert!(text.contains(want), "{want} not in\n{text}");
        }
    }

    #[test]
    fn what_a_pod_cannot_run_is_refused() {
        let now = 1_795_000_000.0;
        for (extra, want) in [
            (
                vec!["--", "load", "-c", "1", "http://h/"],
                "without a connection",
            ),
            (
                vec!["--", "load", "--json", "x", "-c", "4", "http://h/"],
                "--json",
            ),
            (
                vec!["--", "load", "--cacert", "/c.pem", "-c", "4", "https://h/"],
                "--cacert",
            ),
            (
                vec!["--", "load", "--shard", "0/2", "-c", "4", "http://h/"],
                "--shard",
            ),
            (
                vec!["--", "load", "-c", "4", "--bogus", "http://h/"],
                "--bogus",
            ),
            (vec!["--", "-c", "4", "http://h/"], "give the load command"),
            (
                vec!["--name", "Bad_Name", "--", "load", "-c", "4", "http://h/"],
                "--name",
            ),
            (
                vec!["--cpu", "lots", "--", "load", "-c", "4", "http://h/"],
                "--cpu",
            ),
            (
                vec!["--spread", "maybe", "--", "load", "-c", "4", "http://h/"],
                "--spread",
            ),
        ] {
            let mut all = vec!["--shards", "2"];
            all.extend(extra);
            if !want.contains("request") && !want.contains("connection") {
                all.extend(["-n", "100"]);
            }
            let e = render(&args(&all), now).unwrap_err();
            assert!(super::super::exit_code_of(&e) == ExitCode::from(2));
            let msg = super::super::one_line(&e);
            assert!(msg.contains(want), "{all:?}: {msg}");
        }
    }
}
