//! The README's examples, compiled and run as doctests of this package.

#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
struct ReadmeDoctests;
