//! What the origin answers, before any protocol carries it: a [`Reply`] (status, fields,
//! body, think time, pushes, early hints) and the one field list every protocol sends of it.
//! Below the router (`routes`) and the answers it delegates (`replay`, `static_file`), which
//! all build replies, and below the protocols, which carry them.

use crate::body::BodySpec;
use bytes::Bytes;
use http::header::HeaderValue;
use http::StatusCode;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

/// The answer to one request.
pub(crate) struct Reply {
    pub status: StatusCode,
    pub content_type: &'static str,
    pub body: BodySpec,
    /// Server think time before the response head goes out.
    pub delay: Duration,
    /// `Link` value of a 103 Early Hints response sent first.
    pub early_hints: Option<HeaderValue>,
    /// Paths to push with this response (HTTP/2 only, when the client allows push).
    pub push: Vec<String>,
    /// False for `/stats`, which does not count itself.
    pub counted: bool,
    /// More headers, sent after the server's own (a replayed response's recorded ones).
    pub headers: Vec<(http::header::HeaderName, HeaderValue)>,
    /// `Cache-Control: max-age=N` (seconds) for `/bytes/N?max_age=S`; `None`: no such header.
    pub max_age: Option<u64>,
    /// A `/static/` file still to look up, off the runtime: until it is, this reply is a
    /// placeholder, and the protocol answers with what the lookup gives
    /// ([`crate::static_file`]).
    pub lookup: Option<Lookup>,
}

impl Reply {
    pub(crate) fn new(status: StatusCode, content_type: &'static str, body: BodySpec) -> Reply {
        Reply {
            status,
            content_type,
            body,
            delay: Duration::ZERO,
            early_hints: None,
            push: Vec::new(),
            counted: true,
            headers: Vec::new(),
            max_age: None,
            lookup: None,
        }
    }

    /// Whether the reply can be answered now: no think time, no file still to look up.
    pub(crate) fn ready_now(&self) -> bool {
        self.delay.is_zero() && self.lookup.is_none()
    }

    /// The reply with its file looked up (off the runtime), if it had one to look up.
    pub(crate) async fn looked_up(mut self) -> Reply {
        match self.lookup.take() {
            Some(file) => file.start().await,
            None => self,
        }
    }

    /// A replayed response: its content type, if any, is among `headers`.
    pub(crate) fn recorded(status: StatusCode, body: BodySpec) -> Reply {
        Reply::new(status, "", body)
    }

    pub(crate) fn text(status: StatusCode, text: String) -> Reply {
        Reply::new(
            status,
            "text/plain; charset=utf-8",
            BodySpec::Bytes(Bytes::from(text)),
        )
    }

    pub(crate) fn bad(reason: impl std::fmt::Display) -> Reply {
        Reply::text(StatusCode::BAD_REQUEST, format!("bad request: {reason}\n"))
    }

    /// Calls `field` with every header field of the response head (lower-case names;
    /// `alt_svc`, which TCP responses carry when HTTP/3 is on, last of the server's own),
    /// without building a header map: the one field list of every protocol.
    /// The HTTP/2 server encodes them straight into HPACK, the HTTP/3 server into QPACK, the
    /// HTTP/1.1 server writes them straight into its output.
    pub fn each_field(&self, alt_svc: Option<&HeaderValue>, mut field: impl FnMut(&[u8], &[u8])) {
        field(b"date", &http_date());
        if !self.content_type.is_empty() {
            field(b"content-type", self.content_type.as_bytes());
        }
        if self.status != StatusCode::NO_CONTENT && self.status != StatusCode::NOT_MODIFIED {
            let mut digits = [0u8; 20];
            field(b"content-length", decimal(self.body.len(), &mut digits));
        }
        if let Some(s) = self.max_age {
            field(b"cache-control", format!("max-age={s}").as_bytes());
        }
        if let Some(a) = alt_svc {
            field(b"alt-svc", a.as_bytes());
        }
        for (name, value) in &self.headers {
            field(name.as_str().as_bytes(), value.as_bytes());
        }
    }
}

