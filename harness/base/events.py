"""The event stream: what happens in a run, as typed events, for any number of sinks.

The engine emits an item's life (started, each artifact, each generation, each judgement, each finished
attempt, finished) and its assessment (invoked, each gate checked, progress, the execution result, each
handoff between phases), the model layer each model call, the tournament each iteration's steps. A sink is any
callable taking an event; :meth:`Events.subscribe` adds one. The session's progress line and cost account, the
``pytest_harness_attempt_finished`` hook and a plugin's own trace are sinks of the same stream, so a new
consumer (an execution trace, a live viewer, a queue) is one more sink, not another call in the engine.

Sinks run on the thread that emits (a case's worker thread), in the order they subscribed; they must be
quick and thread-safe. A sink that raises is reported once as a warning and unsubscribed: a broken trace
must never fail an evaluation. The records are the one exception: the session subscribes its record
writer as a *required* sink, whose error fails the attempt, since an attempt that could not be recorded
must not pass.

Every event knows the item it belongs to (:attr:`Event.span`, its node id): an item's work runs inside
:func:`item_span`, a context variable that threads and the model call's deadline thread copy, so a model call
deep in a judge is tied to its item without being handed the id. Events are typed with the harness's base
models (the run record, the evaluator output, where an attempt's files go, its details row).
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from harness.base.attempts import AttemptDetails, RunLocation
from harness.base.models import EvaluatorOutput, RunRecord
from harness.base.usage import Spend, Usage

_SPAN: contextvars.ContextVar[str | None] = contextvars.ContextVar("harness_item", default=None)


@contextlib.contextmanager
def item_span(nodeid: str) -> Iterator[None]:
    """Everything emitted inside (on this thread, and on threads started with a copy of its context) belongs to
    the item ``nodeid``."""
    token = _SPAN.set(nodeid)
    try:
        yield
    finally:
        _SPAN.reset(token)


def current_span() -> str | None:
    """The item the running code works for, if any."""
    return _SPAN.get()


@dataclass(frozen=True)
class Event:
    at: float = field(default_factory=time.time, kw_only=True)  # seconds since the epoch
    span: str | None = field(default_factory=current_span, kw_only=True)  # the item it belongs to (a node id)


@dataclass(frozen=True)
class ItemStarted(Event):
    nodeid: str
    agent: str
    case_id: str
    max_attempts: int


@dataclass(frozen=True)
class AttemptStarted(Event):
    """An attempt begins; it is recorded as ``running`` before any work, so a crash leaves a trace."""

    nodeid: str
    attempt: int
    location: RunLocation  # where the item's files go
    rubric_version: str | None
    details: AttemptDetails  # what is known before the attempt runs
    created_at: str


@dataclass(frozen=True)
class ArtifactProduced(Event):
    nodeid: str
    attempt: int
    role: str  # producer or reviser
    text: str = field(repr=False)
    spend: Spend
    location: RunLocation | None = field(default=None, repr=False)

    @property
    def chars(self) -> int:
        return len(self.text)


@dataclass(frozen=True)
class Judged(Event):
    nodeid: str
    attempt: int
    score: float | None  # None: indeterminate
    passed: bool | None
    spend: Spend
    output: EvaluatorOutput | None = field(default=None, repr=False)
    location: RunLocation | None = field(default=None, repr=False)


@dataclass(frozen=True)
class Reviewed(Event):
    """A review rubric's ReviewResult for an attempt, before it is checked against the rubric's output schema."""

    nodeid: str
    attempt: int
    review: dict[str, Any] = field(repr=False)
    location: RunLocation | None = field(default=None, repr=False)


@dataclass(frozen=True)
class Generated(Event):
    """A structured generation's GenerationResult for an attempt (a skill's ``LLM_JSON_GENERATION``), as the
    generation contract writes it: ``attempt-{n}.generation.json``."""

    nodeid: str
    attempt: int
    result: dict[str, Any] = field(repr=False)
    location: RunLocation | None = field(default=None, repr=False)


@dataclass(frozen=True)
class AttemptFinished(Event):
    """One attempt is recorded: ``record`` is the run record, ``details`` what the record has no column for."""

    nodeid: str
    attempt: int
    outcome: str
    score: float | None
    spend: Spend
    record: RunRecord
    details: AttemptDetails
    location: RunLocation | None = field(default=None, repr=False)


@dataclass(frozen=True)
class ItemFinished(Event):
    nodeid: str
    outcome: str
    final_score: float | None
    attempts: int
    spend: Spend
    case_id: str = ""
    loop_result: dict[str, Any] = field(default_factory=dict, repr=False)  # the LoopResult contract's JSON
    location: RunLocation | None = field(default=None, repr=False)
    # what the item was given, as given: {inputs, expected (the reference answer), description}; None: not known
    case_data: dict[str, Any] | None = field(default=None, repr=False)


@dataclass(frozen=True)
class SkillInvoked(Event):
    """An execution begins (an item, or a phase of a construct): who runs it and what it was given, before its
    gates. ``inputs`` are as the capture settings keep them (hashed by default), never raw unless asked for."""

    nodeid: str
    skill_id: str          # the agent, skill or phase that runs
    version: str | None
    operator_type: str     # how it runs: the runner kind (python, command, prompt, ...), a skill's template type
    inputs: dict[str, Any] = field(default_factory=dict, repr=False)
    context_size: int = 0  # characters of input it was given
    attempt: int = 1
    phase: str | None = None


@dataclass(frozen=True)
class GateChecked(Event):
    """One assessment gate of an execution, checked: ``gate`` is the GateResult contract's JSON."""

    nodeid: str
    gate: dict[str, Any]
    attempt: int = 1
    phase: str | None = None
    remediation_attempted: bool = False  # a retry or revision follows the failure


