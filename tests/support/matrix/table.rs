//! The matrix as tables: runs, violations, worst slack past the limit, worst latency and
//! worst recovery, per incident and policy, per incident and mode, and per cell.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

use super::judge::Report;

/// What the runs of one cell came to.
#[derive(Debug, Clone, Default)]
struct Cell {
    runs: usize,
    requests: usize,
    violations: usize,
    past_limit: u64,
    worst_latency: Duration,
    recovery: Option<Duration>,
}

impl Cell {
    fn add(&mut self, report: &Report) {
        self.runs += 1;
        self.requests += report.requests;
        self.violations += usize::from(!report.violations.is_empty());
        self.past_limit = self.past_limit.max(report.past_limit);
        self.worst_latency = self.worst_latency.max(report.worst_latency);
        if let Some(recovery) = report.recovery {
            self.recovery = Some(self.recovery.map_or(recovery, |worst| worst.max(recovery)));
        }
    }

    fn row(&self, label: &str) -> String {
        format!(
            "| {label} | {} | {} | {} | {} | {} ms | {} |\n",
            self.runs,
            self.requests,
            self.violations,
            self.past_limit,
            self.worst_latency.as_millis(),
            self.recovery
                .map_or_else(|| "n/a".to_owned(), |at| format!("{} ms", at.as_millis())),
        )
    }
}

/// Every report of a matrix run, by cell.
#[derive(Debug, Default)]
pub struct Table {
    reports: Vec<Report>,
}

impl Table {
    /// An empty table.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds one run.
    pub fn add(&mut self, report: Report) {
        self.reports.push(report);
    }

    /// The runs that broke an invariant.
    pub fn violations(&self) -> impl Iterator<Item = &Report> {
        self.reports
            .iter()
            .filter(|report| !report.violations.is_empty())
    }

    /// How many runs.
    #[must_use]
    pub fn runs(&self) -> usize {
        self.reports.len()
    }

    /// The tables, in Markdown: incident by policy, incident by mode, then every cell.
    #[must_use]
    pub fn render(&self) -> String {
        let mut out = String::new();
        let header = |out: &mut String, first: &str| {
            let _ = writeln!(
                out,
                "| {first} | runs | requests | violations | worst past the limit | worst \
                 latency | worst recovery |\n|---|---|---|---|---|---|---|"
            );
        };
        for (title, first, label) in [
            (
                "By incident and failure policy",
                "incident, policy",
                (|report: &Report| format!("{}, {:?}", report.plan.incident, report.plan.policy))
                    as fn(&Report) -> String,
            ),
            (
                "By incident and mode",
                "incident, mode",
                |report: &Report| format!("{}, {}", report.plan.incident, report.plan.mode),
            ),
            ("Every cell", "incident, mode, policy", |report: &Report| {
                format!(
                    "{}, {}, {:?}",
                    report.plan.incident, report.plan.mode, report.plan.policy
                )
            }),
        ] {
            let mut cells: BTreeMap<(usize, String), Cell> = BTreeMap::new();
            for report in &self.reports {
                let order = order(report);
                cells.entry((order, label(report))).or_default().add(report);
            }
            let _ = writeln!(out, "#### {title}\n");
            header(&mut out, first);
            for ((_, label), cell) in &cells {
                out.push_str(&cell.row(label));
            }
            out.push('\n');
        }
        out
    }
}

/// Rows in the order incidents are listed, not alphabetically.
fn order(report: &Report) -> usize {
    use super::plan::{CLUSTER, Incident, SENTINEL, SINGLE};
    let incident = match report.plan.incident {
        Incident::Latency(_) => Incident::Latency(Duration::ZERO),
        other => other,
    };
    SINGLE
        .iter()
        .chain(&CLUSTER)
        .chain(&SENTINEL)
        .position(|listed| *listed == incident)
        .unwrap_or(usize::MAX)
}
