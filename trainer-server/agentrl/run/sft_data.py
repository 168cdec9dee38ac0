"""The episodes an sft run learns from (data.sft), loaded once when the run starts, and each step's share of them.

A `run` source is an earlier run's recorded episodes, picked with Search Episodes' filters (`where`, answered by
that run's search index, episode_search.py) and read back token-exact from its step files (`episode_from_record`):
what that run's model saw and sampled, so the run must use the same tokenizer, which is checked token by token. A
`demonstrations` source is a JSON Lines file of chat transcripts, rendered as a rollout renders an episode
(rollout/demonstrations.py). An `atif` source is ATIF trajectories (run/atif.py): one agentrl wrote carries its token
sequence and is read as a run's episode is; another tool's is rendered as a demonstration of what it holds. An
`episodes` source is a training set the editor gathered: recorded episodes whole, read as a run's are, each learned
from the turn its line names (the earlier turns are its context). Every problem names the source, and the file and
line where one is to blame.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from agentrl.contract.config import RunConfig
from agentrl.contract.files_inside import open_inside, parse_json
from agentrl.contract.schemas import file_validator
from agentrl.contract.tasks import items_for_step
from agentrl.contract.training_config import EpisodeFilter, SftSource
from agentrl.environment.env import ToolEnv
from agentrl.environment.toolcall import get_format
from agentrl.rollout.chat import ChatFormat
from agentrl.rollout.demonstrations import render_demonstration
from agentrl.rollout.episode import Episode, episode_from_record, learned_from_turn
from agentrl.rollout.loop import start_episode
from agentrl.run.atif import atif_to_record
from agentrl.run.episode_filters import filters_of
from agentrl.run.episode_search import EpisodeSearch
from agentrl.run.runstore import TRAJECTORIES_DIR

_PAGE = 1000
# A recorded token's text is compared with this model's decoding of its id over each episode's first tokens: enough
# to tell two tokenizers apart, cheap for thousands of episodes.
_TOKENS_COMPARED = 256


def sft_episodes_of(
    config: RunConfig, tokenizer: Any, make_env: Callable[[], ToolEnv] | None, first_task: dict[str, Any]
) -> list[Episode]:
    """The run's data.sft episodes, rendered with its chat template and rollout.tool_format; a demonstration without
    its own `tools` gets the env's, as the env offers them once reset with the first task (an agent run's: none)."""

    def env_tools() -> list[dict[str, Any]]:
        return start_episode(make_env(), first_task, 0, 0).episode.tool_schemas if make_env is not None else []

    return load_sft_episodes(
        config.data.sft,
        chat=ChatFormat(tokenizer, config.rollout.tool_output_tokens, get_format(config.rollout.tool_format)),
        eos_id=tokenizer.eos_token_id,
        env_tools=env_tools,
        max_context=config.rollout.max_context,
    )


def load_sft_episodes(
    sources: list[SftSource],
    *,
    chat: ChatFormat,
    eos_id: int,
    env_tools: Callable[[], list[dict[str, Any]]],
    max_context: int,
) -> list[Episode]:
    """Every source's episodes, in order; ValueError naming the source at fault, or one that gives no episode."""
    episodes: list[Episode] = []
    for index, source in enumerate(sources):
        key = f"data.sft[{index}]"
        try:
            if source.run is not None:
                found = _run_episodes(Path(source.run), source.where, chat.tokenizer, max_context)
            elif source.demonstrations is not None:
                found = _demonstrations(Path(source.demonstrations), chat, eos_id, env_tools, max_context)
            elif source.atif is not None:
                found = _atif_episodes(Path(source.atif), chat, eos_id, env_tools, max_context)
            else:
                assert source.episodes is not None
                found = _training_set_episodes(Path(source.episodes), chat.tokenizer, max_context)
        except (OSError, ValueError) as err:
            raise ValueError(f"{key}: {err}") from None
        if not found:
            what = (
                f"no episode of {source.run} passes `where`"
                if source.run
                else f"{source.demonstrations or source.atif or source.episodes} is empty"
            )
            raise ValueError(f"{key}: {what}")
        episodes += found
    return episodes


