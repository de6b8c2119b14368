"""Per-session state: the record store, the cycle id, model clients and loaded files.

Everything is created lazily, so a pytest session that collects none of our files writes nothing.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from harness.base.capture import Capture
from harness.base.errors import HarnessConfigError
from harness.base.events import AttemptFinished, Event, Events
from harness.base.fileio import atomic_write_json
from harness.base.models import DEFAULT_THRESHOLD, AgentConfig, ModelSettings, Rubric, RunnerSpec, SuiteConfig
from harness.base.stop import StopFlag
from harness.base.usage import shown_cost
from harness.checks import CheckParser, with_plugin_kinds
from harness.evaluation.items import ItemKind, ItemSpec, entry_point_kinds
from harness.evaluation.items import with_plugin_kinds as with_plugin_item_kinds
from harness.evaluation.judge_prefix import PrefixNote
from harness.evaluation.runners import Runner
from harness.evaluation.steps import ItemRun
from harness.face.report_text import duration
from harness.face.scheduler import CaseScheduler
from harness.llm import CallPolicy, ModelClient
from harness.loading import load_rubric, load_suite
from harness.records import RecordStore, RecordWriter, TraceSink
from harness.records.layout import SHARD_FILE, cycle_path
from harness.records.otel import OtelSink

SESSION_KEY = pytest.StashKey["HarnessSession"]()


class PrefixNotes:
    """The judges' cached prefixes too short to cache, one per (rubric, model), as the summary says them once
    (harness.evaluation.judge_prefix); rows of plain values travel from xdist workers to the controller."""

    def __init__(self) -> None:
        self._rows: dict[tuple[str, str], dict[str, Any]] = {}
        self._lock = threading.Lock()

    def add(self, note: PrefixNote) -> None:
        self.merge([{"rubric": note.rubric, "model": note.model, "tokens": note.tokens, "minimum": note.minimum,
                     "agents": [note.agent]}])

    def merge(self, rows: list[dict[str, Any]]) -> None:
        with self._lock:
            for row in rows:
                key = (row["rubric"], row["model"])
                known = self._rows.setdefault(key, {**row, "agents": []})
                known["tokens"] = min(known["tokens"], row["tokens"])  # the shortest prefix of the agents judged so
                known["agents"] = sorted({*known["agents"], *row["agents"]})

    def rows(self) -> list[dict[str, Any]]:
        with self._lock:
            return [dict(row) for _, row in sorted(self._rows.items())]


@dataclass
class HarnessSession:
    config: pytest.Config
    work_dir: Path
    rubrics_dir: Path
    import_root: Path
    indeterminate: str  # "skip" or "fail"
    concurrency: int = 1
    judge_samples: int = 1
    max_cost_usd: float | None = None
    stop: StopFlag = field(default_factory=StopFlag)
    scheduler: CaseScheduler | None = None
    cache_mode: str = "auto"
    batch: bool = False
    batch_submit: bool = False  # --harness-batch-submit: submit the batches, record them, do not wait for them
    rate_limits: dict[str, int | None] = field(default_factory=dict)
    prices_path: Path | None = None
    prompts_dir: Path = Path("prompts")  # the prompt registry skills name prompts from (ini harness_prompts_dir)
    input_roots: tuple[Path, ...] = ()  # where case input files may come from (the rootdir, harness_input_dirs)
    data_modules: tuple[str, ...] = ()  # the only modules case files and dataset rows may name code from
    unconfined_runners: tuple[str, ...] = ()  # ini harness_unconfined: agent.role (or agent) run without the sandbox
    approved_runners: tuple[str, ...] = ()  # ini harness_approved_commands: flagged by the SafetyGuard, approved
    judge_model: str | None = None  # --harness-judge-model: every judge on this model instead
    prompt_cache: bool = True  # --harness-prompt-cache: the judges mark their stable prefix as cacheable
    prefix_notes: PrefixNotes = field(default_factory=PrefixNotes)  # prefixes too short to cache, for the summary
    progress_interval_s: float = 10.0
    exit_status: str = "pytest"  # "item": the run exits with the most severe failed item's exit code
    spent_usd: float = 0.0
    last_progress: float = field(default_factory=time.monotonic)
    batch_status: str | None = None
    events: Events = field(default_factory=Events)  # the run's event stream (harness.base.events)
    capture: Capture = field(default_factory=Capture)  # what the run keeps of inputs and outputs; its trace
    otel: bool = False  # --harness-otel: items and model calls exported as OpenTelemetry spans
    shard: str | None = None  # --harness-shard I/N: the session runs that part of the items (harness.face.shards)
    shard_split: tuple[int, int] | None = None  # with a shard: (the items it runs, the items collected)
    items_per_agent: dict[str, int] = field(default_factory=dict)  # counted at collection: 2+ share a folder
    _policy: CallPolicy | None = None
    _store: RecordStore | None = None
    _traces: TraceSink | None = None
    _otel_sink: OtelSink | None = None
    _cycle_id: str | None = None
    _clients: dict[ModelSettings, ModelClient] = field(default_factory=dict)
    _cache: dict[tuple[str, Path], Any] = field(default_factory=dict)
    _lock: threading.RLock = field(default_factory=threading.RLock)

    def __post_init__(self) -> None:
        """The session's own sinks: the cost account (and cap) and the attempt hook; then plugins' sinks."""
        self.events.subscribe(self._account)
        if self.config.hook.pytest_harness_attempt_finished.get_hookimpls():
            self.events.subscribe(self._attempt_hook)
        for sinks in self.config.hook.pytest_harness_event_sinks(config=self.config):
            for sink in sinks or ():
                self.events.subscribe(sink)
        if self.otel:
            self._otel_sink = OtelSink()
            self.events.subscribe(self._otel_sink)

    def _account(self, event: Event) -> None:
        if isinstance(event, AttemptFinished):
            self.add_cost(event.details.cost_usd)

    def _attempt_hook(self, event: Event) -> None:
        if isinstance(event, AttemptFinished):  # the record's JSON is built only for a plugin that asks for it
            self.config.hook.pytest_harness_attempt_finished(record=event.record.model_dump(mode="json"),
                                                            details=dict(event.details.__dict__))

    @property
    def store(self) -> RecordStore:
        with self._lock:
            if self._store is None:
                self._store = RecordStore(self.work_dir, root=self.import_root)
                self.events.subscribe(RecordWriter(self._store), required=True)
            return self._store

    @property
    def cycle_id(self) -> str:
        """The cycle of this session: chosen by the controller, shared with xdist workers."""
        with self._lock:
            if self._cycle_id is None:
                token = getattr(self.config, "workerinput", {}).get("harness_session_token")
                self._cycle_id = self.store.allocate_cycle(session_token=token)
                if self.shard:  # what harness merge reads of the shard (every process of it writes the same)
                    atomic_write_json(cycle_path(self.work_dir, self._cycle_id) / SHARD_FILE,
                                      {"shard": self.shard, "items": (self.shard_split or (None, None))[0],
                                       "collected": (self.shard_split or (None, None))[1]})
                if self.capture.enabled:  # the cycle's trace: every process of the session appends to one file
                    self._traces = TraceSink(self.work_dir, self._cycle_id)
                    self.events.subscribe(self._traces)
            return self._cycle_id

    @property
    def cycle_started(self) -> bool:
        return self._cycle_id is not None

    def add_cost(self, usd: float) -> None:
        """Count an attempt's cost; past the cap, stop starting new work."""
        with self._lock:
            self.spent_usd += usd
            if self.max_cost_usd is not None and self.spent_usd >= self.max_cost_usd:
                self.stop.set(f"cost cap ${self.max_cost_usd:g} reached (${self.spent_usd:.4f} spent)",
                              cause="cost_cap")

    def progress_text(self) -> str:
        """One line: items done of all, the spend (``unknown`` while an unpriced model is in it), the model calls
        (in flight, made, replayed from the cache), rate-limit waits, and about how long the rest will take."""
        done = self.scheduler.done if self.scheduler else 0
        total = self.scheduler.total if self.scheduler else 0
        unpriced = bool(self._policy.stats.unpriced_models) if self._policy is not None else False
        text = f"harness: {done}/{total} cases done, {shown_cost(self.spent_usd, not unpriced)} spent"
        stats = self.call_stats()
        if stats:
            text += (f", {stats.get('in_flight', 0)} calls in flight, {stats.get('calls', 0)} calls, "
                     f"{stats.get('cache_hits', 0)} cache hits, tokens in/out "
                     f"{stats.get('input_tokens', 0)}/{stats.get('output_tokens', 0)}")
            if stats.get("rate_wait_s"):
                text += f", {stats['rate_wait_s']:.1f} s waited for rate limits"
        left = self.scheduler.seconds_left() if self.scheduler else None
        if left is not None:
            text += f", about {duration(left)} left"
        if self.batch_status:
            text += f"; {self.batch_status}"
        return text

    def progress_brief(self) -> str:
        """The progress line's figures, short enough for the rest of a terminal line:
        ``[harness 3/10, $0.0123, 2 in flight, 1 cached, 4.0 s rate wait, ~45 s left]``."""
        done = self.scheduler.done if self.scheduler else 0
        total = self.scheduler.total if self.scheduler else 0
        unpriced = bool(self._policy.stats.unpriced_models) if self._policy is not None else False
        parts = [f"harness {done}/{total}", shown_cost(self.spent_usd, not unpriced)]
        stats = self.call_stats()
        if stats:
            parts += [f"{stats.get('in_flight', 0)} in flight", f"{stats.get('cache_hits', 0)} cached"]
            if stats.get("rate_wait_s"):
                parts.append(f"{stats['rate_wait_s']:.1f} s rate wait")
        left = self.scheduler.seconds_left() if self.scheduler else None
        if left is not None:
            parts.append(f"~{duration(left)} left")
        return "[" + ", ".join(parts) + "]"

    def call_stats(self) -> dict[str, Any]:
        return self._policy.stats.snapshot() if self._policy is not None else {}

    @property
    def policy(self) -> CallPolicy:
        """How every model call of the session is made: concurrency, cache, rate limits, batching, prices."""
        with self._lock:
            if self._policy is None:
                workers = getattr(self.config, "workerinput", {}).get("workercount", 1)
                self._policy = CallPolicy.build(
                    concurrency=self.concurrency, cache_mode=self.cache_mode, work_dir=self.work_dir,
                    requests_per_minute=self.rate_limits.get("rpm"),
                    input_tokens_per_minute=self.rate_limits.get("itpm"),
                    output_tokens_per_minute=self.rate_limits.get("otpm"), processes=workers, batch=self.batch,
                    on_batch_progress=self._batch_progress, batch_submit=self.batch_submit,
                    on_batch_notice=self._batch_notice, price_file=self.prices_path,
                    max_cost_usd=self.max_cost_usd)
                self._policy.events = self.events
            return self._policy

    def _batch_progress(self, batch_id: str, counts: dict[str, int]) -> None:
        self.batch_status = f"batch {batch_id}: " + ", ".join(f"{n} {k}" for k, n in counts.items() if n)

    def _batch_notice(self, text: str) -> None:
        self.batch_status = text  # in the next progress line; the summary repeats every notice

    @property
    def batcher(self) -> Any:
        """The session's :class:`~harness.llm.batching.Batcher` once a model was called with --harness-batch."""
        return self._policy.batcher if self._policy is not None else None

    def close(self) -> None:
        if self._policy is not None:
            self._policy.close()
        if self._store is not None:
            self._store.close()
        if self._traces is not None:
            self._traces.close()
        if self._otel_sink is not None:
            self._otel_sink.close()

    def model_for(self, agent: AgentConfig, role: str) -> ModelSettings:
        """The model a prompt role of ``agent`` runs on (``--harness-judge-model`` overriding the judge's)."""
        settings = agent.models.get(role, agent.judge)
        if role == "evaluator" and self.judge_model:
            settings = dataclasses.replace(settings, model=self.judge_model)
        return settings

    def model_client(self, settings: ModelSettings) -> ModelClient:
        with self._lock:
            if settings not in self._clients:
                self._clients[settings] = ModelClient(settings, policy=self.policy)
            return self._clients[settings]

    def cached(self, kind: str, path: Path, load: Any) -> Any:
        """Load each file once per session; a load error is raised again for every user of the file."""
        key = (kind, path.resolve())
        with self._lock:
            if key not in self._cache:
                try:
                    self._cache[key] = load()
                except HarnessConfigError as exc:
                    self._cache[key] = exc
            value = self._cache[key]
        if isinstance(value, HarnessConfigError):
            raise value
        return value


    # -- what item kinds use of the session (harness.evaluation.items.ItemContext) ---------------------------

    def rubric(self, path: Path) -> Rubric:
        """The rubric at ``path``, loaded once per session with the check kinds plugins add."""
        return self.cached("rubric", path, lambda: load_rubric(path, import_root=self.import_root,
                                                               check_kinds=self.check_kinds(),
                                                               input_roots=self.input_roots))

    def suite(self, path: Path) -> SuiteConfig:
        """The agents.yaml at ``path``, loaded once per session."""
        return self.cached("suite", path, lambda: load_suite(path, rubrics_dir=self.rubrics_dir,
                                                             runner_kinds=self.runner_kinds(),
                                                             input_roots=self.input_roots))

    def check_kinds(self) -> Mapping[str, CheckParser]:
        """The built-in check kinds plus those plugins add (``pytest_harness_check_kinds``). Each plugin's hook is
        called on its own, so that a kind shadowing another is refused naming the plugin (a conftest by its file)."""
        impls = self.config.hook.pytest_harness_check_kinds.get_hookimpls()
        return with_plugin_kinds((getattr(impl.plugin, "__file__", None) or impl.plugin_name, impl.function())
                                 for impl in impls if not (impl.hookwrapper or impl.wrapper))

    def runner_kinds(self) -> list[str]:
        kinds: list[str] = []
        for names in self.config.hook.pytest_harness_runner_kinds():
            kinds.extend(n for n in names if n not in kinds)
        return kinds

    def make_runner(self, spec: RunnerSpec, role: str, agent: AgentConfig) -> Runner | None:
        return self.config.hook.pytest_harness_make_runner(spec=spec, role=role, agent=agent, config=self.config)

    def model_name(self, agent: AgentConfig, role: str) -> str:
        return self.model_for(agent, role).qualified

    @property
    def calibration_suite(self) -> Path | None:
        path = self.import_root / self.config.getini("harness_suite")
        return path if path.is_file() else None

    def item_run(self, nodeid: str, spec: ItemSpec, rubric: Rubric) -> ItemRun:
        """The run of one item from the shared steps: its records under ``runs/{cycle}/{agent}`` (a folder per
        case when the agent has several items in the session)."""
        agent = spec.agent or spec.name
        shared = self.items_per_agent.get(agent, 1) > 1
        location = self.store.location(self.cycle_id, agent, (spec.case or spec.name) if shared else None,
                                       spec.variant)
        threshold = spec.threshold if spec.threshold is not None else rubric.effective_threshold(DEFAULT_THRESHOLD)
        return ItemRun(nodeid, agent, spec.case or spec.name, rubric, threshold, location, self.events, self.stop,
                       capture=self.capture, variant=spec.variant)

    def item_kinds(self) -> list[ItemKind]:
        return item_kinds(self.config)


def item_kinds(config: pytest.Config) -> list[ItemKind]:
    """The built-in item kinds, then those plugins add (``pytest_harness_item_kinds``, the ``harness.item_kinds``
    entry points), each plugin's hook called on its own so a clash names the plugin."""
    impls = config.hook.pytest_harness_item_kinds.get_hookimpls()
    contributions = [(getattr(impl.plugin, "__file__", None) or impl.plugin_name,
                      impl.function(**({"config": config} if "config" in impl.argnames else {})))
                     for impl in impls if not (impl.hookwrapper or impl.wrapper)]
    return with_plugin_item_kinds([*contributions, *entry_point_kinds()])


def harness_session(config: pytest.Config) -> HarnessSession:
    return config.stash[SESSION_KEY]
