"""The one YAML loader for run configs and every other YAML agentrl reads (a frozen config, a recipe, a `--set`
value). yaml.safe_load builds no objects but bounds nothing: nine lines of aliases (`b: [*a, *a, ...]`, each level
ten times the one before) make a value of a billion nodes; PyYAML shares an alias's object, so the load itself is
quick, and what walks the value after it (a deep copy, pydantic, json.dumps) then grew `env/check` to 2.3 GB.

`load_yaml` composes the document's node graph first, refusing nesting deeper than MAX_YAML_DEPTH as it descends
(the composer recurses: a thousand `[` took a second and more to reach Python's recursion limit), then counts its
nodes as they would be expanded (an alias counts every node of what it names), refusing past MAX_YAML_NODES and a
recursive alias, all before a Python value is built; MAX_YAML_BYTES bounds the text.
"""

from __future__ import annotations

from typing import Any

import yaml

# A run config is a few hundred nodes and a few KiB; these leave room for a long inline list of tools or tasks.
MAX_YAML_BYTES = 4 * 2**20
MAX_YAML_NODES = 200_000
MAX_YAML_DEPTH = 100  # a run config nests 4 deep; an env's args a few more


class YamlTooLarge(yaml.YAMLError):
    """A YAML document past the loader's bounds; the message says which."""


def load_yaml(text: str) -> Any:
    """The document in `text`, as yaml.safe_load gives it (None for an empty one); YamlTooLarge past the bounds,
    yaml.YAMLError for YAML that is not valid."""
    if len(text) > MAX_YAML_BYTES:
        raise YamlTooLarge(f"{len(text):,} characters of YAML, over the {MAX_YAML_BYTES:,} read")
    loader = _DepthBoundLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _check_expanded_size(node)
        return loader.construct_document(node)
    finally:
        loader.dispose()


class _DepthBoundLoader(yaml.SafeLoader):
    """SafeLoader whose composer refuses a collection nested deeper than MAX_YAML_DEPTH as it reaches it."""

    depth = 0

    def compose_node(self, parent, index):
        self.depth += 1
        try:
            if self.depth > MAX_YAML_DEPTH:
                raise YamlTooLarge(f"YAML nested deeper than {MAX_YAML_DEPTH} levels")
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1


def _check_expanded_size(root: yaml.Node) -> None:
    """YamlTooLarge when the document, its aliases expanded, has over MAX_YAML_NODES nodes or refers to itself. Each
    node is visited once (the sizes of shared nodes are kept), children before their parent, without recursion."""
    sizes: dict[int, int] = {}
    open_nodes: set[int] = set()  # on the path from the root: meeting one again is a recursive alias
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, children_counted = stack.pop()
        if id(node) in sizes:
            continue
        children = _children(node)
        if children_counted or not children:
            open_nodes.discard(id(node))
            sizes[id(node)] = 1 + sum(sizes[id(child)] for child in children)
            if sizes[id(node)] > MAX_YAML_NODES:
                raise YamlTooLarge(
                    f"YAML of over {MAX_YAML_NODES:,} values once its aliases (*name) are expanded: an alias bomb, or "
                    "data that belongs in a file of its own"
                )
            continue
        if id(node) in open_nodes:
            raise YamlTooLarge("a YAML alias that contains itself (a recursive anchor)")
        open_nodes.add(id(node))
        stack.append((node, True))
        stack.extend((child, False) for child in children if id(child) not in sizes)


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    return []
