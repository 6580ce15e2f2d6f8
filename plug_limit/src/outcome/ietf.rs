//! The IETF rate-limit fields of draft-ietf-httpapi-ratelimit-headers-10, `RateLimit-Policy`
//! and `RateLimit`, rendered from a built-in limiter's outcome and its limit's options, and read
//! back (to count a cached denial down, and for [`test`](crate::test)).
//!
//! Both fields are Structured Field lists (RFC 9651) of String items naming a policy:
//!
//! ```text
//! RateLimit-Policy: "fixed_window";q=100;w=60;pk=:2b6dF0lm1Ns6yA/m:
//! RateLimit: "fixed_window";r=42;t=17;pk=:2b6dF0lm1Ns6yA/m:
//! ```
//!
//! The quota (`q`) and window (`w`, seconds) come from the limit's options, never from the
//! script: a script knows its own values, but only the options say which quota they belong to
//! (`multi_window` answers for one window among several). Remaining (`r`) and reset (`t`,
//! seconds) are the script's own `x-ratelimit-remaining` and `x-ratelimit-reset`. The quota
//! unit (`qu`) is left out: every built-in counts requests (weighted by their cost), the
//! draft's default.
//!
//! `concurrency` counts requests in flight: its policy has the draft's `qu="concurrent-requests"`
//! and no window (`w`); its `t` is when the oldest lease expires.
//!
//! `calendar_quota`'s window is its period's nominal length: a day (86400), an ISO week
//! (604800), or the mean Gregorian month (2629746, a 400-year cycle's 146097 days over its
//! 4800 months). A policy is the same for every request, while a month's own length depends
//! on the date; its `t` is exact either way.

use std::hash::{BuildHasher, Hasher, RandomState};
use std::sync::LazyLock;

use axum::body::Bytes;
use hmac::digest::Key;
use hmac::{Hmac, KeyInit, Mac};
use http::{HeaderMap, HeaderName, HeaderValue};
use sfv::visitor::ParameterVisitor;
use sfv::visitor::{EntryVisitor, InnerListVisitor, ItemVisitor, ListVisitor, Never};
use sfv::{BareItemFromInput, Integer, KeyRef, ListSerializer, Parser, StringRef};
use sha2::Sha256;

use crate::algorithm::{Builtin, Report, period_seconds};
use crate::limit::Opt;

/// `RateLimit-Policy`: the quota policies, one item per window.
pub(crate) const POLICY: HeaderName = HeaderName::from_static("ratelimit-policy");
/// `RateLimit`: what is left of the policy that decided, and when it resets.
pub(crate) const RATELIMIT: HeaderName = HeaderName::from_static("ratelimit");

/// Bytes of the keyed hash sent as `pk`: 96 bits tell partitions apart with no practical
/// chance of two meeting, and fill 16 base64 characters without padding.
const PK_LEN: usize = 12;

/// The shortest secret [`PartitionKeys::new`] accepts, in bytes.
pub(crate) const MIN_SECRET: usize = 16;

/// The keyed hash behind `pk`: HMAC-SHA256 of a request's namespaced key (prefix, limiter,
/// scope and client), truncated to [`PK_LEN`] bytes. A client can tell partitions apart by it,
/// but without the secret no one can compute it from a key, nor recover a key (another user's
/// API key, an IP address) from it.
#[derive(Clone)]
pub(crate) struct PartitionKeys(Hmac<Sha256>);

impl PartitionKeys {
    /// Keys hashed with `secret`: instances given the same secret send the same `pk`.
    pub(crate) fn new(secret: &[u8]) -> Result<Self, &'static str> {
        if secret.len() < MIN_SECRET {
            return Err("must be at least 16 bytes");
        }
        Hmac::new_from_slice(secret)
            .map(Self)
            .map_err(|_| "is not a valid HMAC key")
    }

    /// This process's own secret, drawn once: `pk` values then agree within the process only.
    pub(crate) fn process() -> Self {
        static PROCESS: LazyLock<PartitionKeys> = LazyLock::new(|| {
            // std seeds every `RandomState` with 128 bits from the operating system's random
            // source: SipHash under those keys is as unpredictable as they are, without a
            // random-number crate for one draw per process.
            let state = RandomState::new();
            let mut key = Key::<Hmac<Sha256>>::default();
            for (i, chunk) in key.chunks_exact_mut(8).take(4).enumerate() {
                let mut hasher = state.build_hasher();
                hasher.write_usize(i);
                chunk.copy_from_slice(&hasher.finish().to_le_bytes());
            }
            PartitionKeys(Hmac::new(&key))
        });
        PROCESS.clone()
    }

    /// The `pk` of the namespaced key `key`.
    fn of(&self, key: &str) -> [u8; PK_LEN] {
        let mut mac = self.0.clone();
        mac.update(key.as_bytes());
        let digest = mac.finalize().into_bytes();
        let mut pk = [0; PK_LEN];
        pk.copy_from_slice(&digest[..PK_LEN]);
        pk
    }
}

