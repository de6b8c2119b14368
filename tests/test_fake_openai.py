"""The fake Chat Completions server against the real openai SDK: what a provider built on that SDK relies on.

Retry waits are recorded instead of slept (``sleeps``), so the tests see the delay the SDK chose without
spending it or racing a loaded machine's clock.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import jsonschema
import pytest

from harness.testing.fake_openai import FakeOpenAI, Reply, judge_responder

openai = pytest.importorskip("openai")
_base_client = pytest.importorskip("openai._base_client")

MODEL = "gpt-4o-mini"
USER = [{"role": "user", "content": "Judge this."}]
SUBMIT = {
    "type": "function",
    "function": {
        "name": "submit_verdict",
        "parameters": {"type": "object", "properties": {"score": {"type": "number"}}, "required": ["score"]},
    },
}
OTHER = {"type": "function", "function": {"name": "lookup", "parameters": {"type": "object", "properties": {}}}}

MakeClient = Callable[..., Any]


@pytest.fixture
def make_client(fake_openai: FakeOpenAI) -> Iterator[MakeClient]:
    """Real SDK clients for ``fake_openai``; no retries and a 5 s timeout unless a test asks for others."""
    clients: list[Any] = []

    def make(*, max_retries: int = 0, timeout: float = 5.0) -> Any:
        client = openai.OpenAI(base_url=fake_openai.base_url, api_key="test", max_retries=max_retries, timeout=timeout)
        clients.append(client)
        return client

    yield make
    for client in clients:
        client.close()


@pytest.fixture
def sleeps(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The SDK's retry waits, recorded and not slept (it waits with ``time.sleep``; the fake never does)."""
    waits: list[float] = []
    monkeypatch.setattr(_base_client.time, "sleep", waits.append)
    return waits


def retry_counts(fake_openai: FakeOpenAI) -> list[str]:
    return [h.get("x-stainless-retry-count", "?") for h in fake_openai.request_headers]


# -- answers ------------------------------------------------------------------------------------------


def test_text_answer_is_a_chat_completion_the_sdk_parses(fake_openai: FakeOpenAI, make_client: MakeClient) -> None:
    fake_openai.queue(Reply.text("Looks fine."))
    completion = make_client().chat.completions.create(model=MODEL, messages=USER)

    assert fake_openai.base_url.endswith("/v1")
    assert completion.object == "chat.completion" and completion.model == MODEL
    (choice,) = completion.choices
    assert choice.message.role == "assistant" and choice.message.content == "Looks fine."
    assert choice.finish_reason == "stop" and not choice.message.tool_calls
    assert completion._request_id is not None and completion._request_id.startswith("req_fake_")
    (body,) = fake_openai.requests
    assert body == {"model": MODEL, "messages": USER}
    assert fake_openai.request_headers[0]["authorization"] == "Bearer test"
    assert fake_openai.calls == 1 and fake_openai.pending == 0 and fake_openai.errors == []


def test_reply_model_overrides_the_requested_one(fake_openai: FakeOpenAI, make_client: MakeClient) -> None:
    fake_openai.queue(Reply.text("ok", model="gpt-4o-mini-2024-07-18", finish_reason="length"))
    completion = make_client().chat.completions.create(model=MODEL, messages=USER)
    assert completion.model == "gpt-4o-mini-2024-07-18" and completion.choices[0].finish_reason == "length"


def test_forced_tool_call_has_arguments_that_parse(fake_openai: FakeOpenAI, make_client: MakeClient) -> None:
    fake_openai.queue(Reply.tool({"score": 0.75}))
    completion = make_client().chat.completions.create(
        model=MODEL,
        messages=USER,
        tools=[OTHER, SUBMIT],
        tool_choice={"type": "function", "function": {"name": "submit_verdict"}},
    )

    (choice,) = completion.choices
    assert choice.finish_reason == "tool_calls" and choice.message.content is None
    (call,) = choice.message.tool_calls
    assert call.type == "function" and call.id.startswith("call_")
    assert call.function.name == "submit_verdict"  # the forced one, not the first tool
    assert json.loads(call.function.arguments) == {"score": 0.75}


