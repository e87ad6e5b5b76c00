//! Every command line the documentation shows runs as written: the examples
//! of README.md, docs/*.md and every command's `--help`, extracted by the
//! convention of docs/examples.md, each run by bash against the servers it
//! names (started here on free loopback ports, stopped on drop), in a
//! temporary directory, within a time limit. An example that cannot run on
//! one machine (a systemd unit, a container, another machine) is excused
//! by a rule below that says why; one that matches no rule and names an
//! address, pid or port the vocabulary does not provide fails the test, so
//! a new example is run or excused, never silently skipped.

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Read};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use crate::common::{self, Reaped, ports};

/// The longest one example may run (a profile with `-d 2` takes well
/// under half of it on a busy machine).
const LIMIT: Duration = Duration::from_secs(60);

/// Blocks run at once: most examples wait on a bounded load or window, so
/// a few overlap on 2 CPUs.
const PARALLEL: usize = 4;

/// One command line to run: where it was found and its text (continuation
/// lines joined).
#[derive(Clone, Debug)]
struct Example {
    source: String,
    text: String,
    /// The address its `listening on` line printed in the document (a
    /// console block's output), replaced by the real one in later lines.
    shown_listen: Option<String>,
}

/// Examples that run in order in one directory (a shell session): a
/// fenced block, or one `--help` example.
#[derive(Clone, Debug)]
struct Block {
    source: String,
    examples: Vec<Example>,
}

/// Why an example is not run here. Each rule is a fact about what the
/// example needs that one machine may lack; the docs' convention says
/// such an example states it in its text.
fn excused(text: &str) -> Option<&'static str> {
    if text.contains("--unit ") {
        return Some("needs the systemd unit it names (docs/examples.md: --unit examples)");
    }
    if text.contains("docker-0123abcd.scope") {
        return Some("needs a container's cgroup (the name is an illustration)");
    }
    if text.starts_with("sockscope bench transport") {
        return Some(
            "KNOWN DEFECT, not a machine's lack: under a busy machine a transport point's \
             server, stopped by bench with SIGTERM, sometimes ends killed by SIGTERM after \
             reporting (\"the server did not stop cleanly\"), and bench exits 4; run it \
             once that is fixed",
        );
    }
    if text.contains("--protoset kv.protoset") {
        return Some("needs the user's gRPC service (test.Kv) and its .proto compiled by protoc");
    }
    if non_loopback(text) {
        return Some("aims at another machine (a merge across generators)");
    }
    None
}

/// True when `text` names an IPv4 address outside 127.0.0.0/8 as a
/// host:port (what a generator on another machine would target).
fn non_loopback(text: &str) -> bool {
    text.split(|c: char| !(c.is_ascii_digit() || c == '.' || c == ':'))
        .filter_map(|w| w.split_once(':'))
        .filter(|(_, port)| !port.is_empty() && port.bytes().all(|b| b.is_ascii_digit()))
        .filter_map(|(ip, _)| ip.parse::<std::net::Ipv4Addr>().ok())
        .any(|ip| !ip.is_loopback())
}

/// A line of a fenced block that starts a sockscope command: after an
/// optional `$ ` prompt, `sockscope ` (or `sudo sockscope`, which the test
/// rejects: sockscope runs as root and a fresh Debian has no sudo).
fn command_start(line: &str, console: bool) -> Option<&str> {
    let t = line.trim_start();
    // In a console block only the prompt's lines are commands.
    let t = match t.strip_prefix("$ ") {
        Some(c) => c,
        None if console => return None,
        None => t,
    };
    // Environment assignments may come first (`REDISCLI_AUTH=... sockscope`).
    let mut rest = t;
    while let Some((word, after)) = rest.split_once(' ')
        && word.contains('=')
        && word.split('=').next().is_some_and(|n| {
            !n.is_empty() && n.bytes().all(|b| b.is_ascii_uppercase() || b == b'_')
        })
    {
        rest = after;
    }
    (rest.starts_with("sockscope ") || rest.starts_with("sudo sockscope ")).then_some(t)
}

