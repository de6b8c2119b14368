"""Files to models. Every mistake is one ``HarnessConfigError`` naming the file, the field and the fix."""

from __future__ import annotations

import datetime as dt
import json
import math
import re
import shlex
import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import jsonschema

from harness.checks import CheckParser, parse_check
from harness.errors import HarnessConfigError, HarnessConfigWarning, did_you_mean
from harness.llm.providers import model_problem
from harness.models import (
    DEFAULT_THRESHOLD,
    STRUCTURED_OUTPUT,
    AgentConfig,
    Case,
    Dimension,
    Examples,
    ItemsSpec,
    LoopPolicy,
    ModelSettings,
    PromptFile,
    Rubric,
    RunnerSpec,
    SuiteConfig,
)
from harness.semver import parse_version
from harness.yamlfile import LineDict, load_yaml, parse_yaml, read_text

WEIGHT_TOLERANCE = 1e-6
REQUIRED_PROMPT_SECTIONS = ("Role", "Inputs", "Outputs", "Instructions", "Examples", "Constraints")
BUILTIN_RUNNER_KINDS = ("prompt", "python", "command")
RUBRIC_SUFFIXES = (".yaml", ".yml", ".json")
ID_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


class Section:
    """A mapping from a user file, checked for unknown and missing keys as it is read."""

    def __init__(self, raw: Any, path: Path, field: str, *, known: Iterable[str], required: Iterable[str] = ()):
        self.path, self.field = path, field
        if not isinstance(raw, Mapping):
            raise self.error(field, f"expected a mapping, got {_type_name(raw)}", "write it as `key: value` lines")
        self.raw = raw
        known = tuple(known)
        for key in raw:
            if key not in known:
                raise self.error(self.sub(str(key)), f"unknown key{did_you_mean(key, known)}",
                                 f"remove it or use one of: {', '.join(known)}")
        for key in required:
            if key not in raw:
                raise self.error(self.sub(key), "missing", f"add `{key}:`")

    def sub(self, key: str) -> str:
        return f"{self.field}.{key}" if self.field else key

    def error(self, field: str | None, problem: str, fix: str | None = None) -> HarnessConfigError:
        return HarnessConfigError(self.path, field, problem, fix)

    def __contains__(self, key: str) -> bool:
        return key in self.raw

    def text(self, key: str, default: str | None = None) -> str | None:
        value = self.raw.get(key, default)
        if value is None or isinstance(value, str):
            return value
        if isinstance(value, (int, float, dt.date)) and not isinstance(value, bool):
            return str(value)
        raise self.error(self.sub(key), f"expected text, got {_type_name(value)}", "quote the value")

    def number(self, key: str, default: float | None = None, *, low: float | None = None,
               high: float | None = None) -> float | None:
        value = self.raw.get(key, default)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
            raise self.error(self.sub(key), f"expected a number, got {value!r}", "write a number such as 0.85")
        _check_range(self, self.sub(key), float(value), low, high)
        return float(value)

    def integer(self, key: str, default: int, *, low: int = 1) -> int:
        value = self.raw.get(key, default)
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise self.error(self.sub(key), f"expected a whole number >= {low}, got {value!r}",
                             f"write a whole number such as {max(low, 3)}")
        return value

    def boolean(self, key: str, default: bool) -> bool:
        value = self.raw.get(key, default)
        if not isinstance(value, bool):
            raise self.error(self.sub(key), f"expected true or false, got {value!r}", "write true or false")
        return value

    def text_list(self, key: str, *, single: bool = True) -> tuple[str, ...]:
        """A list of text; with ``single``, one text stands for a list of one."""
        value = self.raw.get(key) or []
        if isinstance(value, str) and single:
            value = [value]
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise self.error(self.sub(key), f"expected a list of text, got {_type_name(value)} {_short(value)}",
                             f"write `{key}: [first, second]` or `- item` lines")
        return tuple(value)

    def section(self, key: str, *, known: Iterable[str], required: Iterable[str] = ()) -> Section:
        return Section(self.raw.get(key) or {}, self.path, self.sub(key), known=known, required=required)


def _check_range(section: Section, field: str, value: float, low: float | None, high: float | None) -> None:
    if (low is not None and value < low) or (high is not None and value > high):
        raise section.error(field, f"{value:g} is outside {low:g}..{high:g}",
                            f"use a value between {low:g} and {high:g}")


