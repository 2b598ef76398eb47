#!/usr/bin/env python3
"""Writes the seed corpora in fuzz/corpus/<target>/ (run from anywhere: python3 fuzz/make_seeds.py).

Seeds are the test vectors of the unit tests and the RFCs (RFC 7541 Appendix C for HPACK,
RFC 9204 Appendix B for QPACK, RFC 9000 Appendix A for varints), a few hand-made frames,
HTTP/1.1 responses, units, the repository's example experiments, a small mahimahi trace and
a RunResult. Each file is small (< 10 KB); libFuzzer grows its own corpus from them (bench/fuzz.sh
keeps that grown corpus under fuzz/target/, not here). Re-running rewrites the same files.
"""
import base64, os, struct

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CORPUS = os.path.join(ROOT, "fuzz", "corpus")


def h(s):
    return bytes.fromhex("".join(s.split()))


def rec(*blocks):
    """common::records framing: 2-byte big-endian length, then the bytes."""
    return b"".join(struct.pack(">H", len(b)) + b for b in blocks)


def write(target, name, data):
    d = os.path.join(CORPUS, target)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    assert len(data) < 10_000, (target, name)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


# --- HPACK: RFC 7541 Appendix C (the vectors of crates/hxlab-wire/src/hpack.rs tests) ---
C2 = [h("400a 6375 7374 6f6d 2d6b 6579 0d63 7573 746f 6d2d 6865 6164 6572"),
      h("040c 2f73 616d 706c 652f 7061 7468"),
      h("1008 7061 7373 776f 7264 0673 6563 7265 74"),
      h("82")]
C3 = [h("8286 8441 0f77 7777 2e65 7861 6d70 6c65 2e63 6f6d"),
      h("8286 84be 5808 6e6f 2d63 6163 6865"),
      h("8287 85bf 400a 6375 7374 6f6d 2d6b 6579 0c63 7573 746f 6d2d 7661 6c75 65")]
C4 = [h("8286 8441 8cf1 e3c2 e5f2 3a6b a0ab 90f4 ff"),
      h("8286 84be 5886 a8eb 1064 9cbf"),
      h("8287 85bf 4088 25a8 49e9 5ba9 7d7f 8925 a849 e95b b8e8 b4bf")]
C5 = [h("4803 3330 3258 0770 7269 7661 7465 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133 2032 303a 3133 3a32 3120 474d 546e 1768 7474 7073 3a2f 2f77 7777 2e65 7861 6d70 6c65 2e63 6f6d"),
      h("4803 3330 37c1 c0bf"),
      h("88c1 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133 2032 303a 3133 3a32 3220 474d 54c0 5a04 677a 6970 7738 666f 6f3d 4153 444a 4b48 514b 425a 584f 5157 454f 5049 5541 5851 5745 4f49 553b 206d 6178 2d61 6765 3d33 3630 303b 2076 6572 7369 6f6e 3d31")]
C6 = [h("4882 6402 5885 aec3 771a 4b61 96d0 7abe 9410 54d4 44a8 2005 9504 0b81 66e0 82a6 2d1b ff6e 919d 29ad 1718 63c7 8f0b 97c8 e9ae 82ae 43d3"),
      h("4883 640e ffc1 c0bf"),
      h("88c1 6196 d07a be94 1054 d444 a820 0595 040b 8166 e084 a62d 1bff c05a 839b d9ab 77ad 94e7 821d d7f2 e6c7 b335 dfdf cd5b 3960 d5af 2708 7f36 72c1 ab27 0fb5 291f 9587 3160 65c0 03ed 4ee5 b106 3d50 07")]
# First byte: table limit selector (0: 4096, 1: 256 as in C.5/C.6, 2: 0, 3: 65536).
write("hpack", "c2", b"\x00" + rec(*C2))
write("hpack", "c3", b"\x00" + rec(*C3))
write("hpack", "c4", b"\x00" + rec(*C4))
write("hpack", "c5", b"\x01" + rec(*C5))
write("hpack", "c6", b"\x01" + rec(*C6))
# The same block twice (the decoder's memo) and a size update then a status.
write("hpack", "repeat", b"\x00" + rec(h("4803 3330 32be"), h("4803 3330 32be"), h("4803 3330 32be")))
write("hpack", "size-update", b"\x00" + rec(h("4803 3330 32"), h("20 3f45 88"), h("3f01 88")))

