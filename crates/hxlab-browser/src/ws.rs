//! A WebSocket client (RFC 6455) just large enough for WebDriver BiDi on a loopback socket:
//! the opening handshake, masked text frames out, text frames in (fragmented or not), pings
//! answered, a close ended.
//!
//! Why our own rather than `tokio-tungstenite`: BiDi needs a dozen JSON messages a second on
//! a socket we create ourselves (inside a link's namespace), with no TLS, no compression and
//! no server side. As with the DevTools pipe (cdp.rs), a small client we can test at every
//! split costs less than a dependency tree and its compile time on a shared machine.
//! Frame decoding is a pure function ([`decode_frame`]) so the tests feed it byte by byte.

use crate::BrowserError;
use base64::Engine as _;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// A message larger than this is refused (a page load's largest BiDi event is a few KiB;
/// a recorded body fetched with `network.getData` may be large).
const MAX_MESSAGE: usize = 64 * 1024 * 1024;
/// Bytes read from the socket at a time.
const READ_CHUNK: usize = 64 * 1024;
/// The longest opening-handshake answer we read.
const MAX_HANDSHAKE: usize = 16 * 1024;
/// RFC 6455 §1.3: appended to the key before hashing.
const ACCEPT_GUID: &str = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

/// Frame opcodes (RFC 6455 §5.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Opcode {
    Continuation,
    Text,
    Binary,
    Close,
    Ping,
    Pong,
}

impl Opcode {
    fn of(bits: u8) -> Option<Opcode> {
        Some(match bits {
            0x0 => Opcode::Continuation,
            0x1 => Opcode::Text,
            0x2 => Opcode::Binary,
            0x8 => Opcode::Close,
            0x9 => Opcode::Ping,
            0xA => Opcode::Pong,
            _ => return None,
        })
    }

    fn bits(self) -> u8 {
        match self {
            Opcode::Continuation => 0x0,
            Opcode::Text => 0x1,
            Opcode::Binary => 0x2,
            Opcode::Close => 0x8,
            Opcode::Ping => 0x9,
            Opcode::Pong => 0xA,
        }
    }
}

/// One decoded frame.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Frame {
    pub fin: bool,
    pub opcode: Opcode,
    pub payload: Vec<u8>,
}

/// Decodes the frame at the start of `buf`: `Ok(None)` when more bytes are needed, else the
/// frame and how many bytes it took. A server's frames are unmasked, but a masked one is
/// unmasked all the same.
pub(crate) fn decode_frame(buf: &[u8]) -> Result<Option<(Frame, usize)>, BrowserError> {
    let bad = |why: &str| BrowserError::Protocol(format!("WebSocket: {why}"));
    if buf.len() < 2 {
        return Ok(None);
    }
    let fin = buf[0] & 0x80 != 0;
    if buf[0] & 0x70 != 0 {
        return Err(bad("reserved bits set (no extension was negotiated)"));
    }
    let opcode = Opcode::of(buf[0] & 0x0F).ok_or_else(|| bad("unknown opcode"))?;
    let masked = buf[1] & 0x80 != 0;
    let (len, mut at) = match buf[1] & 0x7F {
        126 if buf.len() < 4 => return Ok(None),
        126 => (u64::from(u16::from_be_bytes([buf[2], buf[3]])), 4),
        127 if buf.len() < 10 => return Ok(None),
        127 => {
            let mut b = [0u8; 8];
            b.copy_from_slice(&buf[2..10]);
            (u64::from_be_bytes(b), 10)
        }
        n => (u64::from(n), 2),
    };
    if len > MAX_MESSAGE as u64 {
        return Err(bad("frame larger than 64 MiB"));
    }
    let mask = if masked {
        if buf.len() < at + 4 {
            return Ok(None);
        }
        let m = [buf[at], buf[at + 1], buf[at + 2], buf[at + 3]];
        at += 4;
        Some(m)
    } else {
        None
    };
    let end = at + len as usize;
    if buf.len() < end {
        return Ok(None);
    }
    let mut payload = buf[at..end].to_vec();
    if let Some(m) = mask {
        apply_mask(&mut payload, m);
    }
    Ok(Some((
        Frame {
            fin,
            opcode,
            payload,
        },
        end,
    )))
}

fn apply_mask(data: &mut [u8], mask: [u8; 4]) {
    for (i, b) in data.iter_mut().enumerate() {
        *b ^= mask[i % 4];
    }
}

/// Encodes one final client frame, masked with `mask` (a client must mask, §5.3).
pub(crate) fn encode_frame(opcode: Opcode, payload: &[u8], mask: [u8; 4]) -> Vec<u8> {
    let mut out = Vec::with_capacity(payload.len() + 14);
    out.push(0x80 | opcode.bits());
    match payload.len() {
        n if n < 126 => out.push(0x80 | n as u8),
        n if n <= usize::from(u16::MAX) => {
            out.push(0x80 | 126);
            out.extend_from_slice(&(n as u16).to_be_bytes());
        }
        n => {
            out.push(0x80 | 127);
            out.extend_from_slice(&(n as u64).to_be_bytes());
        }
    }
    out.extend_from_slice(&mask);
    let start = out.len();
    out.extend_from_slice(payload);
    apply_mask(&mut out[start..], mask);
    out
}

