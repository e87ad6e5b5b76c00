//! The stack sampling options `trace` and `profile` share (`--stack-hz`,
//! `--off-cpu`, `--stacks-folded`, `--offcpu-folded`, `--stacks-pprof`,
//! `--offcpu-pprof`, and the tail's `--tail`, `--tail-folded`,
//! `--rest-folded`), and their validation into
//! [`crate::stacks::StacksOptions`].

use std::path::PathBuf;

use anyhow::Result;
use clap::Args;

use crate::anatomy::TailSpec;
use crate::error;
use crate::stacks::{DEFAULT_HZ, MAX_HZ, StacksOptions};

/// How stacks are sampled and where their folded text goes.
#[derive(Args, Debug, Clone)]
pub struct StackArgs {
    /// cpu-clock samples per second per CPU of the target's on-CPU stacks
    /// (1..=1000; default 99).
    #[arg(long, value_name = "HZ")]
    pub stack_hz: Option<u32>,

    /// Also sample off-CPU time ("where it waits": the target's threads
    /// switched out asleep until woken, weighted by time). It hooks every
    /// context switch, wake-up and syscall exit of the machine, which
    /// costs far more than the on-CPU samples on a busy server
    /// (docs/stacks.md#cost), so it is asked for.
    #[arg(long)]
    pub off_cpu: bool,

    /// Also write the on-CPU stacks, folded (one `frame;frame;... count`
    /// line per stack: flamegraph.pl's and inferno's input), to FILE.
    #[arg(long, value_name = "FILE")]
    pub stacks_folded: Option<PathBuf>,

    /// Also write the off-CPU stacks, folded, weighted in nanoseconds of
    /// waiting, to FILE.
    #[arg(long, value_name = "FILE")]
    pub offcpu_folded: Option<PathBuf>,

    /// Also write the on-CPU stacks as a pprof profile (gzip'd
    /// profile.proto: `go tool pprof`, Pyroscope, Parca, speedscope) to
    /// FILE; samples are labelled with process, thread and, with a tail,
    /// requests=tail|rest|other.
    #[arg(long, value_name = "FILE")]
    pub stacks_pprof: Option<PathBuf>,

    /// Also write the off-CPU stacks as a pprof profile (nanoseconds
    /// waited) to FILE.
    #[arg(long, value_name = "FILE")]
    pub offcpu_pprof: Option<PathBuf>,

    /// Where the slow requests begin, for the tail's stacks (with the
    /// request anatomy): a percentile of the window's server time (p99,
    /// p99.9) or a server time (5ms). Samples taken while a thread served
    /// a request go to the tail or the rest by its server time.
    #[arg(long, value_name = "p99|TIME")]
    pub tail: Option<String>,

    /// Also write the on-CPU stacks of the tail's requests, folded, to FILE.
    #[arg(long, value_name = "FILE")]
    pub tail_folded: Option<PathBuf>,

    /// Also write the on-CPU stacks of the other requests (the rest),
    /// folded, to FILE.
    #[arg(long, value_name = "FILE")]
    pub rest_folded: Option<PathBuf>,
}

impl StackArgs {
    /// Whether any option differs from its default (for "only with
    /// stacks" checks).
    pub fn any_set(&self) -> bool {
        self.stack_hz.is_some()
            || self.off_cpu
            || self.stacks_folded.is_some()
            || self.offcpu_folded.is_some()
            || self.stacks_pprof.is_some()
            || self.offcpu_pprof.is_some()
            || self.tail.is_some()
            || self.tail_folded.is_some()
            || self.rest_folded.is_some()
    }

    /// The validated options (usage errors, exit 2).
    pub fn into_options(self) -> Result<StacksOptions> {
        let hz = self.stack_hz.unwrap_or(DEFAULT_HZ);
        if hz == 0 || hz > MAX_HZ {
            return Err(error::usage(format!(
                "--stack-hz {hz}: between 1 and {MAX_HZ} samples per second per CPU"
            )));
        }
        // Every file the options name: (flag, path, whether it holds the
        // off-CPU stacks, which only --off-cpu samples).
        let files = [
            ("--stacks-folded", &self.stacks_folded, false),
            ("--offcpu-folded", &self.offcpu_folded, true),
            ("--tail-folded", &self.tail_folded, false),
            ("--rest-folded", &self.rest_folded, false),
            ("--stacks-pprof", &self.stacks_pprof, false),
            ("--offcpu-pprof", &self.offcpu_pprof, true),
        ];
        for (flag, path, off) in &files {
            let Some(p) = path else { continue };
            if *off && !self.off_cpu {
                return Err(error::usage(format!(
                    "{flag} writes the off-CPU stacks, which only --off-cpu samples"
                )));
            }
            crate::output::check(p, flag)?;
        }
        let tail = match &self.tail {
            Some(t) => TailSpec::parse(t).map_err(error::usage)?,
            None => TailSpec::default(),
        };
        for (i, (a, pa, _)) in files.iter().enumerate() {
            for (b, pb, _) in &files[i + 1..] {
                if let (Some(x), Some(y)) = (pa, pb)
                    && x == y
                {
                    return Err(error::usage(format!(
                        "{a} and {b} name the same file; give each its own"
                    )));
                }
            }
        }
        Ok(StacksOptions {
            hz,
            off_cpu: self.off_cpu,
            folded: self.stacks_folded,
            offcpu_folded: self.offcpu_folded,
            tail,
            tail_folded: self.tail_folded,
            rest_folded: self.rest_folded,
            pprof: self.stacks_pprof,
            offcpu_pprof: self.offcpu_pprof,
        })
    }
}
