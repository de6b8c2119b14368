"""Scores as published (issue 24, part 3): decimal ratings on a stepped scale (MT-bench's ``[[7.5]]``), G-Eval's
probability-weighted rating from the judge's log probabilities, and the model under test's generation settings
(``stop``, ``top_p``, ``seed``; a GSM8K-style producer that stops at a blank line).

End to end through pytester, on the mock provider and on the fake OpenAI chat-completions server through the real
openai SDK: the scripted judge (or producer) behind both is the same function of the prompt it is sent.
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from conftest import Project, error_sections
from harness.llm.providers.mock import forget_mock_model, mock_model
from harness.testing.fake_openai import FakeOpenAI, Reply

# What a scripted model answers, given the last user message and the JSON Schema of its forced tool (None: text).
Script = Callable[[str, "dict[str, Any] | None"], "str | dict[str, Any]"]
MODELS = {"mock": "mock/published", "openai": "openai/gpt-4.1-mini"}


class Scripted:
    """One scripted model, served by the mock provider or by the fake OpenAI server (the real SDK)."""

    def __init__(self, provider: str, server: FakeOpenAI | None):
        self.provider = provider
        self.model = MODELS[provider]
        self.server = server
        self.script: Script = lambda prompt, schema: "no script"
        self.prompts: list[str] = []
        self.schemas: list[dict[str, Any] | None] = []

    def answer(self, prompt: str, schema: dict[str, Any] | None) -> str | dict[str, Any]:
        self.prompts.append(prompt)
        self.schemas.append(schema)
        return self.script(prompt, schema)

    def replies(self, *answers: str | dict[str, Any]) -> None:
        """Answer these, in order (the last one again and again)."""
        self.script = lambda prompt, schema: answers[min(len(self.prompts), len(answers)) - 1]


@pytest.fixture(params=sorted(MODELS))
def model(request: pytest.FixtureRequest) -> Iterator[Scripted]:
    yield from _serve(request, request.param)


@pytest.fixture(params=["mock", "a server that ignores logprobs"])
def no_logprobs(request: pytest.FixtureRequest) -> Iterator[Scripted]:
    """A judge whose answers come without log probabilities: the mock, or a server that ignores the parameter
    (``logprobs: null``, though it could have said 3 had 0.6 and 4 had 0.4)."""
    for served in _serve(request, "mock" if request.param == "mock" else "openai"):
        if served.server is not None:
            served.server.logprobs = False
            served.server.token_choices = {"3": {"3": 0.6, "4": 0.4}}
        yield served


@pytest.fixture
def mock(request: pytest.FixtureRequest) -> Iterator[Scripted]:
    yield from _serve(request, "mock")


@pytest.fixture
def openai(request: pytest.FixtureRequest) -> Iterator[Scripted]:
    yield from _serve(request, "openai")


def _serve(request: pytest.FixtureRequest, provider: str) -> Iterator[Scripted]:
    if provider == "mock":
        served = Scripted("mock", None)

        def respond(req: Any) -> Any:
            prompt = next((m.text or "".join(r.content for r in m.tool_results) for m in reversed(req.messages)
                           if m.role == "user"), "")
            prefix = req.cached_system_prefix or ""
            forced = next((t.schema for t in req.tools if t.name == req.tool_choice), None)
            return served.answer(f"{prefix}\n{prompt}" if prefix else prompt, forced)

        mock_model("published")(respond)
        yield served
        forget_mock_model("published")
        return
    server: FakeOpenAI = request.getfixturevalue("fake_openai")
    served = Scripted("openai", server)

    def reply(body: dict[str, Any]) -> Reply:
        system = next((m["content"] for m in body["messages"] if m["role"] == "system"), "")
        prompt = str(body["messages"][-1].get("content") or "")
        tool = next((t["function"] for t in body.get("tools") or []), None)
        answer = served.answer(f"{system}\n{prompt}" if system else prompt, tool["parameters"] if tool else None)
        return Reply.tool(answer, name=tool["name"]) if isinstance(answer, dict) else Reply.text(answer)

    server.responder = reply
    yield served


def write(project: Project, *, rubric: str, agents: str, cases: str, files: dict[str, str] | None = None,
          code: str = "") -> None:
    project.rubric("published", rubric)
    project.agents(agents)
    project.cases("published", cases)
    for path, text in (files or {}).items():
        project.write(path, text)
    if code:
        project.write("agentlib_published.py", code)


def eval_of(project: Project, agent: str, case: str | None = None) -> dict[str, Any]:
    """The evaluator output of the agent's (or one case's) first attempt."""
    (path,) = sorted(project.work.glob(f"runs/*/{agent}/{case + '/' if case else ''}attempt-1.eval.json"))
    return json.loads(path.read_text(encoding="utf-8"))


def structured(**dimensions: dict[str, Any]) -> dict[str, Any]:
    return {"overallScore": 0.5, "passed": True, "feedback": "scripted", "suggestedFixes": [],
            "dimensionScores": {dim: {"weight": 1.0, "reason": "scripted", **given}
                                for dim, given in dimensions.items()}}


ANSWERS = ('ANSWERS = {"capital of Peru?": "Lima"}\n\n\ndef answer(request):\n'
           '    return ANSWERS[request["inputs"]["question"]]\n')
ONE_CASE = "agent: qa\ncases:\n  - {id: peru, inputs: {question: capital of Peru?}}\n"


# --- MT-bench: half-point ratings on a 1-10 scale ------------------------------------------------------------------

MT_BENCH = """\
[Instruction]
Please act as an impartial judge and evaluate the quality of the response provided by an AI assistant to the \
user question displayed below. Begin your evaluation by providing a short explanation. Be as objective as \
possible. After providing your explanation, you must rate the response on a scale of 1 to 10 by strictly \
following this format: "[[rating]]", for example: "Rating: [[5]]".

