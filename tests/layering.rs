//! The layering rules of docs/architecture.md, checked on the source so
//! they cannot drift again silently:
//!
//! - `report/` is a leaf: it imports only `stats`, `proto`, `output` and
//!   `text`
//!   (never `run`, `serve`, `load`, `trace`, ...);
//! - nothing outside `cli/` and `main.rs` imports `cli`;
//! - no import circle between top-level modules, nor between the files
//!   (or folders) that sit side by side in one folder;
//! - no source file has more than 800 lines before its unit tests
//!   (generated tables aside);
//! - every tests/*.rs file is built into exactly one test binary (Cargo.toml
//!   lists them; autotests is off), and every test of the `quiet` binary
//!   takes `common::serial()`.
//!
//! The reader is deliberately small: it strips comments, strings and
//! `#[cfg(test)]` items, then follows every `crate::`, `super::` and
//! `self::` path (in `use` trees and in code) to the longest module prefix
//! that is a file under src/. Needs nothing but the source tree.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// Lines a file may have before its `#[cfg(test)]`.
const MAX_LINES: usize = 800;
/// Generated files, exempt from the size rule.
const GENERATED: &[&str] = &["probe/syscall_names.rs"];
/// What `report/` may import besides itself.
const REPORT_MAY_IMPORT: &[&str] = &["stats", "proto", "output", "text"];

type Module = Vec<String>;

/// One source file: its module path and its text without comments,
/// strings and test items.
struct Source {
    rel: String,
    module: Module,
    code: String,
}

fn src_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// `load/http/mod.rs` -> [load, http]; `lib.rs` -> [].
fn module_of(rel: &str) -> Module {
    let mut parts: Vec<String> = rel
        .trim_end_matches(".rs")
        .split('/')
        .map(String::from)
        .collect();
    if matches!(
        parts.last().map(String::as_str),
        Some("mod" | "lib" | "main")
    ) {
        parts.pop();
    }
    parts
}

/// Replaces comments, string and char literals with spaces (newlines
/// kept, so offsets still give line numbers).
fn strip(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = String::with_capacity(s.len());
    let blank = |out: &mut String, text: &[u8]| {
        for &c in text {
            out.push(if c == b'\n' { '\n' } else { ' ' });
        }
    };
    let mut i = 0;
    while i < b.len() {
        let rest = &b[i..];
        if rest.starts_with(b"//") {
            let end = rest.iter().position(|&c| c == b'\n').unwrap_or(rest.len());
            blank(&mut out, &rest[..end]);
            i += end;
        } else if rest.starts_with(b"/*") {
            let (mut depth, mut j) = (0usize, 0usize);
            while j < rest.len() {
                if rest[j..].starts_with(b"/*") {
                    depth += 1;
                    j += 2;
                } else if rest[j..].starts_with(b"*/") {
                    depth -= 1;
                    j += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    j += 1;
                }
            }
            blank(&mut out, &rest[..j]);
            i += j;
        } else if let Some(len) = raw_string_len(rest) {
            blank(&mut out, &rest[..len]);
            i += len;
        } else if rest[0] == b'"' || rest.starts_with(b"b\"") {
            let mut j = if rest[0] == b'"' { 1 } else { 2 };
            while j < rest.len() && rest[j] != b'"' {
                j += if rest[j] == b'\\' { 2 } else { 1 };
            }
            let end = (j + 1).min(rest.len());
            blank(&mut out, &rest[..end]);
            i += end;
        } else if rest[0] == b'\'' && char_literal_len(rest).is_some() {
            let len = char_literal_len(rest).unwrap();
            blank(&mut out, &rest[..len]);
            i += len;
        } else {
            // Whole UTF-8 characters: identifiers may follow.
            let ch = s[i..].chars().next().unwrap();
            out.push(ch);
            i += ch.len_utf8();
        }
    }
    out
}

