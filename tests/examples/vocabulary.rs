//! What an example may name (docs/examples.md, "The vocabulary"): the
//! servers, pids, ports and files the test provides for a block, and the
//! check that an example names nothing else.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use crate::common::{self, Reaped, ports};

use super::extract::{Block, Example};
use super::*;

/// A server an example names, started for its block: held only to be
/// dropped when the block ends, which stops it.
#[allow(dead_code)]
pub(super) enum Fixture {
    Nginx(Nginx),
    Child(Reaped),
    Echo(common::server::Server),
}

/// nginx answering 200 to every path and method, on a free port, its pid
/// file in the block's directory; the process group is stopped on drop.
pub(super) struct Nginx {
    pub(super) child: Reaped,
    pub(super) port: u16,
}

impl Nginx {
    fn start(dir: &Path) -> Nginx {
        let d = dir.join("ngx");
        std::fs::create_dir_all(d.join("tmp")).unwrap();
        for _ in 0..5 {
            let port = ports::free_tcp();
            let dd = d.display();
            let conf = format!(
                "user root;\nworker_processes 2;\npid {dd}/nginx.pid;\nerror_log {dd}/error.log;\n\
                 events {{}}\nhttp {{ access_log off; client_body_temp_path {dd}/tmp;\n\
                 server {{ listen 127.0.0.1:{port}; listen unix:{dd}/../nginx.sock; location / {{ return 200 \"hello\\n\"; }} }} }}\n"
            );
            std::fs::write(d.join("nginx.conf"), conf).unwrap();
            let mut cmd = Command::new("nginx");
            cmd.arg("-p")
                .arg(&d)
                .arg("-c")
                .arg(d.join("nginx.conf"))
                .args(["-g", "daemon off;"])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .process_group(0);
            let mut child = Reaped(cmd.spawn().expect("starting nginx"));
            if ports::await_tcp(&mut child, port).is_ok() {
                return Nginx { child, port };
            }
        }
        panic!("nginx found no free port");
    }

    fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    /// The master and its workers, as `pidof nginx` lists them.
    fn pids(&self) -> Vec<i32> {
        let mut v: Vec<i32> = vec![self.pid()];
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let kids: Vec<i32> = common::procs::tree(self.pid())
                .iter()
                .map(|s| s.pid)
                .filter(|p| *p != self.pid())
                .collect();
            if kids.len() >= 2 || Instant::now() > deadline {
                v.extend(kids);
                return v;
            }
            thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        // SAFETY: signalling the process group this test started.
        unsafe { libc::kill(-(self.child.id() as i32), libc::SIGKILL) };
    }
}

/// Starts `argv` with its own process group once `port` listens (TCP), or
/// after it has run 300 ms without exiting (UDP-only servers).
pub(super) fn spawn_server(argv: &[String], tcp_port: Option<u16>) -> Reaped {
    try_spawn_server(argv, tcp_port).unwrap_or_else(|st| panic!("{argv:?} exited ({st})"))
}

/// [`spawn_server`], or the status of a server that exited first (its
/// port was taken).
fn try_spawn_server(
    argv: &[String],
    tcp_port: Option<u16>,
) -> Result<Reaped, std::process::ExitStatus> {
    let mut cmd = Command::new(&argv[0]);
    cmd.args(&argv[1..])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0);
    let mut child = Reaped(
        cmd.spawn()
            .unwrap_or_else(|e| panic!("starting {argv:?}: {e}")),
    );
    match tcp_port {
        Some(p) => ports::await_tcp(&mut child, p)?,
        None => {
            thread::sleep(Duration::from_millis(300));
            if let Some(st) = child.try_wait().unwrap() {
                return Err(st);
            }
        }
    }
    Ok(child)
}

/// A UDP server answering PONG to every datagram (its port: argv[1]).
pub(super) const PONG: &str = "import socket, sys\n\
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n\
s.bind(('127.0.0.1', int(sys.argv[1])))\n\
while True:\n    d, a = s.recvfrom(65536)\n    s.sendto(b'PONG', a)\n";

/// A Unix datagram echo server at argv[1].
pub(super) const DGRAM_ECHO: &str = "import socket, sys\n\
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)\n\
s.bind(sys.argv[1])\n\
while True:\n    d, a = s.recvfrom(65536)\n    a and s.sendto(d, a)\n";

