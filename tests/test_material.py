"""Published evaluation material, re-expressed in our files and run end to end: a model-graded fact spec with
choices A-E, a closedqa spec with a per-sample criterion, promptfoo-style per-test asserts over two prompts, an
MT-bench 1-10 judge with ``[[rating]]``, a Prometheus 1-5 rubric with a reference answer, a G-Eval criterion
with steps, and 300-row JSONL and CSV datasets.

Each runs offline on the mock provider and against the fake Anthropic and OpenAI servers (the real SDKs), with
the same scripted judge behind all three: :func:`judge_reply` reads the prompt the judge was sent and answers
the way the material asks (free text with a verdict, or a structured answer).
"""

from __future__ import annotations

import csv
import io
import json
import re
import textwrap
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from conftest import Project
from harness.llm.providers.mock import forget_mock_model, mock_model

JUDGE_MODELS = {"mock": "mock/material-judge", "anthropic": "claude-haiku-4-5", "openai": "openai/gpt-4.1-mini"}

# What the scripted judge answers: given the last user message and the schema asked for (None: free text).
Script = Callable[[str, "dict[str, Any] | None"], "str | dict[str, Any]"]


@pytest.fixture(params=sorted(JUDGE_MODELS))
def judge(request: pytest.FixtureRequest) -> Iterator[Judge]:
    """The scripted judge, served by the mock provider or by a fake server through the provider's real SDK."""
    served = Judge(request.param)
    if request.param == "mock":
        mock_model("material-judge")(lambda req: served.answer(
            _last_user_text(req.messages), _forced_schema(req.tools, req.tool_choice)))
        yield served
        forget_mock_model("material-judge")
        return
    server = request.getfixturevalue(f"fake_{request.param}")
    served.server = server
    if request.param == "anthropic":
        from harness.testing.fake_anthropic import Reply

        def respond(body: dict[str, Any]) -> Any:
            text = _anthropic_last_user(body)
            tool = next((t for t in body.get("tools") or []), None)
            answer = served.answer(text, tool["input_schema"] if tool else None)
            return Reply.tool(answer, name=tool["name"]) if isinstance(answer, dict) else Reply.text(answer)
    else:
        from harness.testing.fake_openai import Reply

        def respond(body: dict[str, Any]) -> Any:
            text = str(body["messages"][-1].get("content") or "")
            tool = next((t["function"] for t in body.get("tools") or []), None)
            answer = served.answer(text, tool["parameters"] if tool else None)
            return Reply.tool(answer, name=tool["name"]) if isinstance(answer, dict) else Reply.text(answer)
    server.responder = respond
    yield served


class Judge:
    def __init__(self, provider: str):
        self.provider = provider
        self.model = JUDGE_MODELS[provider]
        self.script: Script = lambda prompt, schema: "no script"
        self.prompts: list[str] = []
        self.server: Any = None

    def answer(self, prompt: str, schema: dict[str, Any] | None) -> str | dict[str, Any]:
        self.prompts.append(prompt)
        return self.script(prompt, schema)

    def settings(self) -> str:
        return f"judge: {{model: {self.model}, max_retries: 0}}\n"


def _last_user_text(messages: Any) -> str:
    return next((m.text for m in reversed(messages) if m.role == "user"), "")


def _forced_schema(tools: Any, choice: str | None) -> dict[str, Any] | None:
    return next((t.schema for t in tools if t.name == choice), None)


def _anthropic_last_user(body: dict[str, Any]) -> str:
    content = body["messages"][-1]["content"]
    return content if isinstance(content, str) else "".join(b.get("text", "") for b in content if isinstance(b, dict))


