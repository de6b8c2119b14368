"""Typed, frozen models of everything the harness reads and writes.

Loaders (``harness.loading``) turn files into these; nothing below the loader sees a raw dict.
The record models (``RunRecord``, ``EvaluatorOutput``) follow seed 000 sections 1 and 2 field for field.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_serializer

DEFAULT_THRESHOLD = 0.85  # seed 000 section 7: pass_threshold when no file sets one
# interrupted: the session ended (a kill, a crash) mid-attempt; the next session records it (records.reconcile)
Outcome = Literal["passed", "failed", "escalated", "indeterminate", "error", "validation_failed", "interrupted"]
RecordStatus = Literal["running", "passed", "failed", "escalated"]
Role = Literal["producer", "evaluator", "reviser"]


class Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)


# --- models (the LLMs) -------------------------------------------------------------------------

DEFAULT_PROVIDER = "anthropic"
STRUCTURED_OUTPUT = ("tools", "json_schema")


@dataclass(frozen=True)
class ModelSettings:
    """How to call one model: ``model`` is ``provider/name`` (``openai/gpt-4.1-mini``, ``mock/echo``), a bare
    name meaning ``anthropic``. ``max_retries`` is the SDK's own retry budget per request.

    ``base_url`` and ``api_key_env`` (the NAME of the variable holding the key: a key is never written in a
    file) override the provider's defaults, e.g. a vLLM server. ``structured_output`` is how a JSON answer is
    asked for: a forced tool call (``tools``), or the server's JSON Schema response format (``json_schema``)
    for servers without tool calling.

    ``temperature`` is recorded, and sent where the provider accepts it: Anthropic's API version 2026-10-21,
    which anthropic SDK 2.x sends, rejects ``temperature``/``top_p``/``top_k`` with a 400 on every model.
    ``top_p`` is the same: recorded (and in the response cache's key), sent to OpenAI-compatible servers and the
    mock, never to Anthropic nor to OpenAI's reasoning models. ``stop`` (sequences that end the answer, not
    included in it: OpenAI's ``stop``, Anthropic's ``stop_sequences``; the mock cuts its answer at the first) and
    ``seed`` (OpenAI-compatible servers only) are the other generation settings (docs/model-calls.md).
    """

    model: str = "claude-sonnet-4-6"
    temperature: float = 0.0
    top_p: float | None = None
    stop: tuple[str, ...] = ()
    seed: int | None = None
    max_tokens: int = 4096
    timeout_s: float = 120.0
    max_retries: int = 2
    base_url: str | None = None
    api_key_env: str | None = None
    structured_output: str = "tools"
    # A judge ensemble (``judge: {models: [...]}``): these settings are then its first judge's and ``ensemble`` lists
    # them all. Not a constructor argument on purpose: ``dataclasses.replace(settings, model=M)`` (an evaluator's own
    # ``model:``, ``--harness-judge-model``) makes settings of the one model M, never an ensemble of M.
    ensemble: JudgeEnsemble | None = field(default=None, init=False, repr=False)
    cascade: JudgeCascade | None = field(default=None, init=False, repr=False)  # ``judge: {cascade: ...}``, the same

    @property
    def provider(self) -> str:
        """The provider part of ``model`` (``anthropic`` for a bare name)."""
        return split_model(self.model)[0]

    @property
    def name(self) -> str:
        """The model as its provider knows it (``gpt-4.1-mini``)."""
        return split_model(self.model)[1]

    @property
    def qualified(self) -> str:
        """How records and prices name the model: the bare name for Anthropic (as before providers existed),
        ``provider/name`` for every other provider."""
        return qualified_model(*split_model(self.model))


JUDGE_AGGREGATES = ("majority", "mean", "min", "median")


@dataclass(frozen=True)
class JudgeEnsemble:
    """Several judge models asked the same question (``judge: {models: [...], aggregate: ...}``); per dimension
    their scores are combined by ``aggregate`` (docs/model-calls.md, "Judge ensembles"). ``common`` is what every
    judge shares unless its own entry says otherwise: the level an agent's ``judge:`` section is read over."""

    judges: tuple[ModelSettings, ...]
    aggregate: str = "mean"
    common: ModelSettings = ModelSettings()

    @property
    def names(self) -> tuple[str, ...]:
        """Each judge as records name it (``openai/gpt-4.1``; a bare name for Anthropic)."""
        return tuple(judge.qualified for judge in self.judges)

    def settings(self) -> ModelSettings:
        """The settings that stand for the ensemble: its first judge's, carrying the ensemble."""
        lead = replace(self.judges[0])
        object.__setattr__(lead, "ensemble", self)
        return lead


