//! The header every artifact starts with: what it is (`schema`), which
//! version of that schema (`schema_version`) and which sockscope build
//! wrote it (`build`). Every schema flattens one [`ArtifactHeader`], so the
//! three fields sit at the top level of each JSON document, as they always
//! did.
//!
//! Schema version 1 (every artifact before the header was shared) named
//! the writer differently: trace, load and the three serve artifacts had
//! `sockscope_version: "0.1.0"`, profile, bench and demo already had
//! `build`. [`upgrade_v1`] converts a version-1 document, and every
//! artifact nested in it, to version 2, so `sockscope report` and
//! `sockscope compare` still read old artifacts.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::machine::Build;

/// The schema versions `report` and `compare` read, for messages: version
/// 1 is converted by [`upgrade_v1`], 2 is the current version of every
/// artifact schema but those in [`AHEAD`] (see [`readable`]).
pub const READABLE: &str = "1 or 2";

/// The current version of every artifact schema (each schema module's
/// `SCHEMA_VERSION` is this; a schema that changes on its own bumps its
/// own and adds its conversion here).
pub const CURRENT: u32 = 2;

/// The schemas whose version moved past [`CURRENT`] on their own, with
/// their latest version. Here rather than in their modules: the header is
/// read before the schema's own type, and the files of `report/` import no
/// circle. `sockscope.profile` 3: `trace` may be absent (`profile
/// --requests-only`); 4: `load` may be absent (`--load-cmd`, observe
/// only); versions 3, 2 and 1 (converted) read as 4; 5: `sweep` and
/// `capacity`, written only by a run with steps (a single window is still
/// written as 4).
const AHEAD: &[(&str, u32)] = &[("sockscope.profile", 5)];

/// The latest version of `schema` this sockscope writes and reads.
pub fn latest(schema: &str) -> u32 {
    AHEAD
        .iter()
        .find(|(s, _)| *s == schema)
        .map_or(CURRENT, |(_, v)| *v)
}

/// The versions of `schema` this sockscope reads, for messages.
pub fn readable(schema: &str) -> &'static str {
    match latest(schema) {
        5 => "1, 2, 3, 4 or 5",
        _ => READABLE,
    }
}

/// What an artifact is and who wrote it; `#[serde(flatten)]`-ed into every
/// artifact schema.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ArtifactHeader {
    /// `sockscope.trace`, `sockscope.load`, `sockscope.profile`... (each
    /// schema module's `SCHEMA`).
    pub schema: String,
    /// Bumped on any incompatible change to that schema.
    pub schema_version: u32,
    /// The sockscope build that wrote it.
    pub build: Build,
}

impl ArtifactHeader {
    /// The header of an artifact of `schema` version `version` written by
    /// this binary.
    pub fn new(schema: &str, version: u32) -> Self {
        Self {
            schema: schema.to_string(),
            schema_version: version,
            build: Build::current(),
        }
    }
}

/// Why an artifact's `schema_version` is not one this sockscope reads,
/// with the value as found (its JSON text, shortened): a message says
/// `schema_version "2" is not a number`, not "version 0".
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BadVersion {
    /// No `schema_version` field.
    Missing,
    /// A string, a boolean, an object...: not a number.
    NotANumber(String),
    /// A number that is no version this sockscope reads (-1, 2.5, 9).
    Unsupported(String),
}

impl std::fmt::Display for BadVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Missing => write!(f, "schema_version is missing"),
            Self::NotANumber(v) => write!(f, "schema_version {v} is not a number"),
            Self::Unsupported(v) => write!(f, "schema_version {v} is not a supported version"),
        }
    }
}

/// The most characters of a bad `schema_version` a message quotes.
const QUOTED: usize = 40;

