//! Compile-time behaviour of `#[rate_limit]`: the handler shapes it accepts (`ui/pass`), and
//! the mistakes it reports (`ui/fail`, one per file, with the expected `.stderr`).
//!
//! The `.stderr` files hold only the macro's own messages, whose text and spans we control,
//! so they stay valid across compiler versions. Refresh them with
//! `TRYBUILD=overwrite cargo test -p plug_limit_tests --test ui` and read the diff.

#[test]
fn ui() {
    let cases = trybuild::TestCases::new();
    cases.pass("tests/ui/pass/*.rs");
    cases.compile_fail("tests/ui/fail/*.rs");
}
