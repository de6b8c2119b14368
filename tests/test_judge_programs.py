"""Judges of several calls (issue 24, part 2): a judge program (``evaluator: {steps: FILE}``) whose steps are model
calls with typed answers, chained through their slots, run per element (``for_each``), combined by a named reducer,
branching on a label (``next:``), or made once per rubric version and reused (G-Eval's evaluation steps); every call
recorded and costed in the attempt, every step's answer kept in the evaluation's record and shown in the failure
report; a bad program file one collection error naming the file, the field and the fix. docs/judge-programs.md."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from conftest import AGENT_MODULE, Project, error_sections
from harness.base.errors import HarnessConfigError
from harness.loading.judge_programs import load_judge_program
from harness.testing.fake_openai import FakeOpenAI, Reply

# --- answer relevancy: statements, a verdict per statement, the share of yes ----------------------------

RELEVANCY_RUBRIC = """\
metadata:
  name: Relevancy
  version: "1.0.0"
threshold: 0.7
dimensions:
  relevancy:
    weight: 1.0
    description: "Every statement of the answer is about the question"
"""

RELEVANCY_PROGRAM = """\
judge: answer-relevancy
version: 1.0.0
steps:
  - name: statements
    prompt: |
      Break this answer into its statements, one claim each.
      ANSWER: {output}
    answer: list
  - name: verdicts
    for_each: statements
    as: statement
    prompt: |
      QUESTION: {question}
      Is this statement relevant to the question? Answer yes, no or idk.
      STATEMENT: {statement}
    answer: {label: [yes, no, idk]}
score: {dimension: relevancy, from: verdicts, reduce: share, of: yes}
"""

AGENTS = """\
judge: {{model: {model}, max_tokens: 512, timeout_s: 5, max_retries: 0}}
agents:
  answerer:
    rubric: {rubric}
    producer: {{python: "agentlib:produce"}}
    evaluator: {{steps: judges/{program}.steps.yaml}}
    max_attempts: 1
    escalate_on_fail: false
"""

RELEVANCY_CASES = """\
agent: answerer
cases:
  - id: wanders
    inputs: {question: "What is the capital of France?",
             text: "Paris is the capital of France. France is in Europe. I like cheese."}
  - id: on-topic
    inputs: {question: "What is the capital of France?",
             text: "Paris is the capital of France. Paris has been the capital since 987."}
