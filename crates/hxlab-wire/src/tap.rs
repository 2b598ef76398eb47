//! The tap: what a client session reports to an observer, so the observer sees exactly what
//! that session put on the wire and took off it. Sessions call it only when one is installed
//! (an `Option`), so the load generator's hot path pays one branch.

/// Which way bytes travelled, seen from the client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dir {
    /// Client to server.
    Send,
    /// Server to client.
    Recv,
}

/// Where bytes travelled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Channel {
    /// The connection's byte stream (HTTP/1.1, HTTP/2: after TLS, before framing).
    Conn,
    /// One QUIC stream (HTTP/3), by stream id.
    Quic(u64),
}

/// Facts about a connection's transport, read back from the socket and the TLS or QUIC stack.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TransportFacts {
    /// "TCP" or "QUIC".
    pub transport: &'static str,
    /// Peer address.
    pub peer: String,
    /// Connect time (TCP), microseconds.
    pub connect_us: Option<u64>,
    /// TLS or QUIC handshake time, microseconds.
    pub handshake_us: Option<u64>,
    /// TLS version, e.g. "TLSv1_3" (None: cleartext).
    pub tls_version: Option<String>,
    /// Cipher suite.
    pub cipher: Option<String>,
    /// ALPN protocol the server selected.
    pub alpn: Option<String>,
    /// ALPN protocols offered.
    pub alpn_offered: Vec<String>,
    /// The TLS session was resumed.
    pub resumed: bool,
    /// QUIC: the path's RTT estimate at the end of the handshake, microseconds.
    pub rtt_us: Option<u64>,
}

/// What a QUIC connection's path counted, at its end.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QuicStats {
    /// UDP datagrams sent.
    pub datagrams_sent: u64,
    /// UDP datagrams received.
    pub datagrams_received: u64,
    /// Packets declared lost.
    pub packets_lost: u64,
    /// Smoothed RTT, microseconds.
    pub rtt_us: u64,
    /// Congestion window, bytes.
    pub cwnd: u64,
}

/// An observer of one client's connections.
pub trait Tap: Send {
    /// A connection is up (after its TLS or QUIC handshake).
    fn connected(&mut self, facts: &TransportFacts);
    /// Bytes the session sent (`Dir::Send`, when handed to the socket or stream) or received
    /// (`Dir::Recv`, when read), in order per channel.
    fn bytes(&mut self, dir: Dir, channel: Channel, data: &[u8]);
    /// A QUIC stream the session opened or accepted ended in this direction (FIN or reset).
    fn stream_end(&mut self, _dir: Dir, _channel: Channel) {}
    /// One line worth telling (a fallback, a rejected 0-RTT, why the connection ended).
    fn note(&mut self, _text: &str) {}
    /// A QUIC connection ended with these path statistics (before [`Tap::closed`]).
    fn quic_closed(&mut self, _stats: &QuicStats) {}
    /// The connection is closed.
    fn closed(&mut self) {}
}
