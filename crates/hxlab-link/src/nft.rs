//! The link's own nftables table, spoken to over netlink (no `nft` program, no libnftnl):
//! what lets the namespace reach every host this machine reaches, and servers bound to
//! 127.0.0.1 on this side, without changing anything global.
//!
//! The table is created with `NFT_TABLE_F_OWNER`: the kernel removes it, with its chains and
//! rules, when the netlink socket that created it closes — when the [`Table`] is dropped, and
//! also when hxlab dies of SIGKILL. It holds three chains (IPv4):
//!
//! ```text
//! postrouting, nat    ip saddr CLIENT  oif != OUTER        masquerade
//! prerouting, filter  ip daddr CLIENT  iif != OUTER        dup to CLIENT device OUTER  drop
//! prerouting, nat     iif OUTER ip daddr HOST  tcp/udp dport P   dnat to 127.0.0.1   (exposed)
//! ```
//!
//! Why the `dup`: the link forwards the CLIENT's packets with forwarding turned on for its
//! OUTER device only (a per-device setting that vanishes with the device). Forwarding is
//! decided by the device a packet comes in on, so a reply coming back on the uplink would
//! need forwarding on the uplink — a change to the whole machine. Instead the reply, once
//! conntrack has undone the masquerade, is sent out of OUTER as a locally made copy
//! (`nf_dup_ipv4`, the `TEE` target's mechanism) and the original dropped: no device but
//! OUTER ever forwards. The packets themselves are only translated (addresses and ports), so
//! the server's congestion controller is still the one on the emulated path.

use crate::sys::os_err;
use crate::LinkError;
use std::net::Ipv4Addr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

const NETLINK_NETFILTER: libc::c_int = 12;
const NFNL_SUBSYS_NFTABLES: u16 = 10;
const NFNL_MSG_BATCH_BEGIN: u16 = 0x10;
const NFNL_MSG_BATCH_END: u16 = 0x11;
const NFT_MSG_NEWTABLE: u16 = 0;
const NFT_MSG_NEWCHAIN: u16 = 3;
const NFT_MSG_NEWRULE: u16 = 6;
const NFPROTO_IPV4: u8 = 2;

const NLM_F_REQUEST: u16 = 0x1;
const NLM_F_ACK: u16 = 0x4;
const NLM_F_EXCL: u16 = 0x200;
const NLM_F_CREATE: u16 = 0x400;
const NLM_F_APPEND: u16 = 0x800;
const NLMSG_ERROR: u16 = 2;
const NLA_F_NESTED: u16 = 0x8000;

const NFTA_TABLE_NAME: u16 = 1;
const NFTA_TABLE_FLAGS: u16 = 2;
const NFT_TABLE_F_OWNER: u32 = 2;
const NFTA_CHAIN_TABLE: u16 = 1;
const NFTA_CHAIN_NAME: u16 = 3;
const NFTA_CHAIN_HOOK: u16 = 4;
const NFTA_CHAIN_TYPE: u16 = 7;
const NFTA_HOOK_HOOKNUM: u16 = 1;
const NFTA_HOOK_PRIORITY: u16 = 2;
const NFTA_RULE_TABLE: u16 = 1;
const NFTA_RULE_CHAIN: u16 = 2;
const NFTA_RULE_EXPRESSIONS: u16 = 4;
const NFTA_LIST_ELEM: u16 = 1;
const NFTA_EXPR_NAME: u16 = 1;
const NFTA_EXPR_DATA: u16 = 2;
const NFTA_DATA_VALUE: u16 = 1;
const NFTA_DATA_VERDICT: u16 = 2;
const NFTA_VERDICT_CODE: u16 = 1;

const NF_INET_PRE_ROUTING: u32 = 0;
const NF_INET_POST_ROUTING: u32 = 4;
const NF_DROP: u32 = 0;
/// The verdict register, and the first two general ones (16 bytes each).
const REG_VERDICT: u32 = 0;
const REG_1: u32 = 1;
const REG_2: u32 = 2;
const NFT_META_IIF: u32 = 4;
const NFT_META_OIF: u32 = 5;
const NFT_META_L4PROTO: u32 = 16;
const NFT_PAYLOAD_NETWORK_HEADER: u32 = 1;
const NFT_PAYLOAD_TRANSPORT_HEADER: u32 = 2;
const NFT_CMP_EQ: u32 = 0;
const NFT_CMP_NEQ: u32 = 1;
const NFT_NAT_DNAT: u32 = 1;

