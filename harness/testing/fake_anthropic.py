"""A fake Anthropic Messages API on 127.0.0.1 for tests and benchmarks, scripted per test.

It is a real HTTP server (``http.server.ThreadingHTTPServer`` in a daemon thread), so the real
``anthropic`` SDK talks to it through its own HTTP stack, retries and timeouts included::

    with FakeAnthropic() as server:          # server.base_url, server.requests, server.calls
        server.queue(Reply.error(429, retry_after=0.01), Reply.tool({"overallScore": 0.9, ...}))
        server.responder = judge_responder({"clarity": 0.5})   # used when the queue is empty
        server.latency_s = 0.2                                  # fixed latency per call
        ...
        server.peak_in_flight                                   # most requests in flight at once

Replies come from the queue first (in order), then from ``responder(request_json)``. With neither, the
server answers 400 ``invalid_request_error`` saying so (the SDK does not retry a 400).

Message Batches are served too (``POST /v1/messages/batches``, ``GET /v1/messages/batches/{id}``,
``GET /v1/messages/batches/{id}/results`` as JSONL, ``POST /v1/messages/batches/{id}/cancel``). Each
request of a batch is answered when the batch is created, in request order, by the same queue and
responder as direct calls: a 200 reply becomes a ``succeeded`` result, an error reply an ``errored``
one, :meth:`Reply.expired` an ``expired`` one. The batch reports ``in_progress`` until
``batch_processing_s`` has passed (and at least once), then ``ended``; results come back in reverse
order, so clients must match them by ``custom_id``. Batched requests are recorded in
:attr:`FakeAnthropic.batch_requests`, not in :attr:`FakeAnthropic.requests` / ``calls``.

"In flight" counts a direct request from its arrival until its answer starts being written, so a
client that bounds its own concurrency never sees the server count more than its bound.

Usage: a reply without explicit ``usage`` gets token counts estimated from the request (4 characters a
token) and a simulated prompt cache: the system blocks up to a ``cache_control`` block are a cache
write the first time the server sees them and a cache read afterwards.
"""

from __future__ import annotations

import collections
import dataclasses
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

__all__ = ["FakeAnthropic", "Reply", "Responder", "judge_responder"]

_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    402: "billing_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    504: "timeout_error",
    529: "overloaded_error",
}


@dataclass(frozen=True)
class Reply:
    """One scripted answer. Build it with :meth:`text`, :meth:`tool`, :meth:`error`, :meth:`slow` or :meth:`raw`."""

    status: int = 200
    content: tuple[Mapping[str, Any], ...] = ()
    stop_reason: str | None = "end_turn"
    usage: Mapping[str, int] | None = None
    model: str | None = None
    error_type: str | None = None
    error_message: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    delay_s: float = 0.0
    body: bytes | None = None  # sent verbatim instead of a rendered Message / error
    batch_result: str | None = None  # "expired" or "canceled": a batch result with no answer

    @classmethod
    def text(
        cls,
        text: str,
        *,
        usage: Mapping[str, int] | None = None,
        stop_reason: str = "end_turn",
        model: str | None = None,
    ) -> Reply:
        """A message with one text block."""
        return cls(content=({"type": "text", "text": text},), stop_reason=stop_reason, usage=usage, model=model)

    @classmethod
    def tool(
        cls,
        input: Mapping[str, Any],
        *,
        name: str | None = None,
        text: str | None = None,
        usage: Mapping[str, int] | None = None,
        stop_reason: str = "tool_use",
        model: str | None = None,
    ) -> Reply:
        """A message with one tool_use block (``name`` defaults to the tool the request forces)."""
        blocks: list[Mapping[str, Any]] = []
        if text:
            blocks.append({"type": "text", "text": text})
        blocks.append({"type": "tool_use", "name": name, "input": json.loads(json.dumps(input))})
        return cls(content=tuple(blocks), stop_reason=stop_reason, usage=usage, model=model)

    @classmethod
    def error(
        cls,
        status: int,
        *,
        retry_after: float | None = None,
        message: str | None = None,
        error_type: str | None = None,
        should_retry: bool | None = None,
    ) -> Reply:
        """An API error in Anthropic's shape; ``retry_after`` becomes the ``retry-after`` header (seconds).

        The SDK ignores ``retry-after: 0`` and falls back to its own backoff (about 0.5 s); use a small
        positive value such as 0.01 to keep tests fast.
        """
        headers: dict[str, str] = {}
        if retry_after is not None:
            headers["retry-after"] = f"{retry_after:g}"
        if should_retry is not None:
            headers["x-should-retry"] = "true" if should_retry else "false"
        etype = error_type or _ERROR_TYPES.get(status) or ("api_error" if status >= 500 else "invalid_request_error")
        return cls(
            status=status,
            error_type=etype,
            error_message=message or f"fake {etype} ({status})",
            headers=headers,
            stop_reason=None,
        )

    @classmethod
    def slow(cls, seconds: float, reply: Reply) -> Reply:
        """``reply``, sent after ``seconds`` more (on top of the server's ``latency_s``)."""
        return dataclasses.replace(reply, delay_s=reply.delay_s + seconds)

    @classmethod
    def expired(cls) -> Reply:
        """In a Message Batch: the request expired before it was processed (a direct call gets a 400)."""
        return cls(
            status=400,
            error_type="invalid_request_error",
            error_message="FakeAnthropic: Reply.expired() only answers a request inside a Message Batch",
            stop_reason=None,
            batch_result="expired",
        )

    @classmethod
    def raw(cls, status: int, body: str | bytes, headers: Mapping[str, str] | None = None) -> Reply:
        """Any status and body, e.g. a malformed answer."""
        data = body.encode() if isinstance(body, str) else body
        return cls(status=status, body=data, headers=dict(headers or {}), stop_reason=None)


