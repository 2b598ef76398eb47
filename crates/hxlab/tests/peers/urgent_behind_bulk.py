#!/usr/bin/env python3
"""Urgent behind bulk, from an independent client (python-h2 for HTTP/2, aioquic for HTTP/3).

On one connection: GET BULK with `priority: u=5`; once AFTER bytes of it have arrived, GET
SMALL with `priority: u=0`. Prints one line of JSON: how long the small response took from
its request to its last byte (wait_ms), the bulk bytes that arrived between the small
request and the small response's first byte (committed) and between its first and last byte
(interleaved), and whether the bulk had ended before the small response began.

usage: urgent_behind_bulk.py h2|h3 HOST PORT [--bulk PATH] [--small PATH] [--after BYTES]
       [--sni NAME] [--timeout S]
"""

import argparse
import asyncio
import json
import socket
import ssl
import sys
import time


class Log:
    def __init__(self, after):
        self.after = after
        self.bulk = 0
        self.bulk_done_at = None
        self.small_sent_at = None
        self.small_first_at = None
        self.small_done_at = None
        self.committed = 0
        self.interleaved = 0
        self.small = 0

    def on_bulk(self, n, end, now):
        self.bulk += n
        if self.small_sent_at is not None and self.small_done_at is None:
            if self.small_first_at is None:
                self.committed += n
            else:
                self.interleaved += n
        if end:
            self.bulk_done_at = now

    def on_small(self, n, end, now):
        self.small += n
        if self.small_first_at is None and n > 0:
            self.small_first_at = now
        if end:
            self.small_done_at = now
            if self.small_first_at is None:
                self.small_first_at = now

    def want_small(self):
        return self.small_sent_at is None and self.bulk >= self.after

    def report(self, proto):
        return {
            "proto": proto,
            "wait_ms": round((self.small_done_at - self.small_sent_at) * 1000, 1),
            "first_byte_ms": round((self.small_first_at - self.small_sent_at) * 1000, 1),
            "committed_bytes": self.committed,
            "interleaved_bytes": self.interleaved,
            "bulk_bytes": self.bulk,
            "small_bytes": self.small,
            "bulk_done_first": self.bulk_done_at is not None
            and self.bulk_done_at <= self.small_first_at,
        }


def run_h2(a, log):
    import h2.config
    import h2.connection
    import h2.events
    import h2.settings

    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    ctx.set_alpn_protocols(["h2"])
    raw = socket.create_connection((a.host, a.port), timeout=a.timeout)
    sock = ctx.wrap_socket(raw, server_hostname=a.sni or a.host)
    if sock.selected_alpn_protocol() != "h2":
        raise SystemExit("server did not choose h2")
    conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
    conn.initiate_connection()
    # Room for the whole bulk: flow control must not be what orders the responses.
    conn.increment_flow_control_window(1 << 30)
    conn.update_settings({h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: (1 << 31) - 1})
    authority = a.sni or a.host

    def get(path, prio):
        sid = conn.get_next_available_stream_id()
        conn.send_headers(
            sid,
            [(":method", "GET"), (":scheme", "https"), (":authority", authority),
             (":path", path), ("priority", prio)],
            end_stream=True,
        )
        return sid

    bulk = get(a.bulk, "u=5")
    sock.sendall(conn.data_to_send())
    small = None
    deadline = time.monotonic() + a.timeout
    while log.small_done_at is None or log.bulk_done_at is None:
        if time.monotonic() > deadline:
            raise SystemExit("timed out")
        data = sock.recv(65536)
        if not data:
            raise SystemExit("connection closed")
        now = time.monotonic()
        for ev in conn.receive_data(data):
            if isinstance(ev, h2.events.DataReceived):
                conn.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
                if ev.stream_id == bulk:
                    log.on_bulk(len(ev.data), False, now)
                elif ev.stream_id == small:
                    log.on_small(len(ev.data), False, now)
            elif isinstance(ev, h2.events.StreamEnded):
                if ev.stream_id == bulk:
                    log.on_bulk(0, True, now)
                elif ev.stream_id == small:
                    log.on_small(0, True, now)
            elif isinstance(ev, h2.events.StreamReset):
                raise SystemExit(f"stream {ev.stream_id} reset")
        if log.want_small():
            small = get(a.small, "u=0")
            log.small_sent_at = time.monotonic()
        out = conn.data_to_send()
        if out:
            sock.sendall(out)
    sock.close()


async def run_h3(a, log):
    from aioquic.asyncio.client import connect
    from aioquic.asyncio.protocol import QuicConnectionProtocol
    from aioquic.h3.connection import H3_ALPN, H3Connection
    from aioquic.h3.events import DataReceived, HeadersReceived
    from aioquic.quic.configuration import QuicConfiguration

    done = asyncio.Event()
    authority = (a.sni or a.host).encode()

    class Client(QuicConnectionProtocol):
        def __init__(self, *args, **kw):
            super().__init__(*args, **kw)
            self.h3 = H3Connection(self._quic)
            self.bulk = None
            self.small = None

        def get(self, path, prio):
            sid = self._quic.get_next_available_stream_id()
            self.h3.send_headers(
                sid,
                [(b":method", b"GET"), (b":scheme", b"https"), (b":authority", authority),
                 (b":path", path.encode()), (b"priority", prio.encode())],
                end_stream=True,
            )
            self.transmit()
            return sid

        def quic_event_received(self, event):
            now = time.monotonic()
            for ev in self.h3.handle_event(event):
                if isinstance(ev, DataReceived):
                    if ev.stream_id == self.bulk:
                        log.on_bulk(len(ev.data), ev.stream_ended, now)
                    elif ev.stream_id == self.small:
                        log.on_small(len(ev.data), ev.stream_ended, now)
                elif isinstance(ev, HeadersReceived) and ev.stream_ended:
                    if ev.stream_id == self.small:
                        log.on_small(0, True, now)
            if log.want_small():
                self.small = self.get(a.small, "u=0")
                log.small_sent_at = time.monotonic()
            if log.small_done_at is not None and log.bulk_done_at is not None:
                done.set()

    cfg = QuicConfiguration(is_client=True, alpn_protocols=H3_ALPN, verify_mode=ssl.CERT_NONE)
    cfg.server_name = a.sni or a.host
    cfg.max_data = 1 << 30
    cfg.max_stream_data = 1 << 30
    async with connect(a.host, a.port, configuration=cfg, create_protocol=Client) as c:
        c.bulk = c.get(a.bulk, "u=5")
        await asyncio.wait_for(done.wait(), a.timeout)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("proto", choices=["h2", "h3"])
    p.add_argument("host")
    p.add_argument("port", type=int)
    p.add_argument("--bulk", default="/bytes/3000000")
    p.add_argument("--small", default="/bytes/20000")
    p.add_argument("--after", type=int, default=300_000)
    p.add_argument("--sni")
    p.add_argument("--timeout", type=float, default=60)
    a = p.parse_args()
    log = Log(a.after)
    if a.proto == "h2":
        run_h2(a, log)
    else:
        asyncio.run(run_h3(a, log))
    print(json.dumps(log.report(a.proto)))


if __name__ == "__main__":
    sys.exit(main())
