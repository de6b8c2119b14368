"""What the batcher's two paths share: a waiting request, polling a batch to its end, and turning a result into an
answer or an error. :mod:`harness.llm.batching` submits and reads batches with them, both the batches a session
submits and those it resumes (:mod:`harness.llm.batch_journal`).

A result is the SDK's object (``result.type``, ``result.message``, ``result.error.error``) or the same as JSON (a
result kept in the journal); either answers a request the same way.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Hashable, Iterable, Mapping
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, Protocol

from harness.base.errors import ExitCode, ModelCallError, ModelUnavailable

__all__ = ["BatchAPI", "BatchPending", "Item", "ProgressCallback"]

ProgressCallback = Callable[[str, dict[str, int]], Any]
ErrorMapper = Callable[[BaseException], BaseException]
COUNT_FIELDS = ("processing", "succeeded", "errored", "canceled", "expired")
UNPROCESSED = ("expired", "canceled")  # results of requests the API never processed: nothing was paid for them


class BatchAPI(Protocol):
    """The part of ``anthropic.Anthropic().messages.batches`` the batcher uses."""

    def create(self, *, requests: Any) -> Any: ...

    def retrieve(self, message_batch_id: str) -> Any: ...

    def results(self, message_batch_id: str) -> Any: ...

    def cancel(self, message_batch_id: str) -> Any: ...


class BatchPending(ModelUnavailable):
    """``--harness-batch-submit``: the request is in a Message Batch that nobody waits for; a later run takes its
    answer. The item is not scored (indeterminate), never passed or failed."""


@dataclass
class Item:
    """One request handed to the batcher, and the future its caller waits on."""

    params: dict[str, Any]
    future: Future[Any]
    api: BatchAPI
    map_error: ErrorMapper
    group: Hashable = None
    key: str | None = None  # the response cache key: how the journal finds the request in a later run
    endpoint: str = ""
    size: int = 0  # bytes of its JSON in a batch's body
    custom_id: str = field(default="")


def one_line(text: object, limit: int = 300) -> str:
    flat = " ".join(str(text).split()).rstrip(".")
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def counts(batch: Any) -> dict[str, int]:
    found = getattr(batch, "request_counts", None)
    return {name: int(getattr(found, name, 0) or 0) for name in COUNT_FIELDS}


def as_json(value: Any) -> Any:
    """The SDK's object as JSON data (a result kept in the journal, a message handed to the provider)."""
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json")
    return json.loads(json.dumps(value, default=vars))


def _get(value: Any, name: str) -> Any:
    return value.get(name) if isinstance(value, Mapping) else getattr(value, name, None)


def result_type(result: Any) -> str | None:
    kind = _get(result, "type")
    return None if kind is None else str(kind)


def poll_until_ended(api: BatchAPI, batch_id: str, batch: Any, *, stop: threading.Event, poll_s: float,
                     poll_max_s: float, poll_failures: int, progress: Callable[[str, Any], None]) -> Any:
    """Poll ``retrieve`` until the batch has ended: first after ``poll_s``, then at intervals growing by half up to
    ``poll_max_s``; ``poll_failures`` failed polls in a row (after the SDK's retries) fail it, a 404 at once.
    Raises :func:`stopped` when ``stop`` is set."""
    failed_polls = 0
    interval = poll_s
    while getattr(batch, "processing_status", None) != "ended":
        if stop.wait(interval):
            raise stopped()
        # a small batch ends in seconds, a large one in minutes or hours: poll soon, then less often
        interval = min(interval * 1.5, poll_max_s)
        try:
            batch = api.retrieve(batch_id)
        except Exception as err:
            failed_polls += 1
            if failed_polls >= poll_failures or getattr(err, "status_code", None) == 404:
                raise
            continue
        failed_polls = 0
        progress(batch_id, batch)
    return batch


def stopped() -> ModelCallError:
    return ModelCallError(
        "message batch stopped before its answer arrived (the session is ending); run again to finish",
        ExitCode.TEMP_FAIL,
    )


def fail(items: Iterable[Item], error: BaseException) -> None:
    for item in items:
        if not item.future.done():
            item.future.set_exception(error)


_ERROR_EXIT_CODES = {
    "rate_limit_error": ExitCode.TEMP_FAIL,
    "overloaded_error": ExitCode.TEMP_FAIL,
    "api_error": ExitCode.UNAVAILABLE,
    "timeout_error": ExitCode.TIMEOUT,
}


def resolve(item: Item, result: Any, batch_id: str) -> None:
    """Answer ``item`` with its result: the message's JSON when it succeeded, else a ModelCallError for it alone."""
    if item.future.done():
        return
    kind = result_type(result)
    if kind == "succeeded":
        item.future.set_result(as_json(_get(result, "message")))
        return
    model = item.params.get("model", "the model")
    if kind == "errored":
        error = _get(_get(result, "error"), "error")
        etype = str(_get(error, "type") or "api_error")
        detail = one_line(_get(error, "message") or "no detail")
        code = _ERROR_EXIT_CODES.get(etype, ExitCode.PROTOCOL)
        hint = "retry later" if code != ExitCode.PROTOCOL else "check the model name and the request"
        message = f"batched request to {model} failed in batch {batch_id} ({etype}): {detail}; {hint}"
        item.future.set_exception(ModelCallError(message, code))
        return
    if kind in UNPROCESSED:
        item.future.set_exception(
            ModelCallError(
                f"batched request to {model} {kind} in batch {batch_id} before it was processed; run again",
                ExitCode.TEMP_FAIL,
            )
        )
        return
    item.future.set_exception(
        ModelCallError(f"batch {batch_id} answered a request with result type {kind!r}", ExitCode.PROTOCOL)
    )


def retrieve(api: BatchAPI, batch_id: str) -> Any:
    """The batch, or None when the API no longer knows it (404)."""
    try:
        return api.retrieve(batch_id)
    except Exception as err:
        if getattr(err, "status_code", None) == 404:
            return None
        raise


def cancel_batch(api: BatchAPI, batch_id: str) -> None:
    try:
        api.cancel(batch_id)
    except Exception:  # noqa: BLE001, S110 - best effort: the session is ending anyway
        pass


def plural(n: int, noun: str) -> str:
    return f"{n} {noun}{'s' * (n != 1)}"
