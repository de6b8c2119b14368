"""Chat templates (docs/material.md, "Chat templates"): a producer's, reviser's or judge's template written as
messages with roles. The system message is the provider's system prompt and the other messages stay messages, on
the mock provider and through the real SDKs against the fake OpenAI and Anthropic servers; the judge's last user
message is its prompt, the messages before it its history, with every way a judge commits to a verdict; a
conversation case sends the template's messages and then its turns; a bad template file is one line naming the
file, the message's field and the fix."""

from __future__ import annotations

import json
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import Project
from harness.base.errors import HarnessConfigError
from harness.llm.providers.mock import forget_mock_model, mock_model
from harness.llm.schema_fill import evaluator_output
from harness.loading import BUILTIN_RUNNER_KINDS, load_suite

MODELS = {"mock": "mock/chat-model", "openai": "openai/gpt-4.1-mini", "anthropic": "claude-haiku-4-5"}

# What a model is sent, whatever the provider: its system prompt and its other messages as (role, text).
Sent = tuple[str, list[tuple[str, str]]]
# What the scripted model answers, given what it was sent and the JSON Schema it must answer with (None: text).
Script = Callable[[Sent, "dict[str, Any] | None"], "str | dict[str, Any]"]


class Served:
    """One scripted model, on the mock provider or behind a fake server, that keeps what each call sent."""

    def __init__(self, provider: str):
        self.provider = provider
        self.model = MODELS[provider]
        self.sent: list[Sent] = []
        self.script: Script = lambda sent, schema: "Lima"

    def answer(self, sent: Sent, schema: dict[str, Any] | None) -> str | dict[str, Any]:
        self.sent.append(sent)
        return self.script(sent, schema)


def _text(content: Any) -> str:
    """A wire message's text: a string, or the text of its blocks."""
    if isinstance(content, str):
        return content
    return "".join(block.get("text", "") for block in content or [] if isinstance(block, dict))


@pytest.fixture(params=sorted(MODELS))
def served(request: pytest.FixtureRequest) -> Iterator[Served]:
    model = Served(request.param)
    if request.param == "mock":
        def respond(req: Any) -> Any:
            system = "\n\n".join(filter(None, [req.cached_system_prefix, req.system]))
            forced = next((t.schema for t in req.tools if t.name == req.tool_choice), None)
            return model.answer((system, [(m.role, m.text) for m in req.messages]), forced)

        mock_model("chat-model")(respond)
        yield model
        forget_mock_model("chat-model")
        return
    server = request.getfixturevalue(f"fake_{request.param}")
    if request.param == "openai":
        from harness.testing.fake_openai import Reply

        def respond_openai(body: dict[str, Any]) -> Any:
            system = "\n\n".join(_text(m["content"]) for m in body["messages"] if m["role"] == "system")
            chat = [(m["role"], _text(m.get("content"))) for m in body["messages"] if m["role"] != "system"]
            tool = next((t["function"] for t in body.get("tools") or []), None)
            answer = model.answer((system, chat), tool["parameters"] if tool else None)
            return Reply.tool(answer, name=tool["name"]) if isinstance(answer, dict) else Reply.text(answer)

        server.responder = respond_openai
    else:
        from harness.testing.fake_anthropic import Reply as AnthropicReply

        def respond_anthropic(body: dict[str, Any]) -> Any:
            chat = [(m["role"], _text(m["content"])) for m in body["messages"]]
            tool = next(iter(body.get("tools") or []), None)
            answer = model.answer((_text(body.get("system", "")), chat), tool["input_schema"] if tool else None)
            return (AnthropicReply.tool(answer, name=tool["name"]) if isinstance(answer, dict)
                    else AnthropicReply.text(answer))

        server.responder = respond_anthropic
    yield model


# --- a question-answering project: a python producer, a judge on one 1-10 dimension --------------------------

RUBRIC = """\
metadata: {name: MT-bench single, version: "1.0.0"}
threshold: 0.7
dimensions:
  quality: {weight: 1.0, description: Overall quality of the answer, scale: [1, 10]}
"""

AGENT_CODE = '''\
def answer(request):
    return {"capital of Peru?": "Lima"}.get(request["inputs"]["question"], "I do not know")
'''

CASES = "agent: qa\ncases:\n  - id: peru\n    inputs: {question: capital of Peru?}\n"

# An MT-bench-style single-grade judge, its instructions the system message (our wording of the single-v1 shape).
JUDGE_SYSTEM = ("You are an impartial judge of one AI assistant's answer to a user's question. Weigh how helpful, "
                "relevant, accurate and detailed it is, explain briefly, then rate it from 1 to 10 in exactly this "
                'form: "Rating: [[5]]".')
