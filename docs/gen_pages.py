"""The docs pages that are generated, never copied by hand, and the MkDocs hook that puts them in the site.

- `reference/run-config.md`: every run-config key, its type, default, range and description, from
  `protocol/schemas/run-config.schema.json` (what `agentrl schema` prints).
- The health-alerts table in `health-alerts.md`: one row per rule of `trainer-server/agentrl/run/health_rules.py`
  (its title, severity and fix), with the code's description from `protocol/schemas/rpc.schema.json`
  (`$defs/healthCode`) and the `health:` keys whose description names the code, with their defaults.
- The equations in `algorithms.md`: each algorithm's and policy loss's module docstring, as the file says it.
- The picture of the floors in `architecture.md`: the trainer's from `trainer-server/tests/test_layers.py`'s FLOORS,
  the extension's and the webviews' from `test/unit/importGraph.test.ts`'s, the lists the tests hold the imports to.

mkdocs.yml names this file under `hooks:`; `python docs/gen_pages.py OUT_DIR` writes the same pages as files.
"""

from __future__ import annotations

import ast
import json
import re
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RUN_CONFIG_SCHEMA = ROOT / "protocol" / "schemas" / "run-config.schema.json"
RPC_SCHEMA = ROOT / "protocol" / "schemas" / "rpc.schema.json"
LEARNING = ROOT / "trainer-server" / "agentrl" / "learning"
PYTHON_FLOORS = ROOT / "trainer-server" / "tests" / "test_layers.py"
TYPESCRIPT_FLOORS = ROOT / "test" / "unit" / "importGraph.test.ts"

# A marker in a hand-written page, replaced by generated Markdown when the site is built.
MARKERS = {
    "<!-- generated: health-alerts-table -->": "health_alerts_table",
    "<!-- generated: algorithm-docstrings -->": "algorithm_docstrings",
    "<!-- generated: floors -->": "floors_picture",
}
RUN_CONFIG_PAGE = "reference/run-config.md"

# The files of algorithms/ and policy_losses/ that are one registered name each (base.py and common.py are
# the machinery they share).
ALGORITHM_FILES = ("grpo", "rloo", "reinforce_pp", "ppo", "gigpo", "step_ppo", "sft", "rft")
POLICY_LOSS_FILES = ("clipped", "gspo", "cispo", "nll")


def _cell(text: str) -> str:
    """Text that stays inside one Markdown table cell."""
    return " ".join(str(text).split()).replace("|", "\\|")


def _ref_name(ref: str) -> str:
    return ref.rsplit("/", 1)[-1]


def _type(prop: dict) -> str:
    """A property's type in a few words: `integer`, `string (one of ...)`, `list of McpServerConfig`."""
    if "$ref" in prop:
        return f"[{_ref_name(prop['$ref'])}](#{_ref_name(prop['$ref']).lower()})"
    if "anyOf" in prop:
        kinds = [_type(option) for option in prop["anyOf"] if option.get("type") != "null"]
        nullable = any(option.get("type") == "null" for option in prop["anyOf"])
        return " or ".join(kinds) + (" or null" if nullable else "")
    kind = prop.get("type", "any")
    if kind == "array":
        return f"list of {_type(prop.get('items', {}))}"
    if kind == "object" and isinstance(prop.get("additionalProperties"), dict):
        return f"map of {_type(prop['additionalProperties'])}"
    return kind


def _allowed(prop: dict) -> str:
    """What values a property takes, beyond its type."""
    parts = []
    if "enum" in prop:
        parts.append(", ".join(f"`{value}`" for value in prop["enum"]))
    for key, sign in (("minimum", ">="), ("exclusiveMinimum", ">"), ("maximum", "<="), ("exclusiveMaximum", "<")):
        if key in prop:
            parts.append(f"{sign} {prop[key]}")
    if "minLength" in prop or "maxLength" in prop:
        parts.append(f"length {prop.get('minLength', 0)} to {prop.get('maxLength', 'any')}")
    if "pattern" in prop:
        parts.append(f"matches `{prop['pattern']}`")
    if "x-builtins" in prop:
        parts.append("built-ins: " + ", ".join(f"`{name}`" for name in prop["x-builtins"]))
    return "; ".join(parts)


def _default(prop: dict) -> str:
    if "default" not in prop:
        return "required" if prop.get("_required") else ""
    return f"`{json.dumps(prop['default'])}`"


