"""The recipes' pieces: safe calculator, answer scoring, BM25 search, eval, the packaged default model."""

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest
from agentrl import ToolCallOutcome
from agentrl.environment.toolcall import get_format, schemas_by_name
from agentrl.recipes.answers import (
    exact_match,
    f1_score,
    final_answer_text,
    gsm8k_gold,
    normalize_answer,
    parse_number,
    substring_match,
)
from agentrl.recipes.arithmetic import tasks as arithmetic_tasks
from agentrl.recipes.arithmetic.env import ArithmeticEnv
from agentrl.recipes.calculator import CalculatorError, calculate
from agentrl.recipes.gsm8k.env import GSM8KCalculatorEnv
from agentrl.recipes.multihop.env import EXAMPLE_QUESTION, MultiHopQAEnv, golds_of
from agentrl.recipes.multihop.search import index_of, paragraphs_of
from conftest import REPO, rollout_only_records

RECIPES = REPO / "trainer-server" / "agentrl" / "recipes"
MULTIHOP_DATA = RECIPES / "multihop" / "data"
MULTIHOP_FILES = (str(MULTIHOP_DATA / "train.jsonl"), str(MULTIHOP_DATA / "heldout.jsonl"))  # the recipe's data
MULTIHOP_FULL_TRAIN = MULTIHOP_DATA / "train_full.jsonl"  # multihop_full_grpo's: HotpotQA, 2Wiki, MuSiQue train
INVENTED_QUESTION = "Where was Quillon Varbeck, the inventor of the glass harpsichord, born?"
INVENTED_FACT = "Quillon Varbeck: Quillon Varbeck (1843 – 1901) was a Moravian instrument maker. He was born in Zlatno."


def write_foreign_hotpotqa(folder):
    """A HotpotQA-layout file whose paragraphs the bundled data lacks (an invented person)."""
    record = {
        "_id": "invented-1",
        "question": INVENTED_QUESTION,
        "answer": "Zlatno",
        "type": "bridge",
        "supporting_facts": [["Quillon Varbeck", 1]],
        "context": [
            [
                "Quillon Varbeck",
                ["Quillon Varbeck (1843 – 1901) was a Moravian instrument maker.", " He was born in Zlatno."],
            ],
            ["Glass harpsichord", ["The glass harpsichord was invented by Quillon Varbeck."]],
        ],
    }
    path = folder / "foreign_hotpotqa.jsonl"
    path.write_text(json.dumps(record) + "\n", encoding="utf-8")
    return path


def write_foreign_musique(folder):
    """A MuSiQue-layout file (the official keys) whose paragraphs the bundled data lacks."""
    record = {
        "id": "2hop__invented_1",
        "paragraphs": [
            {
                "idx": 0,
                "title": "Glass harpsichord",
                "paragraph_text": "It was invented by Quillon Varbeck.",
                "is_supporting": True,
            },
            {
                "idx": 1,
                "title": "Quillon Varbeck",
                "paragraph_text": "Quillon Varbeck (1843 – 1901) was a Moravian instrument maker. He was born in Zlatno. ",
                "is_supporting": True,
            },
        ],
        "question": INVENTED_QUESTION,
        "question_decomposition": [],
        "answer": "Zlatno",
        "answer_aliases": ["Zlatno, Moravia", "ZL"],
        "answerable": True,
    }
    path = folder / "foreign_musique.jsonl"
    path.write_text(json.dumps(record) + "\n", encoding="utf-8")
    return path


@pytest.mark.parametrize(
    "expression, value",
    [
        ("48 / 2", 24),
        ("48 + 24", 72),
        ("(3 + 4) * 2", 14),
        ("2 ** 10", 1024),
        ("7 // 2", 3),
        ("7 % 4", 3),
        ("-5 + 2", -3),
        ("1,000 * 3", 3000),
        ("12 x 7", 84),
        ("$5 * 4", 20),
        ("0.1 + 0.2", 0.3),
        ("10 / 4", 2.5),
    ],
)
def test_calculator_evaluates_arithmetic(expression, value):
    assert calculate(expression) == value


@pytest.mark.parametrize(
    "expression, message",
    [
        ("__import__('os').system('echo pwned')", "not Call"),
        ("open('/etc/passwd')", "not Call"),
        ("a + 1", "not Name"),
        ("(1).__class__", "not Attribute"),
        ("[1]", "not List"),
        ("'a' * 3", "not Constant"),
        ("9 ** 9 ** 9", "exponent"),
        ("10 ** 40", "out of range"),
        ("1 / 0", "division by zero"),
        ("1 +", "not an arithmetic expression"),
        ("1" * 300, "longer than 200"),
        ("lambda: 1", "not Lambda"),
    ],
)
def test_calculator_rejects_everything_else(expression, message):
    with pytest.raises(CalculatorError, match=message):
        calculate(expression)


