"""An HTTP/3 server on aioquic (QPACK by pylsqpack, which uses the dynamic table when the
client allows one): the independent peer of hxlab's QPACK tests for `hxlab load` and
`hxlab trace` as clients.

    qpack_server.py PORT CERT KEY

GET /bytes/N answers N bytes of 'x' with a few response fields a real origin sends. Every
HEADERS field section, received and sent, is parsed here on its own (RFC 9204 §4.5) to count
the field lines that reference the dynamic table: what the counts say was really put on the
wire, not what the encoder was allowed to do. On SIGTERM (or SIGINT) it prints one JSON line
of counts and exits 0.
"""

import asyncio
import json
import signal
import sys

from aioquic.asyncio import serve
from aioquic.asyncio.protocol import QuicConnectionProtocol
from aioquic.h3.connection import H3_ALPN, H3Connection
from aioquic.h3.events import DataReceived, HeadersReceived
from aioquic.quic.configuration import QuicConfiguration

COUNTS = {
    "requests": 0,
    "bodies_sent": 0,
    "request_sections": 0,
    "request_sections_with_refs": 0,
    "request_dynamic_refs": 0,
    "response_sections": 0,
    "response_sections_with_refs": 0,
    "response_dynamic_refs": 0,
    "client_max_table_capacity": None,
    "client_blocked_streams": None,
    "request_header_bytes": [],
    "response_header_bytes": [],
}


def prefix_int(buf, pos, n):
    """A prefix integer with an n-bit prefix at buf[pos]: (value, next position)."""
    mask = (1 << n) - 1
    v = buf[pos] & mask
    pos += 1
    if v < mask:
        return v, pos
    shift = 0
    while True:
        b = buf[pos]
        pos += 1
        v += (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return v, pos


def skip_string(buf, pos, n):
    length, pos = prefix_int(buf, pos, n)
    return pos + length


def dynamic_refs(section):
    """(Required Insert Count as encoded, field lines referencing the dynamic table)."""
    ric, pos = prefix_int(section, 0, 8)
    _, pos = prefix_int(section, pos, 7)
    refs = 0
    while pos < len(section):
        b = section[pos]
        if b & 0x80:  # indexed: 1Txxxxxx
            _, pos = prefix_int(section, pos, 6)
            refs += 0 if b & 0x40 else 1
        elif b & 0x40:  # literal with name reference: 01NTxxxx
            _, pos = prefix_int(section, pos, 4)
            pos = skip_string(section, pos, 7)
            refs += 0 if b & 0x10 else 1
        elif b & 0x20:  # literal with literal name: 001NHxxx
            pos = skip_string(section, pos, 3)
            pos = skip_string(section, pos, 7)
        elif b & 0x10:  # indexed post-base: 0001xxxx
            _, pos = prefix_int(section, pos, 4)
            refs += 1
        else:  # literal with post-base name reference: 0000Nxxx
            _, pos = prefix_int(section, pos, 3)
            pos = skip_string(section, pos, 7)
            refs += 1
    return ric, refs


class CountingH3(H3Connection):
    def _decode_headers(self, stream_id, frame_data):
        if frame_data is not None:
            ric, refs = dynamic_refs(frame_data)
            COUNTS["request_sections"] += 1
            COUNTS["request_sections_with_refs"] += 1 if ric else 0
            COUNTS["request_dynamic_refs"] += refs
            if len(COUNTS["request_header_bytes"]) < 1000:
                COUNTS["request_header_bytes"].append(len(frame_data))
        return super()._decode_headers(stream_id, frame_data)

    def _encode_headers(self, stream_id, headers):
        frame_data = super()._encode_headers(stream_id, headers)
        ric, refs = dynamic_refs(frame_data)
        COUNTS["response_sections"] += 1
        COUNTS["response_sections_with_refs"] += 1 if ric else 0
        COUNTS["response_dynamic_refs"] += refs
        if len(COUNTS["response_header_bytes"]) < 1000:
            COUNTS["response_header_bytes"].append(len(frame_data))
        return frame_data

    def _handle_control_frame(self, frame_type, frame_data):
        super()._handle_control_frame(frame_type, frame_data)
        s = self._received_settings or {}
        COUNTS["client_max_table_capacity"] = s.get(0x01, 0)
        COUNTS["client_blocked_streams"] = s.get(0x07, 0)


class Server(QuicConnectionProtocol):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.h3 = None

    def quic_event_received(self, event):
        if self.h3 is None:
            self.h3 = CountingH3(self._quic)
        for ev in self.h3.handle_event(event):
            if isinstance(ev, HeadersReceived):
                self.answer(ev)
            elif isinstance(ev, DataReceived):
                pass
        self.transmit()

    def answer(self, ev):
        COUNTS["requests"] += 1
        path = dict(ev.headers).get(b":path", b"/")
        body = b""
        status = b"200"
        if path.startswith(b"/bytes/"):
            try:
                n = min(int(path[len(b"/bytes/"):]), 1 << 20)
                body = b"x" * n
            except ValueError:
                status = b"400"
        else:
            status = b"404"
        self.h3.send_headers(
            ev.stream_id,
            [
                (b":status", status),
                (b"server", b"aioquic-qpack-peer"),
                (b"content-type", b"application/octet-stream"),
                (b"cache-control", b"no-store"),
                (b"content-length", str(len(body)).encode()),
            ],
        )
        self.h3.send_data(ev.stream_id, body, end_stream=True)
        COUNTS["bodies_sent"] += 1


async def main(port, cert, key):
    config = QuicConfiguration(is_client=False, alpn_protocols=H3_ALPN)
    config.load_cert_chain(cert, key)
    server = await serve("127.0.0.1", port, configuration=config, create_protocol=Server)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    print("listening", flush=True)
    await stop.wait()
    server.close()
    print(json.dumps(COUNTS), flush=True)


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]), sys.argv[2], sys.argv[3]))
