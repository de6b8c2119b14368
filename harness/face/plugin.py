"""pytest hook implementations: options, collection, the --rubric filter and the summary.

This module is imported in every pytest session (pytest11 entry point), so it stays light, and it is
inert unless the project opted in (ini ``harness = true``, harness/face/activation.py): no collection, no
options in effect, no output, no files. The heavy modules are imported only once a file of ours is
collected; an enabled session that collects none of our files prints nothing and writes nothing.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from harness.face.activation import enabled, forgotten_hint, note_forgotten, refuse_options_when_off
from harness.face.options import add_options, read_settings, rubrics_dir
from harness.face.shards import shard, split

if TYPE_CHECKING:
    from harness.face.session import HarnessSession
    from harness.face.verdict import RunVerdict  # noqa: F401 - the stash key's type, named as text

# The case kind's files (harness.evaluation.items.case), named here without importing it: a project that has
# not opted in but has case files gets a hint, and nothing of the harness is imported for it.
CASE_SUFFIXES = (".cases.yaml", ".cases.yml")
ACTIVE = pytest.StashKey[bool]()
SESSION_TOKEN = pytest.StashKey[str]()
SETTINGS = pytest.StashKey[dict]()
VERDICT = pytest.StashKey["RunVerdict"]()  # the run's exit status (harness.face.verdict)
PROPERTIES_REDACTED = pytest.StashKey[int]()  # how many of the item's user_properties are redacted already
PROVIDERS_ADDED = pytest.StashKey[list]()  # the providers this session's plugins registered
KIND_PROBLEMS = pytest.StashKey[set]()  # the broken kinds already reported at collection
ITEM_KINDS = pytest.StashKey[tuple]()  # (the plugins implementing pytest_harness_item_kinds, the kinds in effect)
SHARD_SPLIT = pytest.StashKey[tuple]()  # --harness-shard: (the items this shard runs, the items collected)
GC_RESTORE = pytest.StashKey[Callable[[], None]]()  # puts back the garbage collector's thresholds of before the run
WORKER_PREFIX_NOTES = pytest.StashKey[list]()  # pytest-xdist: the workers' judge prefixes too short to cache


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    from harness.face import hookspecs

    pluginmanager.add_hookspecs(hookspecs)


# Feature plugins, each with its own options and hooks; imported here so their options exist before
# the command line is parsed. They import their heavy modules lazily.
FEATURE_PLUGINS = ("harness.apps.tracking.pytest_plugin", "harness.apps.tournament.pytest_plugin")


def pytest_addoption(parser: pytest.Parser, pluginmanager: pytest.PytestPluginManager) -> None:
    for name in FEATURE_PLUGINS:
        pluginmanager.import_plugin(name)
    add_options(parser)


def pytest_configure(config: pytest.Config) -> None:
    if not enabled(config):
        refuse_options_when_off(config)
        return
    config.addinivalue_line("markers", "harness_case: an agent case run by pytest-rubric")
    config.stash[SETTINGS] = read_settings(config)  # a bad option or ini value is a usage error here
    _register_providers(config)
    _item_kinds(config)  # a kind the project's conftest adds that cannot be used: one usage error, here
    rubric = config.getoption("harness_rubric")
    if rubric is not None:
        known = known_rubrics(rubrics_dir(config))
        if rubric not in known:
            listing = ", ".join(known) if known else f"none: {rubrics_dir(config)} has no rubric files"
            raise pytest.UsageError(f"--rubric {rubric}: no such rubric (known: {listing})")


def known_rubrics(folder: Path) -> list[str]:
    """The names --rubric accepts: file names, and the ``rubric_id`` of review rubrics."""
    from harness.loading import rubric_files, rubric_identity

    files = rubric_files(folder)
    return sorted({p.stem for p in files} | {rid for p in files for rid, _ in [rubric_identity(p)] if rid})


def _activate(config: pytest.Config) -> HarnessSession:
    """Set up the harness the first time one of our files is collected."""
    import importlib

    from harness.face.session import SESSION_KEY, HarnessSession

    if not config.stash.get(ACTIVE, False):
        config.stash[SESSION_KEY] = HarnessSession(config=config, **config.stash[SETTINGS])
        config.stash[ACTIVE] = True
        # import_module, not `from harness.face import runner_kinds`: it honours sys.modules, which pytester
        # restores between in-process sessions.
        config.pluginmanager.register(importlib.import_module("harness.face.runner_kinds"), "harness-builtin-runners")
    return config.stash[SESSION_KEY]


def _check_cost_cap_can_hold(config: pytest.Config, items: list) -> None:  # noqa: ANN401 - list[KindItem]
    """--harness-max-cost with a model that has no price cannot hold: a usage error before anything runs."""
    from harness.face.session import harness_session

    hs = harness_session(config)
    if hs.max_cost_usd is None:
        return
    models = {model: item.spec.agent or item.name for item in items for model in item.spec.models}
    for model, agent in sorted(models.items()):
        if not hs.policy.has_price(model):
            from harness.llm import missing_price_line

            raise pytest.UsageError(f"--harness-max-cost cannot hold: agent {agent} calls {missing_price_line(model)}")


def _register_providers(config: pytest.Config) -> None:
    """The providers plugins add (``pytest_harness_providers``), registered for this session only; then the
    ``--harness-judge-model`` option's provider can be checked."""
    added: list[str] = []
    for provided in config.hook.pytest_harness_providers():
        from harness.llm.providers import register_provider

        for name, factory in (provided or {}).items():
            try:
                register_provider(name, factory)
            except ValueError as exc:
                raise pytest.UsageError(f"pytest_harness_providers: {exc}") from None
            added.append(name)
    config.stash[PROVIDERS_ADDED] = added
    judge_model = config.stash[SETTINGS]["judge_model"]
    if judge_model:
        from harness.base.models import ModelSettings
        from harness.llm.providers import model_problem

        problem = model_problem(ModelSettings(model=judge_model))
        if problem:
            raise pytest.UsageError(f"--harness-judge-model {judge_model}: {problem}")


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    config = parent.config
    if not enabled(config):
        if file_path.name.endswith(CASE_SUFFIXES):
            note_forgotten(config, file_path)
        return None
    where = rubrics_dir(config)
    try:
        kinds = _item_kinds(config)
    except pytest.UsageError as exc:  # a conftest further down the tree added a kind that cannot be used
        reported = config.stash.setdefault(KIND_PROBLEMS, set())
        if str(exc) in reported:
            return None
        reported.add(str(exc))  # said once, on the first file met
        from harness.face.nodes import BrokenFile

        return BrokenFile.from_parent(parent, path=file_path, problem=str(exc))
    for kind in kinds:
        if kind.claims(file_path, rubrics_dir=where):
            _activate(config)
            from harness.face.nodes import KindFile

            return KindFile.from_parent(parent, path=file_path, kind=kind)
    return None


