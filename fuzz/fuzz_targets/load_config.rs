//! Load jobs as JSON (`hxlab_load::LoadConfig::from_json`: what the lab's agents read from
//! the runner over the network, one job per line) and `-H "Name: value"` arguments
//! (`hxlab_load::parse_header_arg`).
//!
//! Input: any bytes, read as UTF-8 (lossily). Checks: no panic; an accepted configuration
//! written back with `to_json` reads back (and validates) again.
#![no_main]
use hxlab_load::{parse_header_arg, LoadConfig};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let s = String::from_utf8_lossy(data);
    if let Ok((name, value)) = parse_header_arg(&s) {
        assert!(!name.is_empty());
        assert_eq!((name.trim(), value.trim()), (name.as_str(), value.as_str()));
    }
    if let Ok(cfg) = LoadConfig::from_json(&s) {
        let text = cfg.to_json();
        let back = LoadConfig::from_json(&text).expect("our own JSON must read back");
        assert_eq!(back.to_json(), text, "JSON round trip");
    }
});