/// A netlink message under construction: attributes are appended, nests patched on close.
struct Msg {
    buf: Vec<u8>,
}

impl Msg {
    /// A message with its netlink header (length patched in [`Msg::finish`]) and the nfnetlink
    /// header: `family`, version 0, and `res_id` (big-endian).
    fn new(kind: u16, flags: u16, seq: u32, family: u8, res_id: u16) -> Msg {
        let mut buf = Vec::with_capacity(256);
        buf.extend_from_slice(&0u32.to_ne_bytes());
        buf.extend_from_slice(&kind.to_ne_bytes());
        buf.extend_from_slice(&flags.to_ne_bytes());
        buf.extend_from_slice(&seq.to_ne_bytes());
        buf.extend_from_slice(&0u32.to_ne_bytes());
        buf.push(family);
        buf.push(0);
        buf.extend_from_slice(&res_id.to_be_bytes());
        Msg { buf }
    }

    fn attr(&mut self, kind: u16, data: &[u8]) -> &mut Msg {
        let len = 4 + data.len();
        self.buf.extend_from_slice(&(len as u16).to_ne_bytes());
        self.buf.extend_from_slice(&kind.to_ne_bytes());
        self.buf.extend_from_slice(data);
        self.pad();
        self
    }

    fn pad(&mut self) {
        while !self.buf.len().is_multiple_of(4) {
            self.buf.push(0);
        }
    }

    fn str(&mut self, kind: u16, s: &str) -> &mut Msg {
        let mut v = s.as_bytes().to_vec();
        v.push(0);
        self.attr(kind, &v)
    }

    fn be32(&mut self, kind: u16, v: u32) -> &mut Msg {
        self.attr(kind, &v.to_be_bytes())
    }

    /// Opens a nested attribute; close it with [`Msg::end`] and the returned offset.
    fn nest(&mut self, kind: u16) -> usize {
        let at = self.buf.len();
        self.buf.extend_from_slice(&0u16.to_ne_bytes());
        self.buf
            .extend_from_slice(&(kind | NLA_F_NESTED).to_ne_bytes());
        at
    }

    fn end(&mut self, at: usize) {
        let len = (self.buf.len() - at) as u16;
        self.buf[at..at + 2].copy_from_slice(&len.to_ne_bytes());
    }

    fn finish(mut self) -> Vec<u8> {
        let len = self.buf.len() as u32;
        self.buf[..4].copy_from_slice(&len.to_ne_bytes());
        self.buf
    }
}

/// One expression of a rule: its name and its attributes (written by `data`).
fn expr(m: &mut Msg, name: &str, data: impl FnOnce(&mut Msg)) {
    let elem = m.nest(NFTA_LIST_ELEM);
    m.str(NFTA_EXPR_NAME, name);
    let d = m.nest(NFTA_EXPR_DATA);
    data(m);
    m.end(d);
    m.end(elem);
}

/// What a rule matches and does, as the kernel's expressions.
#[derive(Clone, Debug, PartialEq)]
enum Expr {
    /// Load a meta key (`iif`, `oif`, `l4proto`) into REG_1.
    Meta(u32),
    /// Load `len` bytes at `offset` of the network (1) or transport (2) header into REG_1.
    Payload { base: u32, offset: u32, len: u32 },
    /// Compare REG_1 with `data` (EQ or NEQ); the rule stops here when it does not hold.
    Cmp { op: u32, data: Vec<u8> },
    /// Put `data` in a register.
    Immediate { reg: u32, data: Vec<u8> },
    /// Send a copy to the address in REG_1 out of the device whose index is in REG_2.
    Dup,
    /// Masquerade (source NAT to the outgoing device's address).
    Masq,
    /// Destination NAT to the IPv4 address in REG_1.
    Dnat,
    /// Drop the packet.
    Drop,
}