def _item_kinds(config: pytest.Config) -> list:  # noqa: ANN401 - list[ItemKind], imported only here
    """The kinds of item in effect, made again only when the plugins implementing the hook change (a conftest
    further down the tree may add one). A kind that cannot be used is a usage error naming the plugin."""
    implementers = tuple(impl.plugin for impl in config.hook.pytest_harness_item_kinds.get_hookimpls())
    cached = config.stash.get(ITEM_KINDS, None)
    if cached is None or cached[0] != implementers:
        from harness.base.errors import HarnessConfigError
        from harness.face.session import item_kinds

        try:
            cached = (implementers, item_kinds(config))
        except HarnessConfigError as exc:
            raise pytest.UsageError(exc.message(config.rootpath)) from None
        config.stash[ITEM_KINDS] = cached
    return cached[1]


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The harness's items counted (an agent's folder layout, the cost cap's prices), then ``--rubric`` and
    ``--harness-shard`` deselect; the counts are of the whole session, so every shard lays out its records as the
    unsharded run does."""
    if config.stash.get(ACTIVE, False):
        _harness_items(config, items)
    if enabled(config) and config.stash[SETTINGS]["shard"]:
        _keep_shard(config, items)


def _keep_shard(config: pytest.Config, items: list[pytest.Item]) -> None:
    """``--harness-shard I/N``: this shard's items stay, the others are deselected (harness.face.shards)."""
    part = shard(config.stash[SETTINGS]["shard"])
    keep, drop = split(items, part)
    config.stash[SHARD_SPLIT] = (len(keep), len(keep) + len(drop))
    if config.stash.get(ACTIVE, False):
        from harness.face.session import harness_session

        harness_session(config).shard_split = config.stash[SHARD_SPLIT]  # its records say which part they are
    if hasattr(config, "workeroutput"):  # pytest-xdist: the controller, which collects nothing, learns it here
        config.workeroutput["harness_shard_split"] = list(config.stash[SHARD_SPLIT])
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