def _table(properties: dict, required: list[str], prefix: str) -> list[str]:
    rows = ["| key | type | default | allowed | description |", "|---|---|---|---|---|"]
    for name, prop in properties.items():
        prop = dict(prop, _required=name in required)
        rows.append(
            f"| `{prefix}{name}` | {_cell(_type(prop))} | {_cell(_default(prop))} | {_cell(_allowed(prop))} "
            f"| {_cell(prop.get('description', ''))} |"
        )
    return rows


def run_config_reference() -> str:
    schema = json.loads(RUN_CONFIG_SCHEMA.read_text())
    defs = schema["$defs"]
    out = [
        "# Run-config reference",
        "",
        "Every key a `*.agentrl.yaml` run config takes: its type, default, allowed values and what it does. This page "
        "is generated from `protocol/schemas/run-config.schema.json` (`agentrl schema` prints the same schema) by "
        "`docs/gen_pages.py` each time the site is built; edit the trainer's `agentrl/contract/config.py`, not this "
        "page. How to write a run config is in [run configs](../run-configs.md).",
        "",
        f"{_cell(schema.get('description', ''))} Unknown keys are refused in every section.",
        "",
        "## Top level",
        "",
        *_table(schema["properties"], schema.get("required", []), ""),
        "",
    ]
    # Each section once, in the order the top level (then each section) names them.
    order: list[str] = []

    def visit(properties: dict) -> None:
        for prop in properties.values():
            for ref in _refs(prop):
                if ref not in order:
                    order.append(ref)
                    visit(defs[ref].get("properties", {}))

    visit(schema["properties"])
    order += [name for name in defs if name not in order]
    for name in order:
        section = defs[name]
        out += [f"## {name}", "", _cell(section.get("description", "")), ""]
        out += [*_table(section.get("properties", {}), section.get("required", []), ""), ""]
    return "\n".join(out)


def _refs(prop: dict) -> list[str]:
    found = []
    if "$ref" in prop:
        found.append(_ref_name(prop["$ref"]))
    for option in prop.get("anyOf", []):
        found += _refs(option)
    if isinstance(prop.get("items"), dict):
        found += _refs(prop["items"])
    if isinstance(prop.get("additionalProperties"), dict):
        found += _refs(prop["additionalProperties"])
    return found


def health_codes() -> dict[str, str]:
    """The codes the protocol declares, each with its description."""
    schema = json.loads(RPC_SCHEMA.read_text())
    return {entry["const"]: entry.get("description", "") for entry in schema["$defs"]["healthCode"]["oneOf"]}


def _health_rules() -> list:
    sys.path.insert(0, str(ROOT / "trainer-server"))
    from agentrl.run.health_rules import RULES  # noqa: PLC0415 (the trainer is only needed when the table is built)

    return list(RULES)


def _codes_of(prop: dict) -> list[str]:
    """The health codes a `health:` key is a threshold of: the codes its description's clauses start with
    ("high_truncation: share of ..."; "a: ...; b: ..."), else every code its description names ("the trend checks
    compare: response_length_explosion ..., tool_failure_spike ...")."""
    description = prop.get("description", "")
    heads = [clause.split(":", 1)[0].strip() for clause in description.split("; ")]
    if any(head in health_codes() for head in heads):
        return [head for head in heads if head in health_codes()]
    return [word for word in re.findall(r"[a-z_]+", description) if word in health_codes()]


def health_alerts_table() -> str:
    codes = health_codes()
    config = json.loads(RUN_CONFIG_SCHEMA.read_text())["$defs"]["HealthConfig"]["properties"]
    rows = [
        "| code | severity | what is wrong | fires when | thresholds [default] | fix |",
        "|---|---|---|---|---|---|",
    ]
    for rule in _health_rules():
        keys = [
            f"`health.{key}` [{prop.get('default')}]" for key, prop in config.items() if rule.code in _codes_of(prop)
        ]
        rows.append(
            f"| `{rule.code}` | {rule.severity} | {_cell(rule.title)} | {_cell(codes.get(rule.code, ''))} "
            f"| {_cell(', '.join(keys))} | {_cell(rule.fix)} |"
        )
    shared = [
        f"`health.{key}` [{prop.get('default')}]: {_cell(prop.get('description', ''))}"
        for key, prop in config.items()
        if not _codes_of(prop)
    ]
    return "\n".join(rows + ["", "Every rule also reads:", ""] + [f"- {line}" for line in shared])


