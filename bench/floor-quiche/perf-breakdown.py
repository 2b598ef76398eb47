"""Rough breakdown of a client's CPU from a flat `perf record` profile (self time per symbol),
as docs/load.md's "HTTP/3 client floors on two QUIC stacks" gives it: QUIC stack, packet
crypto, malloc/free, user-space copies, kernel copies, the rest of the kernel, HTTP/3+QPACK.
The buckets go by symbol and DSO names (quiche/BoringSSL, quinn-proto/ring); inlined code
counts where it was inlined (proto_h3's `main` holds some of quinn-proto and our parser).

usage: python3 bench/floor-quiche/perf-breakdown.py perf.data
  e.g. under the lock, server on core 1: taskset -c 0 perf record -F 4999 -o perf.data \
       floor-quiche https://127.0.0.1:PORT/bytes/102400 40000"""
import re, sys, subprocess, collections
def cat(dso, sym):
    s = sym
    if dso.startswith('[kernel'):
        if re.search(r'copy_to_iter|copy_from_user|copy_user|copy_from_iter|__check_object_size|memcpy', s): return 'kernel: copies to/from user'
        return 'kernel: UDP send/recv path, syscalls, scheduling'
    if re.search(r'aes|gcm|ghash|aead|CRYPTO_|chacha|EVP_|ring_core|ring::aead|PacketKey|decrypt|encrypt|hkdf|sha256|SHA|poly1305|x25519|ecdsa|bn_|p256', s, re.I): return 'packet crypto (AES-GCM, header protection)'
    if re.search(r'memmove|memcpy|memset', s): return 'memmove/memcpy (user space)'
    if re.search(r'malloc|_int_free|cfree|^free$|unlink_chunk|realloc|consolidate|tcache', s): return 'malloc/free'
    if 'vdso' in dso or 'clock_gettime' in s: return 'clock'
    if 'quiche::h3' in s or 'huffman' in s or 'qpack' in s.lower(): return 'HTTP/3 + QPACK (quiche::h3 / our h3 parser)'
    if 'hxlab' in s or 'ResponseParser' in s: return 'HTTP/3 + QPACK (quiche::h3 / our h3 parser)'
    if re.search(r'quiche|octets|intrusive|smallvec|btree|hashbrown|Arc|vec_deque|BinaryHeap|binary_heap|quinn_proto|bytes::|VarInt|tracing', s): return 'QUIC stack (frames, streams, ACKs, recovery)'
    if re.search(r'floor_quiche|proto_h3::main', s): return 'client loop (' + s + ')'
    if 'libc' in dso: return 'libc other (syscall wrappers)'
    return 'other'
f = sys.argv[1]
out = subprocess.run(['perf','report','-i',f,'--no-children','--sort','dso,sym','--stdio','-q'],capture_output=True,text=True).stdout
tot = collections.Counter()
for line in out.splitlines():
    m = re.match(r'\s*([\d.]+)%\s+(\S+)\s+\[[.k]\]\s+(.*)', line)
    if not m: continue
    tot[cat(m.group(2), m.group(3).strip())] += float(m.group(1))
for k,v in tot.most_common(): print(f'{v:6.1f} %  {k}')
