//! When an experiment's repeated measurements disagree beyond their own
//! spread: a round far from the others (the machine was busy then), or
//! settings whose results do not separate although the experiment expects
//! them to. Said beside the numbers, in summary.txt and on the page, so a
//! reader does not take noise for a finding.

/// A round whose value lies far outside the range of the others.
#[derive(Debug, PartialEq)]
pub struct Outlier {
    /// Its position among the rounds (0-based).
    pub index: usize,
    /// Its value.
    pub value: f64,
    /// The lowest and highest of the other rounds.
    pub others: (f64, f64),
}

/// How far past the others' range a round must lie to be called an
/// outlier, as a fraction of the others' median, at the least: rounds of a
/// quiet machine differ by a few percent; one that waited for the CPU
/// differs by multiples.
const OUTLIER_MARGIN: f64 = 0.25;

/// The rounds that lie outside the range of the others by more than that
/// range's width and more than [`OUTLIER_MARGIN`] of the others' median.
/// Fewer than 3 rounds: none (with two, neither is "the other").
pub fn outliers(rounds: &[f64]) -> Vec<Outlier> {
    if rounds.len() < 3 || rounds.iter().any(|v| !v.is_finite()) {
        return Vec::new();
    }
    let mut out = Vec::new();
    for (index, &value) in rounds.iter().enumerate() {
        let others: Vec<f64> = rounds
            .iter()
            .enumerate()
            .filter(|(i, _)| *i != index)
            .map(|(_, v)| *v)
            .collect();
        let lo = others.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = others.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let m = median(&others).abs();
        // The others must agree among themselves (spread within their
        // median) for one round to stand out from them.
        if hi - lo > m {
            continue;
        }
        let margin = (hi - lo).max(OUTLIER_MARGIN * m);
        if value > hi + margin || value < lo - margin {
            out.push(Outlier {
                index,
                value,
                others: (lo, hi),
            });
        }
    }
    // A round far from the others only when they agree among themselves:
    // if several are "far", the rounds simply scatter.
    if out.len() * 2 >= rounds.len() {
        return Vec::new();
    }
    out
}

/// The sentence for the outliers of one configuration's rounds (`unit`
/// follows each value, e.g. " ns").
pub fn outlier_note(what: &str, rounds: &[f64], unit: &str) -> Option<String> {
    let found = outliers(rounds);
    if found.is_empty() {
        return None;
    }
    let each: Vec<String> = found
        .iter()
        .map(|o| {
            format!(
                "round {} at {:.0}{unit} against {:.0}-{:.0}{unit} for the others",
                o.index + 1,
                o.value,
                o.others.0,
                o.others.1
            )
        })
        .collect();
    Some(format!(
        "{what}: {}; the machine was busy during that round. The median over the rounds is \
         what the table uses, but read differences smaller than that round's as noise.",
        each.join(", ")
    ))
}

/// The median (the mean of the two middle values for an even count); 0
/// for none.
pub fn median(values: &[f64]) -> f64 {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// The lowest and highest of `values` (None for none).
pub fn range(values: &[f64]) -> Option<(f64, f64)> {
    let mut it = values.iter().copied().filter(|x| x.is_finite());
    let first = it.next()?;
    Some(it.fold((first, first), |(lo, hi), v| (lo.min(v), hi.max(v))))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn one_busy_round_among_quiet_ones_is_named() {
        // The demo run the issue quotes: one untraced round at 1596 ns.
        let r = [412.0, 369.0, 1596.0, 478.0, 401.0];
        assert_eq!(
            outliers(&r),
            vec![Outlier {
                index: 2,
                value: 1596.0,
                others: (369.0, 478.0)
            }]
        );
        let note = outlier_note("untraced", &r, " ns").unwrap();
        assert!(
            note.contains("round 3 at 1596 ns against 369-478 ns"),
            "{note}"
        );
    }

    #[test]
    fn rounds_within_their_jitter_are_not_flagged() {
        assert!(outliers(&[369.0, 478.0, 412.0, 401.0, 455.0]).is_empty());
        assert!(outlier_note("x", &[100.0, 104.0, 98.0], " ns").is_none());
    }

    #[test]
    fn two_rounds_or_scattered_rounds_name_no_single_outlier() {
        assert!(outliers(&[100.0, 1000.0]).is_empty());
        // Every round far from every other: scatter, not one outlier.
        assert!(outliers(&[10.0, 100.0, 1000.0, 10000.0]).is_empty());
    }

    #[test]
    fn a_round_far_below_the_others_is_named_too() {
        let found = outliers(&[1000.0, 1010.0, 990.0, 100.0]);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].index, 3);
    }

    #[test]
    fn median_and_range() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        assert_eq!(median(&[]), 0.0);
        assert_eq!(range(&[3.0, f64::NAN, 1.0]), Some((1.0, 3.0)));
        assert_eq!(range(&[]), None);
    }

    proptest! {
        // Rounds read from an artifact are anyone's numbers: NaN,
        // infinities, huge counts never panic.
        #[test]
        fn any_rounds_never_panic(r in proptest::collection::vec(proptest::num::f64::ANY, 0..40)) {
            let found = outliers(&r);
            prop_assert!(found.len() * 2 < r.len().max(1));
            let _ = outlier_note("x", &r, " ns");
            let _ = median(&r);
            let _ = range(&r);
        }
    }
}