def _harness_items(config: pytest.Config, items: list[pytest.Item]) -> None:
    from harness.face.nodes import KindItem
    from harness.face.session import harness_session

    ours = [item for item in items if isinstance(item, KindItem)]
    counts: dict[str, int] = {}
    for item in ours:
        if item.spec.agent:
            counts[item.spec.agent] = counts.get(item.spec.agent, 0) + 1
    harness_session(config).items_per_agent = counts
    _check_cost_cap_can_hold(config, ours)
    wanted = config.getoption("harness_rubric")
    if wanted is None:
        return
    keep, drop = [], []
    for item in items:
        chosen = isinstance(item, KindItem) and wanted in item.spec.rubrics
        (keep if chosen else drop).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


@pytest.hookimpl(wrapper=True, tryfirst=True)  # tryfirst: the outermost wrapper, after every other plugin's say
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):  # type: ignore[no-untyped-def]
    """pytest's verdict on a case (the compare gate's included) goes into the records, so ``harness report``
    and ``harness history`` count what pytest counted. Then everything a report carries to the terminal,
    JUnit XML and xdist's controller goes through the redaction filter: failure text, skip reasons,
    captured output and user properties."""
    report = yield
    if report.when == "call" and item.config.stash.get(ACTIVE, False):
        _record_verdict(item, report)
    if enabled(item.config) and (report.longrepr or report.sections or report.user_properties):
        from harness.base.redaction import Redactor, redact_json

        redact = Redactor()
        _redact_failure_text(report, redact)
        done = item.stash.get(PROPERTIES_REDACTED, 0)
        if len(item.user_properties) > done:
            # the item's own list, each entry once: the reports after this one copy it already clean; the new
            # entries are scanned as one JSON text, and walked only when that may hold a secret
            fresh = item.user_properties[done:]
            if redact.finds(json.dumps(fresh, ensure_ascii=False, default=str)):
                item.user_properties[done:] = [(name, redact_json(value, redact)) for name, value in fresh]
            item.stash[PROPERTIES_REDACTED] = len(item.user_properties)
            report.user_properties = list(item.user_properties)  # pytest's copy of the item's list
        if hasattr(report, "wasxfail"):
            report.wasxfail = redact(report.wasxfail)
    return report


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_make_collect_report(collector: pytest.Collector):  # type: ignore[no-untyped-def]
    """A collection error's text (a conftest's traceback, a plugin's exception) goes through the redaction
    filter too, on its way to the terminal and the JUnit XML."""
    report = yield
    if enabled(collector.config) and (report.longrepr or report.sections):
        from harness.base.redaction import Redactor

        _redact_failure_text(report, Redactor())
    return report


def _redact_failure_text(report: pytest.TestReport | pytest.CollectReport, redact) -> None:  # noqa: ANN001
    """The failure text of a report, whatever its shape (a line of ours, a skip's location and reason, or
    pytest's traceback with its source lines, locals and crash line), and its captured output, redacted."""
    from harness.base.redaction import redact_objects

    if report.longrepr is not None:
        report.longrepr = redact_objects(report.longrepr, redact)
    report.sections = [(title, redact(text)) for title, text in report.sections]


def _record_verdict(item: pytest.Item, report: pytest.TestReport) -> None:
    from harness.evaluation.items import ItemResult

    result = ItemResult.read(item.user_properties)
    if result is not None:
        from harness.face.report_text import default_verdict, verdict_word
        from harness.face.session import harness_session

        word = verdict_word(report)
        # the usual word is implied by the outcome: no write for it, unless the item's last row is one of its runs
        if word != default_verdict(result.outcome) or result.staged:
            hs = harness_session(item.config)
            hs.store.record_verdict(hs.cycle_id, item.nodeid, word)


@pytest.hookimpl(optionalhook=True)  # pytest-xdist's hook: the plugin also runs without xdist
def pytest_configure_node(node) -> None:
    """pytest-xdist: the workers of one session share one cycle (the token names the session)."""
    config = node.config
    if SESSION_TOKEN not in config.stash:
        import uuid

        config.stash[SESSION_TOKEN] = uuid.uuid4().hex
        interval = config.stash[SETTINGS]["progress_interval_s"] if enabled(config) else 0
        if interval > 0:  # the workers' progress lines stay on the workers: the controller prints its own
            from harness.face.report_text import WorkersProgress

            config.pluginmanager.register(WorkersProgress(config, interval), "harness-workers-progress")
    node.workerinput["harness_session_token"] = config.stash[SESSION_TOKEN]


