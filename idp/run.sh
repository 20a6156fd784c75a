#!/bin/sh
# Start the development OIDC provider (see idp/README.md). Dev/test only.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
if [ ! -d "$here/node_modules/oidc-provider" ]; then
    npm ci --prefix "$here" --no-audit --no-fund >&2
fi
exec node "$here/server.mjs"
