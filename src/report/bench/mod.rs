//! Artifacts of the built-in experiments (`sockscope bench NAME`, schema
//! `sockscope.bench`) and of the demo that runs several of them
//! (`sockscope.demo`). Documented in docs/profile-json.md.
//!
//! Each experiment's results are one file here (its schema, table, summary
//! text and page section, behind [`Section`]) and one line in the
//! `sections!` registry below, which names its key in the artifact. A
//! report holds its results as a list ([`Results`]) written as those keys
//! at the top level (`"transport": {...}`), so artifacts read and write
//! the same bytes whatever experiments this build knows. [`text`] and
//! [`page`] render a report or a demo from the list.

pub mod noise;
pub mod overhead;
pub mod page;
pub mod relay;
pub mod text;
pub mod transport;
pub mod udp_rcvbuf;

use std::any::Any;
use std::fmt;

use serde::de::{IgnoredAny, MapAccess, Visitor};
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::header::ArtifactHeader;
use super::machine::Machine;
use super::table::Table;

/// Schema identifier of experiment artifacts.
pub const SCHEMA: &str = "sockscope.bench";
/// Schema identifier of demo artifacts.
pub const DEMO_SCHEMA: &str = "sockscope.demo";
/// Bumped on any incompatible change (both schemas; 2: the shared
/// [`ArtifactHeader`], and the relay reports inside lost
/// `sockscope_version`).
pub const SCHEMA_VERSION: u32 = 2;

/// One experiment run.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct BenchReport {
    /// `schema`, `schema_version` and the `build` that wrote it, at the top
    /// level (see [`ArtifactHeader`]).
    #[serde(flatten)]
    pub header: ArtifactHeader,
    /// `transport`, `udp-rcvbuf`, `overhead` or `relay`.
    pub experiment: String,
    /// Where it ran.
    pub machine: Machine,
    /// Wall-clock start (RFC 3339).
    pub started_at: String,
    /// How long the whole experiment took, s.
    pub duration_s: f64,
    /// The command line.
    pub command_line: Vec<String>,
    /// Reduced sizes (--quick).
    pub quick: bool,
    /// What it measured: one entry per experiment's results (one in an
    /// artifact this build writes), each at the top level under its key
    /// (`transport`, `udp_rcvbuf`, `overhead`, `relay`).
    #[serde(flatten)]
    pub results: Results,
    /// What the results say, in plain sentences.
    pub insights: Vec<String>,
    /// What limits them.
    pub caveats: Vec<String>,
}

/// A part of the demo that did not run, and why.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct NotRun {
    /// Experiment name.
    pub experiment: String,
    /// Why not.
    pub reason: String,
}

/// The demo: several experiments and one report.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct DemoReport {
    /// `schema`, `schema_version` and the `build` that wrote it, at the top
    /// level (see [`ArtifactHeader`]).
    #[serde(flatten)]
    pub header: ArtifactHeader,
    /// Where it ran.
    pub machine: Machine,
    /// Wall-clock start.
    pub started_at: String,
    /// Whole demo, s.
    pub duration_s: f64,
    /// --quick.
    pub quick: bool,
    /// False when a part could not run (see `not_run`).
    pub complete: bool,
    /// The experiments that ran.
    pub experiments: Vec<BenchReport>,
    /// Those that did not.
    pub not_run: Vec<NotRun>,
}

/// What one experiment's results show: the table of its numbers, the
/// summary's text and the page's section. Implemented by each result type
/// and registered in `sections!`.
pub trait Section {
    /// The table of every result (summary.txt shows its text columns,
    /// report.html every page column).
    fn table(&self) -> Table;
    /// The summary's lines: by default the table's text columns.
    fn text(&self) -> String {
        self.table().to_text()
    }
    /// The page's section(s), element ids prefixed with `p`.
    fn html(&self, p: &str) -> String;
    /// Where its repeated measurements disagree beyond their spread (see
    /// [`noise`]): sentences shown beside its numbers. None by default.
    fn noise(&self) -> Vec<String> {
        Vec::new()
    }
}

/// Declares [`ExperimentResult`], one variant per experiment's results, and
/// what reads and writes it under its key.
macro_rules! sections {
    ($($variant:ident($ty:ty) = $key:literal,)*) => {
        /// One experiment's results, written under [`ExperimentResult::key`].
        #[derive(Clone, Debug)]
        pub enum ExperimentResult {
            $(
                #[doc = concat!("`", $key, "`.")]
                $variant($ty),
            )*
        }

        /// Every key, in the order registered.
        pub const KEYS: &[&str] = &[$($key),*];

        impl ExperimentResult {
            /// Its key in the artifact.
            pub fn key(&self) -> &'static str {
                match self {
                    $(Self::$variant(_) => $key,)*
                }
            }

            /// Its table, text and page section.
            pub fn section(&self) -> &dyn Section {
                match self {
                    $(Self::$variant(r) => r,)*
                }
            }

            fn as_any(&self) -> &dyn Any {
                match self {
                    $(Self::$variant(r) => r,)*
                }
            }

            fn serialize_entry<M: SerializeMap>(&self, map: &mut M) -> Result<(), M::Error> {
                match self {
                    $(Self::$variant(r) => map.serialize_entry($key, r),)*
                }
            }

            /// Reads the value under `key`: None for a null, and (the value
            /// skipped) for a key that is no experiment's.
            fn read_entry<'de, A: MapAccess<'de>>(
                key: &str,
                map: &mut A,
            ) -> Result<Option<Self>, A::Error> {
                Ok(match key {
                    $($key => map.next_value::<Option<$ty>>()?.map(Self::$variant),)*
                    _ => {
                        map.next_value::<IgnoredAny>()?;
                        None
                    }
                })
            }
        }

        $(
            impl From<$ty> for ExperimentResult {
                fn from(r: $ty) -> Self {
                    Self::$variant(r)
                }
            }
        )*
    };
}