/// The `Sec-WebSocket-Accept` a server must answer `key` with.
pub(crate) fn accept_for(key: &str) -> String {
    let digest = ring::digest::digest(
        &ring::digest::SHA1_FOR_LEGACY_USE_ONLY,
        format!("{key}{ACCEPT_GUID}").as_bytes(),
    );
    base64::engine::general_purpose::STANDARD.encode(digest.as_ref())
}

/// Checks the server's handshake answer (head only): 101 and the right accept value.
fn check_handshake(head: &str, key: &str) -> Result<(), BrowserError> {
    let mut lines = head.split("\r\n");
    let status = lines.next().unwrap_or("");
    if status.split_whitespace().nth(1) != Some("101") {
        return Err(BrowserError::Protocol(format!(
            "WebSocket handshake refused: {}",
            status.chars().take(200).collect::<String>()
        )));
    }
    let want = accept_for(key);
    let accepted = lines
        .filter_map(|l| l.split_once(':'))
        .any(|(k, v)| k.trim().eq_ignore_ascii_case("sec-websocket-accept") && v.trim() == want);
    if !accepted {
        return Err(BrowserError::Protocol(
            "WebSocket handshake: wrong or missing Sec-WebSocket-Accept".into(),
        ));
    }
    Ok(())
}

/// An open WebSocket on a TCP stream.
pub(crate) struct WebSocket {
    stream: TcpStream,
    buf: Vec<u8>,
    chunk: Vec<u8>,
    /// A text message whose continuation frames are still coming.
    partial: Vec<u8>,
}

impl WebSocket {
    /// Performs the opening handshake for `path` on an already connected `stream`.
    pub(crate) async fn open(mut stream: TcpStream, path: &str) -> Result<WebSocket, BrowserError> {
        let peer = stream
            .peer_addr()
            .map_err(|e| BrowserError::Launch(format!("WebDriver BiDi socket: {e}")))?;
        let key = base64::engine::general_purpose::STANDARD.encode(random_bytes::<16>()?);
        let request = format!(
            "GET {path} HTTP/1.1\r\nHost: {peer}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
             Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n"
        );
        stream.write_all(request.as_bytes()).await.map_err(io_err)?;
        let mut buf = Vec::new();
        let mut chunk = vec![0u8; READ_CHUNK];
        let head_end = loop {
            if let Some(p) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break p + 4;
            }
            if buf.len() > MAX_HANDSHAKE {
                return Err(BrowserError::Protocol(
                    "WebSocket handshake answer too long".into(),
                ));
            }
            let n = stream.read(&mut chunk).await.map_err(io_err)?;
            if n == 0 {
                return Err(BrowserError::Crashed(
                    "the browser closed the WebDriver BiDi socket during the handshake".into(),
                ));
            }
            buf.extend_from_slice(&chunk[..n]);
        };
        check_handshake(&String::from_utf8_lossy(&buf[..head_end]), &key)?;
        buf.drain(..head_end);
        Ok(WebSocket {
            stream,
            buf,
            chunk,
            partial: Vec::new(),
        })
    }

    /// Sends one text message.
    pub(crate) async fn send_text(&mut self, text: &[u8]) -> Result<(), BrowserError> {
        let frame = encode_frame(Opcode::Text, text, random_bytes::<4>()?);
        self.stream.write_all(&frame).await.map_err(io_err)
    }

    /// The next whole text message; pings are answered on the way, a close ends the socket.
    pub(crate) async fn recv_text(&mut self) -> Result<Vec<u8>, BrowserError> {
        loop {
            let Some((frame, used)) = decode_frame(&self.buf)? else {
                self.fill().await?;
                continue;
            };
            self.buf.drain(..used);
            match frame.opcode {
                Opcode::Ping => {
                    let pong = encode_frame(Opcode::Pong, &frame.payload, random_bytes::<4>()?);
                    self.stream.write_all(&pong).await.map_err(io_err)?;
                }
                Opcode::Pong => {}
                Opcode::Close => {
                    return Err(BrowserError::Crashed(
                        "the browser closed the WebDriver BiDi socket".into(),
                    ))
                }
                Opcode::Text | Opcode::Binary | Opcode::Continuation => {
                    if self.partial.len() + frame.payload.len() > MAX_MESSAGE {
                        return Err(BrowserError::Protocol(
                            "WebDriver BiDi message larger than 64 MiB".into(),
                        ));
                    }
                    self.partial.extend_from_slice(&frame.payload);
                    if frame.fin {
                        return Ok(std::mem::take(&mut self.partial));
                    }
                }
            }
        }
    }

    /// Reads more bytes into the buffer. Cancelling it (a timeout) loses nothing.
    async fn fill(&mut self) -> Result<(), BrowserError> {
        let n = self.stream.read(&mut self.chunk).await.map_err(io_err)?;
        if n == 0 {
            return Err(BrowserError::Crashed(
                "the browser closed the WebDriver BiDi socket".into(),
            ));
        }
        self.buf.extend_from_slice(&self.chunk[..n]);
        Ok(())
    }
}

