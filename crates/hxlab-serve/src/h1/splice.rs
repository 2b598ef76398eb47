//! Generated bodies on plain TCP without a copy from user space: the kernel sends them from a
//! memory file of filler bytes (`sendfile`), the way nginx sends a static file with `sendfile
//! on` (Debian's default). The pages are attached to the socket's buffers, not copied into
//! them, so a 100 KiB `/bytes/N` costs the server one `sendfile` and no 100 KiB copy. TLS must
//! encrypt every byte in user space and keeps the vectored writes of the static filler.

use std::fs::File;
use std::io::{self, Write};
use std::os::fd::{AsRawFd, FromRawFd};
use std::sync::OnceLock;
use std::task::{ready, Context, Poll};
use tokio::io::Interest;
use tokio::net::TcpStream;

/// Bytes of the filler file: the most one `sendfile` sends.
const FILE_LEN: usize = 1024 * 1024;

/// A connection's socket, when it is plain TCP.
pub(crate) trait PlainTcp {
    /// The TCP socket bodies can be spliced into; None when bytes must pass through user space
    /// (TLS).
    fn plain_tcp(&mut self) -> Option<&mut TcpStream> {
        None
    }
}

impl PlainTcp for TcpStream {
    fn plain_tcp(&mut self) -> Option<&mut TcpStream> {
        Some(self)
    }
}

impl PlainTcp for crate::tls_early_data::TlsConn {}

/// The process's file of filler bytes (every byte b'x', as [`crate::body::FILLER`]); None when
/// it cannot be made (then bodies are written as before).
fn filler_file() -> Option<&'static File> {
    static FILE: OnceLock<Option<File>> = OnceLock::new();
    FILE.get_or_init(|| {
        // SAFETY: a NUL-terminated name and flags; the call has no other preconditions.
        let fd = unsafe { libc::memfd_create(c"hxlab-filler".as_ptr(), libc::MFD_CLOEXEC) };
        if fd < 0 {
            return None;
        }
        // SAFETY: `fd` was just created and is owned by nothing else.
        let mut file = unsafe { File::from_raw_fd(fd) };
        let chunk = &crate::body::FILLER[..];
        for _ in 0..FILE_LEN / chunk.len() {
            file.write_all(chunk).ok()?;
        }
        Some(file)
    })
    .as_ref()
}

/// Whether generated bodies can be spliced at all in this process.
pub(crate) fn available() -> bool {
    filler_file().is_some()
}

/// Writes `head` held back (`MSG_MORE`), so it leaves with the first segment of the body that
/// follows it rather than in a small segment of its own. Returns the bytes written.
pub(crate) fn poll_send_more(
    tcp: &mut TcpStream,
    cx: &mut Context<'_>,
    head: &[u8],
) -> Poll<io::Result<usize>> {
    let fd = tcp.as_raw_fd();
    poll_write_with(tcp, cx, || {
        // SAFETY: `head` is valid for its length; `fd` is the stream's open socket.
        let n = unsafe {
            libc::send(
                fd,
                head.as_ptr().cast(),
                head.len(),
                libc::MSG_MORE | libc::MSG_NOSIGNAL,
            )
        };
        usize::try_from(n).map_err(|_| io::Error::last_os_error())
    })
}

/// Sends up to `len` filler bytes from the filler file. Returns the bytes sent.
pub(crate) fn poll_send_filler(
    tcp: &mut TcpStream,
    cx: &mut Context<'_>,
    len: u64,
) -> Poll<io::Result<usize>> {
    let Some(file) = filler_file() else {
        return Poll::Ready(Err(io::ErrorKind::Unsupported.into()));
    };
    let (fd, file_fd) = (tcp.as_raw_fd(), file.as_raw_fd());
    let count = usize::try_from(len).unwrap_or(FILE_LEN).min(FILE_LEN);
    poll_write_with(tcp, cx, || {
        // The file's own offset is never moved: every caller reads it from 0.
        let mut offset: libc::off_t = 0;
        // SAFETY: both descriptors are open; `offset` is a valid pointer for the call.
        let n = unsafe { libc::sendfile(fd, file_fd, &mut offset, count) };
        usize::try_from(n).map_err(|_| io::Error::last_os_error())
    })
}

/// Runs the non-blocking `write` when the socket is writable; Pending (the task woken when it
/// is writable again) while it would block.
fn poll_write_with(
    tcp: &mut TcpStream,
    cx: &mut Context<'_>,
    mut write: impl FnMut() -> io::Result<usize>,
) -> Poll<io::Result<usize>> {
    loop {
        ready!(tcp.poll_write_ready(cx))?;
        match tcp.try_io(Interest::WRITABLE, &mut write) {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
            Ok(0) => return Poll::Ready(Err(io::ErrorKind::WriteZero.into())),
            other => return Poll::Ready(other),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt;

    /// Every byte a splice sends is the filler's, and the count is what was asked for, also
    /// past the file's length (the caller sends again).
    #[tokio::test]
    async fn filler_is_sent_from_the_file_whole() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        let mut client = TcpStream::connect(addr).await.expect("connect");
        let (mut server, _) = listener.accept().await.expect("accept");
        assert!(available(), "memfd_create must work here");
        let want = FILE_LEN as u64 + 12_345;
        let reader = tokio::spawn(async move {
            let mut got = Vec::new();
            client.read_to_end(&mut got).await.expect("read");
            got
        });
        std::future::poll_fn(|cx| poll_send_more(&mut server, cx, b"head:"))
            .await
            .expect("head");
        let mut left = want;
        while left > 0 {
            let n = std::future::poll_fn(|cx| poll_send_filler(&mut server, cx, left))
                .await
                .expect("sendfile");
            assert!(n as u64 <= left && n <= FILE_LEN);
            left -= n as u64;
        }
        drop(server);
        let got = reader.await.expect("reader");
        assert_eq!(&got[..5], b"head:");
        assert_eq!(got.len() as u64, 5 + want);
        assert!(got[5..].iter().all(|&b| b == b'x'));
    }
}
