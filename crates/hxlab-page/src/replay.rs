//! `hxlab page --replay site.har`: an `hxlab serve --replay` started for the page, every
//! recorded origin mapped to it in the browser, and per-run counts of what the archive did
//! not hold (docs/page.md, "Record and replay").

use crate::options::PageOptions;
use crate::started::{Mapping, Started};
use hxlab_child::origin::{Origin, OriginOptions};
use hxlab_contract::ReplayCounts;
use hxlab_core::har::{Archive, FailureKind, HarOrigin, RecordedStart};
use hxlab_core::Proto;
use std::path::Path;

/// Reads a HAR for replay over `proto` and finds where its page load starts; the error is
/// one line (a usage error for the command line).
pub fn check_archive(path: &Path, proto: Proto) -> Result<(Archive, String), String> {
    let archive = Archive::read(path).map_err(|e| e.to_string())?;
    let start = RecordedStart::of(&archive)
        .url_for(proto)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    Ok((archive, start))
}

/// `--replay HAR` checked before any browser starts: the archive is readable and loadable
/// over `proto`. The notes say where the load starts when the recording redirects, and what
/// it left out; the error is one line (a usage error for the command line).
pub fn replay_notes(har: &Path, proto: Proto) -> Result<Vec<String>, String> {
    let (archive, start) = check_archive(har, proto)?;
    let mut notes = Vec::new();
    let chain = archive.redirect_chain();
    if chain.len() > 1 {
        notes.push(format!(
            "the recording redirects {} to {}; {} loads start at {start}{}",
            archive.page_url,
            chain.last().map(String::as_str).unwrap_or(""),
            proto.name(),
            if start == archive.page_url && proto != Proto::H1 {
                " (redirects answered as recorded; the protocol check counts only https responses)"
            } else {
                ""
            }
        ));
    }
    if let Some(failures) = archive.failures_text() {
        notes.push(format!("{}: {failures}", har.display()));
    }
    if let Some(skipped) = archive.skipped_text() {
        notes.push(format!(
            "{}: {skipped} (nothing can replay them)",
            har.display()
        ));
    }
    Ok(notes)
}

/// A port nothing listens on at the replay server's address: a recorded origin that could
/// not be reached is sent there, and refused at once.
const REFUSING_PORT: u16 = 1;

/// `--host-resolver-rules` sending every recorded origin to `bind`: https origins to the
/// TLS port (h3 shares its number), http ones to the plain port. Rules name `host:port`, so
/// an archive with both schemes on one host maps each to its own listener. Origins whose
/// requests failed in the recording fail again, promptly: a name that did not resolve does
/// not resolve (`~NOTFOUND`), an origin that could not be reached is refused. Every other
/// host does not resolve either (Chromium applies the first rule that matches): a request
/// of the page outside the recording fails at once instead of reaching the network, and so
/// does the browser's own background traffic (update and time checks), which would
/// otherwise share the emulated link with the page.
pub(crate) fn resolver_rules(
    origins: &[HarOrigin],
    failed: &[(HarOrigin, FailureKind)],
    bind: &str,
    tls: u16,
    plain: u16,
) -> String {
    let bracket = |h: &str| match h.parse::<std::net::Ipv6Addr>() {
        Ok(_) => format!("[{h}]"),
        Err(_) => h.to_string(),
    };
    let bind = bracket(bind);
    let mut rules: Vec<String> = origins
        .iter()
        .map(|o| {
            let port = if o.scheme == "https" { tls } else { plain };
            format!("MAP {}:{} {bind}:{port}", bracket(&o.host), o.port)
        })
        .collect();
    for (o, kind) in failed {
        rules.push(match kind {
            FailureKind::NameNotResolved => format!("MAP {} ~NOTFOUND", bracket(&o.host)),
            _ => format!("MAP {}:{} {bind}:{REFUSING_PORT}", bracket(&o.host), o.port),
        });
    }
    rules.push("MAP * ~NOTFOUND".to_string());
    rules.join(", ")
}

