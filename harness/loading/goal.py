"""The typed, frozen model of a goal (``goals/<slug>/goal.md``): its metric, benchmark, sandbox, phases,
agents, stop conditions and acceptance rules. ``goal_file`` reads goal.md into it."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Metric(_Frozen):
    name: str
    direction: Literal["maximize", "minimize"]

    def better(self, a: float, b: float) -> float:
        """How much ``a`` is better than ``b`` (positive: better) in the metric's direction."""
        return a - b if self.direction == "maximize" else b - a

    def gain(self, value: float) -> float:
        """A score in gain units: larger is better, whatever the direction."""
        return value if self.direction == "maximize" else -value


class BenchmarkSpec(_Frozen):
    """The sealed benchmark: two commands that never share a process (docs/tournament.md, the threat model).

    ``command`` is the measured run: the candidate's code runs in it, so nothing it writes is a score; it gets
    no result channel, and the harness measures it from outside (CPU time from ``wait4``, wall time from the
    parent). ``check`` comes from the sealed files alone and runs in a process of its own that never sees the
    candidate's worktree: it reads the run's stdout and writes the result (score and sub-scores) to the
    channel the harness opens for it. Both get the same fresh challenge (``HARNESS_CHALLENGE``) per run.
    """

    command: str
    check: str | None = None
    timeout_s: float = 300.0
    # how the check's result is read
    parse: Literal["json", "regex"] = "json"
    score_key: str = "score"
    sub_scores_key: str = "sub_scores"
    score_regex: str | None = None
    sub_score_regexes: tuple[tuple[str, str], ...] = ()
    # where the check's result is read: the channel only the check holds (HARNESS_RESULT_FILE), or its stdout
    result: Literal["channel", "stdout"] = "channel"
    # the score: the check's result, or the time the run took, measured by the harness from outside
    score_from: Literal["output", "cpu_time", "wall_time"] = "output"
    held_back: str | None = None  # a folder only the winner's confirmation runs see (HARNESS_HELD_BACK)

    @property
    def measured(self) -> bool:
        """The score is the harness's own measurement of the run, not anything a process reports."""
        return self.score_from != "output"


class SandboxSpec(_Frozen):
    """What the goal's commands may reach beyond the sandbox's defaults (docs/tournament.md); a bound left
    out is the sandbox's default (``harness.sandbox.Limits``)."""

    env: tuple[str, ...] = ()          # variable names passed through to benchmarks and executors
    read: tuple[str, ...] = ()         # extra read-only paths (relative to the project root, or absolute)
    write: tuple[str, ...] = ()        # extra writable paths
    executor_network: bool = False     # executors may reach the network (a coding agent's API); benchmarks never
    memory_mb: int | None = None       # memory of the whole run: every process and its private /tmp
    processes: int | None = None       # processes (and threads) at once
    tmp_mb: int | None = None          # the private /tmp, $HOME and /dev/shm
    disk_mb: int | None = None         # how much the writable folders may grow during a run
    output_kb: int | None = None       # kept of stdout and of stderr each (a head and a tail)

    def bounds(self) -> dict[str, int]:
        """The bounds the goal sets, by their ``Limits`` names."""
        given = {"memory_mb": self.memory_mb, "processes": self.processes, "tmp_mb": self.tmp_mb,
                 "disk_mb": self.disk_mb, "output_kb": self.output_kb}
        return {name: value for name, value in given.items() if value is not None}


class PhaseTarget(_Frozen):
    sub_score: str
    op: Literal[">=", "<=", ">", "<", "=="]
    value: float

    def met(self, sub_scores: dict[str, float]) -> bool:
        got = sub_scores.get(self.sub_score)
        if got is None:
            return False
        return {">=": got >= self.value, "<=": got <= self.value, ">": got > self.value,
                "<": got < self.value, "==": got == self.value}[self.op]

    def __str__(self) -> str:
        return f"{self.sub_score} {self.op} {self.value:g}"


class Phase(_Frozen):
    phase: str
    focus: str
    targets: tuple[PhaseTarget, ...]
    status: Literal["active", "pending", "completed"]

    def unmet(self, sub_scores: dict[str, float]) -> list[PhaseTarget]:
        return [t for t in self.targets if not t.met(sub_scores)]


class AgentsSpec(_Frozen):
    planners: int = 2
    executors: int = 3
    architect_review: bool = True
    executor_command: str | None = None
    executor_max_steps: int = 25
    executor_timeout_s: float = 600.0
    model: str | None = None
    temperature: float = 0.7
    max_tokens: int = 4096


class StopConditions(_Frozen):
    max_iterations: int = 20
    target_score: float | None = None
    plateau_window: int = 3
    circuit_breaker: int = 3


class AcceptanceSpec(_Frozen):
    noise_runs: int = 5
    candidate_runs: int = 1
    confirm_pairs: int = 5
    min_effect: float = 2.0
    significance: Literal["mann_whitney", "bootstrap"] = "mann_whitney"
    alpha: float = 0.05
    post_merge_runs: int = 3
    regression_tolerance: float = 0.10
    gate_tolerance: float = 0.10
    # what the goal declares plausible: a score past these is not merged (nor recorded as the baseline)
    # without the user's approval (harness.apps.tournament.plausibility)
    plausible_best: float | None = None     # no real score is better than this
    plausible_factor: float | None = None   # no real gain makes the score this many times better than the baseline
    zero_plausible: bool = False            # an output score of exactly 0 can be real (never a measured time)


class Goal(_Frozen):
    path: Path
    slug: str
    title: str
    objective: str
    metric: Metric
    benchmark: BenchmarkSpec
    sealed_paths: tuple[str, ...]
    phases: tuple[Phase, ...] = ()
    families: tuple[tuple[str, str], ...] = ()
    custom_families: tuple[str, ...] = ()
    agents: AgentsSpec = AgentsSpec()
    stop: StopConditions = StopConditions()
    acceptance: AcceptanceSpec = AcceptanceSpec()
    sandbox: SandboxSpec = SandboxSpec()
    family_streak: int = 3

    @property
    def goal_dir(self) -> Path:
        return self.path.parent

    @property
    def family_tags(self) -> list[str]:
        return [tag for tag, _ in self.families]

    def phase(self, name: str | None) -> Phase | None:
        """The phase called ``name``, else the one marked active in goal.md."""
        for p in self.phases:
            if p.phase == name:
                return p
        return next((p for p in self.phases if p.status == "active"), None)

    def next_phase(self, name: str) -> Phase | None:
        names = [p.phase for p in self.phases]
        if name in names and names.index(name) + 1 < len(names):
            return self.phases[names.index(name) + 1]
        return None
