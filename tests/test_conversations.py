"""Conversation cases (docs/conversations.md): the producer answers each user turn given the conversation so far,
its own replies included; the transcript is the artifact; a ``per_turn`` dimension scores each reply; the judge
sees the transcript whole, or each reply with the conversation up to it. Everything offline, on mock models."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import Project, error_sections, needs_sandbox, prompt_text
from harness.base.conversation import Conversation, reduce_turns
from harness.base.errors import HarnessConfigError
from harness.base.fields import Fields
from harness.base.models import Turn
from harness.llm.providers.mock import forget_mock_model, mock_model
from harness.llm.types import ModelRequest
from harness.loading.conversations import parse_turns

REPO = Path(__file__).resolve().parent.parent

# Scores each reply: it names its turn's reference (the worst reply counts), and it is short (the mean counts).
TURNS_RUBRIC = """\
metadata: {{name: Follow-ups, version: "1.0.0"}}
threshold: 0.8
dimensions:
  correct:
    weight: 0.7
    description: Each reply names its turn's reference
    per_turn: {reducer}
    check:
      contains: {{all: ["{{expected}}"]}}
  concise:
    weight: 0.3
    description: At most 12 words
    check:
      length: {{max_words: 40}}
"""

TWO_TURNS = """\
agent: chat
cases:
  - id: france
    system: You are a geography quiz master.
    turns:
      - What is the capital of France?
      - {role: assistant, content: Paris}
      - {role: user, content: Which river runs through it?}
      - {role: assistant, content: Seine}
"""

CITIES = {"France": "Paris", "Peru": "Lima"}
RIVERS = {"Paris": "The Seine.", "Lima": "The Rimac."}


def answer_from_history(messages: list[tuple[str, str]]) -> str:
    """What a chat model says, from (role, text) messages: the capital, or the river of the city it named before."""
    asked = messages[-1][1]
    for country, city in CITIES.items():
        if f"capital of {country}" in asked:
            return city
    named = [text for role, text in messages if role == "assistant"]
    return next((RIVERS[text] for text in reversed(named) if text in RIVERS), "Which city do you mean?")


@pytest.fixture
def chat_model() -> Iterator[list[ModelRequest]]:
    """mock/chat: answers from the conversation it is sent; every request it got, in order."""
    seen: list[ModelRequest] = []

    def answer(request: ModelRequest) -> str:
        seen.append(request)
        return answer_from_history([(m.role, m.text) for m in request.messages])

    mock_model("chat")(answer)
    yield seen
    forget_mock_model("chat")


@pytest.fixture
def conv_judge() -> Iterator[list[str]]:
    """mock/conv-judge: scores every dimension it is asked for 1.0; the message of each request, in order."""
    prompts: list[str] = []

    def answer(request: ModelRequest) -> dict[str, Any]:
        prompts.append(request.messages[-1].text)
        wanted = request.tools[0].schema["properties"]["dimensionScores"]["required"]
        return {"overallScore": 1.0, "passed": True, "feedback": "scripted", "suggestedFixes": [],
                "dimensionScores": {dim: {"score": 1.0, "weight": 1.0, "reason": "fine"} for dim in wanted}}

    mock_model("conv-judge")(answer)
    yield prompts
    forget_mock_model("conv-judge")


def chat_project(project: Project, producer: str, *, rubric: str = TURNS_RUBRIC.format(reducer="min"),
                 cases: str = TWO_TURNS, more: str = "", judge: str = "mock/echo") -> Project:
    project.rubric("turns", rubric)
    project.write("suites/prompts/writer.md", prompt_text("Writer", marker="WRITER-PROMPT"))
    project.write("suites/prompts/judge.md", prompt_text())
    project.write("suites/prompts/wrap.txt", "{input} Answer in a few words.")
    project.agents(f"judge: {{model: {judge}, max_retries: 0}}\nagents:\n  chat:\n    rubric: turns\n"
                   f"    producer: {producer}\n    max_attempts: 1\n{more}")
    project.cases("chat", cases)
    return project


def attempt(project: Project, case: str = "france", suffix: str = "md") -> str:
    """The first attempt's artifact (``md``) or evaluator output of ``case``; an agent's one case keeps them in the
    agent's folder."""
    (path,) = sorted(project.work.glob(f"runs/*/chat/{case}/attempt-1.{suffix}")) or sorted(project.work.glob(
        f"runs/*/chat/attempt-1.{suffix}"))
    return path.read_text(encoding="utf-8")