def test_answer_normalisation_and_scores():
    assert normalize_answer("The  Eiffel-Tower!") == "eiffeltower"
    assert exact_match("the United States", "United States") == 1.0
    assert f1_score("Barack Obama Jr", "Barack Obama") == pytest.approx(2 * (2 / 3) * 1 / (2 / 3 + 1))
    assert f1_score("yes", "no") == 0.0 and f1_score("no", "no") == 1.0
    assert substring_match("It was in Paris, France.", "Paris") == 1.0
    assert substring_match("London", "Paris") == 0.0


def test_gsm8k_answers():
    assert gsm8k_gold("so 48+24 = 72\n#### 1,072") == "1072"
    assert parse_number("that is 1,234.5 apples") == 1234.5
    assert final_answer_text("work...\nAnswer: 72 clips\nthanks") == "72 clips"
    assert final_answer_text("no marker") is None


def test_gsm8k_env_scores_and_rewards_tool_use():
    env = GSM8KCalculatorEnv()
    task = {"question": "q", "answer": "#### 72"}
    env.reset(task)
    score = env.score("Answer: 72")
    assert score.reward == pytest.approx(1.2) and score.breakdown["accuracy"] == 1.0
    assert env.score("I think 70").reward == 0.0
    with pytest.raises(ValueError, match="no 'naive-rag' baseline"):
        GSM8KCalculatorEnv(baseline="naive-rag")


def test_bm25_search_finds_the_gold_paragraph():
    hits = index_of(MULTIHOP_FILES).search("Were Scott Derrickson and Ed Wood of the same nationality?", 3)
    assert any(hit.startswith("Ed Wood") for hit in hits)
    assert index_of(MULTIHOP_FILES).search("the of and", 3) == []  # only stopwords: nothing to match


def test_the_corpus_is_the_union_of_both_layouts_paragraphs():
    hotpotqa, wiki = MULTIHOP_DATA / "hotpotqa_dev_distractor.jsonl", MULTIHOP_DATA / "2wikimultihopqa_dev.jsonl"
    union = paragraphs_of([hotpotqa, wiki])
    assert len(union) == len(set(union)) == 2315  # deduplicated
    assert set(union) == set(paragraphs_of(map(Path, MULTIHOP_FILES)))  # the recipe's splits cover the same corpus
    # sentences are joined with one space whether they carry it (HotpotQA) or not (2WikiMultihopQA)
    assert any(p.startswith("Pál Gábor: ") and "screenwriter. He directed" in p for p in union)
    assert index_of([wiki, hotpotqa]) is index_of([hotpotqa, wiki, str(hotpotqa)])  # one index per set of files


def test_a_foreign_files_paragraphs_become_searchable(tmp_path):
    foreign = write_foreign_hotpotqa(tmp_path)
    assert INVENTED_FACT not in index_of(MULTIHOP_FILES).search(INVENTED_QUESTION, 3)
    env = MultiHopQAEnv(top_k=3, data_files=[*MULTIHOP_FILES, str(foreign)])
    [search] = env.tools
    assert INVENTED_FACT in search.execute(query="Quillon Varbeck birthplace born")
    assert search.execute(query="Scott Derrickson")[0].startswith("Scott Derrickson")  # the bundled ones stay
    rag = MultiHopQAEnv(top_k=3, baseline="naive-rag", data_files=[*MULTIHOP_FILES, str(foreign)])
    assert INVENTED_FACT in rag.reset({"question": INVENTED_QUESTION, "answer": "Zlatno"})[1]["content"]


def test_the_hugging_face_context_layout_is_read_too(tmp_path):
    record = {
        "question": "q",
        "answer": "a",
        "context": {"title": ["Quillon Varbeck"], "sentences": [["He was born", " in Zlatno."]]},
    }
    (tmp_path / "hf.jsonl").write_text(json.dumps(record) + "\n")
    assert paragraphs_of([tmp_path / "hf.jsonl"]) == ["Quillon Varbeck: He was born in Zlatno."]