@pytest.hookimpl(optionalhook=True)  # pytest-xdist's hook
def pytest_testnodedown(node, error) -> None:  # noqa: ANN001 - xdist's WorkerController
    """pytest-xdist: a worker's shard split (every worker collects the same items) and its judges' prefixes too
    short to cache reach the controller."""
    split = getattr(node, "workeroutput", {}).get("harness_shard_split")
    if split is not None:
        node.config.stash[SHARD_SPLIT] = tuple(split)
    notes = getattr(node, "workeroutput", {}).get("harness_prefix_notes")
    if notes:
        node.config.stash.setdefault(WORKER_PREFIX_NOTES, []).extend(notes)


def pytest_sessionstart(session: pytest.Session) -> None:
    """Traces last written more than the capture settings' ``retention_days`` ago are deleted, once a run: by the
    controller (xdist workers share its cycle), not for --collect-only."""
    config = session.config
    if not enabled(config) or hasattr(config, "workerinput") or config.option.collectonly:
        return
    settings = config.stash[SETTINGS]
    # "traces" is harness.records.layout.TRACES_DIR, named here so that a run without traces imports nothing
    if settings["capture"].retention_days is not None and (settings["work_dir"] / "traces").is_dir():
        from harness.records import prune_traces

        days = settings["capture"].retention_days
        deleted = prune_traces(settings["work_dir"], days)
        reporter = config.pluginmanager.get_plugin("terminalreporter")
        if deleted and reporter is not None:
            reporter.write_line(f"harness: deleted {len(deleted)} trace{'s' * (len(deleted) != 1)} last written more "
                                f"than {days} days ago (ini harness_capture_retention_days)")
    if (settings["work_dir"] / "batches.db").is_file():  # harness.llm.batch_journal.JOURNAL_FILE: batches were made
        from harness.face.batch_report import pending_lines

        for line in pending_lines(settings["work_dir"], batch=settings["batch"]):
            config.get_terminal_writer().line(line)  # an earlier run's batches, pending


@pytest.hookimpl(tryfirst=True)
def pytest_runtestloop(session: pytest.Session) -> None:
    """Start every item's work concurrently; pytest's own loop then reports them in order."""
    config = session.config
    if not config.stash.get(ACTIVE, False) or config.option.collectonly:
        return None
    from harness.face.scheduler import BATCH_WORKERS, CaseScheduler, quieter_gc
    config.stash[GC_RESTORE] = quieter_gc()  # xdist's workers too, which run the items they are sent one by one
    # pytest stops at collection errors: no item may start work (and spend) behind its back
    if hasattr(config, "workerinput") or (session.testsfailed and not config.option.continue_on_collection_errors):
        return None
    from harness.face.nodes import KindItem
    from harness.face.session import harness_session

    hs = harness_session(config)
    work = [item for item in session.items if isinstance(item, KindItem) and item.spec.concurrent]
    workers = min(BATCH_WORKERS, len(work)) if hs.batch else min(hs.concurrency, len(work))
    if workers > 1:
        hs.scheduler = CaseScheduler(max_workers=workers, stop=hs.stop)
        hs.scheduler.submit_all([(item.nodeid, item.run_item) for item in work])
    return None


