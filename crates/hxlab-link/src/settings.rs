//! A link as its users write it — a profile, then overrides in text — and the one set of rules
//! that turns it into a [`LinkConfig`]: `hxlab link`'s (and `hxlab page`'s) flags and an
//! experiment cell's link factors both come through here.
//!
//! The delay is the one setting users give in two ways: `hxlab link --delay` is added in each
//! direction, while a profile's RTT and the lab's `rtt` factor are a round trip, half each
//! way. [`Delay`] says which one a caller has, so the split is written once.
//!
//! [`Delay`]: crate::config::Delay

use crate::config::{self, Delay, Server};
use crate::trace::Trace;
use crate::{LinkConfig, LinkError};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// What drains a direction's queue, as a user gave it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Bottleneck {
    /// A rate as written (`10mbit`).
    Rate(String),
    /// A mahimahi trace file.
    Trace(PathBuf),
}

/// The setting a [`SettingsError`] is about, named as its flag and its factor are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Setting {
    /// `profile`.
    Profile,
    /// `loss`.
    Loss,
    /// `down` (a rate).
    Down,
    /// `up` (a rate).
    Up,
    /// `down-trace`.
    DownTrace,
    /// `up-trace`.
    UpTrace,
    /// `queue`.
    Queue,
    /// `aqm`.
    Aqm,
}

impl Setting {
    /// The name users write it by (the flag without its dashes).
    pub fn name(self) -> &'static str {
        match self {
            Setting::Profile => "profile",
            Setting::Loss => "loss",
            Setting::Down => "down",
            Setting::Up => "up",
            Setting::DownTrace => "down-trace",
            Setting::UpTrace => "up-trace",
            Setting::Queue => "queue",
            Setting::Aqm => "aqm",
        }
    }
}

/// Why settings do not make a link: the setting at fault (None: the link as a whole, out of
/// [`LinkConfig::validate`]'s bounds) and the link's one-line reason.
#[derive(Debug, thiserror::Error)]
#[error("{error}")]
pub struct SettingsError {
    /// The setting at fault; None when the whole link is refused.
    pub setting: Option<Setting>,
    /// The reason, one line (a rate's names the rate: `down: ...`).
    pub error: LinkError,
}

impl SettingsError {
    /// The error as the command line says it: led by the flag (`--loss: ...`).
    pub fn flag_message(&self) -> String {
        match self.setting {
            // A rate's reason already begins with its name (`down "1bit": ...`).
            Some(Setting::Down | Setting::Up) => format!("--{}", self.error),
            Some(s) => format!("--{}: {}", s.name(), self.error),
            None => self.error.to_string(),
        }
    }
}

/// A link as its users write it: a profile (or none), then each setting given replaces the
/// profile's in both directions (down and up have one each). What is not given keeps the
/// profile's value, or the default link's.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LinkSettings {
    /// A profile name (see [`crate::profiles`]).
    pub profile: Option<String>,
    /// The delay, replacing the profile's RTT.
    pub delay: Option<Delay>,
    /// Jitter in each direction.
    pub jitter: Option<Duration>,
    /// Loss in each direction (`1%`, `ge:...`).
    pub loss: Option<String>,
    /// Downlink bottleneck.
    pub down: Option<Bottleneck>,
    /// Uplink bottleneck.
    pub up: Option<Bottleneck>,
    /// Queue limit in each direction (`100p`, `64KiB`).
    pub queue: Option<String>,
    /// Queue management in each direction (`droptail`, `codel`).
    pub aqm: Option<String>,
}

impl LinkSettings {
    /// True when nothing is set: no link is asked for.
    pub fn is_empty(&self) -> bool {
        *self == LinkSettings::default()
    }

    /// The link these settings describe, checked by [`LinkConfig::validate`]. Settings are
    /// read in the order of the fields, so the first bad one is the one reported. The seed
    /// is left at 0: each caller decides how its draws are seeded.
    pub fn build(&self) -> Result<LinkConfig, SettingsError> {
        let at = |setting| {
            move |error| SettingsError {
                setting: Some(setting),
                error,
            }
        };
        let mut cfg = match &self.profile {
            Some(name) => LinkConfig::from_profile(name).map_err(at(Setting::Profile))?,
            None => LinkConfig::default(),
        };
        if let Some(d) = self.delay {
            cfg = cfg.with_delay(d.one_way());
        }
        if let Some(j) = self.jitter {
            (cfg.down.jitter, cfg.up.jitter) = (j, j);
        }
        if let Some(v) = &self.loss {
            let l = config::parse_loss(v).map_err(at(Setting::Loss))?;
            (cfg.down.loss, cfg.up.loss) = (l, l);
        }
        if let Some(b) = &self.down {
            cfg.down.server = bottleneck(b, Setting::Down, Setting::DownTrace)?;
        }
        if let Some(b) = &self.up {
            cfg.up.server = bottleneck(b, Setting::Up, Setting::UpTrace)?;
        }
        if let Some(v) = &self.queue {
            let q = config::parse_queue(v).map_err(at(Setting::Queue))?;
            (cfg.down.queue, cfg.up.queue) = (q, q);
        }
        if let Some(v) = &self.aqm {
            let a = config::parse_aqm(v).map_err(at(Setting::Aqm))?;
            (cfg.down.aqm, cfg.up.aqm) = (a, a);
        }
        cfg.validate().map_err(|error| SettingsError {
            setting: None,
            error,
        })?;
        Ok(cfg)
    }
}

