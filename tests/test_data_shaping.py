"""Data shaping declared in the case file (issue 24): published material runs without a hand-written prepare.py.

An ARC-style multiple-choice task (lettered choices, a few-shot block from a training file, the letter checked),
an MMLU-style one (an answer index as its letter, the first examples of the same file, never the row itself), a
GSM8K-style one (the answer taken by a pattern before an exact check, the reference's by ``extract``), and an
MT-bench-style one (questions joined to their references by question_id and filtered by category), each end to
end on the mock provider; ARC also through the openai SDK against the fake OpenAI-compatible server.
"""

from __future__ import annotations

import json
import re
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import Project
from harness.base import slots
from harness.base.errors import HarnessConfigError
from harness.base.fields import Fields
from harness.checks.transforms import NoMatch, parse_transform
from harness.llm.providers.mock import forget_mock_model, mock_model
from harness.loading.datasets import dataset_rows


def jsonl(rows: list[dict[str, Any]]) -> str:
    return "".join(json.dumps(row) + "\n" for row in rows)


def eval_of(project: Project, agent: str, case: str) -> dict[str, Any]:
    (path,) = project.work.glob(f"runs/*/{agent}/{case}/attempt-1.eval.json")
    return json.loads(path.read_text(encoding="utf-8"))


# --- the slot filters on their own ---------------------------------------------------------------------


def test_the_slot_filters_letter_number_and_quote_a_value() -> None:
    row = {"choices": ["Paris", "Lyon", 3], "answer": 2, "digits": "1", "q": 'say "hi"'}

    def render(template: str) -> Any:
        return slots.render(template, lambda name: slots.value_at_name(row, name))

    assert render("{choices|lettered}") == "A) Paris\nB) Lyon\nC) 3"
    assert render("{{ choices | numbered }}") == "1. Paris\n2. Lyon\n3. 3"
    assert render("One of {choices|letters}.") == "One of A, B, C."
    assert render("{answer|letter}") == "C" and render("{digits|letter}") == "B"
    assert render("{q|json}") == '"say \\"hi\\""' and render("{choices|json}") == '["Paris", "Lyon", 3]'
    # braces that are not slots stay text, and an unknown filter makes no slot (a loader refuses it)
    assert render('{"score": 1} \\d{2,3} {a|b}') == '{"score": 1} \\d{2,3} {a|b}'
    assert slots.slots_in("{choices|lettered} {x|bogus}") == ["choices"]
    assert slots.filter_problem("{choices|leterred}") == (
        "{choices|leterred} uses the filter 'leterred', which does not exist (filters: json, letter, lettered, "
        "letters, numbered)")
    with pytest.raises(slots.SlotFilterError, match=r"lettered takes a list, got 'say \"hi\"'"):
        render("{q|lettered}")
    with pytest.raises(slots.SlotFilterError, match="letter takes an index from 0 to 25"):
        render("{choices|letter}")


# --- the regex transform on its own --------------------------------------------------------------------


def regex_transform(raw: Any, tmp_path: Path) -> Any:
    return parse_transform(raw, Fields(tmp_path / "rubrics/gsm.yaml", "transform", tmp_path / "rubrics", tmp_path))


def test_a_regex_transform_takes_the_first_or_last_match_and_a_group(tmp_path: Path) -> None:
    answer = "12 apples, then #### 1,250 was wrong; #### -72"
    strict = regex_transform({"regex": r"#### (\-?[0-9\.\,]+)"}, tmp_path)
    assert strict.apply(answer) == "1,250"
    assert regex_transform({"regex": r"#### (\-?[0-9\.\,]+)", "match": "last"}, tmp_path).apply(answer) == "-72"
    assert regex_transform({"regex": r"(?P<n>-?\d+) apples", "group": "n"}, tmp_path).apply(answer) == "12"
    assert regex_transform({"regex": r"#### -?\d+", "group": 0, "match": "last"}, tmp_path).apply(answer) == "#### -72"
    flexible = regex_transform({"regex": r"(-?[$0-9.,]{2,})|(-?[0-9]+)", "match": "last"}, tmp_path)
    assert flexible.apply("it is 7") == "7"  # the group that took part, as lm-eval's flexible-extract
    missed = strict.apply("I think it is seventy-two.")
    assert missed == "" and isinstance(missed, NoMatch)
    assert missed.why == "the transform's regex '#### (\\\\-?[0-9\\\\.\\\\,]+)' did not match the artifact"


