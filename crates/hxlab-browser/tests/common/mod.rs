//! What the browser tests share: a plain HTTP/1.1 server (python3's http.server) over a
//! directory of the test's files, and a fresh temporary directory.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// A peer process, killed and reaped when dropped.
pub struct Peer(Child);

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Writes `files` (name, content) into `dir` and serves the directory over plain HTTP/1.1
/// on a free port of 127.0.0.1; returns the server and its port.
pub fn python_site(dir: &Path, files: &[(&str, &str)]) -> (Peer, u16) {
    for (name, content) in files {
        std::fs::write(dir.join(name), content).expect("write a file of the site");
    }
    let script = "import http.server,sys,os\n\
        os.chdir(sys.argv[1])\n\
        class Q(http.server.SimpleHTTPRequestHandler):\n    protocol_version='HTTP/1.1'\n    def log_message(self,*a): pass\n\
        s=http.server.ThreadingHTTPServer(('127.0.0.1',0),Q)\n\
        print(s.server_address[1],flush=True)\n\
        s.serve_forever()\n";
    let mut child = Command::new("python3")
        .arg("-c")
        .arg(script)
        .arg(dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("python3");
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("port");
    let port = line.trim().parse().expect("port number");
    (Peer(child), port)
}

/// An empty directory `hxlab-{prefix}-{name}-PID` under the system's temporary directory.
pub fn temp_dir(prefix: &str, name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("hxlab-{prefix}-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("temp dir");
    d
}
