//! Names of the network profiles `hxlab link --profile` ships (shared/PROFILES.md), so an
//! experiment naming an unknown one is refused before anything runs. The link itself owns
//! the figures; this list only has to agree on the names.

/// Chrome DevTools legacy presets (the ones seed 003 used).
pub const CHROME_LEGACY: [&str; 8] = [
    "GPRS",
    "Regular 2G",
    "Good 2G",
    "Regular 3G",
    "Good 3G",
    "Regular 4G",
    "DSL",
    "WiFi",
];
/// Chrome DevTools current presets, with their former names.
pub const CHROME_CURRENT: [&str; 5] = ["3G", "Slow 4G", "Fast 4G", "Slow 3G", "Fast 3G"];
/// WebPageTest connectivity profiles.
pub const WEBPAGETEST: [&str; 12] = [
    "Dial", "2G", "Edge", "3GSlow", "3G", "3GFast", "4G", "4GFast", "LTE", "DSL", "Cable", "FIOS",
];

/// Every known profile name (duplicates across sources appear once).
pub fn all() -> Vec<&'static str> {
    let mut v: Vec<&'static str> = Vec::new();
    for n in CHROME_LEGACY
        .iter()
        .chain(CHROME_CURRENT.iter())
        .chain(WEBPAGETEST.iter())
    {
        if !v.contains(n) {
            v.push(n);
        }
    }
    v
}

/// The profile's canonical spelling, matching case-insensitively; None when unknown.
pub fn canonical(name: &str) -> Option<&'static str> {
    all()
        .into_iter()
        .find(|p| p.eq_ignore_ascii_case(name.trim()))
}
