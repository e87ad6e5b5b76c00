//! Compiles the BPF programs under src/bpf/ with clang and generates their
//! libbpf-rs skeletons into OUT_DIR; records the git commit the binary is
//! built from (and whether the tree had local changes) for artifacts.

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

use libbpf_cargo::SkeletonBuilder;

const PROGS: &[&str] = &["syscalls", "relay", "anatomy", "stacks"];

fn main() {
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("OUT_DIR is set by cargo"));
    let arch = env::var("CARGO_CFG_TARGET_ARCH").expect("target arch is set by cargo");
    let target_arch = match arch.as_str() {
        "x86_64" => "x86",
        "aarch64" => "arm64",
        other => panic!("sockscope's BPF programs do not support {other} yet"),
    };
    // A diagnostic build for bench/anatomy.sh: the anatomy's programs are
    // attached as usual but return at once, so a run measures what the
    // tracepoints cost before any program work.
    println!("cargo:rerun-if-env-changed=SOCKSCOPE_ANATOMY_HOOKS_ONLY");
    let hooks_only = env::var("SOCKSCOPE_ANATOMY_HOOKS_ONLY").is_ok_and(|v| v == "1");
    if hooks_only {
        println!("cargo:rustc-cfg=anatomy_hooks_only");
    }
    println!("cargo::rustc-check-cfg=cfg(anatomy_hooks_only)");
    for name in PROGS {
        let src = format!("src/bpf/{name}.bpf.c");
        let mut args = vec![
            "-Wall".to_string(),
            "-Wno-unused-function".to_string(),
            "-Isrc/bpf".to_string(),
            format!("-D__TARGET_ARCH_{target_arch}"),
        ];
        if hooks_only && *name == "anatomy" {
            args.push("-DSS_ANAT_HOOKS_ONLY".to_string());
        }
        SkeletonBuilder::new()
            .source(&src)
            .clang_args(args)
            .build_and_generate(out.join(format!("{name}.skel.rs")))
            .unwrap_or_else(|e| panic!("building {src}: {e:#}"));
        println!("cargo:rerun-if-changed={src}");
    }
    println!("cargo:rerun-if-changed=src/bpf/syscalls.h");
    println!("cargo:rerun-if-changed=src/bpf/relay.h");
    println!("cargo:rerun-if-changed=src/bpf/anatomy.h");
    println!("cargo:rerun-if-changed=src/bpf/stacks.h");
    println!("cargo:rerun-if-changed=src/bpf/hist.h");
    println!("cargo:rerun-if-changed=src/bpf/resp.h");
    println!("cargo:rerun-if-changed=src/bpf/names.h");
    println!("cargo:rerun-if-changed=src/bpf/memcached.h");
    println!("cargo:rerun-if-changed=src/bpf/postgres.h");
    println!("cargo:rerun-if-changed=src/bpf/wire.h");
    println!("cargo:rerun-if-changed=src/bpf/dns.h");
    println!("cargo:rerun-if-changed=src/bpf/http1.h");
    println!("cargo:rerun-if-changed=src/bpf/tls.h");
    println!("cargo:rerun-if-changed=src/bpf/h2.h");
    println!("cargo:rerun-if-changed=src/bpf/scope.h");
    println!("cargo:rerun-if-changed=src/bpf/common.h");
    println!("cargo:rerun-if-changed=src/bpf/vmlinux.h");
    embed_git_state();
    generate_prometheus_model(&out);
}

/// Generates the Rust types of Prometheus' exposition data model
/// (proto/io/prometheus/client/metrics.proto, vendored from
/// prometheus/client_model) with prost; protox compiles the .proto in pure
/// Rust, so no protoc binary is needed.
fn generate_prometheus_model(out: &Path) {
    const PROTO: &str = "proto/io/prometheus/client/metrics.proto";
    let fds =
        protox::compile([PROTO], ["proto"]).unwrap_or_else(|e| panic!("compiling {PROTO}: {e}"));
    prost_build::Config::new()
        .out_dir(out)
        .compile_fds(fds)
        .unwrap_or_else(|e| panic!("generating the types of {PROTO}: {e}"));
    println!("cargo:rerun-if-changed={PROTO}");
}

/// The files the binary is built from: what makes SOCKSCOPE_GIT_DIRTY
/// true, and what the build script watches besides the commit.
const BUILD_INPUTS: &[&str] = &["src", "proto", "build.rs", "Cargo.toml", "Cargo.lock"];

/// Sets SOCKSCOPE_GIT_COMMIT and SOCKSCOPE_GIT_DIRTY ("true", "false" or
/// "unknown") for env!(); "unknown" when this is not a git checkout or git
/// is missing, so a build from a tarball still works.
///
/// Dirty means the binary's own inputs differ from the commit: a change
/// under tests/, docs/ or bench/ does not make another binary, so it
/// neither sets the flag nor reruns this script (which would rebuild the
/// crate for nothing). Git is asked without writing anything: `git diff`
/// with optional locks off never refreshes .git/index, and the index is
/// not watched (`git status` rewrote it, so `make test` after `make demo`
/// rebuilt the whole crate).
fn embed_git_state() {
    let git = |args: &[&str]| -> Option<(bool, String)> {
        let out = Command::new("git")
            .env("GIT_OPTIONAL_LOCKS", "0")
            .args(args)
            .output()
            .ok()?;
        let text = String::from_utf8_lossy(&out.stdout).trim().to_string();
        Some((out.status.success(), text))
    };
    let ok = |args: &[&str]| git(args).filter(|(ok, _)| *ok).map(|(_, t)| t);
    let commit = ok(&["rev-parse", "HEAD"]).filter(|c| !c.is_empty());
    let mut diff = vec!["diff", "--quiet", "HEAD", "--"];
    diff.extend(BUILD_INPUTS);
    // Untracked files under src/ change the binary too (a new module).
    let mut untracked = vec!["ls-files", "--others", "--exclude-standard", "--"];
    untracked.extend(BUILD_INPUTS);
    let dirty = match (&commit, git(&diff), ok(&untracked)) {
        (Some(_), Some((clean, _)), Some(new)) => (!clean || !new.is_empty()).to_string(),
        _ => "unknown".to_string(),
    };
    println!(
        "cargo:rustc-env=SOCKSCOPE_GIT_COMMIT={}",
        commit.as_deref().unwrap_or("unknown")
    );
    println!("cargo:rustc-env=SOCKSCOPE_GIT_DIRTY={dirty}");
    // Re-run when the commit moves (HEAD, or the branch it names) or an
    // input changes (a directory is scanned recursively).
    if let Some(dir) = ok(&["rev-parse", "--git-dir"]) {
        println!(
            "cargo:rerun-if-changed={}",
            Path::new(&dir).join("HEAD").display()
        );
        if let Some(common) = ok(&["rev-parse", "--git-common-dir"]) {
            // Only the branch this checkout is on: watching all of refs/
            // rebuilt every worktree's crate on a commit in any of them.
            // A watched file that does not exist reruns the script on
            // every build, hence the tests.
            if let Some(branch) = ok(&["symbolic-ref", "-q", "HEAD"]) {
                let loose = Path::new(&common).join(&branch);
                if loose.exists() {
                    println!("cargo:rerun-if-changed={}", loose.display());
                }
            }
            let packed = Path::new(&common).join("packed-refs");
            if packed.exists() {
                println!("cargo:rerun-if-changed={}", packed.display());
            }
        }
    }
    for p in BUILD_INPUTS {
        println!("cargo:rerun-if-changed={p}");
    }
}