/// `r"..."`, `r#"..."#`, `br"..."`: the literal's length.
fn raw_string_len(rest: &[u8]) -> Option<usize> {
    let start = if rest.starts_with(b"br") {
        2
    } else if rest.starts_with(b"r") {
        1
    } else {
        return None;
    };
    let hashes = rest[start..].iter().take_while(|&&c| c == b'#').count();
    if rest.get(start + hashes) != Some(&b'"') {
        return None;
    }
    let mut close = vec![b'"'];
    close.extend(std::iter::repeat_n(b'#', hashes));
    let body = start + hashes + 1;
    let end = rest[body..]
        .windows(close.len())
        .position(|w| w == close.as_slice())?;
    Some(body + end + close.len())
}

/// `'x'`, `'\n'`, `'\''`, `'\u{..}'` (not a lifetime): its length.
fn char_literal_len(rest: &[u8]) -> Option<usize> {
    if rest.get(1) == Some(&b'\\') {
        let end = rest[2..].iter().position(|&c| c == b'\'')?;
        return (end < 10).then_some(end + 3);
    }
    let s = std::str::from_utf8(&rest[1..rest.len().min(6)])
        .ok()
        .or_else(|| {
            // A cut in the middle of a character: try shorter.
            (1..5)
                .rev()
                .find_map(|n| std::str::from_utf8(&rest[1..(1 + n).min(rest.len())]).ok())
        })?;
    let c = s.chars().next()?;
    let after = 1 + c.len_utf8();
    (rest.get(after) == Some(&b'\'')).then_some(after + 1)
}

/// Blanks every item behind `#[cfg(test)]` (a `mod tests { ... }` or a
/// single item up to its `;` or closing brace).
fn drop_test_items(code: &str) -> String {
    let mut out = code.to_string();
    let mut from = 0;
    while let Some(pos) = out[from..].find("#[cfg(test)]") {
        let start = from + pos;
        let b = out.as_bytes();
        let mut j = start + "#[cfg(test)]".len();
        // A struct field's or a field initialiser's attribute (`tick_ns:
        // u64,`): its item ends at the next comma, or at the brace that
        // closes its block.
        let item = out[j..].trim_start();
        let field = item.split_once(':').is_some_and(|(head, rest)| {
            !head.is_empty()
                && head.chars().all(|c| c.is_alphanumeric() || c == '_')
                && !rest.starts_with(':')
        });
        let mut depth = 0usize;
        while j < b.len() {
            match b[j] {
                b'{' => depth += 1,
                b'}' if depth == 0 => break,
                b',' if depth == 0 && field => {
                    j += 1;
                    break;
                }
                b'}' => {
                    depth -= 1;
                    if depth == 0 {
                        j += 1;
                        break;
                    }
                }
                b';' if depth == 0 => {
                    j += 1;
                    break;
                }
                _ => {}
            }
            j += 1;
        }
        let blanked: String = out[start..j]
            .chars()
            .map(|c| if c == '\n' { '\n' } else { ' ' })
            .collect();
        out.replace_range(start..j, &blanked);
        from = j;
    }
    out
}

fn sources() -> Vec<Source> {
    let root = src_dir();
    let mut files = Vec::new();
    rust_files(&root, &mut files);
    files.sort();
    files
        .iter()
        .map(|p| {
            let rel = p
                .strip_prefix(&root)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            let text = fs::read_to_string(p).unwrap();
            Source {
                module: module_of(&rel),
                code: drop_test_items(&strip(&text)),
                rel,
            }
        })
        .collect()
}

/// Expands a `use` tree (`a::{b, c::{d, e as f}}`) into paths.
fn expand_use(tree: &str) -> Vec<Vec<String>> {
    fn split_top(s: &str) -> Vec<&str> {
        let (mut depth, mut last, mut parts) = (0i32, 0usize, Vec::new());
        for (i, c) in s.char_indices() {
            match c {
                '{' => depth += 1,
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    parts.push(&s[last..i]);
                    last = i + 1;
                }
                _ => {}
            }
        }
        parts.push(&s[last..]);
        parts
    }
    fn walk(prefix: &[String], tree: &str, out: &mut Vec<Vec<String>>) {
        for part in split_top(tree) {
            let part = part.trim();
            if part.is_empty() {
                continue;
            }
            if let Some(open) = part.find('{') {
                let head: Vec<String> = part[..open]
                    .split("::")
                    .map(str::trim)
                    .filter(|x| !x.is_empty())
                    .map(String::from)
                    .collect();
                let inner = &part[open + 1..part.rfind('}').unwrap_or(part.len())];
                let mut p = prefix.to_vec();
                p.extend(head);
                walk(&p, inner, out);
            } else {
                let path = part.split(" as ").next().unwrap();
                let mut p = prefix.to_vec();
                p.extend(
                    path.split("::")
                        .map(str::trim)
                        .filter(|x| !x.is_empty())
                        .map(String::from),
                );
                out.push(p);
            }
        }
    }
    let compact: String = tree.split_whitespace().collect::<Vec<_>>().join(" ");
    let mut out = Vec::new();
    walk(&[], &compact, &mut out);
    out
}