@dataclass(frozen=True)
class ExecutionProgress(Event):
    """An execution moved on: a phase entered or left, artifacts made, side effects had."""

    nodeid: str
    phase_entered: str | None = None
    phase_exited: str | None = None
    artifacts_created: tuple[str, ...] = ()
    side_effects: tuple[dict[str, Any], ...] = ()


@dataclass(frozen=True)
class ExecutionCompleted(Event):
    """An execution ended: ``result`` is the execution result contract's JSON, as the capture settings keep it."""

    nodeid: str
    result: dict[str, Any] = field(repr=False)
    location: RunLocation | None = field(default=None, repr=False)
    phase: str | None = None


@dataclass(frozen=True)
class HandoffAttempted(Event):
    """One phase handed its artifacts to the next: ``handoff`` is the PhaseHandoff contract's JSON."""

    nodeid: str
    handoff: dict[str, Any] = field(repr=False)
    location: RunLocation | None = field(default=None, repr=False)


@dataclass(frozen=True)
class ModelCalled(Event):
    """One answer from a model: a live call (``cached`` False) or a replay from the response cache."""

    model: str
    usage: Usage
    cost_usd: float | None
    cached: bool
    batched: bool
    duration_ms: float


@dataclass(frozen=True)
class TournamentStep(Event):
    """A step of ``harness improve``: ``kind`` is e.g. ``iteration_started``, ``executor_finished``, ``merged``."""

    goal: str
    iteration: int
    kind: str
    detail: dict[str, Any] = field(default_factory=dict)


Sink = Callable[[Event], None]


class Events:
    """A stream that sinks subscribe to; thread-safe."""

    def __init__(self) -> None:
        self._sinks: tuple[Sink, ...] = ()
        self._required: frozenset[int] = frozenset()
        self._lock = threading.Lock()

    def subscribe(self, sink: Sink, *, required: bool = False) -> Callable[[], None]:
        """Add ``sink``; the function returned removes it. A ``required`` sink's errors reach the emitter."""
        with self._lock:
            self._sinks = (*self._sinks, sink)
            if required:
                self._required |= {id(sink)}
        return lambda: self.unsubscribe(sink)

    def unsubscribe(self, sink: Sink) -> None:
        with self._lock:
            self._sinks = tuple(s for s in self._sinks if s is not sink)
            self._required -= {id(sink)}

    def __bool__(self) -> bool:
        return bool(self._sinks)

    def emit(self, event: Event) -> None:
        for sink in self._sinks:  # a snapshot: subscribing while emitting is safe
            try:
                sink(event)
            except Exception as exc:  # noqa: BLE001 - an optional sink must never fail the run
                if id(sink) in self._required:
                    raise
                self.unsubscribe(sink)
                warnings.warn(f"harness: the event sink {getattr(sink, '__qualname__', sink)!r} raised "
                              f"{type(exc).__name__}: {exc}; it receives no more events", stacklevel=2)


