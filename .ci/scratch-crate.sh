#!/usr/bin/env bash
# Builds a scratch crate the way the README's "Use it from your own `cargo
# test`" section says, from that section's own blocks (Cargo.toml,
# .cargo/config.toml, the test), and runs its test. The crate's mcpsim path
# points at this clone; its scenario is a copy of scenarios/clean-resume.toml.
# It shares this clone's target directory and Cargo.lock, so the dependencies
# built for the tests are not built again.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
crate="$(mktemp -d)"
trap 'rm -rf "$crate"' EXIT

# The README section's fenced blocks, each to the file its first line names.
python3 - "$root/README.md" "$crate" <<'EOF'
import os, re, sys
readme, crate = sys.argv[1], sys.argv[2]
text = open(readme).read()
start = text.index("## Use it from your own `cargo test`")
end = text.index("\n## ", start + 1)
blocks = re.findall(r"```(?:toml|rust)\n(.*?)```", text[start:end], re.S)
names = {"# Cargo.toml": "Cargo.toml", "# .cargo/config.toml": ".cargo/config.toml", "// tests/resume.rs": "tests/resume.rs"}
written = set()
for b in blocks:
    first = b.splitlines()[0].strip()
    if first not in names:
        continue
    path = os.path.join(crate, names[first])
    os.makedirs(os.path.dirname(path), exist_ok=True)
    open(path, "w").write(b)
    written.add(names[first])
missing = set(names.values()) - written
if missing:
    sys.exit(f"the README's section lacks a block for {sorted(missing)}")
EOF
grep -q 'mcpsim = { path = "../mcpsim" }' "$crate/Cargo.toml" || { echo "the README's Cargo.toml no longer names mcpsim by path" >&2; exit 1; }
sed -i "s|path = \"../mcpsim\"|path = \"$root\"|" "$crate/Cargo.toml"
mkdir -p "$crate/src" "$crate/scenarios"
echo "" > "$crate/src/lib.rs"
cp "$root/scenarios/clean-resume.toml" "$crate/scenarios/my-resume.toml"
cp "$root/Cargo.lock" "$crate/Cargo.lock"
cd "$crate"
CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$root/target}" cargo test --quiet 2>&1 | tail -20
