//! Every variant's passes, and the ratios between two variants of the same round.

use crate::measurement::Measurement;
use crate::variants::Variant;

/// One pass of one variant, for the comparisons within a round.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Pass {
    pub(crate) rps: f64,
    /// Server CPU microseconds per counted request.
    pub(crate) server: Option<f64>,
}

/// A variant's best pass (by req/s), and every pass in round order.
pub(crate) struct Measured {
    pub(crate) best: Measurement,
    pub(crate) passes: Vec<Pass>,
}

pub(crate) struct Results(pub(crate) Vec<Measured>);

impl Results {
    pub(crate) fn get(&self, variant: Variant) -> Option<&Measured> {
        self.0.iter().find(|m| m.best.variant == variant)
    }

    /// `compare` of `a`'s and `b`'s passes of the same round, the median over the rounds. A
    /// ratio of two best passes would pair two moments of a machine whose speed drifts; two
    /// passes of one round ran a few seconds apart.
    fn paired(
        &self,
        a: Variant,
        b: Variant,
        compare: impl Fn(&Pass, &Pass) -> Option<f64>,
    ) -> Option<f64> {
        let (a, b) = (self.get(a)?, self.get(b)?);
        let mut values: Vec<f64> = a
            .passes
            .iter()
            .zip(&b.passes)
            .filter_map(|(a, b)| compare(a, b))
            .filter(|v| v.is_finite())
            .collect();
        values.sort_by(f64::total_cmp);
        let n = values.len();
        match n {
            0 => None,
            _ if n % 2 == 1 => Some(values[n / 2]),
            _ => Some((values[n / 2 - 1] + values[n / 2]) / 2.0),
        }
    }

    /// `a`'s req/s over `b`'s.
    pub(crate) fn rps_ratio(&self, a: Variant, b: Variant) -> Option<f64> {
        self.paired(a, b, |a, b| (b.rps > 0.0).then(|| a.rps / b.rps))
    }

    /// The server CPU per request `a` adds over `b`, in microseconds.
    pub(crate) fn server_added(&self, a: Variant, b: Variant) -> Option<f64> {
        self.paired(a, b, |a, b| Some(a.server? - b.server?))
    }

    /// The targets, as (what, threshold, measured ratio) checks.
    pub(crate) fn targets(&self) -> Vec<(String, f64, Option<f64>)> {
        let mut checks = Vec::new();
        for m in &self.0 {
            let variant = m.best.variant;
            let Some(handwritten) = variant.handwritten() else {
                continue;
            };
            let name = variant.name();
            checks.push((
                format!("{name} req/s / bare"),
                0.45,
                self.rps_ratio(variant, Variant::Bare),
            ));
            if self.get(handwritten).is_some() {
                checks.push((
                    format!("{name} req/s / {}", handwritten.name()),
                    0.95,
                    self.rps_ratio(variant, handwritten),
                ));
            }
        }
        let (quiet, peer) = (Variant::MemoryNoHeaders, Variant::TowerGovernorNoHeaders);
        if self.get(quiet).is_some() && self.get(peer).is_some() {
            checks.push((
                format!("{} req/s / {}", quiet.name(), peer.name()),
                1.0,
                self.rps_ratio(quiet, peer),
            ));
        }
        let local = [
            (Variant::Memory, 0.95),
            (Variant::DenyFlood, 0.9),
            (Variant::GlobalBatched, 0.85),
        ];
        for (variant, threshold) in local {
            if self.get(variant).is_some() {
                checks.push((
                    format!("{} req/s / bare", variant.name()),
                    threshold,
                    self.rps_ratio(variant, Variant::Bare),
                ));
            }
        }
        checks
    }
}