TRANSCRIPT = ("**system:** You are a geography quiz master.\n\n**user:** What is the capital of France?\n\n"
              "**assistant:** Paris\n\n**user:** Which river runs through it?\n\n**assistant:** The Seine.\n")


# --- what the producer sees on each turn -------------------------------------------------------------


def test_a_prompt_producer_gets_the_conversation_so_far_as_chat_messages(project: Project,
                                                                         chat_model: list[ModelRequest]) -> None:
    chat_project(project, "{prompt: prompts/writer.md, model: mock/chat}")
    project.run("-q", "suites/").assert_outcomes(passed=1)
    first, second = chat_model
    assert [(m.role, m.text) for m in first.messages] == [("user", "What is the capital of France?")]
    # turn 2: the user's first turn, the model's OWN reply (never the reference), the second turn
    assert [(m.role, m.text) for m in second.messages] == [
        ("user", "What is the capital of France?"), ("assistant", "Paris"), ("user", "Which river runs through it?")]
    assert "WRITER-PROMPT" in second.system and second.system.endswith("You are a geography quiz master.")
    assert attempt(project) == TRANSCRIPT  # the transcript is the attempt's artifact


def test_a_template_producer_wraps_each_user_turn(project: Project, chat_model: list[ModelRequest]) -> None:
    chat_project(project, "{template: prompts/wrap.txt, model: mock/chat}")
    project.run("-q", "suites/").assert_outcomes(passed=1)
    assert [(m.role, m.text) for m in chat_model[1].messages] == [
        ("user", "What is the capital of France? Answer in a few words."), ("assistant", "Paris"),
        ("user", "Which river runs through it? Answer in a few words.")]
    assert chat_model[1].system == "You are a geography quiz master."


def test_a_producer_template_without_input_is_refused_for_a_conversation(project: Project) -> None:
    chat_project(project, "{template: prompts/fixed.txt, model: mock/echo}")
    project.write("suites/prompts/fixed.txt", "Say something.")
    result = project.run("-q", "suites/")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    assert "case france: the producer template fixed.txt has no {input} slot" in result.stdout.str()


PYTHON_PRODUCER = '''\
import json


def produce(request):
    with open("requests.jsonl", "a", encoding="utf-8") as handle:
        handle.write(json.dumps(dict(request)) + "\\n")
    messages = request["messages"]
    if "capital" in messages[-1]["content"]:
        return "Paris"
    return "The Seine, as I said after " + messages[-2]["content"]
'''


def test_a_python_producer_gets_the_history_in_its_request(project: Project) -> None:
    project.write("chatlib.py", PYTHON_PRODUCER)
    chat_project(project, '{python: "chatlib:produce"}')
    project.run("-q", "suites/").assert_outcomes(passed=1)
    first, second = (json.loads(line) for line in (project.root / "requests.jsonl").read_text().splitlines())
    system = {"role": "system", "content": "You are a geography quiz master."}
    assert first["messages"] == [system, {"role": "user", "content": "What is the capital of France?"}]
    assert second["messages"] == [system, {"role": "user", "content": "What is the capital of France?"},
                                  {"role": "assistant", "content": "Paris"},
                                  {"role": "user", "content": "Which river runs through it?"}]
    assert second["role"] == "producer" and second["inputs"] == {}
    assert attempt(project).endswith("**assistant:** The Seine, as I said after Paris\n")


COMMAND_PRODUCER = """\
import json, sys

request = json.load(sys.stdin)
print(" / ".join(m["role"] + ": " + m["content"] for m in request["messages"][1:]))
"""


@needs_sandbox
def test_a_command_producer_gets_the_history_on_stdin(project: Project) -> None:
    project.write("tools/turn.py", COMMAND_PRODUCER)
    chat_project(project, '{command: "python tools/turn.py"}', rubric=TURNS_RUBRIC.format(reducer="mean"))
    project.run("-q", "suites/").assert_outcomes(failed=1)
    # each turn the command is sent the conversation so far, its own earlier reply included
    assert attempt(project).endswith(
        "**assistant:** user: What is the capital of France?\n\n**user:** Which river runs through it?\n\n"
        "**assistant:** user: What is the capital of France? / assistant: user: What is the capital of France? / "
        "user: Which river runs through it?\n")