def test_the_musique_layout_is_read_too(tmp_path):
    musique = write_foreign_musique(tmp_path)
    assert paragraphs_of([musique]) == ["Glass harpsichord: It was invented by Quillon Varbeck.", INVENTED_FACT]
    assert INVENTED_FACT not in index_of(MULTIHOP_FILES).search(INVENTED_QUESTION, 3)
    [search] = MultiHopQAEnv(top_k=3, data_files=[*MULTIHOP_FILES, str(musique)]).tools
    assert INVENTED_FACT in search.execute(query="Quillon Varbeck birthplace born")
    mixed = tmp_path / "mixed.jsonl"  # one file may hold both layouts, record by record
    mixed.write_text(write_foreign_hotpotqa(tmp_path).read_text() + musique.read_text())
    assert set(paragraphs_of([mixed])) == {
        INVENTED_FACT,
        "Glass harpsichord: It was invented by Quillon Varbeck.",
        "Glass harpsichord: The glass harpsichord was invented by Quillon Varbeck.",
    }
    # the bundled MuSiQue train records: 20 paragraphs each, searchable by their text
    records = [json.loads(line) for line in MULTIHOP_FULL_TRAIN.open(encoding="utf-8")]
    musique_records = [r for r in records if "paragraphs" in r]
    first = musique_records[0]
    assert len(musique_records) == 497 and len(first["paragraphs"]) == 20
    supporting = next(p for p in first["paragraphs"] if p["is_supporting"])
    paragraph = f"{supporting['title']}: {supporting['paragraph_text'].strip()}"
    assert paragraph in paragraphs_of([MULTIHOP_FULL_TRAIN])
    assert paragraph in index_of([MULTIHOP_FULL_TRAIN]).search(supporting["paragraph_text"], 3)


def test_a_musique_file_given_as_data_is_searched_and_scored(tmp_path):
    """What `agentrl eval --data <a MuSiQue file>` builds (the model aside): its paragraphs, its golds."""
    from agentrl.contract.config import load_config, resolve_paths
    from agentrl.contract.tasks import load_tasks
    from agentrl.environment.loader import config_env_factory

    recipe = RECIPES / "multihop" / "multihop_grpo.agentrl.yaml"
    config = resolve_paths(load_config(recipe), recipe.parent)
    musique = write_foreign_musique(tmp_path)
    [task] = load_tasks(str(musique), None)
    make_env = config_env_factory(config, str(musique), args={**config.env.args, "baseline": "naive-rag"})
    try:
        env = make_env()
        assert INVENTED_FACT in env.reset(task)[-1]["content"]  # naive RAG retrieved the --data file's paragraph
        assert env.score("Answer: Zlatno, Moravia").breakdown["em"] == 1.0  # an alias is a gold
        assert env.score("Answer: Zlatno").breakdown == {
            "em": 1.0,
            "f1": 1.0,
            "substring": 1.0,
            "answered": 1.0,
            "retrieved_answer": 1.0,
        }
    finally:
        make_env.close()


def test_musique_answer_aliases_are_golds_for_exact_match_and_f1():
    records = [json.loads(line) for line in MULTIHOP_FULL_TRAIN.open(encoding="utf-8")]
    hall = next(r for r in records if r["answer"] == "G. Stanley Hall")
    assert golds_of(hall) == ["G. Stanley Hall", "Stanley Hall"]
    assert golds_of({"question": "q", "answer": "yes"}) == ["yes"]  # HotpotQA, 2WikiMultihopQA: the answer alone
    assert golds_of({"answer": "US", "answer_aliases": ["US", "America"]}) == ["US", "America"]  # each once
    dollar = next(r for r in records if r["answer"] == "Hong Kong dollar")
    assert "$" in dollar["answer_aliases"] and "$" not in golds_of(dollar)  # it would match an empty answer
    env = MultiHopQAEnv(top_k=2, data_files=MULTIHOP_FILES)
    env.reset(hall)
    assert f1_score("Stanley Hall", "G. Stanley Hall") == pytest.approx(0.8)  # against the answer alone
    # the maximum over the answer and its aliases (MuSiQue's evaluation); substring match takes the answer alone
    assert env.score("Answer: Stanley Hall").breakdown == {
        "em": 1.0,
        "f1": 1.0,
        "substring": 0.0,
        "answered": 1.0,
        "retrieved_answer": 0.0,
    }
    assert env.score("Answer: Stanley Hall").reward == 1.0
    assert env.score("Answer: G. Stanley Hall").breakdown["substring"] == 1.0
    assert env.score("Answer: Hall").reward == pytest.approx(2 / 3)  # the best F1: against "Stanley Hall"
    # a two-letter alias (MuSiQue gives "in" for "the Finance Minister of India") counts for exact match and F1
    # as MuSiQue's evaluation counts it, but never as a substring, which it is of almost any text
    india = next(r for r in records if "paragraphs" in r and "in" in r["answer_aliases"])
    env.reset(india)
    assert env.score("Answer: in").breakdown["em"] == 1.0
    assert env.score("Answer: Berlin").breakdown == {
        "em": 0.0,
        "f1": 0.0,
        "substring": 0.0,
        "answered": 1.0,
        "retrieved_answer": 0.0,
    }
    found = ToolCallOutcome(id="c", name="search", arguments={"query": "q"}, raw="", result=["Berlin: in Germany."])
    assert env.step("", [found]).reward == 0.0  # "in" occurs in the passage, the answer does not
    with pytest.raises(ValueError, match="answer_aliases is not a list of strings"):
        env.reset({"question": "q", "answer": "a", "answer_aliases": "b"})


