"""The library of standard graders (docs/graders.md), each used by name as a user does (`rubric: graders/NAME`) and
run on worked examples: an answer, its reference, and the verdict and score the published method gives."""

from __future__ import annotations

import fnmatch
import json
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from conftest import AGENT_MODULE, Project
from harness.checks.scorers import chosen_letters, token_f1
from harness.checks.compare import NORMALIZATIONS
from harness.base.errors import HarnessConfigError
from harness.base.usage import Usage
from harness.evaluation.judge_program import read_answer
from harness.llm import ModelReply
from harness.llm.providers.mock import forget_mock_model, mock_model
from harness.loading.judge_programs import ProgramStep, StepAnswer, load_judge_program
from harness.loading.library import library_evaluators, library_pair_judges
from harness.loading.rubrics import GRADERS_DIR, library_graders
from harness.testing.fake_openai import FakeOpenAI, Reply

# (grader, answer, reference, passed, score): worked by hand from each method's definition
WORKED = [
    ("exact", "The Eiffel Tower.", "eiffel tower", True, 1.0),
    ("exact", "The Eiffel Tower in Paris", "eiffel tower", False, 0.0),
    ("exact", "Paris", ["Lutetia", "paris"], True, 1.0),  # any of several references
    ("includes", "I would say it is Paris, France.", "paris", True, 1.0),
    ("includes", "I would say it is Lyon.", "Paris", False, 0.0),
    ("match", "Let me think. The capital is Paris.", "paris", True, 1.0),  # at the end, full stop aside
    ("match", "Paris is the capital, not Lyon", "Paris", False, 0.0),  # at the beginning only
    ("numeric-match", "48 + 24 = 72 clips in all: 72", "72", True, 1.0),
    ("numeric-match", "She sold 1,000 clips", "1000", True, 1.0),  # numbers compared as numbers
    ("numeric-match", "72 clips, or 73 if you count the broken one", "72", False, 0.0),  # the last number counts
    ("choice", "The mitochondria makes energy.\nANSWER: B", "B", True, 1.0),
    ("choice", "ANSWER: A, C", ["C", "A"], True, 1.0),  # several letters: all of them, in any order
    ("choice", "ANSWER: A", ["A", "C"], False, 0.0),
    ("choice", "(D)", "B", False, 0.0),
    ("f1", "Denver Broncos", "the Denver Broncos", True, 1.0),  # articles set aside
    ("f1", "the Broncos of Denver", "Denver Broncos", True, 0.8),  # 2 common words: P 2/3, R 2/2
    ("f1", "Carolina Panthers", "Denver Broncos", False, 0.0),
]


def graders_project(project: Project, examples: list[tuple[str, str, Any, bool, float]]) -> None:
    project.write("agentlib.py", AGENT_MODULE)
    agents = ["agents:"]
    for grader in sorted({example[0] for example in examples}):
        name = grader.replace("-", "_")
        agents += [f"  {name}:", f"    rubric: graders/{grader}", '    producer: {python: "agentlib:produce"}']
        cases = [{"id": f"ex{number}", "inputs": {"text": answer}, "expected": reference}
                 for number, (which, answer, reference, _, _) in enumerate(examples) if which == grader]
        project.cases(name, json.dumps({"agent": name, "cases": cases}))
    project.agents("\n".join(agents) + "\n")


def test_every_grader_gives_its_worked_verdicts_and_scores(project: Project) -> None:
    graders_project(project, WORKED)
    result = project.run("suites/", "-q")
    assert result.ret == 1  # the examples that should fail, fail
    scores = {(r["rubric_name"], r["case_id"]): r for r in project.runs()}
    for number, (grader, _, _, passed, score) in enumerate(WORKED):
        run = scores[(grader, f"ex{number}")]
        assert (run["outcome"] == "passed") == passed, (grader, number, run["outcome"])
        assert run["overall_score"] == pytest.approx(score), (grader, number)


def test_the_library_lists_each_grader_and_a_wrong_name_is_one_line(project: Project) -> None:
    assert {"graders/exact", "graders/includes", "graders/match", "graders/numeric-match", "graders/choice",
            "graders/f1"} <= set(library_graders())
    project.write("agentlib.py", AGENT_MODULE)
    project.agents('agents:\n  a:\n    rubric: graders/f2\n    producer: {python: "agentlib:produce"}\n')
    project.cases("a", "agent: a\ncases:\n  - {id: one, inputs: {text: x}, expected: x}\n")
    result = project.run("suites/")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(["suites/agents.yaml: agents.a.rubric: no grader 'graders/f2' in the library "
                                 "(did you mean 'graders/f1'?) (fix: use one of: graders/answer-relevancy, *)"])
    assert "Traceback" not in result.stdout.str()


@pytest.mark.parametrize(("answer", "letters"), [
    ("ANSWER: B", {"B"}), ("answer: b", {"B"}), ("Thinking...\nANSWER: A\nWait.\nANSWER: C", {"C"}),
    ("ANSWER: A and D", {"A", "D"}), ("B)", {"B"}), ("  (c) ", {"C"}), ("I pick B because", None),
])
def test_a_multiple_choice_answer_reads_as_the_letters_it_chose(answer: str, letters: set[str] | None) -> None:
    assert chosen_letters(answer) == (frozenset(letters) if letters is not None else None)


def test_token_f1_is_squads() -> None:
    # SQuAD: precision and recall over the normalised words, counted with repeats
    assert token_f1("a cat and a cat", "the cat", NORMALIZATIONS) == pytest.approx(2 * (1 / 3) * 1 / (1 / 3 + 1))
    assert token_f1("", "", NORMALIZATIONS) == 1.0 and token_f1("", "x", NORMALIZATIONS) == 0.0


def test_a_case_without_a_reference_is_one_clear_error(project: Project) -> None:
    project.write("agentlib.py", AGENT_MODULE)
    project.agents('agents:\n  a:\n    rubric: graders/f1\n    producer: {python: "agentlib:produce"}\n')
    project.cases("a", "agent: a\ncases:\n  - {id: one, inputs: {text: x}}\n")
    result = project.run("suites/")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(["suites/a.cases.yaml: case one: the check of dimension f1 uses {expected}, which "
                                 "this case cannot fill *(fix: give the case `expected:`*"])
    assert "Traceback" not in result.stdout.str()



