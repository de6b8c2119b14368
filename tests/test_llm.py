"""harness.llm against the real anthropic SDK talking to the fake Messages API on 127.0.0.1."""

from __future__ import annotations

import json
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from harness.base.errors import ExitCode, HarnessConfigError, ModelCallError, ModelUnavailable
from harness.llm import (
    PRICES_PER_MTOK,
    CallPolicy,
    CostCapReached,
    GenerationResult,
    Message,
    ModelClient,
    ModelSettings,
    Price,
    Usage,
    extract_json_object,
    known_price,
    load_price_table,
    price_usd,
)
from harness.llm.ratelimit import RateLimits
from harness.testing import FakeAnthropic, Reply, judge_responder

FAST = ModelSettings(model="claude-haiku-4-5", max_retries=0, timeout_s=5.0)


def evaluator_schema(*dims: str) -> dict[str, Any]:
    """An EvaluatorOutput schema (seed 000 section 2) whose dimensionScores names ``dims``."""
    dim = {
        "type": "object",
        "required": ["score", "weight", "reason"],
        "properties": {
            "score": {"type": "number", "minimum": 0, "maximum": 1},
            "weight": {"type": "number", "minimum": 0, "maximum": 1},
            "reason": {"type": "string", "minLength": 1},
        },
        "additionalProperties": False,
    }
    return {
        "type": "object",
        "required": ["overallScore", "passed", "dimensionScores", "feedback", "suggestedFixes"],
        "properties": {
            "overallScore": {"type": "number", "minimum": 0, "maximum": 1},
            "passed": {"type": "boolean"},
            "dimensionScores": {
                "type": "object",
                "required": list(dims),
                "properties": {d: dim for d in dims},
                "additionalProperties": False,
            },
            "feedback": {"type": "string"},
            "suggestedFixes": {"type": "array", "items": {"type": "string"}},
        },
        "additionalProperties": False,
    }


SCHEMA = evaluator_schema("clarity", "accuracy")


def valid_output(score: float = 0.9) -> dict[str, Any]:
    return {
        "overallScore": score,
        "passed": score >= 0.85,
        "dimensionScores": {
            "clarity": {"score": score, "weight": 0.5, "reason": "clear"},
            "accuracy": {"score": score, "weight": 0.5, "reason": "correct"},
        },
        "feedback": "fine",
        "suggestedFixes": [],
    }


def generate(client: ModelClient, **kwargs: Any) -> GenerationResult:
    return client.generate_json(system="You are a judge.", prompt="Judge this.", schema=SCHEMA, **kwargs)


# -- generate_json: seed 003's flow -----------------------------------------------------------------


def test_valid_answer_first_time(fake_anthropic: FakeAnthropic) -> None:
    fake_anthropic.queue(Reply.tool(valid_output(), usage={"input_tokens": 120, "output_tokens": 40}))
    result = generate(ModelClient(FAST))

    assert result.success and result.attempts == 1 and result.validation_errors == []
    assert result.data == valid_output()
    assert json.loads(result.raw_response or "") == valid_output()
    assert result.usage == Usage(input_tokens=120, output_tokens=40)
    assert set(result.timings_ms) == {"prompt_render", "llm_call", "validation", "total"}
    assert result.timings_ms["total"] >= result.timings_ms["llm_call"] > 0

    (body,) = fake_anthropic.requests
    assert body["model"] == "claude-haiku-4-5" and body["max_tokens"] == 4096
    (tool,) = body["tools"]
    assert tool["name"] == "submit_result" and tool["input_schema"] == SCHEMA and tool["description"]
    assert body["tool_choice"] == {"type": "tool", "name": "submit_result"}
    assert body["messages"] == [{"role": "user", "content": "Judge this."}]
    assert body["system"] == "You are a judge."
    assert "temperature" not in body  # API 2026-10-21 rejects sampling parameters
    assert fake_anthropic.request_headers[0]["authorization"] == "Bearer sk-ant-test-dummy"


