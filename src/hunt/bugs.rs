//! The distinct bugs of a hunt: seeds sorted into buckets, buckets shrunk
//! once into signatures ([`super::signature`]), one regression file per
//! signature, and counts.
//!
//! Runs on the hunt's calling thread, seed by seed in seed order, so the
//! table is a function of the seeds run (never of thread timing): the first
//! seed of a bucket is the one shrunk, and the smallest reproducer of a
//! signature wins (fewer steps, then the lower seed).

use super::signature::{bucket, short_id, signature};
use super::{shrink, HuntOptions, SeedOutcome};
use crate::check;
use crate::error::{Error, Result};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// One distinct bug: a signature, how often it was hit, and its reproducer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Bug {
    /// 8 hex digits naming the signature (its file name ends with them).
    pub id: String,
    /// What makes it this bug ([`super::signature`]): the checks its
    /// reproducer violates and the kinds of its steps; for an unshrunk
    /// bug, its bucket.
    pub signature: String,
    /// The checks its reproducer violates (unshrunk: the bucket's check).
    pub checks: Vec<String>,
    /// How many seeds hit it.
    pub seeds: u64,
    /// The lowest seed that hit it.
    pub first_seed: u64,
    /// That seed's violation, in words.
    pub headline: String,
    /// The command that replays that seed.
    pub repro: String,
    /// The seed its reproducer was shrunk from.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub shrunk_from: Option<u64>,
    /// How many steps its reproducer has.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub steps: Option<usize>,
    /// Its regression file.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub file: Option<String>,
    /// Where two runs of the first seed differed (`--check-determinism`).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub nondeterminism: Option<String>,
    /// A live hunt: of how many live replays of the first seed, how many showed it again.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub replayed: Option<(u32, u32)>,
}

/// A seed's failure as the table files it: one per violated check.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Failure {
    /// The check (or `protocol`, `nondeterminism`).
    pub check: String,
    /// Its first violation in words.
    pub headline: String,
    /// Its bucket ([`super::signature::bucket`]).
    pub bucket: String,
    /// The [`super::signature::defect`] of its first violation
    /// (`stopped-early` for a run stopped early, `nondeterminism`).
    #[serde(default)]
    pub defect: String,
}

impl Failure {
    /// What an unshrunk hunt files it under: the check and its defect,
    /// the two parts of a shrunk signature, read from the unshrunk run.
    /// Live timing changes a headline's shape (and with it the bucket) far
    /// more often than the defect, so live and simulated hunts of the
    /// same seeds compare by this.
    pub fn kind(&self) -> String {
        format!("{} | {}", self.check, self.defect)
    }
}

/// What the header of a regression file says of it.
const SIGNATURE_LINE: &str = "signature: ";

/// The table being built, seed by seed.
pub(crate) struct Table<'a> {
    opts: &'a HuntOptions,
    /// Bucket -> index into `bugs`.
    buckets: BTreeMap<String, usize>,
    /// Signature -> index into `bugs`.
    signatures: BTreeMap<String, usize>,
    pub(crate) bugs: Vec<Bug>,
    /// Regressions already in the output directory for this server: signature -> (file, steps).
    existing: BTreeMap<String, (PathBuf, usize)>,
    /// Seeds with at least one finding.
    pub(crate) failing: u64,
}

impl<'a> Table<'a> {
    pub(crate) fn new(opts: &'a HuntOptions) -> Result<Self> {
        let existing = match &opts.out {
            Some(dir) => existing_regressions(dir, &opts.server)?,
            None => BTreeMap::new(),
        };
        Ok(Table {
            opts,
            buckets: BTreeMap::new(),
            signatures: BTreeMap::new(),
            bugs: Vec::new(),
            existing,
            failing: 0,
        })
    }

    fn shrinks(&self) -> bool {
        self.opts.out.is_some() && self.opts.plug.is_none()
    }

