"""The docs say what the product has: every command, view and setting the extension contributes, every health code
the protocol declares and every run-config section, each with an entry in docs/; and what the docs name exists.
The site's own build (`make docs`: mkdocs build --strict) checks links and the nav; these checks need no MkDocs."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs"
PACKAGE = json.loads((REPO / "package.json").read_text())["contributes"]


def _gen_pages():
    spec = importlib.util.spec_from_file_location("gen_pages", DOCS / "gen_pages.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


GEN = _gen_pages()
EDITOR = (DOCS / "editor.md").read_text()


def _pages() -> dict[str, str]:
    return {path.relative_to(DOCS).as_posix(): path.read_text() for path in sorted(DOCS.rglob("*.md"))}


def _settings() -> dict[str, dict]:
    configurations = PACKAGE["configuration"]
    if isinstance(configurations, dict):
        configurations = [configurations]
    return {key: value for configuration in configurations for key, value in configuration["properties"].items()}


@pytest.mark.parametrize("command", PACKAGE["commands"], ids=lambda command: command["command"])
def test_every_command_has_a_row_in_the_editor_page(command):
    row = next((line for line in EDITOR.splitlines() if f"`{command['command']}`" in line), None)
    assert row is not None, f"docs/editor.md has no row for the command {command['command']}"
    assert row.startswith(f"| {command['title']} |"), f"docs/editor.md names {command['command']} otherwise: {row}"


@pytest.mark.parametrize("key", sorted(_settings()))
def test_every_setting_has_a_row_in_the_editor_page_with_its_default(key):
    row = next((line for line in EDITOR.splitlines() if line.startswith(f"| `{key}` |")), None)
    assert row is not None, f"docs/editor.md has no row for the setting {key}"
    default = _settings()[key].get("default")
    shown = row.split("|")[2].strip()
    assert shown == ("empty" if default == "" else f"`{default}`"), (
        f"{key}'s default is {default!r}, the docs say {shown}"
    )


def test_every_view_is_in_the_editor_page():
    for views in PACKAGE["views"].values():
        for view in views:
            assert f"`{view['id']}`" in EDITOR and view["name"] in EDITOR, view["id"]


def test_what_the_docs_call_agentrl_dot_something_exists():
    """The reverse: a command, setting or view the docs or the README name is one the extension contributes."""
    known = {command["command"] for command in PACKAGE["commands"]} | set(_settings())
    known |= {view["id"] for views in PACKAGE["views"].values() for view in views}
    known |= {walkthrough["id"] for walkthrough in PACKAGE["walkthroughs"]}
    # context keys the manifest's `when` clauses and walkthrough steps read (agentRl.connected)
    known |= set(re.findall(r"agentRl\.[A-Za-z]+", json.dumps(PACKAGE["walkthroughs"])))
    texts = {**_pages(), "README.md": (REPO / "README.md").read_text()}
    for name, text in texts.items():
        for found in re.findall(r"agentRl\.[A-Za-z]+", text):
            assert found in known, f"{name} names {found}, which package.json does not contribute"


def test_every_health_code_has_a_row_in_the_generated_table_and_in_the_detail_table():
    codes = GEN.health_codes()
    table = GEN.health_alerts_table()
    page = (DOCS / "health-alerts.md").read_text()
    assert "<!-- generated: health-alerts-table -->" in page, "health-alerts.md lost the generated table's marker"
    for code in codes:
        assert f"| `{code}` |" in table, f"the generated health table has no row for {code}"
        assert re.search(rf"^\| `{code}`", page, re.MULTILINE), f"docs/health-alerts.md's detail table lacks {code}"
    # The reverse: each row of the hand-written detail table is a code the protocol declares.
    for named in re.findall(r"^\| `([a-z_]+)`", page, re.MULTILINE):
        assert named in codes, f"docs/health-alerts.md has a row for {named}, which is no health code"


def test_every_health_threshold_is_read_by_a_rule_or_by_all():
    table = GEN.health_alerts_table()
    schema = json.loads(GEN.RUN_CONFIG_SCHEMA.read_text())
    for key in schema["$defs"]["HealthConfig"]["properties"]:
        assert f"`health.{key}`" in table, f"health.{key} is in neither a rule's row nor the shared thresholds"


def test_the_run_config_reference_has_every_section_and_key():
    reference = GEN.run_config_reference()
    schema = json.loads(GEN.RUN_CONFIG_SCHEMA.read_text())
    for key in schema["properties"]:
        assert f"| `{key}` |" in reference
    for name, section in schema["$defs"].items():
        assert f"## {name}" in reference
        for key in section.get("properties", {}):
            assert f"| `{key}` |" in reference, f"{name}.{key} is missing from the run-config reference"


def test_the_algorithms_page_has_every_registered_name():
    from agentrl.contract.training_config import ALGORITHM_NAMES, POLICY_LOSS_NAMES  # noqa: PLC0415

    equations = GEN.algorithm_docstrings()
    for key, registered in (("algorithm.name", ALGORITHM_NAMES), ("algorithm.policy_loss", POLICY_LOSS_NAMES)):
        for name in registered:
            assert f"`{key}: {name}`" in equations, f"{key} {name} has no equations in docs/algorithms.md"


def test_every_page_is_in_the_nav_and_every_nav_entry_is_a_page():
    mkdocs = (REPO / "mkdocs.yml").read_text()
    nav = set(re.findall(r"^\s+- [^:\n]+: (\S+\.md)$", mkdocs, re.MULTILINE))
    pages = set(_pages()) | {GEN.RUN_CONFIG_PAGE}
    assert nav == pages, f"in the nav only: {sorted(nav - pages)}; pages not in the nav: {sorted(pages - nav)}"


def test_the_readmes_links_into_docs_exist():
    readme = (REPO / "README.md").read_text()
    for target in re.findall(r"\]\((docs/[^)#]+)(?:#[^)]*)?\)", readme):
        assert (REPO / target).exists(), f"README.md links to {target}, which does not exist"


def test_make_test_builds_the_docs_as_the_readme_says():
    makefile = (REPO / "Makefile").read_text()
    test_target = re.search(r"^test: (.+)$", makefile, re.MULTILINE).group(1).split()
    assert "docs" in test_target
    readme_line = next(line for line in (REPO / "README.md").read_text().splitlines() if line.startswith("make test"))
    assert "mkdocs build --strict" in readme_line


def test_every_rpc_method_is_in_the_server_page():
    rpc = json.loads((REPO / "protocol" / "schemas" / "rpc.schema.json").read_text())["$defs"]
    server = (DOCS / "server.md").read_text()
    for name in rpc:
        if name.endswith(".params"):
            method = name.removesuffix(".params")
            assert f"`{method}`" in server, f"docs/server.md does not name the method {method}"
    code_running = server.split("Methods that run code (", 1)[1].split(")", 1)[0]
    assert sorted(re.findall(r"`([^`]+)`", code_running)) == sorted(rpc["codeRunningMethod"]["enum"])


def test_the_packaged_readme_can_keep_its_relative_links():
    """`npm run package` (vsce) rewrites the README's relative links and images against the repository's URL, and
    refuses to package when it has none: package.json's `repository`, or --baseContentUrl/--baseImagesUrl or
    --no-rewrite-relative-links in the package script."""
    readme = (REPO / "README.md").read_text()
    relative = re.findall(r"\]\((?!https?://|#|mailto:)([^)]+)\)", readme)
    if not relative:
        return
    manifest = json.loads((REPO / "package.json").read_text())
    script = manifest.get("scripts", {}).get("package", "")
    assert "repository" in manifest or "--baseContentUrl" in script or "--no-rewrite-relative-links" in script, (
        f"README.md has relative links ({relative[0]}, ...) that `vsce package` cannot rewrite"
    )
