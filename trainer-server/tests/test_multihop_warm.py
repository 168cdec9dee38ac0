"""The multi-hop warm-start experiment's data (multihop_warm_grpo.agentrl.yaml): a held-out file of over 500 questions
from the three datasets that the training file never holds, reproduced by its script, and two-hop demonstrations of
training questions only, reproduced by theirs, each rendering as the run's sft warm start renders it."""

import json
from pathlib import Path

from agentrl.contract.config import load_config, resolve_paths
from agentrl.contract.tasks import load_tasks
from agentrl.environment.loader import config_env_factory
from agentrl.models.loading import load_policy
from agentrl.recipes.answers import normalize_answer
from agentrl.recipes.multihop import splits
from agentrl.recipes.multihop.warm_start_demonstrations import (
    CONFIG,
    DEMONSTRATIONS,
    bridge_title,
    write_multihop_demonstrations,
)
from agentrl.run.sft_data import sft_episodes_of, turns_over_budget

DATA = splits.DATA


def ids_and_questions(path: Path) -> tuple[set[str], set[str], int]:
    lines = [line for line in path.open(encoding="utf-8") if line.strip()]
    return (
        {splits.record_id(line) for line in lines},
        {normalize_answer(json.loads(x)["question"]) for x in lines},
        len(lines),
    )


def test_the_splits_are_reproduced_and_the_training_file_holds_no_heldout_question(tmp_path):
    splits.write_splits(tmp_path)
    for name in (splits.HELDOUT, splits.HELDOUT_PROVENANCE, splits.TRAIN):
        assert (tmp_path / name).read_bytes() == (DATA / name).read_bytes(), name
    train_ids, train_questions, n_train = ids_and_questions(DATA / splits.TRAIN)
    heldout_ids, heldout_questions, n_heldout = ids_and_questions(DATA / splits.HELDOUT)
    assert n_heldout == 541 and n_train == 1921 and n_heldout + n_train == 267 + 2195
    assert not train_ids & heldout_ids and not train_questions & heldout_questions
    groups = splits.heldout_groups()
    assert len(groups) == n_heldout
    assert {g: groups.count(g) for g in set(groups)} == {
        "hotpotqa dev": 103,
        "2wikimultihopqa dev": 164,
        "hotpotqa train": 74,
        "2wikimultihopqa train": 138,
        "musique train": 62,
    }
    # the provenance names each held-out record by its id, in the held-out file's order
    with (DATA / splits.HELDOUT_PROVENANCE).open(encoding="utf-8") as handle:
        listed = [row.split("\t")[3] for row in handle.read().splitlines()[1:]]
    assert listed == [splits.record_id(line) for line in (DATA / splits.HELDOUT).open(encoding="utf-8")]


def test_the_bridge_is_the_supporting_paragraph_the_first_search_missed():
    task = {
        "question": "q",
        "context": [["A", ["a."]], ["B", ["b."]], ["C", ["c."]]],
        "supporting_facts": [["A", 0], ["B", 0]],
    }
    assert bridge_title(task, ["A: a."]) == "B"
    assert bridge_title(task, ["B: b."]) == "A"
    assert bridge_title(task, ["A: a.", "B: b."]) == "B"  # both found: the second supporting fact
    musique = {
        "question": "q",
        "paragraphs": [{"title": t, "paragraph_text": t.lower(), "is_supporting": True} for t in ("X", "Y", "Z")],
        "question_decomposition": [{"paragraph_support_idx": 2}, {"paragraph_support_idx": 0}],
    }
    assert bridge_title(musique, ["Z: z"]) == "X"  # the decomposition's order, not the paragraphs'


def test_the_demonstrations_file_is_what_its_script_writes(tmp_path):
    written, _ = write_multihop_demonstrations(out=tmp_path / "demonstrations.jsonl")
    assert written > 500
    assert (tmp_path / "demonstrations.jsonl").read_bytes() == DEMONSTRATIONS.read_bytes()


def test_the_demonstrations_render_as_the_warm_start_reads_them_and_hold_no_heldout_question():
    config = resolve_paths(load_config(CONFIG), CONFIG.parent)
    assert Path(config.data.sft[0].demonstrations) == DEMONSTRATIONS and config.train.sft_steps > 0
    _, tokenizer, _ = load_policy(config.model, config.seed)
    make_env = config_env_factory(config)
    tasks = {splits.record_id(json.dumps(t)): t for t in load_tasks(config.data.train, None)}
    episodes = sft_episodes_of(config, tokenizer, make_env, next(iter(tasks.values())))
    demonstrations = [json.loads(line) for line in DEMONSTRATIONS.open(encoding="utf-8")]
    assert len(episodes) == len(demonstrations) == 864
    assert turns_over_budget(episodes, config.rollout.max_new_tokens) is None  # no turn a rollout would cut
    heldout_ids, heldout_questions, _ = ids_and_questions(DATA / splits.HELDOUT)
    env = make_env()
    for demo, episode in zip(demonstrations, episodes, strict=True):
        task = tasks[demo["task_id"]]  # a training question, never a held-out one
        assert demo["task_id"] not in heldout_ids
        assert normalize_answer(task["question"]) not in heldout_questions
        prompt = env.reset(task)
        assert episode.prompt_messages == prompt  # the worked example's turns are prompt, not learned
        assert [t.assistant for t in episode.turns] == [
            f"<search>{task['question']}</search>",
            f"<search>{bridge_title(task, env.tools[0].execute(task['question']))}</search>",
            f"Answer: {task['answer']}",
        ]
        # what the env's search tool returns for those queries, then an answer its score reads as the gold one
        for turn in episode.turns[:2]:
            query = turn.assistant.removeprefix("<search>").removesuffix("</search>")
            assert turn.observation == "\n".join(env.tools[0].execute(query))
        assert env.score(episode.turns[2].assistant).breakdown["em"] == 1.0