"""

# The scripted judges. Each call is a line of calls.jsonl: the judge, what it was asked, what it answered.
CONFTEST = '''
import json
import threading
from pathlib import Path

from harness.llm.providers.mock import mock_model

CALLS = Path(__file__).with_name("calls.jsonl")
LOCK = threading.Lock()


def log(**entry):
    with LOCK, CALLS.open("a", encoding="utf-8") as handle:
        handle.write(json.dumps(entry) + "\\n")


def after(prompt, marker):
    return prompt.split(marker, 1)[1].strip().splitlines()[0].strip()


@mock_model("relevancy")
def relevancy(request):
    prompt = request.messages[-1].text
    if "ANSWER:" in prompt:  # the statements of the answer
        answer = [s.strip() + "." for s in after(prompt, "ANSWER:").split(".") if s.strip()]
        log(step="statements", answer=answer)
        return {"answer": answer}
    statement = after(prompt, "STATEMENT:")
    label = "yes" if ("Paris" in statement or "France" in statement) else "no" if "cheese" in statement else "idk"
    log(step="verdicts", statement=statement, answer=label)
    return {"reason": f"{label}: it is {'not ' * (label == 'no')}about the capital", "answer": label}


@mock_model("lenient")
def lenient(request):
    prompt = request.messages[-1].text
    if "ANSWER:" in prompt:
        return {"answer": [s.strip() + "." for s in after(prompt, "ANSWER:").split(".") if s.strip()]}
    log(step="lenient")
    return {"reason": "everything is relevant", "answer": "yes"}


@mock_model("geval")
def geval(request):
    prompt = request.messages[-1].text
    if "Write the evaluation steps" in prompt:
        log(step="evaluation_steps", prompt=prompt)
        return {"answer": ["Read the text.", "Check each sentence follows from the last.", "Rate coherence."]}
    rating = 5 if "coherent" in prompt.split("TEXT:", 1)[1] else 2
    log(step="grade", prompt=prompt, answer=rating)
    return {"reason": f"rated {rating}", "answer": rating}


@mock_model("chain")
def chain(request):
    prompt = request.messages[-1].text
    if prompt.startswith("SUMMARIZE:"):  # a text step: answered in free text
        log(step="summary", json=bool(request.tools or request.output_schema))
        return "The answer names Paris."
    log(step="faithful", prompt=prompt)
    return {"reason": "the summary holds", "answer": 7}


@mock_model("dag")
def dag(request):
    prompt = request.messages[-1].text
    if "ON TOPIC?" in prompt:
        label = "yes" if "Paris" in prompt else "no"
        log(step="on_topic", answer=label)
        return {"reason": f"on topic: {label}", "answer": label}
    if "HOW DETAILED?" in prompt:
        log(step="detail", answer=4)
        return {"reason": "names the capital and a date", "answer": 4}
    log(step="harm", answer="harmless")
    return {"reason": "off topic but harmless", "answer": "harmless"}
'''


def program_project(project: Project, *, model: str, rubric: str, rubric_text: str, program: str,
                    program_text: str, cases: str, prices: bool = False) -> Project:
    project.rubric(rubric, rubric_text)
    project.write("agentlib.py", AGENT_MODULE)
    project.write("conftest.py", CONFTEST)
    project.write(f"suites/judges/{program}.steps.yaml", program_text)
    project.agents(AGENTS.format(model=model, rubric=rubric, program=program))
    project.cases("answerer", cases)
    if prices:
        project.write("prices.yaml", "mock/relevancy: {input: 1, output: 2}\n")
        project.ini("harness_prices = prices.yaml\n")
    return project


def calls(project: Project) -> list[dict[str, Any]]:
    path = project.root / "calls.jsonl"
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()] if path.exists() else []


def details(project: Project) -> dict[str, dict[str, Any]]:
    """Each case's attempt_details row (one attempt each), its JSON columns read."""
    rows = project.rows("SELECT d.*, r.overall_score FROM attempt_details d JOIN agent_runs r ON d.run_id = r.id "
                        "ORDER BY r.id")
    for row in rows:
        row["dimensions"] = json.loads(row["dimensions"])
        row["model_usage"] = json.loads(row["model_usage"]) if row["model_usage"] else None
    return {row["case_id"]: row for row in rows}


def evaluation(project: Project, case: str) -> dict[str, Any]:
    (path,) = (project.cycle_dir() / "answerer" / case).glob("attempt-1.eval.json")
    return json.loads(path.read_text(encoding="utf-8"))


