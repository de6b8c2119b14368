"""Prompt caching as the providers do it, and what it costs: each model's minimum cacheable prefix (the fake
servers write and read nothing shorter), what of the judge's prompt is its cached prefix, the summary's one line per
rubric and model whose prefix is too short to cache, and the judge cascade (a cheap judge first, the named judge for
the uncertain items only). docs/model-calls.md, "Prompt caching" and "Judge cascades"."""

from __future__ import annotations

import json
from typing import Any

import pytest

from conftest import JUDGED_RUBRIC, Project, prompt_text
from harness.base.models import JudgeCascade, ModelSettings, PromptTemplate, Rubric
from harness.base.requests import JudgeRequest, render_messages
from harness.evaluation.cascade import uncertainty
from harness.evaluation.judge_prefix import cached_chars, template_prompt
from harness.evaluation.judge_schema import judge_schema
from harness.evaluation.llm_judge import LlmJudge
from harness.evaluation.runners import chat_messages
from harness.llm import Message, ModelClient
from harness.llm.prompt_cache import min_cacheable_tokens
from harness.loading import load_rubric
from harness.loading.prompts import load_prompt
from harness.testing import FakeAnthropic, Reply

SONNET = ModelSettings(model="claude-sonnet-4-6", max_retries=0, timeout_s=5.0)
HAIKU = ModelSettings(model="claude-haiku-4-5", max_retries=0, timeout_s=5.0)


@pytest.fixture
def answering(fake_anthropic: FakeAnthropic) -> FakeAnthropic:
    """The fake Messages API answering every call: text, or a valid answer to a forced tool."""
    fake_anthropic.responder = lambda request: Reply.tool({}) if request.get("tools") else Reply.text("ok")
    return fake_anthropic


def usage_of(client: ModelClient, prefix: str, n: int) -> tuple[int, int, int]:
    """(input, cache write, cache read) tokens of the ``n``-th call with ``prefix`` as the cached prefix."""
    reply = client.complete(system="", messages=[Message.user(f"case {n}")], cached_system_prefix=prefix)
    return reply.usage.input_tokens, reply.usage.cache_write_tokens, reply.usage.cache_read_tokens


# -- the fake's prompt cache: each model's minimum ----------------------------------------------------------------


def test_the_minimums_are_the_providers_documented_ones() -> None:
    assert [min_cacheable_tokens(m) for m in ("claude-sonnet-4-6", "claude-sonnet-4-5-20250929", "claude-opus-4-1",
                                              "claude-haiku-4-5", "claude-opus-4-6", "claude-3-5-haiku")] == [
        2048, 1024, 1024, 4096, 4096, 2048]
    assert min_cacheable_tokens("openai/gpt-4.1-mini") == 1024
    assert min_cacheable_tokens("mock/echo") is None and min_cacheable_tokens("claude-opus-9") is None
    assert min_cacheable_tokens("openai/gpt-4.1", base_url="http://gpu-box:8000/v1") is None  # a server of your own


def test_a_prefix_shorter_than_the_models_minimum_is_neither_written_nor_read(answering: FakeAnthropic) -> None:
    client = ModelClient(SONNET)
    short = "R" * 8000  # 2,000 tokens: claude-sonnet-4-6 caches from 2,048
    first, second = usage_of(client, short, 1), usage_of(client, short, 2)
    assert first[1:] == (0, 0) and second[1:] == (0, 0)  # no cache-write and no cache-read tokens
    assert first[0] >= 2000 and second[0] == first[0]  # every input token billed plainly, every time
    # the same prefix is long enough for a model with a lower minimum (claude-opus-4-1: 1,024)
    older = ModelClient(ModelSettings(model="claude-opus-4-1", max_retries=0, timeout_s=5.0))
    assert usage_of(older, short, 3)[1] == 2000


def test_a_prefix_at_the_minimum_is_written_once_then_read(answering: FakeAnthropic) -> None:
    client = ModelClient(SONNET)
    long = "R" * 8200  # 2,050 tokens
    (in1, write1, read1), (in2, write2, read2) = usage_of(client, long, 1), usage_of(client, long, 2)
    assert (write1, read1) == (2050, 0) and (write2, read2) == (0, 2050)
    assert in1 == in2 < 50  # only what follows the prefix is plain input
    haiku = ModelClient(HAIKU)  # 4,096 for claude-haiku-4-5: the same prefix is not cached there
    assert usage_of(haiku, long, 3)[1:] == (0, 0)


