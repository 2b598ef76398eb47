//! The virtio-net header of a TUN opened with `IFF_VNET_HDR`, and user-space segmentation of
//! the GSO "super-packets" the kernel hands over once the device advertises offloads.
//!
//! # The header
//! With `IFF_VNET_HDR`, every read from and write to the TUN fd starts with a 10-byte
//! `struct virtio_net_hdr` (the legacy layout, in the host's byte order, since neither
//! `TUNSETVNETLE` nor `TUNSETVNETBE` is used):
//!
//! ```text
//!  0      1         2        4         6           8            10
//!  flags  gso_type  hdr_len  gso_size  csum_start  csum_offset  | IP packet ...
//! ```
//! * `flags & NEEDS_CSUM`: the L4 checksum is not finished ("CHECKSUM_PARTIAL"): the checksum
//!   field at `csum_start + csum_offset` holds the folded, *uncomplemented* pseudo-header sum,
//!   and whoever finishes it sums the bytes from `csum_start` to the end, folds and
//!   complements. A TUN that receives such a packet on write accepts it as is (the stack
//!   treats a partial checksum as verified), which is how the kernel itself loops packets.
//! * `gso_type`: `NONE` for an ordinary packet; `TCPV4`/`TCPV6` (TSO) or `UDP_L4` (USO) for a
//!   super-packet of up to 64 KiB that stands for several wire packets, each carrying
//!   `gso_size` bytes of payload (the last one possibly less) behind a copy of the headers.
//!   `hdr_len` is only a hint (the kernel sets it to the linear part's length), so the header
//!   length is always recomputed here from the packet itself.
//!
//! # Segmenting
//! [`Gso::write_segment`] produces wire packet *i* of a super-packet exactly as the kernel's
//! software GSO would: the IP header copied with its length fixed (IPv4: the ID incremented
//! by *i* and the header checksum recomputed; IPv6: the payload length), TCP's sequence
//! number advanced by the payload offset with FIN and PSH kept only on the last segment and
//! CWR only on the first, UDP's length fixed. The L4 checksum is either finished in full
//! ([`Csum::Full`]) or left partial for the receiving TUN, with the pseudo-header sum for the
//! segment's own length ([`Csum::Partial`]; cheap: no pass over the payload).

/// Size of `struct virtio_net_hdr` (without the `num_buffers` of the mergeable variant).
pub const VNET_HDR_LEN: usize = 10;
/// `VIRTIO_NET_HDR_F_NEEDS_CSUM`.
pub const F_NEEDS_CSUM: u8 = 1;
/// `VIRTIO_NET_HDR_GSO_NONE`.
pub const GSO_NONE: u8 = 0;
/// `VIRTIO_NET_HDR_GSO_TCPV4`.
pub const GSO_TCPV4: u8 = 1;
/// `VIRTIO_NET_HDR_GSO_TCPV6`.
pub const GSO_TCPV6: u8 = 4;
/// `VIRTIO_NET_HDR_GSO_UDP_L4` (USO, v4 or v6).
pub const GSO_UDP_L4: u8 = 5;
/// `VIRTIO_NET_HDR_GSO_ECN`: a flag bit on `gso_type`.
pub const GSO_ECN: u8 = 0x80;

const PROTO_TCP: u8 = 6;
const PROTO_UDP: u8 = 17;

/// A parsed `struct virtio_net_hdr`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct VnetHdr {
    /// `VIRTIO_NET_HDR_F_*`.
    pub flags: u8,
    /// `VIRTIO_NET_HDR_GSO_*`, ECN bit included.
    pub gso_type: u8,
    /// Length of the headers (a hint, see the module docs).
    pub hdr_len: u16,
    /// Payload bytes per segment.
    pub gso_size: u16,
    /// Where checksumming starts (the L4 header).
    pub csum_start: u16,
    /// Offset of the checksum field from `csum_start`.
    pub csum_offset: u16,
}

