"""A fake Anthropic Messages API on 127.0.0.1 for tests and benchmarks, scripted per test.

The HTTP server, the queue of replies, the responder and the record of requests are
:class:`harness.testing.fake_http.FakeModelServer`'s; this module adds the Messages API's wire format::

    with FakeAnthropic() as server:          # server.base_url, server.requests, server.calls
        server.queue(Reply.error(429, retry_after=0.01), Reply.tool({"overallScore": 0.9, ...}))
        server.responder = judge_responder({"clarity": 0.5})   # used when the queue is empty
        server.latency_s = 0.2                                  # fixed latency per call
        ...
        server.peak_in_flight                                   # most requests in flight at once

Message Batches are served too (``POST /v1/messages/batches``, ``GET /v1/messages/batches/{id}``,
``GET /v1/messages/batches/{id}/results`` as JSONL, ``POST /v1/messages/batches/{id}/cancel``). Each
request of a batch is answered when the batch is created, in request order, by the same queue and
responder as direct calls: a 200 reply becomes a ``succeeded`` result, an error reply an ``errored``
one, :meth:`Reply.expired` an ``expired`` one. The batch reports ``in_progress`` until
``batch_processing_s`` has passed (and at least once), then ``ended``; :meth:`FakeAnthropic.expire` ends it at
once as the API does after 24 hours (what it had not answered expired) and :meth:`FakeAnthropic.forget` makes it
unknown (404), as a batch of another workspace or one long gone. Results come back in reverse
order, so clients must match them by ``custom_id``. Batched requests are recorded in
:attr:`FakeAnthropic.batch_requests`, not in :attr:`FakeAnthropic.requests` / ``calls``, and are never
in flight.

Usage: a reply without explicit ``usage`` gets token counts estimated from the request (4 characters a
token) and a simulated prompt cache, as the real API's: the prompt up to a ``cache_control`` block (the tools,
then the system blocks, then the messages) is a cache write the first time the server sees it and a cache read
afterwards (each model has a cache of its own), but only when it is at least the model's minimum cacheable prefix
(:func:`harness.llm.prompt_cache.min_cacheable_tokens`: 2,048 tokens for ``claude-sonnet-4-6``, 4,096 for
``claude-haiku-4-5``; 1,024 for a model the table does not know). A shorter prefix is neither written nor read:
every input token is plain ``input_tokens``. ``server.min_cache_tokens = N`` sets one minimum for every model.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from harness.llm.prompt_cache import min_cacheable_tokens, tools_chars
from harness.llm.schema_fill import evaluator_output
from harness.testing.fake_http import FakeModelServer, RequestHandler, ScriptedReply, estimated_tokens

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
_BATCHES_PATH = "/v1/messages/batches"
UNKNOWN_MODEL_MIN_TOKENS = 1024  # a model the table does not know (``claude-fake``): the Claude 4.x floor


@dataclass(frozen=True)
class Reply(ScriptedReply):
    """One scripted answer. Build it with :meth:`text`, :meth:`tool`, :meth:`error`, :meth:`slow`, :meth:`expired`
    or :meth:`raw`."""

    content: tuple[Mapping[str, Any], ...] = ()
    stop_reason: str | None = "end_turn"
    batch_result: str | None = None  # "expired" or "canceled": a batch result with no answer

    NO_ANSWER: ClassVar[Mapping[str, Any]] = {"stop_reason": None}

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
        etype = error_type or _ERROR_TYPES.get(status) or ("api_error" if status >= 500 else "invalid_request_error")
        return cls._api_error(status, etype, message=message, retry_after=retry_after, should_retry=should_retry)

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


Responder = Callable[[dict[str, Any]], Reply]


class FakeAnthropic(FakeModelServer[Reply]):
    """The fake Messages API; a context manager that starts on enter and stops on exit."""

    reply_type = Reply
    model_path = "/v1/messages"
    request_id_header = "request-id"

    def __init__(
        self, *, responder: Responder | None = None, latency_s: float = 0.0, batch_processing_s: float = 0.0,
        keep_alive: bool = False, port: int = 0,
    ) -> None:
        super().__init__(responder=responder, latency_s=latency_s, keep_alive=keep_alive, port=port)
        self.batch_processing_s: float = batch_processing_s
        # the prompt cache's minimum prefix, in tokens: None is each model's own (harness.llm.prompt_cache)
        self.min_cache_tokens: int | None = None
        self._batches: dict[str, _Batch] = {}
        self._batch_requests: list[dict[str, Any]] = []

    def reset(self) -> None:
        """Forget recorded requests, counters, queued replies, the simulated cache and the batches."""
        super().reset()
        with self._lock:
            self._batches.clear()
            self._batch_requests.clear()

    @property
    def batch_requests(self) -> list[dict[str, Any]]:
        """The ``params`` of every request received inside a Message Batch (a copy, in order)."""
        with self._lock:
            return list(self._batch_requests)

    @property
    def batches(self) -> list[dict[str, Any]]:
        """Each batch created: ``id``, ``custom_ids``, ``polls`` (retrieve calls), ``reads`` (results downloaded),
        ``status``."""
        with self._lock:
            return [
                {"id": b.id, "custom_ids": [c for c, _ in b.results], "polls": b.polls, "reads": b.reads,
                 "status": b.status}
                for b in self._batches.values()
            ]

    def expire(self, batch_id: str | None = None) -> None:
        """End a batch still processing (every one, without ``batch_id``) as the API does after 24 hours: the
        requests it had not answered are ``expired``."""
        with self._lock:
            for batch in self._batches.values():
                if batch_id in (None, batch.id) and batch.status != "ended":
                    batch.expired = True

    def forget(self, batch_id: str) -> None:
        """The API no longer knows the batch: every endpoint of it answers 404."""
        with self._lock:
            self._batches.pop(batch_id, None)

    # -- the Messages wire format --------------------------------------------------------------------

    def _answer(self, reply: Reply, request: Mapping[str, Any], uid: str) -> dict[str, Any]:
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

    def _error_body(self, reply: Reply, request_id: str) -> dict[str, Any]:
        return {
            "type": "error",
            "error": {
                "type": reply.error_type or "api_error",
                "message": reply.error_message or f"fake answer with status {reply.status}",
            },
            "request_id": request_id,
        }

    def _usage(self, reply: Reply, request: Mapping[str, Any], content: list[dict[str, Any]]) -> dict[str, int]:
        keys = ("input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
        if reply.usage is not None:
            return {k: int(reply.usage.get(k, 0)) for k in keys}
        prompt_chars = len(json.dumps([_unmarked(request.get("system")), _unmarked(request.get("messages")),
                                       request.get("tools")]))  # a cache breakpoint is no input token
        minimum = self.min_cache_tokens if self.min_cache_tokens is not None else (
            min_cacheable_tokens(str(request.get("model") or "")) or UNKNOWN_MODEL_MIN_TOKENS)
        # each breakpoint's prefix long enough to cache, as (key, tokens), shortest first: the API writes the
        # prefix up to the last one and reads the longest one it holds; a shorter prefix is neither
        model = str(request.get("model") or "")  # each model has a cache of its own
        cacheable = [(f"{model}\n{key}", tokens) for key, chars in _cached_prefixes(request)
                     if (tokens := estimated_tokens(chars)) >= minimum]
        write = read = 0
        if cacheable:
            seen = self._seen_before([key for key, _ in cacheable])
            read = max((tokens for key, tokens in cacheable if key in seen), default=0)
            write = cacheable[-1][1] - read
        return {
            "input_tokens": max(1, estimated_tokens(prompt_chars) - write - read),
            "output_tokens": max(1, estimated_tokens(len(json.dumps(content)))),
            "cache_creation_input_tokens": write,
            "cache_read_input_tokens": read,
        }

    # -- Message Batches -----------------------------------------------------------------------------

    def _route(self, handler: RequestHandler, method: str, path: str, body: bytes) -> None:
        if path == _BATCHES_PATH or path.startswith(_BATCHES_PATH + "/"):
            self._handle_batches(handler, method, path, body)
        else:
            super()._route(handler, method, path, body)

    def _handle_batches(self, handler: RequestHandler, method: str, path: str, body: bytes) -> None:
        parts = path.split("/")[4:]  # after /v1/messages/batches
        if method == "POST" and not parts:
            self._create_batch(handler, body)
            return
        batch_id = parts[0] if parts else ""
        with self._lock:
            batch = self._batches.get(batch_id)
        if batch is None:
            self._send_error(handler, 404, f"no message batch {batch_id!r}")
            return
        action = parts[1] if len(parts) > 1 else ""
        if method == "GET" and not action:
            with self._lock:
                batch.polls += 1
            self._send_json(handler, 200, self._batch_object(batch))
        elif method == "GET" and action == "results":
            if self._batch_object(batch)["processing_status"] != "ended":
                self._send_error(handler, 400, f"batch {batch_id} has not ended")
                return
            with self._lock:
                batch.reads += 1
            lines = [json.dumps({"custom_id": cid, "result": result}) for cid, result in reversed(batch.results)]
            payload = ("\n".join(lines) + "\n").encode()
            self._send(handler, 200, payload, uid=self._next_uid(), content_type="application/binary")
        elif method == "POST" and action == "cancel":
            with self._lock:
                if batch.status != "ended":
                    batch.canceled = True
            self._send_json(handler, 200, self._batch_object(batch))
        else:
            self._send_error(handler, 404, f"{method} {path} not found")

    def _create_batch(self, handler: RequestHandler, body: bytes) -> None:
        try:
            data = json.loads(body or b"null")
            requests = data["requests"]
            if not isinstance(requests, list) or not requests:
                raise ValueError("requests must be a non-empty list")
            entries = [(str(r["custom_id"]), dict(r["params"])) for r in requests]
        except (ValueError, KeyError, TypeError) as err:
            self._note_error(f"bad batch body: {err!r}")
            self._send_error(handler, 400, f"bad message batch: {err!r}")
            return
        batch = _Batch(id=f"msgbatch_fake_{self._next_uid()}", created=time.time())
        for custom_id, params in entries:
            with self._lock:
                self._batch_requests.append(params)
                reply = self._take_queued()
            if reply is None:
                reply = self._respond(params)
            batch.results.append((custom_id, self._batch_result(reply, params)))
        with self._lock:
            self._batches[batch.id] = batch
        self._send_json(handler, 200, self._batch_object(batch, created=True))

    def _batch_result(self, reply: Reply, params: Mapping[str, Any]) -> dict[str, Any]:
        if reply.batch_result:
            return {"type": reply.batch_result}
        uid = self._next_uid()
        if reply.status == 200 and reply.body is None:
            return {"type": "succeeded", "message": self._answer(reply, params, uid)}
        return {"type": "errored", "error": self._error_body(reply, f"req_fake_{uid}")}

    def _batch_object(self, batch: _Batch, *, created: bool = False) -> dict[str, Any]:
        ended = not created and (batch.canceled or batch.expired
                                 or time.time() >= batch.created + self.batch_processing_s)
        counts = dict.fromkeys(("processing", "succeeded", "errored", "canceled", "expired"), 0)
        lost = "canceled" if batch.canceled else "expired" if batch.expired else None
        if ended:
            for _, result in batch.results:
                kind = lost if lost and result["type"] == "succeeded" else result["type"]
                counts[kind] += 1
            with self._lock:
                batch.status = "ended"
                if lost:  # what was not answered when cancel came (or the batch expired) is canceled (expired)
                    batch.results = [
                        (c, r if r["type"] != "succeeded" else {"type": lost}) for c, r in batch.results
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
            "results_url": f"{self.base_url}{_BATCHES_PATH}/{batch.id}/results" if ended else None,
        }


@dataclass
class _Batch:
    id: str
    created: float
    results: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    polls: int = 0
    reads: int = 0
    status: str = "in_progress"
    canceled: bool = False
    expired: bool = False


def _forced_tool_name(request: Mapping[str, Any]) -> str | None:
    choice = request.get("tool_choice")
    if isinstance(choice, Mapping) and choice.get("type") == "tool" and choice.get("name"):
        return str(choice["name"])
    tools = request.get("tools")
    if isinstance(tools, Sequence) and tools and isinstance(tools[0], Mapping):
        return tools[0].get("name")
    return None


def _unmarked(value: Any) -> Any:
    """``system`` or ``messages`` as they would be sent without cache breakpoints: a list of text blocks one of which
    carries ``cache_control`` counts as the one string it stands for."""
    if isinstance(value, list) and value and all(isinstance(b, Mapping) and b.get("type") == "text" for b in value) \
            and any(b.get("cache_control") for b in value):
        return "".join(str(b.get("text", "")) for b in value)
    if isinstance(value, list):
        return [{**m, "content": _unmarked(m["content"])} if isinstance(m, Mapping) and "content" in m else m
                for m in value]
    return value


def _cached_prefixes(request: Mapping[str, Any]) -> list[tuple[str, int]]:
    """(cache key, characters) of the prompt up to each ``cache_control`` block, in order: the API caches the
    ``tools``, then the ``system`` blocks, then the ``messages``, up to and including a marked block."""
    tools = request.get("tools") or []
    parts: list[Any] = [tools]
    chars = tools_chars([t for t in tools if isinstance(t, Mapping)])
    found: list[tuple[str, int]] = []

    def walk(blocks: Any) -> None:
        nonlocal chars
        for block in blocks if isinstance(blocks, list) else ():
            if not isinstance(block, Mapping):
                continue
            parts.append(block)
            chars += len(str(block.get("text", "")))
            if block.get("cache_control"):
                found.append((json.dumps(parts, sort_keys=True), chars))

    walk(request.get("system"))
    for message in request.get("messages") or []:
        content = message.get("content") if isinstance(message, Mapping) else None
        if isinstance(content, str):
            parts.append(content)
            chars += len(content)
        else:
            walk(content)
    return found


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
