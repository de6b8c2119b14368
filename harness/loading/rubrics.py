"""Rubric files: seed 000's dimension rubrics and seed 003's review rubrics (criteria, output schema), with
their items and example libraries; and finding a rubric in a rubrics folder by file name or id and version."""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from harness.base import jsonschemas, slots
from harness.base.conversation import TURN_REDUCERS
from harness.base.errors import HarnessConfigWarning
from harness.base.fields import Fields, Section, is_number
from harness.base.models import DEFAULT_THRESHOLD, Dimension, Examples, ItemsSpec, Rubric
from harness.base.semver import parse_version
from harness.base.yamlfile import load_yaml, parse_yaml, read_text
from harness.checks import CheckParser, check_slots, parse_check
from harness.checks.transforms import parse_transform
from harness.loading.inputs import inside, load_inputs
from harness.loading.registry import REGISTRY_SUFFIXES, file_identity, registry_files

WEIGHT_TOLERANCE = 1e-6
RUBRIC_SUFFIXES = REGISTRY_SUFFIXES
SCORING_MODES = ("binary", "weighted")


def load_rubric(path: Path, *, import_root: Path, examples: bool = True,
                check_kinds: Mapping[str, CheckParser] | None = None,
                input_roots: Sequence[Path] | None = None) -> Rubric:
    """Load either rubric format: seed 000's dimensions or seed 003's criteria.

    ``examples=False`` leaves the example library unresolved (its globs kept as written, its inputs
    unread): a version diff compares rubrics and needs no example files. ``check_kinds``: the check kinds
    in effect (``harness.checks.with_plugin_kinds``), by default the built-ins. The files the rubric names (its
    examples, their inputs, a schema file) must lie under ``input_roots`` (the plugin passes the rootdir and
    ini harness_input_dirs; default: ``import_root``)."""
    return _rubric_from_raw(load_yaml(path), _place(path, import_root, input_roots), import_root, examples,
                            check_kinds)


def load_rubric_text(text: str, path: Path, *, import_root: Path, examples: bool = True) -> Rubric:
    """Load a rubric's text as if it were the file at ``path`` (an older version from git, say)."""
    return _rubric_from_raw(parse_yaml(text, path), _place(path, import_root, None), import_root, examples)


def _place(path: Path, import_root: Path, input_roots: Sequence[Path] | None) -> Fields:
    """The top of the rubric file: the project's own configuration (it may name code), reading files from
    inside ``input_roots``."""
    return Fields.of(path, import_root=import_root, roots=tuple(input_roots or (import_root,)))


def _rubric_from_raw(raw: Any, place: Fields, import_root: Path, examples: bool = True,
                     check_kinds: Mapping[str, CheckParser] | None = None) -> Rubric:
    if isinstance(raw, Mapping) and "criteria" in raw:
        return _load_review_rubric(raw, place, import_root, examples, check_kinds)
    return _load_dimension_rubric(raw, place, import_root, examples, check_kinds)


def _check(section: Section, import_root: Path, check_kinds: Mapping[str, CheckParser] | None) -> Any:
    """The deterministic check a dimension or criterion declares, if any: reading files from the place's roots,
    naming code as the place allows (a rubric any, a case's additions only ini harness_data_modules')."""
    if "check" not in section:
        return None
    place = section.fields
    return parse_check(section.raw["check"], path=place.path, field=section.sub("check"), base_dir=place.path.parent,
                       import_root=import_root, kinds=check_kinds, roots=place.roots, data_modules=place.data_modules)


DIMENSION_KEYS = ("weight", "description", "scoring", "check", "name", "scale", "step", "choices", "exhaustive",
                  "min_score", "steps", "transform", "per_turn")
MAX_RATINGS = 201  # a stepped scale's ratings, each listed in the judge's answer schema