/// A direction's bottleneck: a rate parsed under the rate's own name, or a trace read from
/// its file.
fn bottleneck(b: &Bottleneck, rate: Setting, trace: Setting) -> Result<Server, SettingsError> {
    let (setting, server) = match b {
        Bottleneck::Rate(v) => (
            rate,
            config::parse_link_rate(rate.name(), v).map(Server::Rate),
        ),
        Bottleneck::Trace(path) => (
            trace,
            Trace::from_file(path).map(|t| Server::Trace(Arc::new(t))),
        ),
    };
    server.map_err(|error| SettingsError {
        setting: Some(setting),
        error,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Aqm, Loss, QueueLimit};

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn a_one_way_delay_is_added_each_way_and_a_round_trip_is_halved() {
        assert_eq!(Delay::OneWay(ms(20)).one_way(), ms(20));
        assert_eq!(Delay::RoundTrip(ms(100)).one_way(), ms(50));
        for (delay, each_way) in [
            (Delay::OneWay(ms(20)), ms(20)),
            (Delay::RoundTrip(ms(20)), ms(10)),
        ] {
            let cfg = LinkSettings {
                delay: Some(delay),
                ..LinkSettings::default()
            }
            .build()
            .unwrap();
            assert_eq!((cfg.down.delay, cfg.up.delay), (each_way, each_way));
        }
    }

    #[test]
    fn a_profile_is_its_rtt_halved_and_its_rates_and_settings_replace_it() {
        // wpt:Cable: 28 ms RTT, 5 Mbit/s down, 1 Mbit/s up.
        let profile = LinkSettings {
            profile: Some("wpt:Cable".into()),
            ..LinkSettings::default()
        };
        let cfg = profile.build().unwrap();
        assert_eq!(cfg, LinkConfig::from_profile("wpt:Cable").unwrap());
        assert_eq!((cfg.down.delay, cfg.up.delay), (ms(14), ms(14)));
        assert_eq!(cfg.down.server, Server::Rate(5_000_000));
        assert_eq!(cfg.profile.as_deref(), Some("wpt:Cable"));
        let cfg = LinkSettings {
            delay: Some(Delay::RoundTrip(ms(100))),
            jitter: Some(ms(2)),
            loss: Some("1%".into()),
            up: Some(Bottleneck::Rate("2mbit".into())),
            queue: Some("100p".into()),
            aqm: Some("codel".into()),
            ..profile
        }
        .build()
        .unwrap();
        for d in [&cfg.down, &cfg.up] {
            assert_eq!((d.delay, d.jitter), (ms(50), ms(2)));
            assert_eq!(d.loss, Loss::Random(0.01));
            assert_eq!((d.queue, d.aqm), (QueueLimit::Packets(100), Aqm::Codel));
        }
        assert_eq!(cfg.down.server, Server::Rate(5_000_000), "the profile's");
        assert_eq!(cfg.up.server, Server::Rate(2_000_000), "replaced");
        assert_eq!((cfg.seed, cfg.profile.as_deref()), (0, Some("wpt:Cable")));
    }

    #[test]
    fn nothing_set_is_the_default_link() {
        let none = LinkSettings::default();
        assert!(none.is_empty());
        assert_eq!(none.build().unwrap(), LinkConfig::default());
        let some = LinkSettings {
            jitter: Some(Duration::ZERO),
            ..LinkSettings::default()
        };
        assert!(!some.is_empty());
    }

    #[test]
    fn errors_name_the_setting_as_the_lab_and_the_flags_say_it() {
        let err = |s: LinkSettings| s.build().unwrap_err();
        let e = err(LinkSettings {
            down: Some(Bottleneck::Rate("1bit".into())),
            ..LinkSettings::default()
        });
        assert_eq!(e.setting, Some(Setting::Down));
        assert!(e.to_string().starts_with("down \"1bit\": "), "{e}");
        assert!(e.flag_message().starts_with("--down \"1bit\": "), "{e}");
        let e = err(LinkSettings {
            loss: Some("150%".into()),
            ..LinkSettings::default()
        });
        assert!(e.to_string().starts_with("probability \"150%\""), "{e}");
        assert!(e.flag_message().starts_with("--loss: probability"), "{e}");
        let e = err(LinkSettings {
            up: Some(Bottleneck::Trace("/nonexistent.trace".into())),
            ..LinkSettings::default()
        });
        assert!(e.flag_message().starts_with("--up-trace: "), "{e}");
        let e = err(LinkSettings {
            delay: Some(Delay::OneWay(config::MAX_DELAY + ms(1))),
            ..LinkSettings::default()
        });
        assert_eq!(e.setting, None);
        assert_eq!(e.flag_message(), e.to_string());
        assert!(e.to_string().contains("more than 10 minutes"), "{e}");
        let e = err(LinkSettings {
            profile: Some("nope".into()),
            loss: Some("150%".into()),
            ..LinkSettings::default()
        });
        assert_eq!(e.setting, Some(Setting::Profile), "the first bad one");
    }
}