def _docstring(path: Path) -> str:
    return ast.get_docstring(ast.parse(path.read_text())) or ""


def algorithm_docstrings() -> str:
    out = []
    for folder, names, key in (
        ("algorithms", ALGORITHM_FILES, "algorithm.name"),
        ("policy_losses", POLICY_LOSS_FILES, "algorithm.policy_loss"),
    ):
        for name in names:
            path = LEARNING / folder / f"{name}.py"
            first, _, rest = _docstring(path).partition("\n\n")  # the summary paragraph, then the equations
            first = " ".join(first.split())
            out += [
                f"### `{key}: {name}`",
                "",
                first,
                "",
                f"Source: `trainer-server/agentrl/learning/{folder}/{name}.py`",
                "",
                "```text",
                rest.strip("\n"),
                "```",
                "",
            ]
    return "\n".join(out)


def fill_markers(markdown: str) -> str:
    for marker, function in MARKERS.items():
        if marker in markdown:
            markdown = markdown.replace(marker, globals()[function]())
    return markdown


# MkDocs hooks (mkdocs.yml: hooks).


def _python_floors() -> list[tuple[str, str]]:
    """test_layers.py's FLOORS, ground floor first: (the packages, the comment that says what the floor holds)."""
    lines = PYTHON_FLOORS.read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("FLOORS"))
    floors = []
    for line in lines[start + 1 :]:
        if line.startswith("]"):
            return floors
        found = re.match(r"\s*\{(.+)\},\s*#\s*(.+)", line)
        if found:
            names = [name.strip().strip('"') for name in found[1].split(",")]
            floors.append((" ".join(f"{name}/" for name in names), found[2]))
    raise ValueError(f"{PYTHON_FLOORS}: FLOORS has no end")


def _typescript_floors() -> dict[str, list[tuple[str, list[str]]]]:
    """importGraph.test.ts's FLOORS, part by part, ground floor first: (what the floor holds, its files)."""
    text = TYPESCRIPT_FLOORS.read_text()
    body = text[text.index("const FLOORS") : text.index("};", text.index("const FLOORS"))]
    parts: dict[str, list[tuple[str, list[str]]]] = {}
    for part, floors in re.findall(r"\n  (\w+): \[(.*?)\n  \],", body, flags=re.S):
        parts[part] = [
            (title, re.findall(r"'([^']+)'", files))
            for _, title, files in re.findall(r"\[\s*(['\"])(.+?)\1,\s*\[([^\]]*)\]\s*,?\s*\]", floors)
        ]
    return parts


def floors_picture() -> str:
    """The floors, top floor first as a building is drawn: each floor imports only from itself and those below."""
    python = _python_floors()
    width = max(len(packages) for packages, _ in python)
    rows = [f"{packages:<{width}}  {what}" for packages, what in reversed(python)]
    blocks = ["The trainer (`trainer-server/agentrl/`):", "", "```text", *rows, "```"]
    for part, floors in _typescript_floors().items():
        blocks += ["", f"The {'extension' if part == 'extension' else 'webviews'} (`{part}/`):", "", "```text"]
        for title, files in reversed(floors):
            blocks += [title, *textwrap.wrap(", ".join(files), 100, initial_indent="    ", subsequent_indent="    ")]
        blocks.append("```")
    return "\n".join(blocks)


def on_files(files, config):  # noqa: ANN001, ANN201 (MkDocs' own types)
    from mkdocs.structure.files import File  # noqa: PLC0415 (only MkDocs needs it)

    files.append(File.generated(config, RUN_CONFIG_PAGE, content=run_config_reference()))
    return files


def on_page_markdown(markdown, page, config, files):  # noqa: ANN001, ANN201, ARG001
    return fill_markers(markdown)


def main(out_dir: str) -> None:
    """Writes the generated page and the filled-in pages into out_dir, to read them without building the site."""
    out = Path(out_dir)
    (out / "reference").mkdir(parents=True, exist_ok=True)
    (out / RUN_CONFIG_PAGE).write_text(run_config_reference())
    for page in ("health-alerts.md", "algorithms.md"):
        (out / page).write_text(fill_markers((ROOT / "docs" / page).read_text()))


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "site-pages")
