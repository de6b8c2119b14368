"""Message Batches: many model requests sent as one batch at half price, each caller blocking on its own answer.

:class:`Batcher` sits behind :meth:`harness.llm.ModelClient.complete`. A caller hands it one request
(the exact Messages API parameters) and waits on a :class:`~concurrent.futures.Future`. A background
thread gathers the waiting requests and submits them as one Message Batch when no new request has
arrived for ``quiet_s`` seconds, or at once when ``max_size`` requests or ``max_bytes`` of them are waiting
(both within the API's limits of 100,000 requests and 256 MB a batch). Each batch then has
a thread of its own that polls ``retrieve`` until ``processing_status`` is ``ended``, first after ``poll_s``
seconds, then at intervals that grow by half each time up to ``poll_max_s`` (calling
``on_progress(batch_id, counts)`` after every poll), streams the results and resolves each waiter by
``custom_id``: with the message's JSON when the request succeeded, or with a
:class:`~harness.base.errors.ModelCallError` for that request alone when it errored, expired or was canceled.

With a :class:`~harness.llm.batch_journal.BatchJournal` (``WORK/batches.db``), every batch is recorded with its
requests' cache keys as soon as the API returns its id, and a request recorded by an earlier run is not submitted
again: it waits on that run's batch (polled and read as above) or takes the result already read into the journal.
Results read before their requests are made again are kept in the journal, a few hundred at a time; an earlier
run's batch that expired, was canceled or is no longer known to the API is said (``on_notice``) and its requests
submitted again. A recorded batch is left running when the session stops (it is resumed, not paid for twice);
``submit_only`` records each batch and answers its waiters with :class:`BatchPending` instead of waiting.

This module never imports the SDK: :mod:`harness.llm` passes in ``sdk.messages.batches`` (anything with
``create``, ``retrieve``, ``results`` and ``cancel`` of the same shapes) and a function that turns an
SDK exception into a ModelCallError.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections.abc import Callable, Hashable, Mapping
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from harness.base.errors import ExitCode, HarnessError, ModelCallError
from harness.llm.batch_items import (
    UNPROCESSED,
    BatchAPI,
    BatchPending,
    ErrorMapper,
    Item,
    ProgressCallback,
    as_json,
    cancel_batch,
    counts,
    fail,
    plural,
    poll_until_ended,
    resolve,
    result_type,
    retrieve,
    stopped,
)
from harness.llm.batch_journal import BatchJournal, Recorded

__all__ = ["API_MAX_BYTES", "API_MAX_REQUESTS", "BatchAPI", "BatchPending", "Batcher", "ProgressCallback"]

NoticeCallback = Callable[[str], Any]
API_MAX_REQUESTS = 100_000  # the Message Batches API's limits on one batch
API_MAX_BYTES = 256 * 1024 * 1024
_KEEP_EVERY = 500  # results kept in the journal per write while a batch is read


@dataclass
class _Group:
    api: BatchAPI
    map_error: ErrorMapper
    items: list[Item]
    size: int = 0  # bytes of the items' JSON


@dataclass
class _Reading:
    """A batch being polled and read, and the requests waiting on it by custom id."""

    batch_id: str
    waiters: dict[str, list[Item]] = field(default_factory=dict)
    done: bool = False  # read (or given up): a request that comes now looks in the journal instead
    # what a request of it gets now: why it could not be read (or, with submit_only, that it is still processing)
    refusal: BaseException | None = None


class Batcher:
    """Gathers requests into Message Batches; thread-safe. One per session, in the CallPolicy."""

    def __init__(
        self,
        *,
        quiet_s: float = 0.2,
        max_size: int = 5000,
        max_bytes: int = 64 * 1024 * 1024,
        poll_s: float = 1.0,
        poll_max_s: float = 30.0,
        on_progress: ProgressCallback | None = None,
        poll_failures: int = 5,
        journal: BatchJournal | None = None,
        submit_only: bool = False,
        on_notice: NoticeCallback | None = None,
    ) -> None:
        if not 1 <= max_size <= API_MAX_REQUESTS:
            raise ValueError(f"max_size must be from 1 to {API_MAX_REQUESTS} (the API's limit), not {max_size}")
        if not 1 <= max_bytes <= API_MAX_BYTES:
            raise ValueError(f"max_bytes must be from 1 to {API_MAX_BYTES} (the API's limit), not {max_bytes}")
        if submit_only and journal is None:
            raise ValueError("submit_only needs a journal: a batch nobody waits for must be recorded")
        self.quiet_s = quiet_s
        self.max_size = max_size
        self.max_bytes = max_bytes  # the body of one create call: the SDK holds it in memory whole
        self.poll_s = poll_s
        self.poll_max_s = max(poll_s, poll_max_s)
        self.on_progress = on_progress
        self.poll_failures = poll_failures  # consecutive failed polls (after the SDK's retries) before giving up
        self.journal = journal
        self.submit_only = submit_only
        self.on_notice = on_notice
        self._cond = threading.Condition()
        self._pending: dict[Hashable, _Group] = {}
        self._last_arrival = 0.0
        self._ids = itertools.count(1)
        self._collector: threading.Thread | None = None
        self._closed = False
        self._stop = threading.Event()
        # batch id -> (its API, recorded in the journal, requests), while this session polls a batch it submitted
        self._active: dict[str, tuple[BatchAPI, bool, int]] = {}
        self._own: set[str] = set()  # the batches this session submitted
        self._resumed: dict[str, _Reading] = {}  # batches of an earlier run that requests of this one wait on
        self._waiting = 0
        self.batches_created = 0
        self.resumed = 0  # answers taken from batches an earlier run submitted
        self.submitted: list[tuple[str, int]] = []  # (batch id, requests) of each batch this session submitted
        self.notices: list[str] = []  # what on_notice was told, in order

    def __repr__(self) -> str:
        return (f"Batcher(quiet_s={self.quiet_s}, max_size={self.max_size}, poll_s={self.poll_s}, "
                f"poll_max_s={self.poll_max_s}, journal={self.journal!r}, submit_only={self.submit_only})")

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
        key: str | None = None,
        endpoint: str = "",
    ) -> Future[Any]:
        """Queue one request (Messages API parameters); the future resolves to the answer's JSON (a dict).

        Requests of different ``group`` values (e.g. different API keys or endpoints) go in
        different batches; the first request of a group supplies its ``api`` and ``map_error``.
        ``key`` (the response cache key) is how the journal records the request and finds it in a later run;
        ``endpoint`` is where it goes (recorded with its batch).
        """
        future: Future[Any] = Future()
        item = Item(params=dict(params), future=future, api=api, map_error=map_error, group=group, key=key,
                    endpoint=endpoint)
        with self._cond:
            if self._closed:
                future.set_exception(stopped())
                return future
            self._waiting += 1
        future.add_done_callback(self._done)
        if key is not None and self.journal is not None:
            try:
                if self._resume(item):
                    return future
            except HarnessError as err:  # the journal cannot be read: one line, for this request
                future.set_exception(err)
                return future
        self._gather(item)
        return future

    def _done(self, _future: Future[Any]) -> None:
        with self._cond:
            self._waiting -= 1

    def _gather(self, item: Item) -> None:
        """Put ``item`` with the requests waiting for the next batch of its group."""
        if not item.size:
            item.size = len(json.dumps(item.params, separators=(",", ":"), ensure_ascii=False).encode()) + 40
        with self._cond:
            closed = self._closed
            if not closed:
                item.custom_id = f"harness-{next(self._ids):08d}"
                entry = self._pending.get(item.group)
                if entry is None:
                    entry = self._pending[item.group] = _Group(api=item.api, map_error=item.map_error, items=[])
                entry.items.append(item)
                entry.size += item.size
                self._last_arrival = time.monotonic()
                if self._collector is None:
                    self._collector = threading.Thread(target=self._collect, name="harness-batcher", daemon=True)
                    self._collector.start()
                self._cond.notify_all()
        if closed:
            fail([item], stopped())

    def _notice(self, text: str) -> None:
        with self._cond:
            self.notices.append(text)
        if self.on_notice is not None:
            try:
                self.on_notice(text)
            except Exception:  # noqa: BLE001, S110 - a broken line must not lose the batch
                pass

    def close(self, *, cancel: bool = True) -> None:
        """Stop: fail every waiting request. A batch recorded in the journal is left running (a later run takes its
        answers; said through ``on_notice``); with ``cancel``, one that is not is canceled."""
        with self._cond:
            if self._closed:
                return
            self._closed = True
            self._stop.set()
            waiting = [item for group in self._pending.values() for item in group.items]
            self._pending.clear()
            left = {batch_id: len(reading.waiters) for batch_id, reading in self._resumed.items() if reading.waiters}
            for reading in self._resumed.values():
                waiting += _waiting(reading)
                reading.waiters, reading.done = {}, True
            active = dict(self._active)
            self._cond.notify_all()
        fail(waiting, stopped())
        for batch_id, size in left.items():  # an earlier run's batch, still processing
            self._left(batch_id, size)
        for batch_id, (api, recorded, size) in active.items():
            if recorded:
                self._left(batch_id, size)
            elif cancel:
                cancel_batch(api, batch_id)
        if self.journal is not None:
            self.journal.close()

    def _left(self, batch_id: str, size: int) -> None:
        assert self.journal is not None
        self._notice(f"Message Batch {batch_id} ({plural(size, 'request')}) left running, recorded in "
                     f"{self.journal.path}: run again with --harness-batch to take its answers instead of submitting "
                     "them again")

    # -- gathering -----------------------------------------------------------------------------------

    def _collect(self) -> None:
        with self._cond:
            while not self._closed:
                if not self._pending:
                    self._cond.wait()
                    continue
                quiet_left = self._last_arrival + self.quiet_s - time.monotonic()
                full = [g for g, entry in self._pending.items()
                        if len(entry.items) >= self.max_size or entry.size >= self.max_bytes]
                if quiet_left > 0 and not full:
                    self._cond.wait(quiet_left)
                    continue
                for group in full if quiet_left > 0 else list(self._pending):
                    entry = self._pending[group]
                    items = self._cut(entry)
                    if not entry.items:
                        del self._pending[group]
                    threading.Thread(
                        target=self._run,
                        args=(entry.api, entry.map_error, items),
                        name="harness-batch",
                        daemon=True,
                    ).start()

    def _cut(self, entry: _Group) -> list[Item]:
        """The first requests of ``entry`` that fit one batch: ``max_size`` of them and ``max_bytes`` (one at least)."""
        count = size = 0
        for item in entry.items:
            if count and (count >= self.max_size or size + item.size > self.max_bytes):
                break
            count += 1
            size += item.size
        items, entry.items = entry.items[:count], entry.items[count:]
        entry.size -= size
        return items

    # -- a batch this session submits ----------------------------------------------------------------

    def _run(self, api: BatchAPI, map_error: ErrorMapper, items: list[Item]) -> None:
        reading = _Reading("", {item.custom_id: [item] for item in items})
        batch_id: str | None = None
        try:
            batch = api.create(requests=[{"custom_id": i.custom_id, "params": i.params} for i in items])
            batch_id = reading.batch_id = str(batch.id)
            recorded = self._record(batch_id, items)
            with self._cond:
                self.batches_created += 1
                self._own.add(batch_id)
                self.submitted.append((batch_id, len(items)))
                closed = self._closed
                if not closed:
                    self._active[batch_id] = (api, recorded, len(items))
            if closed:  # close() came while the batch was being created: it did not see it
                if recorded:
                    self._left(batch_id, len(items))
                else:
                    cancel_batch(api, batch_id)
                raise stopped()
            self._progress(batch_id, batch)
            if self.submit_only and recorded:
                fail(items, BatchPending(f"the answer is pending in Message Batch {batch_id}, submitted without "
                                         "waiting (--harness-batch-submit); run again with --harness-batch to take it"))
                return
            self._poll(api, batch_id, batch)
            self._read(api, reading, again=False)
            if recorded and self.journal is not None:
                self.journal.finish(batch_id)
        except ModelCallError as err:
            fail(_waiting(reading), err)
        except BaseException as err:  # an SDK error while creating, polling or reading results
            fail(_waiting(reading), map_error(err))
        finally:
            if batch_id is not None:
                with self._cond:
                    self._active.pop(batch_id, None)
            fail(_waiting(reading), ModelCallError(
                f"message batch {batch_id} returned no result for a request; retry the run", ExitCode.PROTOCOL))

    def _record(self, batch_id: str, items: list[Item]) -> bool:
        """Record a batch just submitted with its requests' keys; False without a journal, or when it failed."""
        entries = [(item.custom_id, item.key) for item in items if item.key is not None]
        if self.journal is None or not entries:
            return False
        try:
            self.journal.record(batch_id, items[0].endpoint, entries)
        except HarnessError as err:
            self._notice(f"Message Batch {batch_id} could not be recorded ({err}): if this run is interrupted, "
                         "its requests are submitted again")
            return False
        return True

    def _poll(self, api: BatchAPI, batch_id: str, batch: Any) -> Any:
        return poll_until_ended(api, batch_id, batch, stop=self._stop, poll_s=self.poll_s, poll_max_s=self.poll_max_s,
                                poll_failures=self.poll_failures, progress=self._progress)

    def _read(self, api: BatchAPI, reading: _Reading, *, again: bool) -> tuple[dict[str, int], int]:
        """Stream an ended batch's results to the requests waiting on them, and keep the others in the journal (a
        few hundred at a time: never the whole set in memory). With ``again``, a request the API never processed
        (expired, canceled) is submitted again instead of failed. Returns the results of each type, and how many
        waiting requests were answered."""
        batch_id = reading.batch_id
        kinds: dict[str, int] = {}
        kept: list[tuple[str, str]] = []
        answered = 0
        for entry in api.results(batch_id):
            custom_id, result = str(entry.custom_id), entry.result
            kind = result_type(result) or "unknown"
            kinds[kind] = kinds.get(kind, 0) + 1
            with self._cond:
                items = reading.waiters.pop(custom_id, None)
            if items and again and kind in UNPROCESSED:
                for item in items:
                    self._gather(item)
            elif items:
                for item in items:
                    resolve(item, result, batch_id)
                answered += len(items)
            elif kind not in UNPROCESSED and self.journal is not None:
                kept.append((custom_id, json.dumps(as_json(result), ensure_ascii=False)))
                if len(kept) >= _KEEP_EVERY:
                    self.journal.keep(batch_id, kept)
                    kept = []
        if kept and self.journal is not None:
            self.journal.keep(batch_id, kept)
        return kinds, answered

    # -- a batch an earlier run submitted -------------------------------------------------------------

    def _resume(self, item: Item) -> bool:
        """Answer ``item`` from the batch an earlier run submitted it in: wait on that batch, or take the result the
        journal kept. False when no earlier run submitted it (or it must be submitted again)."""
        assert self.journal is not None and item.key is not None
        found = self.journal.find(item.key)
        if found is None or found.batch_id in self._own:
            return False
        if found.result is None:
            refusal: BaseException | None = None
            with self._cond:
                reading = self._resumed.get(found.batch_id)
                if reading is None:
                    reading = self._resumed[found.batch_id] = _Reading(found.batch_id)
                    threading.Thread(target=self._resume_run, args=(reading, item.api, item.map_error, found),
                                     name="harness-batch-resume", daemon=True).start()
                if reading.refusal is not None:
                    refusal = reading.refusal
                elif not reading.done:
                    reading.waiters.setdefault(found.custom_id, []).append(item)
                    return True
            if refusal is not None:
                fail([item], refusal)
                return True
            found = self.journal.row(found.batch_id, found.custom_id)  # read meanwhile: kept, if it had an answer
            if found is None or found.result is None:
                return False
        self._take_kept(item, found)
        return True

    def _take_kept(self, item: Item, found: Recorded) -> None:
        assert self.journal is not None and found.result is not None
        resolve(item, found.result, found.batch_id)
        self.journal.take(found.batch_id, [found.custom_id])
        with self._cond:
            self.resumed += 1

    def _resume_run(self, reading: _Reading, api: BatchAPI, map_error: ErrorMapper, found: Recorded) -> None:
        """Poll and read a batch an earlier run submitted, for the requests of this run that wait on it."""
        assert self.journal is not None
        batch_id = reading.batch_id
        try:
            batch = retrieve(api, batch_id)
            if batch is not None:
                self._progress(batch_id, batch)
                if self.submit_only and getattr(batch, "processing_status", None) != "ended":
                    self._give_up(reading, BatchPending(
                        f"the answer is pending in Message Batch {batch_id}, submitted by an earlier run and still "
                        "processing; run again with --harness-batch to take it"))
                    return
                try:
                    batch = self._poll(api, batch_id, batch)
                except Exception as err:
                    if getattr(err, "status_code", None) != 404:
                        raise
                    batch = None
            if batch is None:
                self.journal.forget(batch_id)
                self._notice(f"Message Batch {batch_id} of an earlier run is no longer known to the API at "
                             f"{found.endpoint}: its requests are submitted again")
            else:
                kinds, answered = self._read(api, reading, again=True)
                self.journal.finish(batch_id)
                with self._cond:
                    self.resumed += answered
                self._said_resumed(batch_id, kinds)
        except ModelCallError as err:
            self._give_up(reading, err)
            return
        except BaseException as err:  # an SDK error while polling or reading results
            self._give_up(reading, map_error(err))
            return
        for custom_id, item in self._drain(reading):  # came after their result was read, or have none
            try:
                row = self.journal.row(batch_id, custom_id)
                if row is not None and row.result is not None:
                    self._take_kept(item, row)
                else:
                    self._gather(item)
            except HarnessError as err:
                fail([item], err)

    def _said_resumed(self, batch_id: str, kinds: dict[str, int]) -> None:
        unprocessed = {kind: n for kind, n in kinds.items() if kind in UNPROCESSED}
        taken = sum(kinds.values()) - sum(unprocessed.values())
        if taken:
            self._notice(f"Message Batch {batch_id} of an earlier run has ended: its {plural(taken, 'result')} "
                         "are taken, not submitted again")
        if unprocessed:
            how = " or ".join("expired" if kind == "expired" else "was canceled" for kind in sorted(unprocessed))
            self._notice(f"Message Batch {batch_id} of an earlier run {how} before "
                         f"{plural(sum(unprocessed.values()), 'request')} of it were processed (nothing is charged for "
                         "those): they are submitted again")

    def _drain(self, reading: _Reading) -> list[tuple[str, Item]]:
        """The requests waiting on ``reading``, taken off it; later ones look in the journal."""
        with self._cond:
            drained = [(custom_id, item) for custom_id, items in reading.waiters.items() for item in items]
            reading.waiters, reading.done = {}, True
        return drained

    def _give_up(self, reading: _Reading, error: BaseException) -> None:
        """The batch cannot answer in this session: its waiting requests, and those that come later, get ``error``."""
        with self._cond:
            reading.refusal = error
        fail([item for _, item in self._drain(reading)], error)

    def _progress(self, batch_id: str, batch: Any) -> None:
        if self.on_progress is None:
            return
        try:
            self.on_progress(batch_id, counts(batch))
        except Exception:  # noqa: BLE001, S110 - a broken progress line must not lose the batch
            pass


def _waiting(reading: _Reading) -> list[Item]:
    return [item for items in reading.waiters.values() for item in items]
