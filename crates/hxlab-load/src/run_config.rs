//! The configuration a [`hxlab_core::RunResult`] records: a [`LoadConfig`] turned into the
//! result's [`RunConfig`] (the conversion only; validation lives with the configuration).

use crate::LoadConfig;
use hxlab_core::result::RunConfig;

/// What a run was asked to do, as the result records it: the common fields, and the
/// options most runs leave alone in `extra` (only when set, so results stay small).
pub(crate) fn run_config(cfg: &LoadConfig) -> RunConfig {
    let mut extra = std::collections::BTreeMap::new();
    if let Some(m) = &cfg.method {
        extra.insert("method".into(), m.clone());
    }
    if cfg.body.is_some() {
        extra.insert(
            "body_bytes".into(),
            cfg.body.as_ref().map(|b| b.len()).unwrap_or(0).to_string(),
        );
    }
    if !cfg.warm_up.is_zero() {
        extra.insert("warm_up_s".into(), cfg.warm_up.as_secs_f64().to_string());
    }
    if cfg.tls_resume {
        extra.insert("tls_resume".into(), "true".into());
    }
    if cfg.push {
        extra.insert("push".into(), "true".into());
    }
    if cfg.zero_rtt {
        extra.insert("0rtt".into(), "true".into());
    }
    if cfg.prime {
        extra.insert("prime".into(), "true".into());
    }
    if cfg.tfo {
        extra.insert("tfo".into(), "true".into());
    }
    if let Some(a) = &cfg.alpn_list {
        extra.insert("alpn_list".into(), a.join(","));
    }
    if !cfg.headers.is_empty() {
        extra.insert(
            "headers".into(),
            cfg.headers
                .iter()
                .map(|(n, v)| format!("{n}: {v}"))
                .collect::<Vec<_>>()
                .join("; "),
        );
    }
    RunConfig {
        urls: cfg.urls.clone(),
        protocol: cfg.proto.name().to_string(),
        clients: cfg.clients,
        max_concurrent_streams: cfg.max_concurrent_streams,
        threads: cfg.threads.min(cfg.clients),
        requests: if cfg.duration.is_some() {
            0
        } else {
            cfg.requests
        },
        duration_s: cfg.duration.map(|d| d.as_secs_f64()).unwrap_or(0.0),
        rate: cfg.rate,
        no_keepalive: cfg.no_keepalive,
        cc: cfg.cc,
        rps: cfg.rps,
        no_tls_proto: cfg.no_tls_proto,
        connect_to: cfg.connect_to.as_ref().map(|c| c.to_string()),
        sni: cfg.sni.clone(),
        connection_active_timeout_s: cfg.connection_active_timeout.map(|d| d.as_secs_f64()),
        connection_inactivity_timeout_s: cfg.connection_inactivity_timeout.map(|d| d.as_secs_f64()),
        extra,
    }
}
