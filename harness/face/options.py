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
from harness.base.capture import INPUT_CAPTURES, OUTPUT_CAPTURES, Capture
from harness.face.activation import add_enable_ini, add_option
from harness.face.shards import parse_shard

CACHE_MODES = ("auto", "off", "read", "write", "refresh")
DEFAULT_CONCURRENCY = 16
_positive = whole_number(1)
_indeterminate = choice("skip", "fail")


EXIT_STATUS_MODES = ("pytest", "item")

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
    add_option(group, "--harness-prompt-cache", dest="harness_prompt_cache", metavar="on|off", default=None,
               type=_on_off, help="mark the judges' stable prompt prefix (evaluator prompt, rubric, examples) as "
                                  "cacheable for the provider's prompt cache: on (default: ini harness_prompt_cache, "
                                  "else on) or off")
    add_option(group, "--harness-batch", dest="harness_batch", action="store_true", default=None,
                    help="send the session's model requests through the Message Batches API (half price, "
                         "slower); each batch is recorded in the work folder, so a run that is interrupted and "
                         "started again takes its answers instead of submitting it again; default: ini harness_batch, "
                         "else off")
    add_option(group, "--harness-batch-submit", dest="harness_batch_submit", action="store_true", default=None,
                    help="submit the session's model requests as Message Batches, record them in the work folder and "
                         "end without waiting (their items are not scored this time); the same command with "
                         "--harness-batch instead takes the answers. Default: off")
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
    parser.addini("harness_prompt_cache", "on or off: judges mark their stable prefix as cacheable (default: on)",
                  default="on")
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
    parser.addini("harness_approved_commands", "command producers, revisers and evaluators whose command the "
                  "SafetyGuard flags and a person approved, one a line: agent.role or agent (default: none); they "
                  "still run in the sandbox", type="linelist", default=[])
    parser.addini("harness_rubrics_dir", "folder of rubric files (default: rubrics)", default="rubrics")
    parser.addini("harness_prompts_dir", "the prompt registry: folder of the prompts skills name by prompt_id "
                  "(default: prompts)", default="prompts")
    parser.addini("harness_suite", "agents.yaml used to calibrate judged rubrics (default: suites/agents.yaml)",
                  default="suites/agents.yaml")
    parser.addini("harness_indeterminate", "skip or fail items nobody could score (default: skip)", default="skip")
    add_option(group, "--harness-exit-status", dest="harness_exit_status", metavar="pytest|item", default=None,
               type=choice(*EXIT_STATUS_MODES),
               help="the run's exit status: pytest's own (default), or item: the most severe failed item's exit "
                    "code (65 a command's data error, 80 blocked, 84 validation failed, 143 SIGTERM, ...)")
    parser.addini("harness_exit_status", "pytest (default) or item: the exit status is the most severe failed "
                  "item's exit code", default="pytest")
    add_option(group, "--harness-shard", dest="harness_shard", metavar="I/N", default=None, type=parse_shard,
               help="run shard I of N: a fixed part of the session's items (by a hash of each node id; adding an item "
                    "moves no other), the others deselected; merge the shards' work folders with harness merge "
                    "(default: ini harness_shard, else every item)")
    parser.addini("harness_shard", "run only shard I/N of the items, e.g. 2/3 (default: all; usually given per CI job "
                  "as --harness-shard)", default="")

    add_capture_options(parser, group)



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


def _runners(config: pytest.Config, ini: str) -> tuple[str, ...]:
    """ini ``harness_unconfined`` (the runners the user lets run without the sandbox) or
    ``harness_approved_commands`` (those whose flagged command a person approved): each ``agent.role``, or
    ``agent`` for all its roles; a pipeline's stage is ``<pipeline>.<stage>.producer``."""
    names = []
    for entry in config.getini(ini):
        parts = entry.strip().split(".")
        if not all(parts) or len(parts) > 3 or (len(parts) > 1 and parts[-1] not in ("producer", "reviser",
                                                                                       "evaluator")):
            raise pytest.UsageError(f"ini {ini}: {entry!r} is not a runner (fix: list agent.producer, "
                                    "agent.reviser, agent.evaluator, pipeline.stage.producer or an agent's name, "
                                    "one a line)")
        names.append(entry.strip())
    return tuple(names)