@pytest.mark.parametrize(("raw", "field", "problem"), [
    ({"regex": "#### (\\d+)", "group": 2}, "transform.group", "the pattern has 1 group(s), not 2"),
    ({"regex": "#### (\\d+)", "group": "n"}, "transform.group", "the pattern has no group named 'n'"),
    ({"regex": "#### (\\d+)", "match": "middle"}, "transform.match", "unknown match 'middle'"),
    ({"regex": "(a+)+$"}, "transform.regex", "can backtrack without bound"),
    ({"regex": "#### (\\d+"}, "transform.regex", "invalid regular expression"),
    ({"regex": "x", "json_path": "a"}, "transform.regex", "belongs to a regex transform"),
])
def test_a_malformed_regex_transform_is_a_load_error(tmp_path: Path, raw: Any, field: str, problem: str) -> None:
    with pytest.raises(HarnessConfigError) as info:
        regex_transform(raw, tmp_path)
    assert info.value.field == field and problem in info.value.problem and info.value.fix


# --- ARC: lettered choices, a few-shot block from the training file, the letter checked ----------------

ARC_TEST = [
    {"id": "arc-1", "question": "Which gas do plants take in to make food?",
     "choices": ["oxygen", "carbon dioxide", "nitrogen", "helium"], "answerKey": "B"},
    {"id": "arc-2", "question": "What melts ice fastest?", "choices": ["salt", "sand", "sugar"], "answerKey": "A"},
    {"id": "arc-3", "question": "Which planet is closest to the Sun?",
     "choices": ["Venus", "Earth", "Mars", "Mercury"], "answerKey": "D"},
    {"id": "arc-4", "question": "What do bees make?", "choices": ["silk", "honey", "wax paper"], "answerKey": "B"},
]
ARC_TRAIN = [{"id": f"train-{n}", "question": f"Training question {n}?", "choices": [f"right {n}", f"wrong {n}"],
              "answerKey": "A"} for n in range(1, 9)]
# What the solver believes each question's answer is (arc-4: wrongly), as the choice's text: it must find the
# letter the prompt gives that text.
BELIEFS = {"Which gas do plants take in to make food?": "carbon dioxide", "What melts ice fastest?": "salt",
           "Which planet is closest to the Sun?": "Mercury", "What do bees make?": "silk"}

ARC_SOLVER = '''\
"""The project's scripted model: answers a multiple-choice prompt with the letter of the choice it believes."""
import json
import re

from harness.llm.providers.mock import mock_model

BELIEFS = {beliefs!r}


def solve(prompt):
    with open("prompts-seen.jsonl", "a", encoding="utf-8") as seen:
        seen.write(json.dumps(prompt) + "\\n")
    asked = prompt.rsplit("Question: ", 1)[1]
    question = asked.splitlines()[0]
    letters = dict((text, letter) for letter, text in re.findall(r"(?m)^([A-Z])\\) (.*)$", asked))
    return letters.get(BELIEFS.get(question, ""), "Z")


@mock_model("arc-solver")
def arc_solver(request):
    return solve(next(m.text for m in reversed(request.messages) if m.role == "user"))
'''

ARC_PROMPT = """\
{fewshot}

Question: {question}
{choices|lettered}
Answer with one of {choices|letters}.
Answer:"""

ARC_CASES = """\
agent: arc
dataset:
  file: data/arc_test.jsonl
  id: "{id}"
  inputs: {question: "{question}", choices: "{choices}", fewshot: "{fewshot}"}
  expected: "{answerKey}"
  fewshot:
    file: data/arc_train.jsonl
    n: 3
    seed: 7
    template: "Question: {question}\\n{choices|lettered}\\nAnswer: {answerKey}"
"""