def test_the_tools_count_toward_the_cached_prefix(answering: FakeAnthropic) -> None:
    """The API caches the tools, then the system prompt: a forced tool's schema counts toward the minimum."""
    client = ModelClient(SONNET)
    schema = {"type": "object", "properties": {f"field_{i}": {"type": "string", "description": "D" * 60}
                                               for i in range(60)}}
    prefix = "R" * 3000  # 750 tokens alone: short
    result = client.generate_json(system="", prompt="go", schema=schema, cached_system_prefix=prefix, retry=False)
    assert result.usage.cache_write_tokens > 2048  # with the tool's ~1,500 tokens it is cached


def test_a_message_breakpoint_caches_the_prompt_up_to_it(answering: FakeAnthropic) -> None:
    client = ModelClient(SONNET)
    head = "FIXED " * 1400  # 8,400 characters: 2,100 tokens
    usage = [client.complete(system="", messages=[Message("user", f"{head}case {n}", cache_head=len(head))]).usage
             for n in (1, 2)]
    assert answering.requests[0]["messages"][0]["content"] == [
        {"type": "text", "text": head, "cache_control": {"type": "ephemeral"}}, {"type": "text", "text": "case 1"}]
    assert [(u.cache_write_tokens, u.cache_read_tokens) for u in usage] == [(2100, 0), (0, 2100)]


# -- what the judge caches --------------------------------------------------------------------------------------


def judged_rubric(tmp_path: Any) -> Rubric:
    path = tmp_path / "rubrics" / "judged.yaml"
    path.parent.mkdir(parents=True)
    path.write_text(JUDGED_RUBRIC.replace('examples:\n  gold: ["examples/judged/gold/*.md"]\n'
                                          '  anti_patterns: ["examples/judged/anti/*.md"]\n', ""))
    return load_rubric(path, import_root=tmp_path)


def judge_request(rubric: Rubric, artifact: str = "hello there", **extra: Any) -> JudgeRequest:
    dims = ["tone", "clarity"]
    return JudgeRequest(agent="writer", case="c1", attempt=1, inputs={"question": "QUESTION-1"}, artifact=artifact,
                        rubric=rubric, dimensions=tuple(dims), schema=judge_schema(rubric, dims), **extra)


def test_a_template_is_cached_up_to_its_first_case_slot(tmp_path: Any) -> None:
    rubric = judged_rubric(tmp_path)
    template = PromptTemplate(path=tmp_path / "t.md", text="You grade answers.\nCriteria:\n{criteria}\n\n"
                                                           "Question: {question}\nAnswer: {output}\nGrade:")
    request = judge_request(rubric)
    system, chat = chat_messages(render_messages(template, request))
    prefix, plain, (message,) = template_prompt(template, request, system, chat)
    assert (prefix, plain) == (None, "")
    assert message.text == chat[0].text  # the prompt as written: only a breakpoint is added
    assert message.text[:message.cache_head].endswith("one clear ask\n\nQuestion: ")  # the rubric's slot: stable
    assert "QUESTION-1" in message.text[message.cache_head:]
    # a chat template whose system message holds a case slot: nothing is stable, nothing is marked
    chatty = PromptTemplate(path=tmp_path / "t.yaml", text="", messages=(
        {"role": "system", "content": "Grade {question}"}, {"role": "user", "content": "{output}"}))
    system, chat = chat_messages(render_messages(chatty, request))
    prefix, plain, (message,) = template_prompt(chatty, request, system, chat)
    assert (prefix, plain, message.cache_head) == (None, "Grade QUESTION-1", 0)
    # a few-shot chat template: cached through the exchange, up to the last message's first case slot
    shots = PromptTemplate(path=tmp_path / "s.yaml", text="", messages=(
        {"role": "system", "content": "You grade."}, {"role": "user", "content": "Q: 2+2? A: 4"},
        {"role": "assistant", "content": "Grade: good"}, {"role": "user", "content": "{output}"}))
    system, chat = chat_messages(render_messages(shots, request))
    prefix, plain, messages = template_prompt(shots, request, system, chat)
    assert prefix == "You grade." and [m.cache_head for m in messages] == [0, len("Grade: good"), 0]