def _load_dimension_rubric(raw: Any, place: Fields, import_root: Path, examples: bool = True,
                           check_kinds: Mapping[str, CheckParser] | None = None) -> Rubric:
    path = place.path
    top = place.section(raw, known=("metadata", "threshold", "dimensions", "examples", "items",
                                              "transform"),
                                  required=("metadata", "threshold", "dimensions"))
    meta = top.section("metadata", known=("name", "version", "agent", "updated", "description"),
                       required=("name", "version"))
    threshold = top.number("threshold", low=0.0, high=1.0)
    dims_raw = top.raw["dimensions"]
    if not isinstance(dims_raw, Mapping):
        raise top.fields.expected("dimensions", "a mapping of dimension ids", dims_raw,
                                  "add at least one dimension, or write `dimensions: {}` when every case adds its own")
    listed = top.fields.nested("dimensions")
    dimensions = []
    for dim_id, dim_raw in dims_raw.items():
        listed.identifier(dim_id, str(dim_id), "dimension id")
        dim = listed.nested(dim_id).section(dim_raw, known=DIMENSION_KEYS, required=("weight", "description"))
        dimensions.append(parse_dimension(str(dim_id), dim, dim.number("weight", low=0.0, high=1.0), import_root,
                                          check_kinds))
    if dimensions:
        _check_weights_sum(top, "dimensions", dimensions)
    examples_found = _examples(top, path, examples, import_root)
    _check_example_slots(top, dimensions, examples_found)
    return Rubric(
        name=path.stem, path=path, title=meta.text("name"), version=meta.version("version"),
        description=meta.text("description"), agent=meta.text("agent"), updated=meta.text("updated"),
        threshold=threshold, scoring_mode="weighted", dimensions=tuple(dimensions),
        examples=examples_found, items=_items(top), transform=_transform(top, import_root),
    )


def _check_example_slots(top: Section, dimensions: list[Dimension], examples: Examples) -> None:
    """The calibration examples are scored like a case: their inputs and expected answer must fill every slot
    the checks use."""
    if not (examples.gold or examples.anti_patterns):
        return
    for dim in dimensions:
        missing = slots.missing_case_slots(list(check_slots(dim.check)), examples.inputs, examples.expected)
        if missing:
            raise top.error(f"dimensions.{dim.id}.check", f"uses {{{missing[0]}}}, which the examples cannot fill",
                            "give `examples:` an `expected:` answer" if missing[0] == "expected" else
                            f"give `examples.inputs:` a {missing[0].removeprefix('inputs.').split('.')[0]!r} input")


def parse_dimension(dim_id: str, dim: Section, weight: float, import_root: Path,
                    check_kinds: Mapping[str, CheckParser] | None = None) -> Dimension:
    """One dimension as a rubric (or a case's ``criteria:`` and ``checks:``) writes it: a description, and either
    a check, or what the judge answers: a score from 0 to 1 (``scoring`` levels, ``exhaustive`` or not), a
    rating on a ``scale``, or one of the ``choices``."""
    check = _check(dim, import_root, check_kinds)
    scale = _scale(dim)
    step = _step(dim, scale)
    choices = _choices(dim)
    answered = [key for key in ("scale", "choices") if key in dim]
    if len(answered) > 1:
        raise dim.error("choices", "a dimension has a scale or choices, not both", "keep one of them")
    if check is not None and (answered or "exhaustive" in dim or "steps" in dim):
        key = (answered or [k for k in ("exhaustive", "steps") if k in dim])[0]
        raise dim.error(key, "has no meaning for a dimension scored by a check (the check gives the score)",
                        f"remove {key}, or remove the check so the judge scores it")
    if "transform" in dim and check is None:
        raise dim.error("transform", "transforms what a check sees, and this dimension has no check",
                        "move it to the top of the rubric to transform what the judge sees as well")
    exhaustive = dim.boolean("exhaustive", False)
    scoring = _scoring_levels(dim, scale)
    if exhaustive and not scoring:
        raise dim.error("exhaustive", "says the judge must answer one of the levels, but there are none",
                        "add `scoring:` levels, or use `scale:` or `choices:`")
    return Dimension(id=dim_id, weight=weight, description=dim.text("description") or "", name=dim.text("name"),
                     scoring=scoring, check=check, scale=scale, step=step, choices=choices,
                     choice_text=_choice_descriptions(dim), exhaustive=exhaustive,
                     min_score=dim.number("min_score", low=0.0, high=1.0),
                     steps=dim.text_list("steps"), transform=_transform(dim, import_root),
                     # a conversation's replies scored one by one (docs/conversations.md)
                     per_turn=dim.choice("per_turn", tuple(TURN_REDUCERS), "way to combine the turns' scores")
                     if "per_turn" in dim else None)