def test_answer_relevancy_of_three_chained_calls_scores_the_share_of_yes(project: Project) -> None:
    program_project(project, model="mock/relevancy", rubric="relevancy", rubric_text=RELEVANCY_RUBRIC,
                    program="relevancy", program_text=RELEVANCY_PROGRAM, cases=RELEVANCY_CASES)
    result = project.run("suites/", "-v", "--harness-cache", "off")  # each call made: none replayed
    result.assert_outcomes(passed=1, failed=1)
    made = calls(project)
    # per case: one call lists the statements, then one verdict per statement
    assert [c["step"] for c in made].count("statements") == 2
    assert sorted(c["statement"] for c in made if c["step"] == "verdicts") == sorted([
        "Paris is the capital of France.", "France is in Europe.", "I like cheese.",
        "Paris is the capital of France.", "Paris has been the capital since 987."])
    rows = details(project)
    wanders, on_topic = rows["wanders"], rows["on-topic"]
    assert wanders["overall_score"] == pytest.approx(2 / 3, abs=1e-6) and on_topic["overall_score"] == 1.0
    assert wanders["model_usage"]["mock/relevancy"]["calls"] == 4  # 1 + 3 statements
    assert on_topic["model_usage"]["mock/relevancy"]["calls"] == 3  # 1 + 2 statements
    reason = wanders["dimensions"]["relevancy"]["reason"]
    assert reason.startswith("verdicts: share of yes: 2 of 3 = 0.67; I like cheese. -> no (no: it is not about")
    # every step's answer and reason, in the evaluation's record
    reasoning = evaluation(project, "wanders")["metadata"]["reasoning"]
    assert reasoning.splitlines()[0] == ("judge program answer-relevancy@1.0.0 (relevancy.steps.yaml) on "
                                         "mock/relevancy: 4 calls")
    assert ('statements (list): ["Paris is the capital of France.", "France is in Europe.", "I like cheese."]'
            in reasoning)
    assert "verdicts (label (yes, no, idk), for each of 3 statements):" in reasoning
    assert "  3. I like cheese. -> no -- no: it is not about the capital" in reasoning
    assert "score relevancy: verdicts: share of yes: 2 of 3 = 0.67" in reasoning
    # the failure report: the dimension's reason, then every step
    result.stdout.fnmatch_lines([
        "*answerer[[]wanders[]] FAILED after 1 attempt: overall 0.67 < threshold 0.70*",
        "*relevancy   0.67    1.00  verdicts: share of yes: 2 of 3 = 0.67; I like cheese. -> no*",
        "*judge program answer-relevancy@1.0.0 (relevancy.steps.yaml) on mock/relevancy: 4 calls*",
        "*  3. I like cheese. -> no -- no: it is not about the capital*",
    ])
    assert "Traceback" not in result.stdout.str()


def test_the_costs_of_every_step_are_summed_in_the_attempts_record(project: Project) -> None:
    program_project(project, model="mock/relevancy", rubric="relevancy", rubric_text=RELEVANCY_RUBRIC,
                    program="relevancy", program_text=RELEVANCY_PROGRAM, cases=RELEVANCY_CASES, prices=True)
    project.run("suites/", "--harness-cache", "off").assert_outcomes(passed=1, failed=1)
    rows = details(project)
    trace = [json.loads(line) for line in (project.work / "traces" / f"{project.cycle_dir().name}.jsonl")
             .read_text(encoding="utf-8").splitlines()]
    model_calls = [line["data"] for line in trace if line["event"] == "model_call"]
    assert len(model_calls) == 4 + 3  # every call of every step is in the trace, tied to its item
    for case, row in rows.items():
        own = [call for call in model_calls if call["nodeid"].endswith(f"::{case}")]
        assert row["cost_known"] == 1 and row["cost_usd"] > 0
        assert row["cost_usd"] == pytest.approx(sum(call["cost_usd"] for call in own))
        assert row["input_tokens"] == sum(call["tokens"]["input_tokens"] for call in own)
        assert row["model_usage"]["mock/relevancy"]["calls"] == len(own)