/// Brings an artifact's JSON to the current header: a version-1 document
/// is converted in place (see [`upgrade_v1`]); Err says what was found
/// when it is neither 1 nor from [`CURRENT`] to its schema's [`latest`],
/// so the caller can say what it reads ([`readable`]).
pub fn upgrade(v: &mut Value) -> Result<(), BadVersion> {
    let latest = latest(v.get("schema").and_then(Value::as_str).unwrap_or(""));
    let found = match v.get("schema_version") {
        None => return Err(BadVersion::Missing),
        Some(found) => found,
    };
    match found.as_u64() {
        Some(1) => {
            upgrade_v1(v);
            Ok(())
        }
        Some(x) if (u64::from(CURRENT)..=u64::from(latest)).contains(&x) => Ok(()),
        _ => {
            // JSON text: a string stays quoted, and escaped.
            let mut text = found.to_string();
            if let Some((cut, _)) = text.char_indices().nth(QUOTED) {
                text.truncate(cut);
                text.push_str("...");
            }
            Err(if found.is_number() {
                BadVersion::Unsupported(text)
            } else {
                BadVersion::NotANumber(text)
            })
        }
    }
}

/// Converts every version-1 sockscope artifact in `v` (the document itself
/// and those nested in it: a profile's load, trace and server report, a
/// bench's relay reports, a demo's experiments) to version 2:
/// `sockscope_version: V` becomes `build: {version: V, git_commit,
/// git_dirty}`, with the commit and tree state of the enclosing artifact's
/// build when that build has the same version (the same binary wrote both),
/// else `unknown`. Anything else is left as it is.
pub fn upgrade_v1(v: &mut Value) {
    walk(v, None);
}

fn walk(v: &mut Value, outer: Option<&Value>) {
    match v {
        Value::Object(o) => {
            convert(o, outer);
            let build = o.get("build").cloned();
            for child in o.values_mut() {
                walk(child, build.as_ref().or(outer));
            }
        }
        Value::Array(items) => {
            for item in items {
                walk(item, outer);
            }
        }
        _ => {}
    }
}