def _scale(dim: Section) -> tuple[int, int] | None:
    if "scale" not in dim:
        return None
    raw = dim.raw["scale"]
    if (not isinstance(raw, list) or len(raw) != 2 or not all(isinstance(v, int) and not isinstance(v, bool)
                                                              for v in raw) or raw[0] >= raw[1]):
        raise dim.fields.expected("scale", "[lowest, highest] whole-number ratings", raw, "write e.g. `scale: [1, 5]`")
    return raw[0], raw[1]


def _step(dim: Section, scale: tuple[int, int] | None) -> float | None:
    """``step:`` beside ``scale:``: the judge's ratings are the lowest plus whole steps (``step: 0.5`` on
    ``[1, 10]``: 1, 1.5, ... 10). None for whole numbers (no step, or ``step: 1``)."""
    if "step" not in dim:
        if is_number(dim.raw.get("steps")):  # `steps:` are G-Eval's evaluation steps, a list of text
            raise dim.error("steps", f"is a list of evaluation steps, and {dim.raw['steps']!r} is a number",
                            f"write `step: {dim.raw['steps']}` for the ratings' step")
        return None
    if scale is None:
        raise dim.error("step", "is the step between a scale's ratings, and this dimension has no scale",
                        "add `scale: [1, 10]` beside it, or remove step")
    step = dim.fields.number(dim.raw["step"], "step")
    if step <= 0:
        raise dim.error("step", f"must be above 0, got {step:g}", "write e.g. `step: 0.5`, or remove it for whole "
                        "numbers")
    low, high = scale
    count = (high - low) / step
    if abs(count - round(count)) > 1e-6:
        raise dim.error("step", f"{step:g} does not divide the scale [{low}, {high}] into whole steps",
                        f"use a step that does, e.g. 0.5 or {high - low}")
    if round(count) + 1 > MAX_RATINGS:
        raise dim.error("step", f"{step:g} makes {round(count) + 1} ratings on [{low}, {high}], more than "
                        f"{MAX_RATINGS}", "use a coarser step")
    return None if step == 1 else step


def _choices(dim: Section) -> dict[str, float]:
    if "choices" not in dim:
        return {}
    listed = dim.section("choices", known=None, example="`choices: {A: 0.4, B: 0.6, C: 1}`")
    if len(listed.raw) < 2:
        raise dim.error("choices", "needs at least two labels", "write e.g. `choices: {Y: 1, N: 0}`")
    choices: dict[str, float] = {}
    for label, value in listed.raw.items():
        place = listed.fields.nested(str(label))
        if isinstance(value, Mapping):
            value = place.section(value, known=("score", "description"), required=("score",)).raw["score"]
        choices[str(label)] = place.number(value, None, low=0.0, high=1.0)
    return choices


def _choice_descriptions(dim: Section) -> dict[str, str]:
    listed = dim.raw.get("choices") or {}
    return {str(label): str(value["description"]) for label, value in listed.items()
            if isinstance(value, Mapping) and value.get("description")}


def _transform(section: Section, import_root: Path) -> Any:
    if "transform" not in section:
        return None

    return parse_transform(section.raw["transform"], dataclasses.replace(section.fields.nested("transform"),
                                                                         import_root=import_root))


def _scoring_levels(dim: Section, scale: tuple[int, int] | None = None) -> dict[float, str]:
    """The levels a judge reads: scores from 0 to 1, or with a scale, ratings (a dimension with choices
    describes them beside their scores instead)."""
    if "choices" in dim:
        if "scoring" in dim:
            raise dim.error("scoring", "a dimension with choices describes them under choices",
                            "write `choices: {A: {score: 1, description: ...}}`")
        return {}
    scoring = dim.section("scoring", known=None, example='lines such as `1.0: "Exact match"`')
    levels: dict[float, str] = {}
    for key, text in scoring.raw.items():
        try:
            level = float(key)
        except (TypeError, ValueError):
            raise scoring.error(str(key), f"score level {key!r} is not a number",
                                "use a number between 0 and 1" if scale is None else
                                f"use a rating from {scale[0]} to {scale[1]}") from None
        if scale is None:
            scoring.fields.number(level, str(key), low=0.0, high=1.0)
        else:
            scoring.fields.number(level, str(key), low=scale[0], high=scale[1])
        levels[level] = scoring.fields.string(text, str(key), what="a description of the level", blank=True,
                                              fix="quote the description")
    return levels


