//! What the commands promise around the measurement: every example of the
//! docs and of `--help` run as written (tests/examples/), exit statuses and
//! their one list, the files a user names and the artifact directories,
//! `tune`, the deployment manifests, `demo --quick` rendered in Chromium, and the
//! layering rules of the source (tests/layering.rs).
//!
//! One binary for these files (docs/architecture.md, "Tests"): each file is
//! a module; their tests run on parallel threads.

#[path = "../common/mod.rs"]
mod common;

#[path = "../artifacts.rs"]
mod artifacts;
#[path = "../demo.rs"]
mod demo;
#[path = "../deploy_k8s.rs"]
mod deploy_k8s;
#[path = "../examples/mod.rs"]
mod examples;
#[path = "../exit_codes.rs"]
mod exit_codes;
#[path = "../exits.rs"]
mod exits;
#[path = "../layering.rs"]
mod layering;
#[path = "../output.rs"]
mod output;
#[path = "../tune.rs"]
mod tune;
