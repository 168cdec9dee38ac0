#!/bin/bash
# Real-VS-Code tests (after setup.sh): packages the extension, installs the .vsix into a fresh code-server
# profile on loopback, and runs every test/e2e/*.e2e.mjs scenario from Chromium (harness.mjs).
# Screenshots land in test-results/e2e/.
set -euo pipefail
REPO=$(cd "$(dirname "$0")/../.." && pwd)
E2E_HOME=${E2E_HOME:-$REPO/.e2e}
export AGENTRL_PYTHON=${AGENTRL_PYTHON:-$REPO/.venv/bin/python}
cd "$REPO"
npm run package > /dev/null
RUN=$(mktemp -d /tmp/agentrl-e2e-XXXXXX)
SERVER_PID=
cleanup() { [ -n "$SERVER_PID" ] && kill -- "-$SERVER_PID" 2>/dev/null; rm -rf "$RUN"; }
trap cleanup EXIT
(. "$E2E_HOME/env.sh"
 export XDG_CONFIG_HOME=$RUN/xdg XDG_DATA_HOME=$RUN/xdg XDG_CACHE_HOME=$RUN/xdg
 mkdir -p "$RUN/workspace" "$RUN/udd/User" "$RUN/exts"
 cat > "$RUN/udd/User/settings.json" <<JSON
{ "telemetry.telemetryLevel": "off", "update.mode": "none", "extensions.autoCheckUpdates": false,
  "extensions.autoUpdate": false, "extensions.ignoreRecommendations": true, "workbench.startupEditor": "none",
  "workbench.tips.enabled": false, "security.workspace.trust.enabled": false, "chat.disableAIFeatures": true,
  "git.enabled": false }
JSON
 "$E2E_HOME/cs/node_modules/.bin/code-server" --config /dev/null --user-data-dir "$RUN/udd" \
   --extensions-dir "$RUN/exts" --install-extension "$REPO/agent-rl-studio.vsix" > "$RUN/install.log" 2>&1 \
   || { cat "$RUN/install.log"; exit 1; })
PORT=${E2E_PORT:-8770}
(. "$E2E_HOME/env.sh"
 export XDG_CONFIG_HOME=$RUN/xdg XDG_DATA_HOME=$RUN/xdg XDG_CACHE_HOME=$RUN/xdg
 exec setsid "$E2E_HOME/cs/node_modules/.bin/code-server" --config /dev/null --bind-addr "127.0.0.1:$PORT" \
   --auth none --disable-telemetry --disable-update-check --disable-workspace-trust \
   --disable-getting-started-override --ignore-last-opened --reconnection-grace-time 5 \
   --user-data-dir "$RUN/udd" --extensions-dir "$RUN/exts" "$RUN/workspace" > "$RUN/server.log" 2>&1 < /dev/null) &
SERVER_PID=$!
for _ in $(seq 1 300); do
  curl -s -o /dev/null "http://127.0.0.1:$PORT/healthz" && break
  kill -0 "$SERVER_PID" 2>/dev/null || { cat "$RUN/server.log"; exit 1; }
  sleep 0.1
done
node test/e2e/harness.mjs "http://127.0.0.1:$PORT" "$RUN/workspace"