impl VnetHdr {
    /// Reads the header at the start of `b` (at least [`VNET_HDR_LEN`] bytes).
    pub fn parse(b: &[u8]) -> VnetHdr {
        let u = |i: usize| u16::from_ne_bytes([b[i], b[i + 1]]);
        VnetHdr {
            flags: b[0],
            gso_type: b[1],
            hdr_len: u(2),
            gso_size: u(4),
            csum_start: u(6),
            csum_offset: u(8),
        }
    }

    /// Writes the header into the first [`VNET_HDR_LEN`] bytes of `b`.
    pub fn write(&self, b: &mut [u8]) {
        b[0] = self.flags;
        b[1] = self.gso_type;
        b[2..4].copy_from_slice(&self.hdr_len.to_ne_bytes());
        b[4..6].copy_from_slice(&self.gso_size.to_ne_bytes());
        b[6..8].copy_from_slice(&self.csum_start.to_ne_bytes());
        b[8..10].copy_from_slice(&self.csum_offset.to_ne_bytes());
    }

    /// True for a super-packet standing for several wire packets.
    pub fn is_gso(&self) -> bool {
        self.gso_type & !GSO_ECN != GSO_NONE
    }
}

/// How [`Gso::write_segment`] leaves the L4 checksum.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Csum {
    /// Finished: computed over pseudo-header, header and payload; the vnet header says
    /// nothing about checksums.
    Full,
    /// Partial (`NEEDS_CSUM`, the pseudo-header sum in the field): the receiving TUN's stack
    /// accepts it without a pass over the payload.
    Partial,
}

/// A TSO or USO super-packet, checked and measured (see the module docs).
#[derive(Debug, Clone, Copy)]
pub struct Gso<'a> {
    pkt: &'a [u8],
    v6: bool,
    tcp: bool,
    /// IP header length.
    ip_len: usize,
    /// IP + L4 header length.
    hdr_len: usize,
    /// Payload bytes per segment.
    mss: usize,
    /// The vnet header's `gso_type` (ECN bit included).
    gso_type: u8,
}