# --- Huffman strings of C.4 and C.6 ---
for name, s in [("www.example.com", "f1e3c2e5f23a6ba0ab90f4ff"), ("no-cache", "a8eb10649cbf"),
                ("custom-key", "25a849e95ba97d7f"), ("custom-value", "25a849e95bb8e8b4bf"),
                ("302", "6402"), ("private", "aec3771a4b"),
                ("date", "d07abe941054d444a8200595040b8166e082a62d1bff"),
                ("location", "9d29ad171863c78f0b97c8e9ae82ae43d3"), ("307", "640eff"),
                ("cookie", "94e7821dd7f2e6c7b335dfdfcd5b3960d5af27087f3672c1ab270fb5291f9587316065c003ed4ee5b1063d5007")]:
    write("huffman", name, h(s))

# --- QPACK: RFC 9204 Appendix B and the qpack tests; first byte: size limit selector ---
write("qpack", "b1-path", b"\x00" + h("0000 510b 2f69 6e64 6578 2e68 746d 6c"))
write("qpack", "status-200", b"\x10" + bytes([0, 0, 0xc0 | 25, 0xc0 | 53, 0x23]) + b"foo\x03bar")
write("qpack", "request", b"\x00" + h("0000 d1d7 5102 2f78 2378 2d61 0162"))
write("qpack", "huffman-authority", b"\x00" + h("0000 508c f1e3 c2e5 f23a 6ba0 ab90 f4ff"))
write("qpack", "b2-dynamic", b"\x00" + h("0381 10 11"))  # Required Insert Count 2: refused
write("qpack", "b2-encoder-stream", b"\x00" + h("3fbd01 c00f 7777 772e 6578 616d 706c 652e 636f 6d c10c 2f73 616d 706c 652f 7061 7468"))
write("qpack", "b3-encoder-stream", b"\x00" + h("4a 6375 7374 6f6d 2d6b 6579 0c63 7573 746f 6d2d 7661 6c75 65"))
write("qpack", "decoder-stream", b"\x00" + h("84 01 41"))

# --- HTTP/2 frames ---
# --- QPACK dynamic table: encoder stream (capacity selector first), decoder stream (sections
# selector first), sections after an encoder stream (records, piece seed first) ---
B2_ENC = h("3fbd01 c00f 7777 772e 6578 616d 706c 652e 636f 6d c10c 2f73 616d 706c 652f 7061 7468")
B3_ENC = h("4a 6375 7374 6f6d 2d6b 6579 0c63 7573 746f 6d2d 7661 6c75 65")
write("qpack_encoder_stream", "b2", b"\x01" + B2_ENC)
write("qpack_encoder_stream", "b2-b5", b"\x01" + B2_ENC + B3_ENC + h("02 810d 6375 7374 6f6d 2d76 616c 7565 32"))
write("qpack_encoder_stream", "capacity-4096", b"\x02" + h("3fe11f"))
write("qpack_encoder_stream", "over-capacity", b"\x00" + h("3fe11f"))
write("qpack_decoder_stream", "acks", b"\x03" + h("80 84 88 02"))
write("qpack_decoder_stream", "cancel-increment", b"\x04" + h("44 01 02"))
write("qpack_decoder_stream", "bogus-ack", b"\x00" + h("84"))
write("qpack_dynamic", "b2-b4", b"\x05" + rec(B2_ENC + B3_ENC + h("02"), h("0381 10 11"), h("0500 80 c1 81")))
write("qpack_dynamic", "static", b"\x80" + rec(b"", h("0000 510b 2f69 6e64 6578 2e68 746d 6c")))


def h2(kind, flags, sid, payload=b""):
    return struct.pack(">I", len(payload))[1:] + bytes([kind, flags]) + struct.pack(">I", sid) + payload

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
SETTINGS = h2(4, 0, 0, h("0003 0000 0064 0004 0000 ffff"))
write("h2_frame", "settings", SETTINGS)
write("h2_frame", "headers-padded", h2(1, 0x0d, 1, b"\x03" + C4[0] + b"\x00\x00\x00"))
write("h2_frame", "data", h2(0, 1, 1, b"hello"))
write("h2_frame", "goaway", h2(7, 0, 0, h("0000 0003 0000 0000")))
write("h2_frame", "reserved-bit", h2(8, 0, 0x80000001, h("0000 ffff")))