# === the model-graded graders =====================================================================================
#
# Each brings its judge: a chat template and the pattern its verdict is read with, a judge program, or a pairwise
# prompt (harness/loading/graders/judges/). Each runs here on worked examples, judged by a scripted judge that answers
# as a real judge would for that example: the verdicts and scores must be the published method's computation on those
# answers. The judge is a mock model of the project's conftest.py, so xdist workers have it too.

JUDGE = r'''
import json
import threading
from pathlib import Path

from harness.llm.providers.mock import mock_model
from harness.llm.schema_fill import evaluator_output

HERE = Path(__file__).parent
SCRIPT = json.loads((HERE / "judge-script.json").read_text(encoding="utf-8"))
LOCK = threading.Lock()


def log(**entry):
    with LOCK, (HERE / "judge-calls.jsonl").open("a", encoding="utf-8") as handle:
        handle.write(json.dumps(entry) + "\n")


def between(text, start, end):
    return text.split(start, 1)[1].split(end, 1)[0].strip()


@mock_model("grader-judge")
def judge(request):
    """Each library grader's prompt answered as a real judge would for the worked examples of judge-script.json."""
    prompt = request.messages[-1].text
    if not (request.tools or request.output_schema):  # free text: a chat template's judge, or G-Eval's rating
        answer = next(answer for answer in SCRIPT["replies"] if answer in prompt)
        log(kind="text", system=request.cached_system_prefix or request.system, prompt=prompt,
            logprobs=request.top_logprobs)
        return SCRIPT["replies"][answer]
    if "<Rubric>" in prompt:  # promptfoo's llm-rubric: the structured verdict, 1 (pass) or 0 (fail)
        log(kind="rubric", system=request.cached_system_prefix or request.system, prompt=prompt)
        schema = request.output_schema or request.tools[0].schema
        return evaluator_output(schema, {}, SCRIPT["scores"][between(prompt, "<Output>", "</Output>")], 0.0)
    if "evaluation steps a careful grader follows" in prompt:  # G-Eval's steps, written from the criterion
        log(kind="evaluation_steps", prompt=prompt)
        return {"answer": SCRIPT["evaluation_steps"]}
    if "Break the response" in prompt or "List the factual claims" in prompt:  # statements, claims
        output = prompt.split("Response:\n", 1)[1].strip()
        log(kind="list", output=output)
        return {"answer": SCRIPT["statements"][output]}
    element = (prompt.split("Statement: ", 1)[1] if "Statement: " in prompt else
               prompt.split("Claim: ", 1)[1] if "Claim: " in prompt else between(prompt, "Passage:\n", "Response:"))
    label = SCRIPT["verdicts"][element.strip()]
    log(kind="verdict", element=element.strip(), answer=label, prompt=prompt)
    return {"reason": f"{label}, by the question and the context", "answer": label}


@mock_model("pair-grader-judge")
def pair_judge(request):
    """Prefers the answer a person would (SCRIPT["better"]); between two it likes equally, MT-bench's judge says
    it is a tie, and the judges without a tie choose the one shown first (a position bias)."""
    prompt = request.messages[-1].text
    if "[Assistant A's answer]" in prompt:
        shown = (between(prompt, "[Assistant A's answer]", "[End of assistant A's answer]"),
                 between(prompt, "[Assistant B's answer]", "[End of assistant B's answer]"))
        form = ("Both are fine; A is right. [[A]]", "B is right. [[B]]", "Equally good. [[C]]")
    elif "Model m:" in prompt:
        shown = between(prompt, 'Model m:\n"""', '"""'), between(prompt, 'Model M:\n"""', '"""')
        form = ("m", "M", "m")
    else:
        shown = between(prompt, "### Response A", "### Response B"), between(prompt, "### Response B", "### Reference")
        form = ("Feedback: A matches the reference. [RESULT] A", "Feedback: B matches the reference. [RESULT] B",
                "Feedback: both match the reference. [RESULT] A")
    good = [text in SCRIPT["better"] for text in shown]
    verdict = form[2] if good[0] == good[1] else form[0] if good[0] else form[1]
    log(kind="pair", system=request.cached_system_prefix or request.system, shown=shown, verdict=verdict)
    return verdict
'''

PRODUCER = '''\
import json
from pathlib import Path

ANSWERS = json.loads(Path(__file__).with_name("answers.json").read_text(encoding="utf-8"))


def answer(request, style=None):
    given = ANSWERS[request["case"]]
    return given[style] if style else given
'''


@dataclass(frozen=True)
class Judged:
    """A worked example of a model-graded grader: the case, the answer judged, what the judge answers (its text,
    or a program's lists and verdicts), and the verdict and score the published method gives."""

    grader: str
    case: str
    inputs: dict[str, Any]
    answer: str
    passed: bool
    score: float
    expected: Any = None
    reply: str | None = None  # a chat template's judge: its whole answer
    statements: tuple[str, ...] = ()  # a program's list step: the statements or claims of the answer
    verdicts: dict[str, str] = field(default_factory=dict)  # a program's verdict per element (statement, passage)
    criteria: str | None = None  # G-Eval's criterion, a case's own
    verdict: float | None = None  # a structured verdict's score (promptfoo's llm-rubric: pass 1, fail 0)


GEVAL_CRITERION = "coherence: The response is well organised: each sentence follows from the one before it."
RELEVANT_Q = "What is the capital of France?"