def test_tool_call_without_tool_choice_names_the_first_tool(fake_openai: FakeOpenAI, make_client: MakeClient) -> None:
    fake_openai.queue(Reply.tool({"score": 1}, text="Calling it."), Reply.tool("{not json", name="lookup"))
    client = make_client()
    first = client.chat.completions.create(model=MODEL, messages=USER, tools=[SUBMIT, OTHER]).choices[0].message
    second = client.chat.completions.create(model=MODEL, messages=USER, tools=[SUBMIT, OTHER]).choices[0].message

    assert first.content == "Calling it." and first.tool_calls[0].function.name == "submit_verdict"
    assert second.tool_calls[0].function.name == "lookup"
    assert second.tool_calls[0].function.arguments == "{not json"  # sent as given: providers must cope


def test_json_reply_answers_a_json_schema_response_format(fake_openai: FakeOpenAI, make_client: MakeClient) -> None:
    fake_openai.queue(Reply.json({"score": 0.5, "reason": "half"}))
    response_format = {
        "type": "json_schema",
        "json_schema": {"name": "verdict", "strict": True, "schema": SUBMIT["function"]["parameters"]},
    }
    completion = make_client().chat.completions.create(model=MODEL, messages=USER, response_format=response_format)

    assert json.loads(completion.choices[0].message.content) == {"score": 0.5, "reason": "half"}
    assert fake_openai.requests[0]["response_format"] == response_format


# -- usage ---------------------------------------------------------------------------------------------


def test_explicit_usage_with_cached_tokens(fake_openai: FakeOpenAI, make_client: MakeClient) -> None:
    fake_openai.queue(Reply.text("ok", usage={"prompt_tokens": 2000, "completion_tokens": 50, "cached_tokens": 1536}))
    usage = make_client().chat.completions.create(model=MODEL, messages=USER).usage

    assert (usage.prompt_tokens, usage.completion_tokens, usage.total_tokens) == (2000, 50, 2050)
    assert usage.prompt_tokens_details.cached_tokens == 1536
    assert usage.completion_tokens_details.reasoning_tokens == 0


def test_estimated_usage_caches_a_long_repeated_prefix(fake_openai: FakeOpenAI, make_client: MakeClient) -> None:
    fake_openai.responder = lambda request: Reply.text("ok")
    system = {"role": "system", "content": "Rubric. " * 700}  # about 1400 tokens: above the 1024-token minimum
    client = make_client()
    short = client.chat.completions.create(model=MODEL, messages=USER).usage
    cold = client.chat.completions.create(model=MODEL, messages=[system, *USER]).usage
    warm = client.chat.completions.create(model=MODEL, messages=[system, {"role": "user", "content": "Another."}]).usage

    assert short.prompt_tokens < 20 and short.prompt_tokens_details.cached_tokens == 0
    assert cold.prompt_tokens > 1024 and cold.prompt_tokens_details.cached_tokens == 0
    cached = warm.prompt_tokens_details.cached_tokens
    assert 1024 <= cached <= warm.prompt_tokens  # prompt_tokens includes the cached ones, unlike Anthropic's
    assert (cached - 1024) % 128 == 0
    assert warm.total_tokens == warm.prompt_tokens + warm.completion_tokens


# -- errors and retries --------------------------------------------------------------------------------


def test_429_is_retried_after_retry_after_then_answered(
    fake_openai: FakeOpenAI, make_client: MakeClient, sleeps: list[float]
) -> None:
    fake_openai.queue(Reply.error(429, retry_after=0.01), Reply.error(429, retry_after=0.02), Reply.text("at last"))
    completion = make_client(max_retries=2).chat.completions.create(model=MODEL, messages=USER)

    assert completion.choices[0].message.content == "at last"
    assert sleeps == [0.01, 0.02]  # the server's retry-after, exactly
    assert retry_counts(fake_openai) == ["0", "1", "2"]
    assert fake_openai.requests[0] == fake_openai.requests[2]
    assert all("idempotency-key" not in h for h in fake_openai.request_headers)  # a retry is a new call to the API


