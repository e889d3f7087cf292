//! libFuzzer entry for `anneal_fuzz::nested`; the checks live in the library so that
//! tests/tests/hostile_parsers.rs replays the corpora through the same code on stable.

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| anneal_fuzz::nested(data));