def test_invalid_then_valid_retry_shows_answer_and_errors(fake_anthropic: FakeAnthropic) -> None:
    bad = valid_output()
    bad["overallScore"] = 1.7
    del bad["dimensionScores"]["accuracy"]["reason"]
    fake_anthropic.queue(
        Reply.tool(bad, usage={"input_tokens": 100, "output_tokens": 30, "cache_creation_input_tokens": 50}),
        Reply.tool(valid_output(), usage={"input_tokens": 200, "output_tokens": 35, "cache_read_input_tokens": 50}),
    )
    result = generate(ModelClient(FAST))

    assert result.success and result.attempts == 2 and result.data == valid_output()
    assert result.usage == Usage(input_tokens=300, output_tokens=65, cache_write_tokens=50, cache_read_tokens=50)

    first, second = fake_anthropic.requests
    assert second["tools"] == first["tools"] and second["tool_choice"] == first["tool_choice"]
    user, assistant, feedback = second["messages"]
    assert user == {"role": "user", "content": "Judge this."}
    assert assistant["role"] == "assistant"
    (tool_use,) = assistant["content"]
    assert tool_use["type"] == "tool_use" and tool_use["name"] == "submit_result" and tool_use["input"] == bad
    (tool_result,) = feedback["content"]
    assert feedback["role"] == "user"
    assert tool_result["type"] == "tool_result" and tool_result["tool_use_id"] == tool_use["id"]
    assert tool_result["is_error"] is True
    text = tool_result["content"]
    assert "overallScore: 1.7 is above the maximum 1" in text
    assert "dimensionScores.accuracy.reason: missing" in text


def test_always_invalid_fails_after_one_retry(fake_anthropic: FakeAnthropic) -> None:
    bad = {"overallScore": "high", "passed": True, "dimensionScores": {}, "feedback": "x", "suggestedFixes": []}
    fake_anthropic.queue(Reply.tool(bad), Reply.tool(bad), Reply.tool(valid_output()))
    result = generate(ModelClient(FAST))

    assert result.success is False and result.attempts == 2 and result.data is None
    assert fake_anthropic.calls == 2 and fake_anthropic.pending == 1  # exactly one retry
    assert result.validation_errors == [  # wrong values first, then missing fields; one line each
        "overallScore: 'high' is text, not a number",
        "dimensionScores.accuracy: missing",
        "dimensionScores.clarity: missing",
    ]
    assert json.loads(result.raw_response or "") == bad
    assert result.usage.input_tokens > 0 and result.usage.output_tokens > 0  # both calls counted


def test_text_answer_with_json_fence_is_accepted(fake_anthropic: FakeAnthropic) -> None:
    fake_anthropic.queue(Reply.text("Here is my verdict:\n```json\n" + json.dumps(valid_output()) + "\n```\nDone."))
    result = generate(ModelClient(FAST))
    assert result.success and result.attempts == 1 and result.data == valid_output()


def test_text_answer_without_json_is_retried_as_text(fake_anthropic: FakeAnthropic) -> None:
    fake_anthropic.queue(Reply.text("I think it is good."), Reply.text(json.dumps(valid_output())))
    result = generate(ModelClient(FAST))

    assert result.success and result.attempts == 2
    _, assistant, feedback = fake_anthropic.requests[1]["messages"]
    assert assistant == {"role": "assistant", "content": "I think it is good."}
    assert feedback["role"] == "user" and "no JSON object in the answer" in feedback["content"]


def test_extract_json_object() -> None:
    assert extract_json_object('see ```json\n{"a": 1}\n``` and {"b": 2}') == {"a": 1}
    assert extract_json_object('noise {not json} then {"c": [1, {"d": 2}]} tail') == {"c": [1, {"d": 2}]}
    assert extract_json_object("[1, 2] no object") is None


def test_broken_schema_is_refused_before_any_call(fake_anthropic: FakeAnthropic) -> None:
    with pytest.raises(ValueError, match="not a valid JSON Schema"):
        ModelClient(FAST).generate_json(system="s", prompt="p", schema={"type": "no-such-type"})
    assert fake_anthropic.calls == 0


def test_judge_responder_follows_the_schema_it_is_sent(fake_anthropic: FakeAnthropic) -> None:
    fake_anthropic.responder = judge_responder({"clarity": 0.5})
    schema = evaluator_schema("clarity", "accuracy", "tone")
    result = ModelClient(FAST).generate_json(system="s", prompt="p", schema=schema)

    assert result.success and result.attempts == 1 and result.data is not None
    dims = result.data["dimensionScores"]
    assert set(dims) == {"clarity", "accuracy", "tone"}
    assert dims["clarity"]["score"] == 0.5 and dims["tone"]["score"] == 1.0
    assert result.data["overallScore"] == pytest.approx((0.5 + 1 + 1) / 3)
    assert result.data["suggestedFixes"] == ["Improve clarity"]