def _short(value: Any, limit: int = 60) -> str:
    text = " ".join(repr(value).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _type_name(value: Any) -> str:
    return {dict: "a mapping", list: "a list", str: "text", type(None): "nothing"}.get(
        type(value), type(value).__name__
    )


def _check_id(section: Section, field: str, value: Any, what: str) -> str:
    if not isinstance(value, str) or not ID_PATTERN.match(value):
        raise section.error(field, f"{what} {value!r} is not a valid id",
                            "use letters, digits, '_', '-' or '.', starting with a letter or digit")
    return value


# --- rubrics -----------------------------------------------------------------------------------


def load_rubric(path: Path, *, import_root: Path, examples: bool = True,
                check_kinds: Mapping[str, CheckParser] | None = None) -> Rubric:
    """Load either rubric format: seed 000's dimensions or seed 003's criteria.

    ``examples=False`` leaves the example library unresolved (its globs kept as written, its inputs
    unread): a version diff compares rubrics and needs no example files. ``check_kinds``: the check kinds
    in effect (``harness.checks.with_plugin_kinds``), by default the built-ins."""
    return _rubric_from_raw(load_yaml(path), path, import_root, examples, check_kinds)


def load_rubric_text(text: str, path: Path, *, import_root: Path, examples: bool = True) -> Rubric:
    """Load a rubric's text as if it were the file at ``path`` (an older version from git, say)."""
    return _rubric_from_raw(parse_yaml(text, path), path, import_root, examples)


def _rubric_from_raw(raw: Any, path: Path, import_root: Path, examples: bool = True,
                     check_kinds: Mapping[str, CheckParser] | None = None) -> Rubric:
    if isinstance(raw, Mapping) and "criteria" in raw:
        return _load_review_rubric(raw, path, import_root, examples, check_kinds)
    return _load_dimension_rubric(raw, path, import_root, examples, check_kinds)


def _version(section: Section, key: str) -> str:
    version = section.text(key)
    if version is None:
        raise section.error(section.sub(key), "missing", "add a semantic version such as 1.0.0")
    if parse_version(version) is None:
        raise section.error(section.sub(key), f"{version!r} is not a semantic version",
                            "write MAJOR.MINOR.PATCH, such as 1.0.0")
    return version


def _load_dimension_rubric(raw: Any, path: Path, import_root: Path, examples: bool = True,
                           check_kinds: Mapping[str, CheckParser] | None = None) -> Rubric:
    top = Section(raw, path, "", known=("metadata", "threshold", "dimensions", "examples", "items"),
                  required=("metadata", "threshold", "dimensions"))
    meta = top.section("metadata", known=("name", "version", "agent", "updated", "description"),
                       required=("name", "version"))
    threshold = top.number("threshold", low=0.0, high=1.0)
    dims_raw = top.raw["dimensions"]
    if not isinstance(dims_raw, Mapping) or not dims_raw:
        raise top.error("dimensions", "expected a mapping of dimension ids", "add at least one dimension")
    dimensions = []
    for dim_id, dim_raw in dims_raw.items():
        field = f"dimensions.{dim_id}"
        _check_id(top, field, dim_id, "dimension id")
        dim = Section(dim_raw, path, field, known=("weight", "description", "scoring", "check", "name"),
                      required=("weight", "description"))
        weight = dim.number("weight", low=0.0, high=1.0)
        scoring = _scoring_levels(dim)
        check = None
        if "check" in dim:
            check = parse_check(dim.raw["check"], path=path, field=dim.sub("check"),
                                base_dir=path.parent, import_root=import_root, kinds=check_kinds)
        dimensions.append(Dimension(id=dim_id, weight=weight, description=dim.text("description"),
                                    name=dim.text("name"), scoring=scoring, check=check))
    _check_weights_sum(top, "dimensions", dimensions)
    return Rubric(
        name=path.stem, path=path, title=meta.text("name"), version=_version(meta, "version"),
        description=meta.text("description"), agent=meta.text("agent"), updated=meta.text("updated"),
        threshold=threshold, scoring_mode="weighted", dimensions=tuple(dimensions),
        examples=_examples(top, path, examples, import_root), items=_items(top),
    )


def _scoring_levels(dim: Section) -> dict[float, str]:
    raw = dim.raw.get("scoring") or {}
    if not isinstance(raw, Mapping):
        raise dim.error(dim.sub("scoring"), "expected a mapping of score: description",
                        'write lines such as `1.0: "Exact match"`')
    levels: dict[float, str] = {}
    for key, text in raw.items():
        field = f"{dim.sub('scoring')}.{key}"
        try:
            level = float(key)
        except (TypeError, ValueError):
            raise dim.error(field, f"score level {key!r} is not a number", "use a number between 0 and 1") from None
        _check_range(dim, field, level, 0.0, 1.0)
        if not isinstance(text, str):
            raise dim.error(field, "expected a description of the level", "quote the description")
        levels[level] = text
    return levels


def _check_weights_sum(section: Section, field: str, dimensions: list[Dimension]) -> None:
    total = sum(d.weight for d in dimensions)
    if abs(total - 1.0) > WEIGHT_TOLERANCE:
        parts = " + ".join(f"{d.weight:g}" for d in dimensions)
        raise section.error(f"{field}.*.weight", f"weights sum to {total:.4g} ({parts}), not 1.0",
                            "adjust the weights so they add up to exactly 1.0")


def _load_review_rubric(raw: Any, path: Path, import_root: Path, examples: bool = True,
                        check_kinds: Mapping[str, CheckParser] | None = None) -> Rubric:
    top = Section(raw, path, "", known=("rubric_id", "version", "description", "scoring_mode", "pass_threshold",
                                         "criteria", "output_schema", "examples", "agent", "items"),
                  required=("rubric_id", "version", "scoring_mode", "criteria"))
    mode = top.text("scoring_mode")
    if mode not in ("binary", "weighted"):
        raise top.error("scoring_mode", f"{mode!r} is not a scoring mode", "use binary or weighted")
    threshold = top.number("pass_threshold", low=0.0, high=1.0)
    if mode == "weighted" and threshold is None:  # the review contract says SHOULD: a warning, not an error
        warnings.warn(HarnessConfigWarning(
            path, "pass_threshold", "missing for weighted scoring; the agent's threshold, else "
            f"defaults.pass_threshold, else {DEFAULT_THRESHOLD} applies", "add `pass_threshold: 0.8`"), stacklevel=2)
    criteria_raw = top.raw["criteria"]
    if not isinstance(criteria_raw, list) or not criteria_raw:
        raise top.error("criteria", "expected a list with at least one criterion", "add `- id: ...` entries")
    seen: set[str] = set()
    parsed = []
    for index, item in enumerate(criteria_raw):
        field = f"criteria[{index}]"
        crit = Section(item, path, field, known=("id", "name", "description", "pass_condition", "fail_condition",
                                                  "weight", "check"),
                       required=("id", "name", "description", "pass_condition", "fail_condition"))
        crit_id = _check_id(crit, crit.sub("id"), crit.raw["id"], "criterion id")
        if crit_id in seen:
            raise crit.error(crit.sub("id"), f"duplicate criterion id {crit_id!r}", "give every criterion its own id")
        seen.add(crit_id)
        weight = crit.number("weight", 1.0)
        if weight <= 0:
            raise crit.error(crit.sub("weight"), f"weight must be positive, got {weight:g}", "use a number above 0")
        check = None
        if "check" in crit:
            check = parse_check(crit.raw["check"], path=path, field=crit.sub("check"),
                                base_dir=path.parent, import_root=import_root, kinds=check_kinds)
        parsed.append((crit_id, weight, crit, check))
    total = sum(weight for _, weight, _, _ in parsed)
    dimensions = tuple(
        Dimension(id=crit_id, weight=weight / total, name=crit.text("name"), description=crit.text("description"),
                  pass_condition=crit.text("pass_condition"), fail_condition=crit.text("fail_condition"),
                  scoring={1.0: crit.text("pass_condition"), 0.0: crit.text("fail_condition")}, check=check)
        for crit_id, weight, crit, check in parsed
    )
    rubric_id = _check_id(top, "rubric_id", top.text("rubric_id"), "rubric id")
    return Rubric(
        name=path.stem, path=path, title=rubric_id, version=_version(top, "version"),
        description=top.text("description"), agent=top.text("agent"), threshold=threshold,
        scoring_mode=mode, dimensions=dimensions, examples=_examples(top, path, examples, import_root),
        items=_items(top), rubric_id=rubric_id, output_schema=_output_schema(top, dimensions),
    )


def _output_schema(top: Section, criteria: tuple[Dimension, ...]) -> dict[str, Any] | None:
    """The review's own JSON Schema: it must be a schema, and it must accept a well-formed review."""
    if "output_schema" not in top:
        return None
    schema = top.raw["output_schema"]
    if not isinstance(schema, Mapping):
        raise top.error("output_schema", f"expected a JSON Schema (a mapping), got {_type_name(schema)}",
                        "write the schema of the review result, or remove output_schema")
    schema = json.loads(json.dumps(schema, default=str))  # plain dicts; YAML dates become strings
    try:
        jsonschema.Draft202012Validator.check_schema(schema)
    except jsonschema.SchemaError as exc:
        where = ".".join(str(p) for p in exc.absolute_path)
        raise top.error("output_schema" + (f".{where}" if where else ""), f"not a valid JSON Schema: {exc.message}",
                        "fix the schema (JSON Schema draft 2020-12)") from None
    passing = {"pass": True, "issues": [], "suggested_fixes": [], "indeterminate": [],
               "criteria_results": [{"criterion_id": c.id, "criterion_name": c.name or c.id, "verdict": "pass",
                                     "reasoning": "met", "confidence": 1.0} for c in criteria],
               "timings_ms": {"evaluation": 0, "total": 0}}
    error = jsonschema.exceptions.best_match(jsonschema.Draft202012Validator(schema).iter_errors(passing))
    if error is not None:
        where = ".".join(str(p) for p in error.absolute_path) or "(root)"
        raise top.error("output_schema", f"rejects a well-formed review result at {where}: {error.message}",
                        "describe the review result's fields: pass, issues, suggested_fixes, indeterminate, "
                        "criteria_results, timings_ms")
    return schema


def _items(top: Section) -> ItemsSpec | None:
    """``items: targets`` (a list path) or ``items: {path: theses, score: score, label: title}``."""
    if "items" not in top:
        return None
    raw = top.raw["items"]
    spec = top.section("items", known=("path", "score", "label"), required=("path",)) if isinstance(
        raw, Mapping) else None
    path_text = spec.text("path") if spec is not None else raw
    if not isinstance(path_text, str) or not path_text.strip():
        raise top.error("items", f"expected a list path such as `targets`, got {path_text!r}",
                        "write `items: targets`, or `items: {path: theses, score: score}` for a ranked list")
    path = tuple(part for part in path_text.strip().strip(".").split(".") if part)
    if spec is None:
        return ItemsSpec(path=path)
    return ItemsSpec(path=path, score=spec.text("score"), label=spec.text("label"))


# --- finding a rubric --------------------------------------------------------------------------


def rubric_files(folder: Path) -> list[Path]:
    """The rubric files of a rubrics folder: YAML, and JSON as the review rubrics of the registry are."""
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.iterdir() if p.suffix in RUBRIC_SUFFIXES and p.is_file())


