"""The registry of item kinds, and what a kind is.

A kind of item says which files it collects (:meth:`ItemKind.claims`, cheap: a suffix, a folder), how such a
file becomes items (:meth:`ItemKind.collect`: :class:`ItemSpec` each, every mistake a ``HarnessConfigError``
naming the file, the field and the fix) and how one item runs (:meth:`ItemKind.run`), from the shared steps
(:mod:`harness.evaluation.steps`), which record it and emit its events. The pytest face turns every kind
into the same File and Item nodes, and the scheduler, ``-x``/``--maxfail``/Ctrl-C, the cost cap, xdist,
``--rubric``, the records, the summary, JUnit, history, the compare gate and the reports take every kind alike:
an item's result is an :class:`~harness.evaluation.items.result.ItemResult`, written and read by one codec.

Built-in kinds register with :func:`item_kind`; a plugin returns instances from the ``pytest_harness_item_kinds``
hook (or a package declares them in the ``harness.item_kinds`` entry point group). Nothing here knows pytest:
the face hands a kind an :class:`ItemContext`, which its session satisfies.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Protocol, TypeVar

from harness.base.errors import HarnessConfigError
from harness.base.events import Events
from harness.base.fields import one_line
from harness.base.models import AgentConfig, ModelSettings, Rubric, RunnerSpec, SuiteConfig
from harness.base.stop import StopFlag
from harness.checks import CheckParser
from harness.evaluation.items.result import ItemResult
from harness.evaluation.runners import Runner
from harness.evaluation.steps import ItemRun, LoopResult
from harness.llm import ModelClient

HOOK = "pytest_harness_item_kinds"
ENTRY_POINT_GROUP = "harness.item_kinds"


class ItemFailed(Exception):
    """An item that did not pass for a reason of its own kind (not a loop's verdict): the text is its report, and
    ``result`` what it reports beside (written like any item's)."""

    def __init__(self, message: str, result: ItemResult | None = None):
        super().__init__(message)
        self.result = result


class ItemSkipped(Exception):
    """An item that could not be decided (a calibration nobody could score): skipped with the reason."""


@dataclass(frozen=True)
class ItemSpec:
    """One item a kind collected: how pytest names and shows it, what it is scored by, and the kind's own data."""

    name: str                            # its name in the file: the last part of its node id
    label: str                           # how reports show it, e.g. "writer[greet] scored by quality"
    payload: Any = field(default=None, repr=False, compare=False)  # the kind's own (a case and its runners, ...)
    line: int | None = None              # where it is in the file (0-based), when the kind knows
    rubrics: tuple[str, ...] = ()        # the names --rubric selects it by (a rubric's name and rubric_id)
    agent: str | None = None             # who its records are filed under; None: it records nothing
    case: str | None = None              # its case id in the records
    variant: str | None = None           # the agent's variant it runs (``variants:``): the last part of its name
    threshold: float | None = None
    models: tuple[str, ...] = ()         # the models it may call ("provider/name"): the cost cap checks their prices
    concurrent: bool = True              # runs in the session's pool beside the other items
    escalation_fails_gate: bool = True   # an escalated item fails (else it is xfail)


class ItemContext(Protocol):
    """What a kind may use of the session (the pytest face's ``HarnessSession`` is one)."""

    import_root: Path
    rubrics_dir: Path
    prompts_dir: Path  # the prompt registry (ini harness_prompts_dir)
    work_dir: Path
    input_roots: tuple[Path, ...]
    data_modules: tuple[str, ...]
    unconfined_runners: tuple[str, ...]  # ini harness_unconfined: who may run a command without the sandbox
    judge_samples: int
    judge_model: str | None  # --harness-judge-model: every judge on this model
    stop: StopFlag
    events: Events

    def rubric(self, path: Path) -> Rubric: ...

    def suite(self, path: Path) -> SuiteConfig: ...

    def check_kinds(self) -> Mapping[str, CheckParser]: ...

    def runner_kinds(self) -> list[str]: ...

    def make_runner(self, spec: RunnerSpec, role: str, agent: AgentConfig) -> Runner | None: ...

    def model_name(self, agent: AgentConfig, role: str) -> str: ...

    def model_client(self, settings: ModelSettings) -> ModelClient:
        """A client of ``settings``' model under the session's call policy (cache, limits, cost cap)."""

    def item_run(self, nodeid: str, spec: ItemSpec, rubric: Rubric) -> ItemRun: ...

    @property
    def calibration_suite(self) -> Path | None:
        """The agents.yaml whose evaluators judge the rubrics' examples (ini harness_suite), when there is one."""


class ItemKind:
    """A kind of item. Subclass it, give it a ``name``, and say what it collects and how an item runs."""

    name: ClassVar[str] = ""

    def claims(self, path: Path, *, rubrics_dir: Path) -> bool:
        """Whether this kind collects ``path``: cheap (its name, its folder); the file is read in collect."""
        raise NotImplementedError

    def collect(self, path: Path, context: ItemContext) -> Iterable[ItemSpec]:
        """The items of ``path``; a mistake in it is one ``HarnessConfigError`` naming file, field and fix."""
        raise NotImplementedError

    def run(self, spec: ItemSpec, nodeid: str, context: ItemContext) -> LoopResult | ItemResult | None:
        """Run one item (maybe on a worker thread). A kind that records attempts returns the run's result (from
        :meth:`ItemContext.item_run`'s steps); one that checks returns None (or an :class:`ItemResult` of what it
        reports) when it passed, and raises :class:`ItemFailed` or :class:`ItemSkipped` when not."""
        raise NotImplementedError


def role_runner(context: ItemContext, agent: AgentConfig, role: str) -> Runner:
    """The runner of ``agent``'s ``role``, made by the session's runner kinds; a kind no plugin builds is one error
    naming the file and field that asked for it."""
    spec = getattr(agent, role)
    runner = context.make_runner(spec, role, agent)
    if runner is None:
        raise HarnessConfigError(spec.file, spec.field, f"no plugin builds runners of kind {spec.kind!r}",
                                 "install the plugin that provides it or use prompt/template/python/command")
    return runner


_BUILTIN: dict[str, ItemKind] = {}
_K = TypeVar("_K", bound=type[ItemKind])


def item_kind(cls: _K) -> _K:
    """Register the decorated class as a built-in kind (one instance)."""
    if not cls.name or cls.name in _BUILTIN:
        raise ValueError(f"item kind {cls.name!r} has no name or is registered twice")
    _BUILTIN[cls.name] = cls()
    return cls


def builtin_kinds() -> list[ItemKind]:
    """The built-in kinds (registered when ``harness.evaluation.items`` is imported)."""
    return list(_BUILTIN.values())


def with_plugin_kinds(contributions: Iterable[tuple[str, Any]]) -> list[ItemKind]:
    """The built-in kinds, then those plugins add: ``contributions`` pairs each plugin (its file or name) with what
    it returned. A kind that is not an ``ItemKind``, has no name or takes a name already taken is a
    ``HarnessConfigError`` naming the plugin."""
    kinds = builtin_kinds()
    taken = {kind.name: "the harness" for kind in kinds}
    for source, offered in contributions:
        for kind in offered or ():
            if not isinstance(kind, ItemKind):
                raise HarnessConfigError(source, HOOK, f"returned {one_line(repr(kind), 60)}, not an ItemKind",
                                         "return instances of subclasses of harness.evaluation.items.ItemKind")
            if not kind.name or kind.name in taken:
                problem = "has no name" if not kind.name else f"is taken by {taken[kind.name]}"
                raise HarnessConfigError(source, HOOK, f"item kind {kind.name!r} {problem}",
                                         "give the kind a name of its own (its class's `name`)")
            taken[kind.name] = source
            kinds.append(kind)
    return kinds


def entry_point_kinds() -> Iterator[tuple[str, Any]]:
    """Kinds that installed packages declare in the ``harness.item_kinds`` entry point group."""
    from importlib.metadata import entry_points

    for point in entry_points(group=ENTRY_POINT_GROUP):
        try:
            loaded = point.load()
        except Exception as exc:  # noqa: BLE001 - a broken package: one line naming it
            raise HarnessConfigError(f"entry point {point.name}", ENTRY_POINT_GROUP,
                                     f"cannot load {point.value}: {type(exc).__name__}: {exc}",
                                     "fix or uninstall the package that declares it") from None
        yield f"entry point {point.name}", [loaded() if isinstance(loaded, type) else loaded]