# h2wire: first byte bit 0 = direction (0 send, 1 recv), the rest seeds the split.
send = (PREFACE + SETTINGS + h2(4, 1, 0) + h2(1, 0x05, 1, C4[0]) + h2(1, 0x05, 3, C4[1])
        + h2(8, 0, 0, h("0000 ffff")) + h2(6, 0, 0, b"12345678") + h2(3, 0, 3, h("0000 0008")))
write("h2wire", "send", b"\x00" + send)
write("h2wire", "send-split", b"\x80" + send)
recv = (SETTINGS + h2(4, 1, 0) + h2(1, 0x04, 1, C6[0]) + h2(0, 0, 1, b"x" * 20) + h2(0, 1, 1, b"")
        + h2(1, 0x01, 3, C6[1][:3]) + h2(9, 0x04, 3, C6[1][3:])
        + h2(5, 0x04, 1, struct.pack(">I", 2) + C4[0]) + h2(1, 0x25, 2, h("8000 0003 10") + C6[2])
        + h2(6, 1, 0, b"12345678") + h2(7, 0, 0, h("0000 0003 0000 0000") + b"bye"))
write("h2wire", "recv", b"\x01" + recv)
write("h2wire", "recv-split", b"\x81" + recv)
write("h2wire", "recv-http1", b"\x01HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n")

# --- HTTP/3 frames and streams ---
def v(n):
    if n < 1 << 6: return bytes([n])
    if n < 1 << 14: return struct.pack(">H", n | 0x4000)
    if n < 1 << 30: return struct.pack(">I", n | 0x80000000)
    return struct.pack(">Q", n | 0xc000000000000000)

def h3(kind, payload):
    return v(kind) + v(len(payload)) + payload

for name, data in [("rfc9000-a1-8", h("c2197c5eff14e88c")), ("rfc9000-a1-4", h("9d7f3e7d")),
                   ("rfc9000-a1-2", h("7bbd")), ("rfc9000-a1-1", h("25")),
                   ("max", h("ffffffffffffffff"))]:
    write("varint", name, data)
write("h3_frame", "settings", h3(4, v(6) + v(16383) + v(1) + v(0)))
write("h3_frame", "headers", h3(1, h("0000 510b 2f69 6e64 6578 2e68 746d 6c")))
write("h3_frame", "grease", v(0x21 + 0x1f * 7) + v(1 << 20))

# serve_h3: bit 0 selects request head (0) or control stream (1, other bits the split size).
# Request heads: bit 1 set, a length byte and that many QPACK encoder-stream bytes come first
# (a decoder with a dynamic table); the other bits are the size limit × 64.
write("serve_h3", "request-head", b"\x7c" + h("0000 d1d7 5102 2f78 2378 2d61 0162"))
write("serve_h3", "request-no-path", b"\x7c" + h("0000 d1d7"))
# Capacity 4096, ":authority h" inserted by static name reference; the head's :authority is
# dynamic entry 0 (Required Insert Count 1, Base 1).
enc = h("3fe11f c001 68")
write("serve_h3", "request-head-dynamic", b"\x7e" + bytes([len(enc)]) + enc + h("0200 d1d7 80 5102 2f78"))
write("serve_h3", "control", b"\x07" + h3(4, v(6) + v(16383)) + h3(0x21, b"abc") + h3(7, v(0)))
write("serve_h3", "control-no-settings", b"\x01" + h3(7, v(0)))

# h3wire: bit 0 direction, bit 1: 0 request stream, 1 unidirectional (type first).
control = v(0) + h3(4, v(1) + v(0) + v(6) + v(16383) + v(7) + v(0) + v(0x21) + b"") + h3(7, v(0)) + h3(0xd, v(8))
write("h3wire", "control", b"\x03" + control)
write("h3wire", "control-split", b"\x83" + control)
write("h3wire", "request-send", b"\x00" + h3(1, h("0000 d1d7 5102 2f78 2378 2d61 0162")))
write("h3wire", "response", b"\x01" + h3(1, bytes([0, 0, 0xc0 | 25])) + h3(0, b"y" * 30) + h3(0x21, b"grease")
      + h3(5, v(0) + h("0000 d1d7 5102 2f78")) + h3(1, h("0000 5f1d 03") + b"abc"))