    /// `plan` run against the hunted server (live when the hunt is live) and
    /// judged, with the server's name as its run reports it (a live process
    /// names itself in `ready`).
    fn judged(&self, plan: &crate::scenario::Plan) -> Option<(String, Vec<check::Verdict>)> {
        let run = match &self.opts.live {
            Some(live) => crate::live::run(plan, live).ok().filter(|r| r.aborted.is_none())?,
            None => crate::run(plan, &self.opts.server, None).ok()?,
        };
        Some((run.server.clone(), check::judge(&run.trace)))
    }

    /// Files one judged seed; returns the indices of bugs it found first.
    pub(crate) fn add(&mut self, o: &SeedOutcome) -> Vec<usize> {
        if o.failures.is_empty() {
            return Vec::new();
        }
        self.failing += 1;
        let mut new = Vec::new();
        let mut hit = Vec::new();
        for f in &o.failures {
            let i = match self.buckets.get(&f.bucket) {
                Some(&i) => i,
                None => {
                    let (i, is_new) = self.file_bucket(o, f);
                    self.buckets.insert(f.bucket.clone(), i);
                    if is_new {
                        new.push(i);
                    }
                    i
                }
            };
            if !hit.contains(&i) {
                hit.push(i);
            }
        }
        for i in hit {
            let b = &mut self.bugs[i];
            b.seeds += 1;
            if o.seed < b.first_seed {
                b.first_seed = o.seed;
            }
        }
        new
    }

    /// A bucket seen for the first time: shrink it (when shrinking) and find
    /// or make its bug. Returns the bug and whether it is new.
    fn file_bucket(&mut self, o: &SeedOutcome, f: &Failure) -> (usize, bool) {
        let repro = self.opts.replay_command(o.seed);
        let shrinkable = self.shrinks() && f.check != "protocol" && f.check != "nondeterminism";
        let (sig, checks, shrunk) = if shrinkable {
            let plan = super::draw(o.seed, self.opts.dialect, self.opts.replicas);
            let shrunk = match &self.opts.live {
                // Live: every candidate is a real run of the process (`--shrink-runs` bounds them).
                Some(live) => {
                    let keep =
                        shrink::keep_for(&plan, &f.check, &f.defect, |p, k| shrink::still_fails_live(p, live, k));
                    shrink::shrink_with(&plan, self.opts.shrink_budget, |c| shrink::still_fails_live(c, live, &keep))
                }
                None => shrink::shrink_keeping(&plan, &self.opts.server, &f.check, &f.defect, self.opts.shrink_budget),
            };
            let verdicts = self.judged(&shrunk.plan).map(|(_, v)| v).unwrap_or_default();
            let checks = violated_in(&verdicts);
            let checks = if checks.is_empty() { vec![f.check.clone()] } else { checks };
            (signature(&verdicts), checks, Some(shrunk))
        } else {
            (format!("unshrunk | {}", f.kind()), vec![f.check.clone()], None)
        };
        if let Some(&i) = self.signatures.get(&sig) {
            if let Some(shrunk) = shrunk {
                self.offer(i, o.seed, &f.check, &repro, &shrunk);
            }
            return (i, false);
        }
        let id = short_id(&sig);
        let bug = Bug {
            id,
            signature: sig.clone(),
            checks,
            seeds: 0,
            first_seed: o.seed,
            headline: format!("{}: {}", f.check, f.headline),
            repro,
            shrunk_from: None,
            steps: None,
            file: None,
            nondeterminism: o.nondeterminism.clone(),
            replayed: None,
        };
        self.bugs.push(bug);
        let i = self.bugs.len() - 1;
        self.signatures.insert(sig, i);
        if let Some(shrunk) = shrunk {
            let repro = self.bugs[i].repro.clone();
            self.offer(i, o.seed, &f.check, &repro, &shrunk);
        }
        (i, true)
    }