def test_a_cases_own_rubric_travels_in_the_message_not_the_prefix(tmp_path: Any) -> None:
    """Per-case criteria change with the case: in the prefix, every case would write a cache entry of its own."""
    rubric = judged_rubric(tmp_path)
    (tmp_path / "judge.md").write_text(prompt_text())
    judge = LlmJudge(load_prompt(tmp_path / "judge.md", source="test"), ModelClient(ModelSettings(model="mock/echo")))
    shared_message, shared_prefix, _, _ = judge._message(judge_request(rubric))
    own = rubric.model_copy(update={"variant": "c1"})
    own_message, own_prefix, _, _ = judge._message(judge_request(own))
    assert "TONE-DESCRIPTION" in (shared_prefix or "") and "TONE-DESCRIPTION" not in shared_message.text
    assert "TONE-DESCRIPTION" not in (own_prefix or "") and "TONE-DESCRIPTION" in own_message.text
    assert "EVALUATOR-PROMPT-MARKER" in (own_prefix or "")
    other, other_prefix, _, _ = judge._message(judge_request(rubric.model_copy(update={"variant": "c2"})))
    assert other_prefix == own_prefix  # one prefix for every case of the dataset


def test_the_judges_message_holds_only_what_changes(project: Project, fake_anthropic: FakeAnthropic) -> None:
    project.judged("""\
        agent: judged_writer
        cases:
          - {id: one, inputs: {text: "hello CASE-ONE"}}
          - {id: two, inputs: {text: "hello CASE-TWO"}}
        """)
    fake_anthropic.responder = lambda request: Reply.tool(answer(1.0, 1.0))
    project.run("suites/").assert_outcomes(passed=2)
    first, second = fake_anthropic.requests
    assert first["system"] == second["system"] and first["tools"] == second["tools"]  # the stable prefix, whole
    stable = first["system"][0]["text"]
    for marker in ("EVALUATOR-PROMPT-MARKER", "TONE-DESCRIPTION", "GOLD-EXAMPLE-MARKER", "ANTI-PATTERN-MARKER"):
        assert marker in stable
    messages = [json.dumps(r["messages"]) for r in (first, second)]
    assert all("TONE-DESCRIPTION" not in m and "EVALUATOR-PROMPT" not in m for m in messages)
    assert {"CASE-ONE" in m for m in messages} == {True, False}


def test_prompt_cache_off_marks_nothing(project: Project, fake_anthropic: FakeAnthropic) -> None:
    project.judged()
    fake_anthropic.responder = lambda request: Reply.tool(answer(1.0, 1.0))
    project.run("suites/", "--harness-prompt-cache", "off").assert_outcomes(passed=1)
    (request,) = fake_anthropic.requests
    assert isinstance(request["system"], str) and "EVALUATOR-PROMPT-MARKER" in request["system"]
    assert "cache_control" not in json.dumps(request)


# -- the summary says it once per rubric and model ------------------------------------------------------------------

LONG_RUBRIC = JUDGED_RUBRIC.replace("Judged Quality", "Long Quality").replace("judged/", "long/")


def two_rubrics(project: Project) -> None:
    """``judged``: a short prefix (three agents on claude-sonnet-4-6, two sharing the rubric); ``long``: examples
    long enough for claude-sonnet-4-6's 2,048 tokens."""
    project.judged(None)
    project.rubric("long", LONG_RUBRIC)
    project.write("rubrics/examples/long/gold/warm.md", "GOLD " + "a warm and specific note, " * 400 + "\n")
    project.write("rubrics/examples/long/anti/cold.md", "ANTI a cold note\n")
    project.agents("""\
        judge: {model: claude-sonnet-4-6, max_tokens: 1024, timeout_s: 5, max_retries: 0}
        agents:
          short_a: {rubric: judged, producer: {python: "agentlib:produce"}, evaluator: prompts/judge.md,
                    max_attempts: 1}
          short_b: {rubric: judged, producer: {python: "agentlib:produce"}, evaluator: prompts/judge.md,
                    max_attempts: 1}
          longer: {rubric: long, producer: {python: "agentlib:produce"}, evaluator: prompts/judge.md,
                   max_attempts: 1}
        """)
    for agent in ("short_a", "short_b", "longer"):
        project.cases(agent, f"agent: {agent}\ncases:\n" + "".join(
            f"  - {{id: c{n}, inputs: {{text: 'hello number {n}'}}}}\n" for n in range(3)))