/// Every module path `src` refers to, with the line it is on.
fn imports(src: &Source, known: &BTreeSet<Module>) -> Vec<(Module, usize)> {
    let code = &src.code;
    let line_of = |off: usize| code[..off].matches('\n').count() + 1;
    let mut paths: Vec<(Vec<String>, usize)> = Vec::new();
    // `use` trees.
    let mut from = 0;
    while let Some(p) = code[from..].find("use ") {
        let at = from + p;
        from = at + 4;
        let before = code[..at].chars().next_back();
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue;
        }
        let Some(end) = code[at..].find(';') else {
            break;
        };
        let tree = code[at + 4..at + end].trim();
        if tree.starts_with("crate") || tree.starts_with("super") || tree.starts_with("self") {
            for p in expand_use(tree) {
                paths.push((p, line_of(at)));
            }
        }
    }
    // Paths in code: crate::a::b, super::x, self::y.
    let bytes = code.as_bytes();
    for kw in ["crate::", "super::", "self::"] {
        let mut from = 0;
        while let Some(p) = code[from..].find(kw) {
            let at = from + p;
            from = at + kw.len();
            if at > 0 && {
                let c = bytes[at - 1];
                c.is_ascii_alphanumeric() || c == b'_' || c == b':'
            } {
                continue;
            }
            let mut end = at;
            while end < bytes.len()
                && (bytes[end].is_ascii_alphanumeric() || bytes[end] == b'_' || bytes[end] == b':')
            {
                end += 1;
            }
            let p: Vec<String> = code[at..end]
                .split("::")
                .filter(|x| !x.is_empty())
                .map(String::from)
                .collect();
            paths.push((p, line_of(at)));
        }
    }
    let mut out: Vec<(Module, usize)> = Vec::new();
    for (p, line) in paths {
        if let Some(m) = resolve(&src.module, &p, known)
            && m != src.module
        {
            match out.iter_mut().find(|(seen, _)| *seen == m) {
                Some(first) => first.1 = first.1.min(line),
                None => out.push((m, line)),
            }
        }
    }
    out
}

/// The longest prefix of `path` (relative to `cur`) that is a module.
fn resolve(cur: &Module, path: &[String], known: &BTreeSet<Module>) -> Option<Module> {
    let (mut base, mut rest) = match path.first().map(String::as_str) {
        Some("crate") => (Vec::new(), &path[1..]),
        Some("self") => (cur.clone(), &path[1..]),
        Some("super") => (cur.clone(), path),
        _ => return None,
    };
    while rest.first().map(String::as_str) == Some("super") {
        base.pop();
        rest = &rest[1..];
    }
    (0..=rest.len()).rev().find_map(|k| {
        let mut m = base.clone();
        m.extend(rest[..k].iter().cloned());
        known.contains(&m).then_some(m)
    })
}

/// Edges between modules, each with the first place that makes it.
fn graph(srcs: &[Source]) -> BTreeMap<(Module, Module), String> {
    let known: BTreeSet<Module> = srcs.iter().map(|s| s.module.clone()).collect();
    let mut edges = BTreeMap::new();
    for s in srcs {
        for (m, line) in imports(s, &known) {
            edges
                .entry((s.module.clone(), m))
                .or_insert_with(|| format!("src/{}:{line}", s.rel));
        }
    }
    edges
}