def arc_project(project: Project, model: str) -> None:
    project.write("conftest.py", ARC_SOLVER.format(beliefs=BELIEFS))
    project.write("suites/data/arc_test.jsonl", jsonl(ARC_TEST))
    project.write("suites/data/arc_train.jsonl", jsonl(ARC_TRAIN))
    project.write("suites/prompts/arc.txt", ARC_PROMPT)
    project.rubric("arc", """\
        metadata: {name: ARC, version: "1.0.0"}
        threshold: 1.0
        dimensions:
          correct: {weight: 1.0, description: The letter of the right choice, check: {equals: "{expected}"}}
        """)
    project.agents(f"agents:\n  arc:\n    rubric: arc\n    producer: {{template: prompts/arc.txt, model: {model}}}\n"
                   "    max_attempts: 1\n")
    project.cases("arc", ARC_CASES)


@pytest.fixture
def arc_solver_forgotten() -> Iterator[None]:
    yield
    forget_mock_model("arc-solver")


@pytest.mark.parametrize("provider", ["mock", "openai"])
def test_an_arc_task_with_lettered_choices_and_few_shot_examples_from_another_file(
        project: Project, request: pytest.FixtureRequest, arc_solver_forgotten: None, provider: str) -> None:
    model = "mock/arc-solver"
    if provider == "openai":
        from harness.testing.fake_openai import Reply

        server = request.getfixturevalue("fake_openai")
        solve: dict[str, Any] = {}
        exec(ARC_SOLVER.format(beliefs=BELIEFS).replace("@mock_model", "# "), solve)  # the same script, served
        server.responder = lambda body: Reply.text(solve["solve"](body["messages"][-1]["content"]))
        model = "openai/gpt-4.1-mini"
    arc_project(project, model)
    result = project.run("suites/", "-v", "-p", "no:randomly")
    result.assert_outcomes(passed=3, failed=1)
    result.stdout.fnmatch_lines(["*::arc-3 PASSED*", "*::arc-4 FAILED*"])
    assert "expected 'B', found 'A'" in result.stdout.str()  # silk is choice A
    prompts = [json.loads(line) for line in (project.root / "prompts-seen.jsonl").read_text().splitlines()]
    first = next(p for p in prompts if "Which gas do plants" in p)
    assert first.endswith("Question: Which gas do plants take in to make food?\nA) oxygen\nB) carbon dioxide\n"
                          "C) nitrogen\nD) helium\nAnswer with one of A, B, C, D.\nAnswer:")
    examples = re.findall(r"Question: (Training question \d\?)\nA\) right \d\nB\) wrong \d\nAnswer: A\n", first)
    assert len(examples) == 3 and len(set(examples)) == 3  # three examples, each lettered, a blank line apart
    block = first.rsplit("\n\nQuestion: ", 1)[0]
    assert not any(row["question"] in block for row in ARC_TEST)  # the examples come from the training file


def test_an_arc_task_collects_the_same_examples_on_every_worker(project: Project) -> None:
    arc_project(project, "mock/arc-solver")
    seen = project.root / "prompts-seen.jsonl"
    project.run("suites/", "-n", "2", "--harness-cache", "off", subprocess=True).assert_outcomes(passed=3, failed=1)
    on_workers = sorted(seen.read_text().splitlines())
    seen.unlink()
    project.run("suites/", "--harness-cache", "off", subprocess=True).assert_outcomes(passed=3, failed=1)
    assert sorted(seen.read_text().splitlines()) == on_workers  # the seeded draw: the same prompts everywhere


# --- MMLU: an answer index as its letter, the first examples of the same file, never the row itself ------

MMLU = [{"question": f"Question number {n}?", "choices": ["w", "x", "y", "z"], "answer": n % 4} for n in range(1, 5)]


