"""Every setting the run-config schema offers trains with every other (issue: model.gradient_checkpointing: true,
tested alone, crashed every run at the learner's shared-prefix optimisation). The factors are read from the schema:
every enum and boolean of its algorithm, model, train and rollout sections, so an option added there joins the matrix
without anyone remembering. They are combined pairwise (a covering array: each value of one setting meets each value of
every other in at least one run, about 40 runs where the full product is billions), and each run is one step of the
bundled tiny example: it completes into schema-valid trajectories, or load_config refuses it before it starts with a
message that names every setting of the smallest clashing set (found by trying its settings alone and in pairs).

The rows with `rollout.engine: vllm` start a vLLM engine each (about 40 s on 2 cores): they run when vLLM is
installed and the learner, the engines or the schema changed since the full matrix last passed (the digest in
tests/config_matrix.passed, which `make test-matrix` runs the full matrix and rewrites), or always with
AGENTRL_FULL_MATRIX=1. The others run in every test run: about 40 s."""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import random
from pathlib import Path

import pytest
import torch
import yaml
from agentrl.contract.config import ConfigError, load_config
from agentrl.contract.training_config import ALGORITHM_NAMES
from agentrl.examples.lookup.env import TABLE
from agentrl.run.runstore import latest_status, read_events
from agentrl.run.trainer import train
from conftest import EXAMPLE_CONFIG, PROTOCOL, REPO

SECTIONS = ("algorithm", "model", "train", "rollout")
# The example at its smallest: one step of two groups of two.
SMALL = ["train.steps=1", "train.batch_size=4", "train.micro_batch_size=4", "rollout.group_size=2"]
SCHEMA = PROTOCOL / "schemas" / "run-config.schema.json"
# What the full matrix's last pass was run at: a change to any of these makes the vLLM rows due again.
WATCHED = [SCHEMA, *sorted((REPO / "trainer-server" / "agentrl" / "learning").rglob("*.py"))]
WATCHED += sorted((REPO / "trainer-server" / "agentrl" / "rollout").rglob("*.py"))
PASSED = Path(__file__).with_name("config_matrix.passed")
Setting = tuple[str, str]  # (dotted path, the value as --set writes it)


def schema_factors(schema: dict, sections=SECTIONS) -> dict[str, list[str]]:
    """Each enum and boolean under `sections` of the run-config schema, with its values as --set strings."""
    definitions = schema.get("$defs", {})
    factors: dict[str, list[str]] = {}

    def walk(node: dict, path: str) -> None:
        if "$ref" in node:
            node = definitions[node["$ref"].rsplit("/", 1)[-1]]
        for option in node.get("anyOf", []):
            if option.get("type") != "null":
                walk(option, path)
        if "enum" in node:
            factors[path] = [as_set_value(value) for value in node["enum"]]
        elif node.get("type") == "boolean":
            factors[path] = ["true", "false"]
        for name, child in node.get("properties", {}).items():
            walk(child, f"{path}.{name}")

    for section in sections:
        walk(schema["properties"][section], section)
    return factors


def as_set_value(value) -> str:
    return yaml.safe_dump(value, default_flow_style=True).removesuffix("\n...\n").strip()


def covering_array(
    factors: dict[str, list[str]], forbidden: set[frozenset[Setting]], met: set | frozenset = frozenset(), seed: int = 0
) -> list[dict]:
    """Rows (setting -> value) in which every pair of values of two settings not in `met` meets at least once, none
    holding a forbidden set. Greedy (AETG's way): each row starts from a pair still uncovered and takes, for each other
    setting in a random order, the value that covers the most uncovered pairs; the best of a few such candidates is
    kept. A pair no row can hold (train.async_steps: 1 where every engine left is refused with it) is left out."""
    rng = random.Random(seed)
    names = sorted(factors)

    def allowed(row: dict) -> bool:
        settings = set(row.items())
        return not any(clash <= settings for clash in forbidden)

    uncovered = {
        frozenset({(a, x), (b, y)})
        for a, b in itertools.combinations(names, 2)
        for x in factors[a]
        for y in factors[b]
        if allowed({a: x, b: y}) and frozenset({(a, x), (b, y)}) not in met
    }
    rows: list[dict] = []
    while uncovered:
        best, best_gain = None, -1
        first = sorted(uncovered, key=sorted)[0]
        for _ in range(8):
            row = dict(first)
            for name in rng.sample(names, len(names)):
                if name in row:
                    continue
                values = [v for v in rng.sample(factors[name], len(factors[name])) if allowed({**row, name: v})]
                if not values:
                    break  # no value of this setting goes with the row's
                row[name] = max(values, key=lambda v: sum(frozenset({(name, v), s}) in uncovered for s in row.items()))
            else:
                gain = sum(frozenset(pair) in uncovered for pair in itertools.combinations(row.items(), 2))
                if gain > best_gain:
                    best, best_gain = row, gain
        if best is None:
            uncovered.discard(first)
            continue
        rows.append(best)
        uncovered -= {frozenset(pair) for pair in itertools.combinations(best.items(), 2)}
    return rows