/// Strongly connected components with more than one node.
fn cycles(edges: &BTreeMap<(String, String), String>) -> Vec<Vec<String>> {
    let nodes: BTreeSet<&String> = edges.keys().flat_map(|(a, b)| [a, b]).collect();
    let succ = |n: &String| -> Vec<&String> {
        edges
            .keys()
            .filter(|(a, _)| a == n)
            .map(|(_, b)| b)
            .collect()
    };
    // Kosaraju on a small graph: reachability is enough.
    let reach = |from: &String| -> BTreeSet<String> {
        let mut seen = BTreeSet::new();
        let mut stack = vec![from.clone()];
        while let Some(n) = stack.pop() {
            for m in succ(&n) {
                if seen.insert(m.clone()) {
                    stack.push(m.clone());
                }
            }
        }
        seen
    };
    let r: BTreeMap<&String, BTreeSet<String>> = nodes.iter().map(|n| (*n, reach(n))).collect();
    let mut done = BTreeSet::new();
    let mut out = Vec::new();
    for n in &nodes {
        if done.contains(*n) || !r[n].contains(*n) {
            continue;
        }
        let comp: Vec<String> = nodes
            .iter()
            .filter(|m| r[n].contains(**m) && r[*m].contains(*n))
            .map(|m| m.to_string())
            .collect();
        done.extend(comp.iter().cloned());
        if comp.len() > 1 {
            out.push(comp);
        }
    }
    out
}

fn describe(comp: &[String], edges: &BTreeMap<(String, String), String>) -> String {
    let mut lines = vec![format!("circle: {}", comp.join(" <-> "))];
    for ((a, b), at) in edges {
        if comp.contains(a) && comp.contains(b) {
            lines.push(format!("  {a} -> {b} ({at})"));
        }
    }
    lines.join("\n")
}

#[test]
fn report_is_a_leaf() {
    let srcs = sources();
    let bad: Vec<String> = graph(&srcs)
        .into_iter()
        .filter(|((a, b), _)| {
            a.first().map(String::as_str) == Some("report")
                && b.first()
                    .is_some_and(|t| t != "report" && !REPORT_MAY_IMPORT.contains(&t.as_str()))
        })
        .map(|((_, b), at)| format!("{at} imports crate::{}", b.join("::")))
        .collect();
    assert!(
        bad.is_empty(),
        "report/ may import only {REPORT_MAY_IMPORT:?}:\n{}",
        bad.join("\n")
    );
}

#[test]
fn only_cli_and_main_import_cli() {
    let srcs = sources();
    let bad: Vec<String> = graph(&srcs)
        .into_iter()
        .filter(|((a, b), _)| {
            b.first().map(String::as_str) == Some("cli")
                && a.first().map(String::as_str) != Some("cli")
        })
        .map(|(_, at)| format!("{at} imports crate::cli"))
        .collect();
    // main.rs is the binary crate: it reaches the library as `sockscope::`,
    // which the resolver above does not follow, so it is allowed by design.
    assert!(
        bad.is_empty(),
        "only cli/ and main.rs may import cli:\n{}",
        bad.join("\n")
    );
}

#[test]
fn no_circle_between_top_level_modules() {
    let srcs: Vec<Source> = sources()
        .into_iter()
        .filter(|s| s.rel != "main.rs")
        .collect();
    let mut top = BTreeMap::new();
    for ((a, b), at) in graph(&srcs) {
        let (Some(ta), Some(tb)) = (a.first(), b.first()) else {
            continue;
        };
        if ta != tb {
            top.entry((ta.clone(), tb.clone())).or_insert(at);
        }
    }
    let found: Vec<String> = cycles(&top).iter().map(|c| describe(c, &top)).collect();
    assert!(found.is_empty(), "{}", found.join("\n"));
}