JUDGE_USER = ("[Question]\n{question}\n\n[The Start of Assistant's Answer]\n{answer}\n"
              "[The End of Assistant's Answer]")
MT_JUDGE = json.dumps([{"role": "system", "content": JUDGE_SYSTEM}, {"role": "user", "content": JUDGE_USER}],
                      indent=2)
FILLED = JUDGE_USER.format(question="capital of Peru?", answer="Lima")


def qa_project(project: Project, judge_model: str, evaluator: str, files: dict[str, str],
               producer: str = '{python: "agentlib_chat:answer"}', cases: str = CASES) -> None:
    project.write("agentlib_chat.py", AGENT_CODE)
    project.rubric("mt", RUBRIC)
    project.agents(f"judge: {{model: {judge_model}, max_retries: 0}}\nmodel: {{model: {judge_model}, max_retries: 0}}"
                   f"\nagents:\n  qa:\n    rubric: mt\n    producer: {producer}\n    evaluator: {evaluator}\n")
    project.cases("qa", cases)
    for path, text in files.items():
        project.write(path, text)


def eval_of(project: Project) -> dict[str, Any]:
    (path,) = (sorted(project.work.glob("runs/*/qa/peru/attempt-1.eval.json"))
               or sorted(project.work.glob("runs/*/qa/attempt-1.eval.json")))
    return json.loads(path.read_text(encoding="utf-8"))


def test_a_single_grade_judge_sends_its_system_message_as_the_system_prompt(project: Project,
                                                                              served: Served) -> None:
    served.script = lambda sent, schema: "Accurate and brief. Rating: [[8]]"
    qa_project(project, served.model, "{template: judges/mt.json, slots: {answer: output}, "
               "verdict: '\\[\\[(\\d+)\\]\\]'}", {"suites/judges/mt.json": MT_JUDGE})
    project.run("suites/").assert_outcomes(passed=1)
    assert served.sent == [(JUDGE_SYSTEM, [("user", FILLED)])]
    assert eval_of(project)["dimensionScores"]["quality"]["rating"] == 8


# A judge with a few-shot exchange before the answer it grades, answering in the structured verdict.
FEW_SHOT_JUDGE = """\
- role: system
  content: You grade answers to quiz questions from 1 to 10.
- role: user
  content: "[Question] capital of Chad? [Answer] Abuja"
- role: assistant
  content: Abuja is Nigeria's capital, not Chad's. Rating 1.
- role: user
  content: "[Question] {question} [Answer] {output}"
"""
FEW_SHOT = [("user", "[Question] capital of Chad? [Answer] Abuja"),
            ("assistant", "Abuja is Nigeria's capital, not Chad's. Rating 1.")]


def structured(rating: int) -> Script:
    def answer(sent: Sent, schema: dict[str, Any] | None) -> str | dict[str, Any]:
        if schema is None:
            return "Lima is Peru's capital: correct."
        data = evaluator_output(schema, {}, 1.0, 0.0)
        data["dimensionScores"]["quality"]["rating"] = rating
        return data
    return answer


def test_a_structured_judge_gets_the_last_user_message_as_its_prompt_and_the_rest_as_history(
        project: Project, served: Served) -> None:
    served.script = structured(9)
    qa_project(project, served.model, "{template: judges/few.yaml}", {"suites/judges/few.yaml": FEW_SHOT_JUDGE})
    project.run("suites/").assert_outcomes(passed=1)
    ((system, chat),) = served.sent
    assert system == "You grade answers to quiz questions from 1 to 10."
    assert chat == [*FEW_SHOT, ("user", "[Question] capital of Peru? [Answer] Lima")]
    assert eval_of(project)["dimensionScores"]["quality"]["rating"] == 9


def test_reasoning_first_with_a_chat_template_keeps_its_history(project: Project, served: Served) -> None:
    served.script = structured(8)
    qa_project(project, served.model, "{template: judges/few.yaml, reasoning: first}",
               {"suites/judges/few.yaml": FEW_SHOT_JUDGE})
    project.run("suites/").assert_outcomes(passed=1)
    (system, reasoning_call), (system_again, verdict_call) = served.sent
    asked = ("user", "[Question] capital of Peru? [Answer] Lima")
    assert system == system_again == "You grade answers to quiz questions from 1 to 10."
    assert reasoning_call == [*FEW_SHOT, asked]
    assert verdict_call[:4] == [*FEW_SHOT, asked, ("assistant", "Lima is Peru's capital: correct.")]
    assert verdict_call[4][0] == "user" and "submit your evaluation" in verdict_call[4][1]
    data = eval_of(project)
    assert data["metadata"]["reasoning"] == "Lima is Peru's capital: correct."
    assert data["dimensionScores"]["quality"]["rating"] == 8