@dataclass(frozen=True)
class JudgeCascade:
    """A cheap judge asked first (``judge: {cascade: {first: M, escalate_when: {margin: 0.1}}}``); the named judge is
    asked only when its answer is uncertain: the item's score within ``margin`` of the threshold, a dimension within
    it of its ``min_score``, a dimension it could not judge, or no valid answer (docs/model-calls.md)."""

    first: ModelSettings
    margin: float = 0.1

    def over(self, judge: ModelSettings) -> ModelSettings:
        """``judge``'s settings, carrying this cascade in front of it."""
        named = replace(judge)
        object.__setattr__(named, "cascade", self)
        return named


def split_model(model: str) -> tuple[str, str]:
    """``("openai", "gpt-4.1-mini")`` from ``openai/gpt-4.1-mini``; a bare name is Anthropic's."""
    provider, sep, name = model.partition("/")
    return (provider, name) if sep and provider and name else (DEFAULT_PROVIDER, model)


def qualified_model(provider: str, name: str) -> str:
    return name if provider == DEFAULT_PROVIDER else f"{provider}/{name}"


# --- rubrics -----------------------------------------------------------------------------------


class Dimension(Frozen):
    """One scored dimension (seed 000) or criterion (seed 003) of a rubric."""

    id: str
    weight: float  # normalised: the weights of a rubric sum to 1.0
    description: str
    name: str | None = None
    scoring: dict[float, str] = Field(default_factory=dict)
    pass_condition: str | None = None
    fail_condition: str | None = None
    check: Any = None  # a harness.checks.Check; None means the LLM judge scores this dimension
    scale: tuple[int, int] | None = None  # the judge answers a whole-number rating in this range
    step: float | None = None  # ... or, with a step, a rating on it from the lowest (``step: 0.5``: 7.5)
    choices: dict[str, float] = Field(default_factory=dict)  # the judge answers one of these labels
    choice_text: dict[str, str] = Field(default_factory=dict)  # what each label means, where the rubric says
    exhaustive: bool = False  # the judge's score must be one of ``scoring``'s levels
    min_score: float | None = None  # a gate: below it the evaluation fails, whatever the weighted score
    steps: tuple[str, ...] = ()  # evaluation steps shown to the judge (G-Eval)
    transform: Any = None  # a harness.checks.transforms.Transform applied to the artifact before this dimension's check
    # a conversation's replies each scored, then combined by this reducer (``mean``, ``min``; harness.base.conversation)
    # instead of the whole transcript (docs/conversations.md)
    per_turn: str | None = None

    @property
    def judged(self) -> bool:
        return self.check is None

    @property
    def binary(self) -> bool:
        return self.pass_condition is not None

    def score_of(self, answer: dict[str, Any]) -> float:
        """A judge's answer for this dimension as a score from 0 to 1: a rating on the scale (its probability-weighted
        rating where the judge's answer has one: docs/material.md), a label's score, else the score as given (the
        answer was validated against the dimension's schema)."""
        if self.scale is not None:
            low, high = self.scale
            weighted = answer.get("weighted")
            rating = weighted.get("rating") if isinstance(weighted, dict) and weighted.get("used") else None
            if not (isinstance(rating, (int, float)) and not isinstance(rating, bool) and low <= rating <= high):
                rating = self.rating_value(answer["rating"])
            return (rating - low) / (high - low)
        if self.choices:
            return self.choices[answer["label"]]
        return float(answer["score"])

    def raw_answer(self, answer: dict[str, Any]) -> dict[str, Any]:
        """What the judge answered on the dimension's own scale (``rating`` or ``label``), for the record; with a
        probability-weighted rating, ``weighted`` too (whether it was used, and from what)."""
        if self.scale is not None:
            weighted = answer.get("weighted")
            return {"rating": self.rating_value(answer["rating"]),
                    **({"weighted": weighted} if isinstance(weighted, dict) else {})}
        if self.choices:
            return {"label": str(answer["label"])}
        return {}

    def rating_value(self, raw: Any) -> int | float:
        """A rating as the records keep it: a whole number as an int (8, not 8.0), else the number on the step."""
        value = round(float(raw), 9)
        return int(value) if value.is_integer() or self.step is None else value

    def rating_from_text(self, text: str) -> int | float | None:
        """The rating ``text`` writes (``8``, ``7.5``) when it is one on this dimension's scale and step, else None."""
        if self.scale is None or not re.fullmatch(r"[+-]?\d+" if self.step is None else r"[+-]?(\d+\.?\d*|\.\d+)",
                                                  text):
            return None
        value = float(text)
        return self.rating_value(value) if on_scale(value, *self.scale, self.step) else None

    @property
    def rating_words(self) -> str:
        """What a rating on this dimension is, in words: ``a whole-number rating from 1 to 10``."""
        assert self.scale is not None
        low, high = self.scale
        if self.step is None:
            return f"a whole-number rating from {low} to {high}"
        return f"a rating from {low} to {high} in steps of {self.step:g}"