def rubric_identity(path: Path) -> tuple[str | None, str | None]:
    """A rubric file's ``rubric_id`` and ``version`` (None when it has none), read without validating it."""
    try:
        raw = load_yaml(path)
    except HarnessConfigError:
        return None, None
    if not isinstance(raw, Mapping) or not isinstance(raw.get("rubric_id"), str):
        return None, None
    version = raw.get("version")
    return raw["rubric_id"], version if isinstance(version, str) else None


def find_rubric(ref: str, version: str | None, rubrics_dir: Path) -> Path | None:
    """A rubric by file name, else by ``rubric_id``; with ``version``, that version, else the latest."""
    if version is None:
        for path in rubric_files(rubrics_dir):
            if path.stem == ref:
                return path
    matches = [(v, path) for path in rubric_files(rubrics_dir) for rid, v in [rubric_identity(path)]
               if rid == ref or (path.stem == ref and rid is None)]
    if version is not None:
        return next((path for v, path in matches if v == version), None)
    versioned = [(parse_version(v), path) for v, path in matches if v and parse_version(v) is not None]
    if versioned:
        return max(versioned, key=lambda pair: pair[0])[1]
    return matches[0][1] if matches else None


def _examples(top: Section, path: Path, resolve: bool = True, import_root: Path | None = None) -> Examples:
    if "examples" not in top:
        return Examples()
    ex = top.section("examples", known=("gold", "anti_patterns", "inputs"))
    if not resolve:
        return Examples(gold=tuple(path.parent / p for p in ex.text_list("gold")),
                        anti_patterns=tuple(path.parent / p for p in ex.text_list("anti_patterns")))
    roots = (import_root or path.parent,)
    gold = _glob_paths(ex, "gold", path.parent, roots)
    anti = _glob_paths(ex, "anti_patterns", path.parent, roots)
    inputs = load_inputs(ex.raw.get("inputs") or {}, path, ex.sub("inputs"), path.parent, roots)
    return Examples(gold=gold, anti_patterns=anti, inputs=inputs)


