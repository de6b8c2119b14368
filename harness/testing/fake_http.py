"""What the fake model servers share: a real HTTP server on 127.0.0.1 that answers scripted replies.

A fake is a ``http.server.ThreadingHTTPServer`` in a daemon thread, so a real SDK talks to it through its own
HTTP stack, retries and timeouts included. :class:`FakeModelServer` holds everything that does not depend on
the API: the lifecycle (``start``, ``stop``, a context manager), the queue of scripted replies and the
responder behind it, latency, the record of what came in (bodies, headers, arrival times, counts, requests in
flight) and the writing of answers. A subclass (``FakeAnthropic``, ``FakeOpenAI``) adds its API's wire format:
its path, which requests it refuses, and the JSON of an answer and of an error.

Replies come from the queue first (in order), then from ``responder(request_json)``. With neither, the server
answers 400 saying so (SDKs do not retry a 400). A reply can be slow (``Reply.slow``) or trickle, a byte at a
time (``Reply.trickle``: a client's read timeout never fires); ``hangups`` records clients that gave up on one.

"In flight" counts a request from its arrival until its answer starts being written, so a client that bounds
its own concurrency never sees the server count more than its bound.
"""

from __future__ import annotations

import collections
import dataclasses
import itertools
import json
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar, Generic, Self, TypeVar, cast
from urllib.parse import urlsplit

__all__ = ["FakeModelServer", "RequestHandler", "ScriptedReply", "estimated_tokens"]

CHARS_PER_TOKEN = 4  # the fakes' estimate when a reply does not state its usage


def estimated_tokens(chars: int) -> int:
    return chars // CHARS_PER_TOKEN


@dataclass(frozen=True)
class ScriptedReply(ABC):
    """The fields every API's scripted answer has; each fake's ``Reply`` adds its answer's content."""

    status: int = 200
    usage: Mapping[str, int] | None = None
    model: str | None = None
    error_type: str | None = None
    error_message: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    delay_s: float = 0.0
    body: bytes | None = None  # sent verbatim instead of a rendered answer or error
    trickle_s: float = 0.0  # seconds between two bytes of the answer (0: written at once)
    trickle_head: bool = True  # the status line and headers trickle too (else only the body)

    # The field values that mark a reply as carrying no model answer (its stop or finish reason cleared).
    NO_ANSWER: ClassVar[Mapping[str, Any]] = {}

    @classmethod
    @abstractmethod
    def error(cls, status: int, *, message: str | None = None, should_retry: bool | None = None) -> Self:
        """An API error in the API's shape, with its API's error types (and more options)."""

    @classmethod
    def _api_error(
        cls, status: int, error_type: str, *, message: str | None, retry_after: float | None,
        should_retry: bool | None, **api_fields: Any,
    ) -> Self:
        """What every API's error reply has: ``retry_after`` becomes the ``retry-after`` header (seconds),
        ``should_retry`` the ``x-should-retry`` header, which the SDKs obey over the status code."""
        headers: dict[str, str] = {}
        if retry_after is not None:
            headers["retry-after"] = f"{retry_after:g}"
        if should_retry is not None:
            headers["x-should-retry"] = "true" if should_retry else "false"
        return cls(
            status=status,
            error_type=error_type,
            error_message=message or f"fake {error_type} ({status})",
            headers=headers,
            **cls.NO_ANSWER,
            **api_fields,
        )

    @classmethod
    def slow(cls, seconds: float, reply: Self) -> Self:
        """``reply``, sent after ``seconds`` more (on top of the server's ``latency_s``)."""
        return dataclasses.replace(reply, delay_s=reply.delay_s + seconds)

    @classmethod
    def trickle(cls, seconds_per_byte: float, reply: Self, *, head: bool = True) -> Self:
        """``reply`` written a byte at a time, ``seconds_per_byte`` apart: a client's read timeout restarts with
        every byte, so only a deadline on the whole call ends it. ``head=False`` sends the status line and the
        headers at once and trickles the body only."""
        return dataclasses.replace(reply, trickle_s=seconds_per_byte, trickle_head=head)

    @classmethod
    def raw(cls, status: int, body: str | bytes, headers: Mapping[str, str] | None = None) -> Self:
        """Any status and body, e.g. a malformed answer."""
        data = body.encode() if isinstance(body, str) else body
        return cls(status=status, body=data, headers=dict(headers or {}), **cls.NO_ANSWER)


ReplyT = TypeVar("ReplyT", bound=ScriptedReply)


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False  # a slow reply still sleeping must not hold up stop()
    request_queue_size = 512  # benchmarks open many connections at once
    allow_reuse_address = True
    fake: FakeModelServer[Any]


class RequestHandler(BaseHTTPRequestHandler):
    server: _HTTPServer
    protocol_version = "HTTP/1.0"  # one request per connection: nothing lingers after stop()
    # Without this the answer's body waits behind its headers for the client's delayed ACK
    # (Nagle's algorithm): about 40 ms per call on a keep-alive connection, which no real API adds.
    disable_nagle_algorithm = True

    def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
        self.server.fake._on_request(self, "POST")

    def do_GET(self) -> None:  # noqa: N802
        self.server.fake._on_request(self, "GET")

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        pass