@pytest.mark.parametrize("workers", [(), ("-n", "2")], ids=["one-process", "xdist"])
def test_a_prefix_too_short_to_cache_is_said_once_per_rubric_in_the_summary(
        project: Project, fake_anthropic: FakeAnthropic, workers: tuple[str, ...]) -> None:
    two_rubrics(project)
    fake_anthropic.responder = lambda request: Reply.tool(answer(1.0, 1.0))
    result = project.run("suites/", "--harness-cache", "off", *workers, subprocess=True)
    result.assert_outcomes(passed=9)
    lines = [line for line in result.stdout.lines if line.startswith("prompt cache:")]
    assert len(lines) == 1, result.stdout.str()  # nine items, two agents on the short rubric: one line
    assert lines[0].startswith("prompt cache: rubric judged on claude-sonnet-4-6 (agents short_a, short_b): the "
                               "judge's cached prefix is about ")
    assert "short of the 2,048 claude-sonnet-4-6 caches from" in lines[0] and "(characters / 4)" in lines[0]
    runs = project.runs()
    short = [r for r in runs if r["agent_name"] != "longer"]
    longer = [r for r in runs if r["agent_name"] == "longer"]
    assert all(r["cache_write_tokens"] == r["cache_read_tokens"] == 0 for r in short)  # as the API: nothing cached
    assert sum(r["cache_write_tokens"] for r in longer) > 2048 and sum(r["cache_read_tokens"] for r in longer) > 0


# -- the judge cascade --------------------------------------------------------------------------------------------


def answer(tone: float | None, clarity: float) -> dict[str, Any]:
    """An EvaluatorOutput for the judged dimensions (tone None: the judge could not judge it)."""
    tone_answer = ({"score": 0, "weight": 0.5, "reason": "cannot tell", "indeterminate": True} if tone is None
                   else {"score": tone, "weight": 0.5, "reason": f"tone {tone}"})
    return {"overallScore": 0.5, "passed": False, "feedback": "", "suggestedFixes": [],
            "dimensionScores": {"tone": tone_answer, "clarity": {"score": clarity, "weight": 0.3,
                                                                 "reason": f"clarity {clarity}"}}}


# What the cheap first judge says of each case (the check "greeting", 0.2, passes: every text says hello); the
# threshold is 0.8, the margin 0.1. The named judge says 1.0 of everything.
FIRST_SAYS = {"CLEAR-PASS": (1.0, 1.0),  # 1.00: decided by the first judge
              "CLEAR-FAIL": (0.0, 0.0),  # 0.20: decided by the first judge
              "BORDER": (1.0, 0.5),  # 0.85: within 0.1 of 0.8, escalated
              "UNSURE": (None, 1.0)}  # tone not judged: escalated


def cascade_responder(request: dict[str, Any]) -> Reply:
    text = json.dumps(request["messages"])
    if request["model"] == "claude-sonnet-4-6":
        return Reply.tool(answer(1.0, 1.0))
    return Reply.tool(answer(*next(says for marker, says in FIRST_SAYS.items() if marker in text)))


def test_the_cascade_escalates_only_uncertain_items_and_keeps_both_answers(
        project: Project, fake_anthropic: FakeAnthropic) -> None:
    project.judged("agent: judged_writer\ncases:\n" + "".join(
        f"  - {{id: {marker.lower()}, inputs: {{text: 'hello {marker}'}}}}\n" for marker in FIRST_SAYS))
    project.agents("""\
        judge:
          model: claude-sonnet-4-6
          max_tokens: 1024
          timeout_s: 5
          max_retries: 0
          cascade: {first: claude-haiku-4-5, escalate_when: {margin: 0.1}}
        agents:
          judged_writer:
            rubric: judged
            producer: {python: "agentlib:produce"}
            evaluator: prompts/judge.md
            max_attempts: 1
        """)
    fake_anthropic.responder = cascade_responder
    result = project.run("suites/", "-v")
    result.assert_outcomes(passed=3, failed=1)
    asked = sorted((r["model"], json.dumps(r["messages"]).split("hello ")[1][:6]) for r in fake_anthropic.requests)
    assert [m for m, _ in asked].count("claude-haiku-4-5") == 4  # every item, first
    assert sorted(text for m, text in asked if m == "claude-sonnet-4-6") == ["BORDER", "UNSURE"]  # only these
    result.stdout.fnmatch_lines(["judge cascade: 4 items judged first by claude-haiku-4-5: 2 decided by it, 2 (50%) "
                                 "escalated to claude-sonnet-4-6 (uncertain answers)"])

    def cascade_of(case: str) -> dict[str, Any]:
        path = project.cycle_dir() / "judged_writer" / case / "attempt-1.eval.json"
        return json.loads(path.read_text())["metadata"]["cascade"]

    border = cascade_of("border")
    assert (border["decided_by"], border["escalated"]) == ("claude-sonnet-4-6", True)
    assert border["why"] == "its score 0.85 is within 0.1 of the threshold 0.80"
    assert border["answers"]["claude-haiku-4-5"]["dimensionScores"]["clarity"]["score"] == 0.5  # both answers kept
    assert border["answers"]["claude-sonnet-4-6"]["dimensionScores"]["clarity"]["score"] == 1.0
    assert cascade_of("unsure")["why"] == "it could not judge tone"
    kept = cascade_of("clear-fail")
    assert (kept["decided_by"], kept["escalated"], list(kept["answers"])) == (
        "claude-haiku-4-5", False, ["claude-haiku-4-5"])
    usage = {row["case_id"]: json.loads(row["model_usage"]) for row in project.rows(
        "SELECT case_id, model_usage FROM attempt_details")}
    assert sorted(usage["border"]) == ["claude-haiku-4-5", "claude-sonnet-4-6"]  # both judges' tokens and cost
    assert sorted(usage["clear-pass"]) == ["claude-haiku-4-5"]