def turns_over_budget(episodes: list[Episode], max_new_tokens: int) -> str | None:
    """What to tell the user when some episodes learn a turn longer than rollout.max_new_tokens: a rollout cuts such a
    turn, so the policy is taught to begin what it can never finish (a call cut before its closing tag is no call);
    None when every learned turn fits."""
    over = 0
    longest = 0
    for episode in episodes:
        per_turn: dict[int, int] = {}
        for turn, learned in zip(episode.token_turns, episode.loss_mask, strict=True):
            per_turn[turn] = per_turn.get(turn, 0) + learned
        most = max(per_turn.values(), default=0)
        over += most > max_new_tokens
        longest = max(longest, most)
    if not over:
        return None
    return (
        f"data.sft: {over} of {len(episodes)} episodes learn a turn longer than rollout.max_new_tokens "
        f"({max_new_tokens}; the longest, {longest} tokens): a rollout cuts such a turn, so what it teaches cannot be "
        "sampled. Raise rollout.max_new_tokens, or leave those episodes out"
    )


def sft_batch(episodes: list[Episode], step: int, batch_size: int, seed: int, shuffle: bool) -> list[Episode]:
    """Step `step`'s episodes, in the order a rollout step takes its tasks (`items_for_step`), each its own group."""
    return [
        replace(episode, group=group, sample=0)
        for group, episode in enumerate(items_for_step(episodes, step, batch_size, seed, shuffle))
    ]


def _run_episodes(run_dir: Path, where: EpisodeFilter, tokenizer: Any, max_context: int) -> list[Episode]:
    """The run's episodes that pass `where`, in step order, read from its step files."""
    if not (run_dir / TRAJECTORIES_DIR).is_dir():
        raise ValueError(f"{run_dir} is not a run folder with recorded episodes ({TRAJECTORIES_DIR}/)")
    search = EpisodeSearch(run_dir)
    search.sync()
    wanted: dict[str, set[str]] = {}  # step file -> ids
    start = 0
    while True:
        matches, total = search.search(filters_of(where), "step", start, _PAGE)
        for match in matches:
            wanted.setdefault(match.summary["file"], set()).add(match.summary["id"])
        start += len(matches)
        if not matches or start >= total:
            break
    episodes = []
    for file, ids in wanted.items():
        with open_inside(run_dir, file, None) as handle:
            for number, line in enumerate(handle, 1):
                if not line.strip():
                    continue
                try:
                    record = parse_json(line)
                    if not isinstance(record, dict) or record.get("id") not in ids:
                        continue
                except ValueError as err:
                    raise ValueError(f"{run_dir / file}:{number}: {err}") from None
                episodes.append(_recorded_episode(record, tokenizer, max_context, f"{run_dir / file}:{number}"))
    return episodes


def _recorded_episode(record: dict[str, Any], tokenizer: Any, max_context: int, where: str) -> Episode:
    """The episode of a record with its token sequence, read back token-exact; ValueError naming `where` when it is
    damaged, was recorded with another tokenizer, or is longer than this run's context."""
    try:
        episode = episode_from_record(record)
    except ValueError as err:
        raise ValueError(f"{where}: {err}") from None
    _check_tokenizer(record, tokenizer, where)
    if len(episode.token_ids) > max_context:
        raise ValueError(f"{where}: {len(episode.token_ids)} tokens, over rollout.max_context ({max_context})")
    return episode


def _training_set_episodes(path: Path, tokenizer: Any, max_context: int) -> list[Episode]:
    """A training set's episodes (protocol/schemas/training-set.schema.json), each read back token-exact as a run's
    recorded episode is and learned from its line's from_turn on."""
    check = file_validator("training-set.schema.json")
    episodes = []
    with open_inside(path.parent, path.name, None) as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            where = f"{path}:{number}"
            try:
                picked = parse_json(line)
            except ValueError as err:
                raise ValueError(f"{where}: {err}") from None
            problem = next(iter(check.iter_errors(picked)), None)
            if problem is not None:
                at = "/".join(str(part) for part in problem.absolute_path) or "the line"
                raise ValueError(f"{where}: not a training set line ({at}: {problem.message[:200]})")
            episode = _recorded_episode(picked["episode"], tokenizer, max_context, where)
            try:
                episodes.append(learned_from_turn(episode, picked["from_turn"]))
            except ValueError as err:
                raise ValueError(f"{where}: {err}") from None
    return episodes


