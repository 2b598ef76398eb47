//! [`Conn`]'s life outside frame parsing: the preface and SETTINGS, opening streams (HEADERS
//! from each URL's cached block, request bodies within the windows), and ending streams.

use super::*;

impl Conn {
    /// A connection for `target` with at most `depth` streams in flight, push disabled;
    /// the preface and SETTINGS are queued in `out`.
    pub fn new(target: &Target, depth: usize) -> Conn {
        Conn::with_push(target, depth, false)
    }

    /// Like [`Conn::new`]; with `push` it advertises SETTINGS_ENABLE_PUSH=1 and a request
    /// completes only when its response and every stream it promised have ended.
    pub fn with_push(target: &Target, depth: usize, push: bool) -> Conn {
        Conn::with_options(target, depth, push, HeaderTables::default())
    }

    /// Like [`Conn::with_push`], with the header tables to advertise (`tables.decoder`, in
    /// SETTINGS_HEADER_TABLE_SIZE when not the default 4096) and to encode with (at most
    /// `tables.encoder`, announced in the first block when below 4096).
    pub fn with_options(target: &Target, depth: usize, push: bool, tables: HeaderTables) -> Conn {
        let scheme: &[u8] = if target.https { b"https" } else { b"http" };
        let fields: Vec<Vec<(Vec<u8>, Vec<u8>)>> = target
            .requests
            .iter()
            .map(|t| {
                let path = t.uri.path_and_query().map(|p| p.as_str()).unwrap_or("/");
                let mut f = vec![
                    (
                        b":method".to_vec(),
                        target.method.as_str().as_bytes().to_vec(),
                    ),
                    (b":scheme".to_vec(), scheme.to_vec()),
                    (b":authority".to_vec(), target.authority.as_bytes().to_vec()),
                    (b":path".to_vec(), path.as_bytes().to_vec()),
                ];
                for (n, v) in &t.headers {
                    f.push((n.as_str().as_bytes().to_vec(), v.as_bytes().to_vec()));
                }
                f
            })
            .collect();
        let n = fields.len();
        let mut c = Conn {
            out: Vec::with_capacity(1024),
            out_header: 0,
            rx_header: 0,
            events: Vec::with_capacity(depth),
            fields,
            cache: (0..n).map(|_| (u64::MAX, Vec::new())).collect(),
            body: target.body.clone(),
            enc: Encoder::with_limit(tables.encoder as usize),
            dec: Decoder::new(tables.decoder as usize),
            our_table: tables.decoder,
            server_table: None,
            streams: Vec::with_capacity(depth),
            depth: depth.max(1),
            next_id: 1,
            got_settings: false,
            // nghttp2's assumption until the server's SETTINGS arrive.
            peer_max_streams: 100,
            peer_max_frame: 16_384,
            peer_initial_window: 65_535,
            conn_send_window: 65_535,
            recv_conn_unacked: 0,
            goaway: None,
            block_stream: 0,
            block_end_stream: false,
            block: Vec::new(),
            block_promised: 0,
            push,
            pushes: Vec::new(),
            last_promised: 0,
        };
        c.out.extend_from_slice(PREFACE);
        let mut settings = vec![
            (setting::ENABLE_PUSH, u32::from(push)),
            (setting::INITIAL_WINDOW_SIZE, WINDOW),
            (setting::MAX_HEADER_LIST_SIZE, MAX_HEADER_LIST),
        ];
        if tables.decoder != hxlab_wire::hpack::DEFAULT_TABLE {
            settings.push((setting::HEADER_TABLE_SIZE, tables.decoder as u32));
        }
        control::write_settings(&mut c.out, &settings);
        control::write_window_update(&mut c.out, 0, WINDOW - 65_535);
        c
    }

    /// What this connection's header tables are, from the SETTINGS exchanged: what we
    /// advertised, what the server's said (None before they came), what our encoder uses.
    pub fn header_table_seen(&self) -> HeaderTableSeen {
        HeaderTableSeen {
            protocol: "h2".to_string(),
            client_advertised: self.our_table,
            server_advertised: self.server_table,
            client_blocked_streams: None,
            server_blocked_streams: None,
            encoder_table: self.enc.table_limit() as u64,
            connections: 1,
        }
    }

    /// Streams in flight.
    pub fn inflight(&self) -> usize {
        self.streams.len()
    }

    /// Send time of the oldest request in flight.
    pub fn oldest_sent(&self) -> Option<Instant> {
        self.streams.iter().map(|s| s.req.sent).min()
    }

    /// True when another stream may be opened now.
    #[inline]
    pub fn can_open(&self) -> bool {
        self.goaway.is_none()
            && self.next_id <= MAX_STREAM_ID
            && self.streams.len() < self.depth.min(self.peer_max_streams as usize)
    }

    /// True when no stream can ever be opened again on this connection.
    pub fn exhausted(&self) -> bool {
        self.goaway.is_some() || self.next_id > MAX_STREAM_ID
    }

