//! A test harness that can ignore a test at run time, with its reason, in
//! the summary a default `cargo test` prints (libtest-mimic): a test whose
//! toolchain is missing shows as `ignored`, never as `ok`. With `CI=true` a
//! missing toolchain fails the test instead (CI must prove everything).

use libtest_mimic::{Arguments, Failed, Trial};

/// One test: its name, its body (a panic fails it), and why it cannot run here, if it cannot.
pub struct Case {
    name: &'static str,
    body: Box<dyn FnOnce() + Send + 'static>,
    missing: Option<String>,
    always_ignored: Option<&'static str>,
}

impl Case {
    pub fn new(name: &'static str, body: impl FnOnce() + Send + 'static) -> Self {
        Self { name, body: Box::new(body), missing: None, always_ignored: None }
    }

    /// It needs what `missing` says is missing (None: all there).
    pub fn needs(mut self, missing: &Option<String>) -> Self {
        self.missing = missing.clone();
        self
    }

    /// Ignored unless asked for (`-- --ignored`), as `#[ignore = why]`.
    pub fn ignored(mut self, why: &'static str) -> Self {
        self.always_ignored = Some(why);
        self
    }
}

fn ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true")
}

/// Runs `cases` as the test binary's `main`, and exits.
pub fn run(cases: Vec<Case>) -> ! {
    run_args(Arguments::from_args(), cases)
}

/// [`run`], `threads` tests at a time unless `--test-threads` says otherwise
/// (for tests that wait on real time rather than on the CPU).
#[allow(dead_code)]
pub fn run_with_threads(cases: Vec<Case>, threads: usize) -> ! {
    let mut args = Arguments::from_args();
    args.test_threads.get_or_insert(threads);
    run_args(args, cases)
}

fn run_args(args: Arguments, cases: Vec<Case>) -> ! {
    let mut trials = Vec::new();
    for c in cases {
        let Case { name, body, missing, always_ignored } = c;
        let mut trial = match (&missing, ci()) {
            // In CI a missing toolchain is a failure.
            (Some(why), true) => {
                let why = why.clone();
                Trial::test(name, move || Err(Failed::from(format!("CI=true and this test cannot run: {why}"))))
            }
            (Some(why), false) => {
                eprintln!("ignored {name}: {why}");
                Trial::test(name, || Ok(())).with_ignored_flag(true).with_kind("cannot run here")
            }
            (None, _) => Trial::test(name, move || {
                body();
                Ok(())
            }),
        };
        if let Some(why) = always_ignored {
            if missing.is_none() {
                trial = trial.with_ignored_flag(true).with_kind(why);
            }
        }
        trials.push(trial);
    }
    libtest_mimic::run(&args, trials).exit()
}