write("h3wire", "push", b"\x03" + v(1) + v(7) + h3(1, bytes([0, 0, 0xc0 | 25])) + h3(0, b"pushed"))
write("h3wire", "qpack-encoder", b"\x03" + v(2) + h("3fbd01 c00f 7777 772e 6578 616d 706c 652e 636f 6d c10c 2f73 616d 706c 652f 7061 7468"))
write("h3wire", "qpack-decoder", b"\x01" + v(3) + h("84 01 41"))
write("h3wire", "unknown-type", b"\x03" + v(0x54) + b"ignored")

# --- HTTP/1.1 responses (the load generator's and the frame view's parsers) ---
PIPE = (b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello"
        b"HTTP/1.1 404 Not Found\r\ntransfer-encoding: chunked\r\n\r\n3;x=y\r\nabc\r\n2\r\nde\r\n0\r\nX-T: 1\r\n\r\n"
        b"HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n")
write("h1_response", "pipelined", b"\x00" + PIPE)
write("h1_response", "pipelined-split", b"\x82" + PIPE)
write("h1_response", "until-close", b"\x00HTTP/1.0 200 OK\r\nServer: x\r\n\r\nbody until close")
write("h1_response", "head", b"\x01HTTP/1.1 200 OK\r\nContent-Length: 100\r\nConnection: keep-alive\r\n\r\n")
write("h1_response", "chunked-ext", b"\x04HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n 1a ; ext\r\n" + b"z" * 26 + b"\r\n0\r\n\r\n")
REQS = b"GET / HTTP/1.1\r\nHost: a\r\n\r\nHEAD /x HTTP/1.1\r\nHost: a\r\n\r\nGET /y HTTP/1.1\r\nHost: a\r\n\r\n"
RESP = (b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello"
        b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n"
        b"HTTP/1.1 103 Early Hints\r\nLink: </s.css>\r\n\r\nHTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\nT: 1\r\n\r\n")
write("h1wire", "keepalive", bytes([0x00, len(REQS)]) + REQS + RESP)
write("h1wire", "keepalive-split", bytes([0x81, len(REQS)]) + REQS + RESP)
write("h1wire", "until-close", bytes([0x05, 27]) + REQS[:27] + b"HTTP/1.0 200 OK\r\n\r\nall of it")
write("h1wire", "h2c-answer", bytes([0x00, 27]) + REQS[:27] + h2(4, 0, 0, h("0003 0000 0064")))

# --- Units ---
for i, s in enumerate(["10KiB", "1.5MiB", "5k", "0.1MiB", "100G", "20ms", "1.5s", "250us", "2m", "0",
                       "10mbit", "1.5Mbps", "800kibit", "2026-11-23T20:30:00Z",
                       "2026-11-23T21:30:00.5+01:00", "1795000000.25", "2024-02-29 23:59:60-05:30"]):
    write("units", f"{i:02}", s)

# --- Experiments: the repository's examples and a few built-in scenarios ---
for d, names in [("examples", None), ("crates/hxlab-lab/scenarios", ["compare.toml", "hol-blocking.toml", "seed-003-network.toml", "seed-003-push.toml"])]:
    src = os.path.join(ROOT, d)
    for n in sorted(os.listdir(src)):
        if n.endswith(".toml") and (names is None or n in names):
            with open(os.path.join(src, n), "rb") as f:
                write("experiment_toml", n, f.read())

# --- Link: a mahimahi trace (12 Mbit/s-ish for 10 ms, with a burst and a gap), options, JSON ---
write("link_trace", "constant", "".join(f"{t}\n" for t in range(1, 11)))
write("link_trace", "bursty", "0\n0\n0\n5\n5\n  9\n\n40\n")
write("link_trace", "single", "1000\n")
for i, s in enumerate(["20ms", "10mbit", "1%", "0.02", "ge:1%,10%,70%,0.1%", "GE:5%", "100p", "64KiB",
                       "unlimited", "codel", "drop-tail", "600s"]):
    write("link_config", f"{i:02}", s)
