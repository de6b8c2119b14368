"""The event stream as OpenTelemetry spans, for the observability stack a team already runs (``--harness-otel``).

One span per item (``ItemStarted`` to ``ItemFinished``) with the harness's attributes (``harness.nodeid``,
``harness.exit_code``, ``harness.outcome``, ...); a child span per construct phase (``SkillInvoked`` to
``ExecutionCompleted`` of that phase); a child span per model call with the GenAI semantic conventions
(``chat {model}``; ``gen_ai.operation.name``, ``gen_ai.provider.name`` and the older ``gen_ai.system``,
``gen_ai.request.model``, ``gen_ai.usage.input_tokens``, ``gen_ai.usage.output_tokens``); the gates, the
judge's verdicts (``gen_ai.evaluation.result``) and the handoffs as span events. Spans carry no input, output or
artifact text.

Spans go to the tracer provider given; else to the one the process already set (a conftest's, or
``opentelemetry-instrument``'s); else to a provider of our own exporting OTLP over HTTP, configured by the
standard ``OTEL_EXPORTER_OTLP_ENDPOINT`` (``OTEL_SERVICE_NAME`` names the service, ``pytest-rubric`` by default).
The SDK is an optional extra (``pip install 'pytest-rubric[otel]'``), imported only here and only when asked.
"""

from __future__ import annotations

import importlib.util
import os
import threading
from typing import Any

from harness import __version__
from harness.base.events import (
    AttemptFinished,
    AttemptStarted,
    Event,
    ExecutionCompleted,
    GateChecked,
    HandoffAttempted,
    ItemFinished,
    ItemStarted,
    Judged,
    ModelCalled,
    SkillInvoked,
)
from harness.base.models import split_model

EXTRA = "pip install 'pytest-rubric[otel]'"
REQUIRED_MODULES = ("opentelemetry.sdk.trace", "opentelemetry.exporter.otlp.proto.http.trace_exporter")
# our provider names -> the GenAI conventions' well-known values (others pass through as they are)
PROVIDER_NAMES = {"anthropic": "anthropic", "openai": "openai"}
_NS = 1_000_000_000


def otel_problem() -> str | None:
    """Why spans cannot be exported here (the extra is not installed), or None."""
    for name in REQUIRED_MODULES:
        try:
            found = importlib.util.find_spec(name)
        except ModuleNotFoundError:
            found = None
        if found is None:
            return (f"the OpenTelemetry exporter is not installed (no module {name}) (fix: {EXTRA}, or leave "
                    "--harness-otel and ini harness_otel off)")
    return None


def _ns(at: float) -> int:
    return int(at * _NS)


