#!/bin/bash
# Real-VS-Code tests (after setup.sh), in code-server on loopback driven by Chromium:
#  1. UI scenarios: packages the extension, installs the .vsix into a fresh profile and runs every
#     test/e2e/*.e2e.mjs scenario (harness.mjs).
#  2. Extension-host tests: a second, fresh server with the smoke-test driver loads the repo root as the
#     development extension and runs test/exthost/*.test.ts (bundled to out/exthost) in its extension host
#     (exthost.mjs).
# Both always run; the exit status is non-zero if either fails. Screenshots land in test-results/e2e/.
# Every process a server started is stopped at the end, including any that left its process group.
# env: E2E_HOME (default .e2e), E2E_ONLY=ui|exthost, E2E_GREP=pattern (only the UI scenarios whose function name,
# and the extension-host tests whose title, match: a scenario that needs an earlier one's files fails alone),
# E2E_KEEP=1 (keep the temporary profiles and workspaces), AGENTRL_PYTHON (default .venv/bin/python).
set -euo pipefail
REPO=$(cd "$(dirname "$0")/../.." && pwd)
E2E_HOME=${E2E_HOME:-$REPO/.e2e}
export AGENTRL_PYTHON=${AGENTRL_PYTHON:-$REPO/.venv/bin/python}
CODE_SERVER=$E2E_HOME/cs/node_modules/.bin/code-server
[ -x "$CODE_SERVER" ] || { echo "code-server is not set up: run bash test/e2e/setup.sh" >&2; exit 1; }
cd "$REPO"
RUN=$(mktemp -d /tmp/agentrl-e2e-XXXXXX)
T0=$SECONDS
lap() { echo "[e2e $((SECONDS - T0))s] $*"; }

PGIDS=()
# Stops a server's process group (TERM, then KILL after 10 s), and then, by pid, any process still carrying
# this run's marker in its environment (children that started their own session escape the group).
stop_servers() {
  local pgid pid i
  for pgid in "${PGIDS[@]}"; do
    kill -TERM -- "-$pgid" 2>/dev/null || continue
    for i in $(seq 1 100); do kill -0 -- "-$pgid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL -- "-$pgid" 2>/dev/null || true
  done
  PGIDS=()
  for pid in $(grep -lsz "^AGENTRL_E2E_RUN=$RUN\$" /proc/[0-9]*/environ | cut -d/ -f3); do
    [ "$pid" = $$ ] || { echo "e2e: stopping leftover process $pid: $(tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null)"; kill -KILL "$pid" 2>/dev/null || true; }
  done
}
cleanup() { stop_servers; [ -n "${E2E_KEEP:-}" ] && echo "e2e: kept $RUN" || rm -rf "$RUN"; }
trap cleanup EXIT
trap 'exit 130' INT TERM

# The UI profile keeps VS Code's default of opening a walkthrough on install: the first scenario checks that the Get
# Started walkthrough finds the empty workspace by itself. The extension-host tests' profile turns it off (it would
# take the editor from the tests).
profile() {  # DIR [WALKTHROUGH_ON_INSTALL]: a fresh user-data dir with quiet settings
  mkdir -p "$1/workspace" "$1/udd/User" "$1/exts" "$1/xdg"
  cat > "$1/udd/User/settings.json" <<JSON
{ "telemetry.telemetryLevel": "off", "update.mode": "none", "extensions.autoCheckUpdates": false,
  "extensions.autoUpdate": false, "extensions.ignoreRecommendations": true, "workbench.startupEditor": "none",
  "workbench.tips.enabled": false, "security.workspace.trust.enabled": false, "chat.disableAIFeatures": true,
  "git.enabled": false, "workbench.enableExperiments": false, "npm.fetchOnlinePackageInfo": false,
  "workbench.secondarySideBar.defaultVisibility": "hidden", "workbench.welcomePage.walkthroughs.openOnInstall": ${2:-false} }
JSON
}