[Question]
{question}

[The Start of Assistant's Answer]
{answer}
[The End of Assistant's Answer]"""

FASTCHAT_VERDICT = "'\\[\\[(\\d+\\.?\\d*)\\]\\]'"  # FastChat's one_score_pattern


def mt_bench(project: Project, judge: Scripted, *, step: str = "step: 0.5") -> None:
    write(project, rubric=f"""\
        metadata: {{name: MT-bench single, version: "1.0.0"}}
        threshold: 0.7
        dimensions:
          quality: {{weight: 1.0, description: Overall quality of the answer, scale: [1, 10], {step}}}
        """, agents=f"""\
        judge: {{model: {judge.model}, max_retries: 0}}
        agents:
          qa:
            rubric: published
            producer: {{python: "agentlib_published:answer"}}
            evaluator: {{template: judges/mt_bench.txt, slots: {{answer: output}}, verdict: {FASTCHAT_VERDICT}}}
        """, cases=ONE_CASE, files={"suites/judges/mt_bench.txt": MT_BENCH}, code=ANSWERS)


def test_an_mt_bench_judges_half_point_rating_is_read_and_normalised(project: Project, model: Scripted) -> None:
    """``scale: [1, 10]`` with ``step: 0.5``: ``[[7.5]]`` is the rating 7.5, scored (7.5 - 1) / (10 - 1) = 0.7222...;
    ``[[7.3]]``, off the step, is asked for once more as an out-of-range rating is."""
    model.replies("Helpful, but not quite a whole point. Rating: [[7.3]]", "Accurate and brief. Rating: [[7.5]]")
    mt_bench(project, model)
    project.run("suites/").assert_outcomes(passed=1)
    assert model.prompts[0] == MT_BENCH.format(question="capital of Peru?", answer="Lima")  # as published
    assert "'7.3' is not a rating from 1 to 10 in steps of 0.5" in model.prompts[1]
    quality = eval_of(project, "qa")["dimensionScores"]["quality"]
    assert quality["rating"] == 7.5 and quality["score"] == pytest.approx(6.5 / 9, abs=1e-6)  # 0.722222
    assert eval_of(project, "qa")["overallScore"] == pytest.approx(0.722222, abs=1e-6)


def test_without_a_step_a_half_point_rating_is_still_refused(project: Project, mock: Scripted) -> None:
    mock.replies("Rating: [[7.5]]")
    mt_bench(project, mock, step="")
    result = project.run("suites/")
    result.assert_outcomes(failed=1)
    assert len(mock.prompts) == 2 and "'7.5' is not a whole-number rating from 1 to 10" in mock.prompts[1]
    (row,) = project.runs()
    assert row["outcome"] == "validation_failed"


def test_a_structured_judge_is_told_the_step_and_its_schema_allows_only_ratings_on_it(project: Project,
                                                                                     model: Scripted) -> None:
    model.replies(structured(quality={"rating": 7.3}), structured(quality={"rating": 7.5}))
    project.write("suites/prompts/judge.md", "# MT judge\n\n## Role\nGrader.\n\n## Inputs\nAn answer.\n\n## Outputs\n"
                  "A rating.\n\n## Instructions\nRate it.\n\n## Examples\nNone.\n\n## Constraints\nBe fair.\n")
    mt_bench(project, model)
    agents = project.root / "suites/agents.yaml"
    template = f"{{template: judges/mt_bench.txt, slots: {{answer: output}}, verdict: {FASTCHAT_VERDICT}}}"
    agents.write_text(agents.read_text().replace(template, "prompts/judge.md"))  # a prompt judge: structured
    project.run("suites/").assert_outcomes(passed=1)
    assert "Answer a rating from 1 to 10 in steps of 0.5 (1, 1.5, ... 10)." in model.prompts[0]
    rating = model.schemas[0]["properties"]["dimensionScores"]["properties"]["quality"]["properties"]["rating"]
    assert rating["description"] == "a rating from 1 to 10 in steps of 0.5"
    assert rating["enum"][:3] == [1, 1.5, 2] and 7.5 in rating["enum"] and len(rating["enum"]) == 19
    assert "7.3 is not one of" in model.prompts[1]  # the schema's error, shown once more
    quality = eval_of(project, "qa")["dimensionScores"]["quality"]
    assert quality["rating"] == 7.5 and quality["score"] == pytest.approx(0.722222, abs=1e-6)


# --- G-Eval: a rating weighted by its token's probabilities --------------------------------------------------------

G_EVAL = """\
You will be given one answer written for a question. Your task is to rate the answer on one metric.

Evaluation Criteria:
{criteria}

Evaluation Steps:
{steps}

Question: {question}
Answer: {answer}

Evaluation Form (scores ONLY):
- Coherence:"""


def g_eval(project: Project, judge: Scripted) -> None:
    write(project, rubric="""\
        metadata: {name: G-Eval coherence, version: "1.0.0"}
        threshold: 0.5
        dimensions:
          coherence:
            weight: 1.0
            name: Coherence (1-5)
            description: the collective quality of all sentences
            scale: [1, 5]
            steps:
              - Read the answer and check that it addresses the question.
              - Assign a score for coherence on a scale of 1 to 5.
        """, agents=f"""\
        judge: {{model: {judge.model}, max_retries: 0}}
        agents:
          qa:
            rubric: published
            producer: {{python: "agentlib_published:answer"}}
            evaluator:
              template: judges/g_eval.txt
              slots: {{answer: output}}
              verdict: 'Coherence: (\\d)'
              score: weighted
        """, cases=ONE_CASE, files={"suites/judges/g_eval.txt": G_EVAL}, code=ANSWERS)


def test_a_g_eval_rating_is_weighted_by_the_servers_log_probabilities(project: Project, openai: Scripted) -> None:
    """At the rating's token the server gives 3 a probability of 0.6 and 4 one of 0.4: the rating is
    3 x 0.6 + 4 x 0.4 = 3.4, scored (3.4 - 1) / (5 - 1) = 0.6; the judge's own 3 is kept beside it."""
    assert openai.server is not None
    openai.server.token_choices = {"3": {"3": 0.6, "4": 0.4}}
    openai.replies("The answer names the city and stays on topic.\nCoherence: 3")
    g_eval(project, openai)
    project.run("suites/").assert_outcomes(passed=1)
    (request,) = openai.server.requests
    assert request["logprobs"] is True and request["top_logprobs"] == 20
    assert "Coherence (1-5): the collective quality of all sentences" in request["messages"][-1]["content"]
    coherence = eval_of(project, "qa")["dimensionScores"]["coherence"]
    assert coherence["rating"] == 3 and coherence["score"] == pytest.approx(0.6, abs=1e-6)
    assert coherence["weighted"] == {"used": True, "rating": 3.4, "probabilities": {"3": 0.6, "4": 0.4}}
    assert coherence["reason"].endswith("[probability-weighted rating 3.4 from 3 (0.60), 4 (0.40)]")


def test_without_log_probabilities_the_plain_rating_stands_and_the_record_says_so(project: Project,
                                                                                   no_logprobs: Scripted) -> None:
    judge = no_logprobs
    judge.replies("The answer names the city and stays on topic.\nCoherence: 3")
    g_eval(project, judge)
    project.run("suites/").assert_outcomes(passed=1)
    coherence = eval_of(project, "qa")["dimensionScores"]["coherence"]
    why = f"{judge.model} returned no log probabilities"
    assert coherence["rating"] == 3 and coherence["score"] == 0.5  # (3 - 1) / (5 - 1)
    assert coherence["weighted"] == {"used": False, "why": why}
    assert coherence["reason"].endswith(f"[plain rating 3: {why}]")
    if judge.server is not None:  # it was asked
        assert judge.server.requests[0]["logprobs"] is True


def test_weighted_scoring_needs_a_judged_dimension_with_a_scale(project: Project, mock: Scripted) -> None:
    g_eval(project, mock)
    rubric = project.root / "rubrics/published.yaml"
    rubric.write_text(rubric.read_text().replace("    scale: [1, 5]\n", "").replace("  - Assign", "  - Give"))
    result = project.run("suites/")
    (section,) = error_sections(result)
    assert any("suites/agents.yaml: agents.qa.evaluator.score: `weighted` weighs a rating on a scale, and no judged "
               "dimension of rubric published (coherence) has one (fix: give the dimension a `scale:`" in line
               for line in section), section
    assert not mock.prompts


# --- GSM8K: the model under test stops at a blank line -------------------------------------------------------------

GSM8K_PROMPT = "Question: {question}\nAnswer:"
# what a base model writes after the answer, without a stop sequence: the next question of its few-shot pattern
CONTINUED = ("Natalia sold 48 / 2 = 24 clips in May.\nAltogether she sold 48 + 24 = 72 clips.\n#### 72\n\n"
             "Question: Weng earns $12 an hour for babysitting. How much did she earn for 50 minutes?\nAnswer: #### 10")
GSM8K_RUBRIC = """\
metadata: {name: GSM8K, version: "1.0.0"}
threshold: 1.0
dimensions:
  answer: {weight: 0.5, description: The final answer, check: {contains: {all: ["#### {expected}"]}}}
  alone: {weight: 0.5, description: "One answer: no invented next question", check: {banned_phrases: ["Question:"]}}
"""
GSM8K_CASES = """\
agent: stopped
cases:
  - id: natalia
    inputs:
      question: >-
        Natalia sold clips to 48 of her friends in April, and then she sold half as many clips in May.
        How many clips did Natalia sell altogether in April and May?
    expected: 72
"""


def test_a_gsm8k_producer_stops_at_its_stop_sequence(project: Project, model: Scripted) -> None:
    """``stop: ["\\n\\n"]`` on the model under test reaches the server (with ``top_p`` and ``seed``) and ends the
    answer before the invented next question; the same producer without it writes on and fails."""
    model.script = lambda prompt, schema: CONTINUED
    write(project, rubric=GSM8K_RUBRIC, agents=f"""\
        model: {{model: {model.model}, max_retries: 0, top_p: 0.9, seed: 1234}}
        agents:
          stopped:
            rubric: published
            producer: {{template: prompts/gsm8k.txt}}
            model: {{stop: ["\\n\\n"]}}
          unstopped:
            rubric: published
            producer: {{template: prompts/gsm8k.txt}}
        """, cases=GSM8K_CASES, files={
        "suites/prompts/gsm8k.txt": GSM8K_PROMPT,
        "suites/unstopped.cases.yaml": GSM8K_CASES.replace("agent: stopped", "agent: unstopped")})
    result = project.run("suites/", "-p", "no:randomly")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*FAILED suites/unstopped.cases.yaml::natalia*"])
    stopped = (project.cycle_dir() / "stopped" / "attempt-1.md").read_text(encoding="utf-8")
    assert stopped.rstrip().endswith("#### 72") and "Question:" not in stopped
    if model.server is not None:  # the settings as sent: stop for the one agent, top_p and seed for both
        requests = model.server.requests
        assert len(requests) == 2 and all((body["top_p"], body["seed"]) == (0.9, 1234) for body in requests)
        assert sorted(str(body.get("stop")) for body in requests) == ["None", "['\\n\\n']"]


def test_a_gsm8k_task_as_lm_eval_runs_it_extracts_both_answers_and_stops_the_model(project: Project,
                                                                                   model: Scripted) -> None:
    """The whole lm-eval shape on each provider: the dataset's reference taken from its `#### 72` by ``extract``,
    the model's final answer by the regex transform (its last match), and the model stopped at a blank line. Without
    the stop sequence the last `####` is the invented next question's (10), and the item fails."""
    model.script = lambda prompt, schema: CONTINUED
    row = {"question": "Natalia sold clips to 48 of her friends in April, and then she sold half as many clips in "
                       "May. How many clips did Natalia sell altogether in April and May?",
           "answer": "Natalia sold 48/2 = 24 clips in May.\nNatalia sold 48+24 = 72 clips altogether.\n#### 72"}
    dataset = ("dataset:\n  file: data/gsm8k.jsonl\n  id: natalia\n  inputs: {question: \"{question}\"}\n"
               "  extract: {final: {from: answer, regex: '#### (\\-?[0-9\\.\\,]+)'}}\n  expected: \"{final}\"\n")
    write(project, rubric="""\
        metadata: {name: GSM8K, version: "1.0.0"}
        threshold: 1.0
        transform: {regex: '#### (\\-?[0-9\\.\\,]+)', match: last}
        dimensions:
          exact: {weight: 1.0, description: The final number, check: {equals: "{expected}"}}
        """, agents=f"""\
        model: {{model: {model.model}, max_retries: 0}}
        agents:
          stopped: {{rubric: published, producer: {{template: prompts/gsm8k.txt}}, model: {{stop: ["\\n\\n"]}}}}
          unstopped: {{rubric: published, producer: {{template: prompts/gsm8k.txt}}}}
        """, cases="agent: stopped\n" + dataset, files={
        "suites/prompts/gsm8k.txt": GSM8K_PROMPT, "suites/data/gsm8k.jsonl": json.dumps(row) + "\n",
        "suites/unstopped.cases.yaml": "agent: unstopped\n" + dataset})
    result = project.run("suites/", "-p", "no:randomly")
    result.assert_outcomes(passed=1, failed=1)
    stopped = eval_of(project, "stopped")["dimensionScores"]["exact"]
    assert stopped["reason"] == "equals '72' (ignoring case, whitespace)"
    assert "expected '72', found '10'" in eval_of(project, "unstopped")["dimensionScores"]["exact"]["reason"]
    assert not any("#### 72" in prompt for prompt in model.prompts)  # the reference never reaches the model
    if model.server is not None:
        assert sorted(str(body.get("stop")) for body in model.server.requests) == ["None", "['\\n\\n']"]


def test_generation_settings_are_in_the_response_cache_key(project: Project, mock: Scripted) -> None:
    """A second run answers from the cache; changing ``stop`` is a new answer, not the cached one."""
    mock.script = lambda prompt, schema: CONTINUED
    agents = textwrap.dedent(f"""\
        model: {{model: {mock.model}, stop: ["\\n\\n"]}}
        agents:
          stopped: {{rubric: published, producer: {{template: prompts/gsm8k.txt}}}}
        """)
    write(project, rubric=GSM8K_RUBRIC, agents=agents, cases=GSM8K_CASES,
          files={"suites/prompts/gsm8k.txt": GSM8K_PROMPT})
    project.run("suites/").assert_outcomes(passed=1)
    project.run("suites/").assert_outcomes(passed=1)
    assert len(mock.prompts) == 1  # the second run's answer came from the cache
    project.agents(agents.replace('stop: ["\\n\\n"]', 'stop: ["\\n#"]'))
    project.run("suites/").assert_outcomes(failed=1)  # ends before "#### 72": a new call, a new answer
    assert len(mock.prompts) == 2