/// Renders a built-in limiter's outcomes as draft-10 fields.
pub(crate) struct Draft10 {
    /// The limiter's registered name, the policy's: printable ASCII, checked at build.
    name: Box<str>,
    keys: PartitionKeys,
}

/// One quota: `limit` requests per `seconds`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Window {
    limit: i64,
    seconds: i64,
}

impl Draft10 {
    pub(crate) fn new(name: &str, keys: PartitionKeys) -> Self {
        Self {
            name: name.into(),
            keys,
        }
    }

    /// The limiter's name.
    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// Whether a limiter of this name can name its policies: they are sf-strings, printable
    /// ASCII.
    pub(crate) fn can_name(name: &str) -> bool {
        StringRef::from_str(name).is_ok()
    }

    /// The fields' items for the client counted under `key` with the limit's `opts`, of a
    /// built-in's `report`. `None` when the options do not declare the built-in's quotas (a
    /// limit the script refused would not have been reported). A `denied` outcome reports
    /// `r=0`.
    pub(crate) fn items(
        &self,
        algorithm: Builtin,
        key: &str,
        opts: &[Opt],
        report: &Report,
        denied: bool,
    ) -> Option<Items> {
        let windows = windows(algorithm, opts)?;
        let decided = usize::try_from(report.window()).ok()?;
        let pk = self.keys.of(key);
        let multi = algorithm == Builtin::MultiWindow;
        let name = |window: &Window| {
            if multi {
                // `:` cannot be in a limiter's name: these never meet another policy's.
                format!("{}:{}s", self.name, window.seconds)
            } else {
                self.name.to_string()
            }
        };

        let pk_param = || ("pk".to_owned(), Param::Bytes(pk.to_vec()));
        let policies: Vec<Member> = windows
            .iter()
            .map(|window| Member {
                name: name(window),
                params: if algorithm.leases() {
                    // A quota of requests in flight has no window: the draft's unit for it.
                    vec![
                        ("q".to_owned(), Param::Int(window.limit)),
                        (
                            "qu".to_owned(),
                            Param::Str("concurrent-requests".to_owned()),
                        ),
                        pk_param(),
                    ]
                } else {
                    vec![
                        ("q".to_owned(), Param::Int(window.limit)),
                        ("w".to_owned(), Param::Int(window.seconds)),
                        pk_param(),
                    ]
                },
            })
            .collect();
        let current = Member {
            name: policies.get(decided)?.name.clone(),
            params: vec![
                // A denied request has nothing left, whatever a bucket's refill says: a client
                // pacing by `r` must not retry into more denials.
                (
                    "r".to_owned(),
                    Param::Int(if denied { 0 } else { report.remaining().max(0) }),
                ),
                ("t".to_owned(), Param::Int(report.reset().max(0))),
                pk_param(),
            ],
        };
        Some(Items {
            policies,
            current: vec![current],
        })
    }
}

/// The items of an outcome's `RateLimit-Policy` and `RateLimit`, kept as values until a
/// response is written: a stack lists every limit's, and a cached denial counts its `t` down.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Items {
    policies: Vec<Member>,
    current: Vec<Member>,
}

impl Items {
    /// The two fields; `None` when a value is out of a Structured Field's range.
    pub(crate) fn render(&self) -> Option<[(HeaderName, HeaderValue); 2]> {
        Some([
            (POLICY, serialize(&self.policies)?),
            (RATELIMIT, serialize(&self.current)?),
        ])
    }

    /// Adds `other`'s items after these: one more limit of a stack.
    pub(crate) fn append(&mut self, other: &Self) {
        self.policies.extend_from_slice(&other.policies);
        self.current.extend_from_slice(&other.current);
    }