def test_an_answer_index_becomes_its_letter_and_few_shot_examples_never_include_the_row(tmp_path: Path) -> None:
    (tmp_path / "mmlu.jsonl").write_text(jsonl(MMLU))
    raw = {"file": "mmlu.jsonl", "inputs": {"prompt": "{fewshot}\n\n{question}\n{choices|lettered}\nAnswer:"},
           "expected": "{answer|letter}",
           "fewshot": {"file": "mmlu.jsonl", "n": 2, "pick": "first",
                       "template": "{question}\n{choices|lettered}\nAnswer: {answer|letter}"}}
    rows = dict(dataset_rows(raw, Fields.of(tmp_path / "mmlu.cases.yaml", "dataset"), tmp_path, [tmp_path]))
    assert [rows[n]["expected"] for n in rows] == ["B", "C", "D", "A"]
    example = r"Question number (\d)\?\nA\) w\nB\) x\nC\) y\nD\) z\nAnswer: [A-D]"
    shots = {n: re.findall(example, row["inputs"]["prompt"]) for n, row in rows.items()}
    assert shots == {1: ["2", "3"], 2: ["1", "3"], 3: ["1", "2"], 4: ["1", "2"]}  # the first two, the row skipped
    raw["fewshot"] = {**raw["fewshot"], "pick": "random", "seed": 3}
    drawn = [dict(dataset_rows(raw, Fields.of(tmp_path / "mmlu.cases.yaml", "dataset"), tmp_path, [tmp_path]))
             for _ in range(2)]
    assert drawn[0] == drawn[1]  # seeded: the same examples every time
    for number, row in drawn[0].items():
        examples = row["inputs"]["prompt"].rsplit("\n\n", 1)[0]
        assert examples.count("Answer: ") == 2 and f"Question number {number}?" not in examples
    limited = dict(dataset_rows({**raw, "limit": 2}, Fields.of(tmp_path / "mmlu.cases.yaml", "dataset"), tmp_path,
                                [tmp_path]))
    assert limited[2] == drawn[0][2]  # a row's examples do not depend on which other rows are chosen


def test_a_hugging_face_dataset_is_shaped_as_a_file_is_with_few_shot_examples_from_its_dev_split(
        tmp_path: Path) -> None:
    datasets = pytest.importorskip("datasets")
    subjects = [{**row, "subject": "astronomy" if n % 2 else "law"} for n, row in enumerate(MMLU * 3, 1)]
    dev = [{"question": f"Dev {n}?", "choices": ["w", "x"], "answer": 1, "subject": "astronomy"} for n in (1, 2, 3)]
    datasets.DatasetDict(test=datasets.Dataset.from_list(subjects), dev=datasets.Dataset.from_list(dev)).save_to_disk(
        str(tmp_path / "mmlu"))
    (tmp_path / "test.jsonl").write_text(jsonl(subjects))
    (tmp_path / "dev.jsonl").write_text(jsonl(dev))
    shaping = {"filter": {"subject": "astronomy"}, "sample": 3, "seed": 2,
               "inputs": {"prompt": "{fewshot}\n{question}"}, "expected": "{answer|letter}"}
    shots = {"n": 2, "pick": "first", "template": "{question} {answer|letter}"}
    place = Fields.of(tmp_path / "mmlu.cases.yaml", "dataset")
    from_hf = list(dataset_rows({"hf": "mmlu", "split": "test", **shaping, "fewshot": {"split": "dev", **shots}},
                                place, tmp_path, [tmp_path]))
    from_files = list(dataset_rows({"file": "test.jsonl", **shaping, "fewshot": {"file": "dev.jsonl", **shots}},
                                   place, tmp_path, [tmp_path]))
    assert from_hf == from_files and len(from_hf) == 3
    assert all(number % 2 for number, _ in from_hf)  # astronomy only, numbered by their place in the split
    assert from_hf[0][1]["inputs"]["prompt"].startswith("Dev 1? B\n\nDev 2? B\n")
    with pytest.raises(HarnessConfigError, match=r"dataset.fewshot.split: mmlu has no split 'val' \(fix: use one "):
        list(dataset_rows({"hf": "mmlu", "split": "test", "fewshot": {"split": "val", **shots}}, place, tmp_path,
                          [tmp_path]))


# --- GSM8K: the answer taken by a pattern before an exact check -------------------------------------------

