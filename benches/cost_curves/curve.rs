//! A curve: measured series over one axis of work, the growth each shows, and its table.

use std::fmt::Write;

use plotters::style::RGBColor;

/// Okabe-Ito colours, as `examples/algorithm_chart.rs` uses them.
pub(crate) const MEMORY: RGBColor = RGBColor(0, 114, 178);
pub(crate) const REDIS: RGBColor = RGBColor(213, 94, 0);
pub(crate) const REDIS_CPU: RGBColor = RGBColor(0, 158, 115);

/// How the work axis is drawn.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Scale {
    /// Powers of ten apart.
    Log10,
    /// Powers of two apart.
    Log2,
    Linear,
}

#[derive(Debug)]
pub(crate) struct Series {
    /// The table's column heading and the chart's legend.
    pub(crate) label: String,
    pub(crate) colour: RGBColor,
    pub(crate) dashed: bool,
    /// The growth the algorithm guide leads to expect, e.g. `O(1)`.
    pub(crate) expected: &'static str,
    /// Why, in a few words.
    pub(crate) because: &'static str,
    pub(crate) points: Vec<(f64, f64)>,
}

#[derive(Debug)]
pub(crate) struct Panel {
    pub(crate) caption: &'static str,
    pub(crate) y_desc: &'static str,
    pub(crate) series: Vec<Series>,
}

#[derive(Debug)]
pub(crate) struct Curve {
    /// The SVG's name, without `.svg`.
    pub(crate) file: &'static str,
    pub(crate) title: String,
    pub(crate) x_desc: &'static str,
    pub(crate) scale: Scale,
    pub(crate) panels: Vec<Panel>,
    /// One line per statement of growth, printed under the table and drawn under the chart.
    pub(crate) notes: Vec<String>,
}

impl Curve {
    /// The notes stating each series' growth, observed and expected, in panel order.
    pub(crate) fn growth_notes(panels: &[Panel]) -> Vec<String> {
        panels
            .iter()
            .flat_map(|panel| &panel.series)
            .map(Series::growth_note)
            .collect()
    }

    /// Every series as a Markdown table over the work axis, then the notes.
    pub(crate) fn table(&self) -> String {
        let series: Vec<&Series> = self.panels.iter().flat_map(|p| &p.series).collect();
        let mut xs: Vec<f64> = series
            .iter()
            .flat_map(|s| s.points.iter().map(|p| p.0))
            .collect();
        xs.sort_by(f64::total_cmp);
        xs.dedup();
        let mut out = format!("## {}\n\n| {} |", self.title, self.x_desc);
        for s in &series {
            let _ = write!(out, " {} |", s.label);
        }
        out.push_str("\n|---:|");
        out.push_str(&"---:|".repeat(series.len()));
        for x in xs {
            let _ = write!(out, "\n| {} |", count(x));
            for s in &series {
                let cell = s.points.iter().find(|p| p.0 == x).map(|p| value(p.1));
                let _ = write!(out, " {} |", cell.unwrap_or_default());
            }
        }
        out.push('\n');
        for note in &self.notes {
            let _ = write!(out, "\n- {note}");
        }
        out.push('\n');
        out
    }
}

impl Series {
    /// `label: expected O(1) (because); observed ≈O(1), x1.12 from 1k to 10M`.
    pub(crate) fn growth_note(&self) -> String {
        let observed = Growth::of(&self.points).map_or_else(
            || "not measured".to_owned(),
            |growth| {
                format!(
                    "observed {}: x{:.2} from {} to {} (log-log slope {:.2})",
                    growth.class(),
                    growth.ratio,
                    count(growth.from),
                    count(growth.to),
                    growth.slope,
                )
            },
        );
        format!(
            "{}: expected {} ({}); {observed}",
            self.label, self.expected, self.because
        )
    }
}

/// How a series grows from its first point to its last.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Growth {
    pub(crate) from: f64,
    pub(crate) to: f64,
    /// Last value over first.
    pub(crate) ratio: f64,
    /// Least-squares slope of log(value) over log(work): 0 for O(1), 1 for O(n).
    pub(crate) slope: f64,
}

impl Growth {
    pub(crate) fn of(points: &[(f64, f64)]) -> Option<Self> {
        let usable: Vec<(f64, f64)> = points
            .iter()
            .copied()
            .filter(|&(x, y)| x > 0.0 && y > 0.0)
            .collect();
        let (first, last) = (usable.first()?, usable.last()?);
        if usable.len() < 2 {
            return None;
        }
        let logs: Vec<(f64, f64)> = usable.iter().map(|&(x, y)| (x.ln(), y.ln())).collect();
        let n = logs.len() as f64;
        let (mx, my) = (
            logs.iter().map(|p| p.0).sum::<f64>() / n,
            logs.iter().map(|p| p.1).sum::<f64>() / n,
        );
        let sxy: f64 = logs.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
        let sxx: f64 = logs.iter().map(|p| (p.0 - mx).powi(2)).sum();
        Some(Self {
            from: first.0,
            to: last.0,
            ratio: last.1 / first.1,
            slope: sxy / sxx,
        })
    }

    /// The order of growth the points fit, from the ratio and the slope: within 25% over the
    /// whole range is flat (a fixed overhead spread over more work makes a per-unit figure
    /// fall a little: still flat); a slope near 1 is linear; growth no faster than a
    /// logarithm's over the same range (log n grows 2.2x from 1k to 10M) is logarithmic or
    /// less, which a constant cost plus cache misses also gives.
    pub(crate) fn class(&self) -> String {
        let log = |x: f64| x.log2() + 1.0;
        if self.ratio < 1.25 && self.ratio > 0.67 {
            "≈O(1)".to_owned()
        } else if self.slope >= 0.8 {
            "≈O(n)".to_owned()
        } else if self.slope < 0.0 {
            "falling".to_owned()
        } else if self.slope <= 0.35 && self.ratio <= 1.2 * log(self.to) / log(self.from) {
            "O(log n) or less".to_owned()
        } else {
            format!("≈O(n^{:.1})", self.slope)
        }
    }
}

/// A count of work: 1000 as `1k`, 10,000,000 as `10M`.
pub(crate) fn count(x: f64) -> String {
    let (scaled, suffix) = if x >= 1e6 {
        (x / 1e6, "M")
    } else if x >= 1e3 {
        (x / 1e3, "k")
    } else {
        (x, "")
    };
    if (scaled - scaled.round()).abs() < 1e-9 {
        format!("{scaled:.0}{suffix}")
    } else {
        format!("{scaled:.1}{suffix}")
    }
}

/// A measured value with three significant digits or so.
pub(crate) fn value(y: f64) -> String {
    if y >= 100.0 {
        format!("{y:.0}")
    } else if y >= 10.0 {
        format!("{y:.1}")
    } else {
        format!("{y:.2}")
    }
}

/// Timed loops are cut into this many slices, and the median slice's time per operation kept:
/// a burst of load from elsewhere on a shared machine moves one slice, not the figure.
const SLICES: usize = 5;

/// The sizes of the slices of `total` operations (at least one operation each).
pub(crate) fn slices(total: usize) -> impl Iterator<Item = usize> {
    let slices = SLICES.min(total.max(1));
    (0..slices).map(move |i| total / slices + usize::from(i < total % slices))
}

/// The median of per-slice times.
pub(crate) fn median(mut times: Vec<f64>) -> f64 {
    times.sort_by(f64::total_cmp);
    times.get(times.len() / 2).copied().unwrap_or(0.0)
}
