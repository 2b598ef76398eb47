//! The QPACK dynamic tables of one connection as an observer rebuilds them from the bytes it
//! sees (`hxlab trace`, and the HTTP/3 events of a qlog): per direction, a decoder fed that
//! direction's encoder stream and sized by the other direction's SETTINGS (the side that
//! decodes those sections advertised the capacity). A field section sent in a direction
//! resolves when the inserts it references were seen; until then it is blocked, as it would
//! be at the real decoder.

use super::decoder::{QpackDecoder, MAX_BLOCKED_STREAMS};
use super::Decoded;
use crate::tap::Dir;

/// What became of a field section given to [`QpackMirror::resolve`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mirrored {
    /// Every field line, in order (dynamic references resolved).
    Fields(Vec<(String, String)>),
    /// It references inserts not seen yet (it stays blocked on its stream until
    /// [`QpackMirror::cancel`] or a later `resolve` of the same stream).
    Blocked,
    /// This direction's table cannot be followed (its capacity was never seen, or its
    /// encoder stream or the section could not be read).
    Unavailable,
}

/// Both directions' tables of one connection.
#[derive(Default)]
pub struct QpackMirror {
    send: Option<QpackDecoder>,
    recv: Option<QpackDecoder>,
}

impl QpackMirror {
    fn side(&mut self, dir: Dir) -> &mut Option<QpackDecoder> {
        match dir {
            Dir::Send => &mut self.send,
            Dir::Recv => &mut self.recv,
        }
    }

    /// SETTINGS sent in `dir` with QPACK_MAX_TABLE_CAPACITY `capacity`: they size the table
    /// of the sections sent the other way (the first SETTINGS count, as at a real decoder).
    pub fn settings(&mut self, dir: Dir, capacity: u64) {
        let other = match dir {
            Dir::Send => Dir::Recv,
            Dir::Recv => Dir::Send,
        };
        let side = self.side(other);
        if side.is_none() {
            *side = Some(QpackDecoder::new(capacity, MAX_BLOCKED_STREAMS));
        }
    }

    /// One whole encoder-stream instruction sent in `dir`; a mirror that cannot follow it
    /// stops following that direction.
    pub fn instruction(&mut self, dir: Dir, bytes: &[u8]) {
        let side = self.side(dir);
        if side
            .as_mut()
            .is_some_and(|d| d.feed_encoder(bytes).is_err())
        {
            *side = None;
        }
    }

    /// The fields of the section `block` sent in `dir` on `stream`.
    pub fn resolve(&mut self, dir: Dir, stream: u64, block: &[u8]) -> Mirrored {
        let Some(d) = self.side(dir).as_mut() else {
            return Mirrored::Unavailable;
        };
        let mut fields = Vec::new();
        let r = d.decode(stream, block, u64::MAX, |n, v| {
            fields.push((
                String::from_utf8_lossy(n).into_owned(),
                String::from_utf8_lossy(v).into_owned(),
            ));
            Ok(())
        });
        // Acknowledgments the mirror would send: nobody reads them.
        let mut acks = Vec::new();
        d.drain_output(&mut acks);
        match r {
            Ok(Decoded::Done) => Mirrored::Fields(fields),
            Ok(Decoded::Blocked) => Mirrored::Blocked,
            Err(_) => Mirrored::Unavailable,
        }
    }

    /// Stops waiting for a blocked section of `stream` sent in `dir`.
    pub fn cancel(&mut self, dir: Dir, stream: u64) {
        if let Some(d) = self.side(dir).as_mut() {
            d.cancel_stream(stream);
            let mut out = Vec::new();
            d.drain_output(&mut out);
        }
    }
}
