"""What the engine asks of a producer, a reviser and an evaluator, as typed requests.

The engine builds an :class:`AgentRequest` for a producer or a reviser, and the judges a :class:`JudgeRequest`
for an evaluator. A runner reads their fields (``request.inputs``, ``request.artifact``, ``request.rubric``);
``request.wire()`` is the JSON a ``command`` runner reads on stdin and a ``python`` runner's function receives,
and a request also reads like that JSON (``request["inputs"]``), so a runner written against the JSON works
unchanged::

    producer   {"role", "agent", "case", "attempt", "inputs"}, and "messages" on a conversation case
    reviser    ... plus "artifact", "evaluation" (EvaluatorOutput), "suggested_fixes"
    evaluator  ... plus "artifact", "dimensions" (the ids to score), "schema", "rubric", "rubric_text",
               "expected" when the case has a reference answer, and "sample" when the judge is sampled;
               on a conversation case "messages" (the conversation through the reply judged) and, when one
               reply is judged, "turn"

"messages" are chat messages as OpenAI and Hugging Face write them, ``[{"role": "system" | "user" |
"assistant", "content": "..."}]`` (docs/conversations.md).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from harness.base import slots
from harness.base.conversation import ChatMessage, Conversation
from harness.base.models import Dimension, PromptTemplate, Rubric


@dataclass(frozen=True)
class Subject:
    """What an artifact answers: the agent, the case, the attempt, the case's inputs and expected answer."""

    agent: str
    case: str
    attempt: int
    inputs: dict[str, Any]
    expected: Any = None
    conversation: Conversation | None = None  # a conversation case's: its turns and the agent's replies


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
    """A producer's request (attempt 1), a reviser's (every later attempt), or a pipeline stage's (``role``
    "stage": its ``inputs`` hold the case's inputs, ``context``, every earlier stage's output, and ``pipeline``, the
    run's facts; ``schema`` is the JSON Schema of the output it must answer with, when the stage declares one)."""

    role: str  # "producer", "reviser" or "stage"
    agent: str
    case: str
    attempt: int
    inputs: dict[str, Any]
    artifact: str | None = None  # the reviser's: the previous attempt's artifact
    evaluation: dict[str, Any] | None = None  # the reviser's: the previous attempt's EvaluatorOutput JSON
    suggested_fixes: tuple[str, ...] = ()
    schema: dict[str, Any] | None = field(default=None, repr=False)  # a stage's output type (treat as read-only)
    # a conversation case's producer: the conversation so far (the system prompt, the user's turns and the agent's
    # own replies), ending with the user turn to answer now
    messages: tuple[ChatMessage, ...] = ()

    def slot(self, name: str) -> Any:
        """What a producer's or reviser's template slot holds: the case's inputs (on a conversation, ``input`` is
        the user turn to answer), and for a reviser the previous ``output`` and the ``feedback`` on it (the
        evaluation's feedback and suggested fixes)."""
        if name == "input" and self.messages:
            return self.messages[-1].content
        if self.role == "reviser" and name == "output":
            return self.artifact or ""
        if self.role == "reviser" and name == "feedback":
            feedback = str((self.evaluation or {}).get("feedback", ""))
            return "\n".join([feedback, *(f"- {fix}" for fix in self.suggested_fixes)]).strip()
        return slots.case_value(name, self.inputs, None)

    def wire(self) -> dict[str, Any]:
        out = {"agent": self.agent, "case": self.case, "inputs": self.inputs, "role": self.role,
               "attempt": self.attempt}
        if self.role == "reviser":
            out.update(artifact=self.artifact, evaluation=self.evaluation,
                       suggested_fixes=list(self.suggested_fixes))
        if self.messages:
            out["messages"] = [message.wire() for message in self.messages]
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
    expected: Any = None  # the case's reference answer, when it has one (one reply judged: that turn's reference)
    conversation: Conversation | None = None  # a conversation case's: its turns and the agent's replies
    turn: int | None = None  # the turn whose reply ``artifact`` is (a ``per_turn`` dimension); None: the whole
    threshold: float | None = None  # the item's pass threshold (None: the rubric's)
    settled: float | None = None  # the weighted score the rest of the rubric (its checks) already gave

    @cached_property
    def rubric_text(self) -> str:
        """The judged dimensions as a judge reads them; built only when a runner asks for it."""
        return rubric_as_text(self.rubric, self.dimensions)

    def slot(self, name: str) -> Any:
        """What a judge template's slot holds: the case's slots, the ``output`` to judge, the ``transcript`` of a
        conversation through it (else the output), and the judged dimensions as ``criteria`` (a line each),
        ``rubric`` (with levels and steps) or ``steps``. On a conversation ``input`` is its user turns, or the
        turn the judged reply answers."""
        if name == "output":
            return self.artifact
        if name == "transcript":
            return self.artifact if self.conversation is None else self.conversation.transcript(self.turn)
        if name == "criteria":
            return criteria_text(self.rubric, self.dimensions)
        if name == "rubric":
            return self.rubric_text
        if name == "steps":
            return steps_text(self.rubric, self.dimensions)
        return slots.case_value(name, self.inputs, self.expected, input_text=self.input_text)

    @property
    def input_text(self) -> str | None:
        """A conversation's ``{input}``: the user turn the judged reply answers, or every user turn."""
        if self.conversation is None:
            return None
        return self.conversation.turns[self.turn - 1].user if self.turn else self.conversation.user_text

    def wire(self) -> dict[str, Any]:
        out = {"agent": self.agent, "case": self.case, "inputs": self.inputs, "role": self.role,
               "attempt": self.attempt, "artifact": self.artifact, "dimensions": list(self.dimensions),
               # the runner may change its copy, never the shared one (a JSON round trip copies ten times faster)
               "schema": json.loads(json.dumps(self.schema)),
               "rubric": self.rubric.model_dump(mode="json", include={"name", "version", "title", "threshold"}),
               "rubric_text": self.rubric_text}
        if self.expected is not None:
            out["expected"] = self.expected
        if self.sample is not None:
            out["sample"] = self.sample
        if self.conversation is not None:
            out["messages"] = [message.wire() for message in self.conversation.messages(self.turn)]
            if self.turn is not None:
                out["turn"] = self.turn
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
        lines.extend(dimension_levels(dim))
        if dim.steps:
            lines.append("Evaluation steps:")
            lines.extend(f"{number}. {step}" for number, step in enumerate(dim.steps, 1))
    return "\n".join(lines)


