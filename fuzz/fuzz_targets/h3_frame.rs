//! HTTP/3 frame heads (RFC 9114 §7.1) and control streams (§6.2.1): `hxlab_wire::h3::
//! parse_frame_head` and `h3::control::ControlReader` on any bytes.
//! Checks: the head length is the two varints' lengths and within the input; writing the
//! (type, length) back with `write_frame_head` gives a head that parses to the same values
//! and is no longer; the name helpers take any value; a control stream read whole and in
//! two pieces (split where the first byte says) gives the same answer, for either sender.
#![no_main]
use hxlab_wire::h3::control::{ControlError, ControlReader, Sender};
use hxlab_wire::{h3, varint};
use libfuzzer_sys::fuzz_target;

/// What a control stream fed `pieces` says: SETTINGS seen and the GOAWAY id, or the error.
fn control<'a>(
    sender: Sender,
    pieces: impl IntoIterator<Item = &'a [u8]>,
) -> Result<(bool, Option<u64>), ControlError> {
    let mut r = ControlReader::new(sender);
    for p in pieces {
        r.feed(p)?;
    }
    Ok((r.settings_seen(), r.goaway()))
}

fuzz_target!(|data: &[u8]| {
    let at = data.first().map_or(0, |b| usize::from(*b)).min(data.len());
    for sender in [Sender::Client, Sender::Server] {
        let whole = control(sender, [data]);
        let (a, b) = data.split_at(at);
        assert_eq!(whole, control(sender, [a, b]), "split at {at}");
    }
    let Some((kind, len, n)) = h3::parse_frame_head(data) else {
        return;
    };
    let (k, a) = varint::read(data).expect("the type varint");
    let (l, b) = varint::read(&data[a..]).expect("the length varint");
    assert_eq!((kind, len, n), (k, l, a + b));
    assert!(n <= data.len());
    let mut out = Vec::new();
    h3::write_frame_head(&mut out, kind, len);
    assert!(out.len() <= n);
    assert_eq!(h3::parse_frame_head(&out), Some((kind, len, out.len())));
    let _ = (
        h3::frame_type_name(kind),
        h3::setting_name(len),
        h3::code_name(len),
    );
    let _ = h3::is_grease(kind);
});