def _glob_paths(section: Section, key: str, base: Path, roots: Sequence[Path]) -> tuple[Path, ...]:
    """The example files a list of globs names: inside the project (they are shown to the judge), readable."""
    found: list[Path] = []
    for pattern in section.text_list(key):
        try:
            matches = sorted(base.glob(pattern)) if pattern.strip() and not Path(pattern).is_absolute() else None
        except ValueError:
            matches = None
        if matches is None:
            raise section.error(section.sub(key), f"{pattern!r} is not a glob relative to the rubric file",
                                "write a relative glob such as examples/gold/*.md")
        if not matches:
            raise section.error(section.sub(key), f"{pattern!r} matches no file under {base}",
                                "fix the path; it is relative to the rubric file")
        for match in matches:
            if not _inside(match, roots):
                raise section.error(section.sub(key), f"{pattern!r} matches {match.resolve()}, outside the "
                                    "project", "keep the examples inside the project")
            read_text(match)  # too large or not UTF-8: said now, naming the file, not when the judge reads it
        found.extend(matches)
    return tuple(found)


def _inside(target: Path, roots: Sequence[Path]) -> bool:
    """``target`` (symbolic links resolved) lies under one of ``roots``."""
    resolved = target.resolve()
    return any(resolved.is_relative_to(root.resolve()) for root in roots)


# --- inputs ------------------------------------------------------------------------------------


def load_inputs(raw: Any, path: Path, field: str, base: Path, roots: Sequence[Path]) -> dict[str, Any]:
    """Inputs: a mapping of names to values, where a value ``{file: path}`` is loaded as YAML, JSON or text;
    or ``{file: path}`` in place of the whole mapping: a YAML or JSON file that holds the mapping.

    Paths are relative to ``base``; an input file must lie inside one of ``roots`` (the project and the
    folders of ini ``harness_input_dirs``), symbolic links resolved: a case cannot send ``/etc/passwd``."""
    if isinstance(raw, Mapping) and set(raw) == {"file"}:
        data = _read_input_file(raw["file"], base, path, f"{field}.file", roots)
        if not isinstance(data, Mapping):
            raise HarnessConfigError(path, f"{field}.file", f"{raw['file']} holds {_type_name(data)}, not a mapping "
                                     "of input names", "write `name: value` lines in it (YAML or JSON), or name "
                                     "the input: `inputs: {NAME: {file: ...}}`")
        return dict(data)
    if not isinstance(raw, Mapping):
        raise HarnessConfigError(path, field, "expected a mapping of input names", "write `name: value` lines")
    inputs: dict[str, Any] = {}
    for name, value in raw.items():
        if isinstance(value, Mapping) and set(value) == {"file"}:
            inputs[name] = _read_input_file(value["file"], base, path, f"{field}.{name}.file", roots)
        else:
            inputs[name] = value
    return inputs


