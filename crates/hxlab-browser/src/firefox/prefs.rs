//! The preferences a Firefox run starts with, written as the profile's `user.js`: background
//! traffic off, the protocol forced, names mapped, QUIC's congestion controller named.
//! Pure data: [`prefs`] builds the list from a [`PageConfig`], [`user_js`] writes it.

use crate::{BrowserError, PageConfig, Proto};
use hxlab_core::cc::CongestionControl;

/// One preference value.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum PrefValue {
    Bool(bool),
    Int(i64),
    Text(String),
}

/// One `user_pref(name, value);` line.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Pref {
    pub name: &'static str,
    pub value: PrefValue,
}

fn b(name: &'static str, v: bool) -> Pref {
    Pref {
        name,
        value: PrefValue::Bool(v),
    }
}

fn i(name: &'static str, v: i64) -> Pref {
    Pref {
        name,
        value: PrefValue::Int(v),
    }
}

fn t(name: &'static str, v: impl Into<String>) -> Pref {
    Pref {
        name,
        value: PrefValue::Text(v.into()),
    }
}

/// Everything Firefox would fetch on its own: off, so the only requests a run sees are the
/// page's (and a namespace without a route out is not kept waiting on them).
fn quiet() -> Vec<Pref> {
    vec![
        b("network.captive-portal-service.enabled", false),
        b("network.connectivity-service.enabled", false),
        // DoH off: names resolve as the system (or the forced address below) says.
        i("network.trr.mode", 5),
        b("network.dns.native_https_query", false),
        b("network.dns.echconfig.enabled", false),
        b("toolkit.telemetry.enabled", false),
        b("toolkit.telemetry.unified", false),
        b("toolkit.telemetry.archive.enabled", false),
        b("datareporting.healthreport.uploadEnabled", false),
        b("datareporting.policy.dataSubmissionEnabled", false),
        b("app.normandy.enabled", false),
        t("app.normandy.api_url", ""),
        b("app.shield.optoutstudies.enabled", false),
        b("messaging-system.rsexperimentloader.enabled", false),
        t("services.settings.server", "http://127.0.0.1:9/"),
        b("browser.safebrowsing.malware.enabled", false),
        b("browser.safebrowsing.phishing.enabled", false),
        b("browser.safebrowsing.downloads.enabled", false),
        b("browser.safebrowsing.blockedURIs.enabled", false),
        t("browser.safebrowsing.provider.google4.updateURL", ""),
        t("browser.safebrowsing.provider.google.updateURL", ""),
        t("browser.safebrowsing.provider.mozilla.updateURL", ""),
        b("app.update.enabled", false),
        b("app.update.auto", false),
        b("extensions.update.enabled", false),
        b("extensions.getAddons.cache.enabled", false),
        b("extensions.systemAddon.update.enabled", false),
        t("extensions.systemAddon.update.url", ""),
        b("browser.search.update", false),
        b("browser.region.update.enabled", false),
        t("browser.region.network.url", ""),
        t("browser.startup.homepage", "about:blank"),
        i("browser.startup.page", 0),
        t("browser.startup.homepage_override.mstone", "ignore"),
        b("browser.aboutwelcome.enabled", false),
        b("browser.newtabpage.enabled", false),
        b(
            "browser.newtabpage.activity-stream.feeds.system.topstories",
            false,
        ),
        b(
            "browser.newtabpage.activity-stream.feeds.section.topstories",
            false,
        ),
        b("browser.newtabpage.activity-stream.feeds.snippets", false),
        b("browser.ping-centre.telemetry", false),
        b("browser.shell.checkDefaultBrowser", false),
        t("browser.uitour.url", ""),
        t("datareporting.policy.firstRunURL", ""),
        b("network.prefetch-next", false),
        b("network.predictor.enabled", false),
        b("network.dns.disablePrefetch", true),
        i("network.http.speculative-parallel-limit", 0),
        b("browser.urlbar.speculativeConnect.enabled", false),
        b("security.OCSP.enabled", false),
        b("security.remote_settings.crlite_filters.enabled", false),
        b("security.remote_settings.intermediates.enabled", false),
        i("security.pki.crlite_mode", 0),
        b("privacy.query_stripping.enabled", false),
        t("geo.provider.network.url", ""),
        b("media.gmp-manager.updateEnabled", false),
        t("media.gmp-manager.url", ""),
        b("browser.contentblocking.report.lockwise.enabled", false),
        b("signon.management.page.breach-alerts.enabled", false),
        // No session restore or crash reporter prompts between the runs of one profile.
        b("browser.sessionstore.resume_from_crash", false),
        i("toolkit.startup.max_resumed_crashes", -1),
        b("browser.tabs.warnOnClose", false),
        // Headless Chromium asks for no favicon; neither does Firefox then.
        b("browser.chrome.site_icons", false),
    ]
}

