//! The two TUN devices' file descriptors and the buffers packets are read into.
//!
//! Both devices are opened with `IFF_VNET_HDR` (every read and write carries a 10-byte
//! `virtio_net_hdr`, see [`crate::gso`]) and told with `TUNSETOFFLOAD` that they may take
//! partial checksums (`TUN_F_CSUM`) and TCP and UDP segmentation offload (`TUN_F_TSO4/6`, and
//! `TUN_F_USO4/6` where the kernel knows them). The kernel then hands a TCP sender's data to
//! the device as GSO super-packets of up to 64 KiB instead of 1500-byte packets, which is
//! what a NIC with TSO sees, and the relay does one read and one write per ~44 packets. The
//! devices' MTU stays 1500: every segment of a super-packet is a wire packet of at most
//! 1500 bytes; only the unit the relay handles is larger.
//!
//! A read needs room for the largest super-packet ([`LARGE_BUF`]); ordinary packets are
//! copied out into small buffers so large ones are only held by super-packets. Both kinds
//! come from a [`Pool`] bounded in bytes, so the steady state allocates nothing.

use crate::gso::VNET_HDR_LEN;
use crate::model::Packet;
use crate::LinkError;
use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// Room for an MTU-sized packet and its vnet header.
pub const SMALL_BUF: usize = 2048;
/// Room for the largest IP packet (a 64 KiB super-packet) and its vnet header.
pub const LARGE_BUF: usize = 65_535 + VNET_HDR_LEN;
/// Bytes of small buffers a pool keeps for reuse (8192 of them).
const POOL_SMALL_BYTES: usize = 16 << 20;
/// Bytes of large buffers a pool keeps for reuse (512 of them).
const POOL_LARGE_BYTES: usize = 32 << 20;

/// A packet as read from a TUN: the vnet header, then the IP packet (`data[..len]`).
pub struct Buf {
    /// [`SMALL_BUF`] or [`LARGE_BUF`] bytes.
    pub data: Box<[u8]>,
    /// Bytes used, vnet header included.
    pub len: usize,
    /// Wire packets it stands for (more than one for a GSO super-packet).
    pub segs: u32,
    /// Their total size on the wire (IP packets, headers of every segment included).
    pub wire: usize,
}

impl Packet for Buf {
    fn wire_len(&self) -> usize {
        self.wire
    }
    fn segments(&self) -> u32 {
        self.segs
    }
}

/// Free buffers of both sizes, each list capped in bytes.
#[derive(Default)]
pub struct Pool {
    small: Vec<Buf>,
    large: Vec<Buf>,
}

impl Pool {
    fn get(list: &mut Vec<Buf>, size: usize) -> Buf {
        list.pop().unwrap_or_else(|| Buf {
            data: vec![0u8; size].into_boxed_slice(),
            len: 0,
            segs: 1,
            wire: 0,
        })
    }

    /// A buffer for one MTU-sized packet.
    pub fn small(&mut self) -> Buf {
        Pool::get(&mut self.small, SMALL_BUF)
    }

    /// A buffer for a read (any packet, super-packets included).
    pub fn large(&mut self) -> Buf {
        Pool::get(&mut self.large, LARGE_BUF)
    }

    /// Returns a buffer for reuse, or frees it when the pool already holds its share.
    pub fn put(&mut self, buf: Buf) {
        let (list, cap) = if buf.data.len() >= LARGE_BUF {
            (&mut self.large, POOL_LARGE_BYTES / LARGE_BUF)
        } else {
            (&mut self.small, POOL_SMALL_BYTES / SMALL_BUF)
        };
        if list.len() < cap {
            list.push(buf);
        }
    }
}

/// Offloads asked for, best first: the kernel refuses flags it does not know (USO before
/// 6.2) with EINVAL, and then the next set is tried.
const OFFLOADS: [libc::c_uint; 3] = [
    libc::TUN_F_CSUM | libc::TUN_F_TSO4 | libc::TUN_F_TSO6 | libc::TUN_F_USO4 | libc::TUN_F_USO6,
    libc::TUN_F_CSUM | libc::TUN_F_TSO4 | libc::TUN_F_TSO6,
    libc::TUN_F_CSUM,
];