impl Expr {
    fn write(&self, m: &mut Msg) {
        match self {
            Expr::Meta(key) => expr(m, "meta", |m| {
                m.be32(1, REG_1).be32(2, *key);
            }),
            Expr::Payload { base, offset, len } => expr(m, "payload", |m| {
                m.be32(1, REG_1)
                    .be32(2, *base)
                    .be32(3, *offset)
                    .be32(4, *len);
            }),
            Expr::Cmp { op, data } => expr(m, "cmp", |m| {
                m.be32(1, REG_1).be32(2, *op);
                let d = m.nest(3);
                m.attr(NFTA_DATA_VALUE, data);
                m.end(d);
            }),
            Expr::Immediate { reg, data } => expr(m, "immediate", |m| {
                m.be32(1, *reg);
                let d = m.nest(2);
                m.attr(NFTA_DATA_VALUE, data);
                m.end(d);
            }),
            Expr::Dup => expr(m, "dup", |m| {
                m.be32(1, REG_1).be32(2, REG_2);
            }),
            Expr::Masq => expr(m, "masq", |_| {}),
            Expr::Dnat => expr(m, "nat", |m| {
                m.be32(1, NFT_NAT_DNAT)
                    .be32(2, NFPROTO_IPV4 as u32)
                    .be32(3, REG_1);
            }),
            Expr::Drop => expr(m, "immediate", |m| {
                m.be32(1, REG_VERDICT);
                let d = m.nest(2);
                let v = m.nest(NFTA_DATA_VERDICT);
                m.be32(NFTA_VERDICT_CODE, NF_DROP);
                m.end(v);
                m.end(d);
            }),
        }
    }
}

fn addr_is(offset: u32, addr: Ipv4Addr) -> [Expr; 2] {
    [
        Expr::Payload {
            base: NFT_PAYLOAD_NETWORK_HEADER,
            offset,
            len: 4,
        },
        Expr::Cmp {
            op: NFT_CMP_EQ,
            data: addr.octets().to_vec(),
        },
    ]
}

fn dev_cmp(key: u32, op: u32, ifindex: u32) -> [Expr; 2] {
    [
        Expr::Meta(key),
        Expr::Cmp {
            op,
            data: ifindex.to_ne_bytes().to_vec(),
        },
    ]
}

/// The masquerade rule: the CLIENT's packets leaving by any device but OUTER.
fn masquerade(client: Ipv4Addr, outer: u32) -> Vec<Expr> {
    let mut v = addr_is(12, client).to_vec();
    v.extend(dev_cmp(NFT_META_OIF, NFT_CMP_NEQ, outer));
    v.push(Expr::Masq);
    v
}

/// The reply rule: packets for the CLIENT that came in by any device but OUTER are sent out
/// of OUTER as a copy, and the original dropped (see the module's text).
fn replies(client: Ipv4Addr, outer: u32) -> Vec<Expr> {
    let mut v = addr_is(16, client).to_vec();
    v.extend(dev_cmp(NFT_META_IIF, NFT_CMP_NEQ, outer));
    v.push(Expr::Immediate {
        reg: REG_1,
        data: client.octets().to_vec(),
    });
    v.push(Expr::Immediate {
        reg: REG_2,
        data: outer.to_ne_bytes().to_vec(),
    });
    v.push(Expr::Dup);
    v.push(Expr::Drop);
    v
}

/// An exposure rule: `proto` (6 TCP, 17 UDP) to HOST:`port` coming in by OUTER goes to
/// `to`:`port` (a loopback address, with `route_localnet` on OUTER).
fn expose(host: Ipv4Addr, outer: u32, proto: u8, port: u16, to: Ipv4Addr) -> Vec<Expr> {
    let mut v = dev_cmp(NFT_META_IIF, NFT_CMP_EQ, outer).to_vec();
    v.extend(addr_is(16, host));
    v.push(Expr::Meta(NFT_META_L4PROTO));
    v.push(Expr::Cmp {
        op: NFT_CMP_EQ,
        data: vec![proto],
    });
    v.push(Expr::Payload {
        base: NFT_PAYLOAD_TRANSPORT_HEADER,
        offset: 2,
        len: 2,
    });
    v.push(Expr::Cmp {
        op: NFT_CMP_EQ,
        data: port.to_be_bytes().to_vec(),
    });
    v.push(Expr::Immediate {
        reg: REG_1,
        data: to.octets().to_vec(),
    });
    v.push(Expr::Dnat);
    v
}

/// Chains of the table: name, hook, priority, type.
const CHAINS: [(&str, u32, i32, &str); 3] = [
    ("masquerade", NF_INET_POST_ROUTING, 100, "nat"),
    ("replies", NF_INET_PRE_ROUTING, 0, "filter"),
    ("exposed", NF_INET_PRE_ROUTING, -100, "nat"),
];