def structured(scores: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """A structured judge answer: each dimension's own fields (rating, label or score) plus a reason."""
    return {"overallScore": 0.5, "passed": True, "feedback": "scripted", "suggestedFixes": [],
            "dimensionScores": {dim: {"weight": 1.0, "reason": "scripted", **given} for dim, given in scores.items()}}


def eval_of(project: Project, case: str) -> dict[str, Any]:
    """The case's first attempt's evaluator output (an agent with one case keeps it in the agent's folder)."""
    (path,) = (sorted(project.work.glob(f"runs/*/*/{case}/attempt-1.eval.json"))
               or sorted(project.work.glob("runs/*/*/attempt-1.eval.json")))
    return json.loads(path.read_text(encoding="utf-8"))


AGENT_CODE = '''\
ANSWERS = {"capital of France?": "Paris", "capital of Peru?": "Lima", "capital of Chad?": "Abuja"}


def answer(request):
    inputs = request["inputs"]
    return ANSWERS.get(inputs.get("question"), inputs.get("answer", "I do not know"))
'''


def qa_project(project: Project, judge: Judge, *, rubric: str, evaluator: str, cases: str,
               files: dict[str, str]) -> None:
    project.write("agentlib_material.py", AGENT_CODE)
    project.rubric("material", rubric)
    project.agents(judge.settings() + "agents:\n  qa:\n    rubric: material\n"
                   "    producer: {python: \"agentlib_material:answer\"}\n" + f"    evaluator: {evaluator}\n")
    project.cases("qa", cases)
    for path, text in files.items():
        project.write(path, text)


# --- openai/evals: model-graded fact, choices A-E, chain of thought then the letter -----------------------

FACT_PROMPT = """\
You are comparing a submitted answer to an expert answer on a given question. Here is the data:
[BEGIN DATA]
************
[Question]: {input}
************
[Expert]: {ideal}
************
[Submission]: {completion}
************
[END DATA]

Compare the factual content of the submitted answer with the expert answer. Ignore any differences in style, \
grammar, or punctuation.
The submitted answer may either be a subset or superset of the expert answer, or it may conflict with it. \
Determine which case applies. Answer the question by selecting one of the following options:
(A) The submitted answer is a subset of the expert answer and is fully consistent with it.
(B) The submitted answer is a superset of the expert answer and is fully consistent with it.
(C) The submitted answer contains all the same details as the expert answer.
(D) There is a disagreement between the submitted answer and the expert answer.
(E) The answers differ, but these differences don't matter from the perspective of factuality.

First, write out in a step by step manner your reasoning to be sure that your conclusion is correct. \
Avoid simply stating the correct answer at the outset. Then print only the single character (without \
quotes or punctuation) on its own line corresponding to the correct answer. At the end, repeat just the \
letter again by itself on a new line.
"""

FACT_RUBRIC = """\
metadata: {name: Fact, version: "1.0.0"}
threshold: 0.5
dimensions:
  factual:
    weight: 1.0
    description: Is the submission factually consistent with the expert answer?
    choices: {A: 0.4, B: 0.6, C: 1, D: 0, E: 1}
"""


def fact_script(prompt: str, schema: dict[str, Any] | None) -> str:
    expert = re.search(r"\[Expert\]: (.*)", prompt)[1]
    submission = re.search(r"\[Submission\]: (.*)", prompt)[1]
    letter = "C" if submission == expert else "D"
    return f"The expert says {expert}; the submission says {submission}.\n{letter}\n{letter}"


def test_a_model_graded_fact_spec_with_choices_a_to_e(project: Project, judge: Judge) -> None:
    judge.script = fact_script
    project.write("suites/data/fact.jsonl", "".join(json.dumps(row) + "\n" for row in [
        {"id": "france", "question": "capital of France?", "ideal": "Paris"},
        {"id": "peru", "question": "capital of Peru?", "ideal": "Lima"},
        {"id": "chad", "question": "capital of Chad?", "ideal": "N'Djamena"}]))
    qa_project(project, judge, rubric=FACT_RUBRIC, files={"suites/judges/fact.txt": FACT_PROMPT}, evaluator=(
        "{template: judges/fact.txt, slots: {input: inputs.question, ideal: expected, completion: output}, "
        "verdict: '(?m)^\\s*([A-E])\\s*$'}"),
        cases="agent: qa\ndataset: {file: data/fact.jsonl, id: '{id}', inputs: {question: '{question}'}, "
              "expected: '{ideal}'}\n")
    result = project.run("suites/", "-rA")
    result.assert_outcomes(passed=2, failed=1)
    france, chad = eval_of(project, "france"), eval_of(project, "chad")
    assert france["dimensionScores"]["factual"] == {"score": 1.0, "weight": 1.0, "label": "C",
                                                    "reason": "The expert says Paris; the submission says Paris."}
    assert chad["dimensionScores"]["factual"]["label"] == "D" and chad["overallScore"] == 0.0
    assert "the submission says Abuja" in chad["metadata"]["reasoning"]  # the reasoning is kept
    # the published prompt, used as written: only its slots were filled
    assert FACT_PROMPT.replace("{input}", "capital of Chad?").replace("{ideal}", "N'Djamena").replace(
        "{completion}", "Abuja") in judge.prompts
    result.stdout.fnmatch_lines(["*material: factual answered C x2, D x1*"])


def test_an_answer_off_the_choices_is_asked_again_then_validation_failed(project: Project, judge: Judge) -> None:
    judge.script = lambda prompt, schema: "I think it is F\nF"
    project.write("suites/data/fact.jsonl", json.dumps({"question": "capital of Peru?", "ideal": "Lima"}) + "\n")
    qa_project(project, judge, rubric=FACT_RUBRIC, files={"suites/judges/fact.txt": FACT_PROMPT}, evaluator=(
        "{template: judges/fact.txt, slots: {input: inputs.question, ideal: expected, completion: output}, "
        "verdict: '(?m)^\\s*([A-Z])\\s*$'}"),
        cases="agent: qa\ndataset: {file: data/fact.jsonl, inputs: {question: '{question}'}, expected: '{ideal}'}\n")
    result = project.run("suites/")
    result.assert_outcomes(failed=1)
    assert len(judge.prompts) == 2 and "'F' is not one of A, B, C, D, E" in judge.prompts[1]
    result.stdout.fnmatch_lines(["*VALIDATION FAILED*'F' is not one of A, B, C, D, E*"])
    assert project.runs()[0]["status"] == "escalated"


# --- openai/evals: closedqa, a criterion per sample, Y/N --------------------------------------------------

CLOSEDQA_PROMPT = """\
You are assessing a submitted answer on a given task based on a criterion. Here is the data:
[BEGIN DATA]
***
[Task]: {input}
***
[Submission]: {completion}
***
[Criterion]: {criteria}
***
[END DATA]
Does the submission meet the criterion? First, write out in a step by step manner your reasoning about the \
criterion to be sure that your conclusion is correct. Avoid simply stating the correct answers at the outset. \
Then print only the single character "Y" or "N" (without quotes or punctuation) on its own line corresponding \
to the correct answer. At the end, repeat just the letter again by itself on a new line.

Reasoning:"""


def closedqa_script(prompt: str, schema: dict[str, Any] | None) -> str:
    submission = re.search(r"\[Submission\]: (.*)", prompt)[1]
    word = re.search(r"\[Criterion\]: names (\w+)", prompt)[1]
    verdict = "Y" if word in submission else "N"
    return f"The criterion asks for {word}.\n{verdict}\n{verdict}"


def test_a_closedqa_spec_with_a_criterion_per_sample(project: Project, judge: Judge) -> None:
    judge.script = closedqa_script
    project.write("suites/data/closedqa.jsonl", "".join(json.dumps(row) + "\n" for row in [
        {"input": "capital of France?", "criterion": "names Paris"},
        {"input": "capital of Peru?", "criterion": "names Cusco"}]))
    qa_project(project, judge, rubric="""\
        metadata: {name: Closed QA, version: "1.0.0"}
        threshold: 1.0
        dimensions:
          meets:
            weight: 1.0
            description: Does the submission meet the sample's criterion?
            choices: {"Y": 1, "N": 0}
        """, files={"suites/judges/closedqa.txt": CLOSEDQA_PROMPT}, evaluator=(
        "{template: judges/closedqa.txt, slots: {input: inputs.question, completion: output, "
        "criteria: inputs.criterion}, verdict: '(?m)^\\s*([YN])\\s*$'}"),
        cases="agent: qa\ndataset: {file: data/closedqa.jsonl, inputs: {question: '{input}', "
              "criterion: '{criterion}'}}\n")
    project.run("suites/").assert_outcomes(passed=1, failed=1)
    assert eval_of(project, "row-1")["dimensionScores"]["meets"]["label"] == "Y"
    assert eval_of(project, "row-2")["dimensionScores"]["meets"]["label"] == "N"
    assert any("[Criterion]: names Cusco" in p for p in judge.prompts)


def test_a_case_that_cannot_fill_a_template_slot_is_a_collection_error(project: Project, judge: Judge) -> None:
    judge.script = closedqa_script
    qa_project(project, judge, rubric="""\
        metadata: {name: Closed QA, version: "1.0.0"}
        threshold: 1.0
        dimensions:
          meets: {weight: 1.0, description: Meets the criterion?, choices: {"Y": 1, "N": 0}}
        """, files={"suites/judges/closedqa.txt": CLOSEDQA_PROMPT}, evaluator=(
        "{template: judges/closedqa.txt, slots: {input: inputs.question, completion: output, "
        "criteria: inputs.criterion}, verdict: '([YN])'}"),
        cases="agent: qa\ncases:\n  - id: no-criterion\n    inputs: {question: capital of France?}\n")
    result = project.run("suites/")
    result.stdout.fnmatch_lines(["*qa.cases.yaml: case no-criterion: the evaluator template closedqa.txt (slot "
                                 "{criteria}) uses {inputs.criterion}, which this case cannot fill (inputs: question;"
                                 " no expected answer) (fix: give the case an input 'criterion'*"])
    assert judge.prompts == [] and "Traceback" not in result.stdout.str()


# --- promptfoo: two prompts, per-test asserts, each passing on its own threshold --------------------------

def test_per_test_asserts_over_two_prompts_each_with_its_own_threshold(project: Project, judge: Judge) -> None:
    def script(prompt: str, schema: dict[str, Any] | None) -> dict[str, Any]:
        dims = list(schema["properties"]["dimensionScores"]["required"])
        funny = "joke" in re.search(r"## Artifact\n(.*)", prompt, re.S)[1]
        return structured({dim: {"score": 0.9 if funny else 0.3} for dim in dims})

    judge.script = script
    project.write("suites/prompts/tweet.txt", "Write a tweet about {{ topic }}")
    project.write("suites/prompts/joke.txt", "Tell a joke about {{topic}}")
    project.write("suites/prompts/judge.md", "# Judge\n\n## Role\nGrader.\n\n## Inputs\nOutput.\n\n## Outputs\n"
                  "Scores.\n\n## Instructions\nGrade.\n\n## Examples\nNone.\n\n## Constraints\nHonest.\n")
    project.rubric("asserts", """\
        metadata: {name: Asserts, version: "1.0.0"}
        threshold: 0.5
        dimensions: {}
        """)
    agent = ("    rubric: asserts\n    producer: {{template: prompts/{0}.txt, model: mock/echo}}\n"
             "    evaluator: prompts/judge.md\n")
    project.agents(judge.settings() + "agents:\n  tweet:\n" + agent.format("tweet") + "  joke:\n"
                   + agent.format("joke"))
    tests = """\
        cases:
          - id: bananas
            inputs: {topic: bananas}
            checks:
              - {contains: {all: ["{inputs.topic}"]}}
              - {id: mentions-joke, check: {contains: {all: [joke]}}, min_score: 1}
            criteria:
              - {id: funny, description: "Is it funny?", min_score: 0.5}
          - id: avocados
            inputs: {topic: avocados}
            checks:
              - {contains: {all: ["{topic}"]}}
        """
    project.cases("tweet", "agent: tweet\n" + textwrap.dedent(tests))
    project.cases("joke", "agent: joke\n" + textwrap.dedent(tests))
    result = project.run("suites/", "-rA")
    # tweet/bananas: no "joke" in the tweet, and min_score 1 on that check fails it, whatever the other scores
    result.assert_outcomes(passed=3, failed=1)
    result.stdout.fnmatch_lines(["*FAILED suites/tweet.cases.yaml::bananas*"])
    failed = json.loads(next(project.work.glob("runs/*/tweet/bananas/attempt-1.eval.json")).read_text())
    assert failed["metadata"]["failedGates"] == ["mentions-joke 0.00 < 1"]
    assert set(failed["dimensionScores"]) == {"check-1", "mentions-joke", "funny"}
    assert [round(d["weight"], 4) for d in failed["dimensionScores"].values()] == [0.3333] * 3
    joke = json.loads(next(project.work.glob("runs/*/joke/bananas/attempt-1.eval.json")).read_text())
    assert joke["passed"] is True and joke["dimensionScores"]["funny"]["score"] == 0.9


# --- MT-bench: a 1-10 rating in [[brackets]] ---------------------------------------------------------------

MT_BENCH_PROMPT = """\
[Instruction]
Please act as an impartial judge and evaluate the quality of the response provided by an AI assistant to the \
user question displayed below. Your evaluation should consider factors such as the helpfulness, relevance, \
accuracy, depth, creativity, and level of detail of the response. Begin your evaluation by providing a short \
explanation. Be as objective as possible. After providing your explanation, you must rate the response on a \
scale of 1 to 10 by strictly following this format: "[[rating]]", for example: "Rating: [[5]]".

[Question]
{question}

[The Start of Assistant's Answer]
{answer}
[The End of Assistant's Answer]"""


def test_an_mt_bench_judge_rating_1_to_10_in_double_brackets(project: Project, judge: Judge) -> None:
    replies = iter(["Helpful, but the rating is off the scale. Rating: [[11]]",
                    "Accurate and brief. Rating: [[8]]"])
    judge.script = lambda prompt, schema: next(replies)
    qa_project(project, judge, rubric="""\
        metadata: {name: MT-bench single, version: "1.0.0"}
        threshold: 0.7
        dimensions:
          quality: {weight: 1.0, description: Overall quality of the answer, scale: [1, 10]}
        """, files={"suites/judges/mt_bench.txt": MT_BENCH_PROMPT},
        evaluator="{template: judges/mt_bench.txt, slots: {answer: output}, verdict: '\\[\\[(\\d+)\\]\\]'}",
        cases="agent: qa\ncases:\n  - id: peru\n    inputs: {question: capital of Peru?}\n")
    project.run("suites/").assert_outcomes(passed=1)
    assert judge.prompts[0] == MT_BENCH_PROMPT.format(question="capital of Peru?", answer="Lima")
    assert "'11' is not a whole-number rating from 1 to 10" in judge.prompts[1]  # asked once more
    quality = eval_of(project, "peru")["dimensionScores"]["quality"]
    assert quality["rating"] == 8 and quality["score"] == pytest.approx(7 / 9, abs=1e-6)


# --- Prometheus: a 1-5 rubric with a reference answer ------------------------------------------------------

PROMETHEUS_PROMPT = """\
###Task Description:
An instruction (might include an Input inside it), a response to evaluate, a reference answer that gets a \
score of 5, and a score rubric representing a evaluation criteria are given.
1. Write a detailed feedback that assess the quality of the response strictly based on the given score \
rubric, not evaluating in general.
2. After writing a feedback, write a score that is an integer between 1 and 5. You should refer to the score \
rubric.
3. The output format should look as follows: "Feedback: (write a feedback for criteria) [RESULT] (an integer \
number between 1 and 5)"

###The instruction to evaluate:
{instruction}

###Response to evaluate:
{response}

###Reference Answer (Score 5):
{reference_answer}

###Score Rubrics:
{rubric}

###Feedback: """


def test_a_prometheus_rubric_1_to_5_with_a_reference_answer(project: Project, judge: Judge) -> None:
    def script(prompt: str, schema: dict[str, Any] | None) -> str:
        response = re.search(r"###Response to evaluate:\n(.*)", prompt)[1]
        reference = re.search(r"###Reference Answer \(Score 5\):\n(.*)", prompt)[1]
        return f"Feedback: the response {'matches' if response == reference else 'misses'} the reference. " + (
            "[RESULT] 5" if response == reference else "[RESULT] 2")

    judge.script = script
    qa_project(project, judge, rubric="""\
        metadata: {name: Prometheus, version: "1.0.0"}
        threshold: 0.75
        dimensions:
          correctness:
            weight: 1.0
            description: Is the response correct compared with the reference answer?
            scale: [1, 5]
            scoring:
              1: The response is wrong.
              2: The response is mostly wrong.
              3: The response is partly right.
              4: The response is right with small slips.
              5: The response is fully right.
        """, files={"suites/judges/prometheus.txt": PROMETHEUS_PROMPT}, evaluator=(
        "{template: judges/prometheus.txt, slots: {instruction: input, response: output, reference_answer: "
        "expected}, verdict: '\\[RESULT\\]\\s*(\\d)'}"),
        cases="""\
        agent: qa
        cases:
          - {id: peru, inputs: {question: capital of Peru?}, expected: Lima}
          - {id: chad, inputs: {question: capital of Chad?}, expected: "N'Djamena"}
        """)
    project.run("suites/").assert_outcomes(passed=1, failed=1)
    assert eval_of(project, "peru")["dimensionScores"]["correctness"]["rating"] == 5
    chad = eval_of(project, "chad")["dimensionScores"]["correctness"]
    assert chad["rating"] == 2 and chad["score"] == 0.25
    sent = judge.prompts[0]
    assert "###Score Rubrics:\n# Rubric: Prometheus" in sent and "- 5: The response is fully right." in sent


# --- G-Eval: a criterion with evaluation steps, reasoning before the score ---------------------------------

def test_a_g_eval_criterion_with_steps_reasons_before_it_scores(project: Project, judge: Judge) -> None:
    def script(prompt: str, schema: dict[str, Any] | None) -> str | dict[str, Any]:
        if schema is None:
            return "Step 1: the answer names a city. Step 2: it is the capital. Coherent."
        return structured({"coherence": {"rating": 4}})

    judge.script = script
    project.write("suites/prompts/judge.md", "# G-Eval judge\n\n## Role\nYou grade coherence.\n\n## Inputs\n"
                  "An answer.\n\n## Outputs\nA rating.\n\n## Instructions\nFollow the steps.\n\n## Examples\n"
                  "None.\n\n## Constraints\nBe strict.\n")
    qa_project(project, judge, rubric="""\
        metadata: {name: G-Eval coherence, version: "1.0.0"}
        threshold: 0.7
        dimensions:
          coherence:
            weight: 1.0
            description: "Coherence (1-5): the collective quality of all sentences."
            scale: [1, 5]
            steps:
              - Read the question and the answer carefully.
              - Check that the answer addresses the question in a logical order.
              - Assign a coherence score from 1 to 5.
        """, files={}, evaluator="{prompt: prompts/judge.md, reasoning: first}",
        cases="agent: qa\ncases:\n  - {id: peru, inputs: {question: capital of Peru?}}\n")
    project.run("suites/").assert_outcomes(passed=1)
    output = eval_of(project, "peru")
    assert output["dimensionScores"]["coherence"]["rating"] == 4
    assert output["metadata"]["reasoning"].startswith("Step 1: the answer names a city.")
    assert len(judge.prompts) == 2 and "Do not give the scores yet" in judge.prompts[0]
    if judge.provider == "anthropic":  # the steps reach the judge, in the cached system prefix
        system = judge.server.requests[0]["system"]
        text = system if isinstance(system, str) else "".join(block["text"] for block in system)
        assert "Evaluation steps:\n1. Read the question and the answer carefully." in text


# --- datasets: 300 rows of JSONL and of CSV, expected answers checked and judged --------------------------

@pytest.mark.parametrize("kind", ["jsonl", "csv"])
def test_a_300_row_dataset_with_expected_answers(project: Project, judge: Judge, kind: str) -> None:
    judge.script = lambda prompt, schema: structured({"relevant": {"score": 1.0 if "## Reference answer" in prompt
                                                                   else 0.0}})
    rows = [{"q": f"q{n}", "answer": f"answer {n}", "expected": f"answer {n}" if n % 10 else f"other {n}"}
            for n in range(1, 301)]
    if kind == "jsonl":
        data = "".join(json.dumps(row) + "\n" for row in rows)
    else:
        out = io.StringIO()
        writer = csv.DictWriter(out, fieldnames=["q", "answer", "expected"])
        writer.writeheader()
        writer.writerows(rows)
        data = out.getvalue()
    project.write(f"suites/data/qa.{kind}", data)
    project.write("suites/prompts/judge.md", "# Judge\n\n## Role\nGrader.\n\n## Inputs\nOutput.\n\n## Outputs\n"
                  "Scores.\n\n## Instructions\nGrade.\n\n## Examples\nNone.\n\n## Constraints\nHonest.\n")
    qa_project(project, judge, rubric="""\
        metadata: {name: Dataset QA, version: "1.0.0"}
        threshold: 0.9
        dimensions:
          exact: {weight: 0.5, description: The expected answer, check: {equals: "{expected}"}}
          relevant: {weight: 0.5, description: Is it relevant?}
        """, files={}, evaluator="prompts/judge.md",
        cases=f"agent: qa\ndataset: {{file: data/qa.{kind}, id: '{{q}}', inputs: {{answer: '{{answer}}'}}, "
              "expected: '{expected}'}\n")
    result = project.run("suites/", "-q", "-p", "no:randomly")
    result.assert_outcomes(passed=270, failed=30)
    # the judge is shown each expected answer as a labelled reference; it is not asked where the equals check
    # already fails the case (no revision follows)
    assert len(judge.prompts) == 270 and all("## Reference answer" in p for p in judge.prompts)
    assert not any("other " in p for p in judge.prompts)


# --- the pieces on their own (offline, the scripted judge on the mock provider) ----------------------------

@pytest.fixture
def mock_judge() -> Iterator[Judge]:
    served = Judge("mock")  # what it is sent: the cached system prefix (the rubric), then the message
    mock_model("material-judge")(lambda req: served.answer(
        f"{req.cached_system_prefix or ''}\n{_last_user_text(req.messages)}", _forced_schema(req.tools, req.tool_choice)))
    yield served
    forget_mock_model("material-judge")


JUDGE_PROMPT = ("# Judge\n\n## Role\nGrader.\n\n## Inputs\nOutput.\n\n## Outputs\nScores.\n\n## Instructions\nGrade."
                "\n\n## Examples\nNone.\n\n## Constraints\nHonest.\n")


def test_an_answer_off_exhaustive_levels_is_asked_again_then_validation_failed(project: Project,
                                                                                 mock_judge: Judge) -> None:
    mock_judge.script = lambda prompt, schema: structured({"tone": {"score": 0.33}})
    qa_project(project, mock_judge, rubric="""\
        metadata: {name: Levels, version: "1.0.0"}
        threshold: 0.5
        dimensions:
          tone:
            weight: 1.0
            description: Is the tone right?
            exhaustive: true
            scoring: {1.0: right, 0.5: mixed, 0.0: wrong}
        """, files={"suites/prompts/judge.md": JUDGE_PROMPT}, evaluator="prompts/judge.md",
        cases="agent: qa\ncases:\n  - {id: peru, inputs: {question: capital of Peru?}}\n")
    result = project.run("suites/")
    result.assert_outcomes(failed=1)
    assert len(mock_judge.prompts) == 2  # one retry, shown the error, then validation_failed
    assert "Answer one of these scores: 0, 0.5, 1." in mock_judge.prompts[0]
    result.stdout.fnmatch_lines(["*VALIDATION FAILED*dimensionScores.tone.score: 0.33 is not one of 0.0, 0.5, 1.0*"])


def test_a_rubric_filled_per_case_a_judged_gate_and_a_transform(project: Project, mock_judge: Judge) -> None:
    """Rubric text with case slots (a criterion per case), ``min_score`` on a judged dimension, and a transform:
    the checks and the judge see the answer taken out of the agent's JSON, the record keeps the JSON."""
    mock_judge.script = lambda prompt, schema: structured({"meets": {"score": 0.4 if "Cusco" in prompt else 1.0}})
    project.write("agentlib_material.py", AGENT_CODE.replace(
        'return ANSWERS.get(inputs.get("question"), inputs.get("answer", "I do not know"))',
        'import json\n    return json.dumps({"answer": ANSWERS[inputs["question"]], "confidence": 0.9})'))
    project.rubric("material", """\
        metadata: {name: Per case, version: "1.0.0"}
        threshold: 0.5
        transform: {json_path: answer}
        dimensions:
          exact: {weight: 0.5, description: The expected city, check: {equals: "{expected}"}}
          meets: {weight: 0.5, description: "Does the answer meet this: {inputs.criterion}?", min_score: 0.5}
        """)
    project.write("suites/prompts/judge.md", JUDGE_PROMPT)
    project.agents(mock_judge.settings() + "agents:\n  qa:\n    rubric: material\n"
                   "    producer: {python: \"agentlib_material:answer\"}\n    evaluator: prompts/judge.md\n")
    project.cases("qa", """\
        agent: qa
        cases:
          - {id: paris, inputs: {question: capital of France?, criterion: names Paris}, expected: Paris}
          - {id: cusco, inputs: {question: capital of Peru?, criterion: names Cusco}, expected: Lima}
        """)
    result = project.run("suites/")
    result.assert_outcomes(passed=1, failed=1)
    cusco = eval_of(project, "cusco")
    assert cusco["overallScore"] == 0.7 and cusco["metadata"]["failedGates"] == ["meets 0.40 < 0.5"]
    assert any("Does the answer meet this: names Cusco?" in p for p in mock_judge.prompts)
    assert any('"answer": "Lima"' in p.read_text() for p in project.work.glob("runs/*/qa/cusco/attempt-1.md"))
    result.stdout.fnmatch_lines(["*ESCALATED after 1 attempt: below min_score (meets 0.40 < 0.5) after 1 attempt*"])


def test_a_dataset_row_adds_its_own_criterion_and_check(project: Project, mock_judge: Judge) -> None:
    mock_judge.script = lambda prompt, schema: structured(
        {dim: {"score": 1.0} for dim in schema["properties"]["dimensionScores"]["required"]})
    project.write("suites/data/rows.jsonl", "".join(json.dumps(row) + "\n" for row in [
        {"q": "capital of France?", "criterion": "brevity: Is it one word?", "must": "Paris"},
        {"q": "capital of Peru?", "criterion": "politeness: Is it polite?", "must": "Cusco"}]))
    qa_project(project, mock_judge, rubric="""\
        metadata: {name: Rows, version: "1.0.0"}
        threshold: 0.9
        dimensions: {}
        """, files={"suites/prompts/judge.md": JUDGE_PROMPT}, evaluator="prompts/judge.md",
        cases="""\
        agent: qa
        dataset:
          file: data/rows.jsonl
          inputs: {question: "{q}"}
          criteria: "{criterion}"
          checks: {id: names, check: {contains: {all: ["{must}"]}}, min_score: 1}
        """)
    project.run("suites/").assert_outcomes(passed=1, failed=1)
    first = eval_of(project, "row-1")
    assert set(first["dimensionScores"]) == {"brevity", "names"} and first["passed"] is True
    assert sum("## brevity (weight 0.50)\nIs it one word?" in p for p in mock_judge.prompts) == 1
    assert len(mock_judge.prompts) == 1  # row 2's check failed its gate: nothing the judge says could pass it
    assert eval_of(project, "row-2")["metadata"]["failedGates"] == ["names 0.00 < 1"]


def test_a_template_that_leaks_the_expected_answer_to_the_producer_is_refused(project: Project,
                                                                               mock_judge: Judge) -> None:
    project.write("suites/prompts/ask.txt", "Answer {question}. (The answer is {expected}.)")
    qa_project(project, mock_judge, rubric=FACT_RUBRIC, files={"suites/judges/fact.txt": FACT_PROMPT},
               evaluator="{template: judges/fact.txt, verdict: '([A-E])'}",
               cases="agent: qa\ncases:\n  - {id: peru, inputs: {question: capital of Peru?}, expected: Lima}\n")
    project.agents(mock_judge.settings() + "agents:\n  qa:\n    rubric: material\n"
                   "    producer: {template: prompts/ask.txt, model: mock/echo}\n"
                   "    evaluator: {template: judges/fact.txt, verdict: '([A-E])'}\n")
    result = project.run("suites/")
    result.stdout.fnmatch_lines(["*agents.yaml: agents.qa.producer.template: ask.txt uses {expected}, the expected "
                                 "answer, in a producer's prompt (fix: a producer or reviser must not see the "
                                 "expected answer*"])
    assert mock_judge.prompts == []
