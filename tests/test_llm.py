"""harness.llm against the real anthropic SDK talking to the fake Messages API on 127.0.0.1."""

from __future__ import annotations

import json
from dataclasses import replace
import threading
import time
from typing import Any

import pytest

from harness.errors import ExitCode, ModelCallError, ModelUnavailable
from harness.llm import (
    GenerationResult,
    ModelClient,
    ModelSettings,
    Usage,
    extract_json_object,
    known_price,
    price_usd,
)
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
    assert "$.overallScore: 1.7 is greater than the maximum of 1" in text
    assert "$.dimensionScores.accuracy: 'reason' is a required property" in text


def test_always_invalid_fails_after_one_retry(fake_anthropic: FakeAnthropic) -> None:
    bad = {"overallScore": "high", "passed": True, "dimensionScores": {}, "feedback": "x", "suggestedFixes": []}
    fake_anthropic.queue(Reply.tool(bad), Reply.tool(bad), Reply.tool(valid_output()))
    result = generate(ModelClient(FAST))

    assert result.success is False and result.attempts == 2 and result.data is None
    assert fake_anthropic.calls == 2 and fake_anthropic.pending == 1  # exactly one retry
    assert result.validation_errors == [  # sorted by path, one line each
        "$.dimensionScores: 'accuracy' is a required property",
        "$.dimensionScores: 'clarity' is a required property",
        "$.overallScore: 'high' is not of type 'number'",
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
    with pytest.raises(ValueError, match="not valid JSON Schema"):
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
    client.complete(system="the case", messages=[{"role": "user", "content": "hi"}], cached_system_prefix="RUBRIC")
    client.complete(system="plain", messages=[{"role": "user", "content": "hi"}])

    cached, plain = fake_anthropic.requests
    assert cached["system"] == [
        {"type": "text", "text": "RUBRIC", "cache_control": {"type": "ephemeral"}},
        {"type": "text", "text": "the case"},
    ]
    assert plain["system"] == "plain"


def test_usage_and_cache_tokens_are_parsed(fake_anthropic: FakeAnthropic) -> None:
    usage = {"input_tokens": 11, "output_tokens": 22, "cache_creation_input_tokens": 33, "cache_read_input_tokens": 44}
    fake_anthropic.queue(Reply.text("hello ", usage=usage, model="claude-opus-4-5"))
    reply = ModelClient(FAST).complete(system="s", messages=[{"role": "user", "content": "hi"}])

    assert reply.text == "hello " and reply.tool_input is None and reply.stop_reason == "end_turn"
    assert reply.model == "claude-opus-4-5"
    assert reply.usage == Usage(input_tokens=11, output_tokens=22, cache_write_tokens=33, cache_read_tokens=44)
    assert reply.usage + reply.usage == Usage(22, 44, 66, 88)


def test_simulated_cache_writes_then_reads(fake_anthropic: FakeAnthropic) -> None:
    fake_anthropic.queue(Reply.text("a"), Reply.text("b"))
    client = ModelClient(FAST)
    first = client.complete(system="x", messages=[{"role": "user", "content": "1"}], cached_system_prefix="R" * 400)
    second = client.complete(system="y", messages=[{"role": "user", "content": "2"}], cached_system_prefix="R" * 400)
    assert (first.usage.cache_write_tokens, first.usage.cache_read_tokens) == (100, 0)
    assert (second.usage.cache_write_tokens, second.usage.cache_read_tokens) == (0, 100)


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
        ModelClient(FAST).complete(system="s", messages=[{"role": "user", "content": "hi"}])
    assert info.value.exit_code == code
    assert words in str(info.value) and "\n" not in str(info.value)
    assert fake_anthropic.calls == 1


def test_slow_answer_past_timeout_is_timeout(fake_anthropic: FakeAnthropic) -> None:
    fake_anthropic.queue(Reply.slow(2.0, Reply.text("too late")))
    started = time.monotonic()
    with pytest.raises(ModelCallError) as info:
        ModelClient(replace(FAST, timeout_s=0.3)).complete(
            system="s", messages=[{"role": "user", "content": "hi"}]
        )
    assert info.value.exit_code == ExitCode.TIMEOUT == 81
    assert "timed out after 0.3s" in str(info.value)
    assert time.monotonic() - started < 1.5


def test_unreachable_server_is_unavailable(monkeypatch: pytest.MonkeyPatch) -> None:
    with FakeAnthropic() as server:
        dead_url = server.base_url  # nothing listens there once stopped
    client = ModelClient(FAST, api_key="sk-ant-test-dummy", base_url=dead_url)  # constructing is free
    with pytest.raises(ModelCallError) as info:
        client.complete(system="s", messages=[{"role": "user", "content": "hi"}])
    assert info.value.exit_code == ExitCode.UNAVAILABLE
    assert dead_url in str(info.value)


def test_answer_that_is_not_json_is_protocol_error(fake_anthropic: FakeAnthropic) -> None:
    fake_anthropic.queue(Reply.raw(200, "<html>proxy login</html>", {"content-type": "application/json"}))
    with pytest.raises(ModelCallError) as info:
        ModelClient(FAST).complete(system="s", messages=[{"role": "user", "content": "hi"}])
    assert info.value.exit_code == ExitCode.PROTOCOL


def test_no_api_key_is_unavailable_without_a_request(
    fake_anthropic: FakeAnthropic, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    client = ModelClient(FAST)
    assert client.available is False
    with pytest.raises(ModelUnavailable, match="^no ANTHROPIC_API_KEY: "):
        client.complete(system="s", messages=[{"role": "user", "content": "hi"}])
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
    assert price_usd("claude-imaginary-9", million) == price_usd("claude-sonnet-4-5", million)
    assert price_usd("claude-opus-4-5", Usage()) == 0.0
