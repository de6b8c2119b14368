"""Rubric versioning (seed 000 section 3): which bump a rubric change needs, and whether it got it.

1. PATCH (1.0.0 -> 1.0.1): wording changes, clarifications;
2. MINOR (1.0.0 -> 1.1.0): new scoring levels, weight adjustments below 0.05;
3. MAJOR (1.0.0 -> 2.0.0): new dimensions, weight changes above 0.05, threshold changes.

The seed leaves a weight change of exactly 0.05 open; we call it MAJOR (the larger bump is never
wrong). What the seed does not name follows its spirit: a removed dimension or a changed scoring
mode is MAJOR (old scores no longer compare), a changed or removed scoring level or a changed
deterministic check is MINOR (the scale of one dimension moved), everything else that changes
the file's meaning (descriptions, names, pass/fail conditions, examples) is PATCH.
"""

from __future__ import annotations

import dataclasses
import enum
import subprocess
from pathlib import Path

from harness.base.errors import HarnessConfigError
from harness.base.models import Dimension, Rubric
from harness.base.semver import Version, parse_version
from harness.loading.rubrics import load_rubric_text

WEIGHT_STEP = 0.05
_EPS = 1e-9


class Bump(enum.IntEnum):
    NONE = 0
    PATCH = 1
    MINOR = 2
    MAJOR = 3

    def __str__(self) -> str:
        return self.name


def _fmt(value: float | None) -> str:
    return "none" if value is None else f"{value:g}"


def _levels(levels: dict[float, str]) -> str:
    return ", ".join(f"{k:g}" for k in sorted(levels)) or "none"


def required_bump(old: Rubric, new: Rubric) -> tuple[Bump, list[str]]:
    """The smallest version bump from ``old`` to ``new`` and one reason per change, largest bump first."""
    found: list[tuple[Bump, str]] = []
    old_dims = {d.id: d for d in old.dimensions}
    new_dims = {d.id: d for d in new.dimensions}
    for dim in sorted(new_dims.keys() - old_dims.keys()):
        found.append((Bump.MAJOR, f"dimension added: {dim}"))
    for dim in sorted(old_dims.keys() - new_dims.keys()):
        found.append((Bump.MAJOR, f"dimension removed: {dim}"))
    if old.threshold != new.threshold:
        found.append((Bump.MAJOR, f"threshold changed: {_fmt(old.threshold)} -> {_fmt(new.threshold)}"))
    if old.scoring_mode != new.scoring_mode:
        found.append((Bump.MAJOR, f"scoring mode changed: {old.scoring_mode} -> {new.scoring_mode}"))
    for dim in sorted(old_dims.keys() & new_dims.keys()):
        found += _dimension_changes(old_dims[dim], new_dims[dim])
    for field, label in (("title", "name"), ("description", "description"), ("agent", "agent")):
        if getattr(old, field) != getattr(new, field):
            found.append((Bump.PATCH, f"rubric {label} reworded"))
    if _example_names(old) != _example_names(new) or old.examples.inputs != new.examples.inputs:
        found.append((Bump.PATCH, "calibration examples changed"))
    if not found:
        return Bump.NONE, []
    found.sort(key=lambda item: -item[0])
    return found[0][0], [f"{bump}: {reason}" for bump, reason in found]


def _dimension_changes(old: Dimension, new: Dimension) -> list[tuple[Bump, str]]:
    out: list[tuple[Bump, str]] = []
    delta = abs(new.weight - old.weight)
    if delta > _EPS:
        bump = Bump.MINOR if delta < WEIGHT_STEP - _EPS else Bump.MAJOR
        relation = "<" if bump is Bump.MINOR else ">="
        out.append((bump, f"weight of {new.id}: {old.weight:g} -> {new.weight:g} "
                          f"(change {delta:.3g} {relation} {WEIGHT_STEP:g})"))
    added = sorted(new.scoring.keys() - old.scoring.keys())
    removed = sorted(old.scoring.keys() - new.scoring.keys())
    if added:
        out.append((Bump.MINOR, f"scoring levels of {new.id} added: {', '.join(f'{k:g}' for k in added)} "
                                f"(levels now {_levels(new.scoring)})"))
    if removed:
        out.append((Bump.MINOR, f"scoring levels of {new.id} removed: {', '.join(f'{k:g}' for k in removed)}"))
    if new.check != old.check:
        out.append((Bump.MINOR, f"check of {new.id} changed: {_check_change(old.check, new.check)}"))
    if (old.scale, old.step) != (new.scale, new.step):  # the judge's ratings moved
        out.append((Bump.MINOR, f"scale of {new.id} changed: {_scale(old)} -> {_scale(new)}"))
    reworded = [k for k in old.scoring.keys() & new.scoring.keys() if old.scoring[k] != new.scoring[k]]
    if reworded:
        out.append((Bump.PATCH, f"scoring level wording of {new.id} changed: "
                                f"{', '.join(f'{k:g}' for k in sorted(reworded))}"))
    for field in ("description", "name", "pass_condition", "fail_condition"):
        if getattr(old, field) != getattr(new, field):
            out.append((Bump.PATCH, f"{field.replace('_', ' ')} of {new.id} reworded"))
    return out


