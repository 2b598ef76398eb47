#!/usr/bin/env python3
"""HTTP/3 header compression from an independent client (aioquic's H3Connection, whose
QPACK is pylsqpack: it uses the dynamic table both ways when the peer allows one).

On one connection: REQUESTS GETs of /bytes/N (N varying), CONCURRENCY at a time, each with
the same few extra request headers (worth indexing); every body must be N bytes of `x`.
Then REPEAT sequential identical requests. Prints one line of JSON:
- ok, bad: responses with the right status and body, and the others;
- request_sections_with_refs: our request field sections with a Required Insert Count > 0;
- response_sections, response_sections_with_refs: the server's field sections, and those
  with a Required Insert Count > 0 (they reference the dynamic table);
- repeat: for each sequential identical request, the HEADERS payload size and the encoder
  stream bytes that arrived with it (its whole header cost);
- server_settings: the server's SETTINGS.

usage: qpack_client.py HOST PORT [--requests N] [--concurrency C] [--repeat R]
       [--table BYTES] [--timeout S]
"""

import argparse
import asyncio
import json
import ssl
import sys

import pylsqpack
from aioquic.asyncio import connect
from aioquic.asyncio.protocol import QuicConnectionProtocol
from aioquic.h3.connection import H3_ALPN, H3Connection
from aioquic.h3.events import DataReceived, HeadersReceived
from aioquic.quic.configuration import QuicConfiguration


def required_insert_count(section):
    """The encoded Required Insert Count of a field section (its first prefixed integer,
    8-bit prefix): 0 when the section references no dynamic entry."""
    if not section:
        return 0
    v = section[0]
    if v < 0xFF:
        return v
    shift, i = 0, 1
    while i < len(section):
        b = section[i]
        v += (b & 0x7F) << shift
        shift += 7
        i += 1
        if b & 0x80 == 0:
            break
    return v


class CountingH3(H3Connection):
    """H3Connection that records the field sections it encodes and decodes."""

    def __init__(self, quic, table):
        self.table = table
        self.sent_with_refs = 0
        self.received = {}
        super().__init__(quic)

    def _init_connection(self):
        # Before our SETTINGS leave: the table we allow, if not aioquic's 4096.
        if self.table is not None:
            self._max_table_capacity = self.table
            self._blocked_streams = 16 if self.table else 0
            self._decoder = pylsqpack.Decoder(self.table, self._blocked_streams)
        super()._init_connection()

    def _encode_headers(self, stream_id, headers):
        data = super()._encode_headers(stream_id, headers)
        if required_insert_count(data) > 0:
            self.sent_with_refs += 1
        return data

    def _decode_headers(self, stream_id, frame_data):
        if frame_data is not None:
            self.received.setdefault(stream_id, bytes(frame_data))
        return super()._decode_headers(stream_id, frame_data)


class Client(QuicConnectionProtocol):
    def __init__(self, *args, table=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.h3 = CountingH3(self._quic, table)
        self.waiting = {}

    def quic_event_received(self, event):
        for e in self.h3.handle_event(event):
            w = self.waiting.get(e.stream_id)
            if w is None:
                continue
            if isinstance(e, HeadersReceived):
                w["headers"] = dict(e.headers)
            elif isinstance(e, DataReceived):
                w["body"] += e.data
            if getattr(e, "stream_ended", False) and not w["done"].done():
                w["done"].set_result(None)

    async def get(self, authority, path):
        sid = self._quic.get_next_available_stream_id()
        w = {"headers": {}, "body": b"", "done": asyncio.get_running_loop().create_future()}
        self.waiting[sid] = w
        self.h3.send_headers(
            sid,
            [
                (b":method", b"GET"),
                (b":scheme", b"https"),
                (b":authority", authority.encode()),
                (b":path", path.encode()),
                (b"user-agent", b"hxlab-qpack-test/1.0 (aioquic)"),
                (b"accept", b"application/octet-stream"),
                (b"x-hxlab-session", b"3f9c2a77-5e1b-4f0d-9a11-c0ffee000042"),
            ],
            end_stream=True,
        )
        self.transmit()
        await w["done"]
        del self.waiting[sid]
        return sid, w["headers"], w["body"]


async def run(args):
    cfg = QuicConfiguration(is_client=True, alpn_protocols=H3_ALPN)
    cfg.verify_mode = ssl.CERT_NONE
    authority = f"{args.host}:{args.port}"
    out = {"ok": 0, "bad": []}

    def check(path, n, headers, body):
        if headers.get(b":status") == b"200" and body == b"x" * n:
            out["ok"] += 1
        else:
            out["bad"].append([path, headers.get(b":status", b"").decode(), len(body)])

    def create(*a, **k):
        return Client(*a, table=args.table, **k)

    async with connect(args.host, args.port, configuration=cfg, create_protocol=create) as c:
        sizes = [1 + (i * 997) % 20000 for i in range(args.requests)]
        for start in range(0, len(sizes), args.concurrency):
            batch = sizes[start : start + args.concurrency]
            paths = [f"/bytes/{n}" for n in batch]
            got = await asyncio.gather(*(c.get(authority, p) for p in paths))
            for p, n, (_, h, b) in zip(paths, batch, got):
                check(p, n, h, b)
        repeat = []
        for _ in range(args.repeat):
            before = c.h3._encoder_bytes_received
            sid, h, b = await c.get(authority, "/bytes/100")
            check("/bytes/100", 100, h, b)
            section = c.h3.received.get(sid, b"")
            repeat.append(
                {
                    "headers": len(section),
                    "encoder_stream": c.h3._encoder_bytes_received - before,
                    "ric": required_insert_count(section),
                }
            )
        sections = list(c.h3.received.values())
        out["request_sections_with_refs"] = c.h3.sent_with_refs
        out["response_sections"] = len(sections)
        out["response_sections_with_refs"] = sum(
            1 for s in sections if required_insert_count(s) > 0
        )
        out["repeat"] = repeat
        out["encoder_stream_received"] = c.h3._encoder_bytes_received
        out["server_settings"] = {
            str(k): v for k, v in (c.h3.received_settings or {}).items()
        }
    print(json.dumps(out))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("host")
    p.add_argument("port", type=int)
    p.add_argument("--requests", type=int, default=100)
    p.add_argument("--concurrency", type=int, default=10)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--table", type=int, default=None)
    p.add_argument("--timeout", type=float, default=30)
    args = p.parse_args()
    try:
        asyncio.run(asyncio.wait_for(run(args), args.timeout))
    except asyncio.TimeoutError:
        print("timed out", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
