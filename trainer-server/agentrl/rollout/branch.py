"""Where a recorded episode can be started again, and which of its tokens the new start keeps (`episode/reroll`:
edit one turn of a trajectory and play on from there; agentrl/run/reroll.py).

A branch is a turn k of a trajectory record and what is edited there:

- "assistant": turn k's assistant text is replaced. The new episode keeps the record's tokens before turn k, then the
  edited text tokenized alone (what the chat template renders inside an assistant turn is its text as written); the
  env steps turn k with the edited text (its calls run), and the observation it gives is appended as a rollout
  appends one.
- "observation": turn k's observation is replaced. The new episode keeps the record's tokens through turn k's sampled
  text; the env steps turn k with the recorded text, and the edited observation is appended in place of the env's,
  rendered by `ChatFormat.observation` as the ToolEnv's messages are. The env's state is what its Tools' real answers
  made it: the edit changes what the model reads, not what the env knows.

Either way sampling goes on at turn k + 1. A text left as recorded keeps the recorded ids of its chunk (rule 1 of
docs/token-pipeline.md: ids are never decoded and encoded again), so a re-roll that edits nothing repeats the recorded
prefix token for token. The env reaches turn k by replaying the recorded turns through it (`RolloutEngine.restart`).

This module reads records only (no torch): the server checks a branch with it before it starts a re-roll's process.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

Edit = Literal["assistant", "observation"]


class NoSuchTurn(LookupError):
    """The record has no such turn."""


class CannotBranch(ValueError):
    """The turn exists, but the episode cannot be started again there with that edit."""


class PrefixDiverged(RuntimeError):
    """Playing the recorded turns through the env again did not reach the branch point: its reset raised, or it ended
    the episode at a turn it had not ended when the episode was recorded."""


@dataclass(frozen=True)
class BranchPoint:
    turn: int
    edit: Edit
    recorded_text: str  # what the edit replaces: turn `turn`'s assistant text, or its observation
    keep: int  # how many of the record's tokens the new episode keeps when the text is left as recorded
    keep_edited: int  # and when it is edited (the edited chunk follows them)

    def kept(self, text: str) -> int:
        return self.keep if text == self.recorded_text else self.keep_edited


def branch_point(record: dict[str, Any], turn: int, edit: Edit, text: str) -> BranchPoint:
    """The branch at turn `turn` of `record` with `edit` set to `text`; NoSuchTurn or CannotBranch say why not."""
    turns = record["turns"]
    if not 0 <= turn < len(turns):
        raise NoSuchTurn(f"trajectory {record['id']} has no turn {turn}: it has {len(turns)} (0 to {len(turns) - 1})")
    recorded = turns[turn]
    sampled = token_span(record, turn, "assistant")
    if sampled is None:
        raise CannotBranch(f"turn {turn} of trajectory {record['id']} has no sampled tokens in its record")
    if edit == "assistant":
        if not text:
            raise CannotBranch("an assistant turn cannot be empty: give the text the model should have written")
        return BranchPoint(turn, edit, recorded["assistant"], keep=sampled[1], keep_edited=sampled[0])
    if recorded["done"]:
        raise CannotBranch(
            f"turn {turn} ended the episode (the ToolEnv said done): no turn follows its observation; edit its "
            f"assistant text instead"
        )
    appended = token_span(record, turn, "tool")
    if recorded["observation"] is None or appended is None:
        raise CannotBranch(
            f"turn {turn} has no observation the model read"
            + (" (it did not fit in rollout.max_context)" if recorded["observation"] is not None else "")
            + "; edit its assistant text instead"
        )
    return BranchPoint(turn, edit, recorded["observation"], keep=appended[1], keep_edited=sampled[1])


def token_span(record: dict[str, Any], turn: int, role: str) -> tuple[int, int] | None:
    """[start, end) of turn `turn`'s tokens of `role` (assistant: the sampled text; tool: what was appended after
    it) in the record's token arrays, or None when it has none."""
    tokens = record["tokens"]
    where = [i for i, (r, t) in enumerate(zip(tokens["role"], tokens["turn"], strict=True)) if t == turn and r == role]
    return (where[0], where[-1] + 1) if where else None


def turn_ends(record: dict[str, Any], end: int) -> list[int]:
    """The position of each turn's last sampled token among the record's first `end` tokens
    (`Episode.turn_end_positions`)."""
    tokens = record["tokens"]
    last: dict[int, int] = {}
    for i, (role, turn) in enumerate(zip(tokens["role"][:end], tokens["turn"][:end], strict=True)):
        if role == "assistant":
            last[turn] = i
    return sorted(last.values())
