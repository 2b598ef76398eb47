//! quinn's side of congestion control (the vocabulary and TCP's side are
//! `hxlab_core::cc`): the controller factory for a transport, and the read-back from a live
//! connection, so both QUIC ends set and record a controller the same way.

use hxlab_core::cc::CongestionControl;
use std::sync::Arc;

/// Makes every connection of `transport` run `cc`.
pub fn apply(transport: &mut quinn::TransportConfig, cc: CongestionControl) {
    match cc {
        CongestionControl::Reno => transport
            .congestion_controller_factory(Arc::new(quinn::congestion::NewRenoConfig::default())),
        CongestionControl::Cubic => transport
            .congestion_controller_factory(Arc::new(quinn::congestion::CubicConfig::default())),
        CongestionControl::Bbr => transport
            .congestion_controller_factory(Arc::new(quinn::congestion::BbrConfig::default())),
    };
}

/// The name of a congestion controller, by its type (`"other"` for one hxlab does not
/// know): what a live QUIC connection runs, read back from quinn-proto's
/// `Connection::congestion_state` (hxlab's client and server both drive quinn-proto).
pub fn of_controller(controller: &dyn quinn::congestion::Controller) -> &'static str {
    let any = controller.clone_box().into_any();
    if any.is::<quinn::congestion::NewReno>() {
        "reno"
    } else if any.is::<quinn::congestion::Cubic>() {
        "cubic"
    } else if any.is::<quinn::congestion::Bbr>() {
        "bbr"
    } else {
        "other"
    }
}
