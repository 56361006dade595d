//! `mcpsim list`, `explain` and `check` (alias `validate`): what mcpsim knows, and scenario files validated.

use crate::cli::ListWhat;
use crate::cmd::run::{bundled_dir, collect};
use crate::exit;
use mcpsim::scenario::Plan;
use mcpsim::Error;
use std::path::PathBuf;

pub(crate) fn list(what: ListWhat) -> Result<u8, Error> {
    match what {
        ListWhat::Servers => {
            for (name, about) in mcpsim::server::describe_servers() {
                let speaks: Vec<&str> = mcpsim::server::dialects(&name).iter().map(|d| d.name()).collect();
                out!("{name:<18} {about} [{}]", speaks.join(", "));
            }
        }
        ListWhat::Checks => {
            for c in mcpsim::check::CHECKS {
                out!("{:<24} {}", c.id, c.about);
            }
            out!("\nstateless-http (MCP 2026-07-28) has its own checks:");
            for c in mcpsim::check::stateless::CHECKS {
                out!("{:<24} {}", c.id, c.about);
            }
        }
        ListWhat::Scenarios => {
            let loaded: Vec<_> = collect(vec![bundled_dir()])?.into_iter().map(|p| (Plan::load(&p), p)).collect();
            let width = loaded.iter().filter_map(|(p, _)| p.as_ref().ok()).map(|p| p.name.len()).max().unwrap_or(0);
            for (plan, path) in loaded {
                match plan {
                    Ok(p) => {
                        let dialect = p.dialect.name();
                        out!("{:<width$}  {dialect:<15}  {}", p.name, p.description)
                    }
                    Err(e) => out!("{:<width$}  INVALID: {e}", path.display()),
                }
            }
        }
    }
    Ok(exit::OK)
}

pub(crate) fn explain(id: &str) -> Result<u8, Error> {
    let stateful = mcpsim::check::CHECKS.iter().find(|c| c.id == id);
    let stateless = mcpsim::check::stateless::CHECKS.iter().find(|c| c.id == id);
    if stateful.is_none() && stateless.is_none() {
        let ids = mcpsim::check::CheckId::NAMES;
        let hint = mcpsim::error::did_you_mean(id, ids.iter().copied())
            .map_or(String::new(), |s| format!(", did you mean {s:?}?"));
        return Err(Error::usage(format!("unknown check {id:?}{hint} (known: {})", ids.join(", "))));
    }
    let show = |c: &mcpsim::check::Check, prefix: &str| {
        let e = &c.explain;
        out!("{prefix}{}: {}\n\nWhat it means\n  {}\n\nEvidence it uses\n  {}\n\nCondition of the analysis\n  {}\n\nTo pass, a server must\n  {}", c.id, c.about, e.meaning, e.evidence, e.condition, e.to_pass);
    };
    if let Some(c) = stateful {
        show(c, "");
    }
    if let Some(c) = stateless {
        show(
            c,
            if stateful.is_some() {
                "\nIn stateless-http (MCP 2026-07-28), "
            } else {
                "stateless-http (MCP 2026-07-28): "
            },
        );
    }
    Ok(exit::OK)
}

pub(crate) fn check_files(paths: Vec<PathBuf>) -> Result<u8, Error> {
    let files = collect(paths)?;
    let mut invalid = 0;
    for f in &files {
        match Plan::load(f) {
            Ok(p) => out!("ok: {} ({}, {} client(s), {} step(s))", f.display(), p.name, p.clients.len(), p.steps.len()),
            Err(e) => {
                eprintln!("error: {e}");
                invalid += 1;
            }
        }
    }
    if invalid > 0 {
        return Err(Error::new(
            mcpsim::ErrorKind::Scenario,
            format!("{invalid} of {} scenario file(s) invalid", files.len()),
        ));
    }
    Ok(exit::OK)
}