def _read_input_file(ref: Any, base: Path, path: Path, field: str, roots: Sequence[Path]) -> Any:
    if isinstance(ref, bool) or not isinstance(ref, (str, int, float)) or not str(ref).strip() or "\0" in str(ref):
        raise HarnessConfigError(path, field, f"expected a file path, got {_short(ref)}",
                                 "write `{file: relative/path.yaml}`")
    target = (base / str(ref)).resolve()
    if not _inside(target, roots):
        allowed = " or ".join(str(root) for root in roots)
        raise HarnessConfigError(path, field, f"{ref} is outside the project: input files must be under {allowed}",
                                 "move the file into the project, or list its folder in ini harness_input_dirs")
    if not target.is_file():
        raise HarnessConfigError(path, field, f"cannot read {base / str(ref)}",
                                 "fix the path; it is relative to the file that names it")
    if target.suffix in (".yaml", ".yml"):
        return load_yaml(target)
    text = read_text(target)
    if target.suffix == ".json":
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise HarnessConfigError(target, f"line {exc.lineno}", f"invalid JSON ({exc.msg})",
                                     "fix the JSON") from None
        except RecursionError:
            raise HarnessConfigError(target, None, "JSON nested too deeply to read", "flatten the JSON") from None
    return text


# --- prompts -----------------------------------------------------------------------------------

_HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$")


def load_prompt(path: Path, *, source: str) -> PromptFile:
    """A prompt file must have a title and the six sections of seed 000 section 4."""
    if not path.is_file():
        raise HarnessConfigError(source, None, f"prompt file {path} cannot be read",
                                 "fix the path; it is relative to agents.yaml")
    text = read_text(path)
    title = ""
    sections: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in text.splitlines():
        heading = _HEADING.match(line)
        if heading and len(heading[1]) == 1 and not title:
            title = heading[2]
            current = None
        elif heading and len(heading[1]) == 2:
            current = sections.setdefault(heading[2].strip(), [])
        elif current is not None:
            current.append(line)
    missing = [name for name in REQUIRED_PROMPT_SECTIONS if not "\n".join(sections.get(name, [])).strip()]
    if missing:
        word = "section" if len(missing) == 1 else "sections"
        raise HarnessConfigError(path, "## " + missing[0], f"missing or empty {word}: {', '.join(missing)}",
                                 f"add `## {missing[0]}` with its content (required: "
                                 f"{', '.join(REQUIRED_PROMPT_SECTIONS)})")
    return PromptFile(path=path, title=title or path.stem,
                      sections={k: "\n".join(v).strip() for k, v in sections.items()}, text=text)


# --- agents.yaml -------------------------------------------------------------------------------

_POLICY_KEYS = ("threshold", "max_attempts", "escalate_on_fail", "margin_required", "borderline_margin",
                "escalate_conditions")
_DEFAULT_KEYS = ("pass_threshold", "max_attempts", "escalate_on_fail", "borderline_margin", "escalate_conditions",
                 "escalation_fails_gate")
_MODEL_KEYS = ("model", "temperature", "max_tokens", "timeout_s", "max_retries", "base_url", "api_key_env",
               "structured_output")
THRESHOLDS_FILE = "thresholds.yaml"


