"""pytest hook implementations: options, collection, the --rubric filter and the summary.

This module is imported in every pytest session (pytest11 entry point), so it stays light, and it is
inert unless the project opted in (ini ``harness = true``, harness/activation.py): no collection, no
options in effect, no output, no files. The heavy modules are imported only once a file of ours is
collected; an enabled session that collects none of our files prints nothing and writes nothing.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from harness.activation import (add_enable_ini, add_option, enabled, forgotten_hint, note_forgotten,
                                refuse_options_when_off)
from harness.argtypes import choice, dollars, seconds, whole_number

if TYPE_CHECKING:
    from harness.session import HarnessSession

RUBRIC_SUFFIXES = (".yaml", ".yml", ".json")  # JSON: the review rubrics of a prompt registry
CASE_SUFFIXES = (".cases.yaml", ".cases.yml")
ACTIVE = pytest.StashKey[bool]()
SESSION_TOKEN = pytest.StashKey[str]()
SETTINGS = pytest.StashKey[dict]()
CUT_SHORT_BY_COST_CAP = pytest.StashKey[bool]()  # the exit status became 82 (pytest_sessionfinish)
PROPERTIES_REDACTED = pytest.StashKey[int]()
PROVIDERS_ADDED = pytest.StashKey[list]()  # the providers this session's plugins registered  # how many of the item's user_properties are redacted already
CACHE_MODES = ("auto", "off", "read", "write", "refresh")
DEFAULT_CONCURRENCY = 16
_positive = whole_number(1)
_indeterminate = choice("skip", "fail")


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    from harness import hookspecs

    pluginmanager.add_hookspecs(hookspecs)


# Feature plugins, each with its own options and hooks; imported here so their options exist before
# the command line is parsed. They import their heavy modules lazily.
FEATURE_PLUGINS = ("harness.tracking.pytest_plugin", "harness.tournament.pytest_plugin")


def pytest_addoption(parser: pytest.Parser, pluginmanager: pytest.PytestPluginManager) -> None:
    group = parser.getgroup("harness", "pytest-rubric: evaluate agents against rubrics")
    for name in FEATURE_PLUGINS:
        pluginmanager.import_plugin(name)
    add_enable_ini(parser)
    add_option(group, "--rubric", dest="harness_rubric", metavar="NAME", default=None,
                    help="run only the items scored by rubric NAME (a file stem in the rubrics folder); "
                         "default: all")
    add_option(group, "--harness-work-dir", dest="harness_work_dir", metavar="DIR", default=None,
                    help="where attempts, run logs and the SQLite records go (default: ini harness_work_dir, "
                         "else WORK under the rootdir)")
    add_option(group, "--harness-indeterminate", dest="harness_indeterminate", metavar="skip|fail", default=None,
                    type=_indeterminate,
                    help="what an item nobody could score becomes: skip (default) or fail")
    add_option(group, "--harness-concurrency", dest="harness_concurrency", metavar="N", default=None,
                    type=_positive,
                    help=f"cases (and model calls) in flight at once (default: ini harness_concurrency, "
                         f"else {DEFAULT_CONCURRENCY})")
    add_option(group, "--harness-cache", dest="harness_cache", metavar="MODE", default=None, choices=CACHE_MODES,
                    help="response cache in the work folder: auto (read and write at temperature 0; default), "
                         "off, read, write or refresh")
    add_option(group, "--harness-batch", dest="harness_batch", action="store_true", default=None,
                    help="send the session's model requests through the Message Batches API (half price, "
                         "slower); default: ini harness_batch, else off")
    add_option(group, "--harness-max-cost", dest="harness_max_cost", metavar="USD", default=None, type=dollars,
                    help="stop starting new work once the run has cost this much (default: no cap)")
    add_option(group, "--harness-judge-model", dest="harness_judge_model", metavar="MODEL", default=None,
                    type=_model_name,
                    help="judge with MODEL (provider/name, e.g. openai/gpt-4.1-mini or mock/echo) instead of the "
                         "judge models agents.yaml names (default: ini harness_judge_model, else as written)")
    add_option(group, "--harness-judge-samples", dest="harness_judge_samples", metavar="K", default=None,
                    type=_positive,
                    help="score each artifact K times and use the mean; unstable verdicts are listed (default 1)")
    for flag, what in (("rpm", "requests"), ("itpm", "input tokens"), ("otpm", "output tokens")):
        add_option(group, f"--harness-{flag}", dest=f"harness_{flag}", metavar="N", default=None, type=_positive,
                        help=f"limit {what} per minute sent to the model API (default: ini harness_{flag}, "
                             "else no limit)")
        parser.addini(f"harness_{flag}", f"{what} per minute limit (default: none)", default="")
    parser.addini("harness_concurrency", f"cases in flight at once (default: {DEFAULT_CONCURRENCY})",
                  default=str(DEFAULT_CONCURRENCY))
    parser.addini("harness_cache", "response cache mode (default: auto)", default="auto")
    parser.addini("harness_batch", "use the Message Batches API (default: false)", type="bool", default=False)
    parser.addini("harness_max_cost", "cost cap in USD for a run (default: none)", default="")
    parser.addini("harness_judge_samples", "judge samples per artifact (default: 1)", default="1")
    parser.addini("harness_judge_model", "judge every agent with this model (default: as agents.yaml says)",
                  default="")
    parser.addini("harness_prices", "YAML/JSON price table overriding the built-in one (default: none)", default="")
    parser.addini("harness_progress_interval", "seconds between progress lines, 0 for none (default: 10)",
                  default="10")
    parser.addini("harness_work_dir", "work folder for records (default: WORK)", default="WORK")
    parser.addini("harness_input_dirs", "folders outside the project that case input files may come from, one a "
                  "line (default: none; inside the project only)", type="linelist", default=[])
    parser.addini("harness_rubrics_dir", "folder of rubric files (default: rubrics)", default="rubrics")
    parser.addini("harness_suite", "agents.yaml used to calibrate judged rubrics (default: suites/agents.yaml)",
                  default="suites/agents.yaml")
    parser.addini("harness_indeterminate", "skip or fail items nobody could score (default: skip)", default="skip")


def pytest_configure(config: pytest.Config) -> None:
    if not enabled(config):
        refuse_options_when_off(config)
        return
    config.addinivalue_line("markers", "harness_case: an agent case run by pytest-rubric")
    config.stash[SETTINGS] = _settings(config)  # a bad option or ini value is a usage error here
    _register_providers(config)
    rubric = config.getoption("harness_rubric")
    if rubric is not None:
        known = known_rubrics(_rubrics_dir(config))
        if rubric not in known:
            listing = ", ".join(known) if known else f"none: {_rubrics_dir(config)} has no rubric files"
            raise pytest.UsageError(f"--rubric {rubric}: no such rubric (known: {listing})")


def _rubrics_dir(config: pytest.Config) -> Path:
    return Path(config.rootpath) / config.getini("harness_rubrics_dir")


def known_rubrics(folder: Path) -> list[str]:
    """The names --rubric accepts: file names, and the ``rubric_id`` of review rubrics."""
    from harness.loading import rubric_files, rubric_identity

    files = rubric_files(folder)
    return sorted({p.stem for p in files} | {rid for p in files for rid, _ in [rubric_identity(p)] if rid})


def _setting(config: pytest.Config, name: str, parse):
    """The option's value, else the ini value parsed the same way (a bad ini value is a usage error)."""
    value = config.getoption(name, None)
    if value is not None:
        return value
    try:
        raw = config.getini(name)
    except (ValueError, pytest.UsageError) as exc:  # a typed ini value (bool) that does not parse
        raise pytest.UsageError(f"ini {name}: {exc} (fix: write true or false)") from None
    if raw in ("", None):
        return None
    if not isinstance(raw, str):
        return raw
    try:
        return parse(raw)
    except (argparse.ArgumentTypeError, ValueError) as exc:
        text = str(exc)
        if "(fix: " not in text:
            text += f" (fix: correct or remove the {name} line in the ini file)"
        raise pytest.UsageError(f"ini {name} = {raw!r}: {text}") from None