def _stop(config: pytest.Config, reason: str) -> None:
    config.stash.get(GC_RESTORE, lambda: None)()
    if config.stash.get(ACTIVE, False):
        from harness.face.session import harness_session

        hs = harness_session(config)
        hs.stop.set(reason)
        if hs.batcher is not None:  # items waiting on a batch end now, not when it does (a recorded one runs on)
            hs.batcher.close()
        if hs.scheduler is not None and hs.scheduler.shutdown(reason):
            config.get_terminal_writer().line("harness: stopped waiting for running cases (Ctrl-C twice)", yellow=True)
        if hs._policy is not None:
            hs._policy.close()  # fails requests still waiting for a batch, cancels running batches


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """The run loop ended (done, -x, --maxfail or Ctrl-C): cancel queued items, stop running ones; then the run's
    verdict decides its exit status (harness.face.verdict)."""
    _stop(session.config, "the session is stopping (-x, --maxfail or Ctrl-C)")
    if hasattr(session.config, "workeroutput") and session.config.stash.get(ACTIVE, False):
        from harness.face.session import harness_session

        session.config.workeroutput["harness_prefix_notes"] = harness_session(session.config).prefix_notes.rows()
    if enabled(session.config) and not hasattr(session.config, "workerinput"):
        from harness.face.report_text import failed_exit_codes, not_run_by_cost_cap
        from harness.face.verdict import RunVerdict

        verdict = session.config.stash.setdefault(VERDICT, RunVerdict())
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        if exitstatus == pytest.ExitCode.NO_TESTS_COLLECTED and _empty_shard(session.config):
            exitstatus = pytest.ExitCode.OK  # a shard that drew no item did its part: not a failed CI job
        session.exitstatus = verdict.finish(int(exitstatus), not_run_by_cost_cap=not_run_by_cost_cap(reporter),
                                            failed_codes=failed_exit_codes(reporter),
                                            mode=session.config.stash[SETTINGS]["exit_status"])


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    if hasattr(config, "workerinput"):
        return
    if not enabled(config):
        hint = forgotten_hint(config)
        if hint:
            terminalreporter.write_line(hint, yellow=True)
        return
    if _empty_shard(config):
        collected = config.stash[SHARD_SPLIT][1]
        terminalreporter.write_line(f"harness: shard {config.stash[SETTINGS]['shard']} holds none of the {collected} "
                                    f"item{'s' * (collected != 1)} collected; nothing to run (exit status 0)")
    from harness.face.report_text import (
        cascade_lines,
        not_run_by_cost_cap,
        pairwise_lines,
        prefix_lines,
        result_of,
        summary_lines,
        tally,
        unconfined_line,
        unpriced_models,
        variant_lines,
        verdict_word,
    )

    reports = [r for key in ("passed", "failed", "skipped", "xfailed", "xpassed", "error")
               for r in terminalreporter.stats.get(key, []) if getattr(r, "when", "call") == "call"]
    results = [(r.nodeid, result_of(r), verdict_word(r)) for r in reports]
    tallies = tally(results)
    comparisons = variant_lines(results) + pairwise_lines(results)
    from harness.face.batch_report import summary_lines as batch_lines

    for line in batch_lines(config):
        terminalreporter.write_line(line, yellow=True)  # batches resumed, expired, left running or only submitted
    if not tallies and not comparisons:
        return
    ours = [result for _, result, _ in results if result is not None]
    cycles = sorted({result.cycle for result in ours if result.cycle})
    terminalreporter.write_sep("=", "harness summary")
    terminalreporter.write_line(f"cycle {', '.join(cycles)} - records in {config.stash[SETTINGS]['work_dir']}")
    from harness.records import reconciliation_note

    for note in filter(None, (reconciliation_note(config.stash[SETTINGS]["work_dir"], c) for c in cycles)):
        terminalreporter.write_line(note, yellow=True)  # what this session finished of a killed one's records
    for line in (summary_lines(tallies) if tallies else []) + comparisons + cascade_lines(ours):
        terminalreporter.write_line(line)
    from harness.face.session import harness_session

    notes = config.stash.get(WORKER_PREFIX_NOTES, []) + (
        harness_session(config).prefix_notes.rows() if config.stash.get(ACTIVE, False) else [])
    for line in prefix_lines(notes):
        terminalreporter.write_line(line, yellow=True)  # once per rubric and model, never per item
    for model in unpriced_models(ours):  # the cost column leaves them out
        from harness.llm.prices import missing_price_line

        terminalreporter.write_line(missing_price_line(model), yellow=True)
    unconfined = unconfined_line(ours)
    if unconfined:
        terminalreporter.write_line(unconfined, yellow=True)
    verdict = config.stash.get(VERDICT, None)
    why = verdict.why if verdict is not None else None
    if config.stash.get(ACTIVE, False):
        from harness.face.session import harness_session

        hs = harness_session(config)
        if hs.stop.reason and "cost cap" in hs.stop.reason:
            not_run = not_run_by_cost_cap(terminalreporter)
            line = f"stopped starting new work: {hs.stop.reason}; {not_run} item{'s' * (not_run != 1)} not run"
            terminalreporter.write_line(line + (f" ({why})" if why else ""), yellow=True)
            why = None
    if why:
        terminalreporter.write_line(why, yellow=True)


def _empty_shard(config: pytest.Config) -> bool:
    """``--harness-shard`` left this session none of the items it collected (under pytest-xdist, as the workers
    said: :func:`pytest_testnodedown`)."""
    if not enabled(config) or not config.stash[SETTINGS]["shard"]:
        return False
    kept, collected = config.stash.get(SHARD_SPLIT, (0, 0))
    return kept == 0 and collected > 0


def pytest_unconfigure(config: pytest.Config) -> None:
    if config.stash.get(ACTIVE, False):
        from harness.face.session import harness_session

        harness_session(config).close()
    if config.stash.get(PROVIDERS_ADDED, []):
        from harness.llm.providers import unregister_provider

        for name in config.stash[PROVIDERS_ADDED]:
            unregister_provider(name)