# code-server with Node 24 and XDG dirs inside DIR (else it writes under ~), marked with AGENTRL_E2E_RUN;
# with SETSID=setsid in its own session and process group.
code_server() {  # DIR ARGS...
  local dir=$1; shift
  (. "$E2E_HOME/env.sh"
   export XDG_CONFIG_HOME=$dir/xdg XDG_DATA_HOME=$dir/xdg XDG_CACHE_HOME=$dir/xdg AGENTRL_E2E_RUN=$RUN
   [ -z "${SETSID:-}" ] || echo $BASHPID > "$dir/server.pid"  # setsid forks only when its caller leads a group; this one does not
   exec ${SETSID:-} "$CODE_SERVER" --config /dev/null --user-data-dir "$dir/udd" --extensions-dir "$dir/exts" "$@")
}

# Starts a server for DIR on a free loopback port in its own session (pid == pgid); sets URL.
start_server() {  # DIR EXTRA_ARGS...
  local dir=$1; shift
  rm -f "$dir/server.pid"
  SETSID=setsid code_server "$dir" --bind-addr 127.0.0.1:0 --auth none --disable-telemetry --disable-update-check \
    --disable-workspace-trust --disable-getting-started-override --ignore-last-opened --reconnection-grace-time 5 \
    "$@" "$dir/workspace" > "$dir/server.log" 2>&1 < /dev/null &
  local pid= port=
  for _ in $(seq 1 600); do
    [ -n "$pid" ] || { [ -s "$dir/server.pid" ] && pid=$(cat "$dir/server.pid") && PGIDS+=("$pid"); }
    port=$(sed -n 's|.*HTTP server listening on http://127\.0\.0\.1:\([0-9]*\).*|\1|p' "$dir/server.log" | head -1)
    [ -n "$port" ] && curl -s -o /dev/null "http://127.0.0.1:$port/healthz" && break
    [ -z "$pid" ] || kill -0 "$pid" 2>/dev/null || { cat "$dir/server.log"; return 1; }
    sleep 0.1
  done
  [ -n "$port" ] || { echo "code-server did not start"; cat "$dir/server.log"; return 1; }
  URL=http://127.0.0.1:$port
}

npm run package > "$RUN/package.log" 2>&1 || { cat "$RUN/package.log"; exit 1; }
lap "built and packaged (dist/, out/exthost/, agent-rl-studio.vsix)"
rm -rf test-results/e2e; mkdir -p test-results/e2e  # no screenshot of an earlier run is taken for this one's
UI=0 EXTHOST=0

if [ "${E2E_ONLY:-}" != exthost ]; then
  profile "$RUN/ui" true
  code_server "$RUN/ui" --install-extension "$REPO/agent-rl-studio.vsix" > "$RUN/ui/install.log" 2>&1 \
    || { cat "$RUN/ui/install.log"; exit 1; }
  start_server "$RUN/ui"
  lap "UI server up at $URL with the .vsix installed"
  node test/e2e/harness.mjs "$URL" "$RUN/ui/workspace" || UI=$?
  stop_servers
  lap "UI scenarios done (exit $UI)"
fi

if [ "${E2E_ONLY:-}" != ui ]; then
  profile "$RUN/exthost"
  start_server "$RUN/exthost" --vscode-option enable-smoke-test-driver
  lap "extension-host server up at $URL"
  # The extension host's environment: the trainer's Python, and an optional test filter.
  EXTHOST_ENV=$(node -e 'const e = { AGENTRL_PYTHON: process.argv[1] }; if (process.argv[2]) e.AGENTRL_EXTHOST_GREP = process.argv[2];
    console.log(JSON.stringify(e))' "$AGENTRL_PYTHON" "${E2E_GREP:-}") \
    node test/e2e/exthost.mjs "$URL" "$RUN/exthost/workspace" || EXTHOST=$?
  stop_servers
  # The extension's own log (the Agent RL output channel), and the trainer runs' stderr, for a failure's reader.
  find "$RUN/exthost/udd/logs" -path '*agent-rl-studio*' -name '*.log' -exec cat {} + > test-results/e2e/exthost-agent-rl.log 2>/dev/null || true
  find "$RUN/exthost/workspace" -path '*/.logs/*.stderr.log' -exec tail -n 50 {} + > test-results/e2e/exthost-runs-stderr.log 2>/dev/null || true
  lap "extension-host tests done (exit $EXTHOST)"
fi

lap "UI scenarios: $([ $UI = 0 ] && echo passed || echo FAILED); extension-host tests: $([ $EXTHOST = 0 ] && echo passed || echo FAILED)"
[ $UI = 0 ] && [ $EXTHOST = 0 ]