@pytest.mark.parametrize(
    "record, message",
    [
        ({"question": "What is 2 + 2?", "answer": "4"}, 'has no "context" paragraphs'),
        ({"question": "q", "answer": "a", "context": []}, 'has no "context" paragraphs'),
        ({"question": "q", "answer": "a", "context": [["title only"]]}, r"not \[title, \[sentence, ...\]\]"),
        (
            {"question": "q", "answer": "a", "context": {"title": ["t"], "sentences": []}},
            "not lists of the same length",
        ),
        ({"question": "q", "answer": "a", "paragraphs": []}, 'has no "context" paragraphs and no "paragraphs"'),
        (
            {"question": "q", "answer": "a", "paragraphs": [{"title": "t", "text": "s."}]},
            r"a paragraphs entry is not \{title, paragraph_text\} \(MuSiQue layout",
        ),
        (["q", "a"], 'has no "context" paragraphs and no "paragraphs"'),
    ],
)
def test_a_data_file_without_context_is_an_error_naming_it(tmp_path, record, message):
    """A record in no known layout (HotpotQA's `context`, its Hugging Face export, MuSiQue's `paragraphs`)."""
    plain = tmp_path / "plain_qa.jsonl"
    plain.write_text(
        json.dumps({"question": "q", "answer": "a", "context": [["t", ["s."]]]}) + "\n" + json.dumps(record) + "\n"
    )
    with pytest.raises(ValueError, match=f"{plain}:2: .*{message}"):
        MultiHopQAEnv(data_files=[*MULTIHOP_FILES, str(plain)])


def test_the_eval_env_gets_the_data_files_in_use(tmp_path):
    from agentrl.contract.config import load_config, resolve_paths
    from agentrl.environment.loader import data_files_in_use, env_factory, load_env_class

    recipe = RECIPES / "multihop" / "multihop_grpo.agentrl.yaml"
    config = resolve_paths(load_config(recipe), recipe.parent)
    foreign = write_foreign_hotpotqa(tmp_path)
    assert data_files_in_use(config, str(foreign)) == [*MULTIHOP_FILES, str(foreign)]
    assert data_files_in_use(config, config.data.eval) == list(MULTIHOP_FILES)  # each file once
    make_env = env_factory(
        load_env_class(config.env.module, config.env.class_name),
        config.env.args,
        data_files_in_use(config, str(foreign)),
    )
    assert INVENTED_FACT in make_env().index.paragraphs
    with pytest.raises(ValueError, match="env.args.data_files: agentrl passes MultiHopQAEnv"):
        env_factory(MultiHopQAEnv, {"data_files": ["x.jsonl"]}, MULTIHOP_FILES)
    # an env that does not ask for data_files is built from its env.args alone
    assert env_factory(GSM8KCalculatorEnv, {}, MULTIHOP_FILES)().args == {}


def test_multihop_env_breakdown_and_naive_rag():
    env = MultiHopQAEnv(top_k=2, data_files=MULTIHOP_FILES)
    env.reset({"question": "Were Scott Derrickson and Ed Wood of the same nationality?", "answer": "yes"})
    score = env.score("They were both American.\nAnswer: yes")
    assert score.breakdown == {"em": 1.0, "f1": 1.0, "substring": 1.0, "answered": 1.0, "retrieved_answer": 0.0}
    rag = MultiHopQAEnv(top_k=2, baseline="naive-rag", data_files=MULTIHOP_FILES)
    messages = rag.reset({"question": "Who directed the film about Ed Wood?", "answer": "Tim Burton"})
    assert rag.tools == [] and "Passages:" in messages[1]["content"]
    retrieved = "Tim Burton" in messages[1]["content"]
    assert rag.score("Answer: Tim Burton").breakdown["retrieved_answer"] == float(retrieved)  # the one retrieval


