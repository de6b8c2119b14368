"""The OpenTelemetry exporter (``--harness-otel``): a span per item, a child span per model call with the GenAI
semantic conventions, the harness's attributes; one clear error where the extra is not installed."""

from __future__ import annotations

import textwrap
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

pytest.importorskip("opentelemetry.sdk.trace", reason="the otel extra (pip install 'pytest-rubric[otel]')")

from opentelemetry import trace  # noqa: E402
from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402
from opentelemetry.trace import SpanKind, StatusCode  # noqa: E402

from conftest import JUDGED_CASES, Project  # noqa: E402
from harness.base.events import (  # noqa: E402
    ExecutionCompleted,
    GateChecked,
    ItemFinished,
    ItemStarted,
    Judged,
    ModelCalled,
    SkillInvoked,
    item_span,
)
from harness.base.usage import Spend, Usage  # noqa: E402
from harness.records.otel import OtelSink  # noqa: E402


def sdk_provider() -> tuple[TracerProvider, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, exporter


def by_name(spans) -> dict:  # noqa: ANN001
    return {span.name: span for span in spans}


def test_an_item_is_a_span_and_its_model_calls_are_genai_child_spans() -> None:
    provider, exporter = sdk_provider()
    sink = OtelSink(provider)
    nodeid = "suites/w.cases.yaml::hello"
    sink(ItemStarted(nodeid, "writer", "hello", 2, at=100.0))
    sink(SkillInvoked(nodeid, "writer", "1.0.0", "python", {"text": "sha256:00"}, at=100.0))
    with item_span(nodeid):
        sink(ModelCalled("claude-haiku-4-5", Usage(120, 30, cache_read_tokens=80), 0.0004, False, False, 250.0,
                         at=101.0))
        sink(ModelCalled("openai/gpt-4.1-mini", Usage(10, 5), None, True, False, 1.0, at=101.5))
    sink(ModelCalled("mock/echo", Usage(1, 1), None, False, False, 1.0, at=101.6))  # outside any item
    sink(GateChecked(nodeid, {"gate": 4, "name": "goal", "passed": False}, at=102.0))
    sink(Judged(nodeid, 1, 0.4, False, Spend(), at=102.0))
    sink(ExecutionCompleted(nodeid, {"exit_code": 84, "status": "failure", "triage": "review_output",
                                     "execution_id": "e1"}, at=102.5))
    sink(ItemFinished(nodeid, "failed", 0.4, 1, Spend(), at=103.0))
    sink.close()
    spans = by_name(exporter.get_finished_spans())
    item, chat, cached, lone = (spans["harness.item writer"], spans["chat claude-haiku-4-5"],
                                spans["chat gpt-4.1-mini"], spans["chat echo"])
    assert item.attributes["harness.nodeid"] == nodeid and item.attributes["harness.exit_code"] == 84
    assert item.attributes["harness.outcome"] == "failed" and item.attributes["harness.skill_id"] == "writer"
    assert item.status.status_code == StatusCode.ERROR
    assert (item.start_time, item.end_time) == (100 * 10**9, 103 * 10**9)
    assert chat.parent.span_id == item.context.span_id and chat.context.trace_id == item.context.trace_id
    assert chat.kind == SpanKind.CLIENT
    assert dict(chat.attributes).items() >= {
        "gen_ai.operation.name": "chat", "gen_ai.provider.name": "anthropic", "gen_ai.system": "anthropic",
        "gen_ai.request.model": "claude-haiku-4-5", "gen_ai.usage.input_tokens": 200,
        "gen_ai.usage.output_tokens": 30, "gen_ai.usage.cache_read.input_tokens": 80, "harness.cost_usd": 0.0004,
        "harness.nodeid": nodeid}.items()
    assert (chat.start_time, chat.end_time) == (int(100.75 * 10**9), 101 * 10**9)
    assert cached.attributes["gen_ai.provider.name"] == "openai" and cached.attributes["harness.cached"] is True
    assert "harness.cost_usd" not in cached.attributes  # no price: no cost, never a guess
    assert lone.parent is None and lone.attributes["gen_ai.provider.name"] == "mock"
    events = {event.name: event for event in item.events}
    assert events["harness.gate"].attributes["harness.gate.passed"] is False
    assert events["gen_ai.evaluation.result"].attributes["gen_ai.evaluation.score.label"] == "fail"


def test_a_phase_is_a_child_span_and_spans_left_open_end_on_close() -> None:
    provider, exporter = sdk_provider()
    sink = OtelSink(provider)
    sink(ItemStarted("c::demo", "construct", "demo", 1, at=10.0))
    sink(SkillInvoked("c::demo", "discovery", None, "prompt", phase="discovery", at=10.0))
    sink(ExecutionCompleted("c::demo", {"exit_code": 80, "status": "blocked"}, phase="discovery", at=11.0))
    sink(ItemStarted("c::other", "construct", "other", 1))
    sink.close()  # the session stopped before c::demo and c::other finished
    spans = exporter.get_finished_spans()
    (phase,) = [span for span in spans if span.name == "harness.phase discovery"]
    (item,) = [span for span in spans if span.attributes.get("harness.case_id") == "demo"]
    assert phase.parent.span_id == item.context.span_id
    assert phase.attributes["harness.exit_code"] == 80 and phase.status.status_code == StatusCode.ERROR
    assert item.attributes["harness.outcome"] == "interrupted"


@pytest.fixture(scope="module")
def process_exporter() -> Iterator[InMemorySpanExporter]:
    """The process's tracer provider, as a conftest or ``opentelemetry-instrument`` sets one: the harness sends
    its spans there."""
    exporter = InMemorySpanExporter()
    current = trace.get_tracer_provider()
    if not isinstance(current, TracerProvider):
        current = TracerProvider()
        trace.set_tracer_provider(current)
    current.add_span_processor(SimpleSpanProcessor(exporter))
    yield exporter
    exporter.shutdown()


def test_a_run_with_harness_otel_exports_its_items_and_model_calls(project: Project,
                                                                  process_exporter: InMemorySpanExporter) -> None:
    process_exporter.clear()
    project.judged(JUDGED_CASES + '  - id: second\n    inputs: {text: "hello again, shall we talk on Monday?"}\n')
    project.run("suites/", "--harness-judge-model", "mock/score-0.9", "--harness-cache", "off",
                "--harness-otel").assert_outcomes(passed=2)
    spans = process_exporter.get_finished_spans()
    items = {span.attributes["harness.case_id"]: span for span in spans if span.name.startswith("harness.item")}
    calls = [span for span in spans if span.name == "chat score-0.9"]
    assert set(items) == {"warm-hello", "second"} and len(calls) == 2
    for span in items.values():
        assert span.attributes["harness.outcome"] == "passed" and span.attributes["harness.exit_code"] == 0
        assert span.status.status_code == StatusCode.OK
    assert {call.parent.span_id for call in calls} == {span.context.span_id for span in items.values()}
    assert all(call.attributes["gen_ai.provider.name"] == "mock" for call in calls)

    process_exporter.clear()
    project.run("suites/", "--harness-judge-model", "mock/score-0.9").assert_outcomes(passed=2)
    assert process_exporter.get_finished_spans() == ()  # off unless asked for


class _Collector(BaseHTTPRequestHandler):
    received: list[tuple[str, int]] = []

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        length = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(length)
        _Collector.received.append((self.path, length))
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


def test_without_a_provider_spans_go_over_otlp_http_to_the_standard_endpoint(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("opentelemetry.exporter.otlp.proto.http.trace_exporter")
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Collector)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", f"http://127.0.0.1:{server.server_address[1]}")
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    monkeypatch.setattr("harness.records.otel._configured_provider", lambda trace_api: None)
    _Collector.received.clear()
    try:
        sink = OtelSink()
        sink(ItemStarted("x::a", "writer", "a", 1))
        sink(ItemFinished("x::a", "passed", 1.0, 1, Spend()))
        sink.close()  # flushes the batch
    finally:
        server.shutdown()
    assert [path for path, _ in _Collector.received] == ["/v1/traces"]
    assert _Collector.received[0][1] > 0


def test_without_the_extra_asking_for_spans_is_one_clear_error(project: Project) -> None:
    project.judged()
    project.write("conftest.py", textwrap.dedent('''
        import sys


        class HideOpenTelemetry:
            """As if the otel extra were not installed."""

            def find_spec(self, name, path=None, target=None):
                if name.startswith(("opentelemetry.sdk", "opentelemetry.exporter")):
                    raise ModuleNotFoundError(f"No module named {name!r}", name=name)
                return None


        sys.meta_path.insert(0, HideOpenTelemetry())
    '''))
    result = project.run("suites/", "--harness-otel", subprocess=True)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    error = result.stderr.str()
    assert "--harness-otel: the OpenTelemetry exporter is not installed" in error
    assert "pip install 'pytest-rubric[otel]'" in error and "Traceback" not in error