# -- complete: requests, caching, usage -------------------------------------------------------------


def test_cached_system_prefix_is_sent_with_cache_control(fake_anthropic: FakeAnthropic) -> None:
    fake_anthropic.queue(Reply.text("a"), Reply.text("b"))
    client = ModelClient(FAST)
    client.complete(system="the case", messages=[Message.user("hi")], cached_system_prefix="RUBRIC")
    client.complete(system="plain", messages=[Message.user("hi")])

    cached, plain = fake_anthropic.requests
    assert cached["system"] == [
        {"type": "text", "text": "RUBRIC", "cache_control": {"type": "ephemeral"}},
        {"type": "text", "text": "the case"},
    ]
    assert plain["system"] == "plain"


def test_usage_and_cache_tokens_are_parsed(fake_anthropic: FakeAnthropic) -> None:
    usage = {"input_tokens": 11, "output_tokens": 22, "cache_creation_input_tokens": 33, "cache_read_input_tokens": 44}
    fake_anthropic.queue(Reply.text("hello ", usage=usage, model="claude-opus-4-5"))
    reply = ModelClient(FAST).complete(system="s", messages=[Message.user("hi")])

    assert reply.text == "hello " and reply.tool_input is None and reply.stop_reason == "end_turn"
    assert reply.model == "claude-opus-4-5"
    assert reply.usage == Usage(input_tokens=11, output_tokens=22, cache_write_tokens=33, cache_read_tokens=44)
    assert reply.usage + reply.usage == Usage(22, 44, 66, 88)


def test_simulated_cache_writes_then_reads(fake_anthropic: FakeAnthropic) -> None:
    fake_anthropic.queue(Reply.text("a"), Reply.text("b"))
    client = ModelClient(FAST)  # claude-haiku-4-5 caches a prefix of 4,096 tokens or more
    first = client.complete(system="x", messages=[Message.user("1")], cached_system_prefix="R" * 16_400)
    second = client.complete(system="y", messages=[Message.user("2")], cached_system_prefix="R" * 16_400)
    assert (first.usage.cache_write_tokens, first.usage.cache_read_tokens) == (4100, 0)
    assert (second.usage.cache_write_tokens, second.usage.cache_read_tokens) == (0, 4100)


# -- failures ---------------------------------------------------------------------------------------


def test_rate_limit_then_valid_honours_retry_after(fake_anthropic: FakeAnthropic) -> None:
    # 0.6 s is longer than the SDK's own first backoff (at most 0.5 s): the wait proves retry-after was read.
    fake_anthropic.queue(Reply.error(429, retry_after=0.6), Reply.tool(valid_output()))
    result = generate(ModelClient(replace(FAST, max_retries=1)))

    assert result.success and result.attempts == 1
    assert fake_anthropic.calls == 2
    first, second = fake_anthropic.request_times
    assert second - first >= 0.58
    assert fake_anthropic.request_headers[1]["x-stainless-retry-count"] == "1"


def test_server_error_after_retries_is_unavailable(fake_anthropic: FakeAnthropic) -> None:
    fake_anthropic.queue(Reply.error(500, retry_after=0.01), Reply.error(500, retry_after=0.01))
    with pytest.raises(ModelCallError) as info:
        generate(ModelClient(replace(FAST, max_retries=1)))

    assert info.value.exit_code == ExitCode.UNAVAILABLE == 69
    assert fake_anthropic.calls == 2
    message = str(info.value)
    assert "500" in message and "after 1 retry" in message and "\n" not in message


@pytest.mark.parametrize(
    ("status", "code", "words"),
    [
        (429, ExitCode.TEMP_FAIL, "rate limit"),
        (529, ExitCode.TEMP_FAIL, "overloaded"),
        (503, ExitCode.UNAVAILABLE, "server error"),
        (400, ExitCode.PROTOCOL, "rejected the request"),
        (404, ExitCode.PROTOCOL, "check the model name"),
        (401, ExitCode.PROTOCOL, "API key was refused"),
    ],
)
def test_status_codes_map_to_exit_codes(
    fake_anthropic: FakeAnthropic, status: int, code: ExitCode, words: str
) -> None:
    fake_anthropic.queue(Reply.error(status))
    with pytest.raises(ModelCallError) as info:
        ModelClient(FAST).complete(system="s", messages=[Message.user("hi")])
    assert info.value.exit_code == code
    assert words in str(info.value) and "\n" not in str(info.value)
    assert fake_anthropic.calls == 1