JUDGED = [
    # Inspect's model_graded_qa, partial credit: C 1, P 0.5, I 0 (only C passes)
    Judged("model-graded-qa", "qa-c", {"question": "What is the capital of Peru?"}, "The capital of Peru is Lima.",
           True, 1.0, expected="Names Lima as the capital",
           reply="The criterion asks for Lima. The answer names Lima as the capital.\nGRADE: C"),
    Judged("model-graded-qa", "qa-p", {"question": "Name the two official languages of Canada."},
           "English is one of them.", False, 0.5, expected="Names both English and French",
           reply="It names English but not French, so it meets only part of the criterion.\nGRADE: P"),
    Judged("model-graded-qa", "qa-i", {"question": "What is 7 times 8?"}, "7 times 8 is 54.", False, 0.0,
           expected="Gives 56", reply="The criterion needs 56; the answer says 54.\nGRADE: I"),
    # Inspect's model_graded_fact, partial credit
    Judged("model-graded-fact", "fact-c", {"question": "Who wrote Hamlet?"},
           "Hamlet was written by Shakespeare, around 1600.", True, 1.0, expected="William Shakespeare",
           reply="The expert names Shakespeare and so does the answer; the date is extra.\nGRADE: C"),
    Judged("model-graded-fact", "fact-p", {"question": "Which two gases make up most of the air?"},
           "Mostly nitrogen.", False, 0.5, expected="Nitrogen and oxygen",
           reply="Nitrogen is there, oxygen is missing.\nGRADE: P"),
    Judged("model-graded-fact", "fact-i", {"question": "At what temperature does water boil at sea level?"},
           "It boils at 90 degrees Celsius.", False, 0.0, expected="100 degrees Celsius",
           reply="The expert says 100 degrees, the answer 90: it contradicts the expert.\nGRADE: I"),
    # openai/evals' closedqa: reasoning, then Y or N alone on the last line; Y 1, N 0
    Judged("closedqa", "cqa-y", {"question": "Write a title for: cats sleep a lot."}, "Sleepy Cats", True, 1.0,
           expected="conciseness: Is the title concise?",
           reply="The title has two words and says what the text is about, so it is concise.\nY\nY"),
    Judged("closedqa", "cqa-n", {"question": "Write a title for: dogs love walks."},
           "A Long And Winding Reflection On Why Dogs Of Every Breed Love Their Daily Walks", False, 0.0,
           expected="conciseness: Is the title concise?",
           reply="Fifteen words for a three-word text is not concise.\nN\nN"),
    # MT-bench single: [[rating]] from 1 to 10 on a 0.5 step, scored (rating - 1) / 9
    Judged("mt-bench", "mt-good", {"question": "Explain why the sky is blue, in one sentence."},
           "Air scatters the short blue wavelengths of sunlight more than the long red ones, so the sky looks blue.",
           True, 7.5 / 9, reply="Accurate, clear and as brief as asked. Rating: [[8.5]]"),
    Judged("mt-bench", "mt-poor", {"question": "Give three tips for sleeping well."}, "Sleep.", False, 1 / 9,
           reply="One word, and no tips. Rating: [[2]]"),
    # MT-bench single with a reference answer
    Judged("mt-bench-reference", "mtr-right", {"question": "What is 15% of 80?"}, "15% of 80 is 0.15 x 80 = 12.",
           True, 8 / 9, expected="12", reply="It matches the reference, 12, and shows the working. Rating: [[9]]"),
    Judged("mt-bench-reference", "mtr-wrong", {"question": "Solve 2x + 3 = 11."}, "x = 7", False, 0.5 / 9,
           expected="x = 4", reply="The reference gives x = 4 (2x = 8); the answer's 7 is wrong. Rating: [[1.5]]"),
    # Prometheus absolute: feedback, then [RESULT] N from 1 to 5, scored (N - 1) / 4
    Judged("prometheus-absolute", "prom-4", {"question": "Describe the water cycle in two sentences."},
           "Water evaporates from the sea, condenses into clouds and falls back as rain.", True, 0.75,
           expected="Water evaporates, condenses into clouds and falls as precipitation. It collects in rivers and "
                    "seas, and the cycle begins again.",
           reply="Feedback: Evaporation, condensation and rain are right; it leaves out how the water collects. "
                 "[RESULT] 4"),
    Judged("prometheus-absolute", "prom-2", {"question": "List the primary colours of light."},
           "Red, yellow and blue.", False, 0.25, expected="Red, green and blue.",
           reply="Feedback: These are the primary colours of paint, not of light; green is missing. [RESULT] 2"),
    # DeepEval's answer relevancy: the share of statements that are not "no" (idk counts as relevant); none: 1
    Judged("answer-relevancy", "rel-mixed", {"question": RELEVANT_Q},
           "Paris is the capital of France. It has been the capital since 987. I like cheese.", True, 2 / 3,
           statements=("Paris is the capital of France.", "It has been the capital since 987.", "I like cheese."),
           verdicts={"Paris is the capital of France.": "yes", "It has been the capital since 987.": "idk",
                     "I like cheese.": "no"}),
    Judged("answer-relevancy", "rel-off", {"question": "How many legs does a spider have?"},
           "Spiders spin webs. Some spiders are venomous.", False, 0.0,
           statements=("Spiders spin webs.", "Some spiders are venomous."),
           verdicts={"Spiders spin webs.": "no", "Some spiders are venomous.": "no"}),
    Judged("answer-relevancy", "rel-none", {"question": "What is the speed of light?"}, "Hmm.", True, 1.0),
    # DeepEval's faithfulness: the share of the output's claims the context does not contradict; none: 1
    Judged("faithfulness", "faith-mixed", {"question": "Tell me about the Eiffel Tower.",
                                           "context": ["The Eiffel Tower is in Paris.", "It was completed in 1889."]},
           "The Eiffel Tower is in Paris. It was completed in 1899. It is repainted every seven years.", True, 2 / 3,
           statements=("The Eiffel Tower is in Paris.", "The Eiffel Tower was completed in 1899.",
                       "The Eiffel Tower is repainted every seven years."),
           verdicts={"The Eiffel Tower is in Paris.": "yes", "The Eiffel Tower was completed in 1899.": "no",
                     "The Eiffel Tower is repainted every seven years.": "idk"}),
    Judged("faithfulness", "faith-wrong", {"question": "How high is Mount Everest?",
                                           "context": "Mount Everest, 8,849 metres high, is the highest mountain."},
           "Mount Everest is 9,500 metres high, the second-highest mountain.", False, 0.0,
           statements=("Mount Everest is 9,500 metres high.", "Mount Everest is the second-highest mountain."),
           verdicts={"Mount Everest is 9,500 metres high.": "no",
                     "Mount Everest is the second-highest mountain.": "no"}),
    # DeepEval's hallucination, turned round: the share of passages NOT contradicted (1 - DeepEval's score)
    Judged("hallucination", "hall-one", {"question": "Tell me about Paris.",
                                         "context": ["Paris is the capital of France.", "The Seine flows through Paris.",
                                                     "Paris has about two million inhabitants."]},
           "Paris, the capital of France, has ten million inhabitants.", True, 2 / 3,  # DeepEval: 1/3
           verdicts={"Paris is the capital of France.": "yes", "The Seine flows through Paris.": "yes",
                     "Paris has about two million inhabitants.": "no"}),
    Judged("hallucination", "hall-all", {"question": "When does water boil and freeze?",
                                         "context": ["Water boils at 100 degrees Celsius at sea level.",
                                                     "Water freezes at 0 degrees Celsius."]},
           "Water boils at 50 degrees and never freezes.", False, 0.0,  # DeepEval: 1.0, every passage contradicted
           verdicts={"Water boils at 100 degrees Celsius at sea level.": "no",
                     "Water freezes at 0 degrees Celsius.": "no"}),
    # G-Eval: steps written once from the criterion, then a 1-5 rating, (rating - 1) / 4 (the mock gives no log
    # probabilities, so the written rating stands: the weighted one is the fake OpenAI server's test below)
    Judged("g-eval", "ge-good", {"question": "Summarise why leaves fall in autumn."},
           "Trees shed leaves to save water in winter. To do so, they seal each leaf's stem, and the leaf drops.",
           True, 0.75, criteria=GEVAL_CRITERION, reply="Each sentence follows from the one before.\nScore: 4"),
    Judged("g-eval", "ge-poor", {"question": "Summarise how bread rises."}, "Yeast. Ovens are hot. Flour is white.",
           False, 0.25, criteria=GEVAL_CRITERION, reply="The sentences do not connect.\nScore: 2"),
    # promptfoo's llm-rubric: the judge's verdict on the rubric (the case's expected:), pass 1, fail 0
    Judged("llm-rubric", "lr-pass", {"question": "Greet the team in French."}, "Bonjour à toute l'équipe !", True,
           1.0, expected="Greets the reader in French", verdict=1.0),
    Judged("llm-rubric", "lr-fail", {"question": "Say goodbye like a pirate."}, "Farewell, dear friends.", False, 0.0,
           expected="Sounds like a pirate", verdict=0.0),
]
EVALUATION_STEPS = ["Read the input and the response.", "Check that each sentence follows from the one before.",
                    "Rate the response's coherence from 1 to 5."]