/// `n` in decimal, written into the end of `buf`.
pub(crate) fn decimal(mut n: u64, buf: &mut [u8; 20]) -> &[u8] {
    let mut at = buf.len();
    loop {
        at -= 1;
        buf[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            return &buf[at..];
        }
    }
}

/// The `Date` header value (IMF-fixdate, always 29 bytes), formatted at most once per second
/// per thread, so every protocol sends the same header set. Handed out by value: no shared
/// buffer to count references on per response.
pub(crate) fn http_date() -> [u8; 29] {
    use std::cell::Cell;
    use std::time::UNIX_EPOCH;
    thread_local! {
        static CACHE: Cell<(u64, [u8; 29])> = const { Cell::new((u64::MAX, [0; 29])) };
    }
    let secs = wall_seconds();
    CACHE.with(|cache| {
        let (at, value) = cache.get();
        if at == secs {
            return value;
        }
        let mut value = *b"Thu, 01 Jan 1970 00:00:00 GMT";
        let text = httpdate::fmt_http_date(UNIX_EPOCH + Duration::from_secs(secs));
        if text.len() == value.len() {
            value.copy_from_slice(text.as_bytes());
        }
        cache.set((secs, value));
        value
    })
}

/// Seconds since the Unix epoch from the kernel's coarse wall clock: the time of the last
/// clock tick (a few ms at most behind), read without the TSC, which is all a one-second
/// Date needs and costs a fraction of a precise read on every response.
fn wall_seconds() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime only writes the timespec passed, which lives on this frame.
    if unsafe { libc::clock_gettime(libc::CLOCK_REALTIME_COARSE, &mut ts) } == 0 {
        return u64::try_from(ts.tv_sec).unwrap_or(0);
    }
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// A lookup that may block (a `/static/` file: resolving, opening and reading metadata wait
/// on the file system), run off the runtime ([`Lookup::start`]); its reply replaces the
/// placeholder it came in.
pub(crate) struct Lookup(Box<dyn FnOnce() -> Reply + Send>);

impl Lookup {
    /// A lookup that answers with what `f` gives.
    pub(crate) fn new(f: impl FnOnce() -> Reply + Send + 'static) -> Lookup {
        Lookup(Box::new(f))
    }

    /// Starts the lookup on the blocking pool.
    pub(crate) fn start(self) -> Opening {
        Opening(tokio::task::spawn_blocking(self.0))
    }

    /// Runs the lookup on this thread (tests, which may block).
    #[cfg(test)]
    pub(crate) fn run(self) -> Reply {
        (self.0)()
    }
}

/// A [`Lookup`] under way on the blocking pool.
pub(crate) struct Opening(tokio::task::JoinHandle<Reply>);

impl Opening {
    /// The reply once the lookup is done (a 500 if it panicked).
    pub(crate) fn poll(&mut self, cx: &mut Context<'_>) -> Poll<Reply> {
        Pin::new(&mut self.0).poll(cx).map(|done| {
            done.unwrap_or_else(|_| {
                Reply::text(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "static file lookup failed\n".into(),
                )
            })
        })
    }
}

impl Future for Opening {
    type Output = Reply;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Reply> {
        Opening::poll(&mut self, cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn date_is_an_imf_fixdate_of_now() {
        let text = http_date();
        let text = std::str::from_utf8(&text).unwrap();
        let at = httpdate::parse_http_date(text).unwrap();
        let now = std::time::SystemTime::now();
        let behind = now.duration_since(at).unwrap_or_default();
        let ahead = at.duration_since(now).unwrap_or_default();
        assert!(
            behind <= Duration::from_secs(2) && ahead.is_zero(),
            "{text}"
        );
        assert_eq!(&text[26..], "GMT");
    }
}
