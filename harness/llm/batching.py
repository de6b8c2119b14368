"""Message Batches: many model requests sent as one batch at half price, each caller blocking on its own answer.

:class:`Batcher` sits behind :meth:`harness.llm.ModelClient.complete`. A caller hands it one request
(the exact Messages API parameters) and waits on a :class:`~concurrent.futures.Future`. A background
thread gathers the waiting requests and submits them as one Message Batch when no new request has
arrived for ``quiet_s`` seconds, or at once when ``max_size`` requests are waiting. Each batch then has
a thread of its own that polls ``retrieve`` until ``processing_status`` is ``ended``, first after ``poll_s``
seconds, then at intervals that grow by half each time up to ``poll_max_s`` (calling
``on_progress(batch_id, counts)`` after every poll), reads the results and resolves each waiter by
``custom_id``: with the SDK's ``Message`` when the request succeeded, or with a
:class:`~harness.base.errors.ModelCallError` for that request alone when it errored, expired or was canceled.

This module never imports the SDK: :mod:`harness.llm` passes in ``sdk.messages.batches`` (anything with
``create``, ``retrieve``, ``results`` and ``cancel`` of the same shapes) and a function that turns an
SDK exception into a ModelCallError.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable, Hashable, Mapping
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, Protocol

from harness.base.errors import ExitCode, ModelCallError

__all__ = ["BatchAPI", "Batcher", "ProgressCallback"]

ProgressCallback = Callable[[str, dict[str, int]], Any]
ErrorMapper = Callable[[BaseException], BaseException]
_COUNT_FIELDS = ("processing", "succeeded", "errored", "canceled", "expired")


class BatchAPI(Protocol):
    """The part of ``anthropic.Anthropic().messages.batches`` the batcher uses."""

    def create(self, *, requests: Any) -> Any: ...

    def retrieve(self, message_batch_id: str) -> Any: ...

    def results(self, message_batch_id: str) -> Any: ...

    def cancel(self, message_batch_id: str) -> Any: ...


@dataclass
class _Item:
    custom_id: str
    params: dict[str, Any]
    future: Future[Any]


@dataclass
class _Group:
    api: BatchAPI
    map_error: ErrorMapper
    items: list[_Item]


def _one_line(text: object, limit: int = 300) -> str:
    flat = " ".join(str(text).split()).rstrip(".")
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def _counts(batch: Any) -> dict[str, int]:
    counts = getattr(batch, "request_counts", None)
    return {name: int(getattr(counts, name, 0) or 0) for name in _COUNT_FIELDS}


class Batcher:
    """Gathers requests into Message Batches; thread-safe. One per session, in the CallPolicy."""

    def __init__(
        self,
        *,
        quiet_s: float = 0.2,
        max_size: int = 5000,
        poll_s: float = 1.0,
        poll_max_s: float = 30.0,
        on_progress: ProgressCallback | None = None,
        poll_failures: int = 5,
    ) -> None:
        if max_size < 1:
            raise ValueError(f"max_size must be at least 1, not {max_size}")
        self.quiet_s = quiet_s
        self.max_size = max_size
        self.poll_s = poll_s
        self.poll_max_s = max(poll_s, poll_max_s)
        self.on_progress = on_progress
        self.poll_failures = poll_failures  # consecutive failed polls (after the SDK's retries) before giving up
        self._cond = threading.Condition()
        self._pending: dict[Hashable, _Group] = {}
        self._last_arrival = 0.0
        self._ids = itertools.count(1)
        self._collector: threading.Thread | None = None
        self._closed = False
        self._stop = threading.Event()
        self._active: dict[str, BatchAPI] = {}  # batch id -> its API, while it is being polled
        self._waiting = 0
        self.batches_created = 0

    def __repr__(self) -> str:
        return (f"Batcher(quiet_s={self.quiet_s}, max_size={self.max_size}, poll_s={self.poll_s}, "
                f"poll_max_s={self.poll_max_s})")

    @property
    def waiting(self) -> int:
        """Requests handed in and not answered yet (gathering or in a batch)."""
        with self._cond:
            return self._waiting

    def submit(
        self,
        params: Mapping[str, Any],
        *,
        api: BatchAPI,
        map_error: ErrorMapper,
        group: Hashable = None,
    ) -> Future[Any]:
        """Queue one request (Messages API parameters); the future resolves to the SDK's ``Message``.

        Requests of different ``group`` values (e.g. different API keys or endpoints) go in
        different batches; the first request of a group supplies its ``api`` and ``map_error``.
        """
        future: Future[Any] = Future()
        with self._cond:
            if self._closed:
                future.set_exception(_stopped())
                return future
            item = _Item(custom_id=f"harness-{next(self._ids):08d}", params=dict(params), future=future)
            entry = self._pending.get(group)
            if entry is None:
                entry = self._pending[group] = _Group(api=api, map_error=map_error, items=[])
            entry.items.append(item)
            self._waiting += 1
            self._last_arrival = time.monotonic()
            if self._collector is None:
                self._collector = threading.Thread(target=self._collect, name="harness-batcher", daemon=True)
                self._collector.start()
            self._cond.notify_all()
        future.add_done_callback(self._done)
        return future

    def _done(self, _future: Future[Any]) -> None:
        with self._cond:
            self._waiting -= 1

    def close(self, *, cancel: bool = True) -> None:
        """Stop: fail every waiting request and (with ``cancel``) cancel the batches still running."""
        with self._cond:
            if self._closed:
                return
            self._closed = True
            self._stop.set()
            gathered = [item for group in self._pending.values() for item in group.items]
            self._pending.clear()
            active = dict(self._active)
            self._cond.notify_all()
        _fail(gathered, _stopped())
        if cancel:
            for batch_id, api in active.items():
                _cancel(api, batch_id)

    # -- gathering -----------------------------------------------------------------------------------

    def _collect(self) -> None:
        with self._cond:
            while not self._closed:
                if not self._pending:
                    self._cond.wait()
                    continue
                quiet_left = self._last_arrival + self.quiet_s - time.monotonic()
                full = [g for g, entry in self._pending.items() if len(entry.items) >= self.max_size]
                if quiet_left > 0 and not full:
                    self._cond.wait(quiet_left)
                    continue
                for group in full if quiet_left > 0 else list(self._pending):
                    entry = self._pending[group]
                    items, entry.items = entry.items[: self.max_size], entry.items[self.max_size :]
                    if not entry.items:
                        del self._pending[group]
                    threading.Thread(
                        target=self._run,
                        args=(entry.api, entry.map_error, items),
                        name="harness-batch",
                        daemon=True,
                    ).start()

    # -- one batch -----------------------------------------------------------------------------------

    def _run(self, api: BatchAPI, map_error: ErrorMapper, items: list[_Item]) -> None:
        by_id = {item.custom_id: item for item in items}
        batch_id: str | None = None
        try:
            batch = api.create(requests=[{"custom_id": i.custom_id, "params": i.params} for i in items])
            batch_id = str(batch.id)
            with self._cond:
                self.batches_created += 1
                closed = self._closed
                if not closed:
                    self._active[batch_id] = api
            if closed:  # close() came while the batch was being created: it did not see it
                _cancel(api, batch_id)
                raise _stopped()
            self._progress(batch_id, batch)
            failed_polls = 0
            interval = self.poll_s
            while getattr(batch, "processing_status", None) != "ended":
                if self._stop.wait(interval):
                    raise _stopped()
                # a small batch ends in seconds, a large one in minutes or hours: poll soon, then less often
                interval = min(interval * 1.5, self.poll_max_s)
                try:
                    batch = api.retrieve(batch_id)
                except Exception:
                    failed_polls += 1
                    if failed_polls >= self.poll_failures:
                        raise
                    continue
                failed_polls = 0
                self._progress(batch_id, batch)
            for entry in api.results(batch_id):
                item = by_id.pop(str(entry.custom_id), None)
                if item is not None:
                    _resolve(item, entry.result, batch_id)
        except ModelCallError as err:
            _fail(list(by_id.values()), err)
        except BaseException as err:  # an SDK error while creating, polling or reading results
            _fail(list(by_id.values()), map_error(err))
        finally:
            if batch_id is not None:
                with self._cond:
                    self._active.pop(batch_id, None)
            missing = [item for item in by_id.values() if not item.future.done()]
            _fail(
                missing,
                ModelCallError(
                    f"message batch {batch_id} returned no result for a request; retry the run",
                    ExitCode.PROTOCOL,
                ),
            )

    def _progress(self, batch_id: str, batch: Any) -> None:
        if self.on_progress is None:
            return
        try:
            self.on_progress(batch_id, _counts(batch))
        except Exception:  # a broken progress line must not lose the batch
            pass


def _cancel(api: BatchAPI, batch_id: str) -> None:
    try:
        api.cancel(batch_id)
    except Exception:  # best effort: the session is ending anyway
        pass


def _stopped() -> ModelCallError:
    return ModelCallError(
        "message batch stopped before its answer arrived (the session is ending); run again to finish",
        ExitCode.TEMP_FAIL,
    )


def _fail(items: list[_Item], error: BaseException) -> None:
    for item in items:
        if not item.future.done():
            item.future.set_exception(error)


_ERROR_EXIT_CODES = {
    "rate_limit_error": ExitCode.TEMP_FAIL,
    "overloaded_error": ExitCode.TEMP_FAIL,
    "api_error": ExitCode.UNAVAILABLE,
    "timeout_error": ExitCode.TIMEOUT,
}


def _resolve(item: _Item, result: Any, batch_id: str) -> None:
    kind = getattr(result, "type", None)
    if kind == "succeeded":
        item.future.set_result(result.message)
        return
    model = item.params.get("model", "the model")
    if kind == "errored":
        error = getattr(getattr(result, "error", None), "error", None)
        etype = str(getattr(error, "type", None) or "api_error")
        detail = _one_line(getattr(error, "message", None) or "no detail")
        code = _ERROR_EXIT_CODES.get(etype, ExitCode.PROTOCOL)
        hint = "retry later" if code != ExitCode.PROTOCOL else "check the model name and the request"
        message = f"batched request to {model} failed in batch {batch_id} ({etype}): {detail}; {hint}"
        item.future.set_exception(ModelCallError(message, code))
        return
    if kind in ("expired", "canceled"):
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