class OtelSink:
    """A sink of the event stream that turns items, phases and model calls into spans; thread-safe.

    ``tracer_provider``: where spans go (default: the process's SDK provider, else our own OTLP/HTTP exporter).
    :meth:`close` ends spans still open (a stopped session) and flushes the provider it made."""

    def __init__(self, tracer_provider: Any = None):
        from opentelemetry import trace

        self._trace = trace
        self._owned = None
        if tracer_provider is None:
            tracer_provider = _configured_provider(trace)
        if tracer_provider is None:
            tracer_provider = self._owned = _otlp_provider()
        self._tracer = tracer_provider.get_tracer("pytest-rubric", __version__)
        self._items: dict[str, Any] = {}  # nodeid -> its open span
        self._phases: dict[tuple[str, str], Any] = {}  # (nodeid, phase) -> its open span
        self._rubrics: dict[str, str] = {}  # nodeid -> the rubric that judges it
        self._lock = threading.Lock()

    def __call__(self, event: Event) -> None:
        handle = self._handlers.get(type(event))
        if handle is not None:
            handle(self, event)

    # --- items and phases --------------------------------------------------------------------------------

    def _item_started(self, event: ItemStarted) -> None:
        span = self._tracer.start_span(f"harness.item {event.agent}", start_time=_ns(event.at), attributes={
            "harness.nodeid": event.nodeid, "harness.agent": event.agent, "harness.case_id": event.case_id,
            "harness.max_attempts": event.max_attempts})
        with self._lock:
            self._items[event.nodeid] = span

    def _item_finished(self, event: ItemFinished) -> None:
        with self._lock:
            span = self._items.pop(event.nodeid, None)
            self._rubrics.pop(event.nodeid, None)
        if span is None:
            return
        span.set_attribute("harness.outcome", event.outcome)
        span.set_attribute("harness.attempts", event.attempts)
        if event.final_score is not None:
            span.set_attribute("harness.score", event.final_score)
        if event.spend.cost_usd is not None:
            span.set_attribute("harness.cost_usd", event.spend.cost_usd)
        self._status(span, event.outcome)
        span.end(end_time=_ns(event.at))

    def _attempt_started(self, event: AttemptStarted) -> None:
        with self._lock:
            self._rubrics[event.nodeid] = event.details.rubric_name
            span = self._items.get(event.nodeid)
        if span is not None:
            span.add_event("harness.attempt_started", {"harness.attempt": event.attempt}, timestamp=_ns(event.at))

    def _attempt_finished(self, event: AttemptFinished) -> None:
        span = self._item(event.nodeid)
        if span is not None:  # the last attempt's code, unless the execution result says otherwise
            span.set_attribute("harness.exit_code", event.details.exit_code)

    def _invoked(self, event: SkillInvoked) -> None:
        attributes = {"harness.nodeid": event.nodeid, "harness.skill_id": event.skill_id,
                      "harness.operator_type": event.operator_type}
        if event.version:
            attributes["harness.skill_version"] = event.version
        if event.phase is None:  # the item's own execution: the item span says who ran it
            span = self._item(event.nodeid)
            if span is not None:
                span.set_attributes(attributes)
            return
        parent = self._item(event.nodeid)
        context = self._trace.set_span_in_context(parent) if parent is not None else None
        span = self._tracer.start_span(f"harness.phase {event.phase}", context=context, start_time=_ns(event.at),
                                       attributes={**attributes, "harness.phase": event.phase})
        with self._lock:
            self._phases[event.nodeid, event.phase] = span

    def _completed(self, event: ExecutionCompleted) -> None:
        result = event.result
        with self._lock:
            span = (self._phases.pop((event.nodeid, event.phase), None) if event.phase is not None
                    else self._items.get(event.nodeid))
        if span is None:
            return
        for key in ("exit_code", "status", "triage", "execution_id"):
            if result.get(key) is not None:
                span.set_attribute(f"harness.{key}", result[key])
        if event.phase is not None:
            self._status(span, "passed" if result.get("exit_code") == 0 else str(result.get("status")))
            span.end(end_time=_ns(event.at))

    def _gate(self, event: GateChecked) -> None:
        span = self._execution_span(event.nodeid, event.phase)
        if span is not None:
            gate = event.gate
            span.add_event("harness.gate", {"harness.gate": gate.get("gate", -1), "harness.gate.name":
                                            str(gate.get("name")), "harness.gate.passed": bool(gate.get("passed")),
                                            "harness.attempt": event.attempt}, timestamp=_ns(event.at))

    def _handoff(self, event: HandoffAttempted) -> None:
        span = self._item(event.nodeid)
        if span is not None:
            handoff = event.handoff
            attributes = {"harness.from_phase": str(handoff.get("from_phase")),
                          "harness.to_phase": str(handoff.get("to_phase")),
                          "harness.accepted": bool(handoff.get("accepted"))}
            if handoff.get("rejection_reason"):
                attributes["harness.rejection_reason"] = str(handoff["rejection_reason"])
            span.add_event("harness.handoff", attributes, timestamp=_ns(event.at))

    def _judged(self, event: Judged) -> None:
        span = self._item(event.nodeid)
        if span is None:
            return
        attributes: dict[str, Any] = {"gen_ai.evaluation.name": self._rubrics.get(event.nodeid, "rubric"),
                                      "harness.attempt": event.attempt}
        if event.score is not None:
            attributes["gen_ai.evaluation.score.value"] = event.score
        if event.passed is not None:
            attributes["gen_ai.evaluation.score.label"] = "pass" if event.passed else "fail"
        span.add_event("gen_ai.evaluation.result", attributes, timestamp=_ns(event.at))

    # --- model calls -------------------------------------------------------------------------------------

    def _model_called(self, event: ModelCalled) -> None:
        provider, model = split_model(event.model)
        parent = self._item(event.span) if event.span else None
        context = self._trace.set_span_in_context(parent) if parent is not None else None
        usage = event.usage
        start = event.at - event.duration_ms / 1000
        provider_name = PROVIDER_NAMES.get(provider, provider)
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "chat", "gen_ai.provider.name": provider_name, "gen_ai.system": provider_name,
            "gen_ai.request.model": model,
            # the conventions count cached input in the input tokens, and name the cached part separately
            "gen_ai.usage.input_tokens": usage.input_tokens + usage.cache_write_tokens + usage.cache_read_tokens,
            "gen_ai.usage.output_tokens": usage.output_tokens,
            "gen_ai.usage.cache_creation.input_tokens": usage.cache_write_tokens,
            "gen_ai.usage.cache_read.input_tokens": usage.cache_read_tokens,
            "harness.cached": event.cached, "harness.batched": event.batched,
        }
        if event.cost_usd is not None:
            attributes["harness.cost_usd"] = event.cost_usd
        if event.span:
            attributes["harness.nodeid"] = event.span
        span = self._tracer.start_span(f"chat {model}", context=context, kind=self._trace.SpanKind.CLIENT,
                                       start_time=_ns(start), attributes=attributes)
        span.end(end_time=_ns(event.at))

    # --- helpers -----------------------------------------------------------------------------------------

    def _item(self, nodeid: str | None) -> Any:
        with self._lock:
            return self._items.get(nodeid) if nodeid else None

    def _execution_span(self, nodeid: str, phase: str | None) -> Any:
        with self._lock:
            return self._phases.get((nodeid, phase)) if phase is not None else self._items.get(nodeid)

    def _status(self, span: Any, outcome: str) -> None:
        from opentelemetry.trace import Status, StatusCode

        if outcome in ("passed", "success"):
            span.set_status(Status(StatusCode.OK))
        else:
            span.set_status(Status(StatusCode.ERROR, outcome))

    def close(self) -> None:
        """End the spans still open (the session stopped before their items finished), then flush."""
        with self._lock:
            still_open = [*self._phases.values(), *self._items.values()]
            self._phases.clear()
            self._items.clear()
        for span in still_open:
            span.set_attribute("harness.outcome", "interrupted")
            self._status(span, "interrupted")
            span.end()
        if self._owned is not None:
            self._owned.shutdown()  # flushes the batch of spans not yet exported

    _handlers = {ItemStarted: _item_started, ItemFinished: _item_finished, AttemptStarted: _attempt_started,
                 AttemptFinished: _attempt_finished, SkillInvoked: _invoked, ExecutionCompleted: _completed,
                 GateChecked: _gate, HandoffAttempted: _handoff, Judged: _judged, ModelCalled: _model_called}


def _configured_provider(trace: Any) -> Any:
    """The SDK tracer provider this process already set, if any (the API's default is a proxy that drops spans)."""
    from opentelemetry.sdk.trace import TracerProvider

    provider = trace.get_tracer_provider()
    return provider if isinstance(provider, TracerProvider) else None


def _otlp_provider() -> Any:
    """A provider of our own: spans batched and exported over OTLP/HTTP where the standard variables say."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    attributes = {"service.version": __version__}
    named = os.environ.get("OTEL_SERVICE_NAME") or "service.name=" in os.environ.get("OTEL_RESOURCE_ATTRIBUTES", "")
    if not named:  # else the standard variables name it
        attributes["service.name"] = "pytest-rubric"
    resource = Resource.create(attributes)
    provider = TracerProvider(resource=resource)
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    return provider