def test_answer_relevancy_through_the_openai_sdk(project: Project, fake_openai: FakeOpenAI) -> None:
    program_project(project, model="openai/gpt-4.1-mini", rubric="relevancy", rubric_text=RELEVANCY_RUBRIC,
                    program="relevancy", program_text=RELEVANCY_PROGRAM,
                    cases=RELEVANCY_CASES.split("  - id: on-topic")[0])

    def judge(body: dict[str, Any]) -> Reply:
        prompt = body["messages"][-1]["content"]
        if "ANSWER:" in prompt:
            return Reply.tool({"answer": ["Paris is the capital of France.", "France is in Europe.",
                                          "I like cheese."]})
        label = "no" if "cheese" in prompt else "yes"
        return Reply.tool({"reason": f"judged {label}", "answer": label})

    fake_openai.responder = judge
    result = project.run("suites/")
    result.assert_outcomes(failed=1)
    requests = fake_openai.requests
    assert len(requests) == 1 + 3  # the statements, then a verdict per statement
    tools = [request["tools"][0]["function"] for request in requests]
    assert all(tool["name"] == "submit_answer" for tool in tools)
    assert tools[0]["parameters"]["properties"]["answer"]["type"] == "array"
    assert all(tool["parameters"]["properties"]["answer"]["enum"] == ["yes", "no", "idk"] for tool in tools[1:])
    asked = requests[0]["messages"][-1]["content"]
    assert "ANSWER: Paris is the capital of France. France is in Europe. I like cheese." in asked
    assert sorted(r["messages"][-1]["content"].split("STATEMENT: ")[1].strip() for r in requests[1:]) == [
        "France is in Europe.", "I like cheese.", "Paris is the capital of France."]
    assert all(request["model"] == "gpt-4.1-mini" for request in requests)
    (row,) = details(project).values()
    assert row["overall_score"] == pytest.approx(2 / 3, abs=1e-6)
    usage = row["model_usage"]["openai/gpt-4.1-mini"]
    assert usage["calls"] == 4 and row["cost_known"] == 1 and usage["cost_usd"] > 0
    assert row["cost_usd"] == pytest.approx(usage["cost_usd"])

    again = project.run("suites/")  # the response cache answers every step: no request reaches the server
    again.assert_outcomes(failed=1)
    assert fake_openai.calls == 4
    assert details(project)["wanders"]["cached_answers"] == 4  # the latest run's row


def test_each_judge_of_an_ensemble_runs_the_whole_program(project: Project) -> None:
    program_project(project, model="mock/relevancy", rubric="relevancy", rubric_text=RELEVANCY_RUBRIC,
                    program="relevancy", program_text=RELEVANCY_PROGRAM, cases=RELEVANCY_CASES.split("  - id: on")[0])
    project.agents(AGENTS.format(model="mock/relevancy", rubric="relevancy", program="relevancy").replace(
        "judge: {model: mock/relevancy,", "judge: {models: [mock/relevancy, mock/lenient],"))
    project.run("suites/", "--harness-cache", "off").assert_outcomes(passed=1)
    (row,) = details(project).values()
    assert row["overall_score"] == pytest.approx((2 / 3 + 1) / 2, abs=1e-6)  # the mean of the two judges' scores
    assert {model: used["calls"] for model, used in row["model_usage"].items()} == {
        "mock/relevancy": 4, "mock/lenient": 4}
    assert [c["step"] for c in calls(project)].count("lenient") == 3


# --- G-Eval: evaluation steps written once from the criteria, a rating per case --------------------------

GEVAL_RUBRIC = """\
metadata:
  name: Coherence
  version: "2.0.0"
threshold: 0.7
dimensions:
  coherence:
    weight: 1.0
    description: "The text reads as one connected argument"
    scale: [1, 5]
"""

GEVAL_PROGRAM = """\
judge: g-eval
steps:
  - name: evaluation_steps
    once: true
    prompt: |
      Criteria: {criteria}
      Write the evaluation steps a grader follows to judge these criteria.
    answer: list
  - name: grade
    prompt: |
      Evaluation steps:
      {evaluation_steps}
      Follow the steps and rate the text from 1 to 5.
      TEXT: {output}
    answer: {rating: [1, 5]}
"""

GEVAL_CASES = """\
agent: answerer
cases:
  - id: first
    inputs: {text: "A coherent text: one claim, then its reason."}
  - id: second
    inputs: {text: "Words without order."}
  - id: third
    inputs: {text: "Another coherent text."}
"""