    /// Offers a reproducer for bug `i`; it is kept (and written) when it is
    /// the smallest so far and smaller than a file already in the directory.
    fn offer(&mut self, i: usize, seed: u64, check: &str, repro: &str, shrunk: &shrink::Shrunk) {
        let steps = shrunk.plan.steps.len();
        let bug = &self.bugs[i];
        if bug.steps.is_some_and(|s| (s, bug.shrunk_from) <= (steps, Some(seed))) {
            return;
        }
        let Some(dir) = self.opts.out.clone() else { return };
        if let Some((file, old)) = self.existing.get(&bug.signature) {
            if *old <= steps {
                let (file, old) = (file.display().to_string(), *old);
                let bug = &mut self.bugs[i];
                (bug.file, bug.steps, bug.shrunk_from) = (Some(file), Some(old), None);
                return;
            }
        }
        let sig = bug.signature.clone();
        // The hunted server's [expect]: from a run of the reproducer (live:
        // one more live run, under the name the process gives itself).
        let hunted = match self.judged(&shrunk.plan) {
            Some((name, verdicts)) => Ok((name, check::violated(&verdicts).into_iter().map(String::from).collect())),
            None => Err(Error::io("its reproducer did not run to the end")),
        };
        let bug = &mut self.bugs[i];
        let written = hunted.and_then(|(server, violated)| {
            let name = format!("{server}-{check}-{}", bug.id);
            write_regression_named(&dir, &name, (&server, violated), seed, check, repro, shrunk, &sig)
        });
        match written {
            Ok(path) => {
                // A smaller reproducer replaces the bug's earlier file.
                if let Some(old) = bug.file.take().filter(|f| Path::new(f) != path) {
                    let _ = std::fs::remove_file(old);
                }
                (bug.file, bug.steps, bug.shrunk_from) = (Some(path.display().to_string()), Some(steps), Some(seed));
            }
            Err(e) => bug.headline.push_str(&format!(" (could not write its regression: {e})")),
        }
    }
}

/// The checks with a violation a server could have prevented.
fn violated_in(verdicts: &[check::Verdict]) -> Vec<String> {
    verdicts.iter().filter(|v| v.violations().iter().any(|x| !x.inherent)).map(|v| v.check.to_string()).collect()
}

/// The failures of one judged seed, one per violated check, with buckets.
pub(crate) fn failures(plan: &crate::scenario::Plan, firsts: &[(String, String, &str)]) -> Vec<Failure> {
    firsts
        .iter()
        .map(|(check, headline, defect)| Failure {
            check: check.clone(),
            headline: headline.clone(),
            bucket: bucket(check, headline, plan),
            defect: defect.to_string(),
        })
        .collect()
}

/// The regressions in `dir` that a hunt of `server` wrote: signature -> (file, steps).
fn existing_regressions(dir: &Path, server: &str) -> Result<BTreeMap<String, (PathBuf, usize)>> {
    let mut found = BTreeMap::new();
    let Ok(entries) = std::fs::read_dir(dir) else { return Ok(found) };
    let found_with = format!("# Found with server {server} at seed ");
    // Sorted: which of two equal files wins must not depend on directory order.
    let mut paths: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
    paths.sort();
    for path in paths {
        if path.extension().is_none_or(|x| x != "toml") {
            continue;
        }
        let Ok(text) = std::fs::read_to_string(&path) else { continue };
        if !text.lines().any(|l| l.starts_with(&found_with)) {
            continue;
        }
        let Some(sig) = text.lines().find_map(|l| l.strip_prefix("# ")?.strip_prefix(SIGNATURE_LINE)) else {
            continue;
        };
        // A file the loader rejects is no reproducer: a new one is written.
        let Ok(plan) = crate::scenario::Plan::load(&path) else { continue };
        let steps = plan.steps.len();
        let keep = found.get(sig).is_none_or(|(_, s): &(PathBuf, usize)| steps < *s);
        if keep {
            found.insert(sig.to_string(), (path, steps));
        }
    }
    Ok(found)
}