/// The preferences of one run of `cfg`.
pub(crate) fn prefs(cfg: &PageConfig) -> Result<Vec<Pref>, BrowserError> {
    let mut out = quiet();
    // The same meanings as Chromium's switches (load.rs `browser_args`).
    match cfg.protocol {
        Proto::H2c => {
            return Err(BrowserError::Config(
                "a browser speaks HTTP/2 over TLS only: use h2 (an https:// page), not h2c"
                    .to_string(),
            ))
        }
        Proto::H1 => {
            out.push(b("network.http.http2.enabled", false));
            out.push(b("network.http.http3.enable", false));
        }
        Proto::H2 => out.push(b("network.http.http3.enable", false)),
        Proto::H3 => {
            if cfg.quic_origins.is_empty() {
                return Err(BrowserError::Config(
                    "HTTP/3 needs an https:// URL".to_string(),
                ));
            }
            out.push(b("network.http.http3.enable", true));
            out.push(t(
                "network.http.http3.alt-svc-mapping-for-testing",
                alt_svc_mapping(&cfg.quic_origins),
            ));
            // Use the mapping from the first request, as Mozilla's own network benchmark
            // does: without it a request may still go over a TCP connection while the QUIC
            // route is being validated (seen under load: 2 of 19 responses over h2).
            out.push(b(
                "network.http.http3.force-use-alt-svc-mapping-for-testing",
                true,
            ));
        }
        Proto::Auto => out.push(b("network.http.http3.enable", true)),
    }
    // Firefox gives up HTTP/3 when the profile has roots of its own (the certificate we
    // import, a test CA): without this it completes the QUIC handshake, then falls back
    // to TCP (checked on this machine).
    out.push(b(
        "network.http.http3.disable_when_third_party_roots_found",
        false,
    ));
    if let Some(addr) = cfg.resolve_all_to {
        // Every name resolves to our origin: Firefox cannot remap ports as Chromium's
        // `MAP host:port` does, but it can map names (network.dns.localDomains maps only to
        // 127.0.0.1, which is not the origin behind a link).
        out.push(t("network.dns.forceResolve", addr.to_string()));
        if addr.is_ipv4() {
            out.push(b("network.dns.disableIPv6", true));
        }
    }
    if let Some(cc) = cfg.quic_cc {
        out.push(i("network.http.http3.cc_algorithm", neqo_cc(cc)?));
    }
    Ok(out)
}

/// `network.http.http3.alt-svc-mapping-for-testing`: `host;h3=":port"` for each origin,
/// comma separated, as Firefox's own tests write it.
pub(crate) fn alt_svc_mapping(origins: &[(String, u16)]) -> String {
    origins
        .iter()
        .map(|(host, port)| format!("{host};h3=\":{port}\""))
        .collect::<Vec<_>>()
        .join(",")
}

/// neqo's controller as `network.http.http3.cc_algorithm` numbers it: 0 NewReno, 1 Cubic.
fn neqo_cc(cc: CongestionControl) -> Result<i64, BrowserError> {
    match cc {
        CongestionControl::Reno => Ok(0),
        CongestionControl::Cubic => Ok(1),
        other => Err(BrowserError::Config(format!(
            "Firefox's QUIC (neqo) has no {other} controller: it has reno and cubic"
        ))),
    }
}

