//! hxlab-k8s: a Kubernetes Indexed Job that runs one `hxlab load` command as N shards, one
//! pod each, starting together at an instant fixed when the manifest is made.
//!
//! What it is for: the Job's manifest as YAML ([`JobSpec::render`]), with the kubectl
//! commands that run it and collect the pods' results for `hxlab merge` as comments on top,
//! and the checks of what Kubernetes would refuse (a Job name, a quantity).
//! What it is not: no flags and no check of the load arguments (the command line parses
//! them as `hxlab load` would, for every shard), no Kubernetes client (nothing is applied).

use hxlab_core::shard::format_instant;
use serde_json::{json, Value};
use std::time::Duration;

/// What the Job is made of. The strings are checked by the caller ([`check_name`],
/// [`check_quantity`], the pull policy one of IfNotPresent, Always, Never).
#[derive(Debug, Clone)]
pub struct JobSpec<'a> {
    /// Job name, also the run id.
    pub name: &'a str,
    /// Namespace of the Job.
    pub namespace: &'a str,
    /// Container image with hxlab at /usr/local/bin/hxlab.
    pub image: &'a str,
    /// Image pull policy.
    pub pull_policy: &'a str,
    /// CPU per pod, request = limit (Guaranteed QoS, so a shard is not throttled unseen).
    pub cpu: &'a str,
    /// Memory per pod, request = limit.
    pub memory: &'a str,
    /// Shards must run on nodes of their own (false: preferably).
    pub spread_required: bool,
    /// Node labels the pods need, `KEY=VALUE`.
    pub node_selector: &'a [String],
    /// Shards (pods).
    pub shards: u64,
    /// How long the finished Job (and its pods' logs) is kept.
    pub ttl: Duration,
    /// The instant the shards start, Unix seconds.
    pub start_at: f64,
    /// The user's words after `--`: `load` and its arguments.
    pub command: &'a [String],
    /// The load arguments already ask for no summary (`-q`).
    pub quiet: bool,
    /// The load arguments already ask for no progress bar.
    pub no_progress: bool,
    /// How long one shard's run lasts, seconds (for kubectl wait's timeout).
    pub run_s: f64,
    /// The port each pod serves its live metrics on (`hxlab load --metrics-listen`), with
    /// Prometheus' scrape annotations on the pods; None: no metrics.
    pub metrics_port: Option<u16>,
    /// Add a PodMonitor (prometheus-operator) that scrapes the pods' metrics.
    pub pod_monitor: bool,
}

/// How long a pod keeps serving its totals after its run, so the last scrape sees them
/// (two default scrape intervals).
pub const METRICS_LINGER: &str = "30s";