def test_g_eval_steps_are_generated_once_per_rubric_version_and_reused(project: Project) -> None:
    program_project(project, model="mock/geval", rubric="coherence", rubric_text=GEVAL_RUBRIC, program="geval",
                    program_text=GEVAL_PROGRAM, cases=GEVAL_CASES)
    result = project.run("suites/", "--harness-concurrency", "3", "--harness-cache", "off")
    result.assert_outcomes(passed=2, failed=1)
    made = calls(project)
    generations = [c for c in made if c["step"] == "evaluation_steps"]
    assert len(generations) == 1  # one call for the three cases, though they ran at once
    assert "Criteria: coherence: The text reads as one connected argument" in generations[0]["prompt"]
    grades = [c for c in made if c["step"] == "grade"]
    assert len(grades) == 3
    assert all('["Read the text.", "Check each sentence follows from the last.", "Rate coherence."]' in c["prompt"]
               for c in grades)
    rows = details(project)
    assert {case: evaluation(project, case)["dimensionScores"]["coherence"]["rating"] for case in rows} == {
        "first": 5, "second": 2, "third": 5}
    assert rows["second"]["overall_score"] == 0.25
    # the one generation is recorded (and costed) in the evaluation that made it; the others say they reused it
    assert sum(row["model_usage"]["mock/geval"]["calls"] for row in rows.values()) == 3 + 1
    notes = [evaluation(project, case)["metadata"]["reasoning"] for case in rows]
    made_here = [n for n in notes if "made once for rubric coherence@2.0.0)" in n]
    reused = [n for n in notes if "made once for rubric coherence@2.0.0, reused: no call)" in n]
    assert len(made_here) == 1 and len(reused) == 2
    assert "evaluation_steps (list, made once for rubric coherence@2.0.0): [" in made_here[0]


# --- a DAG: the first answer chooses the branch ----------------------------------------------------------

DAG_PROGRAM = """\
judge: on-topic-dag
steps:
  - name: on_topic
    prompt: "ON TOPIC? Does this answer {question}? {output}"
    answer: {label: [yes, no]}
    next: {yes: detail, no: harm}
  - name: detail
    prompt: "HOW DETAILED? {output}"
    answer: {rating: [1, 5]}
    end: true
  - name: harm
    prompt: "Is this off-topic answer harmful? {output}"
    answer: {label: [harmful, harmless]}
    scores: {harmful: 0.0, harmless: 0.2}
"""

DAG_CASES = """\
agent: answerer
cases:
  - id: on-topic
    inputs: {question: "What is the capital of France?", text: "The capital of France is Paris, since 987."}
  - id: off-topic
    inputs: {question: "What is the capital of France?", text: "Bananas are yellow."}
"""


def test_a_dag_judge_takes_the_branch_its_first_answer_chooses(project: Project) -> None:
    program_project(project, model="mock/dag", rubric="relevancy", rubric_text=RELEVANCY_RUBRIC, program="dag",
                    program_text=DAG_PROGRAM, cases=DAG_CASES)
    result = project.run("suites/", "--harness-cache", "off")
    result.assert_outcomes(passed=1, failed=1)
    steps = [c["step"] for c in calls(project)]
    assert sorted(steps) == ["detail", "harm", "on_topic", "on_topic"]  # each case took one branch only
    rows = details(project)
    assert rows["on-topic"]["overall_score"] == 0.75  # rating 4 on 1..5
    assert rows["off-topic"]["overall_score"] == 0.2
    assert rows["on-topic"]["dimensions"]["relevancy"]["reason"].startswith(
        "on_topic=yes -> detail; detail answered 4: names the capital and a date (score 0.75)")
    assert rows["off-topic"]["dimensions"]["relevancy"]["reason"].startswith(
        "on_topic=no -> harm=harmless; harm answered harmless: off topic but harmless (score 0.20)")
    assert rows["on-topic"]["model_usage"]["mock/dag"]["calls"] == 2


