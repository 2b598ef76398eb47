#!/bin/sh
# rootfs.sh BINARY OUTDIR
# Assemble a minimal root filesystem for a dynamically linked (glibc) hxlab
# binary, to be copied into a `FROM scratch` image:
#   /usr/local/bin/hxlab, every library ldd lists (same absolute paths,
#   dynamic loader included), the glibc NSS modules for host name lookup,
#   /etc/{passwd,group,nsswitch.conf,hosts}, CA certificates and /tmp.
set -eu

die() { echo "rootfs.sh: $*" >&2; exit 1; }

[ $# -eq 2 ] || die "usage: rootfs.sh BINARY OUTDIR"
bin=$1 out=$2
[ -f "$bin" ] || die "binary not found: $bin"
[ "$(dd if="$bin" bs=4 count=1 2>/dev/null)" = "$(printf '\177ELF')" ] \
  || die "not an ELF file: $bin"
libs=$(ldd "$bin" 2>&1) || die "ldd failed on $bin: $(echo "$libs" | head -n 1 | sed 's/^[[:space:]]*//')"
case $libs in *"not found"*) die "missing library: $(echo "$libs" | grep 'not found' | head -n 1 | sed 's/^[[:space:]]*//')";; esac

mkdir -p "$out/usr/local/bin" "$out/etc/ssl/certs" "$out/tmp"
chmod 1777 "$out/tmp"
cp "$bin" "$out/usr/local/bin/hxlab"
chmod 0755 "$out/usr/local/bin/hxlab"
# The release profile keeps line tables for profiling (66 MB); the image needs none (13 MB).
if command -v objcopy >/dev/null 2>&1; then
  objcopy --strip-debug "$out/usr/local/bin/hxlab"
fi

# Copy a file to the same absolute path under $out, following symlinks
# (e.g. /lib64/ld-linux-x86-64.so.2 -> /lib/x86_64-linux-gnu/...).
put() { mkdir -p "$out$(dirname "$1")"; cp -L "$1" "$out$1"; }

# ldd lines: "libc.so.6 => /lib/.../libc.so.6 (0x..)", "/lib64/ld-...so.2 (0x..)",
# "linux-vdso.so.1 (0x..)" (kernel-provided: no path, skipped).
for lib in $(echo "$libs" | sed -n 's/.*=> \(\/[^ ]*\) .*/\1/p; s/^[[:space:]]*\(\/[^ ]*\) (0x.*/\1/p'); do
  put "$lib"
done

# NSS: glibc >= 2.34 has files/dns built into libc, but copy the modules
# (from libc's directory) so older glibc resolves host names too.
libc=$(echo "$libs" | sed -n 's/.*libc\.so\.6 => \(\/[^ ]*\) .*/\1/p')
[ -n "$libc" ] || die "ldd lists no libc.so.6 (not a glibc binary?): $bin"
for m in libnss_files.so.2 libnss_dns.so.2 libresolv.so.2; do
  [ -e "$(dirname "$libc")/$m" ] && put "$(dirname "$libc")/$m"
done

cat > "$out/etc/nsswitch.conf" <<'NSS'
passwd: files
group:  files
hosts:  files dns
NSS
# Container engines usually bind-mount their own /etc/hosts; this is the fallback.
printf '127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n' > "$out/etc/hosts"
printf 'root:x:0:0:root:/:/sbin/nologin\nhxlab:x:65532:65532:hxlab:/tmp:/sbin/nologin\n' > "$out/etc/passwd"
printf 'root:x:0:\nhxlab:x:65532:\n' > "$out/etc/group"

if [ -f /etc/ssl/certs/ca-certificates.crt ]; then
  cp -L /etc/ssl/certs/ca-certificates.crt "$out/etc/ssl/certs/ca-certificates.crt"
fi
chmod 0644 "$out/etc/passwd" "$out/etc/group" "$out/etc/nsswitch.conf" "$out/etc/hosts"