/// Starts `hxlab serve --replay har` on `bind` and maps the archive's origins to it.
pub(crate) fn replay_origin(
    har: &Path,
    opts: &PageOptions,
    bind: &str,
    dir: &Path,
) -> Result<Started, String> {
    let (archive, url) = check_archive(har, opts.proto)?;
    // Firefox cannot map ports: its replay server answers on the recorded ones.
    let (bind, ports) = match opts.engine {
        hxlab_browser::Engine::Chromium => (bind.to_string(), None),
        hxlab_browser::Engine::Firefox => {
            let (tls, plain) = crate::replay_ports::recorded_ports(&archive.origins)?;
            let at = crate::replay_ports::listen_address(&archive.origins, bind, tls, plain)?;
            (at.to_string(), Some((tls, plain)))
        }
    };
    let bind = bind.as_str();
    let origin = Origin::start(&OriginOptions {
        hxlab_bin: opts.hxlab_bin.clone(),
        bind: bind.to_string(),
        dir: dir.to_path_buf(),
        www: None,
        settings: opts.origin_settings(),
        capture_stderr: true,
        replay: Some(har.to_path_buf()),
        cert_names: Vec::new(),
        ports,
    })
    .map_err(|e| format!("the replay server: {e}"))?;
    if opts.proto == Proto::H3 && origin.ready.h3.is_none() {
        return Err("the replay server has no HTTP/3 listener".into());
    }
    let rules = resolver_rules(
        &archive.origins,
        &archive.failed_origins(),
        bind,
        origin.ready.tls.port(),
        origin.ready.plain.port(),
    );
    let force_quic = archive
        .origins
        .iter()
        .filter(|o| o.scheme == "https")
        .map(|o| format!("{}:{}", o.host, o.port))
        .collect();
    Ok(Started {
        url,
        spki: origin.ready.spki_sha256.clone(),
        origin,
        mapping: Mapping {
            rules: Some(rules),
            force_quic,
            hosts: archive.hosts().into_iter().map(str::to_string).collect(),
            recorded_hosts: archive
                .origins
                .iter()
                .map(|o| o.host.clone())
                .chain(archive.failures.iter().map(|f| f.parts.origin.host.clone()))
                .collect(),
        },
    })
}

/// `METHOD scheme://host/path?query` without the port, as the replay server lists misses.
fn miss_key(method: &str, url: &str) -> Option<String> {
    let u = hxlab_core::har::split_url(url)?;
    let host = if u.origin.host.contains(':') {
        format!("[{}]", u.origin.host)
    } else {
        u.origin.host
    };
    let q = if u.query.is_empty() { "" } else { "?" };
    Some(format!(
        "{method} {}://{host}{}{q}{}",
        u.origin.scheme, u.path, u.query
    ))
}

/// Counts the page's requests to hosts the recording never saw (`recorded_hosts` holds
/// every host it has a request to) as outside the recording: the browser was told those
/// names do not resolve, so they failed at once without reaching the replay server.
pub fn add_outside(
    counts: &mut ReplayCounts,
    resources: &[hxlab_core::page::ResourceTiming],
    recorded_hosts: &[String],
) {
    for r in resources {
        let Some(host) = hxlab_core::page::url_host(&r.url) else {
            continue;
        };
        if recorded_hosts.iter().any(|h| h.eq_ignore_ascii_case(&host)) {
            continue;
        }
        counts.tally.outside += 1;
        if counts.outside_urls.len() < 1000 {
            counts.outside_urls.push(format!("GET {}", r.url));
        }
    }
}

