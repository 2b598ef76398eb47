//! Server push (`--push`): promised streams are tracked apart and belong to the request they
//! were promised on, which completes only when they have all ended.

use super::*;

impl Conn {
    /// A pushed stream still open.
    pub(super) fn find_push(&self, id: u32) -> Option<usize> {
        self.pushes.iter().position(|p| p.id == id)
    }

    /// Ends pushed stream `j` (`ok`: with a complete response) and completes its request
    /// when that was the last thing it waited for.
    pub(super) fn push_end(&mut self, j: usize, ok: bool, now: Instant) {
        let p = self.pushes.swap_remove(j);
        let Some(k) = self.streams.iter().position(|s| s.id == p.parent) else {
            // The request already failed: nothing waits for this stream.
            return;
        };
        let s = &mut self.streams[k];
        s.pending = s.pending.saturating_sub(1);
        if ok {
            s.pushed += 1;
            s.push_body += p.body;
            s.push_uncompressed += p.uncompressed;
        }
        if s.pending == 0 && s.ended.is_some() {
            self.release(k, now);
        }
    }

    /// Resets pushed stream `j` with `code` and ends it without a response.
    pub(super) fn push_fail(&mut self, j: usize, code: u32, now: Instant) {
        let id = self.pushes[j].id;
        self.rst(id, code);
        self.push_end(j, false, now);
    }

    /// DATA on pushed stream `id`.
    pub(super) fn on_push_data(
        &mut self,
        flags: u8,
        id: u32,
        data_len: usize,
        payload_len: usize,
        now: Instant,
    ) -> Result<(), ConnError> {
        let Some(j) = self.find_push(id) else {
            if id > self.last_promised {
                return Err(conn_err(PROTOCOL_ERROR, "DATA on an idle stream"));
            }
            return Ok(());
        };
        let p = &mut self.pushes[j];
        if !p.got_headers {
            self.push_fail(j, PROTOCOL_ERROR, now);
            return Ok(());
        }
        p.body += data_len as u64;
        p.recv_unacked += payload_len as u32;
        if flags & END_STREAM != 0 {
            self.push_end(j, true, now);
        } else if p.recv_unacked >= WINDOW / 2 {
            let n = p.recv_unacked;
            p.recv_unacked = 0;
            control::write_window_update(&mut self.out, id, n);
        }
        Ok(())
    }

    /// PUSH_PROMISE: a pushed stream promised on request stream `id`.
    pub(super) fn on_push_promise(
        &mut self,
        flags: u8,
        id: u32,
        payload: &[u8],
    ) -> Result<(), ConnError> {
        // RFC 9113 §8.4: a PUSH_PROMISE when we disabled push is a protocol error.
        if !self.push {
            return Err(conn_err(PROTOCOL_ERROR, "PUSH_PROMISE with push disabled"));
        }
        if id == 0 || id.is_multiple_of(2) {
            return Err(conn_err(
                PROTOCOL_ERROR,
                "PUSH_PROMISE on a stream we did not open",
            ));
        }
        let p = strip_padding(flags, payload)?;
        if p.len() < 4 {
            return Err(conn_err(FRAME_SIZE_ERROR, "PUSH_PROMISE too short"));
        }
        let promised = be32(p) & 0x7fff_ffff;
        // RFC 9113 §5.1.1 wants promised ids to increase, but the h2 crate (our own
        // server) queues PUSH_PROMISE per request stream, so with several requests
        // in flight they can arrive out of order: accept any even id not in use.
        if promised == 0 || !promised.is_multiple_of(2) || self.find_push(promised).is_some() {
            return Err(conn_err(PROTOCOL_ERROR, "bad promised stream id"));
        }
        self.last_promised = self.last_promised.max(promised);
        self.rx_header += payload.len() as u64;
        self.block.clear();
        self.block.extend_from_slice(&p[4..]);
        self.block_end_stream = false;
        self.block_promised = promised;
        if flags & END_HEADERS != 0 {
            self.promise_done(id)?;
        } else {
            self.block_stream = id;
        }
        Ok(())
    }

    /// A complete PUSH_PROMISE header block on request stream `id`.
    pub(super) fn promise_done(&mut self, id: u32) -> Result<(), ConnError> {
        let promised = std::mem::take(&mut self.block_promised);
        // Always decode: the promised request's fields may change the HPACK table.
        let info = self
            .dec
            .decode(&self.block)
            .map_err(|e| conn_err(COMPRESSION_ERROR, &e.to_string()))?;
        if id >= self.next_id {
            return Err(conn_err(PROTOCOL_ERROR, "PUSH_PROMISE on an idle stream"));
        }
        match self.find(id) {
            Some(k) if self.pushes.len() < MAX_PUSHES => {
                // Its wire bytes are in header_received, so its decoded size goes with them.
                self.streams[k].push_uncompressed += info.uncompressed;
                self.streams[k].pending += 1;
                self.pushes.push(Push {
                    id: promised,
                    parent: id,
                    got_headers: false,
                    body: 0,
                    uncompressed: 0,
                    recv_unacked: 0,
                });
            }
            // The request is gone (or too many pushes): we do not want this stream.
            _ => self.rst(promised, CANCEL),
        }
        Ok(())
    }

    /// A complete response header block on pushed stream `id`.
    pub(super) fn push_headers_done(
        &mut self,
        id: u32,
        status: Option<u16>,
        uncompressed: u64,
        end_stream: bool,
        now: Instant,
    ) -> Result<(), ConnError> {
        let Some(j) = self.find_push(id) else {
            if id > self.last_promised {
                return Err(conn_err(
                    PROTOCOL_ERROR,
                    "HEADERS on a stream nobody promised",
                ));
            }
            return Ok(());
        };
        let p = &mut self.pushes[j];
        if p.got_headers {
            // Trailers must end the stream.
            if end_stream {
                self.push_end(j, true, now);
            } else {
                self.push_fail(j, PROTOCOL_ERROR, now);
            }
            return Ok(());
        }
        match status {
            Some(st) if (200..1000).contains(&st) => {}
            Some(st) if (100..200).contains(&st) && !end_stream => return Ok(()),
            _ => {
                self.push_fail(j, PROTOCOL_ERROR, now);
                return Ok(());
            }
        }
        if uncompressed > u64::from(MAX_HEADER_LIST) {
            self.push_fail(j, PROTOCOL_ERROR, now);
            return Ok(());
        }
        p.got_headers = true;
        p.uncompressed = uncompressed;
        if end_stream {
            self.push_end(j, true, now);
        }
        Ok(())
    }
}
