"""No hand-written source file over MAX_LINES lines (issue 45, item 1), held beside the floors of test_layers.py: the
trainer package and its benchmarks, the extension, the webviews and the protocol's TypeScript. A file over the limit
is split into modules that do one job each, or named in EXCEPTIONS with why; an exception that is no longer over
the limit fails too, so the list only shrinks. Tests (trainer-server/tests, test/) and generated code
(protocol/generated) are not in scope."""

from __future__ import annotations

from pathlib import Path

MAX_LINES = 500
ROOT = Path(__file__).resolve().parents[2]
# Where hand-written source lives, each with the suffixes that are source there.
SOURCES: dict[str, tuple[str, ...]] = {
    "trainer-server/agentrl": (".py",),
    "trainer-server/benchmarks": (".py",),
    "extension": (".ts", ".tsx", ".js", ".mjs", ".tmpl"),
    "webview": (".ts", ".tsx", ".js", ".mjs"),
}
PROTOCOL_GLOB = "protocol/*.ts"  # protocol/generated is generated from the schemas

# Files allowed over MAX_LINES, relative to the repository root, each with why.
EXCEPTIONS: dict[str, str] = {}


def source_files() -> list[Path]:
    found = sorted(ROOT.glob(PROTOCOL_GLOB))
    for folder, suffixes in SOURCES.items():
        found += sorted(
            path
            for path in (ROOT / folder).rglob("*")
            if path.is_file()
            and path.suffix in suffixes
            and not {"node_modules", "__pycache__"} & set(path.parts)
            and not path.name.endswith(".d.ts")
        )
    return found


def line_count(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


def test_no_source_file_is_over_the_limit_unless_named():
    over = [
        f"{path.relative_to(ROOT)}: {line_count(path)} lines"
        for path in source_files()
        if line_count(path) > MAX_LINES and str(path.relative_to(ROOT)) not in EXCEPTIONS
    ]
    assert over == [], f"source files over {MAX_LINES} lines; split them (or name them in EXCEPTIONS):\n" + "\n".join(
        over
    )


def test_every_exception_is_still_over_the_limit():
    """An exception split under the limit leaves the list, so that the list only shrinks."""
    stale = [
        f"{name}: {line_count(ROOT / name) if (ROOT / name).is_file() else 'gone'}"
        for name in EXCEPTIONS
        if not (ROOT / name).is_file() or line_count(ROOT / name) <= MAX_LINES
    ]
    assert stale == [], "no longer over the limit; remove from EXCEPTIONS:\n" + "\n".join(stale)


def test_the_check_sees_the_sources():
    """The walk finds the files it is meant to hold: each folder's largest ones among them."""
    names = {str(path.relative_to(ROOT)) for path in source_files()}
    assert {
        "trainer-server/agentrl/contract/config.py",
        "trainer-server/benchmarks/bench_step.py",
        "extension/extension.ts",
        "webview/replay/main.ts",
        "protocol/webview-messages.ts",
    } <= names
    assert not any(name.startswith(("protocol/generated/", "trainer-server/tests/", "test/")) for name in names)