/// The link's table, alive as long as this value (its netlink socket) is.
pub struct Table {
    sock: OwnedFd,
    name: String,
    seq: u32,
    host: Ipv4Addr,
    outer: u32,
}

impl Table {
    /// Creates table `name` (owned by this socket) with the masquerade and reply rules for a
    /// link whose OUTER device has index `outer`.
    pub fn create(
        name: &str,
        host: Ipv4Addr,
        client: Ipv4Addr,
        outer: u32,
    ) -> Result<Table, LinkError> {
        // SAFETY: plain socket call, fd checked.
        let fd = unsafe {
            libc::socket(
                libc::AF_NETLINK,
                libc::SOCK_RAW | libc::SOCK_CLOEXEC,
                NETLINK_NETFILTER,
            )
        };
        if fd < 0 {
            return Err(os_err("socket(AF_NETLINK, NETLINK_NETFILTER)"));
        }
        // SAFETY: fresh fd, owned here.
        let sock = unsafe { OwnedFd::from_raw_fd(fd) };
        // SAFETY: sockaddr_nl is plain data; zeroed is valid (pid 0: the kernel picks one).
        let mut sa: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
        sa.nl_family = libc::AF_NETLINK as libc::sa_family_t;
        // SAFETY: sa is initialised and its size given.
        let r = unsafe {
            libc::bind(
                sock.as_raw_fd(),
                &sa as *const libc::sockaddr_nl as *const libc::sockaddr,
                std::mem::size_of::<libc::sockaddr_nl>() as libc::socklen_t,
            )
        };
        if r < 0 {
            return Err(os_err("bind(netlink)"));
        }
        let mut t = Table {
            sock,
            name: name.to_string(),
            seq: 1,
            host,
            outer,
        };
        let mut msgs = Vec::new();
        let mut m = t.msg(NFT_MSG_NEWTABLE, NLM_F_CREATE | NLM_F_EXCL);
        m.str(NFTA_TABLE_NAME, name)
            .be32(NFTA_TABLE_FLAGS, NFT_TABLE_F_OWNER);
        msgs.push(m.finish());
        for (chain, hook, prio, kind) in CHAINS {
            let mut m = t.msg(NFT_MSG_NEWCHAIN, NLM_F_CREATE | NLM_F_EXCL);
            m.str(NFTA_CHAIN_TABLE, name).str(NFTA_CHAIN_NAME, chain);
            let h = m.nest(NFTA_CHAIN_HOOK);
            m.be32(NFTA_HOOK_HOOKNUM, hook)
                .be32(NFTA_HOOK_PRIORITY, prio as u32);
            m.end(h);
            m.str(NFTA_CHAIN_TYPE, kind);
            msgs.push(m.finish());
        }
        msgs.push(t.rule("masquerade", &masquerade(client, outer)));
        msgs.push(t.rule("replies", &replies(client, outer)));
        t.commit(msgs)?;
        Ok(t)
    }

    /// Makes `to`:`port` (TCP, and UDP when `udp`) reachable from inside at HOST:`port`.
    pub fn expose(&mut self, port: u16, to: Ipv4Addr, udp: bool) -> Result<(), LinkError> {
        let protos: &[u8] = if udp { &[6, 17] } else { &[6] };
        let msgs = protos
            .iter()
            .map(|&proto| self.rule("exposed", &expose(self.host, self.outer, proto, port, to)))
            .collect();
        self.commit(msgs)
    }

    fn msg(&mut self, kind: u16, flags: u16) -> Msg {
        self.seq += 1;
        Msg::new(
            (NFNL_SUBSYS_NFTABLES << 8) | kind,
            NLM_F_REQUEST | NLM_F_ACK | flags,
            self.seq,
            NFPROTO_IPV4,
            0,
        )
    }

    fn rule(&mut self, chain: &str, exprs: &[Expr]) -> Vec<u8> {
        let name = self.name.clone();
        let mut m = self.msg(NFT_MSG_NEWRULE, NLM_F_CREATE | NLM_F_APPEND);
        m.str(NFTA_RULE_TABLE, &name).str(NFTA_RULE_CHAIN, chain);
        let list = m.nest(NFTA_RULE_EXPRESSIONS);
        for e in exprs {
            e.write(&mut m);
        }
        m.end(list);
        m.finish()
    }