/// Why a run's replay does not count as clean: resources of the page that missed the
/// archive, and responses replayed without the body the HAR lacks. Misses that are no
/// resource of the page (the browser's own `/favicon.ico`, which a recording never sees)
/// stay in the counts but do not flag the run; when the server listed fewer misses than it
/// counted, every miss flags it.
pub fn replay_flag(
    counts: &ReplayCounts,
    resources: &[hxlab_core::page::ResourceTiming],
) -> Option<String> {
    let misses = counts.tally.misses;
    let listed: Vec<&str> = counts.miss_urls.iter().map(String::as_str).collect();
    let page: Vec<String> = resources
        .iter()
        .filter_map(|r| miss_key("GET", &r.url))
        .collect();
    let unlisted = (listed.len() as u64) < misses;
    let page_misses: Vec<&str> = listed
        .iter()
        .copied()
        .filter(|m| unlisted || page.iter().any(|p| p == m) || !m.starts_with("GET "))
        .collect();
    let mut reasons = Vec::new();
    if unlisted || !page_misses.is_empty() {
        let count = if unlisted {
            misses
        } else {
            page_misses.len() as u64
        };
        reasons.push(format!(
            "{count} resource(s) missed the archive (answered 404), e.g. {}",
            page_misses.first().copied().unwrap_or("(not listed)")
        ));
    }
    if counts.tally.served_without_body > 0 {
        reasons.push(format!(
            "{} response(s) replayed without the body the HAR lacks",
            counts.tally.served_without_body
        ));
    }
    (!reasons.is_empty()).then(|| reasons.join("; "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_each_origin_to_its_listener() {
        let o = |scheme: &str, host: &str, port| HarOrigin {
            scheme: scheme.into(),
            host: host.into(),
            port,
        };
        let rules = resolver_rules(
            &[
                o("https", "a.test", 443),
                o("http", "a.test", 80),
                o("https", "::1", 8443),
            ],
            &[
                (
                    o("https", "api.x.invalid", 443),
                    FailureKind::NameNotResolved,
                ),
                (o("https", "down.test", 8443), FailureKind::Unreachable),
            ],
            "10.0.0.1",
            9443,
            9080,
        );
        assert_eq!(
            rules,
            "MAP a.test:443 10.0.0.1:9443, MAP a.test:80 10.0.0.1:9080, MAP [::1]:8443 10.0.0.1:9443, \
             MAP api.x.invalid ~NOTFOUND, MAP down.test:8443 10.0.0.1:1, MAP * ~NOTFOUND"
        );
    }

    fn resource(url: &str) -> hxlab_core::page::ResourceTiming {
        hxlab_core::page::ResourceTiming {
            url: url.into(),
            resource_type: "Script".into(),
            protocol: "h2".into(),
            status: 404,
            connection_id: 1,
            connection_reused: false,
            start_ms: 0.0,
            response_ms: None,
            duration_ms: None,
            encoded_bytes: 0,
            body_bytes: 0,
            from_early_hints: false,
            from_cache: false,
            error: None,
            phases: Default::default(),
            priority: String::new(),
            priority_header: None,
        }
    }

    #[test]
    fn requests_to_hosts_the_recording_never_saw_are_outside_it() {
        let mut counts = ReplayCounts::default();
        let recorded = vec!["a.test".to_string(), "api.x.invalid".to_string()];
        add_outside(
            &mut counts,
            &[
                resource("https://a.test:8443/"),
                resource("https://api.x.invalid/b"),
                resource("https://tracker.example/t.js"),
            ],
            &recorded,
        );
        assert_eq!(counts.tally.outside, 1);
        assert_eq!(counts.tally.misses, 0);
        assert_eq!(
            counts.outside_urls,
            vec!["GET https://tracker.example/t.js"]
        );
    }

    #[test]
    fn misses_of_page_resources_flag_the_run() {
        let page = [
            resource("https://a.test:8443/"),
            resource("https://a.test:8443/x?v=1"),
        ];
        let counts = |hits, misses, miss_urls: &[&str]| ReplayCounts {
            tally: hxlab_core::har::ReplayTally {
                hits,
                misses,
                ..Default::default()
            },
            miss_urls: miss_urls.iter().map(|u| u.to_string()).collect(),
            ..Default::default()
        };
        let clean = counts(3, 0, &[]);
        assert_eq!(replay_flag(&clean, &page), None);
        let missed = counts(
            0,
            2,
            &["GET https://a.test/x?v=1", "GET https://a.test/favicon.ico"],
        );
        let f = replay_flag(&missed, &page).unwrap_or_default();
        assert!(
            f.contains("1 resource(s) missed") && f.contains("/x?v=1"),
            "{f}"
        );
        // The browser's own favicon request is counted, not held against the page.
        let favicon = counts(0, 1, &["GET https://a.test/favicon.ico"]);
        assert_eq!(replay_flag(&favicon, &page), None);
        // More misses than listed: every one counts.
        let unlisted = counts(0, 5000, &[]);
        assert!(replay_flag(&unlisted, &page).is_some_and(|f| f.contains("5000")));
    }
}