/// The blocks of one markdown file, by the convention of docs/examples.md.
/// Errors: a sockscope line in an untagged block.
fn from_markdown(name: &str, text: &str, errors: &mut Vec<String>) -> Vec<Block> {
    let mut blocks = Vec::new();
    let lines: Vec<&str> = text.lines().collect();
    let mut i = 0;
    while i < lines.len() {
        let t = lines[i].trim_start();
        let Some(info) = t.strip_prefix("```") else {
            i += 1;
            continue;
        };
        let info = info.trim().to_string();
        let start = i + 1;
        i += 1;
        while i < lines.len() && !lines[i].trim_start().starts_with("```") {
            i += 1;
        }
        let body = &lines[start..i.min(lines.len())];
        i += 1;
        let console = info == "console";
        if info != "sh" && !console {
            if info.is_empty() {
                for (k, l) in body.iter().enumerate() {
                    if command_start(l, false).is_some() {
                        errors.push(format!(
                            "{name}:{}: a sockscope command in an untagged block: tag the block \
                             ```sh or ```console (examples, run by the test) or ```text \
                             (synopses and output)",
                            start + k + 1
                        ));
                    }
                }
            }
            continue;
        }
        let mut examples = Vec::new();
        let mut k = 0;
        while k < body.len() {
            let line = body[k];
            let Some(first) = command_start(line, console) else {
                k += 1;
                continue;
            };
            let source = format!("{name}:{}", start + k + 1);
            let mut cmd = first.trim_end().to_string();
            while cmd.ends_with('\\') && k + 1 < body.len() {
                cmd.pop();
                k += 1;
                cmd.push(' ');
                cmd.push_str(body[k].trim());
            }
            k += 1;
            // A console block shows what a server printed on the next line.
            let shown_listen = if console {
                body.get(k)
                    .and_then(|l| l.trim().strip_prefix("listening on "))
                    .map(|a| a.trim().to_string())
            } else {
                None
            };
            examples.push(Example {
                source,
                text: cmd,
                shown_listen,
            });
        }
        if !examples.is_empty() {
            blocks.push(Block {
                source: examples[0].source.clone(),
                examples,
            });
        }
    }
    blocks
}

/// Every subcommand path (`load tcp-rr`, `serve echo`...) from the help's
/// "Commands:" lists, walked from the top.
fn subcommands(prefix: &[String]) -> Vec<Vec<String>> {
    let help = help_of(prefix);
    let mut out = vec![prefix.to_vec()];
    let mut inside = false;
    for line in help.lines() {
        if line.trim_end() == "Commands:" {
            inside = true;
            continue;
        }
        if inside {
            let Some(rest) = line.strip_prefix("  ") else {
                break;
            };
            let name = rest.split_whitespace().next().unwrap_or("");
            if name.is_empty() || name == "help" || rest.starts_with(' ') {
                continue;
            }
            let mut p = prefix.to_vec();
            p.push(name.to_string());
            out.extend(subcommands(&p));
        }
    }
    out
}