def on_scale(value: float, low: float, high: float, step: float | None) -> bool:
    """Whether ``value`` is a rating from ``low`` to ``high``: a whole number, or with ``step``, ``low`` plus a whole
    number of steps (to a billionth: 0.1 + 0.2 is on a step of 0.1)."""
    if not low - 1e-9 <= value <= high + 1e-9:
        return False
    steps = (value - low) / (step or 1)
    return abs(steps - round(steps)) < 1e-6


def scale_ratings(low: int, high: int, step: float) -> list[int | float]:
    """Every rating of a stepped scale, lowest first (whole ones as ints)."""
    count = round((high - low) / step)
    values = (round(low + index * step, 9) for index in range(count + 1))
    return [int(value) if value.is_integer() else value for value in values]


def rating_schema(low: int, high: int, step: float | None = None) -> dict[str, Any]:
    """The JSON Schema of a rating: a whole number from ``low`` to ``high``, or with ``step`` one of the ratings on
    it (an ``enum``: JSON Schema's ``multipleOf`` fails 0.3 against 0.1 in floating point), the step said."""
    if step is None:
        return {"type": "integer", "minimum": low, "maximum": high}
    return {"type": "number", "minimum": low, "maximum": high, "enum": scale_ratings(low, high, step),
            "description": f"a rating from {low} to {high} in steps of {step:g}"}


class Examples(Frozen):
    """The rubric's calibration library (seed 000 section 8)."""

    gold: tuple[Path, ...] = ()
    anti_patterns: tuple[Path, ...] = ()
    inputs: dict[str, Any] = Field(default_factory=dict)
    expected: Any = None  # the examples' reference answer, for checks and judges that use {expected}


class ItemsSpec(Frozen):
    """Where a structured artifact keeps its items (a list path), and for a selector, each item's score."""

    path: tuple[str, ...]  # keys (or list indexes) from the document's root to the list
    score: str | None = None  # the field of each item that ranks it: margin_required compares the top two
    label: str | None = None  # the field that names an item in messages (else its position)


class Rubric(Frozen):
    name: str  # the file stem: what --rubric and agents.yaml refer to
    path: Path
    title: str
    version: str
    description: str | None = None
    agent: str | None = None
    updated: str | None = None
    threshold: float | None  # None only for a binary review rubric (every criterion must pass)
    scoring_mode: Literal["weighted", "binary"] = "weighted"
    dimensions: tuple[Dimension, ...]
    examples: Examples = Examples()
    items: ItemsSpec | None = None  # None: the artifact is one item
    rubric_id: str | None = None  # a review rubric's own id (seed 003), looked up with its version
    output_schema: dict[str, Any] | None = None  # a review rubric's schema for the structured review
    transform: Any = None  # a harness.checks.transforms.Transform: the artifact as checks and the judge score it
    variant: str = ""  # the case whose own criteria, checks or slots this copy of the rubric carries

    @property
    def judged_dimensions(self) -> tuple[Dimension, ...]:
        return tuple(d for d in self.dimensions if d.judged)

    def effective_threshold(self, fallback: float) -> float:
        if self.scoring_mode == "binary":
            return 1.0
        return self.threshold if self.threshold is not None else fallback


