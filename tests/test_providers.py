"""Model providers: the openai provider through the real openai SDK against a fake chat-completions server on
127.0.0.1, the in-process mock provider, the registry, and a suite whose producer and judge use two providers."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from fnmatch import fnmatchcase
from typing import Any

import pytest

from conftest import JUDGED_CASES, Project, prompt_text
from harness.base.errors import ExitCode, ModelCallError, ModelUnavailable
from harness.llm import CallPolicy, Message, ModelClient, ModelSettings, Price, ToolSpec, Usage
from harness.llm.providers import (
    GENERATION_SETTINGS,
    Provider,
    UnknownProvider,
    model_problem,
    provider_factory,
    register_provider,
    unregister_provider,
)
from harness.llm.providers.mock import MockAnswer, forget_mock_model, mock_model
from harness.llm.providers.openai import OpenAIProvider, reply_from_completion
from harness.llm.types import ModelRequest
from harness.testing.fake_anthropic import FakeAnthropic
from harness.testing.fake_anthropic import Reply as AnthropicReply
from harness.testing.fake_openai import FakeOpenAI
from harness.testing.fake_openai import Reply as OpenAIReply
from harness.testing.fake_openai import judge_responder as openai_judge

GPT = ModelSettings(model="openai/gpt-4.1-mini", timeout_s=5, max_retries=0)
LOCAL = ModelSettings(model="openai/qwen2.5-7b-instruct", timeout_s=5, max_retries=0)  # a local server's: no price
SCHEMA = {"type": "object", "required": ["answer"], "properties": {"answer": {"type": "integer", "maximum": 10}}}


# -- openai, through the real SDK -------------------------------------------------------------------


def test_a_forced_tool_call_validates_and_retries_once_in_openai_shapes(fake_openai: FakeOpenAI) -> None:
    fake_openai.queue(OpenAIReply.tool({"answer": 11}), OpenAIReply.tool({"answer": 7}))
    result = ModelClient(GPT).generate_json(system="be brief", prompt="how many?", schema=SCHEMA, tool_name="submit")

    assert result.success and result.data == {"answer": 7} and result.attempts == 2
    first, retry = fake_openai.requests
    assert first["model"] == "gpt-4.1-mini" and first["messages"][0] == {"role": "system", "content": "be brief"}
    assert first["tool_choice"] == {"type": "function", "function": {"name": "submit"}}
    assert first["tools"][0]["function"]["parameters"] == SCHEMA
    # the retry shows the model its call and the error as the tool's result, in chat-completions turns
    call, answer = retry["messages"][-2:]
    assert call["role"] == "assistant" and call["tool_calls"][0]["function"]["name"] == "submit"
    assert answer["role"] == "tool" and answer["tool_call_id"] == call["tool_calls"][0]["id"]
    assert "answer: 11 is above the maximum 10" in answer["content"]
    assert result.model == "openai/gpt-4.1-mini"


def test_usage_counts_cached_prompt_tokens_as_cache_reads_and_prices_by_the_table(fake_openai: FakeOpenAI) -> None:
    fake_openai.queue(OpenAIReply.text("hi", usage={"prompt_tokens": 1000, "completion_tokens": 50,
                                                    "cached_tokens": 600}))
    policy = CallPolicy(prices={"openai/gpt-4.1-mini": Price(0.4, 1.6, 0.4, 0.1)})
    reply = ModelClient(GPT, policy=policy).complete(messages=[Message.user("hello")])

    assert reply.usage == Usage(input_tokens=400, output_tokens=50, cache_read_tokens=600)
    assert reply.cost_usd == pytest.approx((400 * 0.4 + 50 * 1.6 + 600 * 0.1) / 1e6)
    assert reply.stop_reason == "end_turn" and reply.text == "hi"


def test_a_model_without_a_price_records_its_tokens_and_an_unknown_cost(fake_openai: FakeOpenAI) -> None:
    fake_openai.queue(OpenAIReply.text("hi", usage={"prompt_tokens": 10, "completion_tokens": 5}))
    policy = CallPolicy()
    reply = ModelClient(LOCAL, policy=policy).complete(messages=[Message.user("hello")])

    assert reply.cost_usd is None and reply.usage.total_tokens == 15
    assert reply.spend.cost_usd is None and reply.spend.usage.total_tokens == 15
    stats = policy.stats.snapshot()
    assert stats["unpriced"] == 1 and stats["cost_usd"] == 0 and policy.stats.unpriced_models == [
        "openai/qwen2.5-7b-instruct"]


def test_current_openai_models_are_priced_dated_snapshots_as_their_alias(fake_openai: FakeOpenAI) -> None:
    fake_openai.queue(OpenAIReply.text("hi", usage={"prompt_tokens": 1000, "completion_tokens": 100},
                                       model="gpt-4.1-mini-2025-04-14"))
    reply = ModelClient(GPT, policy=CallPolicy()).complete(messages=[Message.user("hello")])
    assert reply.cost_usd == pytest.approx((1000 * 0.40 + 100 * 1.60) / 1e6)


def test_the_cost_cap_cannot_hold_for_a_model_without_a_price(fake_openai: FakeOpenAI) -> None:
    with pytest.raises(ModelCallError, match="cannot hold: openai/qwen2.5-7b-instruct has no price") as info:
        ModelClient(LOCAL, policy=CallPolicy(max_cost_usd=1.0)).complete(messages=[Message.user("hello")])
    assert info.value.exit_code == ExitCode.CONFIG_ERROR and fake_openai.calls == 0


def test_429_with_retry_after_is_retried_under_the_policy(fake_openai: FakeOpenAI) -> None:
    fake_openai.queue(OpenAIReply.error(429, retry_after=0.01), OpenAIReply.text("ok"))
    policy = CallPolicy()
    reply = ModelClient(replace(GPT, max_retries=2), policy=policy).complete(messages=[Message.user("x")])

    assert reply.text == "ok" and fake_openai.calls == 2
    stats = policy.stats.snapshot()
    assert stats["calls"] == 2 and stats["retries"] == 1 and stats["failures"] == 0


@pytest.mark.parametrize(("reply", "code", "words"), [
    (OpenAIReply.error(500), ExitCode.UNAVAILABLE, "server error (500"),
    (OpenAIReply.error(429), ExitCode.TEMP_FAIL, "rate limit (429"),
    (OpenAIReply.error(401), ExitCode.PROTOCOL, "check OPENAI_API_KEY"),
    (OpenAIReply.error(400, message="bad model"), ExitCode.PROTOCOL, "bad model"),
    (OpenAIReply.slow(2.0, OpenAIReply.text("late")), ExitCode.TIMEOUT, "timed out after 0.3s"),
    (OpenAIReply.raw(200, "not json"), ExitCode.PROTOCOL, "not JSON"),
], ids=["500", "429", "401", "400", "timeout", "not-json"])
def test_failures_map_to_the_exit_codes_every_provider_uses(fake_openai: FakeOpenAI, reply: OpenAIReply,
                                                            code: ExitCode, words: str) -> None:
    fake_openai.queue(reply)
    with pytest.raises(ModelCallError) as info:
        ModelClient(replace(GPT, timeout_s=0.3)).complete(messages=[Message.user("x")])
    assert info.value.exit_code == code and words in str(info.value)


# Each failure as both fakes script it (their Reply classes share the constructors), the exit code and the one
# line both providers give, with <url>, <model>, <key>, <variable> and <api> standing for each provider's own.
SAME_FAILURES: dict[str, tuple[Callable[[Any], Any] | None, ExitCode, str]] = {
    "rate limit": (lambda reply: reply.error(429, message="slow down", error_type="rate_limit_error"),
                   ExitCode.TEMP_FAIL, ("model API rate limit (429 rate_limit_error, retries off): slow down; lower "
                                        "the concurrency or retry later")),
    "server error": (lambda reply: reply.error(500, message="boom", error_type="api_error"), ExitCode.UNAVAILABLE,
                     "model API server error (500 api_error, retries off): boom; retry later or check the API status"),
    "key refused": (lambda reply: reply.error(401, message="bad key", error_type="authentication_error"),
                    ExitCode.PROTOCOL, "the API key was refused (401 authentication_error): bad key; check <key>"),
    "bad request": (lambda reply: reply.error(400, message="no such model", error_type="invalid_request_error"),
                    ExitCode.PROTOCOL, ("model API rejected the request to <model> (400 invalid_request_error): no "
                                        "such model; check the model name and the request")),
    "not JSON": (lambda reply: reply.raw(200, "<html>a proxy page</html>"), ExitCode.PROTOCOL,
                 ("the model API at <url> answered with something that is not JSON (*); check <variable> points at "
                  "<api>")),
    "timeout": (lambda reply: reply.slow(3.0, reply.text("late")), ExitCode.TIMEOUT,
                ("model call to <model> timed out after 0.5s (timeout_s bounds the whole call, retries included); "
                 "raise timeout_s or retry later")),
    "unreachable": (None, ExitCode.UNAVAILABLE,
                    "could not reach the model API at <url> (retries off): *; check the network and <variable>"),
}


@pytest.mark.parametrize("failure", list(SAME_FAILURES))
def test_both_sdk_providers_word_and_classify_a_failure_the_same_way(failure: str, fake_anthropic: FakeAnthropic,
                                                                     fake_openai: FakeOpenAI) -> None:
    script, code, expected = SAME_FAILURES[failure]
    providers = (
        (fake_anthropic, FakeAnthropic, AnthropicReply, ModelSettings(model="claude-haiku-4-5"), "ANTHROPIC_API_KEY",
         "ANTHROPIC_BASE_URL", "the Messages API"),
        (fake_openai, FakeOpenAI, OpenAIReply, GPT, "OPENAI_API_KEY", "OPENAI_BASE_URL", "a chat completions API"),
    )
    said = []
    for server, server_type, reply, settings, key, variable, api in providers:
        settings = replace(settings, timeout_s=0.5, max_retries=0)
        if script is None:
            with server_type() as stopped:
                url = stopped.base_url  # nothing listens there once stopped
            client = ModelClient(settings, api_key="sk-test-dummy", base_url=url)
        else:
            url = server.base_url
            server.queue(script(reply))
            client = ModelClient(settings)
        with pytest.raises(ModelCallError) as info:
            client.complete(messages=[Message.user("x")])
        text = str(info.value)
        for own, placeholder in ((url, "<url>"), (settings.qualified, "<model>"), (settings.name, "<model>"),
                                 (key, "<key>"), (variable, "<variable>"), (api, "<api>")):
            text = text.replace(own, placeholder)
        said.append((info.value.exit_code, text))
    (anthropic_code, anthropic_text), (openai_code, openai_text) = said
    assert anthropic_code == openai_code == code
    assert fnmatchcase(anthropic_text, expected) and fnmatchcase(openai_text, expected), said
    assert "\n" not in anthropic_text + openai_text


def test_each_api_says_overloaded_in_its_own_status_and_both_read_it_the_same(fake_anthropic: FakeAnthropic,
                                                                            fake_openai: FakeOpenAI) -> None:
    fake_anthropic.queue(AnthropicReply.error(529, message="busy", error_type="overloaded_error"))
    fake_openai.queue(OpenAIReply.error(503, message="busy", error_type="overloaded_error"))
    for settings in (ModelSettings(model="claude-haiku-4-5", max_retries=0), GPT):
        with pytest.raises(ModelCallError) as info:
            ModelClient(settings).complete(messages=[Message.user("x")])
        assert info.value.exit_code == ExitCode.TEMP_FAIL
        assert str(info.value).startswith("model API overloaded (5")
        assert str(info.value).endswith(" overloaded_error, retries off): busy; retry later")


def test_each_sdk_providers_attempts_go_through_the_policy_behind_a_proxy_too(
        fake_anthropic: FakeAnthropic, fake_openai: FakeOpenAI, monkeypatch: pytest.MonkeyPatch) -> None:
    """A proxy from the environment sends through a transport of its own, not the client's: the policy still counts
    every HTTP attempt, a retry's too, and the answer comes back through the proxy."""
    api = "http://api.model.invalid"  # never resolved: the proxy (the fake server) answers for it
    for server, reply, settings, base_url in (
            (fake_anthropic, AnthropicReply, ModelSettings(model="claude-haiku-4-5"), api),
            (fake_openai, OpenAIReply, GPT, f"{api}/v1")):
        monkeypatch.setenv("HTTP_PROXY", server.base_url)
        server.queue(reply.error(429, retry_after=0.01), reply.text("through the proxy"))
        policy = CallPolicy()
        client = ModelClient(replace(settings, max_retries=2), policy=policy, api_key="sk-test-dummy",
                             base_url=base_url)

        assert client.complete(messages=[Message.user("x")]).text == "through the proxy"
        assert server.calls == 2
        stats = policy.stats.snapshot()
        assert stats["calls"] == 2 and stats["retries"] == 1 and stats["failures"] == 0, settings.model


