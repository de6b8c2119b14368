"""pytest hook implementations: options, collection, the --rubric filter and the summary.

This module is imported in every pytest session (pytest11 entry point), so it stays light: the
heavy modules are imported only once a file of ours is collected. A session that collects none of
our files prints nothing and writes nothing.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from harness.session import HarnessSession

RUBRIC_SUFFIXES = (".yaml", ".yml")
CASE_SUFFIXES = (".cases.yaml", ".cases.yml")
ACTIVE = pytest.StashKey[bool]()


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    from harness import hookspecs

    pluginmanager.add_hookspecs(hookspecs)


def _indeterminate_policy(value: str) -> str:
    if value not in ("skip", "fail"):
        raise argparse.ArgumentTypeError(f"{value!r} is not skip or fail")
    return value


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("harness", "pytest-rubric: evaluate agents against rubrics")
    group.addoption("--rubric", dest="harness_rubric", metavar="NAME", default=None,
                    help="run only the items scored by rubric NAME (a file stem in the rubrics folder); "
                         "default: all")
    group.addoption("--harness-work-dir", dest="harness_work_dir", metavar="DIR", default=None,
                    help="where attempts, run logs and the SQLite records go (default: ini harness_work_dir, "
                         "else WORK under the rootdir)")
    group.addoption("--harness-indeterminate", dest="harness_indeterminate", metavar="skip|fail", default=None,
                    type=_indeterminate_policy,
                    help="what an item nobody could score becomes: skip (default) or fail")
    parser.addini("harness_work_dir", "work folder for records (default: WORK)", default="WORK")
    parser.addini("harness_rubrics_dir", "folder of rubric files (default: rubrics)", default="rubrics")
    parser.addini("harness_suite", "agents.yaml used to calibrate judged rubrics (default: suites/agents.yaml)",
                  default="suites/agents.yaml")
    parser.addini("harness_indeterminate", "skip or fail items nobody could score (default: skip)", default="skip")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "harness_case: an agent case run by pytest-rubric")
    rubric = config.getoption("harness_rubric")
    if rubric is not None:
        known = known_rubrics(_rubrics_dir(config))
        if rubric not in known:
            listing = ", ".join(known) if known else f"none: {_rubrics_dir(config)} has no rubric files"
            raise pytest.UsageError(f"--rubric {rubric}: no such rubric (known: {listing})")


def _rubrics_dir(config: pytest.Config) -> Path:
    return Path(config.rootpath) / config.getini("harness_rubrics_dir")


def known_rubrics(folder: Path) -> list[str]:
    if not folder.is_dir():
        return []
    return sorted({p.stem for p in folder.iterdir() if p.suffix in RUBRIC_SUFFIXES})


def _activate(config: pytest.Config) -> HarnessSession:
    """Set up the harness the first time one of our files is collected."""
    from harness import runners
    from harness.session import SESSION_KEY, HarnessSession

    if not config.stash.get(ACTIVE, False):
        config.stash[ACTIVE] = True
        root = Path(config.rootpath)
        work = config.getoption("harness_work_dir") or config.getini("harness_work_dir")
        policy = config.getoption("harness_indeterminate") or config.getini("harness_indeterminate")
        if policy not in ("skip", "fail"):
            raise pytest.UsageError(f"ini harness_indeterminate = {policy!r}: use skip or fail")
        config.stash[SESSION_KEY] = HarnessSession(
            config=config, work_dir=(root / work).resolve(), rubrics_dir=_rubrics_dir(config).resolve(),
            import_root=root, indeterminate=policy)
        config.pluginmanager.register(runners, "harness-builtin-runners")
    return config.stash[SESSION_KEY]


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    name = file_path.name
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
    wanted = config.getoption("harness_rubric")
    if wanted is None:
        return
    keep, drop = [], []
    for item in items:
        (keep if isinstance(item, HarnessItem) and item.rubric.name == wanted else drop).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node) -> None:  # pytest-xdist: workers share the controller's cycle
    if node.config.stash.get(ACTIVE, False):
        from harness.session import harness_session

        node.workerinput["harness_cycle_id"] = harness_session(node.config).cycle_id


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    if hasattr(config, "workerinput"):
        return
    from harness.report_text import properties_of, summary_lines, tally

    reports = [r for key in ("passed", "failed", "skipped", "xfailed", "xpassed", "error")
               for r in terminalreporter.stats.get(key, []) if getattr(r, "when", "call") == "call"]
    tallies = tally(properties_of(r) for r in reports)
    if not tallies:
        return
    cycles = sorted({p.get("harness_cycle") for r in reports if (p := properties_of(r)).get("harness_cycle")})
    terminalreporter.write_sep("=", "harness summary")
    where = ""
    if config.stash.get(ACTIVE, False):
        from harness.session import harness_session

        where = f" - records in {harness_session(config).work_dir}"
    terminalreporter.write_line(f"cycle {', '.join(cycles)}{where}")
    for line in summary_lines(tallies):
        terminalreporter.write_line(line)


def pytest_unconfigure(config: pytest.Config) -> None:
    if config.stash.get(ACTIVE, False):
        from harness.session import harness_session

        session = harness_session(config)
        if session._store is not None:
            session.store.close()