    /// Every `t` counted down by `passed` seconds, never below zero.
    pub(crate) fn count_down(&mut self, passed: i64) {
        for member in &mut self.current {
            count_down_member(member, passed);
        }
    }
}

fn count_down_member(member: &mut Member, passed: i64) {
    for (key, param) in &mut member.params {
        if let ("t", Param::Int(t)) = (key.as_str(), param) {
            *t = t.saturating_sub(passed).max(0);
        }
    }
}

/// The quotas a limit's options declare: `[limit, window, ...]`, or multi_window's
/// `"limit/window"` each.
fn windows(algorithm: Builtin, opts: &[Opt]) -> Option<Vec<Window>> {
    if algorithm == Builtin::MultiWindow {
        let windows: Vec<Window> = opts
            .iter()
            .filter_map(|opt| opt.as_str()?.split_once('/'))
            .map(|(limit, seconds)| {
                Some(Window {
                    limit: limit.parse().ok()?,
                    seconds: seconds.parse().ok()?,
                })
            })
            .collect::<Option<_>>()?;
        return (!windows.is_empty()).then_some(windows);
    }
    let int = |opt: &Opt| match opt {
        Opt::Int(n) => Some(*n),
        // A script reads digits either way.
        text => text.as_str()?.parse().ok(),
    };
    let seconds = if algorithm == Builtin::CalendarQuota {
        period_seconds(opts.get(1)?.as_str()?)?
    } else {
        int(opts.get(1)?)?
    };
    Some(vec![Window {
        limit: int(opts.first()?)?,
        seconds,
    }])
}

fn integer(n: i64) -> Option<Integer> {
    Integer::try_from(n).ok()
}

fn header_value(text: String) -> Option<HeaderValue> {
    // The serializer's buffer becomes the header's, without a copy.
    HeaderValue::from_maybe_shared(Bytes::from(text)).ok()
}

/// One list member as these fields use them: a String naming a policy, with parameters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Member {
    pub(crate) name: String,
    pub(crate) params: Vec<(String, Param)>,
}

/// A parameter value of these fields: `q`, `w`, `r`, `t` are integers, `pk` a byte sequence,
/// `qu` a string.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Param {
    Int(i64),
    Bytes(Vec<u8>),
    Str(String),
}

impl Member {
    /// The integer parameter `key`.
    pub(crate) fn int(&self, key: &str) -> Option<i64> {
        self.params.iter().find_map(|(name, value)| match value {
            Param::Int(n) if name == key => Some(*n),
            _ => None,
        })
    }
}

fn serialize(members: &[Member]) -> Option<HeaderValue> {
    let mut list = ListSerializer::new();
    for member in members {
        let mut item = list.bare_item(StringRef::from_str(&member.name).ok()?);
        for (key, value) in &member.params {
            let key = KeyRef::from_str(key).ok()?;
            item = match value {
                Param::Int(n) => item.parameter(key, integer(*n)?),
                Param::Bytes(bytes) => item.parameter(key, &bytes[..]),
                Param::Str(text) => item.parameter(key, StringRef::from_str(text).ok()?),
            };
        }
    }
    header_value(list.finish()?)
}

/// Parses a `RateLimit` or `RateLimit-Policy` value; `None` when it is not a list of Strings
/// with integer, byte-sequence and string parameters.
pub(crate) fn parse(value: &HeaderValue) -> Option<Vec<Member>> {
    Parser::new(value.as_bytes())
        .parse_list_with_visitor(Members(Vec::new()))
        .ok()
}

/// A cached `RateLimit` value as it reads `passed` seconds later: every `t` counted down.
pub(crate) fn count_down(value: &HeaderValue, passed: u64) -> Option<HeaderValue> {
    let passed = i64::try_from(passed).unwrap_or(i64::MAX);
    let mut members = parse(value)?;
    for member in &mut members {
        count_down_member(member, passed);
    }
    serialize(&members)
}

/// What a client reads of draft-10 fields: the policy that decided, its quota, what is left
/// and when it resets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Read {
    pub(crate) quota: Option<i64>,
    pub(crate) remaining: Option<i64>,
    pub(crate) reset: Option<i64>,
}