def add_capture_options(parser: pytest.Parser, group) -> None:  # noqa: ANN001 - pytest's OptionGroup
    """The capture settings (what a run keeps of inputs and outputs; its execution trace) and the OpenTelemetry
    exporter, each with its ini twin."""
    add_option(group, "--harness-capture", dest="harness_capture", metavar="on|off", default=None, type=_on_off,
               help="write the execution trace (WORK/traces/CYCLE.jsonl) and keep inputs and outputs as the capture "
                    "settings say (default: ini harness_capture, else on)")
    add_option(group, "--harness-capture-retention-days", dest="harness_capture_retention_days", metavar="DAYS|never",
               default=None, type=_retention_days,
               help="delete traces last written more than DAYS days ago when a run starts; never keeps them "
                    f"(default: ini harness_capture_retention_days, else {DEFAULT_RETENTION_DAYS})")
    add_option(group, "--harness-capture-inputs", dest="harness_capture_inputs", metavar="|".join(INPUT_CAPTURES),
               default=None, type=choice(*INPUT_CAPTURES),
               help="what traces and execution results keep of an item's inputs: none, hashed (each value's "
                    "sha256; default) or full (the values, secrets redacted)")
    add_option(group, "--harness-capture-outputs", dest="harness_capture_outputs", metavar="|".join(OUTPUT_CAPTURES),
               default=None, type=choice(*OUTPUT_CAPTURES),
               help="what traces and execution results keep of an item's output: none, summary (type, size, "
                    "sha256 and the first characters; default) or full (secrets redacted)")
    add_option(group, "--harness-otel", dest="harness_otel", action="store_true", default=None,
               help="export each item and model call as OpenTelemetry spans (GenAI semantic conventions) over "
                    "OTLP/HTTP to OTEL_EXPORTER_OTLP_ENDPOINT; needs pip install 'pytest-rubric[otel]' "
                    "(default: ini harness_otel, else off)")
    parser.addini("harness_capture", "write execution traces and capture inputs and outputs: on or off "
                  "(default: on)", default="on")
    parser.addini("harness_capture_retention_days", "days a trace is kept after its last line, or never "
                  f"(default: {DEFAULT_RETENTION_DAYS})", default=str(DEFAULT_RETENTION_DAYS))
    parser.addini("harness_capture_inputs", "inputs kept in traces and execution results: none, hashed or full "
                  "(default: hashed)", default="hashed")
    parser.addini("harness_capture_outputs", "outputs kept in traces and execution results: none, summary or full "
                  "(default: summary)", default="summary")
    parser.addini("harness_otel", "export spans over OpenTelemetry (default: false)", type="bool", default=False)


DEFAULT_RETENTION_DAYS = 30
_ON = {"on": True, "true": True, "yes": True, "1": True, "off": False, "false": False, "no": False, "0": False}


def _on_off(text: str) -> bool:
    try:
        return _ON[text.strip().lower()]
    except KeyError:
        raise argparse.ArgumentTypeError(f"{text!r} is not on or off (fix: write on or off)") from None


def _retention_days(text: str) -> int | str:
    """A whole number of days (1 or more), or ``never``. 0 is refused: it could mean "delete at once" as well as
    "never delete", and a trace deleted by a misreading cannot be had back."""
    if text.strip().lower() == "never":
        return "never"
    try:
        days = int(text)
    except ValueError:
        days = None
    if days is None or days < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of days (fix: give 1 or more days, such as "
                                         f"{DEFAULT_RETENTION_DAYS}, or never to keep traces until you delete them)")
    return days


def capture_settings(config: pytest.Config) -> Capture:
    """The run's capture settings, from the options or their ini twins."""
    retention = _setting(config, "harness_capture_retention_days", _retention_days)
    return Capture(enabled=_setting(config, "harness_capture", _on_off) is not False,
                   retention_days=None if retention == "never" else (retention or DEFAULT_RETENTION_DAYS),
                   include_inputs=_setting(config, "harness_capture_inputs", choice(*INPUT_CAPTURES)) or "hashed",
                   include_outputs=_setting(config, "harness_capture_outputs", choice(*OUTPUT_CAPTURES)) or "summary")


def _otel(config: pytest.Config) -> bool:
    """--harness-otel (ini harness_otel): on only where the exporter can be made, else one usage error."""
    if not _setting(config, "harness_otel", bool):
        return False
    from harness.records.otel import otel_problem

    problem = otel_problem()
    if problem:
        flag = "--harness-otel" if config.getoption("harness_otel", None) else "ini harness_otel"
        raise pytest.UsageError(f"{flag}: {problem}")
    return True


def read_settings(config: pytest.Config) -> dict:
    """Every harness option, from the command line or its ini twin; parsed once, in pytest_configure."""
    root = Path(config.rootpath)
    return dict(
        work_dir=_work_dir(config, root), rubrics_dir=rubrics_dir(config).resolve(), import_root=root,
        prompts_dir=(root / config.getini("harness_prompts_dir")).resolve(),
        input_roots=_input_roots(config, root), data_modules=_data_modules(config),
        unconfined_runners=_runners(config, "harness_unconfined"),
        approved_runners=_runners(config, "harness_approved_commands"),
        indeterminate=_setting(config, "harness_indeterminate", _indeterminate),
        exit_status=_setting(config, "harness_exit_status", choice(*EXIT_STATUS_MODES)) or "pytest",
        concurrency=_setting(config, "harness_concurrency", _positive) or DEFAULT_CONCURRENCY,
        judge_samples=_setting(config, "harness_judge_samples", _positive) or 1,
        judge_model=_setting(config, "harness_judge_model", _model_name) or None,
        max_cost_usd=_setting(config, "harness_max_cost", dollars),
        cache_mode=_setting(config, "harness_cache", choice(*CACHE_MODES)) or "auto",
        batch=bool(_setting(config, "harness_batch", bool)) or bool(config.getoption("harness_batch_submit")),
        batch_submit=bool(config.getoption("harness_batch_submit")),
        prompt_cache=_setting(config, "harness_prompt_cache", _on_off) is not False,
        rate_limits={flag: _setting(config, f"harness_{flag}", _positive) for flag in ("rpm", "itpm", "otpm")},
        prices_path=_prices_path(config, root),
        progress_interval_s=_setting(config, "harness_progress_interval", seconds) or 0.0,
        capture=capture_settings(config), otel=_otel(config),
        shard=_setting(config, "harness_shard", parse_shard),
    )