write("link_config", "json-empty", "{}")
write("link_config", "json", '{"down":{"delay":{"secs":0,"nanos":20000000},"rate":10000000,"loss":{"Random":0.01},"queue":{"Packets":100},"aqm":"Codel"},"up":{"delay":{"secs":0,"nanos":20000000}},"seed":7}')

# --- Load jobs and -H arguments ---
write("load_config", "header", "X-Test:  some value ")
write("load_config", "json-min", '{"urls":["http://127.0.0.1:8080/"],"requests":10}')
write("load_config", "json-h2load",
      '{"urls":["http://a.test:1/","/b"],"rps":10.5,"no_tls_proto":"h2c","connect_to":"[::1]:8080",'
      '"sni":"a.test","connection_active_timeout":"2s","connection_inactivity_timeout":"500ms",'
      '"cc":null,"verbose":true}')

# --- HdrHistogram V2 (uncompressed) and a RunResult ---
def zigzag_leb(n):
    z = (n << 1) ^ (n >> 63)
    z &= (1 << 64) - 1
    out = bytearray()
    for _ in range(8):
        if z < 0x80:
            out.append(z)
            return bytes(out)
        out.append((z & 0x7f) | 0x80)
        z >>= 7
    out.append(z & 0xff)
    return bytes(out)

def v2(counts):
    """counts: {index: count} for indices in the first bucket (index = value in us, < 2048)."""
    payload = bytearray()
    last = -1
    for i in sorted(counts):
        if i - last - 1 > 0:
            payload += zigzag_leb(-(i - last - 1))
        payload += zigzag_leb(counts[i])
        last = i
    return (struct.pack(">IIII", 0x1c849313, len(payload), 0, 3) + struct.pack(">QQd", 1, 3_600_000_000, 1.0)
            + bytes(payload))

EMPTY = v2({})
SOME = v2({100: 5, 250: 2, 1999: 1})
write("histogram", "empty", b"\x00" + EMPTY)
write("histogram", "some", b"\x00" + SOME)
write("histogram", "some-text", b"\x01" + base64.b64encode(SOME))
write("histogram", "bounds", b"\x00" + struct.pack(">IIII", 0x1c849313, 2, 0, 5) + struct.pack(">QQd", 1, 1 << 62, 1.0) + b"\x02\x02")

def b64(b):
    return base64.b64encode(b).decode()

RUN = """{"schema":1,"tool_version":"0.1.0","started_unix_s":1795000000.25,"duration_s":2.5,
"config":{"urls":["https://127.0.0.1:4433/"],"protocol":"h2","clients":2,"max_concurrent_streams":10,"threads":1,
"requests":8,"duration_s":0.0,"rate":null,"no_keepalive":false,"cc":null,"extra":{"note":"fuzz"}},
"requests_started":8,"requests_done":8,"requests_succeeded":8,"requests_failed":0,"status":{"200":8},
"errors":{"connect":0,"tls":0,"timeout":0,"reset":0,"protocol":0,"other":0},"error_samples":[],
"connections":2,"negotiated":{"h2":2},"tls_versions":{"TLSv1.3":2},
"bytes":{"total_received":1000,"total_sent":300,"header_received":100,"header_uncompressed":400,"body_received":800,
"header_sent":90,"header_sent_uncompressed":350},"cpu_user_s":0.01,"cpu_sys_s":0.02,
"histograms":{"latency":"%s","latency_uncorrected":"%s","ttfb":"%s","connect":"%s","handshake":"%s","handshake_resumed":"%s"},
"shards":[{"run_id":"r1","index":0,"count":2,"clients":1,"requests":4,"start_at_unix_s":1795000000.0,"started_unix_s":1795000000.25,"start_skew_s":0.25,"late":false}]}
""" % (b64(SOME), b64(SOME), b64(SOME), b64(EMPTY), b64(EMPTY), b64(EMPTY))
write("run_result", "h2", RUN)
write("run_result", "minimal-fields", '{"schema":1}')