def test_concurrency_is_bounded_per_http_attempt(fake_openai: FakeOpenAI) -> None:
    from concurrent.futures import ThreadPoolExecutor

    fake_openai.responder = lambda request: OpenAIReply.text("ok")
    fake_openai.latency_s = 0.05
    policy = CallPolicy(3)
    client = ModelClient(GPT, policy=policy)
    with ThreadPoolExecutor(12) as pool:
        list(pool.map(lambda n: client.complete(messages=[Message.user(str(n))]), range(12)))
    assert fake_openai.calls == 12 and fake_openai.peak_in_flight <= 3 and policy.stats.snapshot()["calls"] == 12


def test_json_schema_output_for_servers_without_tool_calling(fake_openai: FakeOpenAI) -> None:
    fake_openai.queue(OpenAIReply.json({"answer": 3}))
    client = ModelClient(replace(GPT, structured_output="json_schema"))
    result = client.generate_json(system="", prompt="how many?", schema=SCHEMA)
    assert result.success and result.data == {"answer": 3}
    (request,) = fake_openai.requests
    assert "tools" not in request and request["response_format"]["json_schema"]["schema"] == SCHEMA


def test_an_executor_style_tool_loop_round_trips(fake_openai: FakeOpenAI) -> None:
    tools = [ToolSpec("read_file", "Read a file.", {"type": "object", "properties": {"path": {"type": "string"}}})]
    fake_openai.queue(OpenAIReply.tool({"path": "a.txt"}, name="read_file"), OpenAIReply.text("done"))
    client = ModelClient(GPT)
    first = client.complete(messages=[Message.user("go")], tools=tools, parallel_tools=False)
    call = first.tool_call
    assert call is not None and call.name == "read_file" and call.input == {"path": "a.txt"}
    from harness.llm import ToolResult

    client.complete(messages=[Message.user("go"), Message("assistant", tool_calls=(call,)),
                              Message("user", tool_results=(ToolResult(call.id, "contents"),))], tools=tools)
    assert fake_openai.requests[0]["parallel_tool_calls"] is False
    assert fake_openai.requests[1]["messages"][-1] == {"role": "tool", "tool_call_id": call.id, "content": "contents"}