/// The prefs as a `user.js` file.
pub(crate) fn user_js(prefs: &[Pref]) -> String {
    let mut out = String::from("// Written by hxlab for one run; removed with the profile.\n");
    for p in prefs {
        let value = match &p.value {
            PrefValue::Bool(v) => v.to_string(),
            PrefValue::Int(v) => v.to_string(),
            PrefValue::Text(v) => serde_json::Value::String(v.clone()).to_string(),
        };
        out.push_str(&format!("user_pref(\"{}\", {value});\n", p.name));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn value<'a>(prefs: &'a [Pref], name: &str) -> Option<&'a PrefValue> {
        prefs
            .iter()
            .rev()
            .find(|p| p.name == name)
            .map(|p| &p.value)
    }

    #[test]
    fn forces_the_protocol_as_chromium_does() {
        let mut cfg = PageConfig::new("https://a.hxlab.test:8443/", Proto::H1);
        let p = prefs(&cfg).unwrap();
        assert_eq!(
            value(&p, "network.http.http2.enabled"),
            Some(&PrefValue::Bool(false))
        );
        assert_eq!(
            value(&p, "network.http.http3.enable"),
            Some(&PrefValue::Bool(false))
        );
        cfg.protocol = Proto::H2;
        let p = prefs(&cfg).unwrap();
        assert_eq!(value(&p, "network.http.http2.enabled"), None);
        assert_eq!(
            value(&p, "network.http.http3.enable"),
            Some(&PrefValue::Bool(false))
        );
        cfg.protocol = Proto::H3;
        assert!(matches!(prefs(&cfg), Err(BrowserError::Config(_))));
        cfg.quic_origins = vec![("a.hxlab.test".into(), 8443), ("b.hxlab.test".into(), 8443)];
        let p = prefs(&cfg).unwrap();
        assert_eq!(
            value(
                &p,
                "network.http.http3.force-use-alt-svc-mapping-for-testing"
            ),
            Some(&PrefValue::Bool(true))
        );
        assert_eq!(
            value(&p, "network.http.http3.alt-svc-mapping-for-testing"),
            Some(&PrefValue::Text(
                "a.hxlab.test;h3=\":8443\",b.hxlab.test;h3=\":8443\"".into()
            ))
        );
        cfg.protocol = Proto::H2c;
        assert!(matches!(prefs(&cfg), Err(BrowserError::Config(_))));
    }

    #[test]
    fn background_traffic_is_off_and_the_file_parses_as_prefs() {
        let mut cfg = PageConfig::new("https://a.hxlab.test:8443/", Proto::Auto);
        cfg.resolve_all_to = Some("10.0.0.1".parse().unwrap());
        cfg.quic_cc = Some(CongestionControl::Cubic);
        let p = prefs(&cfg).unwrap();
        assert_eq!(value(&p, "network.trr.mode"), Some(&PrefValue::Int(5)));
        assert_eq!(
            value(&p, "network.captive-portal-service.enabled"),
            Some(&PrefValue::Bool(false))
        );
        assert_eq!(
            value(&p, "network.dns.forceResolve"),
            Some(&PrefValue::Text("10.0.0.1".into()))
        );
        assert_eq!(
            value(&p, "network.http.http3.cc_algorithm"),
            Some(&PrefValue::Int(1))
        );
        // Each pref is written once.
        let mut names: Vec<&str> = p.iter().map(|x| x.name).collect();
        names.sort_unstable();
        let before = names.len();
        names.dedup();
        assert_eq!(before, names.len());
        let js = user_js(&p);
        assert!(js.contains("user_pref(\"network.trr.mode\", 5);"));
        assert!(js.contains("user_pref(\"network.dns.forceResolve\", \"10.0.0.1\");"));
        cfg.quic_cc = Some(CongestionControl::Bbr);
        assert!(matches!(prefs(&cfg), Err(BrowserError::Config(_))));
    }
}
