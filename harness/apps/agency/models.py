"""The agent-pipeline document's typed outputs, one pydantic model per stage, with exactly its fields.

Each output names its ``agent`` (a literal) and the ``timestamp`` it ran at. Where the document names a type without
its fields (``Pattern``, ``GuideStep``, ``ImplementorAction``, ``Scorecard``, ``GatekeeperDecision``,
``CandidateLesson``), the fields are the harness's, written down in docs/contracts.md ("The agent pipeline").
"""

from __future__ import annotations

import datetime as dt
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

Domain = Literal["Dev", "QA", "Design", "DevOps"]
Owner = Literal["implementor", "qa", "design"]
ActionType = Literal["createFile", "editFile", "runCommand", "readFile"]


class Output(BaseModel):
    """What every stage's output shares: no field beyond its own, and when the agent ran."""

    model_config = ConfigDict(extra="forbid")

    timestamp: dt.datetime


class Pattern(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1)
    description: str
    confidence: float = Field(ge=0, le=1)


class GuideStep(BaseModel):
    model_config = ConfigDict(extra="forbid")

    step: int = Field(ge=1)
    action: str = Field(min_length=1)
    rationale: str


class PlannerTask(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str = Field(min_length=1)
    title: str = Field(min_length=1)
    description: str
    owner: Owner
    steps: list[str]
    definitionOfDone: list[str]
    dependencies: list[str]


class ImplementorAction(BaseModel):
    model_config = ConfigDict(extra="forbid")

    type: ActionType
    path: str | None = None  # createFile, editFile, readFile
    content: str | None = None  # createFile, editFile
    command: str | None = None  # runCommand
    description: str = ""


class ExecutedCommand(BaseModel):
    model_config = ConfigDict(extra="forbid")

    command: str
    success: bool
    output: str
    mockMode: bool


class Scorecard(BaseModel):
    """Each dimension 0-5."""

    model_config = ConfigDict(extra="forbid")

    correctness: int = Field(ge=0, le=5)
    verification: int = Field(ge=0, le=5)
    safety: int = Field(ge=0, le=5)
    clarity: int = Field(ge=0, le=5)
    autonomy: int = Field(ge=0, le=5)

    @property
    def total(self) -> int:
        return self.correctness + self.verification + self.safety + self.clarity + self.autonomy


class GatekeeperDecision(BaseModel):
    model_config = ConfigDict(extra="forbid")

    approved: bool  # the run is kept as a good example (totalScore at least 15)
    promote: bool  # the Learner moves up a permission level (totalScore at least 20)
    newLevel: int = Field(ge=0, le=3)
    allowCloning: bool  # the run may be reused as a template (totalScore at least 22)


class CandidateLesson(BaseModel):
    model_config = ConfigDict(extra="forbid")

    title: str = Field(min_length=1)
    content: str = Field(min_length=1)
    tags: list[str]
    confidence: float = Field(ge=0, le=1)


class ObserverOutput(Output):
    agent: Literal["Observer"]
    summary: str
    keywords: list[str] = Field(min_length=1)
    domain: Domain
    rawInput: str


class PatternObserverOutput(Output):
    agent: Literal["PatternObserver"]
    patterns: list[Pattern]
    similarPastTasks: list[str]
    suggestedApproach: str


class CruxFinderOutput(Output):
    agent: Literal["CruxFinder"]
    coreProblem: str = Field(min_length=1)
    subProblems: list[str]
    assumptions: list[str]
    constraints: list[str]
    requiredKnowledge: list[str]


class RetrieverOutput(Output):
    agent: Literal["Retriever"]
    lessons: list[str] = Field(max_length=5)
    playbooks: list[str] = Field(max_length=3)
    examples: list[str] = Field(max_length=3)


class GuideOutput(Output):
    agent: Literal["Guide"]
    plan: list[GuideStep]
    estimatedComplexity: Literal["low", "medium", "high"]
    warnings: list[str]
    bestPractices: list[str]


class PlannerOutput(Output):
    agent: Literal["Planner"]
    tasks: list[PlannerTask] = Field(min_length=1)


class SafetyGuardOutput(Output):
    agent: Literal["SafetyGuard"]
    safe: bool
    risks: list[str]
    blockedActions: list[str]
    requiresApproval: bool


class ImplementorOutput(Output):
    agent: Literal["Implementor"]
    actions: list[ImplementorAction]
    explanation: str
    filesCreated: list[str]
    filesModified: list[str]
    commandsRun: list[str]
    blocked: list[str]


class ToolRunnerOutput(Output):
    agent: Literal["ToolRunner"]
    executedCommands: list[ExecutedCommand]
    skippedCommands: list[str]


class GatekeeperOutput(Output):
    agent: Literal["Gatekeeper"]
    scorecard: Scorecard
    totalScore: int = Field(ge=0, le=25)
    decision: GatekeeperDecision
    feedback: str
    improvements: list[str]
    approvedLessons: list[str]
    rejectedLessons: list[str]


class LearnerOutput(Output):
    agent: Literal["Learner"]
    reflection: str
    candidateLessons: list[CandidateLesson]
    growthAreas: list[str]
    currentLevel: int = Field(ge=0, le=3)
    questionsForNextTime: list[str]


OUTPUTS: dict[str, type[Output]] = {
    "observer": ObserverOutput, "pattern_observer": PatternObserverOutput, "crux_finder": CruxFinderOutput,
    "retriever": RetrieverOutput, "guide": GuideOutput, "planner": PlannerOutput, "safety_guard": SafetyGuardOutput,
    "implementor": ImplementorOutput, "tool_runner": ToolRunnerOutput, "gatekeeper": GatekeeperOutput,
    "learner": LearnerOutput,
}
"""The stages of the reference pipeline, in the document's order, by the name its pipeline file gives each."""