def _scale(dim: Dimension) -> str:
    if dim.scale is None:
        return "none"
    return f"[{dim.scale[0]}, {dim.scale[1]}]" + (f" step {dim.step:g}" if dim.step is not None else "")


def _check_change(old: object, new: object) -> str:
    """What differs between two checks: the kind, or the fields of one kind."""
    def kind(check: object) -> str:
        return "LLM judge" if check is None else f"{getattr(check, 'kind', type(check).__name__)} check"

    if old is None or new is None or type(old) is not type(new) or not dataclasses.is_dataclass(old):
        return f"{kind(old)} -> {kind(new)}"
    changed = [f"{f.name} {_short(getattr(old, f.name))} -> {_short(getattr(new, f.name))}"
               for f in dataclasses.fields(old) if f.compare and getattr(old, f.name) != getattr(new, f.name)]
    return "; ".join(changed) or f"{kind(new)} options"


def _short(value: object, limit: int = 60) -> str:
    text = getattr(value, "pattern", None) if hasattr(value, "pattern") else None
    text = repr(text if isinstance(text, str) else value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _example_names(rubric: Rubric) -> tuple[tuple[str, ...], tuple[str, ...]]:
    return (tuple(p.name for p in rubric.examples.gold), tuple(p.name for p in rubric.examples.anti_patterns))


def minimum_version(old_version: str, bump: Bump) -> Version | None:
    """The lowest version that carries ``bump`` from ``old_version`` (None: not a semantic version)."""
    old = parse_version(old_version)
    if old is None:
        return None
    if bump is Bump.MAJOR:
        return Version(old.major + 1, 0, 0)
    if bump is Bump.MINOR:
        return Version(old.major, old.minor + 1, 0)
    if bump is Bump.PATCH:
        return Version(old.major, old.minor, old.patch + 1)
    return old


def version_problem(old: Rubric, new: Rubric) -> str | None:
    """One line saying why ``new``'s version is too low for its changes against ``old``, or None.

    For the rubric item: ``version_problem(committed_rubric(path), rubric)`` when the former is not None.
    """
    bump, reasons = required_bump(old, new)
    needed = minimum_version(old.version, bump)
    current = parse_version(new.version)
    if needed is None or current is None or current >= needed:
        return None
    shown = "; ".join(reasons[:3]) + (f"; and {len(reasons) - 3} more" if len(reasons) > 3 else "")
    return (f"version {new.version} is too low: the change since {old.version} needs a {bump} bump "
            f"(version {needed} or later): {shown}")


class RubricVersionTooLow(HarnessConfigError):
    """The rubric changed more than its version says (seed 000 section 3)."""


def check_version_bump(rubric: Rubric, *, import_root: Path | None = None) -> None:
    """Raise ``RubricVersionTooLow`` when ``rubric``'s version is lower than its change since the last
    commit needs. Nothing to check (not in git, never committed, or the committed text does not load)
    passes. The rubric item calls this; the message names the file, the field, the version needed and why.
    """
    old = committed_rubric(rubric.path, import_root=import_root)
    if old is None:
        return
    problem = version_problem(old, rubric)
    if problem is None:
        return
    bump, _ = required_bump(old, rubric)
    field = "version" if _is_review_rubric(rubric) else "metadata.version"
    raise RubricVersionTooLow(rubric.path, field, problem,
                              f"set {field} to {minimum_version(old.version, bump)} or later")


def _is_review_rubric(rubric: Rubric) -> bool:
    """Seed 003's format (criteria, top-level ``version``) rather than seed 000's (``metadata.version``)."""
    return any(d.pass_condition is not None for d in rubric.dimensions)


def _git_toplevel(folder: Path) -> Path | None:
    try:
        done = subprocess.run(["git", "rev-parse", "--show-toplevel"], cwd=folder, capture_output=True, text=True,
                              timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return Path(done.stdout.strip()) if done.returncode == 0 and done.stdout.strip() else None


def committed_rubric(path: Path, *, import_root: Path | None = None, rev: str = "HEAD",
                     examples: bool = True) -> Rubric | None:
    """The rubric at ``path`` as last committed in git (``git show HEAD:path``).

    None when the file is not in a git work tree, was never committed, git is missing, or the committed
    text no longer loads (then it is no baseline for versioning). Relative references in the rubric
    (examples, schema files) resolve against today's folder.
    """
    path = Path(path).resolve()
    try:
        result = subprocess.run(["git", "show", f"{rev}:./{path.name}"], cwd=path.parent, capture_output=True,
                                timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if result.returncode != 0:
        return None
    root = import_root or _git_toplevel(path.parent) or path.parent
    return rubric_from_text(result.stdout.decode("utf-8", errors="replace"), path, import_root=root,
                            examples=examples)


def rubric_from_text(text: str, path: Path, *, import_root: Path, examples: bool = True) -> Rubric | None:
    """Load a rubric's text as if it were the file at ``path`` (None when it does not load).

    Nothing is written to disk: relative references (examples, schema files) resolve beside ``path``.
    """
    try:
        return load_rubric_text(text, path, import_root=import_root, examples=examples)
    except HarnessConfigError:
        return None
