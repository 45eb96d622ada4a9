//! Compile-time behaviour of `#[pipeline]`: what it accepts (`tests/ui/pass`)
//! and how it reports mistakes (`tests/ui/fail`, with the expected compiler
//! output in `.stderr` files; regenerate with `TRYBUILD=overwrite`).

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.pass("tests/ui/pass/*.rs");
    t.compile_fail("tests/ui/fail/*.rs");
}