def _check_tokenizer(record: dict[str, Any], tokenizer: Any, where: str) -> None:
    ids, texts = record["tokens"]["ids"][:_TOKENS_COMPARED], record["tokens"].get("text", [])[:_TOKENS_COMPARED]
    for position, (token, text) in enumerate(zip(ids, texts)):
        if tokenizer.decode([token]) != text:
            raise ValueError(
                f"{where}: recorded with another tokenizer than this run's model (token {position}, id {token}, was "
                f"{text!r} there and is {tokenizer.decode([token])!r} here): an sft run learns a run's episodes with "
                "the model that sampled them, or one of its family"
            )


def _demonstrations(
    path: Path, chat: ChatFormat, eos_id: int, env_tools: Callable[[], list[dict[str, Any]]], max_context: int
) -> list[Episode]:
    episodes = []
    tools: list[dict[str, Any]] | None = None
    with open_inside(path.parent, path.name, None) as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                demo = parse_json(line)
                if isinstance(demo, dict) and "tools" not in demo and tools is None:
                    tools = env_tools()
                episodes.append(
                    render_demonstration(
                        demo, chat=chat, eos_id=eos_id, env_tools=tools or [], max_context=max_context, group=0
                    )
                )
            except ValueError as err:
                raise ValueError(f"{path}:{number}: {err}") from None
    return episodes


def _atif_episodes(
    path: Path, chat: ChatFormat, eos_id: int, env_tools: Callable[[], list[dict[str, Any]]], max_context: int
) -> list[Episode]:
    """The ATIF trajectories of a .jsonl file (one a line) or a .json file (one): one with its token sequence (agentrl
    wrote it) token-exact, another rendered as a demonstration, with the env's tools when it names none."""
    with open_inside(path.parent, path.name, None) as handle:
        text = handle.read().decode("utf-8", errors="replace")
    if path.suffix == ".json":
        documents = [(1, text)]
    else:
        documents = [(number, line) for number, line in enumerate(text.splitlines(), 1) if line.strip()]
    episodes = []
    for position, (number, document) in enumerate(documents):
        where = f"{path}:{number}"
        try:
            record = atif_to_record(parse_json(document), position)
        except (KeyError, TypeError, AttributeError) as err:  # a document that is ATIF in name only
            raise ValueError(f"{where}: not a readable ATIF trajectory ({type(err).__name__}: {err})") from None
        except ValueError as err:
            raise ValueError(f"{where}: {err}") from None
        if record["tokens"]["ids"]:
            episodes.append(_recorded_episode(record, chat.tokenizer, max_context, where))  # names `where` itself
            continue
        try:
            demo = record_as_demonstration(record)
            tools = demo.pop("tools") or env_tools()
            episodes.append(
                render_demonstration(
                    demo,
                    chat=chat,
                    eos_id=eos_id,
                    env_tools=tools,
                    max_context=max_context,
                    group=position,
                    prompt_length=len(record["prompt"]),
                )
            )
        except ValueError as err:
            raise ValueError(f"{where}: {err}") from None
    return episodes


def record_as_demonstration(record: dict[str, Any]) -> dict[str, Any]:
    """A trajectory record without its tokens (an ATIF trajectory another tool wrote) as a demonstration in OpenAI's
    chat format: its prompt; each turn an assistant message with its text and tool calls, then a tool message per call
    (its result, or its error) and what the agent read next as a user message."""
    messages = [dict(message) for message in record["prompt"]]
    for turn in record["turns"]:
        calls = [
            {
                "id": call["id"],
                "type": "function",
                "function": {"name": call["name"], "arguments": json.dumps(call["arguments"] or {})},
            }
            for call in turn["tool_calls"]
        ]
        messages.append({"role": "assistant", "content": turn["assistant"], **({"tool_calls": calls} if calls else {})})
        for call in turn["tool_calls"]:
            result = call["result"] if call["error"] is None else call["error"]
            text = result if isinstance(result, str) else json.dumps(result, ensure_ascii=False)
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": text})
        if turn["observation"]:
            messages.append({"role": "user", "content": turn["observation"]})
    return {"task_id": record["task_id"] or record["id"], "messages": messages, "tools": record["tools"]}