/// The artifact directory of one profile (`serve echo` under tcp-rr), made
/// once: what `report`, `compare` and `tune --from` examples read.
pub(super) fn artifact() -> &'static Path {
    static DIR: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    DIR.get_or_init(|| {
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
            .join("examples")
            .join(format!("artifact-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let (st, _, err) = common::run_bounded(
            &[
                "profile",
                "--target",
                "serve echo",
                "--load",
                "tcp-rr -c 4 -d 1",
                "--out",
                dir.to_str().unwrap(),
            ],
            LIMIT,
        );
        assert!(st.success(), "the examples' profile artifact: {err}");
        dir
    })
}

/// Three load artifacts, gen-0.json..gen-2.json, of tcp-rr runs against
/// one echo server, made once: what merge's example merges.
pub(super) fn generators() -> &'static Path {
    static DIR: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    DIR.get_or_init(|| {
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
            .join("examples")
            .join(format!("generators-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let echo = common::server::Server::start(&["serve", "echo"]);
        for i in 0..3 {
            let json = dir.join(format!("gen-{i}.json"));
            let (st, _, err) = common::run_bounded(
                &[
                    "-q",
                    "load",
                    "tcp-rr",
                    &echo.listen,
                    "-c",
                    "2",
                    "-n",
                    "2000",
                    "--json",
                    json.to_str().unwrap(),
                ],
                LIMIT,
            );
            assert!(st.success(), "a generator's artifact: {err}");
        }
        dir
    })
}

/// The DNS query README's recipe writes to q.bin (A bench.test).
pub(super) const DNS_QUERY: &[u8] =
    b"\x42\x42\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\x05bench\x04test\x00\x00\x01\x00\x01";

/// The vocabulary (docs/examples.md): what an example may name, and what
/// the test puts in its place. Each entry is (token, what provides it).
/// Replacements are applied to every line of a block with the servers
/// started for it.
pub(super) struct Vocabulary {
    pub(super) subs: Vec<(String, String)>,
    pub(super) fixtures: Vec<Fixture>,
}

pub(super) fn needs(block: &Block, token: &str) -> bool {
    !served(block).iter().any(|a| a == token.trim())
        && block.examples.iter().any(|e| e.text.contains(token))
}

/// The addresses a block's own servers show (their `--listen`, or the
/// `listening on` line after them): those come from the block, not from
/// the vocabulary.
pub(super) fn served(block: &Block) -> Vec<String> {
    block
        .examples
        .iter()
        .filter(|e| e.text.starts_with("sockscope serve "))
        .filter_map(shown_listen)
        .collect()
}

/// The address a server example shows: the `listening on` line after it,
/// or its `--listen`.
pub(super) fn shown_listen(e: &Example) -> Option<String> {
    e.shown_listen.clone().or_else(|| {
        let w: Vec<&str> = e.text.split_whitespace().collect();
        w.iter()
            .position(|x| *x == "--listen")
            .and_then(|p| w.get(p + 1))
            .map(|s| s.to_string())
    })
}

impl Vocabulary {
    pub(super) fn for_block(block: &Block, dir: &Path, label: &str) -> Self {
        let mut v = Vocabulary {
            subs: Vec::new(),
            fixtures: Vec::new(),
        };
        let strs = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<String>>();
        // nginx: its address, its Unix socket, its pid file and its pids.
        let nginx_tokens = [
            "127.0.0.1:8080",
            "unix:/run/nginx.sock",
            "$(cat /tmp/ngx/nginx.pid)",
            "$(pidof -s nginx)",
            "$(pidof nginx)",
        ];
        if nginx_tokens.iter().any(|t| needs(block, t)) {
            let n = Nginx::start(dir);
            let pids = n.pids();
            let list: Vec<String> = pids.iter().map(i32::to_string).collect();
            v.subs
                .push(("127.0.0.1:8080".into(), format!("127.0.0.1:{}", n.port)));
            v.subs
                .push(("$(cat /tmp/ngx/nginx.pid)".into(), n.pid().to_string()));
            v.subs
                .push(("$(pidof -s nginx)".into(), n.pid().to_string()));
            v.subs.push(("$(pidof nginx)".into(), list.join(" ")));
            std::fs::write(
                dir.join("urls.txt"),
                format!("http://127.0.0.1:{}/index.html\n", n.port),
            )
            .unwrap();
            std::fs::write(dir.join("req.json"), "{}").unwrap();
            v.fixtures.push(Fixture::Nginx(n));
        }
        // redis-server on TCP and DIR/redis.sock; with a password and a
        // user when the block authenticates.
        if [
            "127.0.0.1:6379",
            "unix:/run/redis.sock",
            "--comm redis-server",
            "-p 6379",
        ]
        .iter()
        .any(|t| needs(block, t))
        {
            let auth = needs(block, "--auth") || needs(block, "REDISCLI_AUTH");
            let port = ports::free_tcp();
            let sock = dir.join("redis.sock");
            let mut argv = strs(&["redis-server", "--port"]);
            argv.push(port.to_string());
            argv.extend(strs(&[
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
            ]));
            argv.extend(["--unixsocket".to_string(), sock.display().to_string()]);
            argv.extend(["--dir".to_string(), dir.display().to_string()]);
            if auth {
                argv.extend(strs(&[
                    "--requirepass",
                    "s3cret",
                    "--user",
                    "loadgen",
                    "on",
                    ">s3cret",
                    "~*",
                    "+@all",
                ]));
                std::fs::write(dir.join("redis.pass"), "s3cret\n").unwrap();
            }
            v.fixtures
                .push(Fixture::Child(spawn_server(&argv, Some(port))));
            v.subs
                .push(("127.0.0.1:6379".into(), format!("127.0.0.1:{port}")));
            v.subs.push(("-p 6379".into(), format!("-p {port}")));
        }
        if needs(block, "127.0.0.1:11211") || needs(block, "127.0.0.1:11212") {
            let tcp = ports::free_tcp();
            let udp = ports::free_udp();
            let argv: Vec<String> = [
                "memcached",
                "-p",
                &tcp.to_string(),
                "-U",
                &udp.to_string(),
                "-l",
                "127.0.0.1",
                "-u",
                "nobody",
            ]
            .map(String::from)
            .to_vec();
            v.fixtures
                .push(Fixture::Child(spawn_server(&argv, Some(tcp))));
            v.subs
                .push(("127.0.0.1:11211".into(), format!("127.0.0.1:{tcp}")));
            v.subs
                .push(("127.0.0.1:11212".into(), format!("127.0.0.1:{udp}")));
        }
        if needs(block, "127.0.0.1:5353") {
            // dnsmasq binds TCP too: a port free for UDP can be taken for
            // TCP by a test beside this one (dnsmasq then exits 2).
            let log = dir.join("dnsmasq.log");
            let (child, udp) = ports::on_free_udp_port("dnsmasq", |udp| {
                let mut argv = vec!["dnsmasq".to_string()];
                argv.extend(common::dnsmasq::args(udp, &log, &[]));
                try_spawn_server(&argv, None).ok().map(|c| (c, udp))
            });
            v.fixtures.push(Fixture::Child(child));
            std::fs::write(dir.join("q.bin"), DNS_QUERY).unwrap();
            v.subs
                .push(("127.0.0.1:5353".into(), format!("127.0.0.1:{udp}")));
        }
        if needs(block, "127.0.0.1:9000") {
            let udp = ports::free_udp();
            let argv = strs(&["/usr/bin/python3", "-c", PONG, &udp.to_string()]);
            v.fixtures.push(Fixture::Child(spawn_server(&argv, None)));
            v.subs
                .push(("127.0.0.1:9000".into(), format!("127.0.0.1:{udp}")));
        }
        if needs(block, "unix:/run/dgram.sock") {
            let sock = dir.join("dgram.sock").display().to_string();
            let argv = strs(&["/usr/bin/python3", "-c", DGRAM_ECHO, &sock]);
            v.fixtures.push(Fixture::Child(spawn_server(&argv, None)));
        }
        // sockscope's own echo server: its address and its pid.
        if ["127.0.0.1:7 ", "--pid 4242", "-p 1234"]
            .iter()
            .any(|t| needs(block, t))
        {
            let s = common::server::Server::start(&["serve", "echo"]);
            v.subs
                .push(("127.0.0.1:7 ".into(), format!("{} ", s.listen)));
            v.subs
                .push(("--pid 4242".into(), format!("--pid {}", s.pid)));
            v.subs.push(("-p 1234".into(), format!("-p {}", s.pid)));
            v.fixtures.push(Fixture::Echo(s));
        }
        if needs(block, "unix:@echo ") {
            let name = format!("unix:@sockscope-examples-{}-{label}", std::process::id());
            let s = common::server::Server::start(&["serve", "echo", "--listen", &name]);
            v.subs.push(("unix:@echo ".into(), format!("{name} ")));
            v.fixtures.push(Fixture::Echo(s));
        }
        if needs(block, "/run/app.sock") {
            let sock = format!("unix:{}", dir.join("app.sock").display());
            let s = common::server::Server::start(&["serve", "echo", "--listen", &sock]);
            v.fixtures.push(Fixture::Echo(s));
        }
        // Ports a command binds or a launched server is told to use.
        for token in ["127.0.0.1:9469", "--port 16379", "-p 11311", "[::1]:7000"] {
            if needs(block, token) {
                let port = ports::free_tcp();
                let (head, _) = token.rsplit_once([':', ' ']).unwrap();
                let sep = if token.contains(' ') { " " } else { ":" };
                v.subs.push((token.into(), format!("{head}{sep}{port}")));
            }
        }
        // A profile's artifacts, unless the block writes them itself.
        for name in ["run1", "run2", "out"] {
            if needs(block, &format!("{name}/run.json")) && !needs(block, &format!("--out {name}"))
            {
                let st = Command::new("cp")
                    .arg("-r")
                    .arg(artifact())
                    .arg(dir.join(name))
                    .status()
                    .expect("cp");
                assert!(st.success(), "copying the profile artifact");
            }
        }
        // Load artifacts of three generators (merge's example).
        if needs(block, "gen-0.json") || needs(block, "gen-*.json") {
            for i in 0..3 {
                std::fs::copy(
                    generators().join(format!("gen-{i}.json")),
                    dir.join(format!("gen-{i}.json")),
                )
                .expect("copying a generator's artifact");
            }
        }
        // The program a trace example launches.
        v.subs.push((
            "-- ./server".into(),
            format!("-- {} -g 220000 -e 500", common::workload().display()),
        ));
        // The man pages' directory, and paths under /run (sockets, pid
        // files a recipe creates): in the block's directory.
        v.subs.push((
            "/usr/local/share/man/man1".into(),
            dir.display().to_string(),
        ));
        v.subs.push(("/run/".into(), format!("{}/", dir.display())));
        v
    }

    pub(super) fn apply(&self, text: &str) -> String {
        let mut s = text.to_string();
        for (from, to) in &self.subs {
            s = s.replace(from, to);
        }
        s
    }
}

/// The addresses of the vocabulary (docs/examples.md).
pub(super) const ADDRESSES: &[&str] = &[
    "127.0.0.1:8080",
    "127.0.0.1:6379",
    "127.0.0.1:11211",
    "127.0.0.1:11212",
    "127.0.0.1:5353",
    "127.0.0.1:7",
    "127.0.0.1:9469",
    "[::1]:7000",
    "127.0.0.1:9000",
];

/// What in `text` (as written) points outside what the test provides: a
/// loopback address with a port that neither the vocabulary nor a server
/// earlier in the block provides, a literal pid other than the
/// vocabulary's, `sudo`.
pub(super) fn unprovided(text: &str, shown: &[String]) -> Option<String> {
    if text.starts_with("sudo ") {
        return Some("runs sudo: sockscope runs as root, and a fresh Debian has no sudo".into());
    }
    let words: Vec<&str> = text
        .split(|c: char| c.is_whitespace() || "'\"/=,".contains(c))
        .collect();
    for w in &words {
        let w = w.trim_matches(|c: char| c == '(' || c == ')');
        let addr = w.starts_with("127.0.0.1:") || w.starts_with("[::1]:");
        if addr
            && w.rsplit_once(':')
                .is_some_and(|(_, p)| p.bytes().all(|b| b.is_ascii_digit()) && p != "0")
            && !ADDRESSES.contains(&w)
            && !shown.iter().any(|s| s == w)
        {
            return Some(format!(
                "names {w}, which no server of the vocabulary (docs/examples.md) provides"
            ));
        }
    }
    for pair in words.windows(2) {
        if (pair[0] == "--pid" || pair[0] == "-p")
            && pair[1].bytes().all(|b| b.is_ascii_digit())
            && !pair[1].is_empty()
            && !["4242", "1234", "11311", "6379"].contains(&pair[1])
        {
            return Some(format!(
                "names pid {}, which the vocabulary (docs/examples.md) does not provide",
                pair[1]
            ));
        }
    }
    None
}