def judge_script(examples: list[Judged], **more: Any) -> dict[str, Any]:
    return {"replies": {e.answer: e.reply for e in examples if e.reply},
            "statements": {e.answer: list(e.statements) for e in examples if not e.reply},
            "verdicts": {k: v for e in examples for k, v in e.verdicts.items()},
            "scores": {e.answer: e.verdict for e in examples if e.verdict is not None},
            "evaluation_steps": EVALUATION_STEPS, **more}


def judged_project(project: Project, examples: list[Judged], judge: str = "mock/grader-judge") -> None:
    """An agent per grader (`rubric: graders/NAME`, no evaluator of its own), a case per example."""
    project.write("conftest.py", JUDGE)
    project.write("agentlib_graders.py", PRODUCER)
    project.write("answers.json", json.dumps({e.case: e.answer for e in examples}))
    project.write("judge-script.json", json.dumps(judge_script(examples)))
    agents = [f"judge: {{model: {judge}, max_retries: 0}}", "agents:"]
    for grader in sorted({e.grader for e in examples}):
        name = grader.replace("-", "_")
        agents += [f"  {name}:", f"    rubric: graders/{grader}", '    producer: {python: "agentlib_graders:answer"}',
                   "    max_attempts: 1"]
        cases = [{"id": e.case, "inputs": e.inputs, **({"expected": e.expected} if e.expected is not None else {}),
                  **({"criteria": [e.criteria]} if e.criteria else {})} for e in examples if e.grader == grader]
        project.cases(name, json.dumps({"agent": name, "cases": cases}))
    project.agents("\n".join(agents) + "\n")


def judge_calls(project: Project) -> list[dict[str, Any]]:
    log = project.root / "judge-calls.jsonl"
    return [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()] if log.exists() else []


def eval_json(project: Project, grader: str, case: str) -> dict[str, Any]:
    agent = grader.replace("-", "_")  # an agent of one case keeps its attempts without a case folder
    (path,) = (sorted(project.work.glob(f"runs/*/{agent}/{case}/attempt-1.eval.json"))
               or sorted(project.work.glob(f"runs/*/{agent}/attempt-1.eval.json")))
    return json.loads(path.read_text(encoding="utf-8"))


def test_every_model_graded_grader_gives_its_published_verdicts_and_scores(project: Project) -> None:
    judged_project(project, JUDGED)
    result = project.run("suites/", "-q", "-n", "2", subprocess=True)
    assert result.ret == 1, result.stdout.str()[-3000:]  # the examples that should fail, fail
    runs = {(r["rubric_name"], r["case_id"]): r for r in project.runs()}
    for example in JUDGED:
        run = runs[(example.grader, example.case)]
        assert (run["outcome"] == "passed") == example.passed, (example.case, run["outcome"])
        assert run["overall_score"] == pytest.approx(example.score, abs=1e-6), example.case
    assert len(runs) == len(JUDGED)


