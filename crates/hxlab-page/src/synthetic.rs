//! The synthetic page's origin: an `hxlab serve` started for `hxlab page --synthetic`,
//! serving [`hxlab_contract::SyntheticHtml`] under `/static/` (or its own `/page` endpoint
//! for push and 103 Early Hints), from one origin or two hostnames mapped to it.

use crate::options::{PageOptions, Synthetic};
use crate::started::{Mapping, Started};
use hxlab_browser::Proto;
use hxlab_child::origin::{Origin, OriginOptions};
use hxlab_contract::{PageDelay, SyntheticHtml};
use std::path::Path;

/// The hostnames of a two-origin synthetic page.
pub const SYNTHETIC_HOSTS: [&str; 2] = ["a.hxlab.test", "b.hxlab.test"];

/// Starts the synthetic origin on `bind`. Push and 103 Early Hints are features of the
/// origin's own `/page` endpoint; otherwise the page is [`SyntheticHtml`] delayed per resource,
/// served under `/static/`, from one origin or (origins=2) from two hostnames mapped to it,
/// its resources cacheable when `cache` is set.
pub(crate) fn synthetic_origin(
    s: &Synthetic,
    opts: &PageOptions,
    bind: &str,
    dir: &Path,
) -> Result<Started, String> {
    let use_origin_page = opts.push || opts.early_hints;
    if use_origin_page && s.origins > 1 {
        return Err("origins=2 cannot be combined with --push or --early-hints".into());
    }
    let www = dir.join("www");
    if !use_origin_page {
        std::fs::create_dir_all(&www).map_err(|e| format!("creating {}: {e}", www.display()))?;
    }
    let origin = Origin::start(&OriginOptions {
        hxlab_bin: opts.hxlab_bin.clone(),
        bind: bind.to_string(),
        dir: dir.to_path_buf(),
        www: (!use_origin_page).then_some(www.clone()),
        settings: opts.origin_settings(),
        capture_stderr: false,
        replay: None,
        // Firefox checks names: the two-origin page's hostnames are in the certificate.
        cert_names: SYNTHETIC_HOSTS.iter().map(|h| h.to_string()).collect(),
        ports: None,
    })
    .map_err(|e| format!("the synthetic origin: {e}"))?;
    if matches!(opts.proto, Proto::H3 | Proto::Auto) && origin.ready.h3.is_none() {
        return Err(
            "the synthetic origin has no HTTP/3 listener (\"h3\" is null in its ready file)".into(),
        );
    }
    let tls = origin.ready.tls;
    let port = tls.port();
    let mut mapping = Mapping::default();
    let (page_base, second) = if s.origins > 1 {
        let [a, b] = SYNTHETIC_HOSTS;
        let bind_host = match bind.parse::<std::net::Ipv6Addr>() {
            Ok(_) => format!("[{bind}]"),
            Err(_) => bind.to_string(),
        };
        mapping.rules = Some(format!("MAP {a} {bind_host}, MAP {b} {bind_host}"));
        mapping.force_quic = vec![format!("{a}:{port}"), format!("{b}:{port}")];
        (
            format!("https://{a}:{port}"),
            Some(format!("https://{b}:{port}")),
        )
    } else {
        (format!("https://{tls}"), None)
    };
    if !use_origin_page {
        // The directory is served from the start; the page names the port, known only now.
        let html = SyntheticHtml {
            n: u64::from(s.n),
            size: s.size,
            delay: PageDelay::EachResource(s.delay),
            second_origin: second.as_deref(),
            max_age_s: s.cache.map(|d| d.as_secs()),
        }
        .html();
        std::fs::write(www.join("page.html"), html)
            .map_err(|e| format!("writing the synthetic page: {e}"))?;
    }
    let url = if use_origin_page {
        format!(
            "https://{tls}/page?n={}&size={}&delay={}&push={}&early_hints={}",
            s.n,
            s.size,
            s.delay.as_secs_f64() * 1000.0,
            u8::from(opts.push),
            u8::from(opts.early_hints)
        )
    } else {
        format!("{page_base}/static/page.html")
    };
    let spki = origin.ready.spki_sha256.clone();
    Ok(Started {
        url,
        spki,
        origin,
        mapping,
    })
}
