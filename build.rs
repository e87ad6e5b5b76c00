//! Compiles the BPF programs under src/bpf/ with clang and generates their
//! libbpf-rs skeletons into OUT_DIR.

use std::env;
use std::path::PathBuf;

use libbpf_cargo::SkeletonBuilder;

const PROGS: &[&str] = &["syscalls", "relay"];

fn main() {
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("OUT_DIR is set by cargo"));
    let arch = env::var("CARGO_CFG_TARGET_ARCH").expect("target arch is set by cargo");
    let target_arch = match arch.as_str() {
        "x86_64" => "x86",
        "aarch64" => "arm64",
        other => panic!("sockscope's BPF programs do not support {other} yet"),
    };
    for name in PROGS {
        let src = format!("src/bpf/{name}.bpf.c");
        SkeletonBuilder::new()
            .source(&src)
            .clang_args([
                "-Wall",
                "-Wno-unused-function",
                "-Isrc/bpf",
                &format!("-D__TARGET_ARCH_{target_arch}"),
            ])
            .build_and_generate(out.join(format!("{name}.skel.rs")))
            .unwrap_or_else(|e| panic!("building {src}: {e:#}"));
        println!("cargo:rerun-if-changed={src}");
    }
    println!("cargo:rerun-if-changed=src/bpf/syscalls.h");
    println!("cargo:rerun-if-changed=src/bpf/relay.h");
    println!("cargo:rerun-if-changed=src/bpf/vmlinux.h");
}
