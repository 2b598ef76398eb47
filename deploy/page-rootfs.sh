#!/bin/sh
# page-rootfs.sh BINARY OUTDIR [SOURCES]
# Assemble the root filesystem of the `page` image: a minimal Debian 12 (bookworm) made by
# mmdebstrap from Debian packages (chromium, firefox-esr with certutil, and the CA
# certificates, with their dependencies), plus the hxlab binary at /usr/local/bin/hxlab.
# No base image and no registry: only a Debian mirror. SOURCES is a sources.list or deb822
# .sources file naming the mirror (default: this machine's own, so the image matches its
# snapshot).
# The FROM-scratch image (deploy/rootfs.sh) cannot run `hxlab page`: a browser needs a
# whole distribution (fonts, NSS, GTK, Mesa). This one can.
set -eu

die() { echo "page-rootfs.sh: $*" >&2; exit 1; }

[ $# -ge 2 ] && [ $# -le 3 ] || die "usage: page-rootfs.sh BINARY OUTDIR [SOURCES]"
bin=$1 out=$2
sources=${3:-}
[ -f "$bin" ] || die "binary not found: $bin"
[ "$(dd if="$bin" bs=4 count=1 2>/dev/null)" = "$(printf '\177ELF')" ] \
  || die "not an ELF file: $bin"
command -v mmdebstrap >/dev/null 2>&1 || die "mmdebstrap not found (apt-get install mmdebstrap)"
if [ -z "$sources" ]; then
  for f in /etc/apt/sources.list.d/debian.sources /etc/apt/sources.list; do
    if [ -s "$f" ]; then sources=$f; break; fi
  done
fi
[ -n "$sources" ] && [ -s "$sources" ] || die "no apt sources file (give one as SOURCES)"
[ ! -e "$out" ] || [ -z "$(ls -A "$out")" ] || die "OUTDIR is not empty: $out"

# Documentation, manuals and translations are a third of the tree and no use to a browser.
mmdebstrap --quiet --variant=minbase \
  --include=chromium,firefox-esr,libnss3-tools,ca-certificates,fonts-dejavu-core \
  --dpkgopt='path-exclude=/usr/share/doc/*' \
  --dpkgopt='path-exclude=/usr/share/man/*' \
  --dpkgopt='path-exclude=/usr/share/locale/*' \
  --dpkgopt='path-include=/usr/share/locale/locale.alias' \
  bookworm "$out" "$sources" \
  || die "mmdebstrap failed"

install -m 0755 -D "$bin" "$out/usr/local/bin/hxlab"
# The release profile keeps line tables for profiling; the image needs none.
if command -v objcopy >/dev/null 2>&1; then
  objcopy --strip-debug "$out/usr/local/bin/hxlab"
fi
# The browser's profile and the origin's files go to /tmp.
chmod 1777 "$out/tmp"