    /// Sends `msgs` as one transaction (all or nothing) and waits for every acknowledgement.
    fn commit(&mut self, msgs: Vec<Vec<u8>>) -> Result<(), LinkError> {
        let first = self.seq + 1;
        let begin = Msg::new(
            NFNL_MSG_BATCH_BEGIN,
            NLM_F_REQUEST,
            first,
            0,
            NFNL_SUBSYS_NFTABLES,
        );
        let mut out = begin.finish();
        let n = msgs.len();
        for m in msgs {
            out.extend_from_slice(&m);
        }
        self.seq += 1;
        let end = Msg::new(
            NFNL_MSG_BATCH_END,
            NLM_F_REQUEST,
            self.seq,
            0,
            NFNL_SUBSYS_NFTABLES,
        );
        out.extend_from_slice(&end.finish());
        // SAFETY: sends the buffer, which lives across the call; the kernel is pid 0.
        let sent = unsafe {
            let mut sa: libc::sockaddr_nl = std::mem::zeroed();
            sa.nl_family = libc::AF_NETLINK as libc::sa_family_t;
            libc::sendto(
                self.sock.as_raw_fd(),
                out.as_ptr() as *const libc::c_void,
                out.len(),
                0,
                &sa as *const libc::sockaddr_nl as *const libc::sockaddr,
                std::mem::size_of::<libc::sockaddr_nl>() as libc::socklen_t,
            )
        };
        if sent < 0 {
            return Err(os_err("sending to nf_tables"));
        }
        let mut acked = 0;
        let mut buf = vec![0u8; 16384];
        while acked < n {
            // SAFETY: reads into buf, which is as long as said.
            let got = unsafe {
                libc::recv(
                    self.sock.as_raw_fd(),
                    buf.as_mut_ptr() as *mut libc::c_void,
                    buf.len(),
                    0,
                )
            };
            if got < 0 {
                if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(os_err("reading nf_tables' answer"));
            }
            let mut at = 0;
            let got = got as usize;
            while at + 20 <= got {
                let len = u32::from_ne_bytes(buf[at..at + 4].try_into().expect("4 bytes")) as usize;
                let kind = u16::from_ne_bytes(buf[at + 4..at + 6].try_into().expect("2 bytes"));
                if len < 16 || at + len > got {
                    break;
                }
                if kind == NLMSG_ERROR {
                    let code = i32::from_ne_bytes(buf[at + 16..at + 20].try_into().expect("4"));
                    if code != 0 {
                        return Err(LinkError::Setup(format!(
                            "nf_tables refused the link's table {}: {}",
                            self.name,
                            std::io::Error::from_raw_os_error(-code)
                        )));
                    }
                    acked += 1;
                }
                at += (len + 3) & !3;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Attributes are 4-byte aligned, nests carry their whole length and the nested flag.
    #[test]
    fn nested_attributes_are_aligned_and_measured() {
        let mut m = Msg::new(1, 0, 7, NFPROTO_IPV4, 0);
        let n = m.nest(5);
        m.str(1, "ab");
        m.be32(2, 0x0102_0304);
        m.end(n);
        let b = m.finish();
        assert_eq!(b.len(), 16 + 4 + 4 + 8 + 8);
        assert_eq!(
            u32::from_ne_bytes(b[..4].try_into().unwrap()) as usize,
            b.len()
        );
        assert_eq!(u16::from_ne_bytes(b[20..22].try_into().unwrap()), 20);
        assert_eq!(
            u16::from_ne_bytes(b[22..24].try_into().unwrap()),
            5 | NLA_F_NESTED
        );
        // "ab\0" padded to 4, then the big-endian value.
        assert_eq!(&b[24..32], &[7, 0, 1, 0, b'a', b'b', 0, 0]);
        assert_eq!(&b[36..40], &[1, 2, 3, 4]);
    }

    #[test]
    fn the_reply_rule_copies_to_the_client_then_drops() {
        let r = replies(Ipv4Addr::new(100, 64, 0, 2), 9);
        assert_eq!(r.last(), Some(&Expr::Drop));
        assert!(r.contains(&Expr::Dup));
        assert!(r.contains(&Expr::Cmp {
            op: NFT_CMP_NEQ,
            data: 9u32.to_ne_bytes().to_vec()
        }));
    }
}
