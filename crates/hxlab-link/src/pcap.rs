//! `hxlab link --pcap FILE`: what crossed the emulated link, as pcapng (what Wireshark and
//! tshark read), written by the relay threads as packets leave the link.
//!
//! - Three interfaces, raw IP (LINKTYPE_RAW), nanosecond timestamps: 0 `down` (outside →
//!   inside, as delivered), 1 `up` (inside → outside, as delivered), 2 `dropped` (packets the
//!   link dropped, at the moment it dropped them, each with a comment saying why and in which
//!   direction).
//! - Timestamps are the link's own clock (when a packet left the emulated wire) on the wall
//!   clock's scale.
//! - GSO super-packets are written as the wire packets they stand for, with full checksums.
//! - With `SSLKEYLOGFILE` set, the key log's lines are embedded as Decryption Secrets Blocks
//!   (TLS key log) as they appear. A TLS 1.3 client logs a handshake's secrets only after the
//!   server's first flight has crossed the link, and Wireshark gives up on a session whose
//!   keys it lacks when its handshake goes by, so when the link stops the file is rewritten
//!   with every secret in one block ahead of the packets: Wireshark and tshark then decrypt
//!   TLS and QUIC with no setup. (A link killed with SIGKILL leaves the blocks where they
//!   were written.)