Responder = Callable[[dict[str, Any]], Reply]


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False  # a slow reply still sleeping must not hold up stop()
    request_queue_size = 512  # benchmarks open many connections at once
    allow_reuse_address = True
    fake: FakeAnthropic


class _Handler(BaseHTTPRequestHandler):
    server: _HTTPServer
    protocol_version = "HTTP/1.0"  # one request per connection: nothing lingers after stop()
    # Without this the answer's body waits behind its headers for the client's delayed ACK
    # (Nagle's algorithm): about 40 ms per call on a keep-alive connection, which no real API adds.
    disable_nagle_algorithm = True

    def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
        self.server.fake._handle(self)

    def do_GET(self) -> None:  # noqa: N802
        self.server.fake._handle_get(self)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        pass


class _KeepAliveHandler(_Handler):
    """HTTP/1.1 with keep-alive, as the real API: clients reuse connections (benchmarks use this)."""

    protocol_version = "HTTP/1.1"


class FakeAnthropic:
    """The fake server; a context manager that starts on enter and stops on exit."""

    def __init__(
        self, *, responder: Responder | None = None, latency_s: float = 0.0, batch_processing_s: float = 0.0,
        keep_alive: bool = False, port: int = 0,
    ) -> None:
        self.responder: Responder | None = responder
        self.port = port  # 0: any free port; a fixed one keeps base_url (part of the response cache key) stable
        self.keep_alive = keep_alive
        self.latency_s: float = latency_s
        self.batch_processing_s: float = batch_processing_s
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
        self._batches: dict[str, _Batch] = {}
        self._batch_requests: list[dict[str, Any]] = []
        self._stopping = threading.Event()
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle -----------------------------------------------------------------------------------

    def start(self) -> FakeAnthropic:
        if self._httpd is not None:
            return self
        self._stopping.clear()
        httpd = _HTTPServer(("127.0.0.1", self.port), _KeepAliveHandler if self.keep_alive else _Handler)
        httpd.fake = self
        self._httpd = httpd
        self._thread = threading.Thread(
            target=httpd.serve_forever, kwargs={"poll_interval": 0.02}, name="fake-anthropic", daemon=True
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

    def __enter__(self) -> FakeAnthropic:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def base_url(self) -> str:
        if self._httpd is None:
            raise RuntimeError("FakeAnthropic is not running: use it as a context manager or call start()")
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

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
            self._batches.clear()
            self._batch_requests.clear()

    # -- what happened -------------------------------------------------------------------------------

    @property
    def requests(self) -> list[dict[str, Any]]:
        """The parsed JSON bodies received so far (a copy)."""
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
    def batch_requests(self) -> list[dict[str, Any]]:
        """The ``params`` of every request received inside a Message Batch (a copy, in order)."""
        with self._lock:
            return list(self._batch_requests)

    @property
    def batches(self) -> list[dict[str, Any]]:
        """Each batch created: ``id``, ``custom_ids``, ``polls`` (retrieve calls), ``status``."""
        with self._lock:
            return [
                {"id": b.id, "custom_ids": [c for c, _ in b.results], "polls": b.polls, "status": b.status}
                for b in self._batches.values()
            ]

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
        if path.startswith("/v1/messages/batches"):
            self._handle_batches(handler, "POST", path, body)
            return
        if path != "/v1/messages":
            self._send_reply(handler, Reply.error(404, message=f"{path} not found (fake serves /v1/messages)"), {}, "")
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

        with self._lock:
            self._requests.append(request)
            self._headers.append({k.lower(): v for k, v in handler.headers.items()})
            self._times.append(time.monotonic())
            self._calls += 1
            self._in_flight += 1
            self._peak = max(self._peak, self._in_flight)
            reply = self._queue.popleft() if self._queue else None
            responder = self.responder
            latency = self.latency_s
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

    # -- Message Batches -----------------------------------------------------------------------------

    def _handle_get(self, handler: _Handler) -> None:
        path = urlsplit(handler.path).path.rstrip("/")
        if path.startswith("/v1/messages/batches/"):
            self._handle_batches(handler, "GET", path, b"")
            return
        self._send_reply(handler, Reply.error(404, message=f"{path} not found"), {}, "")

    def _handle_batches(self, handler: _Handler, method: str, path: str, body: bytes) -> None:
        parts = path.split("/")[4:]  # after /v1/messages/batches
        if method == "POST" and not parts:
            self._create_batch(handler, body)
            return
        batch_id = parts[0] if parts else ""
        with self._lock:
            batch = self._batches.get(batch_id)
        if batch is None:
            self._send_reply(handler, Reply.error(404, message=f"no message batch {batch_id!r}"), {}, "")
            return
        action = parts[1] if len(parts) > 1 else ""
        if method == "GET" and not action:
            with self._lock:
                batch.polls += 1
            self._send_json(handler, 200, self._batch_object(batch))
        elif method == "GET" and action == "results":
            if self._batch_object(batch)["processing_status"] != "ended":
                self._send_reply(handler, Reply.error(400, message=f"batch {batch_id} has not ended"), {}, "")
                return
            lines = [json.dumps({"custom_id": cid, "result": result}) for cid, result in reversed(batch.results)]
            payload = ("\n".join(lines) + "\n").encode()
            self._send_raw(handler, 200, payload, "application/binary")
        elif method == "POST" and action == "cancel":
            with self._lock:
                if batch.status != "ended":
                    batch.canceled = True
            self._send_json(handler, 200, self._batch_object(batch))
        else:
            self._send_reply(handler, Reply.error(404, message=f"{path} not found"), {}, "")

    def _create_batch(self, handler: _Handler, body: bytes) -> None:
        try:
            data = json.loads(body or b"null")
            requests = data["requests"]
            if not isinstance(requests, list) or not requests:
                raise ValueError("requests must be a non-empty list")
            entries = [(str(r["custom_id"]), dict(r["params"])) for r in requests]
        except (ValueError, KeyError, TypeError) as err:
            with self._lock:
                self._errors.append(f"bad batch body: {err!r}")
            self._send_reply(handler, Reply.error(400, message=f"bad message batch: {err!r}"), {}, "")
            return
        batch = _Batch(id=f"msgbatch_fake_{next(self._ids):012x}", created=time.time())
        for custom_id, params in entries:
            with self._lock:
                self._batch_requests.append(params)
                reply = self._queue.popleft() if self._queue else None
                responder = self.responder
            if reply is None:
                reply = self._respond(responder, params)
            batch.results.append((custom_id, self._batch_result(reply, params)))
        with self._lock:
            self._batches[batch.id] = batch
        self._send_json(handler, 200, self._batch_object(batch, created=True))

    def _batch_result(self, reply: Reply, params: Mapping[str, Any]) -> dict[str, Any]:
        if reply.batch_result:
            return {"type": reply.batch_result}
        uid = f"{next(self._ids):012x}"
        if reply.status == 200 and reply.body is None:
            return {"type": "succeeded", "message": self._message(reply, params, uid)}
        return {
            "type": "errored",
            "error": {
                "type": "error",
                "error": {
                    "type": reply.error_type or "api_error",
                    "message": reply.error_message or f"fake answer with status {reply.status}",
                },
                "request_id": f"req_fake_{uid}",
            },
        }

    def _batch_object(self, batch: _Batch, *, created: bool = False) -> dict[str, Any]:
        ended = not created and (batch.canceled or time.time() >= batch.created + self.batch_processing_s)
        counts = dict.fromkeys(("processing", "succeeded", "errored", "canceled", "expired"), 0)
        if ended:
            for _, result in batch.results:
                kind = "canceled" if batch.canceled and result["type"] == "succeeded" else result["type"]
                counts[kind] += 1
            with self._lock:
                batch.status = "ended"
                if batch.canceled:  # what was not answered when cancel came is canceled
                    batch.results = [
                        (c, r if r["type"] != "succeeded" else {"type": "canceled"}) for c, r in batch.results
                    ]
        else:
            counts["processing"] = len(batch.results)
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(batch.created))
        return {
            "id": batch.id,
            "type": "message_batch",
            "processing_status": "ended" if ended else "in_progress",
            "request_counts": counts,
            "created_at": stamp,
            "expires_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(batch.created + 86400)),
            "ended_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()) if ended else None,
            "archived_at": None,
            "cancel_initiated_at": stamp if batch.canceled else None,
            "results_url": f"{self.base_url}/v1/messages/batches/{batch.id}/results" if ended else None,
        }

    def _send_json(self, handler: _Handler, status: int, data: Any) -> None:
        self._send_raw(handler, status, json.dumps(data).encode(), "application/json")

    def _send_raw(self, handler: _Handler, status: int, payload: bytes, content_type: str) -> None:
        try:
            handler.send_response(status)
            handler.send_header("content-type", content_type)
            handler.send_header("request-id", f"req_fake_{next(self._ids):012x}")
            handler.send_header("content-length", str(len(payload)))
            handler.end_headers()
            handler.wfile.write(payload)
            handler.wfile.flush()
        except (BrokenPipeError, ConnectionResetError, ConnectionAbortedError, OSError):
            pass

    def _respond(self, responder: Responder | None, request: dict[str, Any]) -> Reply:
        if responder is None:
            return Reply.error(400, message="FakeAnthropic: no reply queued and no responder set")
        try:
            reply = responder(request)
            if not isinstance(reply, Reply):
                raise TypeError(f"the responder returned {type(reply).__name__}, not Reply")
            return reply
        except Exception as err:  # a broken responder is a test bug: show it, do not let the SDK retry it
            with self._lock:
                self._errors.append(f"responder failed: {err!r}")
            return Reply.error(500, message=f"FakeAnthropic responder failed: {err!r}", should_retry=False)

    def _send_reply(self, handler: _Handler, reply: Reply, request: Mapping[str, Any], uid: str) -> None:
        headers = {"content-type": "application/json", "request-id": f"req_fake_{uid or 'x'}"}
        headers.update(reply.headers)
        if reply.body is not None:
            payload = reply.body
        elif reply.status == 200:
            payload = json.dumps(self._message(reply, request, uid)).encode()
        else:
            payload = json.dumps(
                {
                    "type": "error",
                    "error": {"type": reply.error_type or "api_error", "message": reply.error_message or ""},
                    "request_id": headers["request-id"],
                }
            ).encode()
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

    def _message(self, reply: Reply, request: Mapping[str, Any], uid: str) -> dict[str, Any]:
        content: list[dict[str, Any]] = []
        for n, block in enumerate(reply.content):
            block = dict(block)
            if block.get("type") == "tool_use":
                block["name"] = block.get("name") or _forced_tool_name(request) or "submit_result"
                block.setdefault("id", f"toolu_fake_{uid}_{n}")
            content.append(block)
        return {
            "id": f"msg_fake_{uid}",
            "type": "message",
            "role": "assistant",
            "model": reply.model or request.get("model") or "claude-fake",
            "content": content,
            "stop_reason": reply.stop_reason,
            "stop_sequence": None,
            "usage": self._usage(reply, request, content),
        }

    def _usage(self, reply: Reply, request: Mapping[str, Any], content: list[dict[str, Any]]) -> dict[str, int]:
        keys = ("input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
        if reply.usage is not None:
            return {k: int(reply.usage.get(k, 0)) for k in keys}
        prompt_chars = len(json.dumps([request.get("system"), request.get("messages"), request.get("tools")]))
        cached_key, cached_chars = _cached_prefix(request.get("system"))
        write = read = 0
        if cached_key is not None:
            with self._lock:
                seen = cached_key in self._cache
                self._cache.add(cached_key)
            if seen:
                read = cached_chars // 4
            else:
                write = cached_chars // 4
        return {
            "input_tokens": max(1, prompt_chars // 4 - write - read),
            "output_tokens": max(1, len(json.dumps(content)) // 4),
            "cache_creation_input_tokens": write,
            "cache_read_input_tokens": read,
        }


@dataclass
class _Batch:
    id: str
    created: float
    results: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    polls: int = 0
    status: str = "in_progress"
    canceled: bool = False


def _forced_tool_name(request: Mapping[str, Any]) -> str | None:
    choice = request.get("tool_choice")
    if isinstance(choice, Mapping) and choice.get("type") == "tool" and choice.get("name"):
        return str(choice["name"])
    tools = request.get("tools")
    if isinstance(tools, Sequence) and tools and isinstance(tools[0], Mapping):
        return tools[0].get("name")
    return None


def _cached_prefix(system: Any) -> tuple[str | None, int]:
    """(cache key, characters) of the system blocks up to the last ``cache_control`` block, if any."""
    if not isinstance(system, list):
        return None, 0
    last = max((i for i, b in enumerate(system) if isinstance(b, Mapping) and b.get("cache_control")), default=-1)
    if last < 0:
        return None, 0
    prefix = system[: last + 1]
    return json.dumps(prefix, sort_keys=True), sum(len(str(b.get("text", ""))) for b in prefix)


# ---------------------------------------------------------------------------------------------------
# A judge that always answers well-formed EvaluatorOutput


def judge_responder(
    scores: Mapping[str, float] | Callable[[dict[str, Any]], Mapping[str, float]] | None = None,
    *,
    default: float = 1.0,
    threshold: float = 0.85,
) -> Responder:
    """A responder that answers a forced tool call with a valid EvaluatorOutput (seed 000 section 2).

    It reads the tool's ``input_schema`` from each request: the keys of ``dimensionScores`` are that
    schema's dimension properties (its ``required`` list, else all its ``properties``). Scores come
    from ``scores`` (a mapping, or a callable given the request JSON that returns one); a dimension
    not named scores ``default``. Weights are the schema's ``const`` when it has one, else equal.
    Fields the schema requires that the judge does not know get a placeholder of the right type.
    Without tools in the request it answers in text, the JSON inside a ```json fence.
    """

    def respond(request: dict[str, Any]) -> Reply:
        tool = _requested_tool(request)
        schema: Mapping[str, Any] = (tool or {}).get("input_schema") or {}
        given = scores(request) if callable(scores) else (scores or {})
        answer = evaluator_output(schema, given, default, threshold)
        if tool is None:
            return Reply.text("```json\n" + json.dumps(answer, indent=2) + "\n```")
        return Reply.tool(answer, name=tool.get("name"))

    return respond


def _requested_tool(request: Mapping[str, Any]) -> Mapping[str, Any] | None:
    tools = [t for t in request.get("tools") or [] if isinstance(t, Mapping)]
    if not tools:
        return None
    name = _forced_tool_name(request)
    return next((t for t in tools if t.get("name") == name), tools[0])