def _work_dir(config: pytest.Config, root: Path) -> Path:
    """The work folder: a folder, or a path where one can be made; checked here, created when first used."""
    given = config.getoption("harness_work_dir")
    name = "--harness-work-dir" if given else "ini harness_work_dir"
    work = (root / (given or config.getini("harness_work_dir"))).resolve()
    existing = work
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if existing.exists() and not existing.is_dir():
        problem = "is a file" if existing == work else f"cannot be made: {existing} is a file"
        raise pytest.UsageError(f"{name} {work}: {problem}, not a folder (fix: give a folder for the records; "
                                "it is created when missing)")
    if not os.access(existing, os.W_OK | os.X_OK):
        where = "" if existing == work else f" ({existing} is not writable)"
        raise pytest.UsageError(f"{name} {work}: cannot write there{where} (fix: give a folder you can write to)")
    return work


def _prices_path(config: pytest.Config, root: Path) -> Path | None:
    """ini harness_prices: the file must exist (its contents are checked when collection loads it)."""
    prices = config.getini("harness_prices")
    if not prices:
        return None
    path = root / prices
    if not path.is_file():
        raise pytest.UsageError(f"ini harness_prices = {prices!r}: no file {path} (fix: create the price table, or "
                                "correct the path; it is relative to the rootdir)")
    return path


