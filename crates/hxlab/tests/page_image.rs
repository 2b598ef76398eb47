//! The `page` container image (Containerfile's `page` stage on a root filesystem that
//! deploy/page-rootfs.sh makes from Debian packages with mmdebstrap) runs `hxlab page`: a
//! real Chromium (over h2 and h3) and a real Firefox (over h3) inside the container load a
//! synthetic page from the origin hxlab starts there, over the protocol asked, and the
//! result says so. The FROM-scratch image cannot.

mod common;

use common::{hxlab, podman, run_with_timeout, tempfile_dir::TempDir};
use hxlab_contract::PageReport;
use hxlab_core::page::Outcome;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

#[test]
fn the_page_image_loads_a_page_in_its_chromium_and_firefox() {
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
    let image = podman::build(&podman, "page", ("pagefs", ctx.path()), &tag);
    // The root filesystem is in the image now; the context's 800 MB need not wait for the end.
    drop(ctx);

    for (browser, proto) in [("chromium", "h2"), ("chromium", "h3"), ("firefox", "h3")] {
        let mut cmd = podman::run_command(&podman);
        // NET_ADMIN: the origin sets its congestion controller (cubic), which an
        // unprivileged process may only do for the controllers in
        // net.ipv4.tcp_allowed_congestion_control.
        cmd.args(["--network", "host", "--cap-add", "NET_ADMIN"])
            .arg(&image.tag)
            .args([
                "page",
                "--browser",
                browser,
                "--synthetic",
                "n=3,size=10KiB",
            ])
            .args(["--runs", "1"])
            .args(["--proto", proto, "--json", "-"]);
        let (code, out, err) = run_with_timeout(&mut cmd, Duration::from_secs(180));
        assert_eq!(
            code,
            Some(0),
            "hxlab page --browser {browser} --proto {proto} in the image: {err}"
        );
        let doc: PageReport = serde_json::from_str(&out).expect("a page report");
        let want = if browser == "firefox" {
            "Firefox"
        } else {
            "Chrom"
        };
        assert!(doc.browser.contains(want), "{}", doc.browser);
        let entry = &doc.runs[0];
        assert!(entry.counted(), "{entry:?}");
        let Outcome::Measured(run) = &entry.outcome else {
            panic!("run 1 failed: {entry:?}");
        };
        let protocols: Vec<&str> = run.resources.iter().map(|r| r.protocol.as_str()).collect();
        // The page and its three images, every one over the protocol asked.
        assert_eq!(protocols.len(), 4, "{protocols:?}");
        assert!(protocols.iter().all(|p| *p == proto), "{protocols:?}");
    }
}
