//! Link options as users write them (`hxlab link`, `hxlab page`, experiment files):
//! `hxlab_link::config::{parse_delay, parse_link_rate, parse_loss, parse_probability,
//! parse_queue, parse_aqm}`, and the JSON form `LinkConfig::from_json` (the lab hands it to
//! the link helper).
//!
//! Input: any bytes, read as UTF-8 (lossily). Checks: no panic; accepted values are within
//! the documented bounds (delay at most MAX_DELAY, rate MIN_RATE..=MAX_RATE, probabilities
//! 0..=1, a queue of at least one packet); an accepted JSON config validates and its JSON
//! form reads back as an equal config.
#![no_main]
use hxlab_link::config::{
    parse_aqm, parse_delay, parse_link_rate, parse_loss, parse_probability, parse_queue,
    MAX_DELAY, MAX_RATE, MIN_RATE,
};
use hxlab_link::{LinkConfig, Loss, QueueLimit};
use libfuzzer_sys::fuzz_target;

fn prob(p: f64) -> bool {
    (0.0..=1.0).contains(&p)
}

fuzz_target!(|data: &[u8]| {
    let s = String::from_utf8_lossy(data);
    let s = s.as_ref();
    if let Ok(d) = parse_delay("delay", s) {
        assert!(d <= MAX_DELAY);
    }
    if let Ok(r) = parse_link_rate("rate", s) {
        assert!((MIN_RATE..=MAX_RATE).contains(&r));
    }
    if let Ok(p) = parse_probability(s) {
        assert!(prob(p), "{p}");
    }
    match parse_loss(s) {
        Ok(Loss::Random(p)) => assert!(prob(p) && p > 0.0),
        Ok(Loss::GilbertElliott { p, r, loss_bad, loss_good }) => {
            assert!(prob(p) && prob(r) && prob(loss_bad) && prob(loss_good))
        }
        _ => {}
    }
    match parse_queue(s) {
        Ok(QueueLimit::Packets(n)) => assert!(n >= 1),
        Ok(QueueLimit::Bytes(n)) => assert!(n >= 1500),
        _ => {}
    }
    let _ = parse_aqm(s);
    if let Ok(cfg) = LinkConfig::from_json(s) {
        cfg.validate().expect("from_json validated it");
        if let Ok(text) = cfg.to_json() {
            let back = LinkConfig::from_json(&text).expect("our own JSON must read back");
            assert_eq!(format!("{back:?}"), format!("{cfg:?}"), "JSON round trip");
        }
    }
});