def watched_digest() -> str:
    digest = hashlib.sha256()
    for path in WATCHED:
        digest.update(str(path.relative_to(REPO)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def vllm_rows_due() -> str | None:
    """Why the vLLM rows run now, or None."""
    if os.environ.get("AGENTRL_FULL_MATRIX") == "1":
        return "AGENTRL_FULL_MATRIX=1"
    if not PASSED.exists() or PASSED.read_text().split()[0] != watched_digest():
        return "the learner, the engines or the schema changed since the full matrix last passed"
    return None


def demonstrations(folder: Path) -> Path:
    """The lookup task solved, as chat transcripts: what algorithm.name: sft learns from."""
    path = folder / "demonstrations.jsonl"
    lines = []
    for key, value in TABLE.items():
        call = {"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": json.dumps({"key": key})}}
        messages = [
            {"role": "user", "content": f"key {key}"},
            {"role": "assistant", "content": "", "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "c1", "content": value},
            {"role": "assistant", "content": f"The value is {value}."},
        ]
        lines.append(json.dumps({"task_id": f"key-{key}", "messages": messages}) + "\n")
    path.write_text("".join(lines))
    return path


def companions(row: dict, folder: Path) -> list[str]:
    """What a value needs beside it to mean anything (not a clash: the value's own prerequisite)."""
    extra = []
    if row.get("algorithm.name") == "sft":
        extra.append(f"data.sft=[{{demonstrations: {demonstrations(folder)}}}]")
    if row.get("rollout.engine") == "vllm":
        extra.append("model.tiny_head_dim=32")  # vLLM's CPU attention takes head sizes from 32
    return extra


def overrides(row: dict, folder: Path) -> list[str]:
    return [*SMALL, *(f"{name}={value}" for name, value in row.items()), *companions(row, folder)]


class Runs:
    """Where the matrix's runs go, one folder each."""

    def __init__(self, folder: Path):
        self.folder, self.count = folder, 0

    def next(self) -> Path:
        self.count += 1
        return self.folder / f"run-{self.count}"


def outcome(settings: dict, folder: Path, runs: Runs, validator) -> str | None:
    """None when the settings train one step into a completed run of schema-valid trajectories; the message when they
    are refused before the run starts (load_config's, or the trainer's as it sets up, before any episode). A failure
    after the run started fails the test, naming the settings."""
    try:
        config = load_config(EXAMPLE_CONFIG, overrides(settings, folder))
    except ConfigError as refused:
        return str(refused)
    runs_dir = runs.next()
    try:
        run_dir = train(config, runs_dir=runs_dir, config_base_dir=EXAMPLE_CONFIG.parent)
    except Exception as error:
        if isinstance(error, ValueError) and not any(runs_dir.glob("*/trajectories/*.jsonl")):
            return str(error)
        raise AssertionError(f"{type(error).__name__}: {error}\nafter the run started, with {settings}") from error
    status = latest_status(read_events(run_dir))
    assert status["status"] == "completed", (settings, status)
    records = [json.loads(line) for path in (run_dir / "trajectories").glob("*.jsonl") for line in path.open()]
    assert records, settings
    for record in records:
        validator.validate(record)
    return None


def background() -> dict[str, str]:
    """Each factor's value in the example as the matrix loads it (SMALL set): what a probe of a few settings runs with
    for the rest."""
    config = load_config(EXAMPLE_CONFIG, SMALL)
    values = {}
    for path in schema_factors(json.loads(SCHEMA.read_text())):
        value = config
        for part in path.split("."):
            value = getattr(value, part, None)
        if value is not None:
            values[path] = as_set_value(value)
    return values


def smallest_clash(row: dict, folder: Path, runs: Runs, validator) -> frozenset[Setting]:
    """The smallest set of the row's settings that is refused (one alone, else a pair), its message naming each. A
    setting refused alone for a value the rest keep in the probe (train.async_steps: 1 with rollout.engine: auto) is
    refused with that value: the clash holds the other settings its message names, at the values the probe ran with,
    and is this row's only if the row holds them too; a pair holding it is then refused for that reason alone."""
    rest = background()
    refused_alone = set()
    for size in (1, 2):
        subsets = itertools.combinations(sorted(row.items()), size)
        # A pair with a setting refused alone first: the setting's partner is then found without training the rest.
        for subset in sorted(subsets, key=lambda subset: not refused_alone & set(subset)):
            message = outcome(dict(subset), folder, runs, validator)
            if message is None:
                continue
            unnamed = [name for name, _ in subset if name not in message]
            if unnamed and refused_alone & set(subset):
                continue  # one of the pair is refused alone, with the rest's values: this refusal is its
            assert not unnamed, f"{dict(subset)} is refused without naming {unnamed}: {message}"
            named = {(name, rest[name]) for name in rest if name in message and name not in dict(subset)}
            clash = frozenset(subset) | named
            if clash <= set(row.items()):
                return clash
            refused_alone |= set(subset) if size == 1 else set()
    raise AssertionError(f"refused, but no one setting or pair of it is: {row}")


def machine_factors() -> tuple[dict[str, list[str]], list[str]]:
    """The schema's factors less the values this machine cannot run now (cuda is checked to be refused clearly), and
    why each was left out."""
    factors = schema_factors(json.loads(SCHEMA.read_text()))
    left_out = []
    if not torch.cuda.is_available():
        factors["model.device"].remove("cuda")
        left_out.append("model.device: cuda (no CUDA device here)")
    try:
        import vllm  # noqa: F401
    except ImportError:
        factors["rollout.engine"].remove("vllm")
        left_out.append("rollout.engine: vllm (vLLM not installed)")
    else:
        if vllm_rows_due() is None:
            factors["rollout.engine"].remove("vllm")
            left_out.append("rollout.engine: vllm (the full matrix passed at this learner, engines and schema)")
    return factors, left_out


def test_the_factors_are_the_schemas_every_enum_and_boolean():
    factors = schema_factors(json.loads(SCHEMA.read_text()))
    assert factors["algorithm.name"] == list(ALGORITHM_NAMES)
    assert factors["model.gradient_checkpointing"] == ["true", "false"]
    assert factors["algorithm.kl.estimator"] == ["k1", "k3"]  # nested sections too
    assert factors["train.bf16_autocast"] == ["false", "true", "auto"]
    assert len(factors) >= 20


def test_a_covering_array_covers_every_allowed_pair_and_no_forbidden_set():
    factors = {"a": ["1", "2", "3"], "b": ["x", "y"], "c": ["p", "q"], "d": ["m", "n", "o"]}
    forbidden = {frozenset({("a", "1"), ("b", "y")})}
    rows = covering_array(factors, forbidden)
    met = {frozenset(pair) for row in rows for pair in itertools.combinations(row.items(), 2)}
    for a, b in itertools.combinations(sorted(factors), 2):
        for x, y in itertools.product(factors[a], factors[b]):
            pair = frozenset({(a, x), (b, y)})
            assert pair in met or pair in forbidden
    assert not any(clash <= set(row.items()) for row in rows for clash in forbidden)
    assert len(rows) < len(list(itertools.product(*factors.values())))


def test_values_this_machine_cannot_run_are_refused_clearly(tmp_path):
    _, left_out = machine_factors()
    if not any(item.startswith("model.device: cuda") for item in left_out):
        pytest.skip("a CUDA device is here: model.device: cuda is in the matrix")
    config = load_config(EXAMPLE_CONFIG, [*SMALL, "model.device=cuda"])
    with pytest.raises(RuntimeError, match="model.device is 'cuda' but torch sees no CUDA device"):
        train(config, runs_dir=tmp_path, config_base_dir=EXAMPLE_CONFIG.parent)


def test_train_async_steps_needs_the_vllm_engine_and_says_so(tmp_path, trajectory_validator):
    """The clash known before the matrix: refused before the run starts, naming both settings."""
    settings = {"train.async_steps": "1", "rollout.engine": "hf"}
    message = outcome(settings, tmp_path, Runs(tmp_path), trajectory_validator)
    assert message and "train.async_steps" in message and "rollout.engine" in message


def test_every_pair_of_settings_trains_or_is_refused_naming_both(tmp_path, trajectory_validator):
    """The covering array is built and its rows trained in turn; a refused row's smallest clash is found, checked to
    be named, forbidden, and the array built again for the pairs no trained row has met yet."""
    factors, left_out = machine_factors()
    runs = Runs(tmp_path / "runs")
    met: set[frozenset[Setting]] = set()
    forbidden: set[frozenset[Setting]] = set()
    trained = 0
    while rows := covering_array(factors, forbidden, met):
        for row in rows:
            if outcome(row, tmp_path, runs, trajectory_validator) is not None:
                forbidden.add(smallest_clash(row, tmp_path, runs, trajectory_validator))
                break
            met |= {frozenset(pair) for pair in itertools.combinations(row.items(), 2)}
            trained += 1
    print(f"{trained} rows trained; refused: {sorted(map(sorted, forbidden))}; left out: {left_out}")
    assert all(len(clash) <= 3 for clash in forbidden), forbidden
    if "vllm" in factors["rollout.engine"] and os.environ.get("AGENTRL_WRITE_MATRIX_PASSED") == "1":
        PASSED.write_text(f"{watched_digest()}\n{trained} rows trained, vLLM's among them\n")