#[test]
fn no_circle_between_siblings() {
    let srcs: Vec<Source> = sources()
        .into_iter()
        .filter(|s| s.rel != "main.rs")
        .collect();
    // An edge a -> b counts between the children of their deepest common
    // folder: trace/scope/x -> trace/bpf is trace/scope -> trace/bpf. A
    // module and its own descendants (mod.rs and its files) are one unit.
    let mut by_parent: BTreeMap<Module, BTreeMap<(String, String), String>> = BTreeMap::new();
    for ((a, b), at) in graph(&srcs) {
        let common = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
        if common >= a.len() || common >= b.len() {
            continue;
        }
        by_parent
            .entry(a[..common].to_vec())
            .or_default()
            .entry((a[common].clone(), b[common].clone()))
            .or_insert(at);
    }
    let mut found = Vec::new();
    for (parent, edges) in &by_parent {
        for c in cycles(edges) {
            let name = if parent.is_empty() {
                "src".to_string()
            } else {
                format!("src/{}", parent.join("/"))
            };
            found.push(format!("in {name}: {}", describe(&c, edges)));
        }
    }
    assert!(found.is_empty(), "{}", found.join("\n"));
}

#[test]
fn no_file_over_800_lines_before_its_tests() {
    let root = src_dir();
    let mut files = Vec::new();
    rust_files(&root, &mut files);
    let mut bad = Vec::new();
    for p in files {
        let rel = p
            .strip_prefix(&root)
            .unwrap()
            .to_string_lossy()
            .into_owned();
        if GENERATED.contains(&rel.as_str()) {
            continue;
        }
        let text = fs::read_to_string(&p).unwrap();
        let lines = text
            .lines()
            .take_while(|l| l.trim() != "#[cfg(test)]")
            .count();
        if lines > MAX_LINES {
            bad.push(format!("src/{rel}: {lines} lines before its tests"));
        }
    }
    bad.sort();
    assert!(
        bad.is_empty(),
        "files over {MAX_LINES} lines:\n{}",
        bad.join("\n")
    );
}

// The reader itself: what it must see and must not.

#[test]
fn reader_sees_grouped_and_nested_use_trees() {
    let got = expand_use("crate::{error, load::{self, spec::LoadSpec as S}, report}");
    let want: Vec<Vec<String>> = [
        vec!["crate", "error"],
        vec!["crate", "load", "self"],
        vec!["crate", "load", "spec", "LoadSpec"],
        vec!["crate", "report"],
    ]
    .iter()
    .map(|v| v.iter().map(|s| s.to_string()).collect())
    .collect();
    assert_eq!(got, want);
}

#[test]
fn reader_ignores_comments_strings_and_tests() {
    let text = "//! crate::cli in a doc\nlet s = \"crate::cli\";\nlet r = r#\"crate::cli\"#;\n\
                let c = '\"'; let l: &'static str = x;\n/* crate::cli */\n\
                #[cfg(test)]\nmod tests { use crate::cli; }\nuse crate::report;\n";
    let src = Source {
        rel: "load/x.rs".into(),
        module: vec!["load".into(), "x".into()],
        code: drop_test_items(&strip(text)),
    };
    let known: BTreeSet<Module> = [vec!["cli".to_string()], vec!["report".to_string()]]
        .into_iter()
        .collect();
    let got: Vec<Module> = imports(&src, &known).into_iter().map(|(m, _)| m).collect();
    assert_eq!(got, vec![vec!["report".to_string()]]);
}

#[test]
fn a_test_only_field_hides_itself_and_not_the_rest_of_the_file() {
    let text = "struct T {\n    #[cfg(test)]\n    tick: u64,\n    n: u64,\n}\n\
                fn t() -> T { T { #[cfg(test)] tick: 0, n: 0 } }\n\
                struct L {\n    #[cfg(test)]\n    last: u64\n}\nuse crate::report;\n";
    let code = drop_test_items(&strip(text));
    assert!(!code.contains("tick") && !code.contains("last"), "{code}");
    assert!(code.contains("n: u64") && code.contains("n: 0"), "{code}");
    assert!(code.contains("use crate::report;"), "{code}");
}

#[test]
fn reader_resolves_super_to_siblings() {
    let known: BTreeSet<Module> = [
        vec!["load".to_string()],
        vec!["load".to_string(), "tls".to_string()],
    ]
    .into_iter()
    .collect();
    let cur = vec!["load".to_string(), "driver".to_string()];
    let p: Vec<String> = ["super", "tls", "TlsSpec"].map(String::from).to_vec();
    assert_eq!(
        resolve(&cur, &p, &known),
        Some(vec!["load".to_string(), "tls".to_string()])
    );
    let p: Vec<String> = ["super", "ConnTally"].map(String::from).to_vec();
    assert_eq!(resolve(&cur, &p, &known), Some(vec!["load".to_string()]));
}