def test_retry_after_zero_falls_back_to_the_sdk_backoff(
    fake_openai: FakeOpenAI, make_client: MakeClient, sleeps: list[float]
) -> None:
    fake_openai.queue(Reply.error(429, retry_after=0), Reply.text("ok"))
    make_client(max_retries=1).chat.completions.create(model=MODEL, messages=USER)
    (wait,) = sleeps
    assert 0.375 <= wait <= 0.5  # 0.5 s less up to 25% jitter: why tests use retry_after=0.01


def test_429_out_of_retries_raises_rate_limit_error_in_openai_shape(
    fake_openai: FakeOpenAI, make_client: MakeClient, sleeps: list[float]
) -> None:
    fake_openai.queue(Reply.error(429, retry_after=0.01, message="Rate limit reached"),
                      Reply.error(429, retry_after=0.01))
    with pytest.raises(openai.RateLimitError) as caught:
        make_client(max_retries=1).chat.completions.create(model=MODEL, messages=USER)

    err = caught.value
    assert err.status_code == 429 and err.type == "requests" and err.code == "rate_limit_exceeded"
    assert err.response.headers["retry-after"] == "0.01" and err.request_id is not None
    assert fake_openai.calls == 2 and retry_counts(fake_openai) == ["0", "1"]


@pytest.mark.skipif(not hasattr(_base_client, "MAX_RETRY_AFTER_DELAY"), reason="older SDK: no retry-after ceiling")
def test_retry_after_beyond_the_sdk_ceiling_is_not_retried(
    fake_openai: FakeOpenAI, make_client: MakeClient, sleeps: list[float]
) -> None:
    fake_openai.queue(Reply.error(429, retry_after=_base_client.MAX_RETRY_AFTER_DELAY + 1), Reply.text("never"))
    with pytest.raises(openai.RateLimitError):
        make_client(max_retries=2).chat.completions.create(model=MODEL, messages=USER)
    assert fake_openai.calls == 1 and sleeps == [] and fake_openai.pending == 1


def test_500_is_retried(fake_openai: FakeOpenAI, make_client: MakeClient, sleeps: list[float]) -> None:
    fake_openai.queue(Reply.error(500), Reply.error(503, retry_after=0.01), Reply.text("recovered"))
    completion = make_client(max_retries=2).chat.completions.create(model=MODEL, messages=USER)

    assert completion.choices[0].message.content == "recovered"
    assert retry_counts(fake_openai) == ["0", "1", "2"] and len(sleeps) == 2


def test_400_is_not_retried(fake_openai: FakeOpenAI, make_client: MakeClient, sleeps: list[float]) -> None:
    invalid = Reply.error(400, message="Invalid schema for function", param="tools", code="invalid_function_parameters")
    fake_openai.queue(invalid, Reply.text("unused"))
    with pytest.raises(openai.BadRequestError) as caught:
        make_client(max_retries=3).chat.completions.create(model=MODEL, messages=USER)

    err = caught.value
    assert err.type == "invalid_request_error" and err.param == "tools" and err.code == "invalid_function_parameters"
    assert "Invalid schema for function" in str(err)
    assert fake_openai.calls == 1 and fake_openai.pending == 1 and sleeps == []


def test_responder_failure_is_a_500_the_sdk_does_not_retry(
    fake_openai: FakeOpenAI, make_client: MakeClient, sleeps: list[float]
) -> None:
    def broken(request: dict[str, Any]) -> Reply:
        raise KeyError("tools")

    fake_openai.responder = broken
    with pytest.raises(openai.InternalServerError):
        make_client(max_retries=2).chat.completions.create(model=MODEL, messages=USER)
    assert fake_openai.calls == 1 and fake_openai.errors == ["responder failed: KeyError('tools')"]


def test_nothing_scripted_is_a_400(fake_openai: FakeOpenAI, make_client: MakeClient) -> None:
    with pytest.raises(openai.BadRequestError, match="no reply queued"):
        make_client(max_retries=2).chat.completions.create(model=MODEL, messages=USER)
    assert fake_openai.calls == 1


def test_other_paths_are_404(fake_openai: FakeOpenAI, make_client: MakeClient) -> None:
    with pytest.raises(openai.NotFoundError):
        make_client().embeddings.create(model="text-embedding-3-small", input="x")
    assert fake_openai.calls == 0


