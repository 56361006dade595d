//! Malformed scenario files: each error names the file, line and column, shows
//! the line with a caret, and suggests the likely fix. Exact messages are
//! snapshotted in `snapshots/malformed/`.

mod common;

use mcpsim::scenario::Plan;

const HEAD: &str = "[scenario]\nname = \"m\"\nduration = \"60s\"\n\n[[client]]\nname = \"alice\"\n";

fn step(body: &str) -> String {
    format!("{HEAD}\n[[step]]\n{body}\n")
}

fn cases() -> Vec<(&'static str, String)> {
    vec![
        ("syntax-unclosed-table", "[scenario\nname = \"m\"\n".to_string()),
        ("syntax-bad-string", "[scenario]\nname = \"m\nduration = \"1s\"\n".to_string()),
        ("wrong-type-seed", "[scenario]\nname = \"m\"\nseed = \"seven\"\nduration = \"1s\"\n".to_string()),
        ("missing-duration", "[scenario]\nname = \"m\"\n".to_string()),
        ("unknown-top-level-table", format!("{HEAD}[netwrk]\nlatency = \"5ms\"\n")),
        ("unknown-key-did-you-mean", format!("{HEAD}[network]\nlatncy = \"5ms\"\n")),
        (
            "unknown-client-key",
            "[scenario]\nname = \"m\"\nduration = \"1s\"\n[[client]]\nname = \"a\"\nthink = \"1s\"\n".to_string(),
        ),
        ("unknown-dialect", "[scenario]\nname = \"m\"\ndialect = \"legacy-sse2\"\nduration = \"1s\"\n".to_string()),
        ("malformed-duration-unit", step("at = \"5 fortnights\"\ndo = \"wait\"")),
        ("malformed-duration-missing-unit", format!("{HEAD}[server]\nheartbeat = \"15\"\n")),
        ("undefined-client", step("at = \"1s\"\ndo = \"connect\"\nclient = \"alise\"")),
        ("undefined-label", step("at = \"1s\"\ndo = \"answer\"\nclient = \"alice\"\nlabel = \"req-42\"")),
        ("unknown-step-kind", step("at = \"1s\"\ndo = \"rebnd\"\nclient = \"alice\"")),
        ("step-field-does-not-apply", step("at = \"1s\"\ndo = \"rebind\"\nclient = \"alice\"\ncount = 3")),
        ("step-missing-client", step("at = \"1s\"\ndo = \"sever\"")),
        (
            "steps-out-of-order",
            format!("{HEAD}\n[[step]]\nat = \"5s\"\ndo = \"wait\"\n\n[[step]]\nat = \"2s\"\ndo = \"wait\"\n"),
        ),
        ("step-after-duration", step("at = \"90s\"\ndo = \"wait\"")),
        (
            "unknown-server-request-method",
            step(
                "at = \"1s\"\ndo = \"server-request\"\nclient = \"alice\"\nmethod = \"sampling/create\"\nlabel = \"r\"",
            ),
        ),
        (
            "reissuable-on-a-resume",
            step("at = \"1s\"\ndo = \"resume\"\nclient = \"alice\"\nreissuable = false"),
        ),
        ("reissuable-not-a-bool", step("at = \"1s\"\ndo = \"server-request\"\nclient = \"alice\"\nmethod = \"roots/list\"\nlabel = \"r\"\nreissuable = \"no\"")),
        ("fence-delay-not-a-duration", format!("{HEAD}[server]\nfence_delay = 8\n")),
        ("bad-last-event-id", step("at = \"1s\"\ndo = \"resume\"\nclient = \"alice\"\nlast_event_id = \"latest\"")),
        (
            "raw-last-event-id-not-a-header",
            step("at = \"1s\"\ndo = \"resume\"\nclient = \"alice\"\nlast_event_id = { raw = \"a\\nb\" }"),
        ),
        ("expect-unknown-check", format!("{HEAD}[expect]\nnaive = [\"liveliness\"]\n")),
        ("expect-unknown-server", format!("{HEAD}[expect]\nguardd = []\n")),
        ("duplicate-client", format!("{HEAD}[[client]]\nname = \"alice\"\n")),
        (
            "principal-not-a-header",
            "[scenario]\nname = \"m\"\nduration = \"1s\"\n[[client]]\nname = \"a\"\nprincipal = \"al\\u0001ice\"\n".to_string(),
        ),
        (
            "label-with-control-character",
            step("at = \"1s\"\ndo = \"server-request\"\nclient = \"alice\"\nmethod = \"roots/list\"\nlabel = \"r\\n1\""),
        ),
        (
            "reserved-client-name",
            "[scenario]\nname = \"m\"\nduration = \"1s\"\n[[client]]\nname = \"server\"\n".to_string(),
        ),
        ("zero-retention", format!("{HEAD}[server]\nretention = 0\n")),
        (
            "call-tool-in-legacy-sse",
            step("at = \"1s\"\ndo = \"call-tool\"\nclient = \"alice\"\nmethod = \"roots/list\"\nlabel = \"c\""),
        ),
        (
            "seen-by-unknown-client",
            step("at = \"1s\"\ndo = \"resume\"\nclient = \"alice\"\nlast_event_id = { seen_by = \"bob\", nth = 1 }"),
        ),
        (
            "seen-by-nth-zero",
            step("at = \"1s\"\ndo = \"resume\"\nclient = \"alice\"\nlast_event_id = { seen_by = \"alice\", nth = 0 }"),
        ),
        (
            "seen-by-unknown-key",
            step("at = \"1s\"\ndo = \"resume\"\nclient = \"alice\"\nlast_event_id = { seen = \"alice\", nth = 1 }"),
        ),
        (
            "call-tool-unknown-method",
            "[scenario]\nname = \"m\"\ndialect = \"streamable-http\"\nduration = \"60s\"\n[[client]]\nname = \"alice\"\n[[step]]\nat = \"1s\"\ndo = \"call-tool\"\nclient = \"alice\"\nmethod = \"roots/lst\"\nlabel = \"c\"\n"
                .to_string(),
        ),
    ]
}

#[test]
fn malformed_scenarios_get_exact_located_errors() {
    let cases = cases();
    assert!(cases.len() >= 15);
    for (name, text) in cases {
        let err = Plan::from_toml_str(&text, format!("{name}.toml")).expect_err(name);
        assert_eq!(err.exit_code(), 3, "{name}");
        let msg = err.to_string();
        assert!(msg.starts_with(&format!("{name}.toml:")), "{name}: {msg}");
        common::snapshot("malformed", name, &msg, Some(&text));
    }
}
