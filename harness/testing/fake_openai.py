"""A fake OpenAI Chat Completions API on 127.0.0.1 for tests and benchmarks, scripted per test.

The HTTP server, the queue of replies, the responder and the record of requests are
:class:`harness.testing.fake_http.FakeModelServer`'s; this module adds the Chat Completions wire format::

    with FakeOpenAI() as server:             # server.base_url ends in /v1, as the SDK's base_url does
        client = openai.OpenAI(base_url=server.base_url, api_key="test")
        server.queue(Reply.error(429, retry_after=0.01), Reply.tool({"overallScore": 0.9, ...}))
        server.responder = judge_responder({"clarity": 0.5})   # used when the queue is empty
        server.latency_s = 0.2                                  # fixed latency per call
        ...
        server.peak_in_flight                                   # most requests in flight at once

It serves ``POST /v1/chat/completions`` without streaming: a request with ``stream: true`` (or ``n`` above
1) is refused with a 400 that says so, before the queue is touched, so a provider that streams by mistake
fails loudly instead of waiting for events that never come.

Log probabilities: a request with ``logprobs: true`` gets ``choices[0].logprobs.content``, the answer's text cut
into tokens (words, runs of up to three digits, punctuation, whitespace; a word or number takes the space before
it, as GPT's tokenizers do), each certain (log probability 0) unless ``server.token_choices`` names it::

    server.token_choices = {"3": {"3": 0.6, "4": 0.4}}   # at a token "3" (or " 3"), "3" had 0.6 and "4" 0.4

Its ``top_logprobs`` are then those tokens, the likeliest first, at most the request's ``top_logprobs``, each with
the space the token had. ``server.logprobs = False`` makes it a server that ignores the parameter (``logprobs:
null``, as before). A text answer ends before the first of the request's ``stop`` sequences found in it, as a
real server's does (the request, ``stop`` included, is in ``server.requests``).

Usage: a reply without explicit ``usage`` gets token counts estimated from the request (4 characters a
token) and a simulated automatic prompt cache, as OpenAI's: the longest run of leading messages (with the
tools and response format) the server has seen before is cached, counted only from 1024 tokens and in
128-token steps. As in the real API, ``prompt_tokens`` *includes* ``prompt_tokens_details.cached_tokens``
(Anthropic's ``input_tokens`` excludes cache reads): a cost model must subtract, not add.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from harness.llm.prompt_cache import OPENAI_MIN_TOKENS, OPENAI_STEP_TOKENS
from harness.llm.schema_fill import evaluator_output
from harness.testing.fake_http import FakeModelServer, ScriptedReply, estimated_tokens

__all__ = ["FakeOpenAI", "Reply", "Responder", "judge_responder"]

# (error type, error code) by status, as api.openai.com answers them.
_ERRORS: dict[int, tuple[str, str | None]] = {
    400: ("invalid_request_error", None),
    401: ("invalid_request_error", "invalid_api_key"),
    403: ("invalid_request_error", None),
    404: ("invalid_request_error", None),
    429: ("requests", "rate_limit_exceeded"),
    500: ("server_error", None),
    503: ("server_error", None),
}

_CACHE_MIN_TOKENS = OPENAI_MIN_TOKENS  # OpenAI caches a prompt prefix only from this length (1,024 tokens) ...
_CACHE_STEP_TOKENS = OPENAI_STEP_TOKENS  # ... and in steps of this many tokens (128)


@dataclass(frozen=True)
class Reply(ScriptedReply):
    """One scripted answer. Build it with :meth:`text`, :meth:`tool`, :meth:`json`, :meth:`error`, :meth:`slow`
    or :meth:`raw`."""

    content: str | None = None
    tool_calls: tuple[Mapping[str, Any], ...] = ()  # {"name": str | None, "arguments": JSON text}
    finish_reason: str | None = "stop"
    error_code: str | None = None
    error_param: str | None = None

    NO_ANSWER: ClassVar[Mapping[str, Any]] = {"finish_reason": None}

    @classmethod
    def text(
        cls,
        text: str,
        *,
        usage: Mapping[str, int] | None = None,
        finish_reason: str = "stop",
        model: str | None = None,
    ) -> Reply:
        """An assistant message with text content.

        ``usage`` takes flat counts: ``prompt_tokens``, ``completion_tokens``, ``cached_tokens``,
        ``reasoning_tokens`` and optionally ``total_tokens`` (else prompt + completion).
        """
        return cls(content=text, finish_reason=finish_reason, usage=usage, model=model)

    @classmethod
    def tool(
        cls,
        arguments: Mapping[str, Any] | str,
        *,
        name: str | None = None,
        text: str | None = None,
        usage: Mapping[str, int] | None = None,
        model: str | None = None,
    ) -> Reply:
        """An assistant message with one function tool call, finish_reason ``tool_calls``.

        ``name`` defaults to the function the request forces (``tool_choice: {"type": "function", "function":
        {"name": ...}}``), else its first tool. ``arguments`` is encoded as the JSON text the API sends; a
        string is sent as it is, so a test can hand a provider arguments that do not parse, as models do.
        """
        args = arguments if isinstance(arguments, str) else json.dumps(arguments)
        return cls(
            content=text or None,
            tool_calls=({"name": name, "arguments": args},),
            finish_reason="tool_calls",
            usage=usage,
            model=model,
        )

    @classmethod
    def json(cls, obj: Any, *, usage: Mapping[str, int] | None = None, model: str | None = None) -> Reply:
        """Text content that is ``obj`` as JSON: the answer to ``response_format: {"type": "json_schema"}``."""
        return cls(content=json.dumps(obj), usage=usage, model=model)

    @classmethod
    def error(
        cls,
        status: int,
        *,
        retry_after: float | None = None,
        message: str | None = None,
        error_type: str | None = None,
        code: str | None = None,
        param: str | None = None,
        should_retry: bool | None = None,
    ) -> Reply:
        """An API error in OpenAI's shape (``{"error": {"message", "type", "param", "code"}}``).

        ``retry_after`` becomes the ``retry-after`` header (seconds). The openai SDK honours a value in
        ``(0, 120]``; ``retry-after: 0`` (or none) falls back to its own backoff (0.5 s, doubling, up to 8 s,
        less up to 25% jitter), so use a small positive value such as 0.01 to keep tests fast. Above 120 s the
        SDK (3.x) does not retry at all and raises at once. It also reads ``retry-after-ms`` first, which the
        real API does not send (add it through ``headers`` with :func:`dataclasses.replace` if needed).
        ``should_retry`` sets ``x-should-retry``, which the SDK obeys over the status code.
        """
        default_type, default_code = _ERRORS.get(status) or (
            ("server_error", None) if status >= 500 else ("invalid_request_error", None)
        )
        return cls._api_error(
            status, error_type or default_type, message=message, retry_after=retry_after, should_retry=should_retry,
            error_code=code if code is not None else default_code, error_param=param,
        )


Responder = Callable[[dict[str, Any]], Reply]


class FakeOpenAI(FakeModelServer[Reply]):
    """The fake Chat Completions API; a context manager that starts on enter and stops on exit.

    Its ``base_url`` is ``http://127.0.0.1:PORT/v1``: the openai SDK's ``base_url`` includes the version,
    Anthropic's does not.
    """

    reply_type = Reply
    model_path = "/v1/chat/completions"
    base_path = "/v1"
    request_id_header = "x-request-id"

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.logprobs = True  # answer a request's ``logprobs: true``; False: ignore it, as some servers do
        # a token's text (its space stripped) -> the probability of each token the model might have written there
        self.token_choices: dict[str, Mapping[str, float]] = {}

    # -- the Chat Completions wire format ------------------------------------------------------------

    def _refusal(self, request: Mapping[str, Any]) -> Reply | None:
        """The 400 for a request this fake (or the real API) will not answer, or None."""
        if not isinstance(request.get("model"), str) or not request["model"]:
            return Reply.error(400, message="you must provide a model parameter", param="model")
        messages = request.get("messages")
        if not isinstance(messages, list) or not messages:
            return Reply.error(400, message="Missing required parameter: 'messages'.", param="messages",
                               code="missing_required_parameter")
        if request.get("stream") is True:
            return Reply.error(400, param="stream", code="unsupported_value",
                               message="FakeOpenAI serves non-streaming chat completions only: stream=true is refused")
        n = request.get("n")
        if isinstance(n, int) and n > 1:
            return Reply.error(400, param="n", code="unsupported_value",
                               message=f"FakeOpenAI answers one choice per request: n={n} is refused")
        return None

    def _error_body(self, reply: Reply, request_id: str) -> dict[str, Any]:
        error = {
            "message": reply.error_message or "",
            "type": reply.error_type or "server_error",
            "param": reply.error_param,
            "code": reply.error_code,
        }
        return {"error": error}

    def _answer(self, reply: Reply, request: Mapping[str, Any], uid: str) -> dict[str, Any]:
        reply = _stopped(reply, request)
        message: dict[str, Any] = {"role": "assistant", "content": reply.content, "refusal": None, "annotations": []}
        if reply.tool_calls:
            message["tool_calls"] = [
                {
                    "id": f"call_fake_{uid}_{n}",
                    "type": "function",
                    "function": {
                        "name": call.get("name") or _forced_function_name(request) or "submit_result",
                        "arguments": call["arguments"],
                    },
                }
                for n, call in enumerate(reply.tool_calls)
            ]
        return {
            "id": f"chatcmpl-fake{uid}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": reply.model or request.get("model") or "gpt-fake",
            "choices": [{"index": 0, "message": message, "logprobs": self._logprobs(reply, request),
                         "finish_reason": reply.finish_reason}],
            "usage": self._usage(reply, request, message),
            "service_tier": "default",
            "system_fingerprint": "fp_fake",
        }

    def _logprobs(self, reply: Reply, request: Mapping[str, Any]) -> dict[str, Any] | None:
        """``choices[0].logprobs`` for a text answer to a request that asks for them (see the module's docstring)."""
        if not (self.logprobs and request.get("logprobs") is True and reply.content):
            return None
        top = request.get("top_logprobs")
        top = top if isinstance(top, int) and not isinstance(top, bool) and top >= 0 else 0
        content = []
        for token in _TOKEN.findall(reply.content):
            word = token.strip()
            space = token[: len(token) - len(token.lstrip())]
            choices = dict(self.token_choices.get(word) or {word: 1.0}) if word else {token: 1.0}
            choices.setdefault(word or token, 0.0)
            likeliest = sorted(choices.items(), key=lambda pair: -pair[1])[:top]
            content.append({**_token_entry(token, choices[word or token]), "top_logprobs": [
                _token_entry(space + alternative if word else alternative, probability)
                for alternative, probability in likeliest]})
        return {"content": content, "refusal": None}

    def _usage(self, reply: Reply, request: Mapping[str, Any], message: Mapping[str, Any]) -> dict[str, Any]:
        if reply.usage is not None:
            given = reply.usage
            prompt, completion = int(given.get("prompt_tokens", 0)), int(given.get("completion_tokens", 0))
            cached, reasoning = int(given.get("cached_tokens", 0)), int(given.get("reasoning_tokens", 0))
            total = int(given.get("total_tokens", prompt + completion))
        else:
            prompt, cached = self._prompt_tokens(request)
            answer_chars = len(json.dumps([message.get("content"), message.get("tool_calls")]))
            completion = max(1, estimated_tokens(answer_chars))
            reasoning, total = 0, prompt + completion
        return {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": total,
            "prompt_tokens_details": {"cached_tokens": cached, "audio_tokens": 0},
            "completion_tokens_details": {
                "reasoning_tokens": reasoning,
                "audio_tokens": 0,
                "accepted_prediction_tokens": 0,
                "rejected_prediction_tokens": 0,
            },
        }

    def _prompt_tokens(self, request: Mapping[str, Any]) -> tuple[int, int]:
        """(prompt tokens, cached tokens) estimated from the request, through the simulated prefix cache."""
        head = json.dumps([request.get("tools"), request.get("response_format")], sort_keys=True)
        messages = request.get("messages")
        parts = [head] + [json.dumps(m, sort_keys=True) for m in (messages if isinstance(messages, list) else [])]
        digest = hashlib.sha256()
        prefixes: list[tuple[str, int]] = []  # (key, characters) after each message
        chars = 0
        for part in parts:
            digest.update(part.encode())
            chars += len(part)
            prefixes.append((digest.hexdigest(), chars))
        known = self._seen_before(key for key, _ in prefixes[1:])
        seen = max((c for key, c in prefixes[1:] if key in known), default=0)
        prompt = max(1, estimated_tokens(chars))
        cached = min(estimated_tokens(seen), prompt)
        if cached < _CACHE_MIN_TOKENS:
            cached = 0
        else:
            cached -= (cached - _CACHE_MIN_TOKENS) % _CACHE_STEP_TOKENS
        return prompt, cached


# GPT-like tokens: a word, a number of up to three digits or a run of punctuation, each with the space before it;
# other whitespace; any other single character (so the tokens always spell the text)
_TOKEN = re.compile(r" ?[^\W\d_]+| ?\d{1,3}| ?[^\w\s]+|\s+|.", re.DOTALL)


def _stopped(reply: Reply, request: Mapping[str, Any]) -> Reply:
    """A text answer as a server that honours ``stop`` sends it: ended before the first stop sequence in it."""
    stop = request.get("stop")
    sequences = [stop] if isinstance(stop, str) else [s for s in stop or [] if isinstance(s, str) and s]
    if not reply.content or not sequences:
        return reply
    cut = min((at for at in (reply.content.find(s) for s in sequences) if at >= 0), default=-1)
    return reply if cut < 0 else dataclasses.replace(reply, content=reply.content[:cut], finish_reason="stop")


def _token_entry(token: str, probability: float) -> dict[str, Any]:
    """A token as the API writes it: its text, log probability (-9999 for none, as vLLM writes it) and bytes."""
    return {"token": token, "logprob": math.log(probability) if probability > 0 else -9999.0,
            "bytes": list(token.encode("utf-8"))}


def _functions(request: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The ``function`` objects of the request's function tools, in order."""
    tools = request.get("tools")
    if not isinstance(tools, Sequence):
        return []
    return [
        t["function"]
        for t in tools
        if isinstance(t, Mapping) and t.get("type", "function") == "function" and isinstance(t.get("function"), Mapping)
    ]


def _forced_function_name(request: Mapping[str, Any]) -> str | None:
    choice = request.get("tool_choice")
    if isinstance(choice, Mapping) and choice.get("type") == "function":
        function = choice.get("function")
        if isinstance(function, Mapping) and function.get("name"):
            return str(function["name"])
    functions = _functions(request)
    return str(functions[0].get("name")) if functions and functions[0].get("name") else None


# ---------------------------------------------------------------------------------------------------
# A judge that always answers well-formed EvaluatorOutput


def judge_responder(
    scores: Mapping[str, float] | Callable[[dict[str, Any]], Mapping[str, float]] | None = None,
    *,
    default: float = 1.0,
    threshold: float = 0.85,
) -> Responder:
    """A responder that answers a judge's request with a valid EvaluatorOutput (seed 000 section 2).

    It answers the way the request asks: a forced (or the only) function tool gets a tool call filled
    from that function's ``parameters``; ``response_format: {"type": "json_schema"}`` gets the JSON as
    content, filled from ``json_schema.schema``; with neither, text with the JSON inside a ```json fence.
    Scores come from ``scores`` (a mapping, or a callable given the request JSON that returns one); the
    schema is filled as the Anthropic fake's ``judge_responder`` fills it (:mod:`harness.llm.schema_fill`).
    """

    def respond(request: dict[str, Any]) -> Reply:
        given = scores(request) if callable(scores) else (scores or {})
        functions = _functions(request)
        fmt = request.get("response_format")
        json_schema = fmt.get("json_schema") if isinstance(fmt, Mapping) and fmt.get("type") == "json_schema" else None
        forced = isinstance(request.get("tool_choice"), Mapping) or request.get("tool_choice") == "required"
        if functions and (forced or not isinstance(json_schema, Mapping)):
            name = _forced_function_name(request)
            function = next((f for f in functions if f.get("name") == name), functions[0])
            schema: Mapping[str, Any] = function.get("parameters") or {}
            return Reply.tool(evaluator_output(schema, given, default, threshold), name=function.get("name"))
        if isinstance(json_schema, Mapping):
            return Reply.json(evaluator_output(json_schema.get("schema") or {}, given, default, threshold))
        answer = evaluator_output({}, given, default, threshold)
        return Reply.text("```json\n" + json.dumps(answer, indent=2) + "\n```")

    return respond