use crate::gso::{Csum, Gso, VnetHdr, VNET_HDR_LEN};
use crate::LinkError;
use std::io::{BufWriter, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Interface of packets delivered outside → inside.
pub const IF_DOWN: u32 = 0;
/// Interface of packets delivered inside → outside.
pub const IF_UP: u32 = 1;
/// Interface of dropped packets.
pub const IF_DROPPED: u32 = 2;
const LINKTYPE_RAW: u16 = 101;
/// Secrets type of a TLS key log (`TLSK`).
const SECRETS_TLS_KEYLOG: u32 = 0x544c_534b;
/// How often (link time) the key log is looked at while packets are written.
const SECRETS_EVERY: Duration = Duration::from_millis(10);
/// Most key log bytes read for one block.
const KEYLOG_CHUNK: u64 = 1 << 20;

/// The capture file and where the link's clock starts on the wall clock.
pub struct Capture {
    out: BufWriter<std::fs::File>,
    /// Wall-clock nanoseconds at the link's time zero.
    base_ns: u64,
    keylog: Option<(PathBuf, u64)>,
    /// Link time the key log was last looked at.
    secrets_seen: Duration,
    /// Scratch for one segment of a super-packet.
    seg: Vec<u8>,
    path: PathBuf,
}

fn pad4(n: usize) -> usize {
    (n + 3) & !3
}

/// A pcapng option: code, length, value padded.
fn option(out: &mut Vec<u8>, code: u16, value: &[u8]) {
    out.extend_from_slice(&code.to_le_bytes());
    out.extend_from_slice(&(value.len() as u16).to_le_bytes());
    out.extend_from_slice(value);
    out.resize(pad4(out.len()), 0);
}

/// A whole block: type, total length, `body`, total length again.
fn block(kind: u32, body: &[u8]) -> Vec<u8> {
    let total = (12 + body.len()) as u32;
    let mut b = Vec::with_capacity(total as usize);
    b.extend_from_slice(&kind.to_le_bytes());
    b.extend_from_slice(&total.to_le_bytes());
    b.extend_from_slice(body);
    b.extend_from_slice(&total.to_le_bytes());
    b
}

impl Capture {
    /// Creates `path` and writes the section and interface headers. `start_ns` is the
    /// link's time zero on CLOCK_MONOTONIC; `keylog` the key log to embed, if any.
    pub fn create(
        path: &Path,
        start_ns: u64,
        keylog: Option<PathBuf>,
    ) -> Result<Capture, LinkError> {
        let file = std::fs::File::create(path)
            .map_err(|e| LinkError::Setup(format!("--pcap {}: {e}", path.display())))?;
        let now_mono = crate::sys::monotonic_ns();
        let wall = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0);
        let mut c = Capture {
            out: BufWriter::with_capacity(1 << 20, file),
            base_ns: wall.saturating_sub(now_mono.saturating_sub(start_ns)),
            keylog: keylog.map(|p| (p, 0)),
            secrets_seen: Duration::ZERO,
            seg: vec![0u8; crate::tun::SMALL_BUF],
            path: path.to_path_buf(),
        };
        // Section header: byte-order magic, version 1.0, section length unknown.
        let mut shb = Vec::new();
        shb.extend_from_slice(&0x1a2b_3c4du32.to_le_bytes());
        shb.extend_from_slice(&1u16.to_le_bytes());
        shb.extend_from_slice(&0u16.to_le_bytes());
        shb.extend_from_slice(&(-1i64).to_le_bytes());
        option(&mut shb, 4, b"hxlab link"); // shb_userappl
        option(&mut shb, 0, b"");
        c.write(&block(0x0a0d_0d0a, &shb))?;
        for (name, desc) in [
            (
                "down",
                "outside to inside, as the emulated link delivered it",
            ),
            ("up", "inside to outside, as the emulated link delivered it"),
            (
                "dropped",
                "packets the emulated link dropped (loss, queue, AQM, UDP blocked)",
            ),
        ] {
            let mut idb = Vec::new();
            idb.extend_from_slice(&LINKTYPE_RAW.to_le_bytes());
            idb.extend_from_slice(&0u16.to_le_bytes());
            idb.extend_from_slice(&0u32.to_le_bytes()); // no snap length
            option(&mut idb, 2, name.as_bytes()); // if_name
            option(&mut idb, 3, desc.as_bytes()); // if_description
            option(&mut idb, 9, &[9]); // if_tsresol: nanoseconds
            option(&mut idb, 0, b"");
            c.write(&block(1, &idb))?;
        }
        Ok(c)
    }

    fn write(&mut self, b: &[u8]) -> Result<(), LinkError> {
        self.out
            .write_all(b)
            .map_err(|e| LinkError::Setup(format!("--pcap {}: {e}", self.path.display())))
    }

    /// Embeds what the key log gained since last time (whole lines only).
    fn secrets(&mut self) {
        let Some((path, done)) = &mut self.keylog else {
            return;
        };
        let Ok(meta) = std::fs::metadata(&*path) else {
            return;
        };
        if meta.len() <= *done {
            return;
        }
        let Ok(mut f) = std::fs::File::open(&*path) else {
            return;
        };
        let want = (meta.len() - *done).min(KEYLOG_CHUNK);
        let mut buf = Vec::with_capacity(want as usize);
        if f.seek(SeekFrom::Start(*done)).is_err() || f.take(want).read_to_end(&mut buf).is_err() {
            return;
        }
        let Some(end) = buf.iter().rposition(|&b| b == b'\n') else {
            return;
        };
        buf.truncate(end + 1);
        *done += buf.len() as u64;
        let _ = self.write(&Capture::dsb(&buf));
    }

    /// One IP packet on `iface` at link time `at`, with an optional comment (after what the
    /// key log gained, looked at every [`SECRETS_EVERY`], not for every packet).
    fn packet(&mut self, iface: u32, at: Duration, ip: &[u8], comment: Option<&str>) {
        if at >= self.secrets_seen + SECRETS_EVERY {
            self.secrets_seen = at;
            self.secrets();
        }
        let ts = self.base_ns + at.as_nanos() as u64;
        let mut epb = Vec::with_capacity(28 + pad4(ip.len()) + 64);
        epb.extend_from_slice(&iface.to_le_bytes());
        epb.extend_from_slice(&((ts >> 32) as u32).to_le_bytes());
        epb.extend_from_slice(&(ts as u32).to_le_bytes());
        epb.extend_from_slice(&(ip.len() as u32).to_le_bytes());
        epb.extend_from_slice(&(ip.len() as u32).to_le_bytes());
        epb.extend_from_slice(ip);
        epb.resize(pad4(epb.len()), 0);
        if let Some(c) = comment {
            option(&mut epb, 1, c.as_bytes()); // opt_comment
            option(&mut epb, 0, b"");
        }
        let _ = self.write(&block(6, &epb));
    }

    /// A packet as the relay holds it (vnet header, then the IP packet, possibly a GSO
    /// super-packet): written as the wire packets it stands for.
    pub fn relayed(&mut self, iface: u32, at: Duration, buf: &[u8], comment: Option<&str>) {
        if buf.len() <= VNET_HDR_LEN {
            return;
        }
        let hdr = VnetHdr::parse(buf);
        let ip = &buf[VNET_HDR_LEN..];
        match hdr.is_gso().then(|| Gso::parse(&hdr, ip)).flatten() {
            Some(g) => {
                for i in 0..g.segments() {
                    self.segment(iface, at, &g, i, comment);
                }
            }
            None => self.packet(iface, at, ip, comment),
        }
    }

    /// Segment `i` of super-packet `g`, cut out with its own headers and full checksums.
    pub fn segment(&mut self, iface: u32, at: Duration, g: &Gso, i: u32, comment: Option<&str>) {
        if VNET_HDR_LEN + g.segment_len(i) > self.seg.len() {
            return;
        }
        let mut seg = std::mem::take(&mut self.seg);
        let n = g.write_segment(i, &mut seg, Csum::Full);
        self.packet(iface, at, &seg[VNET_HDR_LEN..n], comment);
        self.seg = seg;
    }

    /// Writes out what is buffered.
    pub fn flush(&mut self) {
        self.secrets();
        let _ = self.out.flush();
    }

    /// Rewrites the file with the secrets embedded so far in one block right after the
    /// interface blocks (see the module's text); the file stays as it is when that fails.
    fn secrets_first(&mut self) -> std::io::Result<()> {
        let embedded = match &self.keylog {
            Some((_, done)) if *done > 0 => *done,
            _ => return Ok(()),
        };
        let mut secrets = Vec::with_capacity(embedded as usize);
        if let Some((path, _)) = &self.keylog {
            std::fs::File::open(path)?
                .take(embedded)
                .read_to_end(&mut secrets)?;
        }
        let tmp = self.path.with_extension("pcapng.part");
        let mut input = std::io::BufReader::new(std::fs::File::open(&self.path)?);
        let mut out = BufWriter::new(std::fs::File::create(&tmp)?);
        let mut header = [0u8; 8];
        let mut body = Vec::new();
        let mut interfaces = 0;
        let mut placed = false;
        loop {
            match input.read_exact(&mut header) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => break,
                Err(e) => return Err(e),
            }
            let kind = u32::from_le_bytes(header[..4].try_into().expect("4 bytes"));
            let len = u32::from_le_bytes(header[4..].try_into().expect("4 bytes")) as usize;
            if len < 12 {
                return Err(std::io::Error::other("a block shorter than its header"));
            }
            body.resize(len - 8, 0);
            input.read_exact(&mut body)?;
            if kind == 1 {
                interfaces += 1;
            }
            if kind == 0x0000_000a {
                continue;
            }
            if !placed && kind != 0x0a0d_0d0a && kind != 1 {
                out.write_all(&Capture::dsb(&secrets))?;
                placed = true;
            }
            out.write_all(&header)?;
            out.write_all(&body)?;
            if kind == 1 && interfaces == 3 && !placed {
                out.write_all(&Capture::dsb(&secrets))?;
                placed = true;
            }
        }
        out.flush()?;
        std::fs::rename(&tmp, &self.path)
    }

    /// A Decryption Secrets Block holding `secrets` (a TLS key log).
    fn dsb(secrets: &[u8]) -> Vec<u8> {
        let mut body = Vec::with_capacity(8 + pad4(secrets.len()));
        body.extend_from_slice(&SECRETS_TLS_KEYLOG.to_le_bytes());
        body.extend_from_slice(&(secrets.len() as u32).to_le_bytes());
        body.extend_from_slice(secrets);
        body.resize(8 + pad4(secrets.len()), 0);
        block(0x0000_000a, &body)
    }
}

