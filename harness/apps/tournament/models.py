"""Typed shapes of the tournament records the loop reads fields from: plans, executor results, failure
analyses, the agent settings and the recorded baseline.

Each model reads and writes the JSON of its schema (``schemas/*.json``) unchanged: fields it does not declare
are kept as they are, and an optional field that was never set stays out of the JSON, as it did when these
records were plain dicts. The schemas stay the contract; the models are how the code reads it.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal, Self

from pydantic import (
    BaseModel,
    ConfigDict,
    PrivateAttr,
    SerializerFunctionWrapHandler,
    ValidationInfo,
    ValidatorFunctionWrapHandler,
    model_serializer,
    model_validator,
)

_FROM_JSON = {"from_json": True}  # the validation context of a record read from JSON


class Record(BaseModel):
    """A record, or a part of one. ``OPTIONAL`` names the fields that are left out of the JSON until they
    are set (assigning ``None`` counts as set: it is written as ``null``). A record read from JSON is written
    back with its keys in the order it had."""

    model_config = ConfigDict(extra="allow")
    OPTIONAL: ClassVar[frozenset[str]] = frozenset()
    _key_order: tuple[str, ...] = PrivateAttr(default=())

    @model_validator(mode="wrap")
    @classmethod
    def _remember_order(cls, data: Any, handler: ValidatorFunctionWrapHandler, info: ValidationInfo) -> Any:
        record = handler(data)
        if info.context == _FROM_JSON and isinstance(data, dict) and isinstance(record, Record):
            record._key_order = tuple(data)
        return record

    @model_serializer(mode="wrap")
    def _leave_out_unset(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        for name in self.OPTIONAL - self.model_fields_set:
            data.pop(name, None)
        if self._key_order:
            data = {**{k: data[k] for k in self._key_order if k in data}, **data}
        return data

    @classmethod
    def from_json(cls, data: Any) -> Self:
        return cls.model_validate(data, context=_FROM_JSON)

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json")


class Plan(Record):
    """A plan document (``plan``, ``plan_archive``); the critic, the agents and the executors take its JSON."""

    OPTIONAL = frozenset({"title", "critic_review", "architect_review", "diff", "source", "cost"})

    plan_id: str
    planner_id: str
    round: int
    title: str | None = None
    hypothesis: str
    approach_family: str
    critic_approved: bool = False
    critic_review: dict[str, Any] | None = None      # critic.review_round's checks, verdict and reasons
    architect_review: dict[str, Any] | None = None   # verdict, feedback, structural_concerns
    diff: str | None = None
    source: str | None = None
    cost: dict[str, Any] | None = None

    @property
    def rejection_reason(self) -> str | None:
        return (self.critic_review or {}).get("rejection_reason")

    @property
    def measurement_flags(self) -> list[str]:
        return list((self.critic_review or {}).get("measurement_flags") or [])


def architect_reviewed(review: dict[str, Any]) -> dict[str, Any]:
    """The architect's own review, as the plan keeps it: seed 001's fields and ``reviewed: true``."""
    return {**review, "reviewed": True}


def no_architect_review(why: str) -> dict[str, Any]:
    """The ``architect_review`` of a plan no architect reviewed, in seed 001's shape: ``verdict`` is
    ``approve`` (no architect stopped it; ``critic_approved`` is the plan's verdict), ``feedback`` says why
    none ran, and ``reviewed`` (the harness's addition) is false."""
    return {"verdict": "approve", "feedback": f"no architect review: {why}", "structural_concerns": [],
            "reviewed": False}


class FailureAnalysis(Record):
    """Why a candidate lost (seed 001, section 7)."""

    what: str
    why: str
    category: str
    lesson: str


class Measurement(Record):
    """Why a candidate is not merged unseen: what its change reaches into that the measurement depends on (the
    critic's flags) and its scores outside what the goal declares plausible; and whether the user approved it."""

    flags: list[str]
    approved: bool


class RegressionCheck(Record):
    """A candidate that measured worse than the noise allows, re-run in interleaved pairs with the baseline."""

    OPTIONAL = frozenset({"loss"})

    pairs: int
    baseline_samples: list[float]
    candidate_samples: list[float]
    allowed: float
    failed_side: Literal["baseline", "candidate"] | None = None
    loss: float | None = None
    regression: bool
    reason: str


ResultStatus = Literal["success", "regression", "error", "timeout"]


class ExecutorResult(Record):
    """One executor's benchmark result (``benchmark_result``)."""

    OPTIONAL = frozenset({"safety_guard", "cost", "blocked_commands", "measurement", "regression_check",
                          "benchmark_raw_dropped", "check_result"})

    executor_id: str
    plan_id: str
    benchmark_score: float | None = None
    benchmark_raw: str = ""                  # the last run's stdout, verbatim (head and tail past the bound)
    benchmark_raw_dropped: int | None = None  # characters of it left out of benchmark_raw's middle
    check_result: str | None = None          # that run's check's result (its channel, or its stdout)
    status: ResultStatus = "error"
    sub_scores: dict[str, float] = {}
    failure_analysis: FailureAnalysis | None = None
    timestamp: str
    branch: str
    commit: str | None = None
    samples: list[float] = []
    executor_kind: str
    safety_guard: dict[str, Any] | None = None       # SafetyGuard's record of the whole plan (seed 002)
    cost: dict[str, Any] | None = None
    blocked_commands: list[str] | None = None
    measurement: Measurement | None = None
    regression_check: RegressionCheck | None = None

    @property
    def score(self) -> float:
        """The score of a result that has one (every ``success``)."""
        if self.benchmark_score is None:
            raise ValueError(f"{self.executor_id} has no score ({self.status})")
        return self.benchmark_score


class ConsumedIdea(Record):
    idea: str
    round: int
    plan_id: str


class AgentSettings(Record):
    """``agent-settings.json``: the current phase, the agent counts last used and the ideas taken."""

    OPTIONAL = frozenset({"consumed_ideas"})

    goal_slug: str
    current_phase: str | None = None
    number_of_planners: int
    number_of_executors: int
    consumed_ideas: list[ConsumedIdea] | None = None


class BaselineRecord(Record):
    """``baseline.json``: the current best's score and spread (the pytest gate reads it)."""

    OPTIONAL = frozenset({"metric", "direction"})

    commit: str
    score: float
    sub_scores: dict[str, float]
    goal_slug: str
    spread: float
    iteration: int
    timestamp: str
    metric: str | None = None
    direction: str | None = None
