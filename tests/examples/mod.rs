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
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

mod extract;
mod run;
mod vocabulary;

use extract::{Block, excused, from_help, from_markdown};
use run::run_block;

use crate::common;

/// The longest one example may run (a profile with `-d 2` takes well
/// under half of it on a busy machine).
const LIMIT: Duration = Duration::from_secs(60);

/// Blocks run at once: most examples wait on a bounded load or window, so
/// a few overlap on 2 CPUs.
const PARALLEL: usize = 4;

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