impl Drop for Capture {
    fn drop(&mut self) {
        self.flush();
        let _ = self.secrets_first();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Blocks are 4-byte aligned and carry their length at both ends; a packet of odd length
    /// is padded, and its lengths say what it was.
    #[test]
    fn blocks_are_aligned_and_measured() {
        let path = std::env::temp_dir().join(format!("hxlab-pcap-{}.pcapng", std::process::id()));
        {
            let mut c = Capture::create(&path, crate::sys::monotonic_ns(), None).unwrap();
            let mut buf = vec![0u8; VNET_HDR_LEN];
            buf.extend_from_slice(&[
                0x45, 0, 0, 21, 0, 0, 0, 0, 64, 17, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9,
            ]);
            c.relayed(IF_UP, Duration::from_millis(5), &buf, Some("x"));
        }
        let b = std::fs::read(&path).unwrap();
        let _ = std::fs::remove_file(&path);
        let mut at = 0;
        let mut kinds = Vec::new();
        while at < b.len() {
            let kind = u32::from_le_bytes(b[at..at + 4].try_into().unwrap());
            let len = u32::from_le_bytes(b[at + 4..at + 8].try_into().unwrap()) as usize;
            assert_eq!(len % 4, 0);
            let tail = u32::from_le_bytes(b[at + len - 4..at + len].try_into().unwrap()) as usize;
            assert_eq!(tail, len);
            if kind == 6 {
                let caplen = u32::from_le_bytes(b[at + 20..at + 24].try_into().unwrap());
                assert_eq!(caplen, 21);
            }
            kinds.push(kind);
            at += len;
        }
        assert_eq!(kinds, [0x0a0d_0d0a, 1, 1, 1, 6]);
    }
}