def _input_roots(config: pytest.Config, root: Path) -> tuple[Path, ...]:
    """Where case input files may come from: the project, and the folders of ini harness_input_dirs."""
    roots = [root.resolve()]
    for entry in config.getini("harness_input_dirs"):
        folder = (root / entry).resolve()
        if not folder.is_dir():
            raise pytest.UsageError(f"ini harness_input_dirs: {entry} ({folder}) is not a folder "
                                    "(fix: list existing folders, one a line, relative to the rootdir or absolute)")
        roots.append(folder)
    return tuple(roots)


def _settings(config: pytest.Config) -> dict:
    """Every harness option, from the command line or its ini twin; parsed once, in pytest_configure."""
    root = Path(config.rootpath)
    return dict(
        work_dir=_work_dir(config, root), rubrics_dir=_rubrics_dir(config).resolve(), import_root=root,
        input_roots=_input_roots(config, root),
        indeterminate=_setting(config, "harness_indeterminate", _indeterminate),
        concurrency=_setting(config, "harness_concurrency", _positive) or DEFAULT_CONCURRENCY,
        judge_samples=_setting(config, "harness_judge_samples", _positive) or 1,
        judge_model=_setting(config, "harness_judge_model", _model_name) or None,
        max_cost_usd=_setting(config, "harness_max_cost", dollars),
        cache_mode=_setting(config, "harness_cache", choice(*CACHE_MODES)) or "auto",
        batch=bool(_setting(config, "harness_batch", bool)),
        rate_limits={flag: _setting(config, f"harness_{flag}", _positive) for flag in ("rpm", "itpm", "otpm")},
        prices_path=_prices_path(config, root),
        progress_interval_s=_setting(config, "harness_progress_interval", seconds) or 0.0,
    )


def _activate(config: pytest.Config) -> HarnessSession:
    """Set up the harness the first time one of our files is collected."""
    import importlib

    from harness.session import SESSION_KEY, HarnessSession

    if not config.stash.get(ACTIVE, False):
        config.stash[SESSION_KEY] = HarnessSession(config=config, **config.stash[SETTINGS])
        config.stash[ACTIVE] = True
        # import_module, not `from harness import runners`: it honours sys.modules, which pytester
        # restores between in-process sessions.
        config.pluginmanager.register(importlib.import_module("harness.runners"), "harness-builtin-runners")
    return config.stash[SESSION_KEY]


def _check_cost_cap_can_hold(config: pytest.Config, items: list[pytest.Item]) -> None:
    """--harness-max-cost with a model that has no price cannot hold: a usage error before anything runs."""
    from harness.nodes import CaseItem
    from harness.session import harness_session

    hs = harness_session(config)
    if hs.max_cost_usd is None:
        return
    models = {hs.model_for(item.agent, role).qualified: item.agent.name
              for item in items if isinstance(item, CaseItem) for role in item.agent.models}
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
        from harness.llm.providers import model_problem
        from harness.models import ModelSettings

        problem = model_problem(ModelSettings(model=judge_model))
        if problem:
            raise pytest.UsageError(f"--harness-judge-model {judge_model}: {problem}")


