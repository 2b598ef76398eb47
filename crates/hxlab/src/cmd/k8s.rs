//! `hxlab k8s render`: a Kubernetes Indexed Job that runs one `hxlab load` command as N
//! shards, one pod each, starting together at an instant fixed when the manifest is made;
//! with the commands that collect the pods' results and merge them exactly.
//!
//! The load arguments are checked here as `hxlab load` would check them, for every shard, so
//! a manifest that renders is one whose pods start. Files named by flags (--config, -d, -i,
//! --cacert) would not exist in the pod, and one written there (--log-file) would stay in
//! it: they are refused. The manifest itself is hxlab-k8s's [`JobSpec`](hxlab_k8s::JobSpec).

use super::load;
use clap::Parser;
use hxlab_core::shard::{format_compact, parse_instant};
use hxlab_core::units::parse_duration;
use std::process::ExitCode;

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
    /// The port each pod serves its live figures on (`hxlab load --metrics-listen`), with
    /// Prometheus' scrape annotations on the pods; 0: none.
    #[arg(long = "metrics-port", default_value_t = 9464)]
    pub metrics_port: u16,
    /// Also render a PodMonitor (prometheus-operator) that scrapes the pods.
    #[arg(long = "pod-monitor")]
    pub pod_monitor: bool,
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
            let text = render(&r, hxlab_load::shard::unix_now())?;
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
    hxlab_k8s::check_name(&name).map_err(super::usage)?;
    let ttl = parse_duration(&r.ttl).map_err(|e| super::usage(format!("--ttl: {e}")))?;
    for (flag, q) in [("--cpu", &r.cpu), ("--memory", &r.memory)] {
        hxlab_k8s::check_quantity(flag, q).map_err(super::usage)?;
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
    // A -n run has no known length: an hour, plus the warm-up.
    let secs = |d: &Option<String>| {
        let d = d.as_deref().and_then(|d| parse_duration(d).ok());
        d.map(|d| d.as_secs_f64())
    };
    let spec = hxlab_k8s::JobSpec {
        name: &name,
        namespace: &r.namespace,
        image: &r.image,
        pull_policy: &r.pull_policy,
        cpu: &r.cpu,
        memory: &r.memory,
        spread_required: r.spread == "required",
        node_selector: &r.node_selector,
        shards,
        ttl,
        start_at,
        command: &r.command,
        quiet: load_args.quiet,
        no_progress: load_args.no_progress,
        run_s: secs(&load_args.duration).unwrap_or(3600.0)
            + secs(&load_args.warm_up).unwrap_or(0.0),
        metrics_port: (r.metrics_port != 0).then_some(r.metrics_port),
        pod_monitor: r.pod_monitor,
    };
    if r.pod_monitor && r.metrics_port == 0 {
        return Err(super::usage("--pod-monitor needs --metrics-port (not 0)"));
    }
    spec.render(now).map_err(super::usage)
}

/// Load flags a pod cannot take, in the order `check_load_args` tests them, with why.
const REFUSED: [(&str, &str); 11] = [
    ("--shard", "the Job gives each pod its shard"),
    ("--shards", "use k8s render --shards"),
    ("--start-at", "use k8s render --start-at or --lead"),
    ("--run-id", "the Job name is the run id (--name)"),
    ("--json", "each pod prints its result on stdout"),
    ("--config", "the file is not in the pod; give the flags"),
    (
        "-d/--data",
        "the file is not in the pod; give the body with --data-string",
    ),
    (
        "-i/--input-file",
        "the file is not in the pod; give the URLs",
    ),
    ("--log-file", "the file would stay in the pod"),
    (
        "--cacert",
        "the file is not in the pod; build it into the image or use -k",
    ),
    ("--metrics-listen", "use k8s render --metrics-port"),
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
        a.data.is_some(),
        a.input_file.is_some(),
        a.log_file.is_some(),
        a.cacert.is_some(),
        a.metrics_listen.is_some(),
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