# --- a producer's chat template: a few-shot exchange before the question -----------------------------------

FEW_SHOT_PRODUCER = json.dumps([
    {"role": "system", "content": "Answer with the city's name only."},
    {"role": "user", "content": "capital of France?"},
    {"role": "assistant", "content": "Paris"},
    {"role": "user", "content": "{question}"},
])
CHECKED = """\
metadata: {name: Capital, version: "1.0.0"}
threshold: 1
dimensions:
  names_it: {weight: 1.0, description: Names the capital, check: {contains: {all: [Lima]}}}
"""


def test_a_producer_chat_template_sends_its_few_shot_exchange(project: Project, served: Served) -> None:
    served.script = lambda sent, schema: "Lima"
    project.rubric("capital", CHECKED)
    project.agents(f"model: {{model: {served.model}, max_retries: 0}}\nagents:\n  qa:\n    rubric: capital\n"
                   "    producer: {template: prompts/answer.json}\n")
    project.write("suites/prompts/answer.json", FEW_SHOT_PRODUCER)
    project.cases("qa", CASES)
    project.run("suites/").assert_outcomes(passed=1)
    assert served.sent == [("Answer with the city's name only.",
                            [("user", "capital of France?"), ("assistant", "Paris"), ("user", "capital of Peru?")])]


def test_a_conversation_sends_the_templates_messages_then_its_turns(project: Project) -> None:
    sent: list[Sent] = []

    @mock_model("chat-quiz")
    def quiz(request: Any) -> str:
        sent.append((request.system, [(m.role, m.text) for m in request.messages]))
        return {"Q: capital of Peru?": "Lima"}.get(request.messages[-1].text, "Rimac")

    try:
        project.rubric("capital", CHECKED)
        project.agents("model: {model: mock/chat-quiz}\nagents:\n  qa:\n    rubric: capital\n"
                       "    producer: {template: prompts/quiz.yaml}\n")
        project.write("suites/prompts/quiz.yaml", """\
            - {role: system, content: Answer in one word.}
            - {role: user, content: "Q: capital of France?"}
            - {role: assistant, content: Paris}
            - {role: user, content: "Q: {input}"}
            """)
        project.cases("qa", "agent: qa\ncases:\n  - id: peru\n    system: You are a quiz master.\n"
                      "    turns: [capital of Peru?, Which river runs through it?]\n")
        project.run("suites/").assert_outcomes(passed=1)
    finally:
        forget_mock_model("chat-quiz")
    preamble = [("user", "Q: capital of France?"), ("assistant", "Paris")]
    assert sent == [
        ("Answer in one word.\n\nYou are a quiz master.", [*preamble, ("user", "Q: capital of Peru?")]),
        ("Answer in one word.\n\nYou are a quiz master.",
         [*preamble, ("user", "Q: capital of Peru?"), ("assistant", "Lima"),
          ("user", "Q: Which river runs through it?")]),
    ]


def test_a_conversation_needs_input_in_the_templates_last_message(project: Project) -> None:
    project.rubric("capital", CHECKED)
    project.agents("model: {model: mock/echo}\nagents:\n  qa:\n    rubric: capital\n"
                   "    producer: {template: prompts/quiz.yaml}\n")
    project.write("suites/prompts/quiz.yaml", "- {role: system, content: 'Answer {input}'}\n"
                  "- {role: user, content: Go on.}\n")
    project.cases("qa", "agent: qa\ncases:\n  - id: peru\n    turns: [capital of Peru?]\n")
    result = project.run("--collect-only", "suites/")
    result.stdout.fnmatch_lines(["*qa.cases.yaml: case peru: the producer template quiz.yaml has no {input} slot "
                                 "in its last message, so it cannot send each user turn (fix: put {input} (the user "
                                 "turn being answered) in its last message, or use a prompt producer (.md))*"])


def test_no_message_of_a_producers_chat_template_may_show_the_expected_answer(project: Project) -> None:
    project.rubric("capital", CHECKED)
    project.agents("model: {model: mock/echo}\nagents:\n  qa:\n    rubric: capital\n"
                   "    producer: {template: prompts/leak.yaml}\n")
    project.write("suites/prompts/leak.yaml", "- {role: system, content: 'The answer is {expected}.'}\n"
                  "- {role: user, content: '{question}'}\n")
    project.cases("qa", CASES)
    result = project.run("--collect-only", "suites/")
    result.stdout.fnmatch_lines(["*agents.yaml: agents.qa.producer.template: leak.yaml (message [[]0]) uses "
                                 "{expected}, the expected answer, in a producer's prompt (fix: a producer or reviser must not "
                                 "see the expected answer: remove the slot)*"])