def test_multihop_exact_match_reward_earns_nothing_for_a_hedged_answer():
    env = MultiHopQAEnv(top_k=2, answer_reward="em", data_files=MULTIHOP_FILES)
    env.reset({"question": "Which film came out first, Ed Wood or Big Fish?", "answer": "Ed Wood"})
    assert env.score("Answer: Ed Wood").reward == 1.0
    hedged = env.score("Answer: Ed Wood or Big Fish")
    assert hedged.reward == 0.0 and hedged.breakdown["f1"] == pytest.approx(4 / 7)  # F1 would pay for naming both
    with pytest.raises(ValueError, match="answer_reward"):
        MultiHopQAEnv(answer_reward="bleu", data_files=MULTIHOP_FILES)


def test_multihop_reward_is_the_stated_answers_f1_plus_one_retrieval_reward():
    env = MultiHopQAEnv(top_k=2, data_files=MULTIHOP_FILES)
    env.reset({"question": "Who directed Ed Wood?", "answer": "Tim Burton"})
    assert env.score("Answer: Tim Burton").reward == 1.0
    assert env.score("Answer: Burton").reward == pytest.approx(2 / 3)  # token F1, no bonus for the format
    assert env.score("Answer: Scott Derrickson").reward == 0.0
    unstated = env.score("Ed Wood was directed by Tim Burton.")  # no Answer: line, nothing answered
    assert unstated.reward == 0.0 and unstated.breakdown["answered"] == 0.0 and unstated.final_answer is None

    def search(*passages, error=None):
        return ToolCallOutcome(
            id="c",
            name="search",
            arguments={"query": "q"},
            raw="<search>q</search>",
            result=None if error else list(passages),
            error=error,
        )

    assert env.step("", [search("Ed Wood: a 1994 film.")]).reward == 0.0  # searching alone earns nothing
    assert env.step("", [search(error="unclosed <search>")]).reward == 0.0  # and a failed call costs nothing
    assert env.step("", [search("Ed Wood: a 1994 film directed by Tim Burton.")]).reward == 0.1
    assert env.step("", [search("Tim Burton: director.")]).reward == 0.0  # once per episode
    assert env.score("Answer: Tim Burton").breakdown["retrieved_answer"] == 1.0
    env.reset({"question": "Were Scott Derrickson and Ed Wood of the same nationality?", "answer": "yes"})
    assert env.step("", [search("Yes: a rock band.")]).reward == 0.0  # a yes/no answer is in any passage
    assert env.score("Answer: yes").breakdown == {
        "em": 1.0,
        "f1": 1.0,
        "substring": 1.0,
        "answered": 1.0,
        "retrieved_answer": 0.0,
    }


def test_multihop_worked_example_is_shown_as_chat_turns_in_the_tag_format():
    task = {"question": "Were Scott Derrickson and Ed Wood of the same nationality?", "answer": "yes"}
    env = MultiHopQAEnv(top_k=2, examples=1, data_files=MULTIHOP_FILES)
    roles = [m["role"] for m in env.reset(task)]
    assert roles == ["system", "user", "assistant", "tool", "assistant", "tool", "assistant", "user"]
    messages = env.reset(task)
    assert (
        messages[2]["content"] == "<search>Eiffel Tower designer</search>"
        and messages[-2]["content"] == "Answer: Dijon"
    )
    assert messages[-1]["content"] == task["question"]
    parsed = get_format("tags").parse(messages[2]["content"], "x", schemas_by_name([t.schema() for t in env.tools]))
    assert [(c.name, c.arguments) for c in parsed.calls] == [("search", {"query": "Eiffel Tower designer"})]
    rag = MultiHopQAEnv(top_k=2, examples=1, baseline="naive-rag", data_files=MULTIHOP_FILES).reset(task)
    assert [m["role"] for m in rag] == ["system", "user", "assistant", "user"]
    assert "Gustave Eiffel" in rag[1]["content"] and rag[2]["content"] == "Answer: Dijon"
    assert "Passages:" in rag[3]["content"] and rag[3]["content"].endswith(task["question"])
    corpus = "\n".join(index_of(MULTIHOP_FILES).paragraphs)
    assert "Eiffel" not in corpus and "Dijon" not in corpus  # the example is no training or held-out fact
    with pytest.raises(ValueError, match="examples must be 0 or 1"):
        MultiHopQAEnv(examples=2, data_files=MULTIHOP_FILES)