/// Writes a shrunk plan as a regression scenario, with `[expect]` filled in
/// for the hunted server and for every built-in server of its dialect.
/// `origin` says how to reproduce the unshrunk failure (a command or a file).
pub fn write_regression(
    dir: &Path,
    server: &str,
    seed: u64,
    target: &str,
    origin: &str,
    shrunk: &shrink::Shrunk,
) -> Result<PathBuf> {
    let name = format!("{server}-{seed}-{target}");
    let verdicts = check::judge(&crate::run(&shrunk.plan, server, None)?.trace);
    let violated = check::violated(&verdicts).into_iter().map(String::from).collect();
    write_regression_named(dir, &name, (server, violated), seed, target, origin, shrunk, &signature(&verdicts))
}

#[allow(clippy::too_many_arguments)]
fn write_regression_named(
    dir: &Path,
    name: &str,
    (server, violated): (&str, Vec<String>),
    seed: u64,
    target: &str,
    origin: &str,
    shrunk: &shrink::Shrunk,
    signature: &str,
) -> Result<PathBuf> {
    let mut plan = shrunk.plan.clone();
    plan.name = name.to_string();
    plan.description = format!("shrunk from hunt seed {seed}: {server} violates {target}");
    plan.expect.clear();
    plan.expect_inherent.clear();
    // Every built-in server that speaks the dialect, so that the file,
    // promoted into scenarios/regressions/, judges every run `mcpsim run` makes of it.
    for other in crate::server::known_servers() {
        if other != server && !crate::server::speaks(other, plan.dialect) {
            continue;
        }
        let verdicts = check::judge(&crate::run(&plan, other, None)?.trace);
        let names = |ids: Vec<check::CheckId>| ids.into_iter().map(String::from).collect::<Vec<_>>();
        let inherent = names(check::inherent_only(&verdicts));
        if !inherent.is_empty() {
            plan.expect_inherent.insert(other.to_string(), inherent);
        }
        let all = if other == server { violated.clone() } else { names(check::violated(&verdicts)) };
        plan.expect.insert(other.to_string(), all);
    }
    let header = vec![
        format!("Found with server {server} at seed {seed} (mcpsim {}).", env!("CARGO_PKG_VERSION")),
        format!("Shrunk in {} runs to {} steps while {target} still fails.", shrunk.runs, plan.steps.len()),
        format!("The original: {origin}"),
        format!("{SIGNATURE_LINE}{signature}"),
    ];
    let path = dir.join(format!("{name}.toml"));
    std::fs::write(&path, plan.to_toml(&header))
        .map_err(|e| Error::io(format!("{}: cannot write: {e}", path.display())))?;
    Ok(path)
}

/// Merges the bug tables of several shards: by signature, counts add up,
/// the lowest first seed is kept, and the smallest reproducer wins.
pub(crate) fn merge_bugs(into: &mut Vec<Bug>, more: Vec<Bug>) {
    for b in more {
        match into.iter_mut().find(|x| x.signature == b.signature) {
            None => into.push(b),
            Some(x) => {
                x.seeds += b.seeds;
                if b.first_seed < x.first_seed {
                    (x.first_seed, x.headline, x.repro) = (b.first_seed, b.headline.clone(), b.repro.clone());
                    x.nondeterminism = b.nondeterminism.clone();
                }
                let smaller = match (b.steps, x.steps) {
                    (Some(n), Some(m)) => (n, b.shrunk_from) < (m, x.shrunk_from),
                    (Some(_), None) => true,
                    _ => false,
                };
                if smaller {
                    (x.steps, x.file, x.shrunk_from) = (b.steps, b.file, b.shrunk_from);
                    x.checks = b.checks;
                }
            }
        }
    }
    sort_bugs(into);
}

/// The table's order: most seeds first, then the lower first seed.
pub(crate) fn sort_bugs(bugs: &mut [Bug]) {
    bugs.sort_by(|a, b| b.seeds.cmp(&a.seeds).then(a.first_seed.cmp(&b.first_seed)).then(a.id.cmp(&b.id)));
}