def test_without_a_key_openai_is_unavailable_but_a_server_of_ones_own_needs_none(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    client = ModelClient(GPT)
    assert not client.available and client.unavailable_reason.startswith("no OPENAI_API_KEY")
    with pytest.raises(ModelUnavailable):
        client.complete(messages=[Message.user("x")])
    local = ModelClient(replace(GPT, base_url="http://127.0.0.1:9/v1"))
    assert local.available and local.base_url == "http://127.0.0.1:9/v1"


def test_the_response_cache_key_includes_the_provider_and_base_url(fake_openai: FakeOpenAI, tmp_path) -> None:
    from harness.testing import FakeAnthropic, Reply

    fake_openai.responder = lambda request: OpenAIReply.text("from openai")
    policy = CallPolicy.build(work_dir=tmp_path)
    with FakeAnthropic() as anthropic_server:
        anthropic_server.responder = lambda request: Reply.text("from anthropic")
        same_name = ModelSettings(model="gpt-4.1-mini", timeout_s=5, max_retries=0)  # a bare name: anthropic
        texts = [ModelClient(s, policy=policy, api_key="k", base_url=url).complete(messages=[Message.user("q")]).text
                 for s, url in ((GPT, fake_openai.base_url), (same_name, anthropic_server.base_url))]
        other = ModelClient(GPT, policy=policy, api_key="k", base_url=fake_openai.base_url.replace("127.0.0.1",
                                                                                                   "localhost"))
        other.complete(messages=[Message.user("q")])
    assert texts == ["from openai", "from anthropic"]
    assert fake_openai.calls == 2  # another base URL is another answer, not a cache hit
    assert ModelClient(GPT, policy=policy).complete(messages=[Message.user("q")]).cached


# -- mock ---------------------------------------------------------------------------------------------


def test_mock_echo_answers_text_and_fills_a_schema_offline() -> None:
    client = ModelClient(ModelSettings(model="mock/echo"))
    assert client.available
    assert client.complete(messages=[Message.user("say this")]).text == "say this"
    result = client.generate_json(system="", prompt="p", schema=SCHEMA)
    assert result.success and isinstance(result.data["answer"], int)
    assert result.model == "mock/echo" and result.usage.input_tokens > 0


def test_mock_score_judges_every_dimension_at_its_score() -> None:
    schema = {"type": "object", "required": ["dimensionScores"], "properties": {"dimensionScores": {
        "type": "object", "required": ["tone"], "properties": {"tone": {"type": "object", "properties": {
            "score": {"type": "number"}, "weight": {"type": "number"}, "reason": {"type": "string"}}}}}}}
    result = ModelClient(ModelSettings(model="mock/score-0.4")).generate_json(system="", prompt="p", schema=schema)
    assert result.success and result.data["dimensionScores"]["tone"]["score"] == 0.4


def test_a_scripted_mock_model_answers_and_fails_as_told() -> None:
    seen = []

    @mock_model("counting")
    def counting(request):  # noqa: ANN001, ANN202
        seen.append(request.messages[-1].text)
        return MockAnswer(error_status=503) if len(seen) > 1 else {"answer": len(seen)}

    try:
        client = ModelClient(ModelSettings(model="mock/counting"))
        assert client.generate_json(system="", prompt="one", schema=SCHEMA).data == {"answer": 1}
        with pytest.raises(ModelCallError) as info:
            client.complete(messages=[Message.user("two")])
        assert info.value.exit_code == ExitCode.UNAVAILABLE and seen == ["one", "two"]
    finally:
        forget_mock_model("counting")
    assert "no mock model 'counting'" in (model_problem(ModelSettings(model="mock/counting")) or "")


# -- generation settings: stop, top_p, seed, log probabilities ----------------------------------------------


def test_generation_settings_reach_each_provider_that_takes_them(fake_openai: FakeOpenAI,
                                                                 fake_anthropic: FakeAnthropic) -> None:
    """``stop``, ``top_p`` and ``seed`` go to an OpenAI-compatible server; Anthropic gets ``stop_sequences`` only
    (its API refuses ``top_p`` as it refuses ``temperature``, and has no seed nor log probabilities)."""
    fake_openai.queue(OpenAIReply.text("72\n\nQuestion: next"))
    fake_anthropic.queue(AnthropicReply.text("72"))
    settings = replace(GPT, stop=("\n\n", "Question:"), top_p=0.9, seed=7)
    reply = ModelClient(settings).complete(messages=[Message.user("q")], top_logprobs=3)
    (sent,) = fake_openai.requests
    assert (sent["stop"], sent["top_p"], sent["seed"], sent["logprobs"], sent["top_logprobs"]) == (
        ["\n\n", "Question:"], 0.9, 7, True, 3)
    assert reply.text == "72" and [t.token for t in reply.logprobs or ()] == ["72"]  # the fake stops as servers do
    claude = ModelClient(replace(settings, model="claude-haiku-4-5", timeout_s=5, max_retries=0))
    claude.complete(messages=[Message.user("q")], top_logprobs=3)
    (sent,) = fake_anthropic.requests
    assert sent["stop_sequences"] == ["\n\n", "Question:"]
    assert not {"top_p", "seed", "temperature", "logprobs", "top_logprobs"} & set(sent)
    assert [setting for setting in GENERATION_SETTINGS if claude.sends(setting)] == ["stop"]


@pytest.mark.parametrize(("model", "base_url", "sent"), [
    ("gpt-4.1-mini", None, {"temperature", "top_p", "stop", "seed", "logprobs", "top_logprobs"}),
    ("o3", None, {"seed"}),  # OpenAI's reasoning models refuse the others
    ("o3", "http://127.0.0.1:8000/v1", {"temperature", "top_p", "stop", "seed", "logprobs", "top_logprobs"}),
])
def test_openai_reasoning_models_get_only_the_settings_they_take(model: str, base_url: str | None,
                                                                 sent: set[str]) -> None:
    provider = OpenAIProvider(ModelSettings(model=f"openai/{model}", base_url=base_url), CallPolicy(),
                              api_key="sk-test-dummy")
    params = provider.wire_params(ModelRequest(model=model, temperature=0.3, top_p=0.9, stop=("\n",), seed=1,
                                               top_logprobs=5))
    assert set(params) & {"temperature", "top_p", "stop", "seed", "logprobs", "top_logprobs"} == sent


def test_the_mock_ends_its_answer_before_the_first_stop_sequence() -> None:
    client = ModelClient(ModelSettings(model="mock/echo", stop=("Question:", "\n\n")))
    reply = client.complete(messages=[Message.user("#### 72\n\nQuestion: next")])  # the first found, not listed
    assert (reply.text, reply.stop_reason, reply.logprobs) == ("#### 72", "stop_sequence", None)
    assert client.complete(messages=[Message.user("no stop here")]).text == "no stop here"
    assert not client.sends("logprobs") and client.sends("stop")


def test_log_probabilities_that_are_not_the_apis_shape_are_none() -> None:
    body = {"model": "m", "choices": [{"message": {"content": "3"}, "finish_reason": "stop", "logprobs": {
        "content": [{"token": "3", "logprob": -0.1, "top_logprobs": [{"token": "3", "logprob": -0.1},
                                                                      {"token": "4", "logprob": "high"}]}]}}]}
    (token,) = reply_from_completion(body, "m").logprobs or ()
    assert (token.token, token.logprob, token.top) == ("3", -0.1, (("3", -0.1),))  # the unreadable one left out
    for given in (None, {"content": None}, {"content": [{"logprob": -1}]}, "yes"):
        body["choices"][0]["logprobs"] = given
        assert reply_from_completion(body, "m").logprobs is None


# -- the registry ---------------------------------------------------------------------------------


def test_an_unknown_provider_is_named_with_a_near_miss() -> None:
    with pytest.raises(UnknownProvider, match=r"unknown model provider 'opnai' \(did you mean 'openai'\?\)"):
        provider_factory("opnai")
    assert model_problem(ModelSettings(model="claude-sonnet-4-6")) is None  # a bare name is Anthropic's
    with pytest.raises(ModelCallError, match="unknown model provider 'nope'"):
        ModelClient(ModelSettings(model="nope/x"))


def test_a_provider_name_cannot_be_taken_twice() -> None:
    with pytest.raises(ValueError, match="'openai' is already registered"):
        register_provider("openai", lambda *a, **k: None)


# -- a suite: the producer on one provider, the judge on another -------------------------------------

MIXED_AGENTS = """\
model:
  model: mock/echo
judge:
  model: openai/gpt-4.1-mini
  max_tokens: 1024
  timeout_s: 5
  max_retries: 0
agents:
  judged_writer:
    rubric: judged
    producer: prompts/writer.md
    evaluator: prompts/judge.md
"""


def mixed_project(project: Project) -> Project:
    project.judged()
    project.agents(MIXED_AGENTS)
    project.write("suites/prompts/writer.md", prompt_text("Test Writer", marker="WRITER-PROMPT"))
    return project


def test_a_producer_on_mock_and_a_judge_on_openai_record_their_costs_per_model(
        project: Project, fake_openai: FakeOpenAI) -> None:
    mixed_project(project)
    project.write("prices.yaml", "openai/gpt-4.1-mini: {input: 0.4, output: 1.6}\nmock/echo: {input: 0, output: 0}\n")
    project.ini("harness_prices = prices.yaml\n")
    fake_openai.responder = openai_judge()
    result = project.run("suites/", "--junitxml=report.xml")
    result.assert_outcomes(passed=1)

    (judge_request,) = fake_openai.requests
    assert judge_request["model"] == "gpt-4.1-mini"  # the judge went to openai, the producer stayed in-process
    (row,) = project.runs()
    (details,) = project.rows("SELECT model_usage FROM attempt_details")
    per_model = json.loads(details["model_usage"])
    assert set(per_model) == {"mock/echo", "openai/gpt-4.1-mini"}
    assert per_model["mock/echo"]["calls"] == 1 and per_model["mock/echo"]["cost_usd"] == 0
    judge = per_model["openai/gpt-4.1-mini"]
    assert judge["calls"] == 1 and judge["cost_usd"] == pytest.approx(
        (judge["input_tokens"] * 0.4 + judge["output_tokens"] * 1.6) / 1e6)
    assert row["cost_usd"] == pytest.approx(judge["cost_usd"])
    assert "harness_models" in (project.root / "report.xml").read_text()


def test_an_unpriced_judge_is_scored_and_its_cost_said_to_be_unknown(project: Project,
                                                                    fake_openai: FakeOpenAI) -> None:
    mixed_project(project)
    fake_openai.responder = openai_judge()
    result = project.run("suites/")
    result.assert_outcomes(passed=1)
    # the judge (openai/gpt-4.1-mini) is priced; the producer (mock/echo) is not: a cost, and the part unknown
    result.stdout.fnmatch_lines(["judged * 1 * 1 * 100% of 1 * $0.0* + unknown",
                                 "*mock/echo has no price: its tokens are recorded, its cost is unknown*"])
    (row,) = project.runs()
    (details,) = project.rows("SELECT cost_known FROM attempt_details")
    assert details["cost_known"] == 0 and row["input_tokens"] > 0


def test_the_cost_cap_with_an_unpriced_model_is_a_usage_error(project: Project) -> None:
    mixed_project(project)
    result = project.run("suites/", "--harness-max-cost", "1")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--harness-max-cost cannot hold: agent judged_writer calls *has no price*"])


def test_an_unknown_provider_in_agents_yaml_is_one_collection_line(project: Project) -> None:
    mixed_project(project)
    project.agents(MIXED_AGENTS.replace("openai/gpt-4.1-mini", "opnai/gpt-4.1-mini"))
    result = project.run("suites/")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(["*agents.yaml: judge.model: unknown model provider 'opnai' (did you mean 'openai'?)*"])


def test_the_judge_model_option_runs_a_suite_offline_on_the_mock(project: Project) -> None:
    project.judged(JUDGED_CASES)
    result = project.run("suites/", "--harness-judge-model", "mock/score-0.9")
    result.assert_outcomes(passed=1)
    (row,) = project.runs()
    assert row["model"] == "mock/score-0.9" and row["overall_score"] == pytest.approx(0.5 * 0.9 + 0.3 * 0.9 + 0.2)
    low = project.run("suites/", "--harness-judge-model", "mock/score-0.1")
    low.assert_outcomes(failed=1)


def test_the_judge_model_option_refuses_an_unknown_provider(project: Project) -> None:
    project.judged(JUDGED_CASES)
    result = project.run("suites/", "--harness-judge-model", "opnai/x")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*unknown model provider 'opnai'*"])


def test_a_plugin_provider_serves_the_judge(project: Project) -> None:
    project.judged(JUDGED_CASES)
    project.agents(MIXED_AGENTS.replace("openai/gpt-4.1-mini", "house/judge-1").replace("mock/echo",
                                                                                          "claude-haiku-4-5"))
    project.agents(project.root.joinpath("suites/agents.yaml").read_text().replace(
        "producer: prompts/writer.md", 'producer: {python: "agentlib:produce"}'))
    project.write("conftest.py", '''
        from harness.llm import ModelReply, ToolCall, Usage
        from harness.llm.providers import Provider
        from harness.llm.schema_fill import evaluator_output


        class House(Provider):
            name = "house"

            def send(self, request, *, batch=False):
                schema = request.tools[0].schema
                answer = evaluator_output(schema, {}, 1.0, 0.8)
                return ModelReply(text="", tool_calls=(ToolCall("c1", request.tools[0].name, answer),),
                                  usage=Usage(input_tokens=3, output_tokens=2), model=f"house/{request.model}",
                                  stop_reason="tool_use")


        def pytest_harness_providers():
            return {"house": House}
    ''')
    result = project.run("suites/")
    result.assert_outcomes(passed=1)
    (row,) = project.runs()
    assert row["model"] == "house/judge-1" and row["input_tokens"] == 3
    assert project.run("suites/").ret == 0  # a second session registers it again: no "already registered"


def test_the_tournaments_cost_meter_prices_with_the_runs_table_and_keeps_unpriced_tokens() -> None:
    from harness.apps.tournament.agents import CostMeter

    priced = ModelClient(ModelSettings(model="mock/echo"), policy=CallPolicy(prices={"mock/echo": Price(1e6, 0, 0, 0)}))
    meter = CostMeter()
    meter.add(priced.generate_json(system="", prompt="p", schema=SCHEMA))
    cost = meter.cost
    assert cost["model"] == "mock/echo" and cost["calls"] == 1 and cost["cost_usd"] == cost["input_tokens"] > 0
    unpriced = CostMeter()
    unpriced.add(ModelClient(ModelSettings(model="mock/echo")).complete(messages=[Message.user("x")]))
    assert unpriced.cost["cost_usd"] == 0 and unpriced.cost["input_tokens"] > 0 and not unpriced.spend.cost_known


# -- what a provider cannot do is one line ----------------------------------------------------------------------


def test_a_plugin_provider_that_cannot_be_built_is_one_line() -> None:
    class Broken(Provider):
        name = "broken"

        def __init__(self, *args, **kwargs) -> None:  # noqa: ANN002, ANN003
            raise ValueError("no config file at ~/.house.toml")

        def send(self, request, *, batch=False):  # noqa: ANN001, ANN202
            raise AssertionError("never built")

    register_provider("broken", Broken)
    try:
        with pytest.raises(ModelCallError) as info:
            ModelClient(ModelSettings(model="broken/m1"))
    finally:
        unregister_provider("broken")
    assert str(info.value) == ("model provider 'broken' could not be set up: ValueError: no config file at "
                               "~/.house.toml; check the provider (its plugin or its server)")
    assert info.value.exit_code == ExitCode.INTERNAL_ERROR


@pytest.mark.parametrize(("raised", "code"), [
    (ConnectionRefusedError(111, "Connection refused"), ExitCode.UNAVAILABLE),
    (TimeoutError("read timed out"), ExitCode.TIMEOUT),
    (KeyError("choices"), ExitCode.INTERNAL_ERROR),
], ids=["unreachable", "timeout", "bug"])
def test_a_plugin_providers_exception_is_one_line_with_an_exit_code(raised: Exception, code: ExitCode) -> None:
    class Failing(Provider):
        name = "failing"

        def send(self, request, *, batch=False):  # noqa: ANN001, ANN202
            raise raised

    register_provider("failing", Failing)
    try:
        with pytest.raises(ModelCallError) as info:
            ModelClient(ModelSettings(model="failing/m1")).complete(messages=[Message.user("hi")])
    finally:
        unregister_provider("failing")
    line = str(info.value)
    assert line.startswith(f"model provider 'failing' for failing/m1 failed: {type(raised).__name__}: ")
    assert "\n" not in line and info.value.exit_code == code and info.value.__cause__ is None


def test_a_provider_without_a_model_name_is_one_collection_line(project: Project) -> None:
    mixed_project(project)
    project.agents(MIXED_AGENTS.replace("model: openai/gpt-4.1-mini", "model: openai/"))
    result = project.run("suites/")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(["suites/agents.yaml: judge.model: 'openai/' has no model name after the provider "
                                 "(write provider/model, e.g. openai/gpt-4.1-mini, or a bare name for Anthropic's)"])
    option = project.run("suites/", "--harness-judge-model", "openai/")
    assert option.ret == pytest.ExitCode.USAGE_ERROR
    option.stderr.fnmatch_lines(["*--harness-judge-model openai/: 'openai/' has no model name after the provider*"])


@pytest.mark.parametrize(("written", "right"), [
    ("gpt-4.1", "`openai/gpt-4.1` (the key from OPENAI_API_KEY)"),
    ("o3-mini", "`openai/o3-mini`"),
    ("gemini-2.5-pro", "`openai/gemini-2.5-pro` with `base_url: https://generativelanguage.googleapis.com/v1beta/"),
    ("llama3.1:8b", "`openai/llama3.1:8b` with the `base_url` of the OpenAI-compatible server"),
])
def test_another_providers_bare_model_name_is_one_line_with_its_right_spelling(project: Project, written: str,
                                                                                 right: str) -> None:
    """A bare name is Anthropic's: DeepEval's `gpt-4.1` would be sent to Anthropic's endpoint without a word."""
    mixed_project(project)
    project.agents(MIXED_AGENTS.replace("model: openai/gpt-4.1-mini", f"model: {written}"))
    result = project.run("suites/")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    lines = [line for line in result.outlines if line.startswith("suites/agents.yaml: judge.model: ")]
    assert lines and lines[0].startswith(f"suites/agents.yaml: judge.model: {written} is ")
    assert f"a bare name means Anthropic's; write {right}" in lines[0]
    assert "Traceback" not in result.stdout.str()
    option = project.run("suites/", "--harness-judge-model", written)
    assert option.ret == pytest.ExitCode.USAGE_ERROR
    assert f"write {right}" in option.stderr.str()


def test_a_model_or_judge_may_be_written_as_its_name_alone(project: Project, fake_openai: FakeOpenAI) -> None:
    """`judge: openai/gpt-4.1-mini` means `judge: {model: openai/gpt-4.1-mini}`, as users write it first."""
    mixed_project(project)
    project.agents("model: mock/echo\njudge: openai/gpt-4.1-mini\n" + MIXED_AGENTS[MIXED_AGENTS.index("agents:"):])
    fake_openai.responder = openai_judge()
    result = project.run("suites/")
    result.assert_outcomes(passed=1)
    (judge_request,) = fake_openai.requests  # the judge on OpenAI; the producer on the mock provider, not called
    assert judge_request["model"] == "gpt-4.1-mini"


def test_a_missing_openai_key_is_named_in_the_summary(project: Project, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-dummy")  # an Anthropic key does not score an OpenAI judge
    mixed_project(project)
    result = project.run("suites/", "-rs")
    result.assert_outcomes(skipped=1)
    summary = [line for line in result.stdout.lines if line.startswith("judged: 1 not scored")]
    assert summary == ["judged: 1 not scored (indeterminate): no OPENAI_API_KEY (nor OPENAI_BASE_URL for a server of "
                       "your own): set it in the environment to run the model; anything that needs a model is "
                       "indeterminate until then"]
    assert "ANTHROPIC_API_KEY" not in result.stdout.str()


WITHOUT_OPENAI = '''
import sys

sys.modules["openai"] = None  # as if the openai extra were not installed: `import openai` raises ImportError
'''


def test_without_the_openai_extra_an_openai_model_is_one_collection_line(project: Project) -> None:
    mixed_project(project)
    project.write("conftest.py", WITHOUT_OPENAI)
    result = project.run("suites/", subprocess=True)
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(["suites/agents.yaml: judge.model: openai/... models need the openai package, which "
                                 "is not installed: pip install 'pytest-rubric[openai]' (or pip install openai)"])
    output = result.stdout.str() + result.stderr.str()
    assert "Traceback" not in output and "Exception in thread" not in output


UNBUILDABLE_PROVIDER = '''
from harness.llm.providers import Provider


class House(Provider):
    name = "house"

    def __init__(self, *args, **kwargs):
        raise RuntimeError("no house config")

    def send(self, request, *, batch=False):
        raise AssertionError("never built")


def pytest_harness_providers():
    return {"house": House}
'''


def test_a_plugin_provider_that_cannot_be_set_up_is_one_collection_line(project: Project) -> None:
    project.judged(JUDGED_CASES)
    agents = project.root / "suites/agents.yaml"
    agents.write_text(agents.read_text().replace("claude-haiku-4-5", "house/judge-1"))
    project.write("conftest.py", UNBUILDABLE_PROVIDER)
    result = project.run("suites/")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(["model provider 'house' could not be set up: RuntimeError: no house config; check the "
                                 "provider (its plugin or its server)"])
    assert "Traceback" not in result.stdout.str() and "conftest.py:" not in result.stdout.str()
