//! The guards every other test starts its peers with (tests/common): a peer that does not
//! come up fails with what it said, and a dropped guard leaves nothing running.

mod common;

use common::{free_port, PeerProcess, ThreadServer};
use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The panic message of `f`, which must panic.
fn panic_message(f: impl FnOnce() + std::panic::UnwindSafe) -> String {
    let err = std::panic::catch_unwind(f).expect_err("it should have panicked");
    err.downcast_ref::<String>()
        .cloned()
        .or_else(|| err.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default()
}

fn alive(pid: u32) -> bool {
    // A zombie is gone for our purposes: the guard reaps, so it must not be one either.
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        !s.rsplit(')')
            .next()
            .unwrap_or("")
            .trim_start()
            .starts_with('Z')
    })
}

#[test]
fn a_peer_that_exits_before_its_port_accepts_fails_with_its_stderr() {
    let port = free_port();
    let msg = panic_message(|| {
        PeerProcess::start(
            Command::new("sh")
                .args(["-c", "echo 'bind: address in use' >&2; exit 3"])
                .stdout(Stdio::null()),
            &[port],
        );
    });
    assert!(msg.contains("sh exited"), "{msg}");
    assert!(msg.contains(&format!("port {port}")), "{msg}");
    assert!(msg.contains("bind: address in use"), "{msg}");
}

#[test]
fn a_dropped_peer_is_stopped_and_reaped_and_a_ready_one_is_returned() {
    if common::require_peer("python3").is_none() {
        return;
    }
    let port = free_port();
    let script = format!("exec python3 -c \"import socket,time; s=socket.socket(); s.bind(('127.0.0.1',{port})); s.listen(); time.sleep(60)\"");
    let peer = PeerProcess::start(Command::new("sh").args(["-c", &script]), &[port]);
    let pid = peer.id();
    assert!(alive(pid));
    drop(peer);
    assert!(
        !alive(pid),
        "pid {pid} still running after the guard was dropped"
    );
    // SIGTERM first when asked: a peer that handles it exits within the grace.
    let peer =
        PeerProcess::spawn(Command::new("sleep").arg("60")).with_grace(Duration::from_secs(5));
    let (pid, started) = (peer.id(), Instant::now());
    drop(peer);
    assert!(!alive(pid));
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "SIGTERM was not sent first"
    );
}

#[test]
fn a_thread_server_refuses_connections_once_dropped() {
    let server = ThreadServer::start(Duration::from_secs(30), |mut conn, serving| {
        let mut byte = [0u8; 1];
        while serving.running() && conn.read(&mut byte).is_ok_and(|n| n > 0) {}
    });
    let addr = server.addr;
    assert!(std::net::TcpStream::connect(addr).is_ok());
    drop(server);
    let deadline = Instant::now() + Duration::from_secs(5);
    while std::net::TcpStream::connect(addr).is_ok() {
        assert!(Instant::now() < deadline, "still accepting on {addr}");
        std::thread::sleep(Duration::from_millis(20));
    }
}