def load_suite(path: Path, *, rubrics_dir: Path, runner_kinds: Iterable[str]) -> SuiteConfig:
    """Load agents.yaml: defaults (seed 000 section 7), a judge section, and the agents (section 6).

    A ``thresholds.yaml`` beside it (the seed's ``config/thresholds.yaml``) is read too: its ``defaults``
    and per-agent values fill what agents.yaml leaves unset; a value both files set must agree.
    """
    raw = load_yaml(path)
    top = Section(raw, path, "", known=("defaults", "judge", "model", "agents"), required=("agents",))
    agents_raw = top.raw["agents"]
    if not isinstance(agents_raw, Mapping) or not agents_raw:
        raise top.error("agents", "expected a mapping of agent names", "add at least one agent")
    thresholds = _thresholds_file(path.parent / THRESHOLDS_FILE, agents_raw)
    defaults_raw = _merged(top.raw.get("defaults") or {}, thresholds.get("defaults") or {}, path,
                           path.parent / THRESHOLDS_FILE, "defaults")
    for source, raw_defaults in ((path, top.raw.get("defaults")), (path.parent / THRESHOLDS_FILE,
                                                                    thresholds.get("defaults"))):
        if isinstance(raw_defaults, Mapping) and "margin_required" in raw_defaults:
            raise HarnessConfigError(source, "defaults.margin_required", "is per agent: it compares the top two "
                                     "candidates of a selector's ranked artifact",
                                     "move it under `agents.NAME:` of the selector agent")
    defaults = Section(defaults_raw, path, "defaults", known=_DEFAULT_KEYS)
    base_policy = LoopPolicy(
        default_threshold=defaults.number("pass_threshold", None, low=0.0, high=1.0),
        max_attempts=defaults.integer("max_attempts", 3),
        escalate_on_fail=defaults.boolean("escalate_on_fail", True),
        borderline_margin=defaults.number("borderline_margin", 0.0, low=0.0, high=1.0),
        escalate_conditions=defaults.text_list("escalate_conditions", single=False),
        escalation_fails_gate=defaults.boolean("escalation_fails_gate", True),
    )
    judge = _model_settings(top.section("judge", known=_MODEL_KEYS), ModelSettings())
    production = _model_settings(top.section("model", known=_MODEL_KEYS), ModelSettings())
    kinds = tuple(runner_kinds)
    agents = {}
    for name, agent_raw in agents_raw.items():
        _check_id(top, f"agents.{name}", name, "agent name")
        overrides = (thresholds.get("agents") or {}).get(name) or {}
        if overrides and isinstance(agent_raw, Mapping):
            agent_raw = _merged(agent_raw, overrides, path, path.parent / THRESHOLDS_FILE, f"agents.{name}")
        agents[name] = _load_agent(name, agent_raw, path, base_policy, judge, production, rubrics_dir, kinds)
    return SuiteConfig(path=path, agents=agents)


def _thresholds_file(path: Path, agents: Mapping[str, Any]) -> dict[str, Any]:
    """The seed's thresholds.yaml: ``defaults`` and ``agents.NAME`` with the loop policy keys only."""
    if not path.is_file():
        return {}
    top = Section(load_yaml(path), path, "", known=("defaults", "agents"))
    # margin_required is known here so that load_suite can say where it belongs
    _check_policy(top.section("defaults", known=_DEFAULT_KEYS + ("margin_required",)))
    listed = top.section("agents", known=tuple(agents))
    for name in listed.raw:
        _check_policy(listed.section(str(name), known=_POLICY_KEYS))
    return dict(top.raw)


def _check_policy(section: Section) -> None:
    """Read each loop-policy value where it is written, so a bad one names its own file."""
    for key in ("pass_threshold", "threshold", "borderline_margin", "margin_required"):
        section.number(key, None, low=0.0, high=1.0)
    section.integer("max_attempts", 3)
    section.boolean("escalate_on_fail", True)
    section.boolean("escalation_fails_gate", True)
    section.text_list("escalate_conditions", single=False)


def _merged(own: Mapping[str, Any], extra: Mapping[str, Any], own_path: Path, extra_path: Path,
            field: str) -> dict[str, Any]:
    """agents.yaml's values plus thresholds.yaml's; a key both set to different values is an error."""
    if not isinstance(own, Mapping) or not isinstance(extra, Mapping):
        return own  # type: ignore[return-value]  # the Section that reads it names the mistake
    merged = dict(own)
    for key, value in extra.items():
        if key in own and own[key] != value:
            raise HarnessConfigError(extra_path, f"{field}.{key}",
                                     f"is {value!r} here but {own[key]!r} in {own_path.name}",
                                     f"set {field}.{key} in one file only")
        merged[key] = value
    return merged


def _model_settings(section: Section, base: ModelSettings) -> ModelSettings:
    """A ``judge:`` or ``model:`` section over ``base`` (the level above it, else the defaults)."""
    values = dict(
        model=_model_name(section, "model", base.model),
        temperature=section.number("temperature", base.temperature, low=0.0, high=2.0),
        max_tokens=section.integer("max_tokens", base.max_tokens),
        timeout_s=section.number("timeout_s", base.timeout_s, low=0.001, high=3600.0),
        max_retries=section.integer("max_retries", base.max_retries, low=0),
        base_url=section.text("base_url", base.base_url),
        api_key_env=section.text("api_key_env", base.api_key_env),
        structured_output=section.text("structured_output", base.structured_output),
    )
    if values["structured_output"] not in STRUCTURED_OUTPUT:
        raise section.error(section.sub("structured_output"), f"{values['structured_output']!r} is not a way to "
                            "ask for JSON", f"use one of: {', '.join(STRUCTURED_OUTPUT)}")
    key_env = values["api_key_env"]
    if key_env is not None and not _ENV_NAME.match(key_env):
        raise section.error(section.sub("api_key_env"), "is the NAME of the variable that holds the key, not a key",
                            "write e.g. `api_key_env: VLLM_API_KEY` and set that variable; never write a key in "
                            "a file")
    return ModelSettings(**values)