# --- a dataset's chat messages ---------------------------------------------------------------------


def test_a_dataset_rows_openai_messages_are_kept_as_messages(project: Project, chat_model: list[ModelRequest],
                                                             conv_judge: list[str]) -> None:
    rows = [{"id": "peru", "topic": "geo", "messages": [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": [{"type": "text", "text": "What is the capital of Peru?"}]},
        {"role": "assistant", "content": "Lima", "weight": 1},
        {"role": "user", "content": "Which river runs through it?"},
        {"role": "assistant", "content": "Rimac"}]}]
    project.write("suites/data/chats.jsonl", "".join(json.dumps(row) + "\n" for row in rows))
    chat_project(project, "{prompt: prompts/writer.md, model: mock/chat}", more="    evaluator: prompts/judge.md\n",
                 judge="mock/conv-judge", rubric=TURNS_RUBRIC.format(reducer="mean").replace(
                     "dimensions:\n", "dimensions:\n  helpful: {weight: 0.2, description: Helpful}\n").replace(
                     "weight: 0.7", "weight: 0.5").replace("threshold: 0.8", "threshold: 0.9"),
                 cases='agent: chat\ndataset: {file: data/chats.jsonl, id: "{id}", messages: "{messages}"}\n')
    project.run("-q", "suites/").assert_outcomes(passed=1)
    first, second = chat_model
    # the system message is the system prompt; the assistant messages are references, never sent as the agent's
    assert first.system.endswith("Be brief.") and [m.text for m in first.messages] == ["What is the capital of Peru?"]
    assert [(m.role, m.text) for m in second.messages] == [
        ("user", "What is the capital of Peru?"), ("assistant", "Lima"), ("user", "Which river runs through it?")]
    assert "The case's inputs" not in first.system  # a conversation row's inputs default to none
    # the whole-transcript judge sees the transcript, and the references' transcript as the reference answer
    (prompt,) = conv_judge
    assert prompt.startswith("Evaluate this conversation: the assistant's replies to the user's turns.")
    assert "## Conversation\n**system:** Be brief.\n\n**user:** What is the capital of Peru?\n\n**assistant:** Lima" \
           "\n\n**user:** Which river runs through it?\n\n**assistant:** The Rimac.\n" in prompt
    assert "## Reference answer (what a correct answer says)\n**system:** Be brief." in prompt
    assert "**assistant:** Rimac" in prompt
    evaluation = json.loads(attempt(project, "peru", "eval.json"))
    assert evaluation["dimensionScores"]["correct"]["reason"].startswith("per turn 1.00, 1.00 (mean 1.00)")


# --- scoring per turn --------------------------------------------------------------------------------


WRONG_SECOND = '''\
def produce(request):
    return "Paris" if len(request["messages"]) < 3 else "The Loire."
'''


@pytest.mark.parametrize(("reducer", "score"), [("min", 0.0), ("mean", 0.5)])
def test_a_per_turn_check_scores_each_reply_against_its_reference(project: Project, reducer: str,
                                                                  score: float) -> None:
    project.write("chatlib.py", WRONG_SECOND)
    chat_project(project, '{python: "chatlib:produce"}', rubric=TURNS_RUBRIC.format(reducer=reducer))
    project.run("-q", "suites/").assert_outcomes(failed=1)
    correct = json.loads(attempt(project, suffix="eval.json"))["dimensionScores"]["correct"]
    assert correct["score"] == score
    assert correct["reason"].startswith(f"per turn 1.00, 0.00 ({reducer} {score:.2f}); turn 2: ")
    # concise has no per_turn: it scores the whole transcript
    assert json.loads(attempt(project, suffix="eval.json"))["dimensionScores"]["concise"]["score"] == 1.0


