"""A fake OpenAI Chat Completions API on 127.0.0.1 for tests and benchmarks, scripted per test.

It is a real HTTP server (``http.server.ThreadingHTTPServer`` in a daemon thread), so the real ``openai``
SDK talks to it through its own HTTP stack, retries and timeouts included::

    with FakeOpenAI() as server:             # server.base_url ends in /v1, as the SDK's base_url does
        client = openai.OpenAI(base_url=server.base_url, api_key="test")
        server.queue(Reply.error(429, retry_after=0.01), Reply.tool({"overallScore": 0.9, ...}))
        server.responder = judge_responder({"clarity": 0.5})   # used when the queue is empty
        server.latency_s = 0.2                                  # fixed latency per call
        ...
        server.peak_in_flight                                   # most requests in flight at once

It serves ``POST /v1/chat/completions`` without streaming: a request with ``stream: true`` (or ``n`` above
1) is refused with a 400 that says so, before the queue is touched, so a provider that streams by mistake
fails loudly instead of waiting for events that never come. Replies come from the queue first (in order),
then from ``responder(request_json)``. With neither, the server answers 400 ``invalid_request_error``
saying so (the SDK does not retry a 400).

"In flight" counts a request from its arrival until its answer starts being written, so a client that
bounds its own concurrency never sees the server count more than its bound (as in the Anthropic fake).

Usage: a reply without explicit ``usage`` gets token counts estimated from the request (4 characters a
token) and a simulated automatic prompt cache, as OpenAI's: the longest run of leading messages (with the
tools and response format) the server has seen before is cached, counted only from 1024 tokens and in
128-token steps. As in the real API, ``prompt_tokens`` *includes* ``prompt_tokens_details.cached_tokens``
(Anthropic's ``input_tokens`` excludes cache reads): a cost model must subtract, not add.
"""

from __future__ import annotations

import collections
import dataclasses
import hashlib
import itertools
import json
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

from harness.testing.schema_fill import evaluator_output

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

_CACHE_MIN_TOKENS = 1024  # OpenAI caches a prompt prefix only from this length ...
_CACHE_STEP_TOKENS = 128  # ... and in steps of this many tokens
_PATH = "/v1/chat/completions"


@dataclass(frozen=True)
class Reply:
    """One scripted answer. Build it with :meth:`text`, :meth:`tool`, :meth:`json`, :meth:`error`, :meth:`slow`
    or :meth:`raw`."""

    status: int = 200
    content: str | None = None
    tool_calls: tuple[Mapping[str, Any], ...] = ()  # {"name": str | None, "arguments": JSON text}
    finish_reason: str | None = "stop"
    usage: Mapping[str, int] | None = None
    model: str | None = None
    error_type: str | None = None
    error_message: str | None = None
    error_code: str | None = None
    error_param: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    delay_s: float = 0.0
    body: bytes | None = None  # sent verbatim instead of a rendered chat.completion / error

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
        headers: dict[str, str] = {}
        if retry_after is not None:
            headers["retry-after"] = f"{retry_after:g}"
        if should_retry is not None:
            headers["x-should-retry"] = "true" if should_retry else "false"
        default_type, default_code = _ERRORS.get(status) or (
            ("server_error", None) if status >= 500 else ("invalid_request_error", None)
        )
        etype = error_type or default_type
        return cls(
            status=status,
            error_type=etype,
            error_message=message or f"fake {etype} ({status})",
            error_code=code if code is not None else default_code,
            error_param=param,
            headers=headers,
            finish_reason=None,
        )

    @classmethod
    def slow(cls, seconds: float, reply: Reply) -> Reply:
        """``reply``, sent after ``seconds`` more (on top of the server's ``latency_s``)."""
        return dataclasses.replace(reply, delay_s=reply.delay_s + seconds)

    @classmethod
    def raw(cls, status: int, body: str | bytes, headers: Mapping[str, str] | None = None) -> Reply:
        """Any status and body, e.g. a malformed answer."""
        data = body.encode() if isinstance(body, str) else body
        return cls(status=status, body=data, headers=dict(headers or {}), finish_reason=None)


Responder = Callable[[dict[str, Any]], Reply]


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False  # a slow reply still sleeping must not hold up stop()
    request_queue_size = 512  # benchmarks open many connections at once
    allow_reuse_address = True
    fake: FakeOpenAI


