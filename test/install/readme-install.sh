#!/usr/bin/env bash
# The README's first install line, run as a new user runs it: in a fresh clone of this checkout's HEAD (its
# committed files only), with no .venv, and the machine's stock python3 and node first on PATH (Debian's
# /usr/bin, whose python3 has an older setuptools than the trainer's wheel needs). It must write the .vsix, with the
# trainer's wheel inside. `make test` runs it (a few minutes: npm ci, the bundles, the wheel, vsce).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
# The line exactly as the README gives it, its trailing comment dropped.
line=$(grep -m1 '^npm ci && npm run package' "$root/README.md" | sed 's/ *#.*$//')
[ -n "$line" ] || { echo "readme-install: the README has no 'npm ci && npm run package' line" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
git clone -q "$root" "$work/clone"
cd "$work/clone"
echo "readme-install: $line (python3: $(PATH=/usr/bin:/bin command -v python3), $(PATH=/usr/bin:/bin python3 --version))"
started=$SECONDS
env -u AGENTRL_PYTHON -u VIRTUAL_ENV PATH=/usr/bin:/bin bash -c "$line"
wheel=$(python3 -m zipfile -l agent-rl-studio.vsix | grep -oE 'extension/dist/agentrl-[^ ]*\.whl' || true)
[ -n "$wheel" ] || { echo "readme-install: agent-rl-studio.vsix carries no trainer wheel" >&2; exit 1; }
# The README's pictures travel with it, its links to them kept relative (the details page of an installed .vsix).
python3 - <<'CHECK'
import re, sys, zipfile
vsix = zipfile.ZipFile("agent-rl-studio.vsix")
readme = vsix.read("extension/readme.md").decode()  # vsce writes it in lower case
images = re.findall(r"\]\((docs/images/[^)]+)\)", open("README.md").read())
if not images:
    sys.exit("readme-install: the README shows no picture from docs/images: the check below checks nothing")
for image in images:
    if f"extension/{image}" not in vsix.namelist():
        sys.exit(f"readme-install: agent-rl-studio.vsix lacks {image}, which its README shows")
    if f"({image})" not in readme:
        sys.exit(f"readme-install: the README in agent-rl-studio.vsix no longer links {image} relatively")
CHECK
echo "readme-install: agent-rl-studio.vsix with $wheel and the README's pictures in $((SECONDS - started)) s"
