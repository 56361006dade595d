#!/usr/bin/env bash
# Installs the FastMCP adapter's environment into adapters/fastmcp/.venv: the
# pinned packages of requirements.txt (fastmcp 4.2.3 and its full resolved
# environment, pip freeze, with redis for py-key-value-aio's RedisStore, the
# event store's backend in deployments). Nothing else: FastMCP ships the event
# store the adapter uses (fastmcp.server.event_store.EventStore) in the package itself.
set -euo pipefail
cd "$(dirname "$0")"
[ -x .venv/bin/python ] || python3 -m venv .venv
.venv/bin/pip install --quiet --disable-pip-version-check -r requirements.txt