class _Handler(BaseHTTPRequestHandler):
    server: _HTTPServer
    protocol_version = "HTTP/1.0"  # one request per connection: nothing lingers after stop()
    # Without this the answer's body waits behind its headers for the client's delayed ACK
    # (Nagle's algorithm): about 40 ms per call on a keep-alive connection, which no real API adds.
    disable_nagle_algorithm = True

    def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
        self.server.fake._handle(self)

    def do_GET(self) -> None:  # noqa: N802
        path = urlsplit(self.path).path
        self.server.fake._send_reply(self, Reply.error(404, message=f"Invalid URL (GET {path})"), {}, "")

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        pass


class _KeepAliveHandler(_Handler):
    """HTTP/1.1 with keep-alive, as the real API: clients reuse connections (benchmarks use this)."""

    protocol_version = "HTTP/1.1"


class FakeOpenAI:
    """The fake server; a context manager that starts on enter and stops on exit."""

    def __init__(self, *, responder: Responder | None = None, latency_s: float = 0.0, keep_alive: bool = False,
                 port: int = 0) -> None:
        self.responder: Responder | None = responder
        self.port = port  # 0: any free port; a fixed one keeps base_url (part of the response cache key) stable
        self.keep_alive = keep_alive
        self.latency_s: float = latency_s
        self._lock = threading.Lock()
        self._queue: collections.deque[Reply] = collections.deque()
        self._requests: list[dict[str, Any]] = []
        self._headers: list[dict[str, str]] = []
        self._times: list[float] = []
        self._errors: list[str] = []
        self._calls = 0
        self._in_flight = 0
        self._peak = 0
        self._cache: set[str] = set()
        self._ids = itertools.count(1)
        self._stopping = threading.Event()
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle -----------------------------------------------------------------------------------

    def start(self) -> FakeOpenAI:
        if self._httpd is not None:
            return self
        self._stopping.clear()
        httpd = _HTTPServer(("127.0.0.1", self.port), _KeepAliveHandler if self.keep_alive else _Handler)
        httpd.fake = self
        self._httpd = httpd
        self._thread = threading.Thread(
            target=httpd.serve_forever, kwargs={"poll_interval": 0.02}, name="fake-openai", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        httpd, self._httpd = self._httpd, None
        if httpd is None:
            return
        self._stopping.set()  # wakes replies still waiting out their latency
        httpd.shutdown()
        httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> FakeOpenAI:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT/v1``: the openai SDK's ``base_url`` includes the version, Anthropic's does not."""
        if self._httpd is None:
            raise RuntimeError("FakeOpenAI is not running: use it as a context manager or call start()")
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}/v1"

    # -- scripting -----------------------------------------------------------------------------------

    def queue(self, *replies: Reply) -> None:
        """Answer the next requests with ``replies``, in order (before the responder)."""
        with self._lock:
            self._queue.extend(replies)

    def reset(self) -> None:
        """Forget recorded requests, counters, queued replies and the simulated cache."""
        with self._lock:
            self._queue.clear()
            self._requests.clear()
            self._headers.clear()
            self._times.clear()
            self._errors.clear()
            self._calls = 0
            self._peak = self._in_flight
            self._cache.clear()

    # -- what happened -------------------------------------------------------------------------------

    @property
    def requests(self) -> list[dict[str, Any]]:
        """The parsed JSON bodies received so far (a copy), refused ones included."""
        with self._lock:
            return list(self._requests)

    @property
    def request_headers(self) -> list[dict[str, str]]:
        """The headers of each request (lower-case names), parallel to :attr:`requests`."""
        with self._lock:
            return list(self._headers)

    @property
    def request_times(self) -> list[float]:
        """``time.monotonic()`` at the arrival of each request, parallel to :attr:`requests`."""
        with self._lock:
            return list(self._times)

    @property
    def errors(self) -> list[str]:
        """Problems on the server side (a responder that raised, a body that was not JSON)."""
        with self._lock:
            return list(self._errors)

    @property
    def calls(self) -> int:
        with self._lock:
            return self._calls

    @property
    def in_flight(self) -> int:
        with self._lock:
            return self._in_flight

    @property
    def peak_in_flight(self) -> int:
        """The most requests the server was handling at the same moment."""
        with self._lock:
            return self._peak

    @property
    def pending(self) -> int:
        """Queued replies not used yet."""
        with self._lock:
            return len(self._queue)

    # -- serving -------------------------------------------------------------------------------------

    def _handle(self, handler: _Handler) -> None:
        path = urlsplit(handler.path).path.rstrip("/")
        length = int(handler.headers.get("content-length") or 0)
        body = handler.rfile.read(length) if length else b""
        if path != _PATH:
            self._send_reply(handler, Reply.error(404, message=f"Invalid URL (POST {path}): fake serves {_PATH}"),
                             {}, "")
            return
        try:
            request = json.loads(body or b"null")
            if not isinstance(request, dict):
                raise ValueError("the body is not a JSON object")
        except ValueError as err:
            with self._lock:
                self._errors.append(f"bad request body: {err}")
            self._send_reply(handler, Reply.error(400, message=f"request body is not a JSON object: {err}"), {}, "")
            return

        refusal = _refusal(request)
        reply: Reply | None = None
        with self._lock:
            self._requests.append(request)
            self._headers.append({k.lower(): v for k, v in handler.headers.items()})
            self._times.append(time.monotonic())
            self._calls += 1
            if refusal is None:
                self._in_flight += 1
                self._peak = max(self._peak, self._in_flight)
                reply = self._queue.popleft() if self._queue else None
            responder = self.responder
            latency = self.latency_s
        if refusal is not None:  # before the queue: the scripted replies stay for the corrected request
            self._send_reply(handler, refusal, request, f"{next(self._ids):012x}")
            return
        try:
            if reply is None:
                reply = self._respond(responder, request)
            wait = latency + reply.delay_s
            if wait > 0 and self._stopping.wait(wait):
                return  # the server is stopping; the client sees the connection drop
        finally:
            with self._lock:  # before the answer is written: the client cannot have it yet
                self._in_flight -= 1
        self._send_reply(handler, reply, request, f"{next(self._ids):012x}")

    def _respond(self, responder: Responder | None, request: dict[str, Any]) -> Reply:
        if responder is None:
            return Reply.error(400, message="FakeOpenAI: no reply queued and no responder set")
        try:
            reply = responder(request)
            if not isinstance(reply, Reply):
                raise TypeError(f"the responder returned {type(reply).__name__}, not Reply")
            return reply
        except Exception as err:  # a broken responder is a test bug: show it, do not let the SDK retry it
            with self._lock:
                self._errors.append(f"responder failed: {err!r}")
            return Reply.error(500, message=f"FakeOpenAI responder failed: {err!r}", should_retry=False)

    def _send_reply(self, handler: _Handler, reply: Reply, request: Mapping[str, Any], uid: str) -> None:
        headers = {"content-type": "application/json", "x-request-id": f"req_fake_{uid or 'x'}"}
        headers.update(reply.headers)
        if reply.body is not None:
            payload = reply.body
        elif reply.status == 200:
            payload = json.dumps(self._completion(reply, request, uid)).encode()
        else:
            error = {
                "message": reply.error_message or "",
                "type": reply.error_type or "server_error",
                "param": reply.error_param,
                "code": reply.error_code,
            }
            payload = json.dumps({"error": error}).encode()
        headers["content-length"] = str(len(payload))
        try:
            handler.send_response(reply.status)
            for name, value in headers.items():
                handler.send_header(name, value)
            handler.end_headers()
            handler.wfile.write(payload)
            handler.wfile.flush()
        except (BrokenPipeError, ConnectionResetError, ConnectionAbortedError, OSError):
            pass  # the client gave up (timeout) before the answer came

    def _completion(self, reply: Reply, request: Mapping[str, Any], uid: str) -> dict[str, Any]:
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
            "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": reply.finish_reason}],
            "usage": self._usage(reply, request, message),
            "service_tier": "default",
            "system_fingerprint": "fp_fake",
        }

    def _usage(self, reply: Reply, request: Mapping[str, Any], message: Mapping[str, Any]) -> dict[str, Any]:
        if reply.usage is not None:
            given = reply.usage
            prompt, completion = int(given.get("prompt_tokens", 0)), int(given.get("completion_tokens", 0))
            cached, reasoning = int(given.get("cached_tokens", 0)), int(given.get("reasoning_tokens", 0))
            total = int(given.get("total_tokens", prompt + completion))
        else:
            prompt, cached = self._prompt_tokens(request)
            completion = max(1, len(json.dumps([message.get("content"), message.get("tool_calls")])) // 4)
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
        with self._lock:
            seen = max((c for key, c in prefixes[1:] if key in self._cache), default=0)
            self._cache.update(key for key, _ in prefixes[1:])
        prompt = max(1, chars // 4)
        cached = min(seen // 4, prompt)
        if cached < _CACHE_MIN_TOKENS:
            cached = 0
        else:
            cached -= (cached - _CACHE_MIN_TOKENS) % _CACHE_STEP_TOKENS
        return prompt, cached


def _refusal(request: Mapping[str, Any]) -> Reply | None:
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
    schema is filled as the Anthropic fake's ``judge_responder`` fills it (:mod:`harness.testing.schema_fill`).
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