def test_a_per_turn_judge_is_asked_once_per_reply_with_the_conversation_up_to_it(
        project: Project, chat_model: list[ModelRequest], conv_judge: list[str]) -> None:
    rubric = """\
metadata: {name: Follow-ups, version: "1.0.0"}
threshold: 0.8
dimensions:
  relevant: {weight: 0.5, description: "Does the reply answer its turn?", per_turn: min}
  coherent: {weight: 0.5, description: "Does the conversation hold together?"}
"""
    chat_project(project, "{prompt: prompts/writer.md, model: mock/chat}", rubric=rubric,
                 more="    evaluator: prompts/judge.md\n", judge="mock/conv-judge")
    project.run("-q", "suites/").assert_outcomes(passed=1)
    turn1, turn2, whole = conv_judge
    assert turn1.startswith("Evaluate the assistant's reply in turn 1 of this conversation.")
    assert "## Conversation so far\n**system:** You are a geography quiz master.\n\n**user:** What is the capital " \
           "of France?\n\n## Reference answer (what a correct answer says)\nParis\n\n## Reply to evaluate\nParis" in turn1
    assert turn2.startswith("Evaluate the assistant's reply in turn 2")
    assert "**assistant:** Paris\n\n**user:** Which river runs through it?\n\n## Reference answer (what a correct " \
           "answer says)\nSeine\n\n## Reply to evaluate\nThe Seine." in turn2
    assert whole.startswith("Evaluate this conversation") and "## Conversation\n" + TRANSCRIPT in whole
    scores = json.loads(attempt(project, suffix="eval.json"))["dimensionScores"]
    assert scores["relevant"]["reason"].startswith("per turn 1.00, 1.00 (min 1.00)")


JUDGE_TEMPLATE = "Q: {input}\nREF: {expected}\nA: {output}\nSO FAR: {transcript}\nScore it."


def test_a_judge_templates_slots_on_a_conversation(project: Project, chat_model: list[ModelRequest],
                                                   conv_judge: list[str]) -> None:
    project.write("suites/judges/t.txt", JUDGE_TEMPLATE)
    rubric = """\
metadata: {name: Follow-ups, version: "1.0.0"}
threshold: 0.8
dimensions:
  relevant: {weight: 1.0, description: "Does the reply answer its turn?", per_turn: mean}
"""
    chat_project(project, "{prompt: prompts/writer.md, model: mock/chat}", rubric=rubric,
                 more="    evaluator: {template: judges/t.txt}\n", judge="mock/conv-judge")
    project.run("-q", "suites/").assert_outcomes(passed=1)
    turn1, turn2 = conv_judge
    assert turn1.startswith("Q: What is the capital of France?\nREF: Paris\nA: Paris\nSO FAR: **system:**")
    assert turn2.startswith("Q: Which river runs through it?\nREF: Seine\nA: The Seine.\nSO FAR: " + TRANSCRIPT)


# --- the reviser, and mistakes ---------------------------------------------------------------------------


def test_a_conversation_is_not_revised(project: Project) -> None:
    project.write("chatlib.py", WRONG_SECOND + "\n\ndef revise(request):\n    raise AssertionError('revised')\n")
    chat_project(project, '{python: "chatlib:produce"}', more='    reviser: {python: "chatlib:revise"}\n'
                                                             "    escalate_on_fail: false\n")
    project.agents(project.root.joinpath("suites/agents.yaml").read_text().replace("max_attempts: 1", "max_attempts: 3"))
    result = project.run("-q", "suites/")
    result.assert_outcomes(failed=1)
    assert [row["attempt"] for row in project.runs()] == [1]
    assert project.run_log()[0]["feedback"].endswith("(a conversation is not revised).")


@pytest.mark.parametrize(("turns", "field", "problem"), [
    ('"What is the capital of France?"', "cases[0].turns",
     "expected a list of turns (each a user message, or {role, content}), got 'What is the capital of France?'"),
    ("[{role: assistant, content: Paris}, Which river?]", "cases[0].turns[0].role",
     "an assistant turn where a user turn must be"),
    ("[Hi, {role: assistant, content: a}, {role: assistant, content: b}]", "cases[0].turns[2].role",
     "an assistant turn where a user turn must be"),
    ("[Hi, {role: user, contents: typo}]", "cases[0].turns[1].contents", "unknown key"),
    ("[Hi, {role: tool, content: x}]", "cases[0].turns[1].role", "unknown role 'tool'"),
])
def test_bad_turns_are_one_error_naming_the_file_and_field(project: Project, turns: str, field: str,
                                                           problem: str) -> None:
    chat_project(project, '{python: "chatlib:produce"}', cases=f"agent: chat\ncases:\n  - id: bad\n    turns: {turns}\n")
    project.write("chatlib.py", WRONG_SECOND)
    result = project.run("-q", "suites/")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    (section,) = error_sections(result)
    assert f"suites/chat.cases.yaml: {field}: {problem}" in "\n".join(section)
    assert "Traceback" not in result.stdout.str()