GSM8K = [
    {"question": "Natalia sold 48 clips in April and half as many in May. How many in all?",
     "answer": "In May she sold 48/2 = <<48/2=24>>24 clips.\nIn all 48+24 = <<48+24=72>>72 clips.\n#### 72"},
    {"question": "Weng earns $12 an hour. How much for 50 minutes?",
     "answer": "Per minute 12/60 = $<<12/60=0.2>>0.2.\nFor 50 minutes 0.2 x 50 = $<<0.2*50=10>>10.\n#### 10"},
    {"question": "Betty has half of the $100 she needs; her parents give $15 and grandparents twice that. "
                 "How much more does she need?", "answer": "She has 100/2 = 50.\n50+15+30 = 95.\n#### 5"},
    {"question": "James writes a 3-page letter to 2 friends twice a week. How many pages a year?",
     "answer": "3 x 2 = 6 pages each time.\n6 x 2 = 12 a week.\n12 x 52 = 624.\n#### 624"},
]
# The scripted model's answers: right, right, wrong, and one without the "####" line.
GSM8K_ANSWERS = {"Natalia": "48 + 24 = 72\n#### 72", "Weng": "0.2 * 50\n#### 10", "Betty": "She needs 50.\n#### 50",
                 "James": "I believe it is 624 pages."}


@pytest.fixture
def gsm8k_model() -> Iterator[list[str]]:
    asked: list[str] = []

    def answer(request: Any) -> str:
        prompt = next(m.text for m in reversed(request.messages) if m.role == "user")
        asked.append(prompt)
        return next(text for name, text in GSM8K_ANSWERS.items() if name in prompt)

    mock_model("gsm8k")(answer)
    yield asked
    forget_mock_model("gsm8k")


def test_a_gsm8k_task_whose_answer_a_pattern_takes_before_an_exact_check(project: Project,
                                                                          gsm8k_model: list[str]) -> None:
    project.write("suites/data/gsm8k.jsonl", jsonl(GSM8K))
    project.write("suites/prompts/gsm8k.txt", "Solve it and end with a line '#### <number>'.\n\n{question}")
    project.rubric("gsm8k", r"""
        metadata: {name: GSM8K, version: "1.0.0"}
        threshold: 1.0
        transform: {regex: '#### (\-?[0-9\.\,]+)', match: first, group: 1}
        dimensions:
          exact: {weight: 1.0, description: The final number, check: {equals: "{expected}"}}
        """)
    project.agents("agents:\n  gsm8k:\n    rubric: gsm8k\n"
                   "    producer: {template: prompts/gsm8k.txt, model: mock/gsm8k}\n    max_attempts: 1\n")
    project.cases("gsm8k", r"""
        agent: gsm8k
        dataset:
          file: data/gsm8k.jsonl
          id: "gsm-{_row}"
          inputs: {question: "{question}"}
          extract: {final: {from: answer, regex: '#### (\-?[0-9\.\,]+)'}}
          expected: "{final}"
        """)
    result = project.run("suites/", "-v", "-p", "no:randomly")
    result.assert_outcomes(passed=2, failed=2)
    result.stdout.fnmatch_lines(["*::gsm-1 PASSED*", "*::gsm-2 PASSED*", "*::gsm-3 FAILED*", "*::gsm-4 FAILED*"])
    assert len(gsm8k_model) == 4 and not any("#### 72" in prompt for prompt in gsm8k_model)  # nor the reference
    wrong, unreadable = eval_of(project, "gsm8k", "gsm-3"), eval_of(project, "gsm8k", "gsm-4")
    assert wrong["dimensionScores"]["exact"]["score"] == 0
    assert "expected '5', found '50'" in wrong["dimensionScores"]["exact"]["reason"]
    reason = unreadable["dimensionScores"]["exact"]["reason"]
    assert reason.startswith("the transform's regex '#### (\\\\-?[0-9\\\\.\\\\,]+)' did not match the "
                             "artifact; "), reason
    assert "Traceback" not in result.stdout.str()


# --- MT-bench: questions joined to their references by question_id, filtered by category ----------------

