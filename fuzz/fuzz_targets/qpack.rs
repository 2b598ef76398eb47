//! QPACK (RFC 9204) field sections from a peer, as the load generator's h3 client
//! (`qpack::Decoder`, lengths only, static table only) and the frame view
//! (`qpack::display`) decode them; and QPACK encoder/decoder stream instructions.
//!
//! Input: one byte choosing a field-section size limit, then the field section.
//! Checks:
//! - no panic in either decoder or the instruction parsers;
//! - the decoder's Huffman memo changes nothing: a second decode gives the same result;
//! - a size limit only turns success into failure, never changes a result;
//! - the two decoders agree: the length-only one succeeds exactly when the display one does
//!   and finds no dynamic-table reference (Required Insert Count 0, no dynamic lines), with
//!   the same field count and `:status`, and the same uncompressed size when every string
//!   was UTF-8;
//! - `encode_field_section` of the decoded fields decodes back to the same fields;
//! - an instruction parser never claims more bytes than it was given, nor zero.
#![no_main]
use hxlab_wire::qpack::{display, encode_field_section, Decoder};
use libfuzzer_sys::fuzz_target;

fn status(fields: &[(String, String)]) -> Option<u16> {
    fields.iter().find_map(|(n, v)| match (n.as_str(), v.as_bytes()) {
        (":status", [a, b, c]) if [a, b, c].iter().all(|d| d.is_ascii_digit()) => {
            Some(u16::from(a - b'0') * 100 + u16::from(b - b'0') * 10 + u16::from(c - b'0'))
        }
        _ => None,
    })
}

fn instructions(
    mut buf: &[u8],
    parse: fn(&[u8]) -> Result<Option<(usize, String)>, display::DisplayError>,
) {
    while let Ok(Some((n, _text))) = parse(buf) {
        assert!(n > 0 && n <= buf.len(), "instruction length {n} of {}", buf.len());
        buf = &buf[n..];
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&sel, block)) = data.split_first() else {
        return;
    };
    let mut d = Decoder::new();
    let fast = d.decode(block, u64::MAX);
    assert_eq!(d.decode(block, u64::MAX), fast, "memo changed the result");
    let limited = d.decode(block, u64::from(sel) * 8);
    if limited.is_ok() {
        assert_eq!(limited, fast, "a size limit changed a result");
    }
    let shown = display::decode_field_section(block);
    match (&fast, &shown) {
        (Ok(info), Ok(fs)) => {
            assert_eq!(fs.required_insert_count, 0);
            assert_eq!(fs.dynamic_refs, 0);
            assert_eq!(info.fields as usize, fs.fields.len(), "field count");
            assert_eq!(info.status, status(&fs.fields), ":status");
            let lossy = fs
                .fields
                .iter()
                .any(|(n, v)| n.contains('\u{fffd}') || v.contains('\u{fffd}'));
            if !lossy {
                let sum: u64 = fs.fields.iter().map(|(n, v)| (n.len() + v.len()) as u64).sum();
                assert_eq!(info.uncompressed, sum, "uncompressed size");
            }
            // Our request encoder, read back by both decoders.
            let mut out = Vec::new();
            encode_field_section(
                fs.fields.iter().map(|(n, v)| (n.as_bytes(), v.as_bytes())),
                &mut out,
            );
            let back = display::decode_field_section(&out).expect("our own encoding must decode");
            assert_eq!(back.fields, fs.fields, "encoder round trip");
            let again = Decoder::new().decode(&out, u64::MAX).expect("our own encoding");
            assert_eq!(again.fields, info.fields);
        }
        (Ok(info), Err(e)) => panic!("length-only decoder accepted ({info:?}), display: {e}"),
        (Err(e), Ok(fs)) => assert!(
            fs.required_insert_count != 0 || fs.dynamic_refs > 0,
            "length-only decoder refused ({e}) a static-only section: {fs:?}"
        ),
        (Err(_), Err(_)) => {}
    }
    instructions(block, display::encoder_instruction);
    instructions(block, display::decoder_instruction);
});
