#!/usr/bin/env bash
# Runs the consumer, KV and object store acceptance tests (Node.js `nats`
# client) against the server at $NATS_URL.
#   NATS_URL=nats://127.0.0.1:4222 test/node-consumer/run.sh
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

if [[ -z "${NATS_URL:-}" ]]; then
	echo "test/node-consumer/run.sh: NATS_URL must name the server to test (e.g. nats://127.0.0.1:4222)" >&2
	exit 2
fi
command -v node >/dev/null || { echo "test/node-consumer/run.sh: node is not installed" >&2; exit 2; }
command -v npm >/dev/null || { echo "test/node-consumer/run.sh: npm is not installed" >&2; exit 2; }

cd "$here"
if [[ ! -d node_modules/nats ]]; then
	echo "test/node-consumer/run.sh: node_modules missing; running npm ci" >&2
	npm ci --no-audit --no-fund
fi

echo "test/node-consumer/run.sh: Node $(node --version), nats $(node -p 'require("./node_modules/nats/package.json").version'), NATS_URL=$NATS_URL"
exec npm test --silent