def test_a_case_that_cannot_fill_a_system_messages_slot_is_a_collection_error(project: Project) -> None:
    qa_project(project, "mock/score-1", "{template: judges/mt.json, slots: {answer: output}}", {
        "suites/judges/mt.json": json.dumps([{"role": "system", "content": "Judge by {rules}."},
                                             {"role": "user", "content": "{answer}"}])})
    result = project.run("--collect-only", "suites/")
    result.stdout.fnmatch_lines(["*qa.cases.yaml: case peru: the evaluator template mt.json uses {rules}, which "
                                 "this case cannot fill*"])


# --- bad template files: one line naming the file, the field and the fix -----------------------------------

BAD_TEMPLATES = {
    "not-a-list": ("bad.yaml", "role: user\ncontent: hi\n",
                   "suites/prompts/bad.yaml: expected a list of chat messages, each {role, content}, got "),
    "unknown-role": ("bad.json", '[{"role": "user", "content": "hi"}, {"role": "human", "content": "{input}"}]',
                     "suites/prompts/bad.json: [1].role: unknown role 'human' (fix: use one of: system, user, "
                     "assistant)"),
    "missing-content": ("bad.yaml", "- {role: user}\n", "suites/prompts/bad.yaml: [0].content: missing (fix: add "
                        "`content:`)"),
    "content-not-text": ("bad.yaml", "- {role: user, content: [{type: image_url}]}\n",
                         "suites/prompts/bad.yaml: [0].content: expected the message's text, got "),
    "unknown-key": ("bad.yaml", "- {role: user, content: hi, nmae: x}\n",
                    "suites/prompts/bad.yaml: [0].nmae: unknown key (fix: remove it or use one of: role, content)"),
    "system-later": ("bad.yaml", "- {role: user, content: hi}\n- {role: system, content: x}\n- {role: user, "
                     "content: '{input}'}\n", "suites/prompts/bad.yaml: [1].role: a system message comes first, and "
                     "only once (fix: keep one system message, at the top of the list)"),
    "assistant-first": ("bad.yaml", "- {role: system, content: x}\n- {role: assistant, content: hi}\n"
                        "- {role: user, content: '{input}'}\n", "suites/prompts/bad.yaml: [1].role: an assistant "
                        "message before any user message (fix: start the conversation with a user message"),
    "ends-with-assistant": ("bad.yaml", "- {role: user, content: '{input}'}\n- {role: assistant, content: Sure}\n",
                            "suites/prompts/bad.yaml: [1].role: the last message is an assistant message: the model "
                            "answers the last user message (fix: end the list with a user message)"),
    "empty": ("bad.json", "[]", "suites/prompts/bad.json: expected a list of chat messages"),
    "invalid-json": ("bad.json", '[{"role": "user", "content": "hi"},]', "suites/prompts/bad.json: line 1: "
                     "invalid JSON (Expecting value) (fix: fix the JSON)"),
}


@pytest.mark.parametrize("bad", list(BAD_TEMPLATES.values()), ids=list(BAD_TEMPLATES))
def test_a_bad_chat_template_is_one_line_naming_the_file_the_field_and_the_fix(tmp_path: Path,
                                                                               bad: tuple[str, str, str]) -> None:
    name, text, expected = bad
    root = tmp_path.resolve()
    (root / "rubrics").mkdir()
    (root / "rubrics/capital.yaml").write_text(CHECKED, encoding="utf-8")
    (root / "suites/prompts").mkdir(parents=True)
    (root / "suites/agents.yaml").write_text(f"agents:\n  qa:\n    rubric: capital\n    producer: {{template: "
                                             f"prompts/{name}}}\n", encoding="utf-8")
    (root / "suites/prompts" / name).write_text(textwrap.dedent(text), encoding="utf-8")
    with pytest.raises(HarnessConfigError) as info:
        load_suite(root / "suites/agents.yaml", rubrics_dir=root / "rubrics", runner_kinds=BUILTIN_RUNNER_KINDS,
                   input_roots=(root,))
    line = info.value.message(root)
    assert "\n" not in line and line.startswith(expected), line
    assert "(fix: " in line


def test_a_bad_chat_template_stops_collection_with_one_line(project: Project) -> None:
    qa_project(project, "mock/score-1", "{template: judges/mt.json}",
               {"suites/judges/mt.json": '[{"role": "judge", "content": "{output}"}]'})
    result = project.run("--collect-only", "suites/")
    assert result.ret != 0
    result.stdout.fnmatch_lines(["*suites/judges/mt.json: [[]0].role: unknown role 'judge' (fix: use one of: system, "
                                 "user, assistant)*"])
    assert "Traceback" not in result.stdout.str()
