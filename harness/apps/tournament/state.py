"""The iteration state (``iteration_state.json``, seed 001 section 8) as typed models.

The state is rewritten after every step, so a run stopped anywhere resumes where it stopped; the JSON is
the contract with that resume, and with states written by earlier versions. Each part keeps fields it does
not know, and leaves an optional field out until it is set, exactly as the dicts it replaces did (the code
asks "was the decision taken?" by ``decision is None``, where it used to ask ``"decision" not in t``).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from harness.apps.tournament.models import Record

Step = Literal["research", "planning", "critic_review", "execution", "tournament", "recording", "stop_check"]


class RunInfo(Record):
    """Which run the iteration belongs to: its first iteration, the iterations asked, finished or not."""

    first_iteration: int
    iterations: int
    finished: bool = False


class ResearchStep(Record):
    OPTIONAL = frozenset({"skipped", "error", "cost"})

    status: Literal["pending", "in_progress", "completed", "failed"] = "pending"
    output_path: str | None = None
    completed_at: str | None = None
    skipped: str | None = None      # why there is no brief (no model access)
    error: str | None = None        # the failed model call
    cost: dict[str, Any] | None = None


class PlanEntry(Record):
    """One planner's (or user idea's) plan: where it is archived and the critic's verdict."""

    OPTIONAL = frozenset({"plan_id", "error", "cost"})

    status: str
    output_path: str | None = None
    critic_approved: bool | None = None
    plan_id: str | None = None
    error: str | None = None
    cost: dict[str, Any] | None = None  # a failed planner's calls (a plan that was made keeps its own cost)


class PlanningStep(Record):
    status: Literal["pending", "in_progress", "completed"] = "pending"
    plans: dict[str, PlanEntry] = {}   # by planner id
    approved_count: int = 0
    completed_at: str | None = None


class CriticStep(Record):
    status: str = "completed"
    completed_at: str | None = None


class BaselineRuns(Record):
    """The noise runs of the iteration's base commit."""

    commit: str
    samples: list[float]
    score: float
    spread: float
    sub_scores: dict[str, float]


class ExecutorEntry(Record):
    OPTIONAL = frozenset({"started_at", "completed_at", "cost"})

    status: Literal["pending", "running", "completed", "failed"] = "pending"
    plan_id: str
    output_path: str | None = None
    benchmark_score: float | None = None
    started_at: str | None = None
    completed_at: str | None = None
    cost: dict[str, Any] | None = None


class ExecutionStep(Record):
    OPTIONAL = frozenset({"baseline"})

    status: Literal["pending", "in_progress", "completed"] = "pending"
    executors: dict[str, ExecutorEntry] = {}   # by executor id
    completed_at: str | None = None
    baseline: BaselineRuns | None = None


class Decision(Record):
    """The confirmation of the tournament's winner: the interleaved pairs and the test that decided."""

    OPTIONAL = frozenset({"category", "gain", "min_effect", "spread", "test", "p_value", "ci_lower",
                          "baseline_median", "candidate_median", "baseline_samples", "candidate_samples", "pairs"})

    accepted: bool
    decided_by: str
    category: str | None = None     # a failure analysis category when the re-run failed
    gain: float | None = None
    min_effect: float | None = None
    spread: float | None = None
    test: str | None = None
    p_value: float | None = None
    ci_lower: float | None = None
    baseline_median: float | None = None
    candidate_median: float | None = None
    reason: str
    baseline_samples: list[float] | None = None
    candidate_samples: list[float] | None = None
    pairs: int | None = None


class PostMerge(Record):
    """The runs at the merge commit that confirm (or undo) the merge."""

    OPTIONAL = frozenset({"samples", "failed"})

    score: float | None = None
    sub_scores: dict[str, float] = {}
    samples: list[float] | None = None
    failed: str | None = None


class Winner(Record):
    """The tournament's winner, as the merge report names it."""

    executor_id: str
    branch: str
    hypothesis: str = ""
    plan_id: str
    score_before: float
    score_after: float | None = None
    sub_scores: dict[str, float] = {}
    commit: str | None = None


class Outcome(Record):
    """What the tournament decided: the merge report's status and reason."""

    OPTIONAL = frozenset({"re_benchmark_score", "merge_commit", "regressions_detected"})

    status: Literal["merged", "no_improvement", "no_winner", "all_rejected"]
    reason: str | None = None
    winner: Winner | None = None
    decision: Decision | None = None
    re_benchmark_score: float | None = None
    merge_commit: str | None = None
    regressions_detected: bool | None = None


class TournamentStep(Record):
    OPTIONAL = frozenset({"decision", "merge_commit", "post_merge", "revert_commit", "outcome"})

    status: Literal["pending", "in_progress", "completed"] = "pending"
    winner: str | None = None
    winner_score: float | None = None
    completed_at: str | None = None
    decision: Decision | None = None
    merge_commit: str | None = None
    post_merge: PostMerge | None = None
    revert_commit: str | None = None
    outcome: Outcome | None = None


class ArchivedBranch(Record):
    executor_id: str
    archive: str | None = None   # the archive branch, or None when the branch was deleted


class RecordingStep(Record):
    OPTIONAL = frozenset({"archived", "merge_report_path", "completed_at"})

    status: Literal["pending", "in_progress", "completed"] = "pending"
    history_path: str | None = None
    visualization_updated: bool = False
    cleanup_done: bool = False
    archived: list[ArchivedBranch] | None = None
    merge_report_path: str | None = None
    completed_at: str | None = None


class StopCheckStep(Record):
    events_written: bool = False


class IterationState(Record):
    """One iteration's progress; see the module's docstring."""

    OPTIONAL = frozenset({"run", "base_commit", "branch", "critic", "stop_check", "stop_reason"})

    iteration: int
    status: Literal["in_progress", "completed", "failed", "interrupted"] = "in_progress"
    current_step: Step = "research"
    started_at: str
    updated_at: str
    research: ResearchStep = Field(default_factory=ResearchStep)
    planning: PlanningStep = Field(default_factory=PlanningStep)
    execution: ExecutionStep = Field(default_factory=ExecutionStep)
    tournament: TournamentStep = Field(default_factory=TournamentStep)
    recording: RecordingStep = Field(default_factory=RecordingStep)
    user_ideas_consumed: list[str] = []
    run: RunInfo | None = None
    base_commit: str | None = None   # the current best commit the iteration started from
    branch: str | None = None        # the user's branch the winner is merged into
    critic: CriticStep | None = None
    stop_check: StopCheckStep | None = None
    stop_reason: str | None = None