def test_each_grader_reads_the_verdict_as_its_method_writes_it(project: Project) -> None:
    examples = [e for e in JUDGED if e.case in ("qa-p", "cqa-n", "mt-good", "prom-4", "rel-mixed", "faith-mixed",
                                                 "hall-one", "ge-good", "ge-poor", "lr-fail")]
    judged_project(project, examples)
    project.run("suites/")
    assert eval_json(project, "model-graded-qa", "qa-p")["dimensionScores"]["grade"]["label"] == "P"
    assert eval_json(project, "closedqa", "cqa-n")["dimensionScores"]["criterion"]["label"] == "N"
    quality = eval_json(project, "mt-bench", "mt-good")["dimensionScores"]["quality"]
    assert quality["rating"] == 8.5 and quality["score"] == pytest.approx(7.5 / 9, abs=1e-6)
    helpfulness = eval_json(project, "prometheus-absolute", "prom-4")["dimensionScores"]["helpfulness"]
    assert helpfulness["rating"] == 4 and helpfulness["reason"].startswith("Feedback: Evaporation")
    relevancy = eval_json(project, "answer-relevancy", "rel-mixed")["dimensionScores"]["relevancy"]
    assert relevancy["reason"].startswith("verdicts: share of yes or idk: 2 of 3 = 0.67")
    assert "I like cheese. -> no" in relevancy["reason"]
    assert "1899. -> no" in eval_json(project, "faithfulness", "faith-mixed")["dimensionScores"]["faithfulness"][
        "reason"]
    agreement = eval_json(project, "hallucination", "hall-one")["dimensionScores"]["agreement"]
    assert "two million inhabitants. -> no" in agreement["reason"]
    assert eval_json(project, "llm-rubric", "lr-fail")["dimensionScores"]["rubric"]["score"] == 0
    calls = judge_calls(project)
    # what each judge was shown: the template's slots filled from the case
    (rubric,) = [c for c in calls if c["kind"] == "rubric"]  # promptfoo's two messages: instructions, then the case
    assert rubric["system"].startswith("You grade one output against a rubric that a user wrote.")
    assert rubric["prompt"] == ("<Output>\nFarewell, dear friends.\n</Output>\n<Rubric>\nrubric: Sounds like a pirate\n"
                                "</Rubric>")
    prom = next(c for c in calls if c["kind"] == "text" and "water cycle" in c["prompt"])
    assert "### Reference answer (a score of 5)\nWater evaporates, condenses" in prom["prompt"]
    assert "- 5: It carries out the instruction fully and correctly" in prom["prompt"]  # the score rubric
    assert prom["system"].startswith("You are a fair judge.")
    mt = next(c for c in calls if c["kind"] == "text" and "sky is blue" in c["prompt"])
    assert mt["system"].startswith("You are an impartial judge") and "[[6]]" in mt["system"]
    faith = [c for c in calls if c["kind"] == "verdict" and "Eiffel" in c["element"]]
    assert len(faith) == 3 and all('["The Eiffel Tower is in Paris.", "It was completed in 1889."]' in c["prompt"]
                                   for c in faith)  # each claim judged against the whole retrieval context
    # G-Eval: the evaluation steps written once, from the criterion, and followed for both cases
    (steps,) = [c for c in calls if c["kind"] == "evaluation_steps"]
    assert GEVAL_CRITERION in steps["prompt"]
    ratings = [c for c in calls if c["kind"] == "text" and "Evaluation steps:" in c["prompt"]]
    assert len(ratings) == 2 and all("2. Check that each sentence follows" in c["prompt"] for c in ratings)
    assert all(c["logprobs"] == 20 for c in ratings)  # the log probabilities asked for, though the mock has none
    coherence = eval_json(project, "g-eval", "ge-good")["dimensionScores"]["coherence"]
    assert coherence["score"] == 0.75 and "[plain rating 4: mock/grader-judge returned no log probabilities]" in \
        coherence["reason"]
    reused = eval_json(project, "g-eval", "ge-poor")["metadata"]["reasoning"]
    other = eval_json(project, "g-eval", "ge-good")["metadata"]["reasoning"]
    assert "reused: no call" in reused + other and ("reused: no call" in reused) != ("reused: no call" in other)


# --- through the fake OpenAI server: the real SDK path, log probabilities and all ----------------------------------

def openai_reply(answers: dict[str, str], steps: list[str]) -> Any:
    """The fake server's responder: a tool call for a JSON step (G-Eval's steps), else the scripted text for the
    answer the prompt shows."""

    def reply(body: dict[str, Any]) -> Reply:
        prompt = str(body["messages"][-1].get("content") or "")
        tool = next((t["function"] for t in body.get("tools") or []), None)
        if tool is not None:
            return Reply.tool({"answer": steps}, name=tool["name"])
        return Reply.text(next(text for answer, text in answers.items() if answer in prompt))

    return reply


def test_mt_bench_through_the_openai_sdk(project: Project, fake_openai: FakeOpenAI) -> None:
    """The chat template's system message is the request's system message; [[7.5]] is (7.5 - 1) / 9."""
    example = Judged("mt-bench", "mt-half", {"question": "Name a prime number above 10."}, "11 is prime.", True,
                     6.5 / 9, reply="Correct and brief, though it could say why. Rating: [[7.5]]")
    judged_project(project, [example], judge="openai/gpt-4.1-mini")
    fake_openai.responder = openai_reply({example.answer: example.reply or ""}, [])
    project.run("suites/").assert_outcomes(passed=1)
    (request,) = fake_openai.requests
    system, user = request["messages"]
    assert system["role"] == "system" and system["content"].startswith("You are an impartial judge of the answer")
    assert user["content"] == ("[Question]\nName a prime number above 10.\n\n[Assistant's answer]\n11 is prime.\n"
                               "[End of the assistant's answer]")
    quality = eval_json(project, "mt-bench", "mt-half")["dimensionScores"]["quality"]
    assert quality["rating"] == 7.5 and quality["score"] == pytest.approx(6.5 / 9, abs=1e-6)


COHERENCE = """\
metadata: {name: Coherence, version: "1.0.0"}
threshold: 0.5
dimensions:
  coherence:
    weight: 1.0
    description: The response is well organised, each sentence following from the one before it
    scale: [1, 5]
"""