def _model_name(text: str) -> str:
    """An option's model name, ``provider/name`` (argparse type); its provider is checked once plugins have
    registered theirs (``_register_providers``)."""
    if not text.strip() or text != text.strip():
        raise argparse.ArgumentTypeError(f"{text!r} is not a model name (fix: write provider/name, e.g. "
                                         "openai/gpt-4.1-mini)")
    return text


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    name = file_path.name
    if not enabled(parent.config):
        if name.endswith(CASE_SUFFIXES):
            note_forgotten(parent.config, file_path)
        return None
    if name.endswith(CASE_SUFFIXES):
        _activate(parent.config)
        from harness.nodes import CaseFile

        return CaseFile.from_parent(parent, path=file_path)
    if file_path.suffix in RUBRIC_SUFFIXES and file_path.parent == _rubrics_dir(parent.config):
        _activate(parent.config)
        from harness.nodes import RubricFile

        return RubricFile.from_parent(parent, path=file_path)
    return None


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not config.stash.get(ACTIVE, False):
        return
    from harness.nodes import CASE_COUNTS, CaseItem, HarnessItem

    counts: dict[str, int] = {}
    for item in items:
        if isinstance(item, CaseItem):
            counts[item.agent.name] = counts.get(item.agent.name, 0) + 1
    config.stash[CASE_COUNTS] = counts
    _check_cost_cap_can_hold(config, items)
    wanted = config.getoption("harness_rubric")
    if wanted is None:
        return
    keep, drop = [], []
    for item in items:
        chosen = isinstance(item, HarnessItem) and wanted in (item.rubric.name, item.rubric.rubric_id)
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
        from harness.redaction import Redactor, redact_json

        redact = Redactor()
        if isinstance(report.longrepr, str):
            report.longrepr = redact(report.longrepr)
        elif isinstance(report.longrepr, tuple) and len(report.longrepr) == 3:
            path, line, reason = report.longrepr
            report.longrepr = (path, line, redact(reason))
        report.sections = [(title, redact(text)) for title, text in report.sections]
        done = item.stash.get(PROPERTIES_REDACTED, 0)
        if len(item.user_properties) > done:
            # the item's own list, each entry once: the reports after this one copy it already clean
            item.user_properties[done:] = [(name, redact_json(value, redact))
                                           for name, value in item.user_properties[done:]]
            item.stash[PROPERTIES_REDACTED] = len(item.user_properties)
            report.user_properties = list(item.user_properties)  # pytest's copy of the item's list
        if hasattr(report, "wasxfail"):
            report.wasxfail = redact(report.wasxfail)
    return report


def _record_verdict(item: pytest.Item, report: pytest.TestReport) -> None:
    from harness.nodes import CaseItem

    if isinstance(item, CaseItem) and any(name == "harness_outcome" for name, _ in item.user_properties):
        from harness.report_text import default_verdict, verdict_word
        from harness.session import harness_session

        word = verdict_word(report)
        outcome = next(value for name, value in item.user_properties if name == "harness_outcome")
        if word != default_verdict(outcome):  # the usual word is implied by the outcome: no write for it
            hs = harness_session(item.config)
            hs.store.record_verdict(hs.cycle_id, item.nodeid, word)


@pytest.hookimpl(optionalhook=True)  # pytest-xdist's hook: the plugin also runs without xdist
def pytest_configure_node(node) -> None:
    """pytest-xdist: the workers of one session share one cycle (the token names the session)."""
    config = node.config
    if SESSION_TOKEN not in config.stash:
        import uuid

        config.stash[SESSION_TOKEN] = uuid.uuid4().hex
    node.workerinput["harness_session_token"] = config.stash[SESSION_TOKEN]


@pytest.hookimpl(tryfirst=True)
def pytest_runtestloop(session: pytest.Session) -> None:
    """Start every case's work concurrently; pytest's own loop then reports them in order."""
    config = session.config
    if not config.stash.get(ACTIVE, False) or config.option.collectonly or hasattr(config, "workerinput"):
        return None  # xdist workers run the items they are sent, one at a time
    from harness.nodes import CaseItem
    from harness.scheduler import CaseScheduler
    from harness.session import harness_session

    hs = harness_session(config)
    cases = [item for item in session.items if isinstance(item, CaseItem)]
    workers = len(cases) if hs.batch else min(hs.concurrency, len(cases))
    if workers > 1:
        hs.scheduler = CaseScheduler(max_workers=workers, stop=hs.stop)
        hs.scheduler.submit_all([(item.nodeid, item.run_case) for item in cases])
    return None


