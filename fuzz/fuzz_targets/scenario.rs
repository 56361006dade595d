//! The scenario loader: any text loads into a plan or a located error, never
//! a panic; a plan it loads writes back to TOML that loads to the same plan.
#![no_main]
use libfuzzer_sys::fuzz_target;
use mcpsim::scenario::Plan;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let Ok(plan) = Plan::from_toml_str(text, "fuzz.toml") else { return };
    let written = plan.to_toml(&[]);
    let again = Plan::from_toml_str(&written, "fuzz.toml")
        .unwrap_or_else(|e| panic!("a loaded plan wrote TOML that does not load: {e}\n{written}"));
    assert_eq!(again.to_toml(&[]), written, "writing is not stable");
});