/// Reads the first `RateLimit` item and the quota of the policy it names; `None` without a
/// readable `RateLimit`.
pub(crate) fn read(headers: &HeaderMap) -> Option<Read> {
    let current = parse(headers.get(RATELIMIT)?)?.into_iter().next()?;
    let quota = headers
        .get(POLICY)
        .and_then(parse)
        .and_then(|policies| {
            policies
                .into_iter()
                .find(|policy| policy.name == current.name)
        })
        .and_then(|policy| policy.int("q"));
    Some(Read {
        quota,
        remaining: current.int("r"),
        reset: current.int("t"),
    })
}

/// Why a value does not parse as these fields' list.
#[derive(Debug, thiserror::Error)]
#[error("not a list of Strings with integer, byte-sequence or string parameters")]
struct Unsupported;

struct Members(Vec<Member>);

impl<'de> ListVisitor<'de> for Members {
    type Out = Vec<Member>;
    type Error = Unsupported;

    fn entry(&mut self) -> Result<impl EntryVisitor<'de>, Self::Error> {
        Ok(Entry(&mut self.0))
    }

    fn finish(self) -> Result<Self::Out, Self::Error> {
        Ok(self.0)
    }
}

struct Entry<'a>(&'a mut Vec<Member>);

impl<'de> EntryVisitor<'de> for Entry<'_> {
    type Error = Unsupported;

    fn item(self) -> Result<impl ItemVisitor<'de>, Self::Error> {
        Ok(self)
    }

    fn inner_list(self) -> Result<impl InnerListVisitor<'de>, Self::Error> {
        Err::<Never, _>(Unsupported)
    }
}

impl<'de> ItemVisitor<'de> for Entry<'_> {
    type Out = Option<()>;
    type Error = Unsupported;

    fn bare_item(
        self,
        bare: BareItemFromInput<'de>,
    ) -> Result<impl ParameterVisitor<'de, Out = Self::Out>, Self::Error> {
        let BareItemFromInput::String(name) = bare else {
            return Err(Unsupported);
        };
        self.0.push(Member {
            name: name.as_str().to_owned(),
            params: Vec::new(),
        });
        Ok(self.0.last_mut().map(Params))
    }
}

struct Params<'a>(&'a mut Member);