MT_QUESTIONS = [
    {"question_id": 81, "category": "writing", "turns": ["Compose a travel blog post about Hawaii.", "Rewrite it."]},
    {"question_id": 82, "category": "writing", "turns": ["Draft an email asking for feedback.", "Shorter."]},
    {"question_id": 111, "category": "math", "turns": ["The vertices of a triangle are (0, 0), (-1, 1) and (3, 3). "
                                                       "What is its area?", "And its circumradius?"]},
    {"question_id": 112, "category": "math", "turns": ["A startup invests $8000, then half that. Total?", "Next?"]},
    {"question_id": 121, "category": "coding", "turns": ["Count the words of the files in a folder.", "Faster?"]},
    {"question_id": 131, "category": "reasoning", "turns": ["Which is the odd one out: tyre, steering wheel, car, "
                                                            "engine?", "Why?"]},
]
MT_REFERENCES = [  # FastChat's reference_answer/gpt-4.jsonl shape; ids as text here, numbers there
    {"question_id": "111", "model_id": "gpt-4", "choices": [{"index": 0, "turns": ["The area is 3.", "sqrt(5)"]}]},
    {"question_id": "112", "model_id": "gpt-4", "choices": [{"index": 0, "turns": ["$12000", "$2000"]}]},
    {"question_id": "121", "model_id": "gpt-4", "choices": [{"index": 0, "turns": ["Use a Counter.", "Threads."]}]},
    {"question_id": "131", "model_id": "gpt-4", "choices": [{"index": 0, "turns": ["Car", "It is the whole."]}]},
]
MT_JUDGE = """\
[Instruction]
Please act as an impartial judge and evaluate the quality of the response provided by an AI assistant to the \
user question displayed below. Your evaluation should consider correctness and helpfulness. You will be given a \
reference answer and the assistant's answer. Begin your evaluation by comparing the assistant's answer with the \
reference answer. Identify and correct any mistakes. Be as objective as possible. After providing your \
explanation, you must rate the response on a scale of 1 to 10 by strictly following this format: "[[rating]]", \
for example: "Rating: [[5]]".

[Question]
{question}

[The Start of Reference Answer]
{ref_answer_1}
[The End of Reference Answer]

[The Start of Assistant's Answer]
{answer}
[The End of Assistant's Answer]"""

MT_AGENT = '''\
ANSWERS = {111: "The area is 3.", 112: "$12000", 131: "Engine"}


def answer(request):
    return ANSWERS[request["inputs"]["question_id"]]
'''


@pytest.fixture
def mt_judge() -> Iterator[list[str]]:
    prompts: list[str] = []

    def judge(request: Any) -> str:
        prompt = next(m.text for m in reversed(request.messages) if m.role == "user")
        prompts.append(prompt)
        reference = re.search(r"\[The Start of Reference Answer\]\n(.*)\n\[The End", prompt)[1]
        answer = re.search(r"\[The Start of Assistant's Answer\]\n(.*)\n\[The End", prompt)[1]
        return f"Compared with the reference. Rating: [[{10 if answer == reference else 2}]]"

    mock_model("mt-judge")(judge)
    yield prompts
    forget_mock_model("mt-judge")


def test_an_mt_bench_dataset_joined_to_its_references_and_filtered_by_category(project: Project,
                                                                              mt_judge: list[str]) -> None:
    project.write("suites/data/question.jsonl", jsonl(MT_QUESTIONS))
    project.write("suites/data/reference.jsonl", jsonl(MT_REFERENCES))
    project.write("suites/judges/single-math-v1.txt", MT_JUDGE)
    project.write("agentlib_mt.py", MT_AGENT)
    project.rubric("mt", """\
        metadata: {name: MT-bench with reference, version: "1.0.0"}
        threshold: 0.7
        dimensions:
          quality: {weight: 1.0, description: Correct against the reference, scale: [1, 10]}
        """)
    project.agents("judge: {model: mock/mt-judge, max_retries: 0}\nagents:\n  mt:\n    rubric: mt\n"
                   "    producer: {python: \"agentlib_mt:answer\"}\n    max_attempts: 1\n"
                   "    evaluator:\n      template: judges/single-math-v1.txt\n"
                   "      slots: {question: inputs.question, ref_answer_1: expected, answer: output}\n"
                   "      verdict: '\\[\\[(\\d+)\\]\\]'\n")
    project.cases("mt", """\
        agent: mt
        dataset:
          file: data/question.jsonl
          id: "{category}-{question_id}"
          join: {file: data/reference.jsonl, key: question_id, as: ref}
          filter: {category: [math, reasoning]}
          inputs: {question_id: "{question_id}", question: "{turns.0}"}
          expected: "{ref.choices.0.turns.0}"
        """)
    result = project.run("suites/", "-v", "-p", "no:randomly")
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(["*::math-111 PASSED*", "*::math-112 PASSED*", "*::reasoning-131 FAILED*"])
    assert "writing" not in result.stdout.str() and "coding-121" not in result.stdout.str()
    assert len(mt_judge) == 3
    assert any("[The Start of Reference Answer]\nThe area is 3.\n[The End of Reference Answer]" in prompt
               for prompt in mt_judge)  # the items run concurrently: in any order
    assert eval_of(project, "mt", "reasoning-131")["dimensionScores"]["quality"]["rating"] == 2