impl JobSpec<'_> {
    /// The manifest, with the collect commands as comments on top. `now` is Unix seconds.
    /// The error is one line (a node selector that is not `KEY=VALUE`).
    pub fn render(&self, now: f64) -> Result<String, String> {
        let job = self.job()?;
        let mut out = self.header(now);
        out.push_str(&to_yaml(&job));
        if let (true, Some(_)) = (self.pod_monitor, self.metrics_port) {
            out.push_str("---\n");
            out.push_str(&to_yaml(&self.pod_monitor()));
        }
        Ok(out)
    }

    /// A prometheus-operator PodMonitor scraping the Job's pods on their metrics port.
    fn pod_monitor(&self) -> Value {
        json!({
            "apiVersion": "monitoring.coreos.com/v1",
            "kind": "PodMonitor",
            "metadata": {"name": self.name, "namespace": self.namespace,
                         "labels": {"app.kubernetes.io/name": "hxlab"}},
            "spec": {
                "selector": {"matchLabels": {"hxlab.dev/run-id": self.name}},
                "podMetricsEndpoints": [{"port": "metrics", "path": "/metrics", "interval": "5s"}],
            },
        })
    }

    /// What each pod runs: its share of the load, started at the instant, its result as
    /// JSON on stdout (collected from the pods' logs), no summary and no progress bar.
    pub fn pod_args(&self) -> Vec<String> {
        let mut args: Vec<String> = vec![
            "load".into(),
            "--shards".into(),
            self.shards.to_string(),
            "--start-at".into(),
            format_instant(self.start_at),
            "--run-id".into(),
            self.name.to_string(),
            "--json".into(),
            "-".into(),
        ];
        if !self.quiet {
            args.push("-q".into());
        }
        if !self.no_progress {
            args.push("--no-progress".into());
        }
        if let Some(port) = self.metrics_port {
            args.push("--metrics-listen".into());
            args.push(format!("0.0.0.0:{port}"));
            args.push("--metrics-linger".into());
            args.push(METRICS_LINGER.into());
        }
        args.extend(self.command.iter().skip(1).cloned());
        args
    }

    /// The Job object.
    fn job(&self) -> Result<Value, String> {
        let name = self.name;
        let labels = json!({
            "app.kubernetes.io/name": "hxlab",
            "app.kubernetes.io/component": "load",
            "hxlab.dev/run-id": name,
        });
        let mut selector = serde_json::Map::new();
        for s in self.node_selector {
            let (k, v) = s
                .split_once('=')
                .filter(|(k, _)| !k.is_empty())
                .ok_or_else(|| format!("--node-selector {s:?}: expected KEY=VALUE"))?;
            selector.insert(k.into(), Value::String(v.into()));
        }
        let mut pod = self.pod();
        if !selector.is_empty() {
            pod["nodeSelector"] = Value::Object(selector);
        }
        let ttl_s = self.ttl.as_secs().min(i32::MAX as u64);
        Ok(json!({
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": name, "namespace": self.namespace, "labels": labels},
            "spec": {
                "completionMode": "Indexed",
                "completions": self.shards,
                "parallelism": self.shards,
                "backoffLimitPerIndex": 0,
                "ttlSecondsAfterFinished": ttl_s,
                "template": {
                    "metadata": self.template_metadata(&labels),
                    "spec": pod,
                },
            },
        }))
    }

    /// The pod template's labels, and Prometheus' scrape annotations when the pods serve
    /// metrics.
    fn template_metadata(&self, labels: &Value) -> Value {
        match self.metrics_port {
            Some(port) => json!({
                "labels": labels,
                "annotations": {
                    "prometheus.io/scrape": "true",
                    "prometheus.io/port": port.to_string(),
                    "prometheus.io/path": "/metrics",
                },
            }),
            None => json!({"labels": labels}),
        }
    }

    /// The pod template's spec: one locked-down container running the pod's share.
    fn pod(&self) -> Value {
        let term = json!({
            "labelSelector": {"matchLabels": {"hxlab.dev/run-id": self.name}},
            "topologyKey": "kubernetes.io/hostname",
        });
        let anti = if self.spread_required {
            json!({"requiredDuringSchedulingIgnoredDuringExecution": [term]})
        } else {
            json!({"preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 100, "podAffinityTerm": term}
            ]})
        };
        let resources = json!({"cpu": self.cpu, "memory": self.memory});
        json!({
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
                "image": self.image,
                "imagePullPolicy": self.pull_policy,
                "command": ["/usr/local/bin/hxlab"],
                "args": self.pod_args(),
                "env": [{
                    "name": "JOB_COMPLETION_INDEX",
                    "valueFrom": {"fieldRef": {
                        "fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']"
                    }},
                }],
                "resources": {"requests": resources, "limits": resources},
                "ports": self.metrics_port.map(|p| json!([
                    {"name": "metrics", "containerPort": p, "protocol": "TCP"}
                ])).unwrap_or_else(|| json!([])),
                "securityContext": {
                    "allowPrivilegeEscalation": false,
                    "readOnlyRootFilesystem": true,
                    "capabilities": {"drop": ["ALL"]},
                },
            }],
        })
    }

    /// The comment block: what the Job does and the commands that run and collect it.
    fn header(&self, now: f64) -> String {
        let (name, ns) = (self.name, self.namespace);
        let (shards, cpu, memory) = (self.shards, self.cpu, self.memory);
        // Long enough for the lead, the run and a slow pull.
        let wait_s = ((self.start_at - now).max(0.0) + self.run_s + 300.0).ceil() as u64;
        let quoted: Vec<String> = self.command.iter().map(|s| shell_quote(s)).collect();
        format!(
            "# hxlab k8s render: `hxlab {}` as {} shards (an Indexed Job, one pod per shard),\n\
             # all starting at {} (run id {name}).\n\
             # They must all run at once: the nodes need {shards} x {cpu} CPU and {shards} x {memory} memory free together\n\
             # (requests = limits); a pod left Pending for room starts late, and is flagged late.\n\
             # Run and collect:\n\
             #   kubectl apply -f THIS_FILE\n\
             #   kubectl wait --for=condition=complete job/{name} -n {ns} --timeout={wait_s}s\n\
             #   kubectl logs -l job-name={name} -n {ns} --tail=-1 | hxlab merge - -o {name}.json\n\
             # hxlab merge refuses a result with a shard missing or twice; see which pods failed with\n\
             #   kubectl get pods -l job-name={name} -n {ns}\n\
             # The shards start at the instant above: apply before it (render again if it has passed).\n",
            quoted.join(" "),
            self.shards,
            format_instant(self.start_at)
        )
    }
}

/// A Job name: a DNS label short enough for its pods' names (NAME-INDEX-xxxxx). The error
/// is one line.
pub fn check_name(name: &str) -> Result<(), String> {
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
        Err(format!(
            "--name {name:?}: use 1 to 52 lowercase letters, digits and '-', not at either end"
        ))
    }
}

/// A Kubernetes quantity given with `flag`: digits with an optional fraction and suffix (2,
/// 500m, 1.5, 1Gi). The error is one line.
pub fn check_quantity(flag: &str, q: &str) -> Result<(), String> {
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
        Err(format!(
            "{flag} {q:?}: a Kubernetes quantity, e.g. 2, 500m, 1Gi"
        ))
    }
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
/// implementation), mappings in `KEY_ORDER` then alphabetically. The emitter quotes every
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
    fn names_and_quantities_kubernetes_would_refuse() {
        assert!(check_name("hxlab-load-1").is_ok());
        for bad in ["", "Bad_Name", "-a", "a-", &"x".repeat(53)] {
            assert!(check_name(bad).is_err(), "{bad}");
        }
        for good in ["2", "500m", "1.5", "1Gi"] {
            assert!(check_quantity("--cpu", good).is_ok(), "{good}");
        }
        for bad in ["lots", "0", "1Xi", "-1", ""] {
            assert!(check_quantity("--cpu", bad).is_err(), "{bad}");
        }
    }
}