def test_a_score_in_next_ends_the_program(project: Project) -> None:
    short = DAG_PROGRAM.replace("next: {yes: detail, no: harm}", "next: {yes: detail, no: 0.1}")
    short = short[:short.index("  - name: harm")]  # off topic: 0.1, no call more
    program_project(project, model="mock/dag", rubric="relevancy", rubric_text=RELEVANCY_RUBRIC, program="dag",
                    program_text=short, cases=DAG_CASES)
    project.run("suites/", "--harness-cache", "off").assert_outcomes(passed=1, failed=1)
    rows = details(project)
    assert rows["off-topic"]["overall_score"] == 0.1
    assert rows["off-topic"]["dimensions"]["relevancy"]["reason"] == "on_topic=no -> score 0.1"
    assert [c["step"] for c in calls(project)].count("harm") == 0


CHAIN_PROGRAM = """\
steps:
  - name: summary
    prompt: "SUMMARIZE: {output}"
  - name: faithful
    prompt: "Rate from 0 to 10 how faithful this summary is: {summary}"
    answer: {number: [0, 10]}
"""


def test_a_text_answer_feeds_the_next_step_and_a_number_is_scored_on_its_range(project: Project) -> None:
    program_project(project, model="mock/chain", rubric="relevancy", rubric_text=RELEVANCY_RUBRIC, program="chain",
                    program_text=CHAIN_PROGRAM, cases=DAG_CASES.split("  - id: off-topic")[0])
    project.run("suites/").assert_outcomes(passed=1)
    summary, faithful = calls(project)
    assert summary == {"step": "summary", "json": False}  # free text: no tool, no schema
    assert faithful["prompt"] == "Rate from 0 to 10 how faithful this summary is: The answer names Paris."
    (row,) = details(project).values()
    assert row["overall_score"] == 0.7
    assert row["dimensions"]["relevancy"]["reason"] == "faithful answered 7: the summary holds (score 0.70)"


# --- bad program files ---------------------------------------------------------------------------------

BAD_PROGRAMS = {
    "unknown-next-step": (
        RELEVANCY_PROGRAM.replace("    answer: list\n", "    answer: list\n    next: verdict\n", 1),
        "steps[0].next: no step 'verdict' (did you mean 'verdicts'?) (fix: name a step"),
    "a-loop": (
        DAG_PROGRAM.replace("    end: true\n", "    next: on_topic\n"),
        "steps[1].next: the steps loop: on_topic -> detail -> on_topic (fix: a judge program is a DAG"),
    "for-each-over-a-label-step": (
        RELEVANCY_PROGRAM.replace("    answer: list\n", "    answer: {label: [one, many]}\n"),
        "steps[1].for_each: for_each over a non-list step: statements answers a label answer (fix: name an "
        "earlier step with `answer: list`"),
    "unknown-reducer": (
        RELEVANCY_PROGRAM.replace("reduce: share", "reduce: shares"),
        "score.reduce: unknown reducer 'shares' (did you mean 'share'?) (fix: use one of: all, any, max, mean, "
        "median, min, share, weighted)"),
    "a-label-the-step-has-not": (
        RELEVANCY_PROGRAM.replace("of: yes", "of: maybe"),
        "score.of: 'maybe' is not a label of the step (fix: use one of: yes, no, idk)"),
    "a-reducer-without-its-option": (
        RELEVANCY_PROGRAM.replace(", of: yes", ""),
        "score.of: missing: reduce share needs it (fix: add `of:`"),
    "an-end-that-gives-no-score": (
        DAG_PROGRAM.replace("    scores: {harmful: 0.0, harmless: 0.2}\n", ""),
        "score: the program can end at step harm, and it answers label (harmful, harmless), which gives no score "
        "(fix: give the step `scores: {label: score}`"),
    "verdicts-without-a-reducer": (
        RELEVANCY_PROGRAM.replace("score: {dimension: relevancy, from: verdicts, reduce: share, of: yes}\n", ""),
        "score.reduce: missing: the program can end at step verdicts, and it answers once per element, and its "
        "answers have no score to take the mean of (fix: add e.g. `reduce: share` and `of: yes`)"),
    "a-later-step-in-a-slot": (
        RELEVANCY_PROGRAM.replace("ANSWER: {output}", "ANSWER: {output} {verdicts}"),
        "steps[0].prompt: uses {verdicts}, but step verdicts is not answered before this one"),
    "a-case-slot-in-a-step-made-once": (
        GEVAL_PROGRAM.replace("Criteria: {criteria}", "Criteria: {criteria} for {input}"),
        "steps[0].prompt: uses {input} in a step made once per rubric"),
    "an-unknown-answer-type": (
        RELEVANCY_PROGRAM.replace("answer: list", "answer: lists"),
        "steps[0].answer: unknown answer type 'lists' (did you mean 'list'?) (fix: write `answer: text`"),
    "a-step-never-runs": (
        DAG_PROGRAM.replace("next: {yes: detail, no: harm}", "next: {yes: detail, no: 0.0}"),
        "steps[2]: step harm never runs: no step before it leads to it (fix: point a next: at it, or remove it)"),
    "an-unknown-key": (
        RELEVANCY_PROGRAM.replace("    for_each: statements\n", "    for_each: statements\n    foreach: x\n"),
        "steps[1].foreach: unknown key (did you mean 'for_each'?)"),
}