def test_a_row_without_a_reference_is_kept_dropped_or_refused_as_the_join_says(tmp_path: Path) -> None:
    (tmp_path / "question.jsonl").write_text(jsonl(MT_QUESTIONS))
    (tmp_path / "reference.jsonl").write_text(jsonl(MT_REFERENCES))
    place = Fields.of(tmp_path / "mt.cases.yaml", "dataset")

    def ids(**join: Any) -> list[str]:
        raw = {"file": "question.jsonl", "id": "q{question_id}", "join": {"file": "reference.jsonl",
                                                                          "key": "question_id", **join}}
        return [row["id"] for _, row in dataset_rows(raw, place, tmp_path, [tmp_path])]

    assert ids(**{"as": "ref"}) == ["q81", "q82", "q111", "q112", "q121", "q131"]  # missing: keep (a left join)
    assert ids(**{"as": "ref", "missing": "drop"}) == ["q111", "q112", "q121", "q131"]
    with pytest.raises(HarnessConfigError) as info:
        ids(**{"as": "ref", "missing": "error"})
    assert info.value.message(tmp_path) == (
        "question.jsonl: row 1: reference.jsonl has no row with question_id 81 (dataset.join) (fix: add one to "
        "reference.jsonl, or set `missing: drop` (leave such rows out) or `missing: keep` (keep them without its "
        "columns))")


# --- what a user sees for a mistake: one line at collection ------------------------------------------------


@pytest.mark.parametrize(("cases", "files", "expected"), [
    ("dataset: {file: data/arc_test.jsonl, inputs: {c: '{choices|leterred}'}}", {},
     "*suites/arc.cases.yaml: dataset.inputs.c: {choices|leterred} uses the filter 'leterred', which does not "
     "exist (filters: json, letter, lettered, letters, numbered) (fix: use one of the filters, or remove the '|')"),
    ("dataset: {file: data/arc_test.jsonl, join: {file: data/refs.jsonl, key: id}}",
     {"suites/data/refs.jsonl": '{"id": "arc-1", "note": "a"}\n{"id": "arc-1", "note": "b"}\n'},
     "*suites/data/refs.jsonl: row 2: id 'arc-1' again (row 1 has it too): dataset.join needs one row per key "
     "(fix: keep one row per id in refs.jsonl)"),
    ("dataset: {file: data/arc_test.jsonl, filter: {catgory: science}}", {},
     "*suites/arc.cases.yaml: dataset.filter: none of the 4 rows read passes the filter (no row has a column "
     "'catgory'), so the dataset gives no cases (fix: check the column names and values against the data)"),
])
def test_a_shaping_mistake_is_one_collection_error_naming_the_file_and_field(project: Project, cases: str,
                                                                           files: dict[str, str],
                                                                           expected: str) -> None:
    arc_project(project, "mock/arc-solver")
    for path, text in files.items():
        project.write(path, text)
    project.cases("arc", "agent: arc\n" + textwrap.dedent(cases) + "\n")
    result = project.run("suites/")
    result.stdout.fnmatch_lines([expected])
    assert "Traceback" not in result.stdout.str()
    assert not (project.root / "prompts-seen.jsonl").exists()  # nothing was sent to a model


def test_an_unknown_filter_in_a_producer_template_is_a_collection_error(project: Project) -> None:
    arc_project(project, "mock/arc-solver")
    project.write("suites/prompts/arc.txt", ARC_PROMPT.replace("{choices|letters}", "{choices|leters}"))
    result = project.run("suites/")
    result.stdout.fnmatch_lines(["*suites/agents.yaml: agents.arc.producer.template: arc.txt: {choices|leters} uses "
                                 "the filter 'leters', which does not exist (filters: *"])
    assert "Traceback" not in result.stdout.str()
