//! The options of plug_limit's built-in limiters and their rules, written once.
//!
//! Each built-in is a Lua script that checks its own options: a script must stand alone in
//! Redis. On the Rust side every check of them is made here, by four callers:
//!
//! - the native twins, which decide as the scripts do, read each option with [`Arg`] and refuse
//!   it with the script's own words ([`Refusal`]: `fixed_window: limit must be a positive
//!   integer, got '0'`);
//! - `RuntimeLimit` refuses a limit read from a file when it is made ([`check`], the same
//!   words);
//! - the typed limits (`FixedWindow<10, 60>`) refuse their const parameters at compile time
//!   ([`Builtin::assert_counts`], [`assert_calendar`]);
//! - `#[rate_limit]` refuses its `opts` at compile time, worded for the attribute and pointing
//!   at the option, by the same rules ([`count`], [`burst`], [`leaky`], [`period`],
//!   [`utc_offset`], [`zone_name`], [`rate`]).
//!
//! [`Builtin`] is the catalogue: each built-in's name, its options and their kinds, and what
//! it can do. A new built-in is an entry there, and a [`Kind`] if one of its options is of a
//! new kind.
//!
//! [`ATTRIBUTE_ARGUMENTS`] are the arguments `#[rate_limit]` takes, for the macro that parses
//! them and the tests that hold its docs to them.
//!
//! [`excerpt`] is how much of a refused input an error quotes, here and in plug_limit: its
//! first 64 characters, then its length, escaped as `str::escape_debug` escapes it.

mod arg;
mod attribute;
mod catalogue;
mod excerpt;
mod rules;

pub use self::arg::{Arg, Refusal};
pub use self::attribute::{ATTRIBUTE_ARGUMENTS, attribute_arguments};
pub use self::catalogue::{Builtin, Kind, Param, assert_calendar, check};
pub use self::excerpt::{excerpt, excerpt_within};
pub use self::rules::{
    MAX, MAX_LEAKY_PRODUCT, MAX_UTC_OFFSET, MAX_ZONE_NAME, PERIODS, Rule, burst, count,
    is_zone_form, leaky, limiter_name_char, period, rate, utc_offset, zone_name,
};
