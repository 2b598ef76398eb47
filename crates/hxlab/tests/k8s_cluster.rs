//! `hxlab k8s render`'s Job on a real single-node Kubernetes: deploy/local-cluster-check.sh
//! brings up deploy/local-cluster.sh's cluster (Kubernetes v1.34.4 built from the Go module
//! proxy, Debian's etcd, containerd, runc and CNI plugins; the image made from this build's
//! binary), runs the rendered 4-shard `load --rate 2000 -D 10s -c 8` Job against an
//! `hxlab serve` on the CNI bridge, merges the pods' logs (20,000 scheduled exactly, shards
//! 0–3 each once, the origin's count between the merged done and started), deletes one shard's pod of a second
//! Job mid-run (merge refuses naming it, --allow-partial merges the rest), and checks that
//! `down` leaves no process, mount, bridge, cgroup, path, sysctl or firewall rule behind.
//! `.ci/run` builds the cluster's binaries (cached) before the tests.

mod common;

use common::{hxlab, run_with_timeout};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

#[test]
fn the_rendered_job_runs_on_a_local_cluster_and_merges_exactly() {
    let peers = [
        "etcd",
        "containerd",
        "containerd-shim-runc-v2",
        "runc",
        "podman",
        "openssl",
        "go",
    ];
    if peers.iter().any(|p| common::require_peer(p).is_none()) {
        return;
    }
    if !Path::new("/usr/lib/cni/bridge").exists() {
        hxlab_testkit::skip(
            "/usr/lib/cni/bridge is missing: apt-get install containernetworking-plugins",
        );
        return;
    }
    if !common::require_root("a local Kubernetes (bridge, cgroups, mounts)") {
        return;
    }
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut cmd = Command::new("bash");
    cmd.arg(repo.join("deploy/local-cluster-check.sh"))
        .env("HXLAB", hxlab());
    // The cluster's binaries are built by .ci/run (deploy/local-cluster.sh build); a cold
    // build here would take 6–25 minutes on 2 cores.
    let (code, out, err) = run_with_timeout(&mut cmd, Duration::from_secs(1800));
    assert_eq!(
        code,
        Some(0),
        "local-cluster-check.sh failed:\n{out}\n{err}"
    );
    eprintln!("{err}");
}