# -- timeouts -----------------------------------------------------------------------------------------


def test_slow_reply_hits_the_client_timeout(fake_openai: FakeOpenAI, make_client: MakeClient) -> None:
    fake_openai.queue(Reply.slow(2.0, Reply.text("too late")))
    started = time.monotonic()
    with pytest.raises(openai.APITimeoutError):
        make_client(timeout=0.2).chat.completions.create(model=MODEL, messages=USER)

    assert time.monotonic() - started < 1.5  # the client gave up; it did not wait for the answer
    assert fake_openai.calls == 1
    assert fake_openai.request_headers[0]["x-stainless-read-timeout"] == "0.2"  # the SDK tells the server its timeout


def test_a_timeout_is_retried_and_counted(fake_openai: FakeOpenAI, make_client: MakeClient,
                                          sleeps: list[float]) -> None:
    fake_openai.queue(Reply.slow(2.0, Reply.text("too late")), Reply.text("in time"))
    completion = make_client(max_retries=1, timeout=0.2).chat.completions.create(model=MODEL, messages=USER)

    assert completion.choices[0].message.content == "in time"
    assert retry_counts(fake_openai) == ["0", "1"]  # a timed-out call is sent, and paid for, twice
    (wait,) = sleeps
    assert 0.375 <= wait <= 0.5  # no response, so no retry-after: the SDK's own backoff


# -- what the fake refuses -----------------------------------------------------------------------------


def test_stream_true_is_refused_with_a_400_that_says_so(fake_openai: FakeOpenAI, make_client: MakeClient) -> None:
    fake_openai.queue(Reply.text("for the non-streaming retry"))
    client = make_client(max_retries=2)
    with pytest.raises(openai.BadRequestError, match="stream=true") as caught:
        client.chat.completions.create(model=MODEL, messages=USER, stream=True)
    assert caught.value.param == "stream"
    assert fake_openai.requests[0]["stream"] is True and fake_openai.calls == 1
    assert fake_openai.pending == 1  # the refusal did not use the scripted reply

    assert client.chat.completions.create(model=MODEL, messages=USER).choices[0].message.content == (
        "for the non-streaming retry"
    )


def test_more_than_one_choice_is_refused(fake_openai: FakeOpenAI, make_client: MakeClient) -> None:
    with pytest.raises(openai.BadRequestError, match="n=2"):
        make_client().chat.completions.create(model=MODEL, messages=USER, n=2)


def test_log_probabilities_as_the_sdk_reads_them(fake_openai: FakeOpenAI, make_client: MakeClient) -> None:
    fake_openai.token_choices = {"3": {"3": 0.6, "4": 0.3, "2": 0.1}}
    fake_openai.queue(Reply.text("Coherence: 3"), Reply.text("Coherence: 3"))
    client = make_client()
    choice = client.chat.completions.create(model=MODEL, messages=USER, logprobs=True, top_logprobs=2).choices[0]
    tokens = choice.logprobs.content
    assert "".join(t.token for t in tokens) == "Coherence: 3" and [t.token for t in tokens] == ["Coherence", ":", " 3"]
    assert tokens[0].logprob == 0.0 and [a.token for a in tokens[0].top_logprobs] == ["Coherence"]
    rating = tokens[-1]
    assert rating.logprob == pytest.approx(-0.5108, abs=1e-4) and bytes(rating.bytes) == b" 3"
    assert [(a.token, round(a.logprob, 4)) for a in rating.top_logprobs] == [(" 3", -0.5108), (" 4", -1.204)]
    # not asked for: none, as before
    assert client.chat.completions.create(model=MODEL, messages=USER).choices[0].logprobs is None


