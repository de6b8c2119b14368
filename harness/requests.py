"""What the engine asks of a producer, a reviser and an evaluator, as typed requests.

The engine builds an :class:`AgentRequest` for a producer or a reviser, and the judges a :class:`JudgeRequest`
for an evaluator. A runner reads their fields (``request.inputs``, ``request.artifact``, ``request.rubric``);
``request.wire()`` is the JSON a ``command`` runner reads on stdin and a ``python`` runner's function receives,
and a request also reads like that JSON (``request["inputs"]``), so a runner written against the JSON works
unchanged::

    producer   {"role", "agent", "case", "attempt", "inputs"}
    reviser    ... plus "artifact", "evaluation" (EvaluatorOutput), "suggested_fixes"
    evaluator  ... plus "artifact", "dimensions" (the ids to score), "schema", "rubric", "rubric_text"
               and "sample" when the judge is sampled several times
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from harness.models import Rubric


@dataclass(frozen=True)
class Subject:
    """What an artifact answers: the agent, the case, the attempt and the case's inputs."""

    agent: str
    case: str
    attempt: int
    inputs: dict[str, Any]


class _ReadsLikeItsJson(Mapping[str, Any]):
    """A request read as a mapping is its wire JSON."""

    def wire(self) -> dict[str, Any]:
        raise NotImplementedError

    @cached_property
    def _wire(self) -> dict[str, Any]:
        return self.wire()

    def __getitem__(self, key: str) -> Any:
        return self._wire[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._wire)

    def __len__(self) -> int:
        return len(self._wire)


@dataclass(frozen=True, eq=False)
class AgentRequest(_ReadsLikeItsJson):
    """A producer's request (attempt 1) or a reviser's (every later attempt)."""

    role: str  # "producer" or "reviser"
    agent: str
    case: str
    attempt: int
    inputs: dict[str, Any]
    artifact: str | None = None  # the reviser's: the previous attempt's artifact
    evaluation: dict[str, Any] | None = None  # the reviser's: the previous attempt's EvaluatorOutput JSON
    suggested_fixes: tuple[str, ...] = ()

    def wire(self) -> dict[str, Any]:
        out = {"agent": self.agent, "case": self.case, "inputs": self.inputs, "role": self.role,
               "attempt": self.attempt}
        if self.role == "reviser":
            out.update(artifact=self.artifact, evaluation=self.evaluation,
                       suggested_fixes=list(self.suggested_fixes))
        return out


@dataclass(frozen=True, eq=False)
class JudgeRequest(_ReadsLikeItsJson):
    """An evaluator's request: score ``dimensions`` of ``artifact`` by ``rubric``, answering EvaluatorOutput
    JSON that validates against ``schema`` (treat ``schema`` as read-only: it is shared between calls)."""

    agent: str
    case: str
    attempt: int
    inputs: dict[str, Any]
    artifact: str
    rubric: Rubric
    dimensions: tuple[str, ...]
    schema: dict[str, Any] = field(repr=False)
    sample: int | None = None  # which of several samples this is; None when the judge is asked once
    role: str = "evaluator"

    @cached_property
    def rubric_text(self) -> str:
        """The judged dimensions as a judge reads them; built only when a runner asks for it."""
        return rubric_as_text(self.rubric, self.dimensions)

    def wire(self) -> dict[str, Any]:
        out = {"agent": self.agent, "case": self.case, "inputs": self.inputs, "role": self.role,
               "attempt": self.attempt, "artifact": self.artifact, "dimensions": list(self.dimensions),
               "schema": copy.deepcopy(self.schema),  # the runner may change its copy, never the shared one
               "rubric": self.rubric.model_dump(mode="json", include={"name", "version", "title", "threshold"}),
               "rubric_text": self.rubric_text}
        if self.sample is not None:
            out["sample"] = self.sample
        return out


def rubric_as_text(rubric: Rubric, dimension_ids: Sequence[str]) -> str:
    """The rubric's title and the given dimensions with their levels or pass/fail conditions, as a judge reads them."""
    lines = [f"# Rubric: {rubric.title} (version {rubric.version})"]
    if rubric.description:
        lines.append(rubric.description)
    for dim in rubric.dimensions:
        if dim.id not in dimension_ids:
            continue
        lines.append(f"\n## {dim.id} (weight {dim.weight:.2f})\n{dim.description}")
        if dim.binary:
            lines.append(f"- pass (score 1): {dim.pass_condition}\n- fail (score 0): {dim.fail_condition}")
        else:
            lines.extend(f"- {level:g}: {text}" for level, text in sorted(dim.scoring.items(), reverse=True))
    return "\n".join(lines)
