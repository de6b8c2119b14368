"""The harness's command-line options and ini settings: declared once, parsed once (in pytest_configure).

Every option has an ini twin where a project would set it once; a bad value, on the command line or in the
ini file, is one usage error naming the option and the fix. The parsed settings are plain values (paths,
numbers, text), so pytest-xdist can ship them to workers.
"""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

import pytest

from harness.base.argtypes import choice, dollars, seconds, whole_number
from harness.face.activation import add_enable_ini, add_option

CACHE_MODES = ("auto", "off", "read", "write", "refresh")
DEFAULT_CONCURRENCY = 16
_positive = whole_number(1)
_indeterminate = choice("skip", "fail")


def add_options(parser: pytest.Parser) -> None:
    """Declare the harness's options (one group, each with its ini twin)."""
    group = parser.getgroup("harness", "pytest-rubric: evaluate agents against rubrics")
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
    add_option(group, "--harness-cache", dest="harness_cache", metavar="MODE", default=None,
                    type=choice(*CACHE_MODES),
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
    parser.addini("harness_data_modules", "modules (and their submodules) whose functions case files and dataset "
                  "rows may name in their checks and transforms, one a line (default: none; only rubrics name "
                  "code)", type="linelist", default=[])
    parser.addini("harness_unconfined", "command producers, revisers and evaluators that run without the sandbox, "
                  "one a line: agent.role or agent (default: none; every command runs confined)", type="linelist",
                  default=[])
    parser.addini("harness_rubrics_dir", "folder of rubric files (default: rubrics)", default="rubrics")
    parser.addini("harness_prompts_dir", "the prompt registry: folder of the prompts skills name by prompt_id "
                  "(default: prompts)", default="prompts")
    parser.addini("harness_suite", "agents.yaml used to calibrate judged rubrics (default: suites/agents.yaml)",
                  default="suites/agents.yaml")
    parser.addini("harness_indeterminate", "skip or fail items nobody could score (default: skip)", default="skip")



def _model_name(text: str) -> str:
    """An option's model name, ``provider/name`` (argparse type); its provider is checked once plugins have
    registered theirs (``_register_providers``)."""
    if not text.strip() or text != text.strip():
        raise argparse.ArgumentTypeError(f"{text!r} is not a model name (fix: write provider/name, e.g. "
                                         "openai/gpt-4.1-mini)")
    return text


def rubrics_dir(config: pytest.Config) -> Path:
    return Path(config.rootpath) / config.getini("harness_rubrics_dir")


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
    try:  # a folder made and removed at once: permission bits do not tell (root, /proc, a read-only mount)
        os.rmdir(tempfile.mkdtemp(prefix=".harness-probe-", dir=existing))
    except OSError as exc:
        where = f" ({exc.strerror or exc})" if existing == work else f" ({existing}: {exc.strerror or exc})"
        raise pytest.UsageError(f"{name} {work}: cannot write there{where} (fix: give a folder you can write to)"
                                ) from None
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


def _data_modules(config: pytest.Config) -> tuple[str, ...]:
    """ini harness_data_modules: dotted module names, the only code data (a case, a dataset row) may name."""
    modules = []
    for entry in config.getini("harness_data_modules"):
        if not all(part.isidentifier() for part in entry.split(".")):
            raise pytest.UsageError(f"ini harness_data_modules: {entry!r} is not a module name (fix: list dotted "
                                    "module names such as my_checks or my_project.checks, one a line)")
        modules.append(entry)
    return tuple(modules)


def _unconfined(config: pytest.Config) -> tuple[str, ...]:
    """ini harness_unconfined: the runners (``agent.role``, or ``agent`` for all its roles) the user lets run
    without the sandbox."""
    names = []
    for entry in config.getini("harness_unconfined"):
        agent, dot, role = entry.partition(".")
        if not agent.strip() or (dot and role not in ("producer", "reviser", "evaluator")):
            raise pytest.UsageError(f"ini harness_unconfined: {entry!r} is not a runner (fix: list agent.producer, "
                                    "agent.reviser, agent.evaluator or an agent's name, one a line)")
        names.append(entry)
    return tuple(names)


def read_settings(config: pytest.Config) -> dict:
    """Every harness option, from the command line or its ini twin; parsed once, in pytest_configure."""
    root = Path(config.rootpath)
    return dict(
        work_dir=_work_dir(config, root), rubrics_dir=rubrics_dir(config).resolve(), import_root=root,
        prompts_dir=(root / config.getini("harness_prompts_dir")).resolve(),
        input_roots=_input_roots(config, root), data_modules=_data_modules(config),
        unconfined_runners=_unconfined(config),
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