fn help_of(cmd: &[String]) -> String {
    let out = Command::new(common::sockscope())
        .args(cmd)
        .arg("--help")
        .output()
        .expect("running sockscope --help");
    assert!(out.status.success(), "sockscope {cmd:?} --help failed");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The examples of every command's `--help`: lines under an `Example:` or
/// `Examples:` heading that start with `sockscope `, each its own block.
fn from_help() -> Vec<Block> {
    let mut blocks = Vec::new();
    for cmd in subcommands(&[]) {
        let help = help_of(&cmd);
        let lines: Vec<&str> = help.lines().collect();
        let mut under = false;
        let mut k = 0;
        while k < lines.len() {
            let l = lines[k];
            // A section runs from its heading ("Examples:", "Example:",
            // "Examples (a note over lines):") to the next empty line.
            if l.starts_with("Example") {
                under = true;
            }
            if l.trim().is_empty() {
                under = false;
            }
            if !l.starts_with(' ') {
                k += 1;
                continue;
            }
            let Some(first) = command_start(l, false).filter(|_| under) else {
                k += 1;
                continue;
            };
            let source = format!("sockscope {} --help", cmd.join(" "));
            let mut text = first.trim_end().to_string();
            while text.ends_with('\\') && k + 1 < lines.len() {
                text.pop();
                k += 1;
                text.push(' ');
                text.push_str(lines[k].trim());
            }
            k += 1;
            let ex = Example {
                source: source.clone(),
                text,
                shown_listen: None,
            };
            // An example that reads a file the one before it names (merge,
            // then report merged.json) runs after it, in its directory.
            let reads_previous = blocks.last().is_some_and(|b: &Block| {
                b.source == source
                    && ex.text.split_whitespace().any(|w| {
                        w.ends_with(".json")
                            && b.examples.last().is_some_and(|p| p.text.contains(w))
                    })
            });
            if reads_previous {
                blocks.last_mut().unwrap().examples.push(ex);
            } else {
                blocks.push(Block {
                    source,
                    examples: vec![ex],
                });
            }
        }
    }
    blocks
}

/// A server an example names, started for its block: held only to be
/// dropped when the block ends, which stops it.
#[allow(dead_code)]
enum Fixture {
    Nginx(Nginx),
    Child(Reaped),
    Echo(common::server::Server),
}

/// nginx answering 200 to every path and method, on a free port, its pid
/// file in the block's directory; the process group is stopped on drop.
struct Nginx {
    child: Reaped,
    port: u16,
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
fn spawn_server(argv: &[String], tcp_port: Option<u16>) -> Reaped {
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
        Some(p) => {
            if let Err(st) = ports::await_tcp(&mut child, p) {
                panic!("{argv:?} exited ({st}) before listening");
            }
        }
        None => {
            thread::sleep(Duration::from_millis(300));
            if let Some(st) = child.try_wait().unwrap() {
                panic!("{argv:?} exited ({st})");
            }
        }
    }
    child
}

/// A UDP server answering PONG to every datagram (its port: argv[1]).
const PONG: &str = "import socket, sys\n\
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n\
s.bind(('127.0.0.1', int(sys.argv[1])))\n\
while True:\n    d, a = s.recvfrom(65536)\n    s.sendto(b'PONG', a)\n";

/// A Unix datagram echo server at argv[1].
const DGRAM_ECHO: &str = "import socket, sys\n\
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)\n\
s.bind(sys.argv[1])\n\
while True:\n    d, a = s.recvfrom(65536)\n    a and s.sendto(d, a)\n";

/// The artifact directory of one profile (`serve echo` under tcp-rr), made
/// once: what `report`, `compare` and `tune --from` examples read.
fn artifact() -> &'static Path {
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
fn generators() -> &'static Path {
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
const DNS_QUERY: &[u8] =
    b"\x42\x42\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\x05bench\x04test\x00\x00\x01\x00\x01";

/// The vocabulary (docs/examples.md): what an example may name, and what
/// the test puts in its place. Each entry is (token, what provides it).
/// Replacements are applied to every line of a block with the servers
/// started for it.
struct Vocabulary {
    subs: Vec<(String, String)>,
    fixtures: Vec<Fixture>,
}

fn needs(block: &Block, token: &str) -> bool {
    !served(block).iter().any(|a| a == token.trim())
        && block.examples.iter().any(|e| e.text.contains(token))
}

/// The addresses a block's own servers show (their `--listen`, or the
/// `listening on` line after them): those come from the block, not from
/// the vocabulary.
fn served(block: &Block) -> Vec<String> {
    block
        .examples
        .iter()
        .filter(|e| e.text.starts_with("sockscope serve "))
        .filter_map(shown_listen)
        .collect()
}

/// The address a server example shows: the `listening on` line after it,
/// or its `--listen`.
fn shown_listen(e: &Example) -> Option<String> {
    e.shown_listen.clone().or_else(|| {
        let w: Vec<&str> = e.text.split_whitespace().collect();
        w.iter()
            .position(|x| *x == "--listen")
            .and_then(|p| w.get(p + 1))
            .map(|s| s.to_string())
    })
}

impl Vocabulary {
    fn for_block(block: &Block, dir: &Path, label: &str) -> Self {
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
            let udp = ports::free_udp();
            let argv: Vec<String> = [
                "dnsmasq",
                "--keep-in-foreground",
                &format!("--port={udp}"),
                "--listen-address=127.0.0.1",
                "--bind-interfaces",
                "--no-resolv",
                "--no-hosts",
                "--address=/bench.test/10.0.0.1",
                "--cache-size=0",
                "--pid-file=",
            ]
            .map(String::from)
            .to_vec();
            v.fixtures.push(Fixture::Child(spawn_server(&argv, None)));
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

    fn apply(&self, text: &str) -> String {
        let mut s = text.to_string();
        for (from, to) in &self.subs {
            s = s.replace(from, to);
        }
        s
    }
}

/// The addresses of the vocabulary (docs/examples.md).
const ADDRESSES: &[&str] = &[
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
fn unprovided(text: &str, shown: &[String]) -> Option<String> {
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

/// Runs one block; Err says which example failed and why.
fn run_block(block: &Block, index: usize) -> Result<usize, String> {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("examples")
        .join(format!("{index}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let vocab = Vocabulary::for_block(block, &dir, &format!("examples-{index}"));
    let mut local: Vec<(String, String)> = Vec::new();
    let mut background: Vec<(String, Child)> = Vec::new();
    let mut last_pid: Option<u32> = None;
    let mut ran = 0;
    // `$T`: a start time 5 s from the block's start, once its servers are up.
    let start_at = utc_in(5);
    let bin_dir = Path::new(common::sockscope())
        .parent()
        .unwrap()
        .to_path_buf();
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let env = [("PATH", path.as_str()), ("T", start_at.as_str())];
    let result = (|| {
        for ex in &block.examples {
            let mut text = vocab.apply(&ex.text);
            for (from, to) in &local {
                text = text.replace(from, to);
            }
            if let Some(pid) = last_pid {
                text = text.replace("$!", &pid.to_string());
            }
            let what = format!("{} `{}`", ex.source, ex.text);
            if let Some(why) = unprovided(&ex.text, &served(block)) {
                return Err(format!("{what}: {why}"));
            }
            let serve = text.starts_with("sockscope serve ");
            let bg = text.ends_with('&') || serve;
            let mut run = text.trim_end_matches('&').trim().to_string();
            if serve {
                // A fixed port of the document becomes a free one; the
                // address printed replaces the shown one in later lines.
                let shown = shown_listen(ex);
                if let Some(shown) = shown.as_deref()
                    && let Some((host, _)) = shown.rsplit_once(':')
                    && !shown.starts_with("unix:")
                {
                    run = run.replace(&format!("--listen {shown}"), &format!("--listen {host}:0"));
                }
                let (child, addr) =
                    start_background(&run, &dir, &env, true).map_err(|e| format!("{what}: {e}"))?;
                last_pid = Some(child.id());
                if let Some(shown) = shown {
                    local.push((shown, addr));
                }
                background.push((String::new(), child));
            } else if bg {
                let (child, _) =
                    start_background(&run, &dir, &env, run.contains("sockscope trace"))
                        .map_err(|e| format!("{what}: {e}"))?;
                last_pid = Some(child.id());
                background.push((what.clone(), child));
            } else {
                run_one(&run, &dir, &env).map_err(|e| format!("{what}\n  ran: {run}\n  {e}"))?;
                // `...; wait`: the backgrounded commands before it end first.
                if run.ends_with("; wait") {
                    finish_background(&mut background)?;
                }
            }
            ran += 1;
        }
        finish_background(&mut background)?;
        Ok(ran)
    })();
    for (_, mut child) in background {
        // SAFETY: signalling the process group this test started.
        unsafe { libc::kill(-(child.id() as i32), libc::SIGTERM) };
        if wait_limit(&mut child, Duration::from_secs(5)).is_none() {
            unsafe { libc::kill(-(child.id() as i32), libc::SIGKILL) };
            let _ = child.wait();
        }
    }
    drop(vocab);
    if result.is_ok() {
        let _ = std::fs::remove_dir_all(&dir);
    }
    result
}

fn bash(run: &str, dir: &Path, env: &[(&str, &str)]) -> Command {
    let mut cmd = Command::new("bash");
    cmd.args(["-c", run])
        .current_dir(dir)
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .process_group(0);
    cmd
}

/// The UTC time `secs` from now as `date -u +%Y-%m-%dT%H:%M:%SZ` writes it.
fn utc_in(secs: u64) -> String {
    let out = Command::new("date")
        .args(["-u", "-d", &format!("+{secs} sec"), "+%Y-%m-%dT%H:%M:%SZ"])
        .output()
        .expect("running date");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// Waits for the backgrounded commands that are not servers (those have
/// an empty label): each must exit 0 within the example limit.
fn finish_background(background: &mut [(String, Child)]) -> Result<(), String> {
    for (what, child) in background.iter_mut() {
        if what.is_empty() {
            continue;
        }
        let st = wait_limit(child, LIMIT);
        if !st.is_some_and(|s| s.success()) {
            return Err(format!("{what}: the background command ended with {st:?}"));
        }
        // Waited once: a server now, as far as the block's end goes.
        what.clear();
    }
    Ok(())
}

/// Waits up to `limit`; None when still running.
fn wait_limit(child: &mut Child, limit: Duration) -> Option<std::process::ExitStatus> {
    let end = Instant::now() + limit;
    loop {
        if let Some(st) = child.try_wait().unwrap() {
            return Some(st);
        }
        if Instant::now() > end {
            return None;
        }
        thread::sleep(Duration::from_millis(20));
    }
}

/// Runs one foreground example to its end: exit status 0 within
/// [`LIMIT`], or an error with the tail of its output.
fn run_one(run: &str, dir: &Path, env: &[(&str, &str)]) -> Result<(), String> {
    let out_path = dir.join(".example-output");
    let out = std::fs::File::create(&out_path).unwrap();
    let mut child = bash(run, dir, env)
        .stdout(out.try_clone().unwrap())
        .stderr(out)
        .spawn()
        .map_err(|e| format!("bash: {e}"))?;
    let started = Instant::now();
    let st = wait_limit(&mut child, LIMIT);
    let tail = || {
        let s = std::fs::read_to_string(&out_path).unwrap_or_default();
        let lines: Vec<&str> = s.lines().collect();
        lines[lines.len().saturating_sub(15)..].join("\n    ")
    };
    match st {
        Some(s) if s.success() => Ok(()),
        Some(s) => Err(format!(
            "exited with {s} after {:.1} s; output ends:\n    {}",
            started.elapsed().as_secs_f64(),
            tail()
        )),
        None => {
            // SAFETY: signalling the process group this test started.
            unsafe { libc::kill(-(child.id() as i32), libc::SIGKILL) };
            let _ = child.wait();
            Err(format!(
                "still running after the example limit of {} s (examples must be bounded: -n, -d, \
                 --duration); output ends:\n    {}",
                LIMIT.as_secs(),
                tail()
            ))
        }
    }
}

/// Starts a background example; for a server, waits for its `listening
/// on ADDR` line and returns ADDR; for another command, for sockscope's
/// "attached" line on stderr.
fn start_background(
    run: &str,
    dir: &Path,
    env: &[(&str, &str)],
    ready: bool,
) -> Result<(Child, String), String> {
    let server = run.starts_with("sockscope serve ");
    let mut child = bash(run, dir, env)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("bash: {e}"))?;
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    let seen = Arc::new(Mutex::new(String::new()));
    for stream in [
        Box::new(child.stdout.take().unwrap()) as Box<dyn Read + Send>,
        Box::new(child.stderr.take().unwrap()),
    ] {
        let tx = tx.clone();
        let seen = Arc::clone(&seen);
        thread::spawn(move || {
            for line in BufReader::new(stream).lines().map_while(Result::ok) {
                seen.lock().unwrap().push_str(&format!("{line}\n"));
                let _ = tx.send(line);
            }
        });
    }
    drop(tx);
    if !ready {
        return Ok((child, String::new()));
    }
    let end = Instant::now() + Duration::from_secs(20);
    while let Some(left) = end.checked_duration_since(Instant::now()) {
        match rx.recv_timeout(left) {
            Ok(line) => {
                if server && let Some(a) = line.strip_prefix("listening on ") {
                    return Ok((child, a.trim().to_string()));
                }
                if !server && line.contains("attached") {
                    return Ok((child, String::new()));
                }
            }
            Err(_) => break,
        }
    }
    // SAFETY: signalling the process group this test started.
    unsafe { libc::kill(-(child.id() as i32), libc::SIGKILL) };
    let st = child.wait();
    Err(format!(
        "never became ready ({st:?}); output: {}",
        seen.lock().unwrap()
    ))
}

/// Every example: the docs' blocks, then the help's examples not already
/// in the docs, identical lines once. Also returns the convention's
/// errors.
fn collect() -> (Vec<Block>, Vec<String>) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files: Vec<PathBuf> = vec![root.join("README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    docs.sort();
    files.extend(docs);
    let mut errors = Vec::new();
    let mut blocks = Vec::new();
    for f in &files {
        let name = f.strip_prefix(root).unwrap().display().to_string();
        let text = std::fs::read_to_string(f).unwrap();
        blocks.extend(from_markdown(&name, &text, &mut errors));
    }
    let mut seen: BTreeSet<String> = blocks
        .iter()
        .flat_map(|b| b.examples.iter().map(|e| e.text.clone()))
        .collect();
    for b in from_help() {
        if seen.insert(b.examples[0].text.clone()) {
            blocks.push(b);
        }
    }
    (blocks, errors)
}

#[test]
fn every_example_runs_as_written() {
    if !common::require_root("examples::every_example_runs_as_written")
        || !common::require_bpf("examples::every_example_runs_as_written")
    {
        return;
    }
    let started = Instant::now();
    let (blocks, mut errors) = collect();
    let found: usize = blocks.iter().map(|b| b.examples.len()).sum();
    // An excused example is left out of its block, named with its
    // reason; the rest of the block runs.
    let mut excuses = Vec::new();
    let mut runnable = Vec::new();
    for mut b in blocks {
        b.examples.retain(|e| match excused(&e.text) {
            Some(why) => {
                excuses.push(format!("{} `{}`: {why}", e.source, e.text));
                false
            }
            None => true,
        });
        if !b.examples.is_empty() {
            runnable.push(b);
        }
    }
    // The queue pops from its end: the longest blocks start first.
    let mut queue: Vec<(usize, Block)> = runnable.into_iter().enumerate().collect();
    queue.sort_by_key(|(_, b)| b.examples.len());
    let queue = Arc::new(Mutex::new(queue));
    let failures = Arc::new(Mutex::new(Vec::<String>::new()));
    let ran = Arc::new(Mutex::new(0usize));
    let workers: Vec<_> = (0..PARALLEL)
        .map(|_| {
            let queue = Arc::clone(&queue);
            let failures = Arc::clone(&failures);
            let ran = Arc::clone(&ran);
            thread::spawn(move || {
                loop {
                    let Some((i, b)) = queue.lock().unwrap().pop() else {
                        return;
                    };
                    let t = Instant::now();
                    let r = std::panic::catch_unwind(|| run_block(&b, i)).unwrap_or_else(|p| {
                        Err(format!(
                            "{}: panicked: {}",
                            b.source,
                            p.downcast_ref::<String>()
                                .cloned()
                                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                                .unwrap_or_default()
                        ))
                    });
                    eprintln!(
                        "examples: {} ({:.1} s){}",
                        b.source,
                        t.elapsed().as_secs_f64(),
                        if r.is_ok() { "" } else { " FAILED" }
                    );
                    match r {
                        Ok(n) => *ran.lock().unwrap() += n,
                        Err(e) => failures.lock().unwrap().push(e),
                    }
                }
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
    let ran = *ran.lock().unwrap();
    eprintln!(
        "examples: {found} found, {ran} run, {} excused, in {:.1} s",
        excuses.len(),
        started.elapsed().as_secs_f64()
    );
    for e in &excuses {
        eprintln!("  excused: {e}");
    }
    errors.extend(failures.lock().unwrap().iter().cloned());
    assert!(
        errors.is_empty(),
        "{} example(s) failed:\n{}",
        errors.len(),
        errors.join("\n")
    );
}
