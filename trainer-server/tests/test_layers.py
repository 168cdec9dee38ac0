"""The Python package's floors, checked as eslint checks the TypeScript boundaries: every import in agentrl/ (at the top
of a file, inside a function or under TYPE_CHECKING alike) goes to its own floor or one below, and no chain of imports
comes back to where it started."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "agentrl"

# Ground floor first. A module's floor is its top package's (`agentrl/<package>/...`); "agentrl" is the package's own
# __init__ (the public API a ToolEnv author imports) and its other top-level modules.
FLOORS: list[set[str]] = [
    {"contract"},  # the run's contract: config sections, the protocol's schemas and names, task files
    {"environment", "models"},  # Tools and ToolEnvs; loading, saving and running a model
    {"agentrl"},  # the public API: `from agentrl import Tool, ToolEnv, ...`
    {"rollout"},  # the episode loop and the engines that sample it
    {"learning"},  # algorithms, policy losses, the learner
    {"cluster"},  # rollout and learner workers over Ray
    {"run"},  # a run: the train loop, evaluation, health, metrics, the run folder, trackers
    {"recipes", "examples"},  # environments that ship with agentrl; they use the public API only
    {"server"},  # the JSON-RPC server an editor drives
    {"cli"},  # the `agentrl` command line
]
# Imports from a lower floor to a higher one that are allowed, as (importer, imported) module names. None today.
ALLOWED_CLIMBS: set[tuple[str, str]] = set()


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path, modules: set[str]) -> set[str]:
    """The agentrl modules `path` imports, each resolved to the module that defines it (a name imported from a
    package's __init__ resolves to the package)."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*anchor, *([node.module] if node.module else [])])
            targets = [f"{base}.{alias.name}" for alias in node.names] + [base]
        for target in targets:
            while target and target not in modules:
                target = target.rsplit(".", 1)[0] if "." in target else ""
            if target.startswith("agentrl") and target != name:
                found.add(target)
    return found


def import_graph() -> dict[str, set[str]]:
    paths = sorted(PACKAGE.rglob("*.py"))
    modules = {module_name(path) for path in paths}
    return {module_name(path): imports_of(path, modules) for path in paths}


def floor_of(module: str) -> int:
    parts = module.split(".")
    top = parts[1] if len(parts) > 1 and (PACKAGE / parts[1]).is_dir() else "agentrl"
    for level, packages in enumerate(FLOORS):
        if top in packages:
            return level
    raise AssertionError(f"{module}: its package {top!r} is on no floor of FLOORS; add it where it belongs")


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_every_import_goes_to_its_own_floor_or_below():
    climbs = [
        f"{importer} (floor {floor_of(importer)}) imports {imported} (floor {floor_of(imported)})"
        for importer, imported_modules in sorted(import_graph().items())
        for imported in sorted(imported_modules)
        if floor_of(imported) > floor_of(importer) and (importer, imported) not in ALLOWED_CLIMBS
    ]
    assert climbs == [], "imports from a lower floor to a higher one:\n" + "\n".join(climbs)


def test_no_import_cycle():
    assert cycles(import_graph()) == []


def test_the_checks_see_a_climb_and_a_cycle():
    """The two checks above on a made-up graph: they would fail on the faults they look for."""
    graph = {
        "agentrl.contract.config": {"agentrl.learning.algorithms"},
        "agentrl.learning.algorithms": {"agentrl.learning.algorithms.base"},
        "agentrl.learning.algorithms.base": {"agentrl.contract.config"},
    }
    assert floor_of("agentrl.learning.algorithms") > floor_of("agentrl.contract.config")
    assert cycles(graph) == [sorted(graph)]
    assert cycles({"agentrl.a": {"agentrl.b"}, "agentrl.b": set()}) == []