impl<'de> ParameterVisitor<'de> for Params<'_> {
    type Out = ();
    type Error = Unsupported;

    fn parameter(
        &mut self,
        key: &'de KeyRef,
        value: BareItemFromInput<'de>,
    ) -> Result<(), Self::Error> {
        let value = match value {
            BareItemFromInput::Integer(n) => Param::Int(i64::from(n)),
            BareItemFromInput::ByteSequence(bytes) => Param::Bytes(bytes),
            BareItemFromInput::String(text) => Param::Str(text.as_str().to_owned()),
            _ => return Err(Unsupported),
        };
        // RFC 9651: of a repeated parameter, the last wins.
        self.0.params.retain(|(name, _)| name != key.as_str());
        self.0.params.push((key.as_str().to_owned(), value));
        Ok(())
    }

    fn finish(self) -> Result<(), Self::Error> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::algorithm::Field;

    /// A report of limit, reset, remaining (and retry-after), `window` having decided.
    fn report(values: &[i64], window: u32) -> Report {
        let fields: Vec<Field> = values.iter().copied().map(Field::Int).collect();
        Report::from_values(&fields, window).unwrap()
    }

    /// The two fields of `report`, as a response carries them.
    fn render(
        draft: &Draft10,
        algorithm: Builtin,
        key: &str,
        opts: &[Opt],
        report: &Report,
        denied: bool,
    ) -> Option<[(HeaderName, HeaderValue); 2]> {
        draft.items(algorithm, key, opts, report, denied)?.render()
    }

    fn keys() -> PartitionKeys {
        PartitionKeys::new(b"0123456789abcdef0123456789abcdef").unwrap()
    }

    fn rendered(fields: &[(HeaderName, HeaderValue); 2]) -> [String; 2] {
        fields
            .clone()
            .map(|(_, value)| value.to_str().unwrap().to_owned())
    }

    #[test]
    fn pk_is_hmac_sha256_of_the_key_truncated() {
        // RFC 4231, test case 2: key "Jefe", data "what do ya want for nothing?".
        let mac = PartitionKeys(Hmac::new_from_slice(b"Jefe").unwrap());
        assert_eq!(
            mac.of("what do ya want for nothing?"),
            [
                0x5b, 0xdc, 0xc1, 0x46, 0xbf, 0x60, 0x75, 0x4e, 0x6a, 0x04, 0x24, 0x26
            ]
        );
        assert_eq!(keys().of("a"), keys().of("a"));
        assert_ne!(keys().of("a"), keys().of("b"));
        let other = PartitionKeys::new(b"another secret of 32 bytes......").unwrap();
        assert_ne!(keys().of("a"), other.of("a"));
        assert_eq!(
            PartitionKeys::process().of("a"),
            PartitionKeys::process().of("a")
        );
        assert_eq!(
            PartitionKeys::new(b"short").err(),
            Some("must be at least 16 bytes")
        );
    }

    #[test]
    fn single_window_built_ins_name_their_policy_after_the_limiter() {
        let draft = Draft10::new("token_bucket", keys());
        let policy = Field::from("20 20;w=600;burst=5;policy=token_bucket".to_owned());
        let bucket = Report::from_values(&[policy, Field::Int(600), Field::Int(19)], 0).unwrap();
        let fields = render(
            &draft,
            Builtin::TokenBucket,
            "plug_limit:{abcd}:token_bucket:1:/:alice",
            &[Opt::Int(20), Opt::Int(600), Opt::Int(5)],
            &bucket,
            false,
        )
        .unwrap();
        let pk = parse(&fields[1].1).unwrap()[0].params[2].1.clone();
        let Param::Bytes(pk) = pk else { panic!() };
        assert_eq!(pk.len(), PK_LEN);
        let [policy, current] = rendered(&fields);
        let pk = parse(&fields[0].1).unwrap()[0].params[2].clone();
        assert_eq!(pk.0, "pk");
        assert!(
            policy.starts_with(r#""token_bucket";q=20;w=600;pk=:"#),
            "{policy}"
        );
        assert!(
            current.starts_with(r#""token_bucket";r=19;t=600;pk=:"#),
            "{current}"
        );
    }

    #[test]
    fn multi_window_lists_every_window_and_names_the_one_that_decided() {
        let draft = Draft10::new("multi_window", keys());
        let opts = [Opt::Str("10/1"), Opt::Str("100/60"), Opt::Str("10/3600")];
        let fields = render(
            &draft,
            Builtin::MultiWindow,
            "k",
            &opts,
            &report(&[100, 42, 0, 42], 1),
            true,
        )
        .unwrap();
        let policies = parse(&fields[0].1).unwrap();
        let names: Vec<_> = policies.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(
            names,
            ["multi_window:1s", "multi_window:60s", "multi_window:3600s"]
        );
        assert_eq!(policies[2].int("q"), Some(10));
        assert_eq!(policies[2].int("w"), Some(3600));
        let current = &parse(&fields[1].1).unwrap()[0];
        assert_eq!(current.name, "multi_window:60s");
        assert_eq!((current.int("r"), current.int("t")), (Some(0), Some(42)));
        // Equal limits: the window the script says decided, whatever its reset.
        for (window, name) in [(0, "multi_window:1s"), (2, "multi_window:3600s")] {
            let fields = render(
                &draft,
                Builtin::MultiWindow,
                "k",
                &opts,
                &report(&[10, 1, 0], window),
                false,
            );
            assert_eq!(parse(&fields.unwrap()[1].1).unwrap()[0].name, name);
        }
        let beyond = report(&[10, 1, 0], 3);
        assert!(render(&draft, Builtin::MultiWindow, "k", &opts, &beyond, false).is_none());
    }

    #[test]
    fn calendar_quota_windows_are_its_periods_nominal_lengths() {
        let draft = Draft10::new("monthly", keys());
        let quota = report(&[10_000, 3600, 9999], 0);
        let fields_of = |period: &'static str, offset| {
            let opts = [Opt::Int(10_000), Opt::Str(period), Opt::Int(offset)];
            let fields = render(&draft, Builtin::CalendarQuota, "k", &opts, &quota, false).unwrap();
            let policy = &parse(&fields[0].1).unwrap()[0];
            let current = &parse(&fields[1].1).unwrap()[0];
            (
                policy.int("q"),
                policy.int("w"),
                current.int("r"),
                current.int("t"),
            )
        };
        let month = fields_of("month", -300);
        assert_eq!(
            month,
            (Some(10_000), Some(2_629_746), Some(9_999), Some(3_600))
        );
        assert_eq!(fields_of("week", 330).1, Some(604_800));
        assert_eq!(fields_of("day", 0).1, Some(86_400));
        let unknown = [Opt::Int(5), Opt::Str("year"), Opt::Int(0)];
        let five = report(&[5, 60, 4], 0);
        assert!(render(&draft, Builtin::CalendarQuota, "k", &unknown, &five, false).is_none());
    }

    #[test]
    fn a_concurrency_policy_counts_requests_in_flight_without_a_window() {
        let draft = Draft10::new("concurrency", keys());
        let opts = [Opt::Int(3), Opt::Int(600)];
        let fields = render(
            &draft,
            Builtin::Concurrency,
            "k",
            &opts,
            &report(&[3, 42, 1], 0),
            false,
        )
        .unwrap();
        let policy = &parse(&fields[0].1).unwrap()[0];
        assert_eq!(policy.int("q"), Some(3));
        assert_eq!(policy.int("w"), None);
        assert_eq!(
            fields[0].1.to_str().unwrap().split(";pk=").next(),
            Some("\"concurrency\";q=3;qu=\"concurrent-requests\"")
        );
        let current = &parse(&fields[1].1).unwrap()[0];
        assert_eq!((current.int("r"), current.int("t")), (Some(1), Some(42)));
    }

    #[test]
    fn options_out_of_contract_render_nothing() {
        let draft = Draft10::new("fixed_window", keys());
        let opts = [Opt::Int(3), Opt::Int(60)];
        let fields_of = |opts: &[Opt], report: &Report| {
            render(&draft, Builtin::FixedWindow, "k", opts, report, false)
        };
        let three = report(&[3, 60, 2], 0);
        assert!(fields_of(&opts, &three).is_some());
        assert!(fields_of(&[Opt::Int(3)], &three).is_none());
        assert!(fields_of(&[Opt::Str("3"), Opt::Str("60")], &three).is_some());
        // Past a Structured Field integer's range (15 digits): no fields rather than wrong ones.
        let huge = report(&[3, 1_000_000_000_000_000, 2], 0);
        assert!(fields_of(&opts, &huge).is_none());
        assert!(!Draft10::can_name("límite"));
        assert!(Draft10::can_name("login"));
    }

    #[test]
    fn items_of_a_stack_list_every_limit_and_count_down_together() {
        let draft = Draft10::new("fixed_window", keys());
        let opts = [Opt::Int(3), Opt::Int(60)];
        let items = |reset| {
            draft
                .items(
                    Builtin::FixedWindow,
                    "k",
                    &opts,
                    &report(&[3, reset, 1], 0),
                    false,
                )
                .unwrap()
        };
        let mut stack = items(50);
        stack.append(&items(20));
        stack.count_down(30);
        let [policy, current] = stack.render().unwrap();
        assert_eq!(parse(&policy.1).unwrap().len(), 2);
        let ts: Vec<_> = parse(&current.1)
            .unwrap()
            .iter()
            .map(|m| m.int("t"))
            .collect();
        assert_eq!(ts, [Some(20), Some(0)]);
    }

    #[test]
    fn count_down_lowers_t_and_keeps_the_rest() {
        let value = HeaderValue::from_static(r#""gcra";r=0;t=7;pk=:AAECAwQFBgcICQoL:"#);
        assert_eq!(
            count_down(&value, 3).unwrap(),
            r#""gcra";r=0;t=4;pk=:AAECAwQFBgcICQoL:"#
        );
        assert_eq!(
            count_down(&value, 30).unwrap(),
            r#""gcra";r=0;t=0;pk=:AAECAwQFBgcICQoL:"#
        );
        assert!(count_down(&HeaderValue::from_static("a, (b)"), 1).is_none());
    }

    #[test]
    fn read_finds_the_quota_of_the_policy_that_decided() {
        let mut headers = HeaderMap::new();
        headers.insert(
            POLICY,
            HeaderValue::from_static(r#""m:1s";q=1;w=1, "m:60s";q=5;w=60"#),
        );
        headers.insert(RATELIMIT, HeaderValue::from_static(r#""m:60s";r=2;t=30"#));
        assert_eq!(
            read(&headers),
            Some(Read {
                quota: Some(5),
                remaining: Some(2),
                reset: Some(30),
            })
        );
        assert_eq!(read(&HeaderMap::new()), None);
    }
}
