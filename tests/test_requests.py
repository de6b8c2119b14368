"""Typed requests: a runner reads fields, and the JSON a command runner reads is the same request."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.base.events import Events, ItemStarted
from harness.base.requests import AgentRequest, JudgeRequest
from harness.evaluation.evaluate import judge_schema
from harness.loading import load_rubric

RUBRIC = """\
metadata: {name: Tone, version: "1.0.0"}
threshold: 0.5
dimensions:
  warmth: {weight: 1.0, description: Is it warm?}
"""


def test_a_reviser_request_reads_like_the_json_a_command_runner_gets() -> None:
    request = AgentRequest("reviser", "writer", "greet", 2, {"name": "Ada"}, artifact="hi",
                           evaluation={"overallScore": 0.2}, suggested_fixes=("be warm",))
    assert request.wire() == {"agent": "writer", "case": "greet", "inputs": {"name": "Ada"}, "role": "reviser",
                              "attempt": 2, "artifact": "hi", "evaluation": {"overallScore": 0.2},
                              "suggested_fixes": ["be warm"]}
    assert request["suggested_fixes"] == ["be warm"] and dict(request) == request.wire()
    producer = AgentRequest("producer", "writer", "greet", 1, {"name": "Ada"})
    assert "artifact" not in producer and set(producer) == {"agent", "case", "inputs", "role", "attempt"}


def test_a_judge_request_carries_the_rubric_and_hands_runners_a_copy_of_the_schema(tmp_path: Path) -> None:
    path = tmp_path / "tone.yaml"
    path.write_text(RUBRIC)
    rubric = load_rubric(path, import_root=tmp_path)
    schema = judge_schema(rubric, ["warmth"])
    request = JudgeRequest(agent="writer", case="greet", attempt=1, inputs={}, artifact="hi", rubric=rubric,
                           dimensions=("warmth",), schema=schema, sample=2)
    wire = request.wire()
    assert wire["rubric"]["version"] == "1.0.0" and wire["rubric"]["threshold"] == 0.5
    assert wire["role"] == "evaluator" and wire["dimensions"] == ["warmth"] and wire["sample"] == 2
    wire["schema"]["required"].append("mine")  # a runner changing its JSON never changes the shared schema
    assert "mine" not in judge_schema(rubric, ["warmth"])["required"]
    assert request.rubric is rubric and wire["rubric_text"].startswith("# Rubric: ")
    assert "## warmth (weight 1.00)" in wire["rubric_text"]


def test_a_required_sink_fails_the_emitter_and_stays_subscribed() -> None:
    events = Events()

    def refuse(event: object) -> None:
        raise OSError("disk full")

    events.subscribe(refuse, required=True)
    with pytest.raises(OSError, match="disk full"):
        events.emit(ItemStarted("a", "agent", "case", 1))
    assert events  # still there: the next attempt must fail the same way, not pass unrecorded