def _check_weights_sum(section: Section, field: str, dimensions: list[Dimension]) -> None:
    total = sum(d.weight for d in dimensions)
    if abs(total - 1.0) > WEIGHT_TOLERANCE:
        parts = " + ".join(f"{d.weight:g}" for d in dimensions)
        raise section.error(f"{field}.*.weight", f"weights sum to {total:.4g} ({parts}), not 1.0",
                            "adjust the weights so they add up to exactly 1.0")


def _load_review_rubric(raw: Any, place: Fields, import_root: Path, examples: bool = True,
                        check_kinds: Mapping[str, CheckParser] | None = None) -> Rubric:
    path = place.path
    top = place.section(raw, known=("rubric_id", "version", "description", "scoring_mode", "pass_threshold",
                                              "criteria", "output_schema", "examples", "agent", "items"),
                                  required=("rubric_id", "version", "scoring_mode", "criteria"))
    mode = top.choice("scoring_mode", SCORING_MODES, "scoring mode")
    threshold = top.number("pass_threshold", low=0.0, high=1.0)
    if mode == "weighted" and threshold is None:  # the review contract says SHOULD: a warning, not an error
        warnings.warn(HarnessConfigWarning(
            path, "pass_threshold", "missing for weighted scoring; the agent's threshold, else "
            f"defaults.pass_threshold, else {DEFAULT_THRESHOLD} applies", "add `pass_threshold: 0.8`"), stacklevel=2)
    criteria_raw = top.raw["criteria"]
    if not isinstance(criteria_raw, list) or not criteria_raw:
        raise top.fields.expected("criteria", "a list with at least one criterion", criteria_raw,
                                  "add `- id: ...` entries")
    seen: set[str] = set()
    parsed = []
    for index, item in enumerate(criteria_raw):
        crit = top.fields.nested(f"criteria[{index}]").section(
            item, known=("id", "name", "description", "pass_condition", "fail_condition", "weight", "check"),
            required=("id", "name", "description", "pass_condition", "fail_condition"))
        crit_id = crit.identifier("id", "criterion id")
        if crit_id in seen:
            raise crit.error("id", f"duplicate criterion id {crit_id!r}", "give every criterion its own id")
        seen.add(crit_id)
        weight = crit.number("weight", 1.0)
        if weight <= 0:
            raise crit.error("weight", f"weight must be positive, got {weight:g}", "use a number above 0")
        parsed.append((crit_id, weight, crit, _check(crit, import_root, check_kinds)))
    total = sum(weight for _, weight, _, _ in parsed)
    dimensions = tuple(
        Dimension(id=crit_id, weight=weight / total, name=crit.text("name"), description=crit.text("description"),
                  pass_condition=crit.text("pass_condition"), fail_condition=crit.text("fail_condition"),
                  scoring={1.0: crit.text("pass_condition"), 0.0: crit.text("fail_condition")}, check=check)
        for crit_id, weight, crit, check in parsed
    )
    rubric_id = top.fields.identifier(top.text("rubric_id"), "rubric_id", "rubric id")
    return Rubric(
        name=path.stem, path=path, title=rubric_id, version=top.version("version"),
        description=top.text("description"), agent=top.text("agent"), threshold=threshold,
        scoring_mode=mode, dimensions=dimensions, examples=_examples(top, path, examples, import_root),
        items=_items(top), rubric_id=rubric_id, output_schema=_output_schema(top, dimensions),
    )


