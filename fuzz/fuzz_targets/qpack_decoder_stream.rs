//! The QPACK decoder stream from a peer, as `QpackEncoder::feed_decoder` applies it (the
//! origin's and the load client's encoders).
//!
//! Input: one byte choosing how many field sections the encoder wrote first (0..=15, each
//! on its own stream 4·i, each inserting a new field), then the decoder stream's bytes.
//! Checks:
//! - no panic, whatever the bytes;
//! - every split gives what one whole feed gives: the same verdict and the same Known
//!   Received Count — for every split point of inputs up to 256 bytes, and byte by byte;
//! - the Known Received Count never passes the inserts made;
//! - the encoder keeps encoding afterwards, and what it writes decodes (by a decoder fed its
//!   encoder stream) to the fields given.
#![no_main]
use hxlab_wire::qpack::{Decoded, QpackDecoder, QpackEncoder};
use libfuzzer_sys::fuzz_target;

fn field(i: u64) -> (Vec<u8>, Vec<u8>) {
    (b"x-field".to_vec(), format!("value-{i}").into_bytes())
}

/// An encoder (and its peer decoder) after `sections` sections, then `pieces` of decoder
/// stream: the verdict and the Known Received Count.
fn run<'a>(sections: u64, pieces: impl IntoIterator<Item = &'a [u8]>) -> (bool, u64) {
    let mut enc = QpackEncoder::new(4096);
    enc.peer_settings(4096, 8);
    let mut dec = QpackDecoder::new(4096, 8);
    let mut sink = Vec::new();
    for i in 0..sections {
        let (n, v) = field(i);
        enc.encode(4 * i, &[(&n, &v)], &mut sink);
        sink.clear();
    }
    let mut failed = false;
    for p in pieces {
        if enc.feed_decoder(p).is_err() {
            failed = true;
            break;
        }
        assert!(enc.known_received() <= enc.table().insert_count());
    }
    let kr = enc.known_received();
    // Still encodes, and what it writes decodes.
    let mut ins = Vec::new();
    enc.drain_output(&mut ins);
    dec.feed_encoder(&ins).expect("our own encoder stream");
    let fields = [(&b"x-after"[..], &b"1"[..]), (&b"x-field"[..], &b"value-0"[..])];
    let mut block = Vec::new();
    enc.encode(1 << 20, &fields, &mut block);
    let mut ins = Vec::new();
    enc.drain_output(&mut ins);
    dec.feed_encoder(&ins).expect("our own encoder stream");
    let mut got = Vec::new();
    let r = dec.decode(1 << 20, &block, u64::MAX, |n, v| {
        got.push((n.to_vec(), v.to_vec()));
        Ok(())
    });
    assert_eq!(r, Ok(Decoded::Done));
    let want: Vec<_> = fields.iter().map(|(n, v)| (n.to_vec(), v.to_vec())).collect();
    assert_eq!(got, want);
    (failed, kr)
}

fuzz_target!(|data: &[u8]| {
    let Some((&sel, stream)) = data.split_first() else {
        return;
    };
    let sections = u64::from(sel & 15);
    let whole = run(sections, [stream]);
    if stream.len() <= 256 {
        for at in 0..=stream.len() {
            let (a, b) = stream.split_at(at);
            let split = run(sections, [a, b]);
            assert_eq!(split.0, whole.0, "verdict differs at split {at}");
            if !whole.0 {
                assert_eq!(split, whole, "state differs at split {at}");
            }
        }
    }
    let bytewise = run(sections, stream.chunks(1));
    assert_eq!(bytewise.0, whole.0);
    if !whole.0 {
        assert_eq!(bytewise, whole);
    }
});