def _model_name(section: Section, key: str, default: str) -> str:
    """A model name (``provider/name``) whose provider is known; the field is named when it is not."""
    model = section.text(key, default)
    if not model or not model.strip() or model != model.strip():
        raise section.error(section.sub(key), f"{model!r} is not a model name",
                            f"write a model such as {default}, or remove the line for the default")
    problem = model_problem(ModelSettings(model=model))
    if problem:
        raise section.error(section.sub(key), problem)
    return model


def _load_agent(name: str, raw: Any, path: Path, base_policy: LoopPolicy, judge: ModelSettings,
                production: ModelSettings, rubrics_dir: Path, kinds: tuple[str, ...]) -> AgentConfig:
    agent = Section(raw, path, f"agents.{name}",
                    known=("rubric", "rubric_version", "producer", "evaluator", "reviser", "judge", "model",
                           "description")
                    + _POLICY_KEYS, required=("rubric", "producer"))
    policy = base_policy.model_copy(update=dict(
        threshold=agent.number("threshold", None, low=0.0, high=1.0),
        max_attempts=agent.integer("max_attempts", base_policy.max_attempts),
        escalate_on_fail=agent.boolean("escalate_on_fail", base_policy.escalate_on_fail),
        margin_required=agent.number("margin_required", 0.0, low=0.0, high=1.0),
        borderline_margin=agent.number("borderline_margin", base_policy.borderline_margin, low=0.0, high=1.0),
        escalate_conditions=agent.text_list("escalate_conditions", single=False) or base_policy.escalate_conditions,
    ))
    specs = {role: _runner_spec(agent, role, path, kinds) for role in ("producer", "evaluator", "reviser")
             if role in agent}
    prompts = {}
    agent_judge = _model_settings(agent.section("judge", known=_MODEL_KEYS), judge)
    agent_model = _model_settings(agent.section("model", known=_MODEL_KEYS), production)
    models = {}
    for role, spec in specs.items():
        if spec.kind == "prompt":
            prompts[role] = load_prompt(spec.base_dir / spec.target, source=f"{path}: {agent.sub(role)}")
            base = agent_judge if role == "evaluator" else agent_model
            models[role] = base
            if "model" in spec.options:  # `producer: {prompt: x.md, model: openai/gpt-4.1-mini}`
                own = Section(spec.options, path, spec.field, known=("model",))
                models[role] = replace(base, model=_model_name(own, "model", base.model))
    return AgentConfig(
        name=name, rubric_path=_rubric_path(agent, path, rubrics_dir), producer=specs["producer"],
        evaluator=specs.get("evaluator"), reviser=specs.get("reviser"), policy=policy,
        judge=models.get("evaluator", agent_judge), models=models, prompts=prompts,
    )


def _rubric_path(agent: Section, path: Path, rubrics_dir: Path) -> Path:
    """``rubric:`` is a path (``.yaml``, ``.yml``, ``.json``), a file name in rubrics/, or a review rubric's
    ``rubric_id``; ``rubric_version:`` picks one version of it (default: the latest)."""
    ref = agent.text("rubric")
    version = agent.text("rubric_version")
    if version is not None and parse_version(version) is None:
        raise agent.error(agent.sub("rubric_version"), f"{version!r} is not a semantic version",
                          "write MAJOR.MINOR.PATCH, such as 1.0.0")
    if ref.endswith(RUBRIC_SUFFIXES):
        candidate = path.parent / ref
        if candidate.is_file():
            return candidate.resolve()
        raise agent.error(agent.sub("rubric"), f"no rubric file {candidate}",
                          "fix the path; it is relative to agents.yaml")
    found = find_rubric(ref, version, rubrics_dir)
    if found is not None:
        return found.resolve()
    if version is not None:
        versions = sorted(v for p in rubric_files(rubrics_dir) for rid, v in [rubric_identity(p)]
                          if v and (rid == ref or p.stem == ref))
        raise agent.error(agent.sub("rubric_version"), f"no version {version} of rubric {ref!r} in {rubrics_dir}",
                          f"use one of: {', '.join(versions)}" if versions else "remove rubric_version")
    known = sorted({p.stem for p in rubric_files(rubrics_dir)} | {
        rid for p in rubric_files(rubrics_dir) for rid, _ in [rubric_identity(p)] if rid})
    raise agent.error(agent.sub("rubric"), f"no rubric {ref!r} in {rubrics_dir}",
                      f"use one of: {', '.join(known)}" if known else f"create {rubrics_dir / ref}.yaml")