def test_multihop_first_search_with_the_question_is_made_for_the_agent_as_naive_rag_retrieves():
    task = {"question": "Who directed the film about Ed Wood?", "answer": "Tim Burton"}
    env = MultiHopQAEnv(top_k=2, examples=1, first_search="question", data_files=MULTIHOP_FILES)
    messages = env.reset(task)
    roles = [m["role"] for m in messages]
    assert roles == [
        "system",
        "user",
        "assistant",
        "tool",
        "assistant",
        "tool",
        "assistant",
        "user",
        "assistant",
        "tool",
    ]
    assert "made for you" in messages[0]["content"]
    # the worked example's first search is the example's question too, as the env makes it
    assert messages[2]["content"] == f"<search>{EXAMPLE_QUESTION}</search>"
    assert messages[4]["content"] == "<search>Gustave Eiffel birthplace</search>"
    # the prompt ends with the search made for the agent, written as the agent writes one, and its passages: the ones
    # Naive RAG puts in its prompt, from the same retrieval
    assert messages[-3]["content"] == task["question"]
    parsed = get_format("tags").parse(messages[-2]["content"], "x", schemas_by_name([t.schema() for t in env.tools]))
    assert [(c.name, c.arguments) for c in parsed.calls] == [("search", {"query": task["question"]})]
    passages = index_of(MULTIHOP_FILES).search(task["question"], 2)
    assert messages[-1]["content"] == "\n".join(passages)
    rag = MultiHopQAEnv(top_k=2, baseline="naive-rag", first_search="question", data_files=MULTIHOP_FILES)
    rag_messages = rag.reset(task)
    assert rag.tools == [] and rag_messages[-1]["content"] == MultiHopQAEnv.naive_rag_question(
        task["question"], passages
    )
    # the agent keeps its search tool, and the retrieval made for it counts for retrieved_answer as Naive RAG's does
    assert [t.name for t in env.tools] == ["search"]
    retrieved = any("Tim Burton" in p for p in passages)
    assert env.score("Answer: Tim Burton").breakdown["retrieved_answer"] == float(retrieved)
    assert rag.score("Answer: Tim Burton").breakdown["retrieved_answer"] == float(retrieved)
    # the agent's own later search earns the retrieval reward only when the first retrieval missed the answer
    found = ToolCallOutcome(id="c", name="search", arguments={"query": "q"}, raw="", result=["Tim Burton: director."])
    assert env.step("", [found]).reward == (0.0 if retrieved else 0.1)
    # off by default: the prompt ends with the question
    assert MultiHopQAEnv(top_k=2, data_files=MULTIHOP_FILES).reset(task)[-1] == {
        "role": "user",
        "content": task["question"],
    }
    with pytest.raises(ValueError, match="first_search must be one of"):
        MultiHopQAEnv(first_search="title", data_files=MULTIHOP_FILES)


def test_multihop_first_search_in_prompt_shows_naive_rags_passages_and_gives_the_tool():
    task = {"question": "Who directed the film about Ed Wood?", "answer": "Tim Burton"}
    env = MultiHopQAEnv(top_k=2, examples=1, first_search="question-in-prompt", data_files=MULTIHOP_FILES)
    messages = env.reset(task)
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "tool", "assistant", "user"]
    assert "Gustave Eiffel" in messages[1]["content"] and "Dijon" not in messages[1]["content"]
    assert messages[2]["content"] == "<search>Gustave Eiffel birthplace</search>"
    passages = index_of(MULTIHOP_FILES).search(task["question"], 2)
    assert messages[-1]["content"] == MultiHopQAEnv.naive_rag_question(task["question"], passages)
    assert [t.name for t in env.tools] == ["search"]
    retrieved = any("Tim Burton" in p for p in passages)
    assert env.score("Answer: Tim Burton").breakdown["retrieved_answer"] == float(retrieved)


def test_multihop_splits_hold_150_heldout_questions_never_trained_on():
    def questions(name: str) -> list[str]:
        return [json.loads(line)["question"] for line in (MULTIHOP_DATA / name).open()]

    train, heldout = questions("train.jsonl"), questions("heldout.jsonl")
    assert len(heldout) == 150 and len(train) == 117 and not set(train) & set(heldout)
    heldout_bytes = (MULTIHOP_DATA / "heldout.jsonl").read_bytes()  # the held-out set results/ reports, unchanged
    assert hashlib.sha256(heldout_bytes).hexdigest() == (
        "56384ae8ec4207724debaeee2f01a40fe1220001a7d7f6092946a47450f58247"
    )