def test_g_eval_weighs_the_rating_by_the_servers_log_probabilities(project: Project, fake_openai: FakeOpenAI) -> None:
    """A rubric of one's own judged by the library's G-Eval (`evaluator: graders/g-eval`). At the rating's token the
    server gives 3 a probability of 0.6 and 4 one of 0.4: the rating is 3 x 0.6 + 4 x 0.4 = 3.4, scored
    (3.4 - 1) / 4 = 0.6, the judge's own 3 kept beside it; the steps are written once for both cases."""
    answers = {"leaves": "Trees shed leaves to save water. The stems seal, and the leaves drop.",
               "bread": "Yeast makes gas. The gas lifts the dough."}
    judged_project(project, [])
    project.write("answers.json", json.dumps(answers))
    project.rubric("coherence", COHERENCE)
    project.agents('judge: {model: openai/gpt-4.1-mini, max_retries: 0}\nagents:\n  coherent:\n    rubric: coherence\n'
                   '    producer: {python: "agentlib_graders:answer"}\n    evaluator: graders/g-eval\n')
    project.cases("coherent", "agent: coherent\ncases:\n  - {id: leaves, inputs: {question: Why do leaves fall?}}\n"
                              "  - {id: bread, inputs: {question: How does bread rise?}}\n")
    fake_openai.token_choices = {"3": {"3": 0.6, "4": 0.4}}
    fake_openai.responder = openai_reply({text: "The sentences follow on from each other.\nScore: 3"
                                          for text in answers.values()}, EVALUATION_STEPS)
    project.run("suites/").assert_outcomes(passed=2)
    tools = [r for r in fake_openai.requests if r.get("tools")]
    ratings = [r for r in fake_openai.requests if not r.get("tools")]
    assert len(tools) == 1 and len(ratings) == 2  # the evaluation steps, made once for the rubric
    assert "coherence: The response is well organised" in tools[0]["messages"][-1]["content"]
    assert all(r["logprobs"] is True and r["top_logprobs"] == 20 for r in ratings)
    coherence = eval_json(project, "coherent", "leaves")["dimensionScores"]["coherence"]
    assert coherence["rating"] == 3 and coherence["score"] == pytest.approx(0.6, abs=1e-6)
    assert coherence["weighted"] == {"used": True, "rating": 3.4, "probabilities": {"3": 0.6, "4": 0.4}}
    assert "[probability-weighted rating 3.4 from 3 (0.60), 4 (0.40)]" in coherence["reason"]


# --- pairwise: MT-bench's pair judge, AlpacaEval's preference, Prometheus's relative grading ------------------------

PAIR_ANSWERS = {"peru": {"right": "Lima is the capital of Peru.", "wrong": "Cusco is the capital of Peru."},
                "sum": {"right": "4", "wrong": "2 + 2 = 4"}}  # sum: both right, equally good


def pair_project(project: Project) -> None:
    project.write("conftest.py", JUDGE)
    project.write("agentlib_graders.py", PRODUCER)
    project.write("answers.json", json.dumps(PAIR_ANSWERS))
    project.write("judge-script.json", json.dumps(
        judge_script([], better=[text for case in PAIR_ANSWERS.values() for text in case.values()
                                 if not text.startswith("Cusco")])))
    project.agents('agents:\n  qa:\n    rubric: graders/exact\n    producer: {python: "agentlib_graders:answer"}\n'
                   "    max_attempts: 1\n    variants:\n      options: {right: {style: right}, wrong: {style: wrong}}\n")
    project.cases("qa", "agent: qa\ncases:\n  - {id: peru, inputs: {question: What is the capital of Peru?}, "
                        "expected: Lima}\n  - {id: sum, inputs: {question: What is 2 + 2?}, expected: '4'}\n")
    for name in ("mt-bench-pair", "alpaca-eval", "prometheus-relative"):
        project.write(f"suites/{name}.pairwise.yaml", f"pairwise: {name}\ncases: qa.cases.yaml\ncompare: [right, wrong]\n"
                                                      f"judge: {{model: mock/pair-grader-judge, template: graders/{name}}}\n")


def test_the_library_pairwise_judges_prefer_as_their_methods_say(project: Project) -> None:
    """Each case judged in both orders. Lima over Cusco: the right answer wins both ways (preference 1). Two equally
    good answers: MT-bench's judge says [[C]] both ways (a tie the orders agree on); AlpacaEval's and Prometheus's
    have no tie, and this judge then picks the answer shown first, so the orders disagree: a tie (0.5), agreement 0."""
    pair_project(project)
    project.run("suites/", "-k", "pairwise").assert_outcomes(passed=6)
    rows = project.rows("SELECT r.agent_name, d.case_id, d.dimensions FROM agent_runs r "
                        "JOIN attempt_details d ON d.run_id = r.id")
    got = {(r["agent_name"], r["case_id"]): {k: v["score"] for k, v in json.loads(r["dimensions"]).items()}
           for r in rows}
    assert got == {("mt-bench-pair", "peru"): {"preference": 1.0, "agreement": 1.0},
                   ("mt-bench-pair", "sum"): {"preference": 0.5, "agreement": 1.0},
                   ("alpaca-eval", "peru"): {"preference": 1.0, "agreement": 1.0},
                   ("alpaca-eval", "sum"): {"preference": 0.5, "agreement": 0.0},
                   ("prometheus-relative", "peru"): {"preference": 1.0, "agreement": 1.0},
                   ("prometheus-relative", "sum"): {"preference": 0.5, "agreement": 0.0}}
    calls = [c for c in judge_calls(project) if c["kind"] == "pair"]
    assert len(calls) == 12
    systems = {c["system"].split(".")[0] for c in calls}
    assert systems == {"You are an impartial judge comparing the answers two AI assistants gave to the same user "
                       "question", "You compare the outputs that language models gave to an instruction and choose "
                       "the best one, judging as the person who gave the instruction would", "You are a fair judge"}


# --- what each grader needs, and the mistakes: one collection line each ---------------------------------------------