/// Top-level modules that may import `trace` besides itself: `metrics`
/// (which reads its snapshots), and the two layers above every measuring
/// module: `cli` (which builds the tracer's options) and `run` (whose
/// commands drive it). The BPF plumbing other modules share is `probe`.
const TRACE_MAY_BE_IMPORTED_BY: &[&str] = &["trace", "metrics", "cli", "run"];

#[test]
fn only_metrics_cli_and_run_import_trace() {
    let srcs = sources();
    let bad: Vec<String> = graph(&srcs)
        .into_iter()
        .filter(|((a, b), _)| {
            b.first().map(String::as_str) == Some("trace")
                && a.first()
                    .is_some_and(|t| !TRACE_MAY_BE_IMPORTED_BY.contains(&t.as_str()))
        })
        .map(|((_, b), at)| format!("{at} imports crate::{}", b.join("::")))
        .collect();
    assert!(
        bad.is_empty(),
        "only {TRACE_MAY_BE_IMPORTED_BY:?} may import trace (the shared BPF plumbing is \
         crate::probe):\n{}",
        bad.join("\n")
    );
}

/// The library paths src/main.rs names (`sockscope::a::b`), with lines.
fn main_paths() -> Vec<(String, usize)> {
    let text = fs::read_to_string(src_dir().join("main.rs")).unwrap();
    let code = strip(&text);
    let mut out = Vec::new();
    for (n, line) in code.lines().enumerate() {
        let mut rest = line;
        while let Some(p) = rest.find("sockscope::") {
            let tail = &rest[p + "sockscope::".len()..];
            let end = tail
                .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':' || c == '{'))
                .unwrap_or(tail.len());
            out.push((tail[..end].to_string(), n + 1));
            rest = &tail[end..];
        }
    }
    out
}

#[test]
fn main_calls_only_cli_and_run() {
    let text = fs::read_to_string(src_dir().join("main.rs")).unwrap();
    let code = strip(&text);
    let bad: Vec<String> = main_paths()
        .into_iter()
        .filter(|(p, _)| {
            let head = p.trim_start_matches('{');
            !(head.starts_with("cli") || head.starts_with("run"))
        })
        .map(|(p, n)| format!("src/main.rs:{n}: sockscope::{p}"))
        .collect();
    assert!(
        bad.is_empty(),
        "main.rs parses with cli and dispatches into run only:\n{}",
        bad.join("\n")
    );
    // Every dispatch arm calls one run:: function.
    let dispatch = &code[code.find("fn dispatch").expect("main.rs has dispatch")..];
    for arm in dispatch.split("=>").skip(1) {
        let call = arm.trim_start();
        assert!(
            call.starts_with("run::"),
            "a dispatch arm of main.rs calls {:?}, not run::",
            call.lines().next().unwrap_or("")
        );
    }
}

#[test]
fn every_top_level_module_is_in_architecture_md() {
    let lib = strip(&fs::read_to_string(src_dir().join("lib.rs")).unwrap());
    let arch =
        fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/architecture.md"))
            .unwrap();
    let mut missing = Vec::new();
    for line in lib.lines() {
        let l = line.trim();
        let Some(name) = l
            .strip_prefix("pub mod ")
            .or_else(|| l.strip_prefix("pub(crate) mod "))
            .or_else(|| l.strip_prefix("mod "))
            .and_then(|r| r.strip_suffix(';'))
        else {
            continue;
        };
        // Test support compiled only for unit tests.
        if name == "hostile" {
            continue;
        }
        let named = [
            format!("`src/{name}/`"),
            format!("`src/{name}.rs`"),
            format!("`{name}`"),
            format!("`{name}/`"),
        ];
        if !named.iter().any(|n| arch.contains(n.as_str())) {
            missing.push(name.to_string());
        }
    }
    assert!(
        missing.is_empty(),
        "modules of lib.rs that docs/architecture.md does not name: {missing:?}"
    );
}

