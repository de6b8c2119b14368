"""Importers: another tool's evaluation config turned into this harness's files, so a team moves in minutes.

``harness import promptfoo promptfooconfig.yaml`` (:mod:`harness.apps.importers.promptfoo`) and ``harness import
openai-evals SPEC.yaml SAMPLES.jsonl`` (:mod:`harness.apps.importers.openai_evals`) each build a :class:`Plan`: the
files to write (a rubric, ``suites/NAME/agents.yaml``, case files, template files, a dataset) and one line per
thing that does not carry over. :func:`write_plan` writes it, all or nothing, never over an existing file unless
told to, and :func:`load_problems` reads the written files back with the harness's own loaders.

A config's data fills slots: every file it names lies inside the project (its own folder or ``--out``, symbolic
links resolved), checked before anything is written, and no imported file names code (a ``python:`` check, a
``module:function`` transform): what would need code is a ``not carried over:`` line saying what to write
instead.

A bad input file is one :class:`ImportInputError` naming the file and the field (exit code 64), never a
traceback.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from harness.base import slots
from harness.base.errors import ExitCode, HarnessConfigError, HarnessError
from harness.base.fileio import atomic_write_text
from harness.loading import BUILTIN_RUNNER_KINDS, load_cases, load_rubric, load_suite
from harness.loading.pairwise import PAIRWISE_SUFFIXES, load_pairwise

__all__ = ["ImportInputError", "Plan", "dump_yaml", "identifier", "load_problems", "protect_literal_braces",
           "write_plan"]

PYTEST_CONFIG_FILES = ("pytest.ini", "pyproject.toml", "tox.ini", "setup.cfg")
NO_REVISION = {"max_attempts": 1, "escalate_on_fail": False}
"""The loop policy of an imported suite: one attempt, and a miss fails (neither tool revises or escalates)."""


class ImportInputError(HarnessConfigError):
    """The file being imported is not what its tool accepts: one line naming the file and the field."""

    exit_code = ExitCode.USAGE_ERROR


class ImportTargetError(HarnessError):
    """A file the import would write already exists (and ``--force`` was not given)."""

    exit_code = ExitCode.CANT_CREATE


@dataclass
class Plan:
    """What an import writes (paths relative to the output folder, in writing order) and what it leaves out."""

    name: str
    files: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    @property
    def suite_dir(self) -> str:
        return f"suites/{self.name}"

    @property
    def rubric_file(self) -> str:
        return f"rubrics/{self.name}.yaml"

    def add(self, path: str, text: str) -> None:
        self.files[path] = text if text.endswith("\n") else text + "\n"

    def ordered(self) -> list[str]:
        """The files in the order a reader takes them in: the rubric, agents.yaml, templates, data, cases."""
        def rank(path: str) -> int:
            if path.startswith("rubrics/"):
                return 0
            if path.endswith("/agents.yaml"):
                return 1
            if "/judges/" in path or "/prompts/" in path:
                return 2
            if "/data/" in path:
                return 3
            return 4 if path.endswith((".cases.yaml", ".pairs.yaml", ".pairwise.yaml")) else 5
        return sorted(self.files, key=rank)

    def not_carried(self, where: str, kind: str | None, why: str, instead: str | None = None) -> str:
        """``not carried over: tests[3].assert[1] (javascript): <why>; <what to do instead>``; the line, for an
        importer that may take it back once it knows more (a library grader that carries the assert after all)."""
        line = f"not carried over: {where}" + (f" ({kind})" if kind else "") + f": {why}"
        if instead:
            line += f"; {instead}"
        if line not in self.notes:
            self.notes.append(line)
        return line

    def case_files(self) -> list[str]:
        return [path for path in self.files if path.endswith(".cases.yaml")]


# --- YAML and names ----------------------------------------------------------------------------


class _Dumper(yaml.SafeDumper):
    """Block style, text with line breaks as ``|`` blocks, keys in the order written."""


def _text(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    if "\n" in value and not any(c in value for c in "\r\t") and value == value.rstrip(" "):
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style="|")
    return dumper.represent_scalar("tag:yaml.org,2002:str", value)


def _number(dumper: yaml.SafeDumper, value: float) -> yaml.ScalarNode:
    if value.is_integer() and abs(value) < 1e15:  # weight: 1, not 1.0
        return dumper.represent_int(int(value))
    return dumper.represent_float(value)


_Dumper.add_representer(str, _text)
_Dumper.add_representer(float, _number)
_Dumper.ignore_aliases = lambda self, data: True  # type: ignore[method-assign]  # a shared dict is written twice
_Dumper.add_multi_representer(dict, yaml.representer.SafeRepresenter.represent_dict)  # the loader's LineDict


def dump_yaml(data: Any, *, comment: str | None = None) -> str:
    """``data`` as block YAML (120 columns), after ``comment`` lines (each written as ``# ...``)."""
    text = yaml.dump(data, Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=120, default_flow_style=False)
    header = "".join(f"# {line}".rstrip() + "\n" for line in comment.splitlines()) if comment else ""
    return header + text


def identifier(text: str, default: str = "item") -> str:
    """A name safe as an agent, dimension or file name: lower-case letters, digits and ``_``."""
    name = re.sub(r"[^a-z0-9]+", "_", str(text).lower()).strip("_")[:48].strip("_")
    if not name:
        return default
    return name if name[0].isalpha() else f"{default}_{name}"


def unique(name: str, taken: Iterable[str]) -> str:
    """``name``, or ``name_2``, ``name_3``... when it is taken."""
    used = set(taken)
    if name not in used:
        return name
    number = 2
    while f"{name}_{number}" in used:
        number += 1
    return f"{name}_{number}"


_LITERAL_SLOT = re.compile(r"(?<!\{)\{([A-Za-z_]\w*(?:\.\w+)*)\}(?!\})")


def protect_literal_braces(text: str) -> tuple[str, list[str]]:
    """``text`` with every single-brace ``{name}`` written ``{ name }``: text in the source tool, a slot here.

    Returns the new text and the names it protected (``{{ name }}`` slots are left alone). A Nunjucks filter we
    do not have, ``{{ name | trim }}``, is spaced to ``{ { name | trim } }``: text, where as written it would be
    refused as an unknown filter (harness/base/slots.py)."""
    found: list[str] = []

    def spaced(match: re.Match[str]) -> str:
        found.append(match[1])
        return "{ " + match[1] + " }"

    def unfiltered(match: re.Match[str]) -> str:  # `{{ q | trim }}`: a filter we do not have would be refused
        return "{ {" + match[1] + "} }" if slots.filter_problem(match[0]) else match[0]

    text = re.sub(r"\{\{(.*?)\}\}", unfiltered, text, flags=re.DOTALL)
    return _LITERAL_SLOT.sub(spaced, text), list(dict.fromkeys(found))


def unsupported_template_parts(text: str) -> list[str]:
    """The template syntax of Jinja or Nunjucks that is not a slot: tags, comments, filters, expressions."""
    parts = [m[0] for m in re.finditer(r"\{%.*?%\}|\{#.*?#\}", text, re.DOTALL)]
    for match in re.finditer(r"\{\{(.*?)\}\}", text, re.DOTALL):
        if not slots.SLOT.fullmatch(match[0]):
            parts.append(match[0])
    return list(dict.fromkeys(" ".join(p.split()) for p in parts))


# --- writing -----------------------------------------------------------------------------------


def write_plan(plan: Plan, out: Path, *, force: bool = False) -> list[Path]:
    """Write the plan's files under ``out``, all of them or none; an existing file stops the import first, unless
    ``force``.

    Every file is staged first, written through the redaction filter into a folder under ``out`` (the same
    filesystem), then renamed into place, each atomically. A failure at any point (a file where a folder goes, a
    full disk, Ctrl-C) takes back what this import put in place, restores the files it overwrote and removes
    the folders it made: no file of the import is left, and the files that were there are untouched."""
    targets = [out / rel for rel in plan.ordered()]
    if not force:
        existing = [path for path in targets if path.exists()]
        if existing:
            others = f" (and {len(existing) - 1} more)" if len(existing) > 1 else ""
            raise ImportTargetError(f"import: {existing[0]} exists{others}: nothing was written (fix: --force to "
                                    "overwrite, or --out another folder)")
    for path in targets:
        blocked = _blocked(path)
        if blocked:
            raise ImportTargetError(f"import: cannot write {path}: {blocked}: nothing was written (fix: move it "
                                    "away, or --out another folder)")
    made: list[Path] = []  # the folders this import made, outermost first
    placed: list[tuple[Path, Path | None]] = []  # each file put in place, and the copy of the file it replaced
    stage: Path | None = None
    current = out
    try:
        _make_folders(out, made)
        stage = Path(tempfile.mkdtemp(prefix=".harness-import-", dir=out))
        for number, rel in enumerate(plan.ordered()):
            current = targets[number]
            atomic_write_text(stage / str(number), plan.files[rel])  # a secret in the imported config redacted
        for number, path in enumerate(targets):
            current = path
            _make_folders(path.parent, made)
            kept = _keep(path, stage / f"{number}.replaced") if path.exists() else None
            os.replace(stage / str(number), path)
            placed.append((path, kept))
    except BaseException as exc:
        _take_back(placed, stage, made)
        if isinstance(exc, OSError):
            raise ImportTargetError(f"import: cannot write {current}: {exc.strerror or exc}: nothing was written"
                                    ) from None
        raise
    shutil.rmtree(stage, ignore_errors=True)
    return targets


def _blocked(path: Path) -> str | None:
    """Why ``path`` cannot be written as a file, told before anything is: a folder there, or a file where one of
    its folders goes."""
    if path.is_dir():
        return "it is a folder"
    folder = path.parent
    while not os.path.lexists(folder) and folder != folder.parent:
        folder = folder.parent
    return None if folder.is_dir() else f"{folder} is not a folder"


def _make_folders(folder: Path, made: list[Path]) -> None:
    missing = []
    while not os.path.lexists(folder) and folder != folder.parent:
        missing.append(folder)
        folder = folder.parent
    for each in reversed(missing):
        each.mkdir()
        made.append(each)


def _keep(path: Path, copy: Path) -> Path:
    """A copy of the file ``path`` that the import overwrites (a hard link: the file stays in place meanwhile)."""
    try:
        os.link(path, copy)
    except OSError:  # a filesystem without hard links
        shutil.copy2(path, copy)
    return copy


def _take_back(placed: list[tuple[Path, Path | None]], stage: Path | None, made: list[Path]) -> None:
    """Undo an import that failed part of the way: its files removed, the files it replaced put back."""
    for path, kept in reversed(placed):
        with contextlib.suppress(OSError):
            if kept is not None:
                os.replace(kept, path)
            else:
                path.unlink()
    if stage is not None:
        shutil.rmtree(stage, ignore_errors=True)
    for folder in reversed(made):
        with contextlib.suppress(OSError):
            folder.rmdir()


def pytest_opt_in(plan: Plan, out: Path) -> str | None:
    """A ``pytest.ini`` that opts the folder in, when it has no pytest configuration; else a hint, if needed."""
    present = [name for name in PYTEST_CONFIG_FILES if (out / name).is_file()]
    if not present:
        plan.add("pytest.ini", "[pytest]\nharness = true\n")
        return None
    for name in present:
        text = (out / name).read_text(encoding="utf-8", errors="replace")
        if re.search(r"^\s*harness\s*=\s*true\s*$", text, re.MULTILINE):
            return None
    return (f"next: opt the project in: add `harness = true` under [pytest] in {present[0]}"
            if present[0] != "pyproject.toml" else
            "next: opt the project in: add `harness = true` under [tool.pytest.ini_options] in pyproject.toml")


def load_problems(plan: Plan, out: Path) -> list[str]:
    """Read the written files back with the harness's loaders; one line per file that does not load."""
    problems: list[str] = []
    root = out.resolve()
    rubric = root / plan.rubric_file
    try:
        load_rubric(rubric, import_root=root, input_roots=(root,))
    except HarnessError as exc:
        problems.append(str(exc))
    suite_path = root / plan.suite_dir / "agents.yaml"
    try:
        suite = load_suite(suite_path, rubrics_dir=root / "rubrics", input_roots=(root,),
                           runner_kinds=tuple(dict.fromkeys((*BUILTIN_RUNNER_KINDS, "template"))))
    except HarnessError as exc:
        return [*problems, str(exc)]
    for rel in plan.case_files():
        try:
            load_cases(root / rel, agents=suite.agents, input_roots=(root,))
        except HarnessError as exc:
            problems.append(str(exc))
    for rel in [path for path in plan.files if path.endswith(PAIRWISE_SUFFIXES)]:
        try:
            comparison = load_pairwise(root / rel, suite=suite, roots=(root,))
            load_cases(comparison.cases, agents=suite.agents, input_roots=(root,))
        except HarnessError as exc:
            problems.append(str(exc))
    return problems


def mapping_at(raw: Any, path: Path, where: str, what: str = "a mapping") -> Mapping[str, Any]:
    """``raw`` when it is a mapping, else the one-line input error naming ``where``."""
    if not isinstance(raw, Mapping):
        raise ImportInputError(path, where or None, f"expected {what}, got {type(raw).__name__}")
    return raw