impl<'a> Gso<'a> {
    /// Checks a super-packet `pkt` (the IP packet after the vnet header `hdr`): the IP version
    /// matches the GSO type, the L4 protocol follows the IP header directly (no IPv4 options
    /// are refused, no IPv6 extension headers are accepted, as the kernel never emits them
    /// with TSO/USO here), the headers fit. None when it is not a segmentable super-packet.
    pub fn parse(hdr: &VnetHdr, pkt: &'a [u8]) -> Option<Gso<'a>> {
        let kind = hdr.gso_type & !GSO_ECN;
        let version = pkt.first()? >> 4;
        let (v6, ip_len, proto) = match version {
            4 if pkt.len() >= 20 => {
                let ihl = (pkt[0] & 0x0f) as usize * 4;
                (false, ihl, pkt[9])
            }
            6 if pkt.len() >= 40 => (true, 40, pkt[6]),
            _ => return None,
        };
        let tcp = match (kind, v6, proto) {
            (GSO_TCPV4, false, PROTO_TCP) | (GSO_TCPV6, true, PROTO_TCP) => true,
            (GSO_UDP_L4, _, PROTO_UDP) => false,
            _ => return None,
        };
        if ip_len < 20 || pkt.len() < ip_len + if tcp { 20 } else { 8 } {
            return None;
        }
        let l4_len = if tcp {
            (pkt[ip_len + 12] >> 4) as usize * 4
        } else {
            8
        };
        let hdr_len = ip_len + l4_len;
        let mss = hdr.gso_size as usize;
        if (tcp && l4_len < 20) || pkt.len() < hdr_len || mss == 0 {
            return None;
        }
        Some(Gso {
            pkt,
            v6,
            tcp,
            ip_len,
            hdr_len,
            mss,
            gso_type: hdr.gso_type,
        })
    }

    fn payload(&self) -> usize {
        self.pkt.len() - self.hdr_len
    }

    /// How many wire packets this stands for (at least one).
    pub fn segments(&self) -> u32 {
        self.payload().div_ceil(self.mss).max(1) as u32
    }

    /// Bytes on the wire of all segments together: each carries its own headers.
    pub fn wire_len(&self) -> usize {
        self.payload() + self.segments() as usize * self.hdr_len
    }

    /// Length of segment `i` (IP packet, without vnet header).
    pub fn segment_len(&self, i: u32) -> usize {
        let off = i as usize * self.mss;
        self.hdr_len + self.mss.min(self.payload().saturating_sub(off))
    }

    /// Bytes on the wire of segments `first..end` together, each with its own headers.
    pub fn run_wire_len(&self, first: u32, end: u32) -> usize {
        (first..end).map(|i| self.segment_len(i)).sum()
    }

    /// Length of the IP packet that carries segments `first..end` as one unit.
    pub fn run_len(&self, first: u32, end: u32) -> usize {
        let off = first as usize * self.mss;
        let plen = self
            .payload()
            .saturating_sub(off)
            .min((end - first) as usize * self.mss);
        self.hdr_len + plen
    }

    /// Writes a vnet header (`GSO_NONE`) followed by segment `i` into `out`, which must hold
    /// `VNET_HDR_LEN + segment_len(i)` bytes; returns that length.
    pub fn write_segment(&self, i: u32, out: &mut [u8], csum: Csum) -> usize {
        self.write_run(i, i + 1, out, csum)
    }

    /// Writes segments `first..end` (at least one) as one unit with its vnet header into
    /// `out`, which must hold `VNET_HDR_LEN + run_len(first, end)` bytes; returns that length.
    ///
    /// One segment is an ordinary packet, exactly as [`Gso::write_segment`] describes. Several
    /// are a smaller super-packet of the same kind and `gso_size`: the headers of segment
    /// `first` (IPv4 ID advanced by `first`, TCP sequence by its payload offset, CWR kept only
    /// when `first` is 0, FIN and PSH only when the run ends the super-packet) with the
    /// lengths of the run, and the payload of those segments. A super-packet always leaves the
    /// L4 checksum partial (`csum` is then ignored): the receiving TUN's stack cuts it (or
    /// takes it whole) the way it cuts the kernel's own, and its segments are then byte for
    /// byte the ones [`Gso::write_segment`] would have written.
    pub fn write_run(&self, first: u32, end: u32, out: &mut [u8], csum: Csum) -> usize {
        let whole = end == self.segments();
        let off = first as usize * self.mss;
        let len = self.run_len(first, end);
        let plen = len - self.hdr_len;
        let (l4_csum_offset, proto) = if self.tcp {
            (16, PROTO_TCP)
        } else {
            (6, PROTO_UDP)
        };
        let gso = end - first > 1;
        let vh = match (csum, gso) {
            (Csum::Full, false) => VnetHdr::default(),
            (_, true) => VnetHdr {
                flags: F_NEEDS_CSUM,
                gso_type: if first == 0 {
                    self.gso_type
                } else {
                    self.gso_type & !GSO_ECN
                },
                hdr_len: self.hdr_len as u16,
                gso_size: self.mss as u16,
                csum_start: self.ip_len as u16,
                csum_offset: l4_csum_offset as u16,
            },
            (Csum::Partial, false) => VnetHdr {
                flags: F_NEEDS_CSUM,
                gso_type: GSO_NONE,
                hdr_len: self.hdr_len as u16,
                gso_size: 0,
                csum_start: self.ip_len as u16,
                csum_offset: l4_csum_offset as u16,
            },
        };
        let csum = if gso { Csum::Partial } else { csum };
        vh.write(out);
        let seg = &mut out[VNET_HDR_LEN..VNET_HDR_LEN + len];
        seg[..self.hdr_len].copy_from_slice(&self.pkt[..self.hdr_len]);
        let from = self.hdr_len + off;
        seg[self.hdr_len..].copy_from_slice(&self.pkt[from..from + plen]);
        let (ip, l4) = seg.split_at_mut(self.ip_len);
        if self.v6 {
            put16(ip, 4, (len - 40) as u16);
        } else {
            put16(ip, 2, len as u16);
            put16(ip, 4, get16(ip, 4).wrapping_add(first as u16));
            put16(ip, 10, 0);
            let c = !fold(sum16(ip, 0));
            put16(ip, 10, c);
        }
        if self.tcp {
            let seq = u32::from_be_bytes([l4[4], l4[5], l4[6], l4[7]]);
            l4[4..8].copy_from_slice(&seq.wrapping_add(off as u32).to_be_bytes());
            if !whole {
                l4[13] &= !(0x01 | 0x08); // FIN, PSH
            }
            if first != 0 {
                l4[13] &= !0x80; // CWR
            }
        } else {
            put16(l4, 4, l4.len() as u16);
        }
        let pseudo = pseudo_sum(ip, self.v6, proto, l4.len());
        put16(l4, l4_csum_offset, 0);
        let c = match csum {
            Csum::Partial => fold(pseudo),
            Csum::Full => match !fold(sum16(l4, pseudo)) {
                0 if !self.tcp => 0xffff,
                c => c,
            },
        };
        put16(l4, l4_csum_offset, c);
        VNET_HDR_LEN + len
    }
}

fn get16(b: &[u8], i: usize) -> u16 {
    u16::from_be_bytes([b[i], b[i + 1]])
}

fn put16(b: &mut [u8], i: usize, v: u16) {
    b[i..i + 2].copy_from_slice(&v.to_be_bytes());
}

/// One's-complement sum of `data` as big-endian 16-bit words (a trailing odd byte padded with
/// zero), added to `init`; not folded.
pub fn sum16(data: &[u8], init: u64) -> u64 {
    let mut s = init;
    let mut chunks = data.chunks_exact(4);
    for c in &mut chunks {
        s += u32::from_be_bytes([c[0], c[1], c[2], c[3]]) as u64;
    }
    let rest = chunks.remainder();
    let mut i = 0;
    while i + 1 < rest.len() {
        s += get16(rest, i) as u64;
        i += 2;
    }
    if rest.len() % 2 == 1 {
        s += (rest[rest.len() - 1] as u64) << 8;
    }
    s
}

/// Folds a wide one's-complement sum to 16 bits (not complemented).
pub fn fold(mut s: u64) -> u16 {
    while s >> 16 != 0 {
        s = (s & 0xffff) + (s >> 16);
    }
    s as u16
}

/// The pseudo-header sum for an L4 segment of `l4_len` bytes under IP header `ip`.
fn pseudo_sum(ip: &[u8], v6: bool, proto: u8, l4_len: usize) -> u64 {
    let addrs = if v6 { &ip[8..40] } else { &ip[12..20] };
    sum16(addrs, proto as u64 + l4_len as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The textbook Internet checksum: sum of 16-bit big-endian words, end-around carry,
    /// complement. Written independently of `sum16`/`fold`.
    fn inet_checksum(bytes: &[u8]) -> u16 {
        let mut sum: u32 = 0;
        for pair in bytes.chunks(2) {
            let word = (pair[0] as u32) << 8 | pair.get(1).copied().unwrap_or(0) as u32;
            sum += word;
            sum = (sum & 0xffff) + (sum >> 16);
        }
        !(sum as u16)
    }

    /// True when the L4 checksum of `seg` (an IP packet) is right, by building the
    /// pseudo-header explicitly.
    fn l4_checksum_ok(seg: &[u8]) -> bool {
        let (ip_len, proto, src, dst) = if seg[0] >> 4 == 4 {
            (
                (seg[0] & 15) as usize * 4,
                seg[9],
                &seg[12..16],
                &seg[16..20],
            )
        } else {
            (40, seg[6], &seg[8..24], &seg[24..40])
        };
        let l4 = &seg[ip_len..];
        let mut buf = Vec::new();
        buf.extend_from_slice(src);
        buf.extend_from_slice(dst);
        if seg[0] >> 4 == 4 {
            buf.extend_from_slice(&[0, proto]);
            buf.extend_from_slice(&(l4.len() as u16).to_be_bytes());
        } else {
            buf.extend_from_slice(&(l4.len() as u32).to_be_bytes());
            buf.extend_from_slice(&[0, 0, 0, proto]);
        }
        buf.extend_from_slice(l4);
        inet_checksum(&buf) == 0
    }

    /// What a receiver with CHECKSUM_PARTIAL does: sum from csum_start, complement, store.
    fn finish_partial(vh: &VnetHdr, seg: &mut [u8]) {
        assert_eq!(vh.flags & F_NEEDS_CSUM, F_NEEDS_CSUM);
        let start = vh.csum_start as usize;
        let at = start + vh.csum_offset as usize;
        let c = inet_checksum(&seg[start..]);
        seg[at..at + 2].copy_from_slice(&c.to_be_bytes());
    }

    // IPv6 with timestamps: 40 + 32 + 1428 = 1500 bytes per segment.
    const MSS: usize = 1428;
    const PAYLOAD: usize = 3 * MSS + 500;

    fn payload() -> Vec<u8> {
        (0..PAYLOAD).map(|i| (i * 7 + i / 251) as u8).collect()
    }

    /// A TCP header with timestamps (32 bytes), seq 1000, flags as given.
    fn tcp_header(flags: u8) -> Vec<u8> {
        let mut t = vec![0u8; 32];
        t[0..2].copy_from_slice(&443u16.to_be_bytes());
        t[2..4].copy_from_slice(&50000u16.to_be_bytes());
        t[4..8].copy_from_slice(&1000u32.to_be_bytes());
        t[8..12].copy_from_slice(&77u32.to_be_bytes());
        t[12] = 8 << 4;
        t[13] = flags;
        t[14..16].copy_from_slice(&65000u16.to_be_bytes());
        t[20..22].copy_from_slice(&[1, 1]);
        t[22..24].copy_from_slice(&[8, 10]);
        t
    }

    fn tso_v4(flags: u8) -> (VnetHdr, Vec<u8>) {
        let mut p = vec![0u8; 20];
        p[0] = 0x45;
        p[6] = 0x40; // DF
        p[4..6].copy_from_slice(&0xfffeu16.to_be_bytes()); // the ID wraps inside the burst
        p[8] = 64;
        p[9] = PROTO_TCP;
        p[12..16].copy_from_slice(&[100, 64, 0, 1]);
        p[16..20].copy_from_slice(&[100, 64, 0, 2]);
        p.extend(tcp_header(flags));
        p.extend(payload());
        let total = p.len() as u16;
        p[2..4].copy_from_slice(&total.to_be_bytes());
        let vh = VnetHdr {
            flags: F_NEEDS_CSUM,
            gso_type: GSO_TCPV4,
            hdr_len: 52,
            gso_size: MSS as u16,
            csum_start: 20,
            csum_offset: 16,
        };
        (vh, p)
    }

    fn tso_v6(flags: u8) -> (VnetHdr, Vec<u8>) {
        let mut p = vec![0u8; 40];
        p[0] = 0x60;
        p[6] = PROTO_TCP;
        p[7] = 64;
        p[8] = 0xfd;
        p[23] = 1;
        p[24] = 0xfd;
        p[39] = 2;
        p.extend(tcp_header(flags));
        p.extend(payload());
        let plen = (p.len() - 40) as u16;
        p[4..6].copy_from_slice(&plen.to_be_bytes());
        let vh = VnetHdr {
            flags: F_NEEDS_CSUM,
            gso_type: GSO_TCPV6,
            hdr_len: 0, // only a hint: must not matter
            gso_size: MSS as u16,
            csum_start: 40,
            csum_offset: 16,
        };
        (vh, p)
    }

    fn segments(vh: &VnetHdr, p: &[u8], csum: Csum) -> Vec<(VnetHdr, Vec<u8>)> {
        let g = Gso::parse(vh, p).expect("a super-packet");
        (0..g.segments())
            .map(|i| {
                let mut out = vec![0u8; VNET_HDR_LEN + 1500];
                let n = g.write_segment(i, &mut out, csum);
                assert_eq!(n, VNET_HDR_LEN + g.segment_len(i));
                (VnetHdr::parse(&out), out[VNET_HDR_LEN..n].to_vec())
            })
            .collect()
    }

    fn check_tcp_segments(segs: &[(VnetHdr, Vec<u8>)], ip_len: usize, v6: bool) {
        let data = payload();
        assert_eq!(segs.len(), 4);
        let mut joined = Vec::new();
        for (i, (vh, s)) in segs.iter().enumerate() {
            assert_eq!(vh.gso_type, GSO_NONE);
            let want = ip_len + 32 + if i < 3 { MSS } else { 500 };
            assert_eq!(s.len(), want, "segment {i} length");
            assert!(s.len() <= 1500);
            if v6 {
                assert_eq!(u16::from_be_bytes([s[4], s[5]]) as usize, want - 40);
            } else {
                assert_eq!(u16::from_be_bytes([s[2], s[3]]) as usize, want);
                let id = 0xfffeu16.wrapping_add(i as u16);
                assert_eq!(u16::from_be_bytes([s[4], s[5]]), id);
                assert_eq!(inet_checksum(&s[..20]), 0, "IPv4 header checksum");
            }
            let t = &s[ip_len..];
            let seq = u32::from_be_bytes([t[4], t[5], t[6], t[7]]);
            assert_eq!(seq, 1000 + (i * MSS) as u32);
            let flags = t[13];
            let last = i == 3;
            assert_eq!(flags & 0x01 != 0, last, "FIN only on the last");
            assert_eq!(flags & 0x08 != 0, last, "PSH only on the last");
            assert_eq!(flags & 0x80 != 0, i == 0, "CWR only on the first");
            assert_eq!(flags & 0x10, 0x10, "ACK on every segment");
            assert_eq!(&t[20..32], &tcp_header(0)[20..32], "options copied");
            joined.extend_from_slice(&t[32..]);
        }
        assert_eq!(joined, data, "payload split in order");
    }

    #[test]
    fn tso_v4_segments_with_full_checksums() {
        let (vh, p) = tso_v4(0x80 | 0x10 | 0x08 | 0x01);
        let g = Gso::parse(&vh, &p).unwrap();
        assert_eq!(g.segments(), 4);
        assert_eq!(g.wire_len(), PAYLOAD + 4 * 52);
        let segs = segments(&vh, &p, Csum::Full);
        check_tcp_segments(&segs, 20, false);
        for (vh, s) in &segs {
            assert_eq!(vh.flags, 0);
            assert!(l4_checksum_ok(s), "TCP checksum");
        }
    }

    #[test]
    fn tso_v6_segments_with_full_checksums() {
        let (vh, p) = tso_v6(0x80 | 0x10 | 0x08 | 0x01);
        let g = Gso::parse(&vh, &p).unwrap();
        assert_eq!(g.wire_len(), PAYLOAD + 4 * 72);
        let segs = segments(&vh, &p, Csum::Full);
        check_tcp_segments(&segs, 40, true);
        for (_, s) in &segs {
            assert!(l4_checksum_ok(s), "TCP checksum");
        }
    }

    #[test]
    fn partial_checksums_finish_to_the_full_ones() {
        for (vh, p) in [tso_v4(0x18), tso_v6(0x18)] {
            let full = segments(&vh, &p, Csum::Full);
            for (i, (pvh, mut s)) in segments(&vh, &p, Csum::Partial).into_iter().enumerate() {
                assert!(!l4_checksum_ok(&s) || s == full[i].1);
                finish_partial(&pvh, &mut s);
                assert_eq!(s, full[i].1, "segment {i}");
            }
        }
    }

    /// A UDP-over-IPv4 super-packet (USO, 1200-byte segments) carrying `payload`.
    fn uso_v4(payload: impl IntoIterator<Item = u8>) -> (VnetHdr, Vec<u8>) {
        let mut p = vec![0u8; 28];
        p[0] = 0x45;
        p[8] = 64;
        p[9] = PROTO_UDP;
        p[12..16].copy_from_slice(&[10, 0, 0, 1]);
        p[16..20].copy_from_slice(&[10, 0, 0, 2]);
        p.extend(payload);
        let total = p.len() as u16;
        p[2..4].copy_from_slice(&total.to_be_bytes());
        p[24..26].copy_from_slice(&(total - 20).to_be_bytes());
        let vh = VnetHdr {
            flags: F_NEEDS_CSUM,
            gso_type: GSO_UDP_L4,
            gso_size: 1200,
            csum_start: 20,
            csum_offset: 6,
            ..VnetHdr::default()
        };
        (vh, p)
    }

    #[test]
    fn uso_v4_segments() {
        let (vh, p) = uso_v4(std::iter::repeat_n(0xab, 1200 * 2 + 7));
        let segs = segments(&vh, &p, Csum::Full);
        assert_eq!(segs.len(), 3);
        for (s, plen) in segs.iter().map(|x| &x.1).zip([1200, 1200, 7]) {
            assert_eq!(s.len(), 28 + plen);
            assert_eq!(u16::from_be_bytes([s[24], s[25]]) as usize, 8 + plen);
            assert_eq!(inet_checksum(&s[..20]), 0);
            assert!(l4_checksum_ok(s));
        }
    }

    /// A run rebuilt as a smaller super-packet, cut again, gives exactly the original's
    /// segments of that run (every header field, checksum and payload byte); a run of one is
    /// that segment itself.
    #[test]
    fn runs_cut_again_are_the_original_segments() {
        let uso = uso_v4((0..1200 * 3 + 7).map(|i| (i % 253) as u8));
        let mut ecn = tso_v4(0x80 | 0x10 | 0x08 | 0x01);
        ecn.0.gso_type |= GSO_ECN;
        for (vh, p) in [ecn, tso_v6(0x80 | 0x18), uso] {
            let g = Gso::parse(&vh, &p).unwrap();
            let n = g.segments();
            let original = segments(&vh, &p, Csum::Partial);
            for first in 0..n {
                for end in first + 1..=n {
                    let mut out = vec![0u8; VNET_HDR_LEN + 65_535];
                    let len = g.write_run(first, end, &mut out, Csum::Partial);
                    assert_eq!(len, VNET_HDR_LEN + g.run_len(first, end));
                    let rvh = VnetHdr::parse(&out);
                    let run = &out[VNET_HDR_LEN..len];
                    let again: Vec<(VnetHdr, Vec<u8>)> = if end - first == 1 {
                        assert!(!rvh.is_gso(), "one segment is an ordinary packet");
                        vec![(rvh, run.to_vec())]
                    } else {
                        assert!(rvh.is_gso());
                        assert_eq!(rvh.gso_size, vh.gso_size);
                        assert_eq!(
                            rvh.gso_type & GSO_ECN != 0,
                            first == 0 && vh.gso_type & GSO_ECN != 0
                        );
                        let r = Gso::parse(&rvh, run).expect("a super-packet");
                        assert_eq!(r.segments(), end - first);
                        assert_eq!(r.wire_len(), g.run_wire_len(first, end));
                        segments(&rvh, run, Csum::Partial)
                    };
                    assert_eq!(again.len(), (end - first) as usize);
                    for (j, (svh, seg)) in again.iter().enumerate() {
                        let (ovh, oseg) = &original[first as usize + j];
                        assert_eq!(seg, oseg, "run {first}..{end}, segment {j}");
                        assert_eq!(svh, ovh, "run {first}..{end}, header {j}");
                    }
                }
            }
        }
    }

    #[test]
    fn not_a_super_packet_is_refused() {
        let (mut vh, p) = tso_v4(0x10);
        vh.gso_type = GSO_TCPV6;
        assert!(Gso::parse(&vh, &p).is_none(), "v4 packet labelled TCPV6");
        vh.gso_type = GSO_TCPV4;
        vh.gso_size = 0;
        assert!(Gso::parse(&vh, &p).is_none(), "zero gso_size");
        vh.gso_size = MSS as u16;
        assert!(Gso::parse(&vh, &p[..30]).is_none(), "truncated");
        let mut b = [0u8; VNET_HDR_LEN];
        vh.write(&mut b);
        assert_eq!(VnetHdr::parse(&b), vh);
        assert!(vh.is_gso());
    }
}
