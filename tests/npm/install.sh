#!/bin/sh
# tests/npm/install.sh — installs the official client SDKs the integration
# tests drive ward with (tests/npm/package.json: exact versions, and
# package-lock.json pins every dependency) into tests/npm/node_modules, with
# `npm ci`, only when the lock changed since the last install.
set -eu
dir=$(cd "$(dirname "$0")" && pwd)
if [ -f "$dir/node_modules/.package-lock.json" ] && [ -f "$dir/node_modules/.ward-lock" ] &&
	cmp -s "$dir/package-lock.json" "$dir/node_modules/.ward-lock"; then
	exit 0
fi
if ! command -v npm >/dev/null 2>&1; then
	echo "ward: npm is missing (run 'make deps' as root)" >&2
	exit 1
fi
echo "ward: installing the test SDKs from npm (tests/npm/package-lock.json)" >&2
(cd "$dir" && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
cp "$dir/package-lock.json" "$dir/node_modules/.ward-lock"
