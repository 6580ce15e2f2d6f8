//! The variants a round runs: their names, order, and what answer of theirs counts.

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Variant {
    Bare,
    BareHeaders,
    FixedWindow,
    Stacked3,
    GlobalFixedWindow,
    GlobalBatched,
    TokenBucket,
    Gcra,
    EvalshaMultiplexed,
    EvalshaTokenBucket,
    EvalshaGcra,
    EvalshaPoolGet,
    TowerGovernor,
    Memory,
    MemoryStacked3,
    MemoryApart3,
    DenyFlood,
    TowerGovernorNoHeaders,
    MemoryNoHeaders,
}

impl Variant {
    /// In the order of a round: each variant runs next to what it is compared with, so a
    /// machine whose speed drifts over a round skews the comparisons least. The in-process
    /// variants follow `bare` and `bare_headers`, the pair without headers last of them; each
    /// Redis limiter follows the hand-written check of its own script.
    pub(crate) const ALL: [Self; 19] = [
        Self::Bare,
        Self::BareHeaders,
        Self::Memory,
        Self::MemoryStacked3,
        Self::MemoryApart3,
        Self::DenyFlood,
        Self::TowerGovernor,
        Self::TowerGovernorNoHeaders,
        Self::MemoryNoHeaders,
        Self::EvalshaMultiplexed,
        Self::FixedWindow,
        Self::Stacked3,
        Self::GlobalFixedWindow,
        Self::GlobalBatched,
        Self::EvalshaTokenBucket,
        Self::TokenBucket,
        Self::EvalshaGcra,
        Self::Gcra,
        Self::EvalshaPoolGet,
    ];

    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::Bare => "bare",
            Self::BareHeaders => "bare_headers",
            Self::FixedWindow => "fixed_window",
            Self::Stacked3 => "stacked_3",
            Self::GlobalFixedWindow => "global_fixed_window",
            Self::GlobalBatched => "global_batched",
            Self::TokenBucket => "token_bucket",
            Self::Gcra => "gcra",
            Self::EvalshaMultiplexed => "evalsha_multiplexed",
            Self::EvalshaTokenBucket => "evalsha_token_bucket",
            Self::EvalshaGcra => "evalsha_gcra",
            Self::EvalshaPoolGet => "evalsha_pool_get",
            Self::TowerGovernor => "tower_governor",
            Self::Memory => "memory",
            Self::MemoryStacked3 => "memory_stacked_3",
            Self::MemoryApart3 => "memory_apart_3",
            Self::DenyFlood => "deny_flood",
            Self::TowerGovernorNoHeaders => "tower_governor_no_headers",
            Self::MemoryNoHeaders => "memory_no_headers",
        }
    }

    /// The answers that count: the flood's local `429`s, every other variant's `2xx`.
    pub(crate) fn expected(self) -> &'static str {
        if self == Self::DenyFlood {
            "429"
        } else {
            "2xx"
        }
    }

    pub(crate) fn counts(self, status: u16) -> bool {
        if self == Self::DenyFlood {
            status == 429
        } else {
            (200..300).contains(&status)
        }
    }

    pub(crate) fn sends_rate_headers(self) -> bool {
        !matches!(
            self,
            Self::Bare | Self::TowerGovernorNoHeaders | Self::MemoryNoHeaders
        )
    }

    /// For the library deciding on Redis, the hand-written check of the same script: what
    /// frames its own overhead. `None` for every other variant.
    pub(crate) fn handwritten(self) -> Option<Self> {
        match self {
            Self::FixedWindow => Some(Self::EvalshaMultiplexed),
            Self::TokenBucket => Some(Self::EvalshaTokenBucket),
            Self::Gcra => Some(Self::EvalshaGcra),
            _ => None,
        }
    }
}
