//! The receive buffer of the lab's UDP sockets (HTTP/3: the load client's and the origin's).

/// Receive buffer given to every UDP socket that carries HTTP/3, the load client's and the
/// origin's alike ([`set_quic_recv_buffer`]). A full UDP buffer drops datagrams, which then
/// cost a loss recovery and a congestion event on both ends; TCP never drops for a full
/// buffer (its window tells the sender to wait) and autotunes it up to `tcp_rmem`'s maximum
/// (32 MiB here) per connection. One client socket carries all of a worker's connections: 50
/// connections with 10 responses of 100 KiB in flight each are 50 MiB, so 8 MiB overflowed
/// whenever the client fell behind for a moment (0.25 % of the server's packets declared
/// lost at 100 KiB on loopback). Only what is queued is charged, so a large bound costs
/// nothing while the reader keeps up. Nothing of it is seen on the wire.
pub const QUIC_UDP_RECV_BUFFER: usize = 64 << 20;

/// Gives a UDP socket [`QUIC_UDP_RECV_BUFFER`] of receive buffer: `SO_RCVBUF`, which the
/// kernel caps at `net.core.rmem_max` (4 MiB here by default), then `SO_RCVBUFFORCE`, which
/// passes the cap when the process may (root, or `CAP_NET_ADMIN`), as quic-go does. Returns
/// the size the kernel reports afterwards (it counts its own overhead in, so about twice what
/// was asked), for whoever records it.
pub fn set_quic_recv_buffer(fd: std::os::fd::BorrowedFd<'_>) -> usize {
    use std::os::fd::AsRawFd;
    let want = libc::c_int::try_from(QUIC_UDP_RECV_BUFFER).unwrap_or(libc::c_int::MAX);
    let set = |opt: libc::c_int| {
        // SAFETY: a valid fd, and a c_int option value that lives across the call.
        unsafe {
            libc::setsockopt(
                fd.as_raw_fd(),
                libc::SOL_SOCKET,
                opt,
                (&want as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        }
    };
    let get = || {
        let mut got: libc::c_int = 0;
        let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
        // SAFETY: a valid fd; `got` and `len` live across the call and `len` is its size.
        let r = unsafe {
            libc::getsockopt(
                fd.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_RCVBUF,
                (&mut got as *mut libc::c_int).cast(),
                &mut len,
            )
        };
        if r == 0 {
            usize::try_from(got).unwrap_or(0)
        } else {
            0
        }
    };
    set(libc::SO_RCVBUF);
    if get() < QUIC_UDP_RECV_BUFFER {
        set(libc::SO_RCVBUFFORCE);
    }
    get()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// With the privilege to pass `net.core.rmem_max` the socket gets the whole buffer
    /// (the kernel reports twice what it was given); without it, what the cap allows.
    #[test]
    fn a_udp_socket_gets_the_buffer_or_the_cap() {
        let sock = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let got = set_quic_recv_buffer(std::os::fd::AsFd::as_fd(&sock));
        // SAFETY: geteuid has no preconditions.
        let root = unsafe { libc::geteuid() } == 0;
        let cap: usize = std::fs::read_to_string("/proc/sys/net/core/rmem_max")
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        let want = if root {
            QUIC_UDP_RECV_BUFFER
        } else {
            cap.min(QUIC_UDP_RECV_BUFFER)
        };
        assert!(
            got >= want,
            "receive buffer {got} bytes, wanted at least {want} (root: {root}, rmem_max {cap})"
        );
    }
}
