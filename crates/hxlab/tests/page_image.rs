//! The `page` container image (Containerfile's `page` stage on a root filesystem that
//! deploy/page-rootfs.sh makes from Debian packages with mmdebstrap) runs `hxlab page`: a
//! real Chromium inside the container loads a synthetic page from the origin hxlab starts
//! there, over the protocol asked, and the result says so. The FROM-scratch image cannot.

mod common;

use common::{hxlab, run_with_timeout, tempfile_dir::TempDir};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

/// The hard limit on open files here: podman asks for more than a container may have where
/// the machine does not grant CAP_SYS_RESOURCE.
fn nofile_hard() -> u64 {
    let out = Command::new("sh")
        .args(["-c", "ulimit -Hn"])
        .output()
        .expect("sh");
    let text = String::from_utf8_lossy(&out.stdout);
    text.trim().parse::<u64>().unwrap_or(1 << 20).min(1 << 20)
}

/// Removes the image it names when dropped.
struct Image(PathBuf, String);

impl Drop for Image {
    fn drop(&mut self) {
        let _ = Command::new(&self.0)
            .args(["rmi", "-f", &self.1])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}

#[test]
fn the_page_image_loads_a_page_over_h2_and_h3_in_its_chromium() {
    let (Some(podman), Some(_)) = (
        common::require_peer("podman"),
        common::require_peer("mmdebstrap"),
    ) else {
        return;
    };
    if !common::require_root("the page image (mmdebstrap, podman)") {
        return;
    }
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let ctx = TempDir::new("hxlab-page-image");
    // Downloading the packages is most of it (3–5 minutes from a Debian mirror).
    let mut cmd = Command::new("sh");
    cmd.arg(repo.join("deploy/page-rootfs.sh"))
        .arg(hxlab())
        .arg(ctx.path().join("rootfs"));
    let (code, _, err) = run_with_timeout(&mut cmd, Duration::from_secs(900));
    assert_eq!(code, Some(0), "page-rootfs.sh: {err}");
    let tag = format!("localhost/hxlab-page-test:{}", std::process::id());
    let mut cmd = Command::new(&podman);
    cmd.args(["build", "--quiet", "--target", "page", "-t", &tag])
        .arg(format!("--build-context=pagefs={}", ctx.path().display()))
        .arg("-f")
        .arg(repo.join("Containerfile"))
        .arg(&repo);
    let (code, _, err) = run_with_timeout(&mut cmd, Duration::from_secs(600));
    assert_eq!(code, Some(0), "podman build: {err}");
    let _image = Image(podman.clone(), tag.clone());
    // The root filesystem is in the image now; the context's 800 MB need not wait for the end.
    drop(ctx);

    let n = nofile_hard();
    for proto in ["h2", "h3"] {
        let mut cmd = Command::new(&podman);
        // runc and explicit limits: crun refuses hybrid cgroup hosts, and podman's default
        // limits exceed what a machine without CAP_SYS_RESOURCE grants. NET_ADMIN: the
        // origin sets its congestion controller (cubic), which an unprivileged process may
        // only do for the controllers in net.ipv4.tcp_allowed_congestion_control.
        cmd.args(["--runtime", "runc", "run", "--rm", "--network", "host"])
            .args(["--cap-add", "NET_ADMIN"])
            .arg(format!("--ulimit=nofile={n}:{n}"))
            .arg("--ulimit=nproc=32768:32768")
            .arg(&tag)
            .args(["page", "--synthetic", "n=3,size=10KiB", "--runs", "1"])
            .args(["--proto", proto, "--json", "-"]);
        let (code, out, err) = run_with_timeout(&mut cmd, Duration::from_secs(180));
        assert_eq!(
            code,
            Some(0),
            "hxlab page --proto {proto} in the image: {err}"
        );
        let doc: Value = serde_json::from_str(&out).expect("the page report is JSON");
        assert!(
            doc["browser"].as_str().is_some_and(|b| b.contains("Chrom")),
            "{}",
            doc["browser"]
        );
        let run = &doc["runs"][0];
        assert_eq!(run["counted"], true, "{run}");
        let protocols: Vec<&str> = run["resources"]
            .as_array()
            .expect("resources")
            .iter()
            .filter_map(|r| r["protocol"].as_str())
            .collect();
        // The page and its three images, every one over the protocol asked.
        assert_eq!(protocols.len(), 4, "{protocols:?}");
        assert!(protocols.iter().all(|p| *p == proto), "{protocols:?}");
    }
}