def dimension_levels(dim: Dimension) -> list[str]:
    """What the judge may answer for a dimension, one line each, and what each answer means."""
    if dim.binary:
        return [f"- pass (score 1): {dim.pass_condition}", f"- fail (score 0): {dim.fail_condition}"]
    if dim.scale is not None:
        low, high = dim.scale
        asked = (f"Answer a rating from {low} to {high} (a whole number)." if dim.step is None else
                 f"Answer a rating from {low} to {high} in steps of {dim.step:g} ({low:g}, {low + dim.step:g}, "
                 f"... {high:g}).")
        return ([asked]
                + [f"- {level:g}: {text}" for level, text in sorted(dim.scoring.items(), reverse=True)])
    if dim.choices:
        return ([f"Answer one of: {', '.join(dim.choices)}."]
                + [f"- {label}: {dim.choice_text[label]}" for label in dim.choices if label in dim.choice_text])
    lines = [f"- {level:g}: {text}" for level, text in sorted(dim.scoring.items(), reverse=True)]
    if dim.exhaustive:
        lines.insert(0, f"Answer one of these scores: {', '.join(f'{level:g}' for level in sorted(dim.scoring))}.")
    return lines


def criteria_text(rubric: Rubric, dimension_ids: Sequence[str]) -> str:
    """A template's ``{criteria}``: one ``name: description`` line per judged dimension, as published judge
    prompts write a criterion."""
    return "\n".join(f"{dim.name or dim.id}: {dim.description}" for dim in rubric.dimensions
                     if dim.id in dimension_ids)


def steps_text(rubric: Rubric, dimension_ids: Sequence[str]) -> str:
    """A template's ``{steps}``: the judged dimensions' evaluation steps, numbered."""
    steps = [step for dim in rubric.dimensions if dim.id in dimension_ids for step in dim.steps]
    return "\n".join(f"{number}. {step}" for number, step in enumerate(steps, 1))


def render_messages(template: PromptTemplate, request: AgentRequest | JudgeRequest, *,
                    input_text: str | None = None) -> tuple[ChatMessage, ...]:
    """A template's messages with their slots filled from the request: a chat template's each in its role, a text
    template as one user message. With ``input_text``, ``{input}`` holds it (a conversation's user turn)."""

    def lookup(name: str) -> Any:
        slot = template.slot_for(name)
        return input_text if input_text is not None and slot == "input" else request.slot(slot)

    if not template.messages:
        return (ChatMessage("user", slots.render_text(template.text, lookup)),)
    return tuple(ChatMessage(message.role, slots.render_text(message.content, lookup))
                 for message in template.messages)