#[test]
fn every_crate_in_cargo_toml_is_in_dependencies_md() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let toml = fs::read_to_string(root.join("Cargo.toml")).unwrap();
    let deps = fs::read_to_string(root.join("docs/dependencies.md")).unwrap();
    let mut section = String::new();
    let mut missing = Vec::new();
    for line in toml.lines() {
        let l = line.trim();
        if l.starts_with('[') {
            section = l.to_string();
            continue;
        }
        if !section.ends_with("dependencies]") || l.is_empty() || l.starts_with('#') {
            continue;
        }
        let Some(name) = l.split('=').next().map(str::trim) else {
            continue;
        };
        if !deps.contains(&format!("`{name}`")) {
            missing.push(format!("{name} ({section})"));
        }
    }
    assert!(
        missing.is_empty(),
        "crates in Cargo.toml that docs/dependencies.md does not name (as `name`): {missing:?}"
    );
}

/// Cargo.toml's `[[test]]` binaries: (name, path).
fn test_binaries() -> Vec<(String, String)> {
    let toml =
        fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml")).unwrap();
    let value = |line: &str, key: &str| {
        let rest = line.strip_prefix(key)?.trim_start().strip_prefix('=')?;
        Some(rest.trim().trim_matches('"').to_string())
    };
    let mut out = Vec::new();
    let mut in_test = false;
    let (mut name, mut path) = (None, None);
    for line in toml.lines().map(str::trim).chain(["[end]"]) {
        if line.starts_with('[') {
            if let (true, Some(n), Some(p)) = (in_test, name.take(), path.take()) {
                out.push((n, p));
            }
            in_test = line == "[[test]]";
            continue;
        }
        if in_test {
            name = value(line, "name").or(name);
            path = value(line, "path").or(path);
        }
    }
    out
}

/// The tests/*.rs files a suite root includes (`#[path = "../X.rs"]`;
/// `common/mod.rs`, in every suite, is not one).
fn suite_files(root: &str) -> Vec<String> {
    let text = fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(root)).unwrap();
    text.lines()
        .filter_map(|l| l.trim().strip_prefix("#[path = \"../")?.strip_suffix("\"]"))
        .filter(|f| !f.contains('/'))
        .map(|f| format!("tests/{f}"))
        .collect()
}

#[test]
fn every_test_file_is_in_exactly_one_test_binary() {
    let tests = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests");
    let mut count: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for e in fs::read_dir(&tests).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "rs") {
            let name = p.file_name().unwrap().to_str().unwrap();
            count.insert(format!("tests/{name}"), Vec::new());
        }
    }
    let binaries = test_binaries();
    assert!(
        binaries.len() >= 2,
        "no [[test]] in Cargo.toml: {binaries:?}"
    );
    for (bin, path) in &binaries {
        let files = if path.starts_with("tests/suites/") {
            suite_files(path)
        } else {
            vec![path.clone()]
        };
        for f in files {
            match count.get_mut(&f) {
                Some(by) => by.push(bin.clone()),
                None => panic!("{bin} names {f}, which is not a file under tests/"),
            }
        }
    }
    let wrong: Vec<_> = count.iter().filter(|(_, by)| by.len() != 1).collect();
    assert!(
        wrong.is_empty(),
        "tests/*.rs files not in exactly one [[test]] binary (a file in none is never built): {wrong:?}"
    );
}

#[test]
fn every_test_of_the_quiet_binary_takes_the_serial_lock() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut checked = 0;
    for f in suite_files("tests/suites/quiet.rs") {
        let text = fs::read_to_string(root.join(&f)).unwrap();
        for (at, _) in text.match_indices("#[test]") {
            // The test function runs to the first closing brace in the
            // first column (rustfmt's layout).
            let body = &text[at..at + text[at..].find("\n}\n").unwrap()];
            let name = body.lines().nth(1).unwrap_or("?");
            assert!(
                body.contains("serial()"),
                "{f}: {name} does not take common::serial()"
            );
            checked += 1;
        }
    }
    assert!(checked > 0, "no test found in the quiet binary");
}