def _runner_spec(agent: Section, role: str, path: Path, kinds: tuple[str, ...]) -> RunnerSpec:
    field = agent.sub(role)
    raw = agent.raw[role]
    if isinstance(raw, str):
        if not raw.endswith(".md"):
            raise agent.error(field, f"{raw!r} is not a prompt file",
                              "give a .md prompt path, or a mapping such as `{python: module:function}` "
                              "or `{command: ...}`")
        return RunnerSpec(kind="prompt", target=raw, base_dir=path.parent, file=path, field=field)
    if not isinstance(raw, Mapping):
        raise agent.error(field, f"expected a prompt path or a mapping, got {_type_name(raw)}",
                          "write `{python: module:function}`, `{command: ...}` or a .md path")
    options = dict(raw)
    if "kind" in options:
        kind = options.pop("kind")
        target = options.pop("target", "")
    else:
        named = [k for k in options if k in kinds]
        if len(named) != 1:
            hint = next((did_you_mean(k, kinds) for k in options if did_you_mean(k, kinds)), "") if not named else ""
            raise agent.error(field, f"cannot tell the kind of runner{hint}",
                              f"use exactly one of: {', '.join(kinds)}, or `kind: <plugin kind>`")
        kind = named[0]
        target = options.pop(kind)
    if kind not in kinds:
        raise agent.error(f"{field}.kind", f"unknown runner kind {kind!r}{did_you_mean(kind, kinds)}",
                          f"use one of: {', '.join(kinds)} (plugins add kinds via pytest_harness_runner_kinds)")
    if isinstance(target, list) and kind == "command":
        target = " ".join(shlex.quote(str(t)) for t in target)
    if not isinstance(target, str) or not target:
        raise agent.error(f"{field}.{kind}", "expected text", "give the prompt path, module:function or command")
    if kind == "python" and not re.match(r"^[\w.]+:[\w.]+$", target):
        raise agent.error(f"{field}.python", f"{target!r} is not module:function",
                          "write it as package.module:function")
    if kind == "command":
        _check_command_options(agent, field, options)
    return RunnerSpec(kind=kind, target=target, options=options, base_dir=path.parent, file=path, field=field)


_COMMAND_OPTIONS = ("timeout_s", "env")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _check_command_options(agent: Section, field: str, options: dict[str, Any]) -> None:
    """A command runner takes ``timeout_s`` (seconds) and ``env`` (the variable names it may see besides
    the allowlist: commands never get the whole environment)."""
    for key in options:
        if key not in _COMMAND_OPTIONS:
            raise agent.error(f"{field}.{key}", f"unknown option of a command runner"
                              f"{did_you_mean(key, _COMMAND_OPTIONS)}", f"use {' and '.join(_COMMAND_OPTIONS)}")
    timeout = options.get("timeout_s", 300.0)
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 < timeout < float("inf"):
        raise agent.error(f"{field}.timeout_s", f"expected a positive number of seconds, got {_short(timeout)}",
                          "write e.g. timeout_s: 60")
    env = options.get("env", [])
    if not isinstance(env, list) or not all(isinstance(name, str) and _ENV_NAME.match(name) for name in env):
        raise agent.error(f"{field}.env", f"expected a list of environment variable names, got {env!r}",
                          "write e.g. env: [MY_SERVICE_TOKEN]")


# --- case files --------------------------------------------------------------------------------

_CASE_KEYS = ("id", "inputs", "flags", "today", "description", "agent")


def load_cases(path: Path, *, agents: Mapping[str, AgentConfig],
               input_roots: Sequence[Path] | None = None) -> list[Case]:
    """A case file: ``agent:`` (default for its cases) and ``cases:``, a list with an id each.

    Input files must lie under ``input_roots`` (the plugin passes the rootdir and ini harness_input_dirs;
    default: the case file's own folder)."""
    roots = tuple(input_roots) if input_roots else (path.parent,)
    raw = load_yaml(path)
    top = Section(raw, path, "", known=("agent", "cases", "inputs"), required=("cases",))
    default_agent = top.text("agent")
    shared_inputs = load_inputs(top.raw.get("inputs") or {}, path, "inputs", path.parent, roots)
    cases_raw = top.raw["cases"]
    if not isinstance(cases_raw, list) or not cases_raw:
        raise top.error("cases", "expected a list with at least one case", "add `- id: my-case` entries")
    cases: list[Case] = []
    seen: set[str] = set()
    for index, item in enumerate(cases_raw):
        field = f"cases[{index}]"
        case = Section(item, path, field, known=_CASE_KEYS, required=("id",))
        case_id = _check_id(case, case.sub("id"), case.raw["id"], "case id")
        if case_id in seen:
            raise case.error(case.sub("id"), f"duplicate case id {case_id!r}", "give every case its own id")
        seen.add(case_id)
        agent = case.text("agent", default_agent)
        if agent is None:
            raise case.error(case.sub("agent"), "no agent for this case", "add `agent:` at the top of the file")
        if agent not in agents:
            raise case.error(case.sub("agent") if "agent" in case else "agent", f"unknown agent {agent!r}",
                             f"use one of: {', '.join(sorted(agents))} (defined in agents.yaml)")
        today = case.raw.get("today")
        if today is not None and not isinstance(today, dt.date):
            raise case.error(case.sub("today"), f"{today!r} is not a date", "write YYYY-MM-DD")
        inputs = {**shared_inputs, **load_inputs(case.raw.get("inputs") or {}, path, case.sub("inputs"), path.parent,
                                                 roots)}
        cases.append(Case(id=case_id, agent=agent, path=path, line=getattr(item, "line", 0) if isinstance(
            item, LineDict) else 0, inputs=inputs, flags=case.text_list("flags"), today=today,
            description=case.text("description")))
    return cases
