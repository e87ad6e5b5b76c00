//! deploy/k8s stays true: its YAML parses, the generators are an Indexed
//! Job with completions = parallelism, every pod gets the same
//! --start-at and writes its artifact under its index on the shared
//! volume, the merge Job reads them from there, and every sockscope flag
//! the manifests use exists in this build (`--help` of each command).

use crate::common;

use std::collections::BTreeMap;
use std::path::Path;

use yaml_rust2::{Yaml, YamlLoader};

/// Every YAML document of deploy/k8s/*.yaml, with the file it came from.
fn documents() -> Vec<(String, Yaml)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/k8s");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    assert!(files.len() >= 3, "{files:?}");
    let mut docs = Vec::new();
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap();
        let parsed =
            YamlLoader::load_from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        for d in parsed {
            docs.push((f.display().to_string(), d));
        }
    }
    docs
}

fn by_kind_and_name<'a>(docs: &'a [(String, Yaml)], kind: &str, name: &str) -> &'a Yaml {
    &docs
        .iter()
        .find(|(_, d)| {
            d["kind"].as_str() == Some(kind) && d["metadata"]["name"].as_str() == Some(name)
        })
        .unwrap_or_else(|| panic!("no {kind} {name} in deploy/k8s"))
        .1
}

fn strings(y: &Yaml) -> Vec<String> {
    y.as_vec()
        .unwrap_or_else(|| panic!("not a list: {y:?}"))
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect()
}

/// The long and short flags a command's --help lists.
fn flags_of(command: &[&str]) -> Vec<String> {
    let mut args = command.to_vec();
    args.push("--help");
    let o = common::run(&args);
    assert!(o.status.success(), "{args:?}");
    String::from_utf8_lossy(&o.stdout)
        .split(|c: char| c.is_whitespace() || c == ',' || c == '[' || c == ']')
        .filter(|w| w.starts_with('-') && w.len() > 1)
        .map(|w| {
            w.split('=')
                .next()
                .unwrap()
                .trim_end_matches('.')
                .to_string()
        })
        .collect()
}

/// Asserts every flag in `args` is one `command --help` lists.
fn flags_exist(args: &[String], command: &[&str]) {
    let known = flags_of(command);
    for a in args.iter().filter(|a| a.starts_with('-')) {
        assert!(
            known.contains(a),
            "{a} is not a flag of `sockscope {}` (known: {known:?})",
            command.join(" ")
        );
    }
}

/// The value following `flag` in `args`.
fn after<'a>(args: &'a [String], flag: &str) -> &'a str {
    let i = args
        .iter()
        .position(|a| a == flag)
        .unwrap_or_else(|| panic!("{flag} missing from {args:?}"));
    &args[i + 1]
}

/// The volume named `name` in a pod spec must be the shared claim.
fn claim_of(pod: &Yaml, volume: &str) -> String {
    pod["volumes"]
        .as_vec()
        .unwrap()
        .iter()
        .find(|v| v["name"].as_str() == Some(volume))
        .and_then(|v| v["persistentVolumeClaim"]["claimName"].as_str())
        .unwrap_or_else(|| panic!("volume {volume} is not a persistentVolumeClaim"))
        .to_string()
}

fn results_mount(container: &Yaml) -> String {
    container["volumeMounts"]
        .as_vec()
        .unwrap()
        .iter()
        .find(|m| m["mountPath"].as_str() == Some("/results"))
        .and_then(|m| m["name"].as_str())
        .expect("/results mounted")
        .to_string()
}

#[test]
fn the_kubernetes_recipe_is_an_indexed_job_with_a_common_start_and_a_merge() {
    let docs = documents();
    let pvc = by_kind_and_name(&docs, "PersistentVolumeClaim", "sockscope-results");
    assert!(
        strings(&pvc["spec"]["accessModes"]).contains(&"ReadWriteMany".to_string()),
        "generators on several nodes need ReadWriteMany"
    );

    // The generators.
    let gens = by_kind_and_name(&docs, "Job", "sockscope-generators");
    assert_eq!(gens["apiVersion"].as_str(), Some("batch/v1"));
    let spec = &gens["spec"];
    assert_eq!(spec["completionMode"].as_str(), Some("Indexed"));
    let n = spec["completions"].as_i64().expect("completions");
    assert!(n >= 2);
    assert_eq!(
        spec["parallelism"].as_i64(),
        Some(n),
        "all N must run at once"
    );
    let pod = &spec["template"]["spec"];
    assert_eq!(pod["restartPolicy"].as_str(), Some("Never"));
    let c = &pod["containers"][0];
    let env: BTreeMap<String, &Yaml> = c["env"]
        .as_vec()
        .unwrap()
        .iter()
        .map(|e| (e["name"].as_str().unwrap().to_string(), e))
        .collect();
    assert!(
        env["START_AT"]["value"].as_str().is_some(),
        "START_AT is one value for every pod"
    );
    assert_eq!(
        env["JOB_COMPLETION_INDEX"]["valueFrom"]["fieldRef"]["fieldPath"].as_str(),
        Some("metadata.annotations['batch.kubernetes.io/job-completion-index']")
    );
    assert_eq!(strings(&c["command"]), vec!["sockscope".to_string()]);
    let args = strings(&c["args"]);
    let at = args.iter().position(|a| a == "load").expect("a load");
    assert_eq!(args[at + 1], "tcp-rr");
    assert_eq!(after(&args, "--start-at"), "$(START_AT)");
    assert_eq!(
        after(&args, "--json"),
        "/results/gen-$(JOB_COMPLETION_INDEX).json"
    );
    flags_exist(&args[..at], &[]);
    flags_exist(&args[at + 2..], &["load", "tcp-rr"]);
    // Every $(VAR) the args use is defined in env.
    for a in &args {
        if let Some(rest) = a.split("$(").nth(1) {
            let var = rest.split(')').next().unwrap();
            assert!(env.contains_key(var), "$({var}) is not in env");
        }
    }
    let claim = claim_of(pod, &results_mount(c));
    assert_eq!(claim, "sockscope-results");

    // The merge step reads what they wrote, from the same claim.
    let merge = by_kind_and_name(&docs, "Job", "sockscope-merge");
    let pod = &merge["spec"]["template"]["spec"];
    let c = &pod["containers"][0];
    assert_eq!(claim_of(pod, &results_mount(c)), "sockscope-results");
    let script = strings(&c["args"]).join(" ");
    let mut saw_merge = false;
    for step in script.split("&&") {
        let words: Vec<String> = step.split_whitespace().map(String::from).collect();
        assert_eq!(words[0], "sockscope", "{step}");
        match words[1].as_str() {
            "merge" => {
                saw_merge = true;
                assert!(
                    words.contains(&"/results/gen-*.json".to_string()),
                    "merge reads every generator's artifact: {step}"
                );
                assert_eq!(after(&words, "--out"), "/results/merged.json");
                flags_exist(&words[2..], &["merge"]);
            }
            "report" => flags_exist(&words[2..], &["report"]),
            other => panic!("unexpected step {other}"),
        }
    }
    assert!(saw_merge, "{script}");
}