    /// Opens a stream for URL `url` (check [`Conn::can_open`] first): HEADERS (and
    /// CONTINUATION, and as much body as the windows allow) are queued in `out`.
    pub fn open(&mut self, url: usize, req: Req) -> u32 {
        let id = self.next_id;
        self.next_id += 2;
        let gen = self.enc.generation();
        if self.cache[url].0 != gen {
            let mut block = std::mem::take(&mut self.cache[url].1);
            block.clear();
            self.enc.encode(
                self.fields[url]
                    .iter()
                    .map(|(n, v)| (n.as_slice(), v.as_slice())),
                &mut block,
            );
            // Valid for later requests only if encoding it changed nothing in the table.
            let after = self.enc.generation();
            self.cache[url] = (if after == gen { gen } else { u64::MAX }, block);
        }
        let has_body = self.body.as_ref().is_some_and(|b| !b.is_empty());
        let block = &self.cache[url].1;
        let max = self.peer_max_frame;
        let mut first = true;
        let mut rest: &[u8] = block;
        loop {
            let n = rest.len().min(max);
            let last = n == rest.len();
            let mut flags = if last { END_HEADERS } else { 0 };
            if first && !has_body {
                flags |= END_STREAM;
            }
            let kind = if first { HEADERS } else { CONTINUATION };
            frame_head(&mut self.out, n, kind, flags, id);
            self.out.extend_from_slice(&rest[..n]);
            self.out_header += n as u64;
            rest = &rest[n..];
            first = false;
            if last {
                break;
            }
        }
        // An empty body is sent as END_STREAM on HEADERS.
        let body_off = if has_body { 0 } else { usize::MAX };
        self.streams.push(Slot {
            id,
            req,
            first_byte: None,
            status: 0,
            uncompressed: 0,
            body: 0,
            body_off,
            send_window: self.peer_initial_window,
            recv_unacked: 0,
            pending: 0,
            ended: None,
            pushed: 0,
            push_body: 0,
            push_uncompressed: 0,
        });
        if has_body {
            self.pump_bodies();
        }
        id
    }

    /// Sends request body DATA as far as the flow-control windows allow.
    pub(super) fn pump_bodies(&mut self) {
        let Some(body) = &self.body else { return };
        for s in self.streams.iter_mut() {
            while s.body_off < body.len() {
                let left = body.len() - s.body_off;
                let room = s.send_window.min(self.conn_send_window);
                if room <= 0 {
                    break;
                }
                let n = left.min(room as usize).min(self.peer_max_frame);
                let end = n == left;
                frame_head(
                    &mut self.out,
                    n,
                    DATA,
                    if end { END_STREAM } else { 0 },
                    s.id,
                );
                self.out
                    .extend_from_slice(&body[s.body_off..s.body_off + n]);
                s.body_off += n;
                s.send_window -= n as i64;
                self.conn_send_window -= n as i64;
                if end {
                    s.body_off = usize::MAX;
                }
            }
        }
    }

    /// Queues GOAWAY (when ending the connection ourselves).
    pub fn goaway_frame(&mut self, code: u32) {
        control::write_goaway(&mut self.out, 0, code, b"");
    }

    pub(super) fn rst(&mut self, id: u32, code: u32) {
        control::write_rst_stream(&mut self.out, id, code);
    }

    /// A message-level error on stream `id` (slot `k`): reset it with PROTOCOL_ERROR and fail
    /// its request with `what`.
    pub(super) fn stream_protocol_error(&mut self, id: u32, k: usize, what: &str) {
        self.rst(id, PROTOCOL_ERROR);
        self.finish(k, StreamEnd::Failed(ErrorKind::Protocol, what.into()));
    }

    /// Ends every stream in flight with `outcome`.
    pub fn fail_all(&mut self, kind: ErrorKind, message: &str) {
        self.pushes.clear();
        for s in self.streams.drain(..) {
            self.events.push(Event {
                req: s.req,
                outcome: StreamEnd::Failed(kind, message.to_string()),
            });
        }
    }

    pub(super) fn finish(&mut self, k: usize, outcome: StreamEnd) {
        let s = self.streams.swap_remove(k);
        self.events.push(Event {
            req: s.req,
            outcome,
        });
    }

    /// A request stream still receiving its response.
    pub(super) fn find(&self, id: u32) -> Option<usize> {
        self.streams
            .iter()
            .position(|s| s.id == id && s.ended.is_none())
    }

    /// Stream `k`'s own response ended.
    pub(super) fn complete(&mut self, k: usize, now: Instant) {
        let s = &mut self.streams[k];
        if s.body_off != usize::MAX {
            // The server answered before taking the whole request body: stop sending it.
            s.body_off = usize::MAX;
            let id = s.id;
            self.rst(id, NO_ERROR);
        }
        let s = &mut self.streams[k];
        if s.pending > 0 {
            // The page is complete only with the resources it promised.
            s.ended = Some(now);
            return;
        }
        self.release(k, now);
    }

    /// Request `k` is complete: its response and every stream it promised ended.
    pub(super) fn release(&mut self, k: usize, now: Instant) {
        let s = &self.streams[k];
        let outcome = StreamEnd::Done {
            status: s.status,
            body: s.body + s.push_body,
            uncompressed: s.uncompressed + s.push_uncompressed,
            first_byte: s.first_byte.unwrap_or(now),
            done: now,
            pushed: s.pushed,
        };
        self.finish(k, outcome);
    }
}