def test_uncertainty_is_the_score_near_the_threshold_a_gate_or_an_unjudged_dimension(tmp_path: Any) -> None:
    rubric = judged_rubric(tmp_path)
    request = judge_request(rubric, threshold=0.8, settled=0.2)  # the check's 0.2 is in
    assert uncertainty(request, answer(1.0, 1.0), 0.1) is None  # 1.00
    assert uncertainty(request, answer(1.0, 0.0), 0.1) == "its score 0.70 is within 0.1 of the threshold 0.80"
    assert uncertainty(request, answer(1.0, 0.0), 0.05) is None
    assert uncertainty(request, answer(None, 1.0), 0.1) == "it could not judge tone"
    alone = judge_request(rubric)  # no settled part known: the judged dimensions' own score, 0.3 / 0.8
    assert uncertainty(alone, answer(0.0, 1.0), 0.1) is None


def test_a_cascade_in_agents_yaml_is_read_and_its_mistakes_named(project: Project) -> None:
    project.judged()
    project.agents("""\
        judge: {model: claude-sonnet-4-6, cascade: {first: {model: claude-haiku-4-5, max_tokens: 512}}}
        agents:
          judged_writer: {rubric: judged, producer: {python: "agentlib:produce"}, evaluator: prompts/judge.md}
          own: {rubric: judged, producer: {python: "agentlib:produce"}, evaluator: prompts/judge.md,
                judge: {cascade: off}}
        """)
    from harness.loading import load_suite

    suite = load_suite(project.root / "suites" / "agents.yaml", rubrics_dir=project.root / "rubrics",
                       runner_kinds=("prompt", "template", "python", "command", "steps"))
    cascade = suite.agents["judged_writer"].judge.cascade
    assert cascade == JudgeCascade(ModelSettings(model="claude-haiku-4-5", max_tokens=512), margin=0.1)
    assert suite.agents["own"].judge.cascade is None
    for text, problem in [
        ("judge: {models: [claude-sonnet-4-6, claude-opus-4-6], cascade: {first: claude-haiku-4-5}}",
         "judge.cascade: a cascade is in front of one named judge"),
        ("judge: {model: claude-sonnet-4-6, cascade: {first: claude-sonnet-4-6}}",
         "judge.cascade.first: claude-sonnet-4-6 is the named judge itself"),
        ("judge: {model: claude-sonnet-4-6, cascade: {first: claude-haiku-4-5, escalate_when: {margin: 2}}}",
         "judge.cascade.escalate_when.margin"),
        ("model: {model: claude-sonnet-4-6, cascade: {first: claude-haiku-4-5}}", "model.cascade: is for judges"),
    ]:
        project.agents(text + "\nagents:\n  judged_writer: {rubric: judged, producer: {python: 'agentlib:produce'}, "
                              "evaluator: prompts/judge.md}\n")
        result = project.run("suites/")
        assert result.ret != 0 and problem in result.stdout.str(), (text, result.stdout.str())


def test_cached_chars_count_the_tool_the_prefix_and_the_messages_up_to_the_breakpoint() -> None:
    messages = [Message.user("FEWSHOT"), Message.assistant("ANSWER"), Message("user", "HEAD-rest", cache_head=4)]
    assert cached_chars(None, [Message.user("nothing marked")], None, "t") == 0
    assert cached_chars("PREFIX", messages, None, "t") == len("PREFIX") + len("FEWSHOTANSWER") + 4
    with_tool = cached_chars("PREFIX", [], {"type": "object"}, "submit_evaluation")
    assert with_tool > len("PREFIX") + len('{"type": "object"}')
