#!/usr/bin/env bash
# Installs the Python SDK adapter's environment into adapters/python/.venv:
# the pinned packages of requirements.txt, and the SDK's own example event
# store (examples/servers/simple-streamablehttp/.../event_store.py), which the
# SDK ships in its source distribution only. It is taken from the mcp 2.3.0
# sdist, checked against the hash below, and never copied into this
# repository: mcpsim judges the store users copy, as the SDK ships it.
set -euo pipefail
cd "$(dirname "$0")"
SDIST_SHA256=8b147a50441cf059dc88c684e0aeed3687f0aa0f39c6cde7b90330effd2b34d8
EXAMPLE=mcp-2.3.0/examples/servers/simple-streamablehttp/mcp_simple_streamablehttp/event_store.py

[ -x .venv/bin/python ] || python3 -m venv .venv
.venv/bin/pip install --quiet --disable-pip-version-check -r requirements.txt
if [ ! -f .venv/sdk_example/event_store.py ]; then
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  .venv/bin/pip download --quiet --disable-pip-version-check --no-deps --no-binary :all: mcp==2.3.0 -d "$tmp"
  echo "$SDIST_SHA256  $tmp/mcp-2.3.0.tar.gz" | sha256sum --check --quiet
  mkdir -p .venv/sdk_example
  tar -xzf "$tmp/mcp-2.3.0.tar.gz" -C "$tmp" "$EXAMPLE"
  cp "$tmp/$EXAMPLE" .venv/sdk_example/event_store.py
fi
