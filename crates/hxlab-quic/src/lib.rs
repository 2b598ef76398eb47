//! hxlab-quic: the QUIC I/O that hxlab's two QUIC drivers share.
//!
//! What it is for: the half of a QUIC driver on quinn-proto that does not depend on which
//! side it is, written once for the load client (hxlab-load's `h3::driver`) and the origin
//! (hxlab-serve's `h3::driver`): the UDP socket with quinn-udp's GSO, GRO and ECN
//! ([`QuicSocket`]), the transmit pass over a driver's connections with their timers and
//! endpoint events ([`Driven`], [`DriverConn`]), the receive buffer every HTTP/3 socket of
//! the lab gets ([`set_quic_recv_buffer`]), the state a driver's task shares with its
//! connection handles ([`DriverCore`]), and quinn's side of congestion control ([`cc`]:
//! setting a controller on a transport, reading back what a connection runs), and qlog
//! files of connections ([`qlog`]).
//! It is on the HTTP/3 hot path of both ends: changes here show in bench/client-h3.sh and
//! bench/origins.sh.
//!
//! What it is not: no HTTP/3 (frames, QPACK and streams are the drivers'), no TLS setup, no
//! decisions about which connection to serve; the congestion-control vocabulary itself is
//! hxlab-core's.

pub mod cc;
mod driver;
pub mod qlog;
pub mod qlog_h3;
mod recv_buffer;
mod socket;

pub use driver::DriverCore;
pub use recv_buffer::{set_quic_recv_buffer, QUIC_UDP_RECV_BUFFER};
pub use socket::{gso_segments, Datagrams, Driven, DriverConn, QuicSocket, MAX_GSO_BYTES};