class _KeepAliveRequestHandler(RequestHandler):
    """HTTP/1.1 with keep-alive, as the real APIs: clients reuse connections (benchmarks use this)."""

    protocol_version = "HTTP/1.1"


class FakeModelServer(ABC, Generic[ReplyT]):
    """A fake model API; a context manager that starts on enter and stops on exit.

    A subclass sets :attr:`reply_type`, :attr:`model_path`, :attr:`request_id_header` (and :attr:`base_path`),
    renders its answers in :meth:`_answer` and :meth:`_error_body`, and may refuse requests in :meth:`_refusal`
    or serve more paths in :meth:`_route`.
    """

    reply_type: ClassVar[type[ScriptedReply]]
    model_path: ClassVar[str]  # the POST path that takes a model request
    base_path: ClassVar[str] = ""  # what the SDK expects after host and port in its base URL
    request_id_header: ClassVar[str]

    def __init__(
        self, *, responder: Callable[[dict[str, Any]], ReplyT] | None = None, latency_s: float = 0.0,
        keep_alive: bool = False, port: int = 0,
    ) -> None:
        self.responder = responder
        self.port = port  # 0: any free port; a fixed one keeps base_url (part of the response cache key) stable
        self.keep_alive = keep_alive
        self.latency_s = latency_s
        self._lock = threading.Lock()
        self._queue: collections.deque[ReplyT] = collections.deque()
        self._requests: list[dict[str, Any]] = []
        self._headers: list[dict[str, str]] = []
        self._times: list[float] = []
        self._errors: list[str] = []
        self._hangups: list[float] = []
        self._calls = 0
        self._in_flight = 0
        self._peak = 0
        self._cache: set[str] = set()  # keys of the prompt prefixes the simulated prompt cache holds
        self._ids = itertools.count(1)
        self._stopping = threading.Event()
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle -----------------------------------------------------------------------------------

    def start(self) -> Self:
        if self._httpd is not None:
            return self
        self._stopping.clear()
        handler_class = _KeepAliveRequestHandler if self.keep_alive else RequestHandler
        httpd = _HTTPServer(("127.0.0.1", self.port), handler_class)
        httpd.fake = self
        self._httpd = httpd
        self._thread = threading.Thread(
            target=httpd.serve_forever, kwargs={"poll_interval": 0.02}, name=type(self).__name__, daemon=True
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

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def base_url(self) -> str:
        if self._httpd is None:
            raise RuntimeError(f"{type(self).__name__} is not running: use it as a context manager or call start()")
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}{self.base_path}"

    # -- scripting -----------------------------------------------------------------------------------

    def queue(self, *replies: ReplyT) -> None:
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
            self._hangups.clear()
            self._calls = 0
            self._peak = self._in_flight
            self._cache.clear()

    # -- what happened -------------------------------------------------------------------------------

    @property
    def requests(self) -> list[dict[str, Any]]:
        """The parsed JSON bodies of model requests received so far (a copy), refused ones included."""
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
    def hangups(self) -> list[float]:
        """``time.monotonic()`` at each moment a client hung up before its answer was written whole."""
        with self._lock:
            return list(self._hangups)

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

    # -- what a subclass provides --------------------------------------------------------------------

    @abstractmethod
    def _answer(self, reply: ReplyT, request: Mapping[str, Any], uid: str) -> dict[str, Any]:
        """The JSON of a successful answer to ``request``."""

    @abstractmethod
    def _error_body(self, reply: ReplyT, request_id: str) -> dict[str, Any]:
        """The JSON of an error answer."""

    def _refusal(self, request: Mapping[str, Any]) -> ReplyT | None:
        """The error for a request this API does not answer, sent before the queue is touched; None to answer it."""
        return None

    def _route(self, handler: RequestHandler, method: str, path: str, body: bytes) -> None:
        """Answer a request to any other path than ``POST`` :attr:`model_path`; extended by a fake with more."""
        self._send_error(handler, 404, f"{method} {path} not found (the fake serves POST {self.model_path})")

    # -- serving -------------------------------------------------------------------------------------

    def _on_request(self, handler: RequestHandler, method: str) -> None:
        path = urlsplit(handler.path).path.rstrip("/")
        length = int(handler.headers.get("content-length") or 0)
        body = handler.rfile.read(length) if length else b""
        if method == "POST" and path == self.model_path:
            self._serve_model_request(handler, body)
        else:
            self._route(handler, method, path, body)

    def _serve_model_request(self, handler: RequestHandler, body: bytes) -> None:
        try:
            request = json.loads(body or b"null")
            if not isinstance(request, dict):
                raise ValueError("the body is not a JSON object")
        except ValueError as err:
            self._note_error(f"bad request body: {err}")
            self._send_error(handler, 400, f"request body is not a JSON object: {err}")
            return

        refusal = self._refusal(request)
        reply: ReplyT | None = None
        with self._lock:  # one step, so the n-th request recorded gets the n-th queued reply
            self._requests.append(request)
            self._headers.append({k.lower(): v for k, v in handler.headers.items()})
            self._times.append(time.monotonic())
            self._calls += 1
            if refusal is None:
                self._in_flight += 1
                self._peak = max(self._peak, self._in_flight)
                reply = self._take_queued()
            latency = self.latency_s
        if refusal is not None:  # before the queue: the scripted replies stay for the corrected request
            self._send_reply(handler, refusal, request, self._next_uid())
            return
        try:
            if reply is None:
                reply = self._respond(request)
            wait = latency + reply.delay_s
            if wait > 0 and self._stopping.wait(wait):
                return  # the server is stopping; the client sees the connection drop
        finally:
            with self._lock:  # before the answer is written: the client cannot have it yet
                self._in_flight -= 1
        self._send_reply(handler, reply, request, self._next_uid())

    def _take_queued(self) -> ReplyT | None:
        """The next queued reply, if any; the caller holds the lock."""
        return self._queue.popleft() if self._queue else None

    def _respond(self, request: dict[str, Any]) -> ReplyT:
        """The responder's reply to ``request``, or the error that says why there is none."""
        name = type(self).__name__
        responder = self.responder
        if responder is None:
            return self._error_reply(400, f"{name}: no reply queued and no responder set")
        try:
            reply = responder(request)
            if not isinstance(reply, self.reply_type):
                raise TypeError(f"the responder returned {type(reply).__name__}, not Reply")
            return reply
        except Exception as err:  # a broken responder is a test bug: show it, do not let the SDK retry it
            self._note_error(f"responder failed: {err!r}")
            return self._error_reply(500, f"{name} responder failed: {err!r}", should_retry=False)

    def _error_reply(self, status: int, message: str, *, should_retry: bool | None = None) -> ReplyT:
        return cast(ReplyT, self.reply_type.error(status, message=message, should_retry=should_retry))

    def _note_error(self, problem: str) -> None:
        with self._lock:
            self._errors.append(problem)

    def _next_uid(self) -> str:
        return f"{next(self._ids):012x}"

    def _seen_before(self, keys: Iterable[str]) -> set[str]:
        """Which of ``keys`` the simulated prompt cache held; it holds them all afterwards."""
        keys = list(keys)
        with self._lock:
            seen = {key for key in keys if key in self._cache}
            self._cache.update(keys)
        return seen

    # -- writing answers -----------------------------------------------------------------------------

    def _send_error(self, handler: RequestHandler, status: int, message: str) -> None:
        self._send_reply(handler, self._error_reply(status, message), {}, "")

    def _send_reply(self, handler: RequestHandler, reply: ReplyT, request: Mapping[str, Any], uid: str) -> None:
        if reply.body is not None:
            payload = reply.body
        elif reply.status == 200:
            payload = json.dumps(self._answer(reply, request, uid)).encode()
        else:
            payload = json.dumps(self._error_body(reply, f"req_fake_{uid or 'x'}")).encode()
        self._send(handler, reply.status, payload, uid=uid, headers=reply.headers, trickle_s=reply.trickle_s,
                   trickle_head=reply.trickle_head)

    def _send_json(self, handler: RequestHandler, status: int, data: Any) -> None:
        self._send(handler, status, json.dumps(data).encode(), uid=self._next_uid())

    def _send(
        self, handler: RequestHandler, status: int, payload: bytes, *, uid: str,
        headers: Mapping[str, str] | None = None, content_type: str = "application/json",
        trickle_s: float = 0.0, trickle_head: bool = True,
    ) -> None:
        """Write one answer; ``headers`` override the defaults; with ``trickle_s``, a byte at a time."""
        all_headers = {"content-type": content_type, self.request_id_header: f"req_fake_{uid or 'x'}"}
        all_headers.update(headers or {})
        all_headers["content-length"] = str(len(payload))
        try:
            if trickle_s > 0:
                self._trickle(handler, status, all_headers, payload, trickle_s, trickle_head)
                return
            handler.send_response(status)
            for name, value in all_headers.items():
                handler.send_header(name, value)
            handler.end_headers()
            handler.wfile.write(payload)
            handler.wfile.flush()
        except (BrokenPipeError, ConnectionResetError, ConnectionAbortedError, OSError):
            with self._lock:  # the client gave up (timeout) before the answer came
                self._hangups.append(time.monotonic())

    def _trickle(self, handler: RequestHandler, status: int, headers: Mapping[str, str], payload: bytes,
                 seconds_per_byte: float, head: bool) -> None:
        lines = [f"{handler.protocol_version} {status} {handler.responses.get(status, ('',))[0]}",
                 *(f"{name}: {value}" for name, value in headers.items())]
        start = "\r\n".join([*lines, "", ""]).encode("latin-1")
        if not head:
            handler.wfile.write(start)
            handler.wfile.flush()
        for byte in (start + payload if head else payload):
            if self._stopping.wait(seconds_per_byte):
                return  # the server is stopping; the client sees the connection drop
            handler.wfile.write(bytes([byte]))
            handler.wfile.flush()
        handler.close_connection = True
