//! Which browser engine loaded a page: the one value every part of hxlab that runs, groups
//! or reports page loads uses, so figures of two engines are never pooled.

use serde::{Deserialize, Serialize};

/// A browser engine hxlab drives: Chromium (Blink, Chromium's network stack and quiche) over
/// the DevTools protocol, or Firefox (Gecko, Necko and neqo) over WebDriver BiDi.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub enum Engine {
    /// Debian's `chromium`.
    #[default]
    Chromium,
    /// Debian's `firefox-esr`.
    Firefox,
}

impl Engine {
    /// Both engines, Chromium first (the default).
    pub const ALL: [Engine; 2] = [Engine::Chromium, Engine::Firefox];

    /// The name on the command line and in records: `chromium`, `firefox`.
    pub fn name(self) -> &'static str {
        match self {
            Engine::Chromium => "chromium",
            Engine::Firefox => "firefox",
        }
    }

    /// The name in sentences: `Chromium`, `Firefox`.
    pub fn label(self) -> &'static str {
        match self {
            Engine::Chromium => "Chromium",
            Engine::Firefox => "Firefox",
        }
    }

    /// The page metrics this engine cannot measure, each shown as "not available in
    /// <engine>" instead of a number: Firefox has no `layout-shift` entries (no CLS) and
    /// no screencast (no Speed Index or other visual metrics).
    pub fn lacks(self) -> &'static [&'static str] {
        match self {
            Engine::Chromium => &[],
            Engine::Firefox => &[
                "CLS",
                "Speed Index",
                "first visual change",
                "visually complete",
            ],
        }
    }
}

impl std::fmt::Display for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Engine {
    type Err = String;

    /// `chromium` or `firefox` (any case), with the one-line error every command prints.
    fn from_str(s: &str) -> Result<Engine, String> {
        Engine::ALL
            .into_iter()
            .find(|e| e.name().eq_ignore_ascii_case(s.trim()))
            .ok_or_else(|| format!("unknown browser `{s}`: use chromium or firefox"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for e in Engine::ALL {
            assert_eq!(e.name().parse::<Engine>(), Ok(e));
            assert_eq!(
                serde_json::to_string(&e).unwrap(),
                format!("\"{}\"", e.name())
            );
        }
        assert_eq!("Firefox".parse::<Engine>(), Ok(Engine::Firefox));
        let err = "netscape".parse::<Engine>().unwrap_err();
        assert_eq!(err, "unknown browser `netscape`: use chromium or firefox");
        assert!(Engine::Firefox.lacks().contains(&"CLS"));
        assert!(Engine::Chromium.lacks().is_empty());
    }
}