def test_slow_answer_past_timeout_is_timeout(fake_anthropic: FakeAnthropic) -> None:
    client = ModelClient(replace(FAST, timeout_s=0.3))
    fake_anthropic.queue(Reply.text("warm"), Reply.slow(2.0, Reply.text("too late")))
    client.complete(system="s", messages=[Message.user("hi")])  # the SDK import is not timed
    started = time.monotonic()
    with pytest.raises(ModelCallError) as info:
        client.complete(system="s", messages=[Message.user("hi")])
    assert info.value.exit_code == ExitCode.TIMEOUT == 81
    assert "timed out after 0.3s" in str(info.value)
    assert time.monotonic() - started < 1.5


def test_unreachable_server_is_unavailable(monkeypatch: pytest.MonkeyPatch) -> None:
    with FakeAnthropic() as server:
        dead_url = server.base_url  # nothing listens there once stopped
    client = ModelClient(FAST, api_key="sk-ant-test-dummy", base_url=dead_url)  # constructing is free
    with pytest.raises(ModelCallError) as info:
        client.complete(system="s", messages=[Message.user("hi")])
    assert info.value.exit_code == ExitCode.UNAVAILABLE
    assert dead_url in str(info.value)


def test_answer_that_is_not_json_is_protocol_error(fake_anthropic: FakeAnthropic) -> None:
    fake_anthropic.queue(Reply.raw(200, "<html>proxy login</html>", {"content-type": "application/json"}))
    with pytest.raises(ModelCallError) as info:
        ModelClient(FAST).complete(system="s", messages=[Message.user("hi")])
    assert info.value.exit_code == ExitCode.PROTOCOL


def test_no_api_key_is_unavailable_without_a_request(
    fake_anthropic: FakeAnthropic, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    client = ModelClient(FAST)
    assert client.available is False
    with pytest.raises(ModelUnavailable, match="^no ANTHROPIC_API_KEY: "):
        client.complete(system="s", messages=[Message.user("hi")])
    with pytest.raises(ModelUnavailable):
        generate(client)
    assert fake_anthropic.calls == 0
    assert ModelClient(FAST, api_key="explicit").available is True


def test_one_client_shared_by_threads(fake_anthropic: FakeAnthropic) -> None:
    fake_anthropic.responder = judge_responder()
    fake_anthropic.latency_s = 0.15
    client = ModelClient(FAST)
    results: list[GenerationResult] = []
    lock = threading.Lock()

    def work() -> None:
        result = generate(client)
        with lock:
            results.append(result)

    threads = [threading.Thread(target=work) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=10)

    assert len(results) == 6 and all(r.success for r in results)
    assert fake_anthropic.calls == 6
    assert fake_anthropic.peak_in_flight >= 2


# -- prices -----------------------------------------------------------------------------------------


def test_price_usd_arithmetic() -> None:
    million = Usage(1_000_000, 1_000_000, 1_000_000, 1_000_000)
    assert price_usd("claude-sonnet-4-5", million) == pytest.approx(3 + 15 + 3.75 + 0.30)
    assert price_usd("claude-opus-4-5", million) == pytest.approx(5 + 25 + 6.25 + 0.50)
    assert price_usd("claude-haiku-4-5-20251001", million) == pytest.approx(1 + 5 + 1.25 + 0.10)
    assert price_usd("claude-sonnet-4-5", Usage(input_tokens=2_000, output_tokens=500)) == pytest.approx(
        2_000 * 3 / 1e6 + 500 * 15 / 1e6
    )
    assert known_price("claude-haiku-4-5") and known_price("claude-sonnet-4-5-20250929")
    assert not known_price("claude-imaginary-9")
    assert price_usd("claude-imaginary-9", million) is None  # unknown: never another model's price
    assert price_usd("claude-opus-4-5", Usage()) == 0.0


def test_price_usd_with_a_table_and_the_batch_discount() -> None:
    table = {"claude-x": Price(2.0, 10.0, 2.5, 0.2)}
    usage = Usage(1_000_000, 1_000_000, 1_000_000, 1_000_000)
    assert price_usd("claude-x", usage, table=table) == pytest.approx(14.7)
    assert price_usd("claude-x-20260101", usage, table=table, batch=True) == pytest.approx(7.35)
    assert price_usd("claude-sonnet-4-5", usage, batch=True) == pytest.approx((3 + 15 + 3.75 + 0.30) / 2)
    assert known_price("claude-x", table=table) and not known_price("claude-x")


def test_load_price_table_overrides_and_adds(tmp_path: Path) -> None:
    path = tmp_path / "prices.yaml"
    path.write_text("claude-haiku-4-5: {output: 4}\nclaude-new-1: {input: 2, output: 8}\n")
    table = load_price_table(path)
    assert table["claude-haiku-4-5"] == Price(1.0, 4.0, 1.25, 0.10)  # unchanged fields inherited
    assert table["claude-new-1"] == pytest.approx(Price(2.0, 8.0, 2.5, 0.2))  # cache prices by multiplier
    assert table["claude-opus-4-5"] == PRICES_PER_MTOK["claude-opus-4-5"]

    as_json = tmp_path / "prices.json"
    as_json.write_text(json.dumps({"claude-new-2": {"input": 1, "output": 2, "cache_write": 0, "cache_read": 0}}))
    assert load_price_table(as_json)["claude-new-2"] == Price(1.0, 2.0, 0.0, 0.0)


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ("claude-new-1: {input: 2}\n", "prices.yaml: claude-new-1.output: missing"),
        ("claude-haiku-4-5: {output: cheap}\n", "prices.yaml: claude-haiku-4-5.output: expected a number, got 'cheap'"),
        ("claude-haiku-4-5: {output: -1}\n", "prices.yaml: claude-haiku-4-5.output: -1 is below 0"),
        ("claude-haiku-4-5: {outptu: 1}\n",
         "prices.yaml: claude-haiku-4-5.outptu: unknown key (did you mean 'output'?)"),
        ("claude-haiku-4-5: 3\n", "prices.yaml: claude-haiku-4-5: expected a mapping, got 3"),
        ("- a\n", "prices.yaml: expected a mapping, got ['a']"),
        ("a: [\n", "prices.yaml: line"),
    ],
)
def test_load_price_table_errors_name_file_and_field(tmp_path: Path, text: str, where: str) -> None:
    path = tmp_path / "prices.yaml"
    path.write_text(text)
    with pytest.raises(HarnessConfigError) as info:
        load_price_table(path)
    assert str(info.value).startswith(str(tmp_path / where))