# --- agents, suites, cases ---------------------------------------------------------------------


class RunnerSpec(Frozen):
    """How one role of an agent runs: an LLM prompt, a Python callable, a command, or a plugin kind."""

    kind: str
    target: str  # prompt path, "module:function", or command line
    options: dict[str, Any] = Field(default_factory=dict)
    base_dir: Path  # relative paths in the spec resolve here (the agents.yaml folder)
    file: Path  # the agents.yaml that defines it, and the field, for error messages
    field: str


class PromptFile(Frozen):
    """A prompt with the required sections of seed 000 section 4."""

    path: Path
    title: str
    sections: dict[str, str]
    text: str


class TemplateMessage(Frozen):
    """One message of a chat template: who says it, and its text with ``{slots}``."""

    role: Literal["system", "user", "assistant"]
    content: str


class PromptTemplate(Frozen):
    """A prompt used as written (a published judge prompt, a promptfoo prompt), its ``{slots}`` filled per case.

    A text template (``.txt``, ``.md``) is one user message. A chat template (``.json``, ``.yaml``) is a list of
    ``messages``: a system message first if there is one, user and assistant messages after it, the last a user
    message (docs/material.md, "Chat templates"). ``text`` is then every message's content, a blank line between:
    what the template's slots are read from, so every rule about slots covers every message.

    ``names`` maps a name the template uses to the slot that fills it (``completion: output``); a name not in
    it is a slot of its own name (harness/base/slots.py says which slots there are)."""

    path: Path
    text: str
    names: dict[str, str] = Field(default_factory=dict)
    messages: tuple[TemplateMessage, ...] = ()  # a chat template's; empty: ``text`` is the one user message

    def slot_for(self, name: str) -> str:
        return self.names.get(name, name)

    @property
    def turn_text(self) -> str:
        """The message a model answers: a text template's text, a chat template's last (user) message."""
        return self.messages[-1].content if self.messages else self.text


class JudgeStyle(Frozen):
    """How the evaluator's model commits to a verdict: at once in the structured answer (the default); after
    reasoning in free text (``reasoning: first``, two calls); or in free text, the verdict parsed from it by a
    pattern (``verdict:``, one call)."""

    reasoning_first: bool = False
    verdict: re.Pattern[str] | None = None
    # ``score: weighted``: a rating is weighted by the probabilities of the ratings at its token (G-Eval), where the
    # provider returns log probabilities; else the plain rating, the record saying which (docs/material.md)
    weighted: bool = False


class LoopPolicy(Frozen):
    """Thresholds and escalation (seed 000 section 7), resolved for one agent."""

    threshold: float | None = None  # the agent's own; None: the rubric's, else the defaults'
    default_threshold: float | None = None  # defaults.pass_threshold: applies only where neither sets one
    max_attempts: int = 3
    # attempts that ended in an error whose exit code calls for a retry (1-3, 75) are run again this often
    max_retries: int = 0
    escalate_on_fail: bool = True
    margin_required: float = 0.0  # a selector's top candidate must beat the second by this much
    borderline_margin: float = 0.0  # a pass closer than this to the threshold goes to a human
    escalate_conditions: tuple[str, ...] = ()
    escalation_fails_gate: bool = True
    # the judge scores every attempt, even one the checks already decided: a score for every item (a comparison's
    # mean needs them), at the cost of those calls; off, a decided item is reported as having no score
    always_judge: bool = False

    def threshold_for(self, rubric: Rubric) -> float:
        """The agent's threshold, else the rubric's, else defaults.pass_threshold, else 0.85."""
        if rubric.scoring_mode == "binary":
            return 1.0
        for value in (self.threshold, rubric.threshold, self.default_threshold):
            if value is not None:
                return value
        return DEFAULT_THRESHOLD