def test_a_server_that_ignores_logprobs_and_one_that_honours_stop(fake_openai: FakeOpenAI,
                                                                   make_client: MakeClient) -> None:
    fake_openai.logprobs = False
    fake_openai.queue(Reply.text("#### 72\n\nQuestion: next"), Reply.text("#### 72\n\nQuestion: next"))
    client = make_client()
    choice = client.chat.completions.create(model=MODEL, messages=USER, logprobs=True, top_logprobs=5,
                                            stop=["\n\n"]).choices[0]
    assert choice.logprobs is None and choice.message.content == "#### 72" and choice.finish_reason == "stop"
    assert fake_openai.requests[0]["stop"] == ["\n\n"]
    assert client.chat.completions.create(model=MODEL, messages=USER, stop="Question").choices[0].message.content == (
        "#### 72\n\n")


# -- judge, concurrency, reset -------------------------------------------------------------------------

DIM = {
    "type": "object",
    "required": ["score", "weight", "reason"],
    "properties": {"score": {"type": "number"}, "weight": {"type": "number"}, "reason": {"type": "string"}},
    "additionalProperties": False,
}
EVALUATOR = {
    "type": "object",
    "required": ["overallScore", "passed", "dimensionScores", "feedback", "suggestedFixes"],
    "properties": {
        "overallScore": {"type": "number", "minimum": 0, "maximum": 1},
        "passed": {"type": "boolean"},
        "dimensionScores": {
            "type": "object",
            "required": ["clarity", "accuracy"],
            "properties": {"clarity": DIM, "accuracy": DIM},
            "additionalProperties": False,
        },
        "feedback": {"type": "string"},
        "suggestedFixes": {"type": "array", "items": {"type": "string"}},
    },
    "additionalProperties": False,
}


def test_judge_responder_follows_the_schema_of_a_tool_or_a_response_format(
    fake_openai: FakeOpenAI, make_client: MakeClient
) -> None:
    fake_openai.responder = judge_responder({"clarity": 0.5})
    judge_tool = {"type": "function", "function": {"name": "submit_evaluation", "parameters": EVALUATOR}}
    client = make_client()
    by_tool = client.chat.completions.create(
        model=MODEL, messages=USER, tools=[OTHER, judge_tool],
        tool_choice={"type": "function", "function": {"name": "submit_evaluation"}},
    ).choices[0].message.tool_calls[0]
    by_format = client.chat.completions.create(
        model=MODEL, messages=USER,
        response_format={"type": "json_schema", "json_schema": {"name": "evaluation", "schema": EVALUATOR}},
    ).choices[0].message.content
    in_text = client.chat.completions.create(model=MODEL, messages=USER).choices[0].message.content

    assert by_tool.function.name == "submit_evaluation"
    for answer in (json.loads(by_tool.function.arguments), json.loads(by_format)):
        jsonschema.validate(answer, EVALUATOR)
        assert answer["dimensionScores"]["clarity"]["score"] == 0.5
        assert answer["overallScore"] == 0.75 and answer["passed"] is False
    assert in_text.startswith("```json\n")


def test_in_flight_counts_requests_being_answered(fake_openai: FakeOpenAI, make_client: MakeClient) -> None:
    together = threading.Barrier(3)

    def respond(request: dict[str, Any]) -> Reply:
        together.wait(timeout=5)  # passes only when all three are in flight at once
        return Reply.text("ok")

    fake_openai.responder = respond
    client = make_client()
    answers: list[str] = []
    threads = [
        threading.Thread(
            target=lambda: answers.append(client.chat.completions.create(model=MODEL, messages=USER).id)
        )
        for _ in range(3)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=10)

    assert len(set(answers)) == 3
    assert fake_openai.peak_in_flight == 3 and fake_openai.in_flight == 0 and fake_openai.calls == 3


def test_latency_and_reset(fake_openai: FakeOpenAI, make_client: MakeClient) -> None:
    fake_openai.latency_s = 0.05
    fake_openai.queue(Reply.text("a"), Reply.text("b"), Reply.text("c"))
    client = make_client()
    started = time.monotonic()
    client.chat.completions.create(model=MODEL, messages=USER)
    assert time.monotonic() - started >= 0.05
    assert fake_openai.request_times[0] >= started and fake_openai.pending == 2

    fake_openai.reset()
    assert (fake_openai.calls, fake_openai.pending, fake_openai.requests, fake_openai.request_headers,
            fake_openai.peak_in_flight) == (0, 0, [], [], 0)