NEEDS = [  # (grader, a case that lacks what it needs, the line that says so)
    ("faithfulness", "{id: one, inputs: {question: q}}",
     "suites/a.cases.yaml: case one: grader graders/faithfulness's judge (faithfulness.steps.yaml) (step verdicts) uses "
     "{inputs.context}, which this case cannot fill (inputs: question; no expected answer) (fix: give the case an "
     "input 'context')"),
    ("hallucination", "{id: one, inputs: {question: q}}",
     "suites/a.cases.yaml: case one: grader graders/hallucination's judge (hallucination.steps.yaml) (step verdicts) "
     "uses {inputs.context}, which this case cannot fill *(fix: give the case an input 'context')"),
    ("model-graded-qa", "{id: one, inputs: {question: q}}",
     "suites/a.cases.yaml: case one: grader graders/model-graded-qa's judge (model-graded-qa.chat.yaml) uses "
     "{expected}, which this case cannot fill (inputs: question; no expected answer) (fix: give the case `expected:`*"),
    ("prometheus-absolute", "{id: one, inputs: {question: q}}",
     "suites/a.cases.yaml: case one: grader graders/prometheus-absolute's judge * uses {expected}, *"),
    ("llm-rubric", "{id: one, inputs: {question: q}}",
     "suites/a.cases.yaml: case one: rubric llm-rubric's text uses {expected}, which this case cannot fill *"),
    ("g-eval", "{id: one, inputs: {question: q}}",
     "suites/a.cases.yaml: case one: rubric g-eval has no dimensions of its own and the case adds none (fix: add "
     "`criteria:` *"),
]


@pytest.mark.parametrize(("grader", "case", "line"), NEEDS, ids=[n[0] for n in NEEDS])
def test_a_case_without_what_its_grader_needs_is_one_collection_line(project: Project, grader: str, case: str,
                                                                      line: str) -> None:
    judged_project(project, [])
    project.agents(f'judge: mock/grader-judge\nagents:\n  a:\n    rubric: graders/{grader}\n'
                   '    producer: {python: "agentlib_graders:answer"}\n')
    project.cases("a", f"agent: a\ncases:\n  - {case}\n")
    result = project.run("suites/")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines([line])
    assert "Traceback" not in result.stdout.str() and not judge_calls(project)


MISTAKES = [  # (the agent's entry or the pairwise file's judge, the line that says what is wrong)
    ("evaluator: graders/f1", "suites/agents.yaml: agents.a.evaluator: graders/f1 is scored by checks alone and brings "
     "no evaluator (fix: use one of: graders/answer-relevancy, *graders/prometheus-absolute (docs/graders.md))"),
    ("evaluator: graders/g-evl", "suites/agents.yaml: agents.a.evaluator: no grader 'graders/g-evl' in the library "
     "(did you mean 'graders/g-eval'?) (fix: use one of: *"),
    ("reviser: graders/g-eval", "suites/agents.yaml: agents.a.reviser: graders/g-eval is a grader of the library: it "
     "judges, and this runner is the reviser (fix: name it as the evaluator (`evaluator: graders/g-eval`)*"),
    ("pairwise: graders/mt-bench-pairs", "suites/p.pairwise.yaml: judge.template: no pairwise judge "
     "'graders/mt-bench-pairs' in the library (did you mean 'graders/mt-bench-pair'?) (fix: use one of: "
     "graders/alpaca-eval, graders/mt-bench-pair, graders/prometheus-relative (docs/graders.md), *"),
    ("pairwise: graders/mt-bench-pair, verdict: '(A)'", "suites/p.pairwise.yaml: judge.verdict: comes with the "
     "library's judge graders/mt-bench-pair (fix: remove it; *"),
]


@pytest.mark.parametrize(("entry", "line"), MISTAKES, ids=[m[0] for m in MISTAKES])
def test_a_wrong_use_of_a_library_judge_is_one_collection_line(project: Project, entry: str, line: str) -> None:
    pair_project(project)
    if entry.startswith("pairwise: "):
        project.write("suites/p.pairwise.yaml", "pairwise: p\ncases: qa.cases.yaml\ncompare: [right, wrong]\njudge: "
                                                f"{{model: mock/pair-grader-judge, template: {entry[10:]}}}\n")
    else:
        project.agents(f'agents:\n  a:\n    rubric: graders/exact\n    producer: {{python: "agentlib_graders:answer"}}'
                       f"\n    {entry}\n")
    result = project.run("suites/")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines([line])
    assert "Traceback" not in result.stdout.str()


def test_an_agents_own_evaluator_wins_over_its_graders(project: Project) -> None:
    """`rubric: graders/mt-bench` with an `evaluator:` of the agent's own: the agent's judge scores it."""
    example = JUDGED[8]  # mt-good
    judged_project(project, [example])
    project.write("suites/judges/mine.txt", "Rate this answer: {output}\nWrite [[N]].")
    agents = project.root / "suites/agents.yaml"
    agents.write_text(agents.read_text() + "    evaluator: {template: judges/mine.txt, verdict: '\\[\\[(\\d+)\\]\\]'}\n")
    project.write("judge-script.json", json.dumps(judge_script([], replies={example.answer: "Fine. [[10]]"})))
    project.run("suites/").assert_outcomes(passed=1)
    (call,) = judge_calls(project)
    assert call["prompt"].startswith("Rate this answer:") and call["system"] == ""
    assert project.runs()[0]["overall_score"] == 1.0


# --- the judge program's part: a rating read from free text, weighed; a for_each over a case's input ----------------

@pytest.mark.parametrize(("step", "line"), [
    ("{name: r, prompt: '{output}', answer: {rating: [1, 5]}, weighted: true}",
     "steps[0].weighted: weighs a rating read from free text, and this step has no verdict: (fix: add e.g. "
     "`verdict: 'Score: (\\d)'`, or remove weighted)"),
    ("{name: r, prompt: '{output}', answer: list, verdict: 'S: (.*)'}",
     "steps[0].verdict: reads a label, number or rating from free text, and this step answers list (fix: *"),
    ("{name: r, prompt: '{output}', answer: {label: [yes, no]}, verdict: 'V: (yes|no)', weighted: true}",
     "steps[0].weighted: weighs a rating by its token's probabilities, and this step answers label (yes, no) *"),
    ("{name: r, prompt: '{output}', answer: {rating: [1, 5]}, verdict: 'Score: \\d'}",
     "steps[0].verdict: the pattern 'Score: \\\\d' has no group to read the answer from *"),
    ("{name: r, prompt: '{item}', for_each: 'inputs.', answer: {label: [yes, no]}}",
     "steps[0].for_each: 'inputs.' is not an input's name (fix: write e.g. `for_each: inputs.context`)"),
])
def test_a_wrong_verdict_step_or_input_for_each_is_one_line(tmp_path: Any, step: str, line: str) -> None:
    path = tmp_path / "bad.steps.yaml"
    path.write_text(f"steps:\n  - {step}\n", encoding="utf-8")
    with pytest.raises(HarnessConfigError) as caught:
        load_judge_program(path, roots=(tmp_path,))
    assert fnmatch.fnmatchcase(str(caught.value), f"{path}: {line}".replace("[", "[[]")), str(caught.value)