def test_the_full_training_split_holds_no_heldout_or_dev_question():
    def ids_and_questions(path: Path) -> tuple[set[str], set[str], int]:
        records = [json.loads(line) for line in path.open(encoding="utf-8")]
        ids = {str(r["_id"] if "_id" in r else r["id"]) for r in records}
        return ids, {normalize_answer(r["question"]) for r in records}, len(records)

    train_ids, train_questions, n = ids_and_questions(MULTIHOP_FULL_TRAIN)
    assert n == len(train_ids) == len(train_questions) == 2195  # HotpotQA 599, 2WikiMultihopQA 1,099, MuSiQue 497
    for name in ("heldout.jsonl", "train.jsonl", "hotpotqa_dev_distractor.jsonl", "2wikimultihopqa_dev.jsonl"):
        ids, questions, _ = ids_and_questions(MULTIHOP_DATA / name)
        assert not ids & train_ids, name
        assert not questions & train_questions, name
    # the full config's corpus: data.train's and data.eval's distinct paragraphs
    assert len(paragraphs_of([MULTIHOP_FULL_TRAIN, MULTIHOP_DATA / "heldout.jsonl"])) == 21184


@pytest.mark.parametrize(
    "recipe",
    [
        "arithmetic/arithmetic_grpo.agentrl.yaml",
        "gsm8k/gsm8k_grpo.agentrl.yaml",
        "multihop/multihop_grpo.agentrl.yaml",
        "multihop/multihop_ppo.agentrl.yaml",
        "multihop/multihop_full_grpo.agentrl.yaml",
        "multihop/multihop_full_seeded_grpo.agentrl.yaml",
        "multihop/multihop_full_seeded_prompt_grpo.agentrl.yaml",
        "multihop/multihop_warm_grpo.agentrl.yaml",
    ],
)
def test_recipe_envs_pass_env_check(recipe):
    done = subprocess.run(
        [sys.executable, "-m", "agentrl.cli", "env", "check", str(RECIPES / recipe), "--json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "status finished" in json.loads(done.stdout)[-1]["message"]


def test_eval_prints_one_json_line_of_metrics(tmp_path):
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "agentrl.cli",
            "eval",
            str(RECIPES / "multihop" / "multihop_grpo.agentrl.yaml"),
            "--set",
            "model.path=tiny",
            "--set",
            "rollout.max_new_tokens=8",
            "--limit",
            "2",
            "--runs-dir",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    metrics = json.loads(done.stdout.strip().splitlines()[-1])
    assert metrics["n"] == 2 and set(metrics) == {"n", "reward", "em", "f1", "substring"}
    [run_dir] = list(tmp_path.iterdir())
    assert len((run_dir / "trajectories" / "step-000000.trajectories.jsonl").read_text().splitlines()) == 2


def test_eval_on_a_foreign_file_retrieves_from_its_paragraphs(tmp_path):
    foreign = write_foreign_hotpotqa(tmp_path)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "agentrl.cli",
            "eval",
            str(RECIPES / "multihop" / "multihop_grpo.agentrl.yaml"),
            "--data",
            str(foreign),
            "--baseline",
            "naive-rag",
            "--set",
            "model.path=tiny",
            "--set",
            "rollout.max_new_tokens=4",
            "--runs-dir",
            str(tmp_path / "runs"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    [run_dir] = list((tmp_path / "runs").iterdir())
    [record] = [json.loads(line) for line in (run_dir / "trajectories" / "step-000000.trajectories.jsonl").open()]
    assert INVENTED_FACT in record["prompt"][-1]["content"]  # naive RAG retrieved the --data file's paragraph


def test_eval_names_a_data_file_without_context(tmp_path):
    plain = tmp_path / "plain_qa.jsonl"
    plain.write_text(json.dumps({"question": "What is 2 + 2?", "answer": "4"}) + "\n")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "agentrl.cli",
            "eval",
            str(RECIPES / "multihop" / "multihop_grpo.agentrl.yaml"),
            "--data",
            str(plain),
            "--set",
            "model.path=tiny",
            "--runs-dir",
            str(tmp_path / "runs"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 2 and f"agentrl eval: {plain}:1: the record has no" in done.stderr
    assert not (tmp_path / "runs").exists()  # it failed before loading a model or creating a run


def test_the_packaged_default_model_loads_and_chats(tmp_path, monkeypatch):
    import torch
    from agentrl.models.smollm2 import load_smollm2

    monkeypatch.setenv("AGENTRL_CACHE", str(tmp_path))  # from the GGUF, then from the cache
    model, tokenizer = load_smollm2(torch.float32)
    assert sum(p.numel() for p in model.parameters()) > 100e6
    assert (tmp_path / "smollm2-135m-instruct-q4_1" / "config.json").is_file()
    ids = tokenizer.apply_chat_template(
        [{"role": "user", "content": "Say hello."}], add_generation_prompt=True, return_tensors="pt", return_dict=True
    )
    out = model.generate(**ids, max_new_tokens=8, do_sample=False)
    assert tokenizer.decode(out[0, ids["input_ids"].shape[1] :], skip_special_tokens=True).strip()
    again, _ = load_smollm2(torch.float32)
    assert torch.equal(next(again.parameters()), next(model.parameters()))


def test_arithmetic_splits_are_reproducible_and_disjoint(tmp_path):
    arithmetic_tasks.write_splits(tmp_path)
    for name in ("train.jsonl", "heldout.jsonl"):
        assert (tmp_path / name).read_bytes() == (arithmetic_tasks.DATA / name).read_bytes(), name
    train = [json.loads(line) for line in (tmp_path / "train.jsonl").open()]
    heldout = [json.loads(line) for line in (tmp_path / "heldout.jsonl").open()]
    assert len(heldout) >= 100 and not {t["question"] for t in train} & {t["question"] for t in heldout}
    assert {t["op"] for t in heldout} == {"*", "+", "-", "/"}
    for task in heldout:
        a, b = (int(n) for n in __import__("re").findall(r"\d+", task["question"])[:2])
        assert {"*": a * b, "+": a + b, "-": a - b, "/": a / b}[task["op"]] == task["answer"]


def test_arithmetic_reward_is_the_correct_answer_only():
    env = ArithmeticEnv(examples=1)
    messages = env.reset({"question": "A crate holds 186 bottles. How many bottles are in 58 crates?", "answer": 10788})
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "tool", "assistant", "user"]
    assert messages[2]["content"] == "<calculator>24 * 37</calculator>"
    assert env.score("Answer: 10788").reward == 1.0
    assert env.score("Answer: 10,788.").breakdown["accuracy"] == 1.0
    for wrong in ("Answer: 10787", "10788", "The answer is 10788", ""):
        assert env.score(wrong).reward == 0.0, wrong  # no format bonus: only solving the problem earns reward
    no_tool = ArithmeticEnv(examples=1, baseline="no-tool")
    assert no_tool.tools == [] and "tool" not in [m["role"] for m in no_tool.reset({"question": "q", "answer": 1})]
    with pytest.raises(ValueError, match="known: no-tool"):
        ArithmeticEnv(baseline="naive-rag")


def test_the_demo_recipe_earns_reward_with_the_packaged_model(tmp_path):
    """The recipe smoke test: the real default model, greedy, on a few training problems, calls the
    calculator and solves some of them, so GRPO has a signal from the first step."""
    records = rollout_only_records(RECIPES / "arithmetic" / "arithmetic_grpo.agentrl.yaml", 16, tmp_path)
    assert len(records) == 16
    assert sum(r["reward_breakdown"]["tool_use"] for r in records) >= 4
    assert sum(r["reward"] for r in records) >= 1


def test_demo_ends_with_its_json_line_and_learning_curve(tmp_path):
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "agentrl.cli",
            "demo",
            "--set",
            "model.path=tiny",
            "--set",
            "rollout.max_context=2000",
            "--set",
            "rollout.group_size=2",
            "--set",
            "train.batch_size=4",
            "--set",
            "train.micro_batch_size=4",
            "--steps",
            "2",
            "--eval-limit",
            "4",
            "--runs-dir",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    line = json.loads(done.stdout.strip().splitlines()[-1])
    assert set(line) >= {
        "recipe",
        "config",
        "run",
        "checkpoint",
        "n",
        "before",
        "after",
        "delta",
        "ci95",
        "train_wall_s",
        "learning_curve",
    }
    assert line["n"] == 4 and line["metric"] == "accuracy" and "accuracy" in line["before"]
    assert line["ci95"][0] <= line["delta"] <= line["ci95"][1]
    assert Path(line["learning_curve"]).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    evaluated = subprocess.run(
        [
            sys.executable,
            "-m",
            "agentrl.cli",
            "eval",
            line["config"],
            "--checkpoint",
            line["checkpoint"],
            "--data",
            str(RECIPES / "arithmetic" / "data" / "heldout.jsonl"),
            "--limit",
            "2",
            "--set",
            "model.path=tiny",
            "--set",
            "rollout.max_context=2000",
            "--runs-dir",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert evaluated.returncode == 0, evaluated.stderr
    assert json.loads(evaluated.stdout.strip().splitlines()[-1])["n"] == 2