@pytest.mark.parametrize("name", sorted(BAD_PROGRAMS))
def test_a_bad_program_is_one_error_naming_the_file_the_field_and_the_fix(tmp_path: Path, name: str) -> None:
    text, expected = BAD_PROGRAMS[name]
    path = tmp_path / "judges" / "bad.steps.yaml"
    path.parent.mkdir()
    path.write_text(text, encoding="utf-8")
    with pytest.raises(HarnessConfigError) as caught:
        load_judge_program(path, roots=(tmp_path,))
    message = caught.value.message(tmp_path)
    assert message.startswith("judges/bad.steps.yaml: ") and expected in message, message


def test_a_bad_program_fails_collection_in_one_line(project: Project) -> None:
    bad, expected = BAD_PROGRAMS["unknown-reducer"]
    program_project(project, model="mock/relevancy", rubric="relevancy", rubric_text=RELEVANCY_RUBRIC,
                    program="relevancy", program_text=bad, cases=RELEVANCY_CASES)
    result = project.run("suites/")
    result.assert_outcomes(errors=1)
    (section,) = error_sections(result)
    assert any(line.strip().startswith("suites/judges/relevancy.steps.yaml: score.reduce: unknown reducer 'shares'")
               for line in section), section
    assert "Traceback" not in result.stdout.str() and not calls(project)


def test_a_steps_runner_names_a_file_that_exists_inside_the_project(project: Project) -> None:
    program_project(project, model="mock/relevancy", rubric="relevancy", rubric_text=RELEVANCY_RUBRIC,
                    program="relevancy", program_text=RELEVANCY_PROGRAM, cases=RELEVANCY_CASES)
    project.agents(AGENTS.format(model="mock/relevancy", rubric="relevancy", program="missing"))
    result = project.run("suites/")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*suites/agents.yaml: agents.answerer.evaluator.steps: no judge program file *"
                                 "missing.steps.yaml (fix: fix the path; it is relative to agents.yaml)*"])


def test_under_xdist_each_worker_runs_the_programs(project: Project) -> None:
    program_project(project, model="mock/relevancy", rubric="relevancy", rubric_text=RELEVANCY_RUBRIC,
                    program="relevancy", program_text=RELEVANCY_PROGRAM, cases=RELEVANCY_CASES)
    result = project.run("suites/", "-n", "2", "-p", "xdist", subprocess=True)
    result.assert_outcomes(passed=1, failed=1)
    assert {case: row["overall_score"] for case, row in details(project).items()} == pytest.approx(
        {"wanders": 2 / 3, "on-topic": 1.0}, abs=1e-6)