def _output_schema(top: Section, criteria: tuple[Dimension, ...]) -> dict[str, Any] | None:
    """The review's own JSON Schema: it must be a schema, and it must accept a well-formed review."""
    schema = top.json_schema("output_schema")
    if schema is None:
        return None
    passing = {"pass": True, "issues": [], "suggested_fixes": [], "indeterminate": [],
               "criteria_results": [{"criterion_id": c.id, "criterion_name": c.name or c.id, "verdict": "pass",
                                     "reasoning": "met", "confidence": 1.0} for c in criteria],
               "timings_ms": {"evaluation": 0, "total": 0}}
    rejected = jsonschemas.errors(passing, schema)
    if rejected:
        raise top.error("output_schema", f"rejects a well-formed review result ({rejected[0]})",
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
    path_text = top.fields.string(spec.text("path") if spec is not None else raw, "items",
                                  what="a list path such as `targets`",
                                  fix="write `items: targets`, or `items: {path: theses, score: score}` for a ranked "
                                      "list")
    path = tuple(part for part in path_text.strip().strip(".").split(".") if part)
    if spec is None:
        return ItemsSpec(path=path)
    return ItemsSpec(path=path, score=spec.text("score"), label=spec.text("label"))


def _examples(top: Section, path: Path, resolve: bool = True, import_root: Path | None = None) -> Examples:
    if "examples" not in top:
        return Examples()
    ex = top.section("examples", known=("gold", "anti_patterns", "inputs", "expected"))
    if not resolve:
        return Examples(gold=tuple(path.parent / p for p in ex.text_list("gold")),
                        anti_patterns=tuple(path.parent / p for p in ex.text_list("anti_patterns")))
    roots = top.fields.roots or (import_root or path.parent,)
    gold = _glob_paths(ex, "gold", path.parent, roots)
    anti = _glob_paths(ex, "anti_patterns", path.parent, roots)
    inputs = load_inputs(ex.raw.get("inputs") or {}, path, ex.sub("inputs"), path.parent, roots)
    return Examples(gold=gold, anti_patterns=anti, inputs=inputs, expected=ex.raw.get("expected"))


def _glob_paths(section: Section, key: str, base: Path, roots: Sequence[Path]) -> tuple[Path, ...]:
    """The example files a list of globs names: inside the project (they are shown to the judge), readable."""
    found: list[Path] = []
    for pattern in section.text_list(key):
        try:
            matches = sorted(base.glob(pattern)) if pattern.strip() and not Path(pattern).is_absolute() else None
        except ValueError:
            matches = None
        if matches is None:
            raise section.error(key, f"{pattern!r} is not a glob relative to the rubric file",
                                "write a relative glob such as examples/gold/*.md")
        if not matches:
            raise section.error(key, f"{pattern!r} matches no file under {base}",
                                "fix the path; it is relative to the rubric file")
        for match in matches:
            if not inside(match, roots):
                raise section.error(key, f"{pattern!r} matches {match.resolve()}, outside the project",
                                    "keep the examples inside the project")
            read_text(match)  # too large or not UTF-8: said now, naming the file, not when the judge reads it
        found.extend(matches)
    return tuple(found)


# --- finding a rubric --------------------------------------------------------------------------


def rubric_files(folder: Path) -> list[Path]:
    """The rubric files of a rubrics folder: YAML, and JSON as the review rubrics of the registry are."""
    return registry_files(folder)


def rubric_identity(path: Path) -> tuple[str | None, str | None]:
    """A rubric file's ``rubric_id`` and ``version`` (None when it has none), read without validating it."""
    return file_identity(path, "rubric_id")


GRADERS = "graders/"  # a rubric named graders/NAME is one of the library's (docs/graders.md)
GRADERS_DIR = Path(__file__).parent / "graders"


def library_graders() -> list[str]:
    """The library's graders, as a rubric names them (``graders/f1``)."""
    return sorted(GRADERS + path.stem for path in rubric_files(GRADERS_DIR))


def find_rubric(ref: str, version: str | None, rubrics_dir: Path) -> Path | None:
    """A rubric by file name, else by ``rubric_id``; with ``version``, that version, else the latest.
    ``graders/NAME`` is the library's grader NAME."""
    if ref.startswith(GRADERS):
        return find_rubric(ref.removeprefix(GRADERS), version, GRADERS_DIR) if ref != GRADERS else None
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