@pytest.mark.parametrize(("reply", "read"), [
    ("Good.\nScore: 4", (4, "Good.")),
    ("Score: 2 at first. On reflection:\nScore: 3", (3, "answered 3")),  # the last match counts
    ("Score: 7", None), ("Score: 3.5", None), ("No score at all", None),
])
def test_a_verdict_step_reads_the_last_rating_on_its_range(reply: str, read: tuple[int, str] | None) -> None:
    step = ProgramStep(name="r", index=0, line=0, prompt="", answer=StepAnswer(kind="rating", low=1, high=5),
                       verdict=re.compile(r"Score:\s*(\d+(?:\.\d+)?)"))
    got, problem = read_answer(step, ModelReply(text=reply, tool_calls=(), usage=Usage(), model="m", stop_reason=None))
    assert (got[:2] if got else None) == read and bool(problem) == (read is None)


def test_every_file_the_library_ships_is_package_data() -> None:
    """pyproject.toml's package data names every file type under harness/loading/graders/."""
    config = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text(encoding="utf-8"))
    globs = config["tool"]["setuptools"]["package-data"]["harness"]
    root = GRADERS_DIR.parent.parent
    shipped = [p.relative_to(root).as_posix() for p in GRADERS_DIR.rglob("*") if p.is_file() and "__pycache__" not in
               p.parts]
    assert shipped and all(any(fnmatch.fnmatchcase(f, g) for g in globs) for f in shipped), shipped
    assert {"graders/mt-bench-pair", "graders/alpaca-eval", "graders/prometheus-relative"} == set(
        library_pair_judges())
    assert set(library_evaluators()) == {f"graders/{e.grader}" for e in JUDGED}


# --- the whole MT-bench shape, end to end -----------------------------------------------------------------------

MT_QUESTIONS = [{"question_id": 111, "category": "math", "turns": ["What is the area of a triangle with vertices "
                                                                  "(0, 0), (-1, 1) and (3, 3)?"]},
                {"question_id": 112, "category": "math", "turns": ["A startup invests $8000, then half as much the "
                                                                  "next year. How much in all?"]},
                {"question_id": 81, "category": "writing", "turns": ["Compose a travel blog post about Hawaii."]}]
MT_REFERENCES = [{"question_id": 112, "reference": "12000 dollars"},
                 {"question_id": 111, "reference": "The area is 3."}]
MT_ANSWERS = {111: "The area is 3.", 112: "It is 12000 dollars, since 8000 + 4000 = 12000."}


@pytest.fixture(params=["mock", "openai"])
def mt_judge(request: pytest.FixtureRequest) -> Any:
    """The judge of the MT-bench run: [[7.5]] when it is shown the joined reference of a math question, else [[2]];
    every (system prompt, user message) it received, on the mock provider or through the OpenAI SDK."""
    received: list[tuple[str, str]] = []

    def rate(system: str, user: str) -> str:
        received.append((system, user))
        shown = any(ref["reference"] in user for ref in MT_REFERENCES)
        return f"It matches the reference. Rating: [[{'7.5' if shown else '2'}]]"

    if request.param == "mock":
        mock_model("mt-judge")(lambda req: rate(req.cached_system_prefix or req.system, req.messages[-1].text))
        yield "mock/mt-judge", received
        forget_mock_model("mt-judge")
        return
    server: FakeOpenAI = request.getfixturevalue("fake_openai")
    server.responder = lambda body: Reply.text(rate(*(str(m["content"]) for m in body["messages"])))
    yield "openai/gpt-4.1-mini", received


def test_an_mt_bench_run_joins_references_by_question_id_and_reads_half_point_ratings(project: Project,
                                                                                      mt_judge: Any) -> None:
    """MT-bench as its authors run it: the questions of one category, each joined to its reference answer by
    question id, judged by the single-answer judge with a reference (its system prompt sent as the system prompt),
    a rating of [[7.5]] read on its half-point scale: (7.5 - 1) / 9."""
    model, received = mt_judge
    project.write("suites/data/questions.jsonl", "".join(json.dumps(q) + "\n" for q in MT_QUESTIONS))
    project.write("suites/data/references.jsonl", "".join(json.dumps(r) + "\n" for r in MT_REFERENCES))
    project.write("agentlib_mt.py", f"ANSWERS = {MT_ANSWERS!r}\n\n\ndef answer(request):\n"
                                    "    return ANSWERS[int(request['inputs']['question_id'])]\n")
    project.agents(f"judge: {{model: {model}, max_retries: 0}}\nagents:\n  math:\n"
                   '    rubric: graders/mt-bench-reference\n    producer: {python: "agentlib_mt:answer"}\n'
                   "    max_attempts: 1\n")
    project.cases("math", """\
        agent: math
        dataset:
          file: data/questions.jsonl
          filter: {category: math}
          join: {file: data/references.jsonl, key: question_id}
          id: "q{question_id}"
          inputs: {question: "{turns}", question_id: "{question_id}"}
          expected: "{reference}"
        """)
    result = project.run("suites/", "-p", "no:randomly")
    result.assert_outcomes(passed=2)  # the writing question is filtered out
    assert len(received) == 2
    for system, user in received:
        assert system.startswith("You are") and "[[" in system  # the judge's instructions, in the system prompt
        assert not any(question["turns"][0] in system for question in MT_QUESTIONS)  # the case is in the user's
    scores = {r["case_id"]: r["overall_score"] for r in project.runs()}
    assert scores == {"q111": pytest.approx(6.5 / 9), "q112": pytest.approx(6.5 / 9)}