// The registry: one line per experiment, in the order a report shows them.
sections! {
    Transport(transport::TransportResult) = "transport",
    UdpRcvbuf(udp_rcvbuf::UdpRcvbufResult) = "udp_rcvbuf",
    Overhead(overhead::OverheadResult) = "overhead",
    Relay(relay::RelayResult) = "relay",
}

/// The results of a report, as a list; in JSON, a map from each one's key
/// to its value (flattened into the report's top level).
#[derive(Clone, Debug, Default)]
pub struct Results(pub Vec<ExperimentResult>);

impl Results {
    /// The results of type `T`, if the list holds them.
    pub fn get<T: 'static>(&self) -> Option<&T> {
        self.0.iter().find_map(|r| r.as_any().downcast_ref::<T>())
    }

    /// Each result, in order.
    pub fn iter(&self) -> impl Iterator<Item = &ExperimentResult> {
        self.0.iter()
    }
}

impl Serialize for Results {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for r in &self.0 {
            r.serialize_entry(&mut map)?;
        }
        map.end()
    }
}

impl<'de> Deserialize<'de> for Results {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct ResultsVisitor;
        impl<'de> Visitor<'de> for ResultsVisitor {
            type Value = Results;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("experiment results keyed by experiment")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Results, A::Error> {
                let mut list = Vec::new();
                while let Some(key) = map.next_key::<String>()? {
                    if let Some(r) = ExperimentResult::read_entry(&key, &mut map)? {
                        list.push(r);
                    }
                }
                Ok(Results(list))
            }
        }
        deserializer.deserialize_map(ResultsVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// `value` as an artifact's JSON file holds it (pretty, final newline).
    fn written<T: Serialize>(value: &T) -> String {
        serde_json::to_string_pretty(value).unwrap() + "\n"
    }

    // Written by sockscope at ae9c50d (tests/fixtures/v2): `bench
    // udp-rcvbuf --quick` and `demo --quick`, which ran all four.
    const BENCH: &str = include_str!("../../../tests/fixtures/v2/bench-udp-rcvbuf.json");
    const DEMO: &str = include_str!("../../../tests/fixtures/v2/demo-quick.json");

    #[test]
    fn version_2_fixtures_round_trip_byte_for_byte() {
        let b: BenchReport = serde_json::from_str(BENCH).unwrap();
        assert_eq!(written(&b), BENCH);
        let d: DemoReport = serde_json::from_str(DEMO).unwrap();
        assert_eq!(written(&d), DEMO);
        // Read the way `sockscope report` reads them: through a Value.
        let v: serde_json::Value = serde_json::from_str(DEMO).unwrap();
        let d2: DemoReport = serde_json::from_value(v).unwrap();
        assert_eq!(written(&d2), DEMO);
    }

    #[test]
    fn each_experiment_reads_into_one_result_under_its_key() {
        let b: BenchReport = serde_json::from_str(BENCH).unwrap();
        let keys: Vec<&str> = b.results.iter().map(ExperimentResult::key).collect();
        assert_eq!(keys, ["udp_rcvbuf"]);
        assert!(b.results.get::<udp_rcvbuf::UdpRcvbufResult>().is_some());
        assert!(b.results.get::<relay::RelayResult>().is_none());
        let d: DemoReport = serde_json::from_str(DEMO).unwrap();
        let keys: Vec<&str> = d
            .experiments
            .iter()
            .flat_map(|e| e.results.iter().map(ExperimentResult::key))
            .collect();
        assert_eq!(keys, ["transport", "udp_rcvbuf", "overhead", "relay"]);
        assert_eq!(keys, KEYS);
        for e in &d.experiments {
            assert_eq!(e.results.iter().count(), 1, "{}", e.experiment);
        }
    }

    #[test]
    fn nulls_and_unknown_keys_are_no_results() {
        let mut v: serde_json::Value = serde_json::from_str(BENCH).unwrap();
        v["relay"] = json!(null);
        v["some_later_experiment"] = json!({"x": 1});
        let b: BenchReport = serde_json::from_value(v).unwrap();
        let keys: Vec<&str> = b.results.iter().map(ExperimentResult::key).collect();
        assert_eq!(keys, ["udp_rcvbuf"]);
        assert_eq!(written(&b), BENCH);
    }
}