class AgentConfig(Frozen):
    name: str
    rubric_path: Path
    producer: RunnerSpec
    evaluator: RunnerSpec | None = None
    reviser: RunnerSpec | None = None
    policy: LoopPolicy
    judge: ModelSettings
    # role -> the model of each prompt role: the judge's for the evaluator, `model:` (production) for the others
    models: dict[str, ModelSettings] = Field(default_factory=dict)
    prompts: dict[str, PromptFile] = Field(default_factory=dict)  # role -> validated prompt file
    templates: dict[str, PromptTemplate] = Field(default_factory=dict)  # role -> a prompt used as written
    judge_style: JudgeStyle = JudgeStyle()
    # ``variants:`` (docs/comparisons.md): the agent's variants, each an AgentConfig of its own settings; a variant
    # has its name and, per axis, the name of its value
    variants: tuple[AgentConfig, ...] = ()
    variant: str | None = None
    variant_settings: dict[str, str] = Field(default_factory=dict)


class SuiteConfig(Frozen):
    path: Path
    agents: dict[str, AgentConfig]


class Turn(Frozen):
    """One user turn of a conversation case (docs/conversations.md): what the user says, and the reference reply to
    it (the assistant message after it in the case or the dataset row), when there is one."""

    user: str
    expected: str | None = None


class Case(Frozen):
    id: str
    agent: str
    path: Path
    line: int  # 0-based, for reportinfo
    inputs: dict[str, Any] = Field(default_factory=dict)
    flags: tuple[str, ...] = ()
    today: dt.date | None = None  # pins "now" for date checks; None means UTC today
    description: str | None = None
    expected: Any = None  # the reference answer (a dataset's ``expected:`` or the case's own)
    criteria: tuple[Dimension, ...] = ()  # judged dimensions this case adds to its rubric
    checks: tuple[Dimension, ...] = ()  # check dimensions this case adds to its rubric
    selection: tuple[str, ...] = ()  # the agents or skills a router should choose here (the selection gate)
    # a conversation (docs/conversations.md): the user turns the producer answers one by one, and its system prompt
    turns: tuple[Turn, ...] = ()
    system: str | None = None


# --- records (seed 000 sections 1 and 2) -------------------------------------------------------


class DimensionScore(Frozen):
    score: float | None  # None: indeterminate (nobody could score it)
    weight: float
    reason: str
    # the judge's rating on the dimension's scale (``scale: [1, 10]``; 7.5 with ``step: 0.5``), when it has one
    rating: int | float | None = None
    label: str | None = None  # the judge's label (``choices:``), when it has them
    # ``score: weighted`` (docs/material.md): {"used": true, "rating": 3.4, "probabilities": {...}}, or
    # {"used": false, "why": ...} where the plain rating was taken
    weighted: dict[str, Any] | None = None

    @model_serializer(mode="wrap")
    def _without_unused_raw_answer(self, handler: Any) -> dict[str, Any]:
        """``rating``, ``label`` and ``weighted`` appear only on the dimensions that have them: the contract's three
        fields stay the whole entry everywhere else."""
        data = handler(self)
        for key in ("rating", "label", "weighted"):
            if data.get(key) is None:
                data.pop(key, None)
        return data


class EvaluatorOutput(Frozen):
    """Seed 000 section 2, as written to attempt-{n}.eval.json (camelCase on disk)."""

    overallScore: float | None
    passed: bool
    dimensionScores: dict[str, DimensionScore]
    feedback: str
    suggestedFixes: list[str]
    metadata: dict[str, Any] | None = None


class RunRecord(Frozen):
    """Seed 000 section 1, one per attempt, in run-log.json and the agent_runs table."""

    cycle_id: str
    agent_name: str
    attempt: int
    status: RecordStatus
    overall_score: float | None
    dimension_scores: dict[str, float | None]
    feedback: str
    suggested_fixes: list[str]
    artifact_path: str
    created_at: str
    duration_ms: int | None = None
    rubric_version: str | None = None