def _stop(config: pytest.Config, reason: str) -> None:
    if config.stash.get(ACTIVE, False):
        from harness.session import harness_session

        hs = harness_session(config)
        hs.stop.set(reason)
        if hs.scheduler is not None and hs.scheduler.shutdown(reason):
            config.get_terminal_writer().line("harness: stopped waiting for running cases (Ctrl-C twice)", yellow=True)
        if hs._policy is not None:
            hs._policy.close()  # fails requests still waiting for a batch, cancels running batches


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """The run loop ended (done, -x, --maxfail or Ctrl-C): cancel queued cases, stop running ones.

    A run the cost cap cut short is not a green run: when items were left not run and nothing else
    failed, the exit status is 82 (seed 004's quota exceeded) instead of 0.
    """
    _stop(session.config, "the session is stopping (-x, --maxfail or Ctrl-C)")
    if exitstatus == 0 and not hasattr(session.config, "workerinput"):
        from harness.errors import ExitCode
        from harness.report_text import not_run_by_cost_cap

        if not_run_by_cost_cap(session.config.pluginmanager.get_plugin("terminalreporter")):
            session.exitstatus = int(ExitCode.QUOTA_EXCEEDED)
            session.config.stash[CUT_SHORT_BY_COST_CAP] = True


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    if hasattr(config, "workerinput"):
        return
    if not enabled(config):
        hint = forgotten_hint(config)
        if hint:
            terminalreporter.write_line(hint, yellow=True)
        return
    from harness.report_text import (not_run_by_cost_cap, properties_of, summary_lines, tally, unpriced_models,
                                     verdict_word)

    reports = [r for key in ("passed", "failed", "skipped", "xfailed", "xpassed", "error")
               for r in terminalreporter.stats.get(key, []) if getattr(r, "when", "call") == "call"]
    tallies = tally((r.nodeid, properties_of(r), verdict_word(r)) for r in reports)
    if not tallies:
        return
    cycles = sorted({p.get("harness_cycle") for r in reports if (p := properties_of(r)).get("harness_cycle")})
    terminalreporter.write_sep("=", "harness summary")
    terminalreporter.write_line(f"cycle {', '.join(cycles)} - records in {config.stash[SETTINGS]['work_dir']}")
    from harness.records import reconciliation_note

    for note in filter(None, (reconciliation_note(config.stash[SETTINGS]["work_dir"], c) for c in cycles)):
        terminalreporter.write_line(note, yellow=True)  # what this session finished of a killed one's records
    for line in summary_lines(tallies):
        terminalreporter.write_line(line)
    for model in unpriced_models(properties_of(r) for r in reports):  # the cost column leaves them out
        from harness.llm.prices import missing_price_line

        terminalreporter.write_line(missing_price_line(model), yellow=True)
    if config.stash.get(ACTIVE, False):
        from harness.session import harness_session

        hs = harness_session(config)
        if hs.stop.reason and "cost cap" in hs.stop.reason:
            not_run = not_run_by_cost_cap(terminalreporter)
            line = f"stopped starting new work: {hs.stop.reason}; {not_run} item{'s' * (not_run != 1)} not run"
            if config.stash.get(CUT_SHORT_BY_COST_CAP, False):
                from harness.errors import ExitCode

                line += f" (exit status {int(ExitCode.QUOTA_EXCEEDED)})"
            terminalreporter.write_line(line, yellow=True)


def pytest_unconfigure(config: pytest.Config) -> None:
    if config.stash.get(ACTIVE, False):
        from harness.session import harness_session

        harness_session(config).close()
    if config.stash.get(PROVIDERS_ADDED, []):
        from harness.llm.providers import unregister_provider

        for name in config.stash[PROVIDERS_ADDED]:
            unregister_provider(name)