/// Sets the vnet header size and the best offloads the kernel accepts; returns them (0 when
/// none: the device then gets only ordinary packets, still with a vnet header).
fn set_offloads(fd: &OwnedFd, name: &str) -> Result<libc::c_uint, LinkError> {
    let size: libc::c_int = VNET_HDR_LEN as libc::c_int;
    // SAFETY: TUNSETVNETHDRSZ reads an int through the pointer, which lives across the call.
    if unsafe { libc::ioctl(fd.as_raw_fd(), libc::TUNSETVNETHDRSZ, &size) } < 0 {
        let e = std::io::Error::last_os_error();
        return Err(LinkError::Setup(format!("TUNSETVNETHDRSZ {name}: {e}")));
    }
    for flags in OFFLOADS {
        // SAFETY: TUNSETOFFLOAD takes the flags by value.
        if unsafe { libc::ioctl(fd.as_raw_fd(), libc::TUNSETOFFLOAD, flags as libc::c_ulong) } == 0
        {
            return Ok(flags);
        }
    }
    Ok(0)
}
/// `struct ifreq` with the flags member, as TUNSETIFF reads it.
#[repr(C)]
struct IfReqFlags {
    name: [u8; libc::IFNAMSIZ],
    flags: libc::c_short,
    _pad: [u8; 22],
}

/// Opens /dev/net/tun and creates a non-persistent TUN device `name` in the calling thread's
/// network namespace, with a vnet header on every read and write and the best offloads the
/// kernel accepts (returned with the fd). The device disappears when the fd is closed.
pub fn open_tun(name: &str) -> Result<(OwnedFd, libc::c_uint), LinkError> {
    let path = CString::new("/dev/net/tun").map_err(|_| LinkError::Setup("tun path".into()))?;
    // SAFETY: path is a valid C string; the returned fd is checked.
    let fd = unsafe {
        libc::open(
            path.as_ptr(),
            libc::O_RDWR | libc::O_CLOEXEC | libc::O_NONBLOCK,
        )
    };
    if fd < 0 {
        return Err(tun_open_error(std::io::Error::last_os_error()));
    }
    // SAFETY: fd was just opened and is owned by nothing else.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let mut req = IfReqFlags {
        name: [0; libc::IFNAMSIZ],
        flags: (libc::IFF_TUN | libc::IFF_NO_PI | libc::IFF_VNET_HDR) as libc::c_short,
        _pad: [0; 22],
    };
    let bytes = name.as_bytes();
    req.name[..bytes.len().min(libc::IFNAMSIZ - 1)]
        .copy_from_slice(&bytes[..bytes.len().min(libc::IFNAMSIZ - 1)]);
    // SAFETY: req is a properly sized ifreq for TUNSETIFF and lives across the call.
    let r = unsafe { libc::ioctl(fd.as_raw_fd(), libc::TUNSETIFF, &mut req as *mut IfReqFlags) };
    if r < 0 {
        let e = std::io::Error::last_os_error();
        if e.raw_os_error() == Some(libc::EPERM) {
            return Err(LinkError::Permission(format!(
                "creating TUN device {name} needs CAP_NET_ADMIN in this network namespace ({e}); run hxlab link as root, e.g. `sudo hxlab link ...`"
            )));
        }
        return Err(LinkError::Setup(format!("TUNSETIFF {name}: {e}")));
    }
    let offloads = set_offloads(&fd, name)?;
    Ok((fd, offloads))
}

pub fn tun_open_error(e: std::io::Error) -> LinkError {
    match e.raw_os_error() {
        Some(libc::EACCES) | Some(libc::EPERM) => {
            // SAFETY: geteuid has no preconditions.
            let uid = unsafe { libc::geteuid() };
            LinkError::Permission(format!(
                "/dev/net/tun does not allow uid {uid} to open it ({e}); run hxlab link as root (`sudo hxlab link ...`), or allow unprivileged TUN with `sudo chmod 0666 /dev/net/tun`"
            ))
        }
        Some(libc::ENOENT) | Some(libc::ENODEV) => LinkError::Permission(format!(
            "/dev/net/tun is missing ({e}); load the tun module (`sudo modprobe tun`) or create the node (`sudo mkdir -p /dev/net && sudo mknod /dev/net/tun c 10 200`)"
        )),
        _ => LinkError::Setup(format!("open /dev/net/tun: {e}")),
    }
}