# -- the call policy --------------------------------------------------------------------------------


def test_calls_in_flight_never_exceed_the_bound(fake_anthropic: FakeAnthropic) -> None:
    fake_anthropic.responder = lambda request: Reply.text("ok")
    fake_anthropic.latency_s = 0.05
    policy = CallPolicy(4)
    clients = [ModelClient(replace(FAST, model=m), policy=policy) for m in ("claude-haiku-4-5", "claude-opus-4-5")]
    errors: list[BaseException] = []

    def work(n: int) -> None:
        try:
            clients[n % 2].complete(system="s", messages=[Message.user(str(n))])
        except BaseException as err:  # pragma: no cover - shown by the assert below
            errors.append(err)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=10)

    assert errors == []
    assert fake_anthropic.calls == 12
    assert fake_anthropic.peak_in_flight == 4  # 12 threads, bound 4: reached, never exceeded
    stats = policy.stats.snapshot()
    assert stats["peak_in_flight"] == 4 and stats["in_flight"] == 0 and stats["calls"] == 12


def test_stats_count_tokens_cost_and_prompt_cache(fake_anthropic: FakeAnthropic) -> None:
    policy = CallPolicy(2)
    client = ModelClient(FAST, policy=policy)
    fake_anthropic.queue(Reply.text("a"), Reply.text("b"))
    first = client.complete(system="x", messages=[Message.user("1")], cached_system_prefix="R" * 16_400)
    second = client.complete(system="y", messages=[Message.user("2")], cached_system_prefix="R" * 16_400)

    assert first.cost_usd > 0 and not first.batched
    assert first.cost_usd == pytest.approx(price_usd("claude-haiku-4-5", first.usage))
    assert first.usage.cache_write_tokens == 4100 and second.usage.cache_read_tokens == 4100  # the fake's prompt cache
    stats = policy.stats.snapshot()
    assert stats["calls"] == 2 and stats["retries"] == 0 and stats["cache_hits"] == 0
    assert stats["input_tokens"] == first.usage.input_tokens + second.usage.input_tokens
    assert stats["output_tokens"] == first.usage.output_tokens + second.usage.output_tokens
    assert stats["cache_write_tokens"] == 4100 and stats["cache_read_tokens"] == 4100
    assert stats["cost_usd"] == pytest.approx(first.cost_usd + second.cost_usd)