fn io_err(e: std::io::Error) -> BrowserError {
    BrowserError::Crashed(format!("WebDriver BiDi socket: {e}"))
}

/// `N` random bytes (the handshake key and the frame masks).
fn random_bytes<const N: usize>() -> Result<[u8; N], BrowserError> {
    use ring::rand::SecureRandom;
    let mut out = [0u8; N];
    ring::rand::SystemRandom::new()
        .fill(&mut out)
        .map_err(|_| BrowserError::Launch("no random bytes for the WebSocket".into()))?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accept_value_matches_the_rfc_example() {
        // RFC 6455 §1.3's worked example.
        assert_eq!(
            accept_for("dGhlIHNhbXBsZSBub25jZQ=="),
            "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="
        );
        let head = "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\
                    sec-websocket-accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\n";
        assert!(check_handshake(head, "dGhlIHNhbXBsZSBub25jZQ==").is_ok());
        assert!(check_handshake(head, "b3RoZXIga2V5IGhlcmUhIQ==").is_err());
        assert!(check_handshake("HTTP/1.1 404 Not Found\r\n\r\n", "x").is_err());
    }

    #[test]
    fn frames_decode_at_every_split() {
        // Our own masked encoding round-trips, for each length form.
        for len in [0usize, 5, 125, 126, 300, 70_000] {
            let payload: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
            let wire = encode_frame(Opcode::Text, &payload, [1, 2, 3, 4]);
            let (frame, used) = decode_frame(&wire).unwrap().unwrap();
            assert_eq!(used, wire.len());
            assert_eq!((frame.fin, frame.opcode), (true, Opcode::Text));
            assert_eq!(frame.payload, payload);
            // Fewer bytes than the frame: wait for more, never a wrong frame.
            if len <= 300 {
                for cut in 0..wire.len() {
                    assert!(decode_frame(&wire[..cut]).unwrap().is_none(), "{len}/{cut}");
                }
            }
        }
        // A server's unmasked, unfinished text frame followed by a ping.
        let mut wire = vec![0x01, 3, b'a', b'b', b'c', 0x89, 0];
        let (f, used) = decode_frame(&wire).unwrap().unwrap();
        assert_eq!((f.fin, f.payload.as_slice(), used), (false, &b"abc"[..], 5));
        wire.drain(..used);
        let (f, _) = decode_frame(&wire).unwrap().unwrap();
        assert_eq!(f.opcode, Opcode::Ping);
        // Reserved bits and unknown opcodes are refused.
        assert!(decode_frame(&[0xC1, 0]).is_err());
        assert!(decode_frame(&[0x83, 0]).is_err());
        // A length beyond the cap is refused before any body is waited for.
        let mut huge = vec![0x81, 127];
        huge.extend_from_slice(&(1u64 << 40).to_be_bytes());
        assert!(decode_frame(&huge).is_err());
    }

    #[tokio::test]
    async fn talks_to_a_server_that_fragments_and_pings() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.unwrap();
            let mut buf = vec![0u8; 4096];
            let mut got = Vec::new();
            while !got.windows(4).any(|w| w == b"\r\n\r\n") {
                let n = s.read(&mut buf).await.unwrap();
                got.extend_from_slice(&buf[..n]);
            }
            let text = String::from_utf8_lossy(&got).to_string();
            let key = text
                .lines()
                .find_map(|l| l.strip_prefix("Sec-WebSocket-Key: "))
                .unwrap()
                .trim()
                .to_string();
            let answer = format!(
                "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: {}\r\n\r\n",
                accept_for(&key)
            );
            s.write_all(answer.as_bytes()).await.unwrap();
            // "hello" in two fragments with a ping between them.
            s.write_all(&[
                0x01, 3, b'h', b'e', b'l', 0x89, 1, b'p', 0x80, 2, b'l', b'o',
            ])
            .await
            .unwrap();
            // The client's pong, then its text, both masked.
            let mut frames = Vec::new();
            let mut inbox = Vec::new();
            while frames.len() < 2 {
                let n = s.read(&mut buf).await.unwrap();
                inbox.extend_from_slice(&buf[..n]);
                while let Some((f, used)) = decode_frame(&inbox).unwrap() {
                    inbox.drain(..used);
                    frames.push(f);
                }
            }
            frames
        });
        let stream = TcpStream::connect(addr).await.unwrap();
        let mut ws = WebSocket::open(stream, "/session").await.unwrap();
        assert_eq!(ws.recv_text().await.unwrap(), b"hello");
        ws.send_text(b"{\"id\":1}").await.unwrap();
        let frames = server.await.unwrap();
        assert_eq!(frames[0].opcode, Opcode::Pong);
        assert_eq!(frames[0].payload, b"p");
        assert_eq!(frames[1].payload, b"{\"id\":1}");
    }
}