/// Converts one object when it is a version-1 sockscope artifact.
fn convert(o: &mut Map<String, Value>, outer: Option<&Value>) {
    let is_artifact = o
        .get("schema")
        .and_then(Value::as_str)
        .is_some_and(|s| s.starts_with("sockscope."));
    if !is_artifact || o.get("schema_version").and_then(Value::as_u64) != Some(1) {
        return;
    }
    if !o.contains_key("build") {
        let Some(Value::String(version)) = o.remove("sockscope_version") else {
            // Not a header this sockscope ever wrote: let the typed parse
            // say what is missing.
            return;
        };
        let inherited = outer.filter(|b| b["version"].as_str() == Some(version.as_str()));
        let field = |name: &str| {
            inherited
                .and_then(|b| b[name].as_str())
                .unwrap_or("unknown")
                .to_string()
        };
        let build = Build {
            git_commit: field("git_commit"),
            git_dirty: field("git_dirty"),
            version,
        };
        o.insert(
            "build".into(),
            serde_json::to_value(build).expect("a Build serializes"),
        );
    }
    o.insert("schema_version".into(), CURRENT.into());
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_v1_trace_gets_a_build_of_unknown_commit() {
        let mut v = json!({"schema": "sockscope.trace", "schema_version": 1,
                           "sockscope_version": "0.1.0", "syscalls": []});
        upgrade(&mut v).unwrap();
        assert_eq!(
            v,
            json!({"schema": "sockscope.trace", "schema_version": 2,
                   "build": {"version": "0.1.0", "git_commit": "unknown",
                             "git_dirty": "unknown"},
                   "syscalls": []})
        );
    }

    #[test]
    fn nested_v1_artifacts_inherit_the_enclosing_build_of_the_same_version() {
        let build = json!({"version": "0.1.0", "git_commit": "974f1c0", "git_dirty": "false"});
        let mut v = json!({
            "schema": "sockscope.profile", "schema_version": 1, "build": build,
            "load": {"schema": "sockscope.load", "schema_version": 1,
                     "sockscope_version": "0.1.0"},
            "target": {"server_report": {"schema": "sockscope.serve.echo",
                                         "schema_version": 1,
                                         "sockscope_version": "0.0.9"}}
        });
        upgrade(&mut v).unwrap();
        assert_eq!(v["schema_version"], 2);
        assert_eq!(v["build"], build);
        assert_eq!(v["load"]["schema_version"], 2);
        assert_eq!(v["load"]["build"], build);
        assert!(v["load"].get("sockscope_version").is_none());
        let server = &v["target"]["server_report"];
        assert_eq!(
            server["build"],
            json!({"version": "0.0.9", "git_commit": "unknown", "git_dirty": "unknown"})
        );
    }

    #[test]
    fn a_demo_converts_every_experiment_and_relay_report() {
        let build = json!({"version": "0.1.0", "git_commit": "abc", "git_dirty": "true"});
        let mut v = json!({
            "schema": "sockscope.demo", "schema_version": 1, "build": build,
            "experiments": [{"schema": "sockscope.bench", "schema_version": 1, "build": build,
                             "relay": {"relay_runs": [{"report": {
                                 "schema": "sockscope.serve.relay", "schema_version": 1,
                                 "sockscope_version": "0.1.0"}}]}}]
        });
        upgrade(&mut v).unwrap();
        let bench = &v["experiments"][0];
        assert_eq!(bench["schema_version"], 2);
        let relay = &bench["relay"]["relay_runs"][0]["report"];
        assert_eq!(relay["schema_version"], 2);
        assert_eq!(relay["build"], build);
    }

    #[test]
    fn current_documents_pass_and_unknown_versions_are_named() {
        let mut v2 = json!({"schema": "sockscope.load", "schema_version": 2,
                            "build": {"version": "0.1.0", "git_commit": "x", "git_dirty": "false"}});
        let before = v2.clone();
        upgrade(&mut v2).unwrap();
        assert_eq!(v2, before);
        let mut v3 = json!({"schema": "sockscope.load", "schema_version": 3});
        assert_eq!(upgrade(&mut v3), Err(BadVersion::Unsupported("3".into())));
        // A schema ahead of the rest reads its own versions, and no further.
        for version in [2, 3, 4, 5] {
            let mut p = json!({"schema": "sockscope.profile", "schema_version": version});
            assert_eq!(upgrade(&mut p), Ok(()), "{version}");
        }
        let mut p6 = json!({"schema": "sockscope.profile", "schema_version": 6});
        assert_eq!(upgrade(&mut p6), Err(BadVersion::Unsupported("6".into())));
        assert_eq!(readable("sockscope.profile"), "1, 2, 3, 4 or 5");
        assert_eq!(readable("sockscope.load"), READABLE);
        assert_eq!(
            upgrade(&mut json!({"schema": "sockscope.load"})),
            Err(BadVersion::Missing)
        );
        // Named as found, not as "version 0".
        let why = |version: Value| {
            upgrade(&mut json!({"schema": "sockscope.load", "schema_version": version}))
                .unwrap_err()
                .to_string()
        };
        assert_eq!(why(json!("2")), r#"schema_version "2" is not a number"#);
        assert_eq!(
            why(json!(-1)),
            "schema_version -1 is not a supported version"
        );
        assert_eq!(
            why(json!(2.5)),
            "schema_version 2.5 is not a supported version"
        );
        assert_eq!(why(json!(null)), "schema_version null is not a number");
        // A long value is shortened; JSON escapes what it quotes.
        let long = why(json!("\u{1b}x".repeat(30)));
        assert!(long.ends_with("... is not a number"), "{long}");
        assert!(long.starts_with(r#"schema_version "\u001bx"#), "{long}");
        assert!(!long.contains('\u{1b}') && long.len() < 80, "{long}");
        // Not sockscope's: left alone.
        let mut other = json!({"schema": "x", "schema_version": 1, "sockscope_version": "1"});
        upgrade(&mut other).unwrap();
        assert_eq!(other["sockscope_version"], "1");
    }

    /// A version-1 file read the way `report` and `compare` read them.
    fn read_v1<T: serde::de::DeserializeOwned>(text: &str) -> T {
        let mut v: Value = serde_json::from_str(text).unwrap();
        assert_eq!(v["schema_version"], 1);
        upgrade(&mut v).unwrap();
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn version_1_files_of_each_kind_read_as_version_2() {
        use crate::report::{bench, load, profile, serve, trace};
        // Written by sockscope 0.1.0 at 6277c6c (tests/fixtures/v1).
        let t: trace::TraceReport = read_v1(include_str!("../../tests/fixtures/v1/trace.json"));
        assert_eq!(t.header.schema_version, 2);
        assert_eq!(t.header.build.version, "0.1.0");
        assert_eq!(t.header.build.git_commit, "unknown");
        let l: load::LoadReport = read_v1(include_str!("../../tests/fixtures/v1/load.json"));
        assert_eq!(l.header.build.git_dirty, "unknown");
        assert_eq!(l.transactions, 1000);
        let e: serve::echo::EchoReport =
            read_v1(include_str!("../../tests/fixtures/v1/serve-echo.json"));
        assert_eq!(e.header.schema, serve::echo::SCHEMA);
        assert_eq!(e.header.build.version, "0.1.0");

        let p: profile::ProfileReport =
            read_v1(include_str!("../../tests/fixtures/v1/profile.json"));
        let commit = &p.header.build.git_commit;
        assert!(commit.starts_with("6277c6c"), "{commit}");
        // The load and trace inside were written by the same binary.
        assert_eq!(&p.load.as_ref().unwrap().header.build.git_commit, commit);
        assert_eq!(&p.trace.as_ref().unwrap().header.build.git_commit, commit);
        let server = p.target.server_report.as_ref().unwrap();
        assert_eq!(
            server["build"]["git_commit"].as_str(),
            Some(commit.as_str())
        );

        let b: bench::BenchReport =
            read_v1(include_str!("../../tests/fixtures/v1/bench-relay.json"));
        let runs = &b
            .results
            .get::<bench::relay::RelayResult>()
            .unwrap()
            .relay_runs;
        assert!(!runs.is_empty());
        for r in runs {
            assert_eq!(r.report.header.build.git_commit, b.header.build.git_commit);
        }
    }

    #[test]
    fn every_schema_is_at_the_current_version() {
        use crate::report::{bench, load, profile, serve, trace};
        for v in [
            trace::SCHEMA_VERSION,
            load::SCHEMA_VERSION,
            bench::SCHEMA_VERSION,
            serve::echo::SCHEMA_VERSION,
            serve::relay::SCHEMA_VERSION,
            serve::udp_sink::SCHEMA_VERSION,
        ] {
            assert_eq!(v, CURRENT);
        }
        // A single window stays at 4; only a run in steps is written as 5.
        assert_eq!(profile::SWEEP_SCHEMA_VERSION, latest(profile::SCHEMA));
        assert_eq!(profile::SCHEMA_VERSION, 4);
        assert_eq!(latest(trace::SCHEMA), CURRENT);
    }

    #[test]
    fn the_header_flattens_to_the_top_level() {
        #[derive(Serialize, Deserialize)]
        struct Doc {
            #[serde(flatten)]
            header: ArtifactHeader,
            n: u32,
        }
        let d = Doc {
            header: ArtifactHeader::new("sockscope.test", 2),
            n: 1,
        };
        let v = serde_json::to_value(&d).unwrap();
        assert_eq!(v["schema"], "sockscope.test");
        assert_eq!(v["schema_version"], 2);
        assert_eq!(v["build"]["version"], env!("CARGO_PKG_VERSION"));
        let back: Doc = serde_json::from_value(v).unwrap();
        assert_eq!(back.header.schema, "sockscope.test");
    }
}