def test_generation_result_carries_cost(fake_anthropic: FakeAnthropic) -> None:
    fake_anthropic.queue(Reply.tool({"overallScore": 2}), Reply.tool(valid_output()))
    result = generate(ModelClient(FAST))
    assert result.success and result.attempts == 2 and result.cache_hits == 0
    assert result.cost_usd == pytest.approx(price_usd("claude-haiku-4-5", result.usage))


def test_sdk_retries_are_counted_and_max_retries_reaches_the_sdk(fake_anthropic: FakeAnthropic) -> None:
    fake_anthropic.queue(
        Reply.error(529, retry_after=0.01),
        Reply.error(500, retry_after=0.01),
        Reply.error(429, retry_after=0.01),
        Reply.text("finally"),
    )
    policy = CallPolicy()
    reply = ModelClient(replace(FAST, max_retries=3), policy=policy).complete(
        system="s", messages=[Message.user("hi")]
    )
    assert reply.text == "finally"
    assert [h["x-stainless-retry-count"] for h in fake_anthropic.request_headers] == ["0", "1", "2", "3"]
    stats = policy.stats.snapshot()
    assert stats["calls"] == 4 and stats["retries"] == 3 and stats["failures"] == 0


def test_failed_retry_call_carries_the_first_calls_usage(fake_anthropic: FakeAnthropic) -> None:
    fake_anthropic.queue(
        Reply.tool({"overallScore": "bad"}, usage={"input_tokens": 70, "output_tokens": 9}),
        Reply.error(503),
    )
    policy = CallPolicy()
    with pytest.raises(ModelCallError) as info:
        generate(ModelClient(FAST, policy=policy))
    assert info.value.exit_code == ExitCode.UNAVAILABLE
    assert info.value.spend.usage == Usage(input_tokens=70, output_tokens=9)
    assert info.value.spend.cost_usd == pytest.approx(price_usd("claude-haiku-4-5", info.value.spend.usage))
    assert policy.stats.snapshot()["failures"] == 1


def test_first_call_failure_has_no_usage(fake_anthropic: FakeAnthropic) -> None:
    fake_anthropic.queue(Reply.error(503))
    with pytest.raises(ModelCallError) as info:
        generate(ModelClient(FAST))
    assert info.value.spend is None


def test_cost_cap_stops_new_calls(fake_anthropic: FakeAnthropic) -> None:
    usage = {"input_tokens": 1_000_000, "output_tokens": 0}  # $1 on Haiku
    fake_anthropic.queue(Reply.text("a", usage=usage), Reply.text("b", usage=usage))
    client = ModelClient(FAST, policy=CallPolicy(max_cost_usd=0.5))
    client.complete(system="s", messages=[Message.user("1")])
    with pytest.raises(CostCapReached) as info:
        client.complete(system="s", messages=[Message.user("2")])
    assert info.value.exit_code == ExitCode.QUOTA_EXCEEDED and "cost cap of $0.5" in str(info.value)
    assert fake_anthropic.calls == 1


def test_build_policy_from_option_values(tmp_path: Path) -> None:
    prices = tmp_path / "prices.yaml"
    prices.write_text("claude-haiku-4-5: {input: 9}\n")
    policy = CallPolicy.build(
        concurrency=7,
        cache_mode="refresh",
        work_dir=tmp_path / "WORK",
        requests_per_minute=50,
        output_tokens_per_minute=8000,
        processes=2,
        batch=True,
        price_file=prices,
    )
    assert policy.max_in_flight == 7 and policy.cache_mode == "refresh"
    assert policy.cache is not None and policy.cache.path == tmp_path / "WORK" / "cache.db"
    assert not policy.cache.path.exists()  # opened on first use only
    assert policy.limiter is not None and policy.limiter.limits == RateLimits(25, None, 4000)  # a worker's share
    assert policy.batcher is not None and policy.prices["claude-haiku-4-5"].input == 9
    plain = CallPolicy.build(concurrency=3)
    assert plain.cache is None and plain.limiter is None and plain.batcher is None
    assert CallPolicy.build(cache_mode="off", work_dir=tmp_path).cache is None
    with pytest.raises(ValueError, match="unknown cache mode"):
        CallPolicy(cache_mode="sometimes")