def test_a_bad_dataset_message_names_the_row(project: Project) -> None:
    project.write("suites/data/chats.jsonl", json.dumps({"messages": [{"role": "assistant", "content": "x"}]}) + "\n")
    project.write("chatlib.py", WRONG_SECOND)
    chat_project(project, '{python: "chatlib:produce"}',
                 cases='agent: chat\ndataset: {file: data/chats.jsonl, messages: "{messages}"}\n')
    result = project.run("-q", "suites/")
    assert "suites/chat.cases.yaml: dataset (row 1).messages[0].role: an assistant turn where a user turn must be" \
           in result.stdout.str()


# --- the pieces ----------------------------------------------------------------------------------------


def test_parse_turns_keeps_references_and_the_system_prompt() -> None:
    place = Fields.of("x.cases.yaml", "cases[0].turns")
    turns, system = parse_turns(["Hi", {"role": "assistant", "content": "Hello"}, "Bye"], place, system="Be kind.")
    assert turns == (Turn(user="Hi", expected="Hello"), Turn(user="Bye")) and system == "Be kind."
    with pytest.raises(HarnessConfigError, match=r"cases\[0\]\.turns\[0\]\.role: a system message comes first, and "
                                                 r"only once \(the case gives `system:` already\)"):
        parse_turns([{"role": "system", "content": "Be terse."}, "Hi"], place, system="Be kind.")
    with pytest.raises(HarnessConfigError, match=r"cases\[0\]\.turns: no user turn"):
        parse_turns([{"role": "system", "content": "Be terse."}], place)


def test_a_conversation_as_messages_and_transcript() -> None:
    talk = Conversation((Turn(user="A?", expected="a"), Turn(user="B?")), "Sys").answered("ra").answered("rb")
    assert [m.wire() for m in talk.history(2)] == [{"role": "system", "content": "Sys"},
                                                   {"role": "user", "content": "A?"},
                                                   {"role": "assistant", "content": "ra"},
                                                   {"role": "user", "content": "B?"}]
    assert talk.transcript(1) == "**system:** Sys\n\n**user:** A?\n\n**assistant:** ra\n"
    assert talk.transcript(2, asking=True).endswith("**assistant:** ra\n\n**user:** B?\n")
    assert talk.user_text == "A?\n\nB?" and talk.expected_at(1) == "a" and talk.expected_at(2) is None
    assert reduce_turns("min", [(1.0, "ok"), (0.25, "short")]) == (0.25, "per turn 1.00, 0.25 (min 0.25); turn 2: "
                                                                        "short")
    assert reduce_turns("mean", [(1.0, "ok"), (None, "no judge")]) == (None, "turn 2: no judge")


def test_the_follow_up_demo_passes_offline_and_records_the_transcripts(tmp_path: Path) -> None:
    """As a user runs it, on two workers: five two-turn conversations on mock/guide, each transcript recorded."""
    run = subprocess.run([sys.executable, "-m", "pytest", "comparisons/followups.cases.yaml", "-p", "no:cacheprovider",
                          "-q", "-n", "2", "--harness-work-dir", str(tmp_path / "WORK")],
                         cwd=REPO, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "5 passed" in run.stdout
    (france,) = tmp_path.glob("WORK/runs/*/followups/france/attempt-1.md")
    assert france.read_text(encoding="utf-8") == (
        "**system:** You are a geography quiz master. Answer in a few words.\n\n"
        "**user:** What is the capital of France?\n\n**assistant:** Paris\n\n"
        "**user:** Which river runs through it?\n\n**assistant:** The Seine.\n")
