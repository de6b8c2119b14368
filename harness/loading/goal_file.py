"""goals/<slug>/goal.md to a typed, frozen :class:`~harness.loading.goal.Goal`; every mistake names the file,
line and field.

The format (docs/tournament.md has the full reference)::

    # Make the prime counter faster
    ## Objective
    free text
    ## Metric
    - name: runtime_ms
    - direction: minimize
    ## Benchmark
    - command: {python} goals/demo/bench/workload.py   (the measured run: no result channel)
    - check: {python} goals/demo/bench/check.py        (sealed: reads the run's stdout, writes the result)
    - score_from: cpu_time     (cpu_time / wall_time: measured by the harness; output: the check's score)
    - timeout: 60
    - parse: json              (the check's result: json, the last JSON object line; regex: score_regex)
    ## Sealed paths
    - goals/demo/bench/**
    ## Phases                  (seed 001 section 12)
    | Phase | Focus | Sub-Score Targets | Status |
    ## Approach families       (custom tags, | Tag | Description |)
    ## Agents                  planners, executors, architect_review, executor_command, model ...
    ## Stop conditions         max_iterations, target_score, plateau_window, circuit_breaker
    ## Acceptance              noise_runs, candidate_runs, confirm_pairs, min_effect, significance, alpha ...,
                               plausible_best, plausible_factor, zero_plausible
    ## Critic                  family_streak
    ## Sandbox                 env, read, write, executor_network, memory_mb, processes, tmp_mb, disk_mb, output_kb
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any, NoReturn

from harness.base.errors import HarnessConfigError, did_you_mean
from harness.base.fields import Fields
from harness.base.jsonschemas import contract, contract_errors
from harness.base.yamlfile import read_text
from harness.loading.goal import (
    AcceptanceSpec,
    AgentsSpec,
    BenchmarkSpec,
    Goal,
    Metric,
    Phase,
    PhaseTarget,
    SandboxSpec,
    StopConditions,
)

_SECTION_ALIASES = {
    "objective": "objective", "metric": "metric", "benchmark": "benchmark",
    "sealed paths": "sealed", "sealed": "sealed", "phases": "phases",
    "approach families": "families", "families": "families", "agents": "agents",
    "stop conditions": "stop", "acceptance": "acceptance", "critic": "critic", "sandbox": "sandbox",
    "notes": "notes", "context": "notes",
}
_KEYS: dict[str, dict[str, str]] = {
    # section -> key -> kind
    "metric": {"name": "str", "direction": "direction"},
    "benchmark": {"command": "str", "check": "str", "timeout": "pos_float", "parse": "parse", "score_key": "str",
                  "sub_scores_key": "str", "score_regex": "regex", "result": "result",
                  "score_from": "score_from", "held_back": "str"},
    "agents": {"planners": "nonneg_int", "executors": "pos_int", "architect_review": "bool",
               "executor_command": "str", "executor_max_steps": "pos_int", "executor_timeout": "pos_float",
               "model": "str", "temperature": "nonneg_float", "max_tokens": "pos_int"},
    "stop": {"max_iterations": "pos_int", "target_score": "float", "plateau_window": "pos_int",
             "circuit_breaker": "pos_int"},
    "acceptance": {"noise_runs": "runs", "candidate_runs": "pos_int", "confirm_pairs": "runs",
                   "min_effect": "nonneg_float", "significance": "significance", "alpha": "alpha",
                   "post_merge_runs": "pos_int", "regression_tolerance": "nonneg_float",
                   "gate_tolerance": "nonneg_float", "plausible_best": "float", "plausible_factor": "factor",
                   "zero_plausible": "bool"},
    "critic": {"family_streak": "pos_int"},
    "sandbox": {"env": "names", "read": "paths", "write": "paths", "executor_network": "bool",
                "memory_mb": "pos_int", "processes": "pos_int", "tmp_mb": "pos_int", "disk_mb": "pos_int",
                "output_kb": "pos_int"},
}
_CHOICES = {"direction": ("maximize", "minimize"), "parse": ("json", "regex"), "result": ("channel", "stdout"),
            "significance": ("mann_whitney", "bootstrap"), "score_from": ("output", "cpu_time", "wall_time")}
_LEAST = {"pos_int": 1, "nonneg_int": 0, "runs": 2}  # runs: the spread needs two samples
_BOUNDS: dict[str, dict[str, float]] = {"pos_float": {"above": 0}, "nonneg_float": {"low": 0},
                                        "alpha": {"above": 0, "below": 1}, "factor": {"above": 1}}
# a value of each kind, for the fix of a bad one
_EXAMPLES = {"str": "text", "direction": "minimize", "parse": "json", "result": "channel", "score_from": "output",
             "pos_float": "60", "nonneg_float": "0.5", "float": "0.9", "alpha": "0.05", "pos_int": "3",
             "nonneg_int": "0", "runs": "5", "bool": "on", "factor": "20", "significance": "mann_whitney",
             "names": "MY_TOKEN, OTHER_NAME", "paths": "data/, /opt/tool"}
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_FIELD_NAMES = {"timeout": "timeout_s", "executor_timeout": "executor_timeout_s"}
_SECTION_FIELD = {"stop": "stop_conditions"}
_BULLET = re.compile(r"^\s*[-*]\s+(?P<key>[A-Za-z_][\w.]*)\s*:\s*(?P<value>.*?)\s*$")
_TARGET = re.compile(r"^\s*(?P<name>[A-Za-z_][\w.-]*)\s*(?P<op>>=|<=|==|>|<)\s*(?P<value>[-+0-9.eE]+)\s*$")
SLUG = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
FAMILY = re.compile(r"^[a-z][a-z0-9_]*$")


def _number(text: str) -> Any:
    """The number a bullet's text spells, else the text itself (for the validator to refuse by name)."""
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def _strip(value: str) -> str:
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "`'\"":
        value = value[1:-1]
    return value


class _Parser:
    def __init__(self, path: Path, text: str):
        self.path = path
        self.lines = text.splitlines()

    def fail(self, line: int | None, field: str | None, problem: str, fix: str) -> NoReturn:
        where = f"{self.path}:{line}" if line else str(self.path)
        raise HarnessConfigError(where, field, problem, fix)

    def sections(self) -> tuple[str, dict[str, list[tuple[int, str]]]]:
        title = ""
        out: dict[str, list[tuple[int, str]]] = {}
        current: str | None = None
        in_fence = False
        for number, line in enumerate(self.lines, 1):
            if line.strip().startswith("```"):
                in_fence = not in_fence
            if not in_fence and line.startswith("# ") and not title:
                title = line[2:].strip()
                continue
            if not in_fence and line.startswith("## "):
                name = line[3:].strip().lower().rstrip(":")
                if name not in _SECTION_ALIASES:
                    known = ", ".join(sorted({k.title() for k in _SECTION_ALIASES}))
                    hint = did_you_mean(name, _SECTION_ALIASES)
                    self.fail(number, name, f"unknown section{hint}", f"use one of: {known}")
                current = _SECTION_ALIASES[name]
                if current in out:
                    self.fail(number, name, "section given twice", f"merge the two '## {line[3:].strip()}' sections")
                out[current] = []
                continue
            if current is not None:
                out[current].append((number, line))
        return title, out

    def bullets(self, section: str, lines: list[tuple[int, str]]) -> dict[str, tuple[int, str]]:
        fields: dict[str, tuple[int, str]] = {}
        for number, line in lines:
            if not line.strip() or line.strip().startswith(("<!--", ">")):
                continue
            match = _BULLET.match(line)
            if not match:
                if line.lstrip().startswith(("-", "*")):
                    self.fail(number, _SECTION_FIELD.get(section, section),
                              f"cannot read {line.strip()!r}", "write '- key: value'")
                continue  # prose between bullets is allowed
            key = match["key"].lower()
            allowed = _KEYS.get(section, {})
            if key not in allowed and not (section == "benchmark" and key.startswith("sub_score_regex.")):
                self.fail(number, f"{_SECTION_FIELD.get(section, section)}.{key}",
                          f"unknown field{did_you_mean(key, allowed)}", f"known fields: {', '.join(sorted(allowed))}")
            if key in fields:
                self.fail(number, f"{_SECTION_FIELD.get(section, section)}.{key}", "given twice",
                          f"keep one '- {key}:' line (the first is on line {fields[key][0]})")
            fields[key] = (number, _strip(match["value"]))
        return fields

    def convert(self, section: str, key: str, kind: str, line: int, raw: str) -> Any:
        """A bullet's text read as a value of ``kind``, checked by the shared validators (harness.base.fields)."""
        fields = Fields.of(f"{self.path}:{line}", _SECTION_FIELD.get(section, section))
        example = f"write '- {key}: {_EXAMPLES.get(kind, 'value')}'"
        if raw == "":
            raise fields.expected(key, "a value", None, example)
        if kind == "str":
            return raw
        if kind in _CHOICES:
            word = raw.strip().lower().replace("-", "_").replace(" ", "_")
            return fields.choice(word, key, _CHOICES[kind], key)
        if kind in ("names", "paths"):
            items = tuple(_strip(part) for part in raw.split(",") if part.strip())
            for item in items:
                if kind == "names" and not _NAME.match(item):
                    raise fields.error(key, f"{item!r} is not an environment variable name",
                                       "list names separated by commas, e.g. 'CARGO_HOME, MY_TOKEN'")
            return items
        if kind == "bool":  # goal.md is prose: on/off and yes/no read as true and false
            word = raw.lower()
            if word in ("on", "yes", "true", "1", "off", "no", "false", "0"):
                return word in ("on", "yes", "true", "1")
            raise fields.expected(key, "on or off", raw, example)
        if kind == "regex":
            if fields.regex(raw, key).groups < 1:
                raise fields.error(key, "the regex needs one capturing group around the number",
                                   "put the number in parentheses, e.g. `score=([0-9.]+)`")
            return raw
        value = _number(raw.removesuffix("s") if kind == "pos_float" else raw)
        if kind in _LEAST:
            return fields.integer(value, key, minimum=_LEAST[kind])
        return fields.number(value, key, **_BOUNDS.get(kind, {}))

    def table(self, section: str, lines: list[tuple[int, str]], columns: list[str]) -> list[tuple[int, list[str]]]:
        rows = [(n, line.strip()) for n, line in lines if line.strip().startswith("|")]
        if not rows:
            return []
        header_line, header = rows[0]
        cells = [c.strip().lower().replace("-", " ") for c in header.strip("|").split("|")]
        wanted = [c.lower().replace("-", " ") for c in columns]
        if cells != wanted:
            self.fail(header_line, section, f"table columns are {cells}, expected {wanted}",
                      f"use the header | {' | '.join(columns)} |")
        out = []
        for number, row in rows[1:]:
            values = [c.strip() for c in row.strip("|").split("|")]
            if all(set(v) <= set("-: ") for v in values):
                continue  # the |---|---| separator
            if len(values) != len(columns):
                self.fail(number, section, f"row has {len(values)} cells, expected {len(columns)}",
                          f"give every row the cells | {' | '.join(columns)} |")
            out.append((number, values))
        return out


def load_goal(path: Path | str) -> Goal:
    """Parse ``goals/<slug>/goal.md``; raise :class:`HarnessConfigError` naming file, line and field."""
    path = Path(path)
    if not path.exists():
        raise HarnessConfigError(path, None, "no such file", "create goals/<slug>/goal.md")
    text = read_text(path)
    p = _Parser(path, text)
    slug = path.resolve().parent.name
    if not SLUG.match(slug):
        p.fail(None, "slug", f"goal folder name {slug!r} is not a valid slug", "use letters, digits, _ . -")
    title, sections = p.sections()
    for required in ("objective", "metric", "benchmark", "sealed"):
        if required not in sections:
            heading = {"sealed": "Sealed paths"}.get(required, required.title())
            p.fail(None, required if required != "sealed" else "sealed_paths", "missing section",
                   f"add a '## {heading}' section")
    data: dict[str, Any] = {"path": path, "slug": slug, "title": title or slug}

    objective = "\n".join(line for _, line in sections["objective"]).strip()
    if not objective:
        p.fail(None, "objective", "is empty", "say in a sentence what the goal is")
    data["objective"] = objective

    def section_values(section: str, required: tuple[str, ...] = ()) -> dict[str, Any]:
        fields = p.bullets(section, sections.get(section, []))
        for key in required:
            if key not in fields:
                p.fail(None, f"{section}.{key}", "missing", f"add '- {key}: ...' under ## {section.title()}")
        values: dict[str, Any] = {}
        for key, (line, raw) in fields.items():
            if key.startswith("sub_score_regex."):
                values.setdefault("sub_score_regexes", []).append(
                    (key.split(".", 1)[1], p.convert(section, key, "regex", line, raw)))
                continue
            values[_FIELD_NAMES.get(key, key)] = p.convert(section, key, _KEYS[section][key], line, raw)
        return values

    data["metric"] = Metric(**section_values("metric", ("name", "direction")))
    bench = section_values("benchmark", ("command",))
    _check_measurement(p, bench, p.bullets("benchmark", sections["benchmark"]), slug)
    bench["sub_score_regexes"] = tuple(bench.get("sub_score_regexes", ()))
    data["benchmark"] = BenchmarkSpec(**bench)

    sealed = []
    for number, line in sections["sealed"]:
        stripped = line.strip()
        if stripped.startswith(("-", "*")):
            glob = _strip(stripped[1:].strip())
            if not glob or glob.startswith("/") or ".." in Path(glob).parts:
                p.fail(number, "sealed_paths", f"{glob!r} is not a path inside the repository",
                       "use globs relative to the repository root, e.g. goals/<slug>/bench/**")
            sealed.append(glob)
    if not sealed:
        p.fail(None, "sealed_paths", "no sealed path given", "list the benchmark's files as '- glob'")
    data["sealed_paths"] = tuple(sealed)

    families = {row["tag"]: row["description"] for row in contract("approach_families")["default"]}
    custom = []
    for number, (tag, description) in p.table("approach_families", sections.get("families", []),
                                               ["Tag", "Description"]):
        tag = _strip(tag)
        if not FAMILY.match(tag):
            p.fail(number, f"approach_families.{tag}", "a tag is lower case letters, digits and _",
                   "rename it, e.g. 'micro_tuning'")
        if tag in families:
            p.fail(number, f"approach_families.{tag}", "already a family", "pick another tag")
        if not description:
            p.fail(number, f"approach_families.{tag}", "needs a description", "fill in the Description cell")
        families[tag] = description
        custom.append(tag)
    data["families"] = tuple(families.items())
    data["custom_families"] = tuple(custom)

    phases = []
    for number, (name, focus, targets, status) in p.table(
            "phases", sections.get("phases", []), ["Phase", "Focus", "Sub-Score Targets", "Status"]):
        parsed = []
        for part in re.split(r",|\band\b|;", targets):
            if not part.strip() or part.strip() in ("-", "none"):
                continue
            match = _TARGET.match(part)
            if not match:
                p.fail(number, f"phases.{name}.sub_score_targets", f"cannot read {part.strip()!r}",
                       "write targets like 'correct >= 1, runtime_ms <= 10'")
            try:
                value = float(match["value"])
            except ValueError:
                value = math.nan
            if not math.isfinite(value):
                p.fail(number, f"phases.{name}.sub_score_targets", f"{match['value']!r} is not a number",
                       "write targets like 'correct >= 1, runtime_ms <= 10'")
            parsed.append(PhaseTarget(sub_score=match["name"], op=match["op"], value=value))
        row = {"phase": name, "focus": focus, "status": status.lower(),
               "sub_score_targets": [t.model_dump() for t in parsed]}
        errors = contract_errors("goal_phase", row)
        if errors:
            p.fail(number, f"phases.{name or '?'}", errors[0],
                   "a phase is named with letters, digits and _; Status is active, pending or completed")
        phases.append(Phase(phase=name, focus=focus, targets=tuple(parsed), status=status.lower()))
    if phases:
        active = [ph for ph in phases if ph.status == "active"]
        if len(active) != 1:
            p.fail(None, "phases", f"{len(active)} phases are active, expected exactly one",
                   "mark one row's Status 'active'")
        if len({ph.phase for ph in phases}) != len(phases):
            p.fail(None, "phases", "two phases share a name", "give every phase its own name")
    data["phases"] = tuple(phases)

    data["agents"] = AgentsSpec(**section_values("agents"))
    data["stop"] = StopConditions(**section_values("stop"))
    acceptance = section_values("acceptance")
    if acceptance.get("zero_plausible") and data["benchmark"].measured:
        line = p.bullets("acceptance", sections["acceptance"])["zero_plausible"][0]
        p.fail(line, "acceptance.zero_plausible", f"a measured time of 0 is never plausible (score_from: "
               f"{data['benchmark'].score_from})", "remove the line")
    data["acceptance"] = AcceptanceSpec(**acceptance)
    data["sandbox"] = SandboxSpec(**section_values("sandbox"))
    critic = section_values("critic")
    if "family_streak" in critic:
        data["family_streak"] = critic["family_streak"]
    return Goal(**data)


# fields that say how the check's result is read: without a check there is no result to read
_CHECK_RESULT_FIELDS = ("result", "parse", "score_key", "sub_scores_key", "score_regex")


def _check_measurement(p: _Parser, bench: dict[str, Any], lines: dict[str, tuple[int, str]], slug: str) -> None:
    """A score must never come from the process the candidate's code runs in: ``score_from: output`` needs a
    sealed check, and fields that describe the check's result need a check to describe."""
    score_from = bench.get("score_from", "output")
    fix = (f"add '- check: {{python}} goals/{slug}/bench/check.py', a sealed command that reads the run's stdout "
           "and writes the score to HARNESS_RESULT_FILE, or score the run's time with '- score_from: cpu_time'")
    if not bench.get("check"):
        if score_from == "output":
            if "score_from" in lines:
                p.fail(lines["score_from"][0], "benchmark.score_from", "output takes the score from what the "
                       "benchmark reports, and without a check that is the measured run, where the candidate's "
                       "code runs", fix)
            p.fail(None, "benchmark.check", "missing: without a check the score (score_from: output, the default) "
                   "would come from the measured run, where the candidate's code runs", fix)
        for key, (line, _) in lines.items():
            if key in _CHECK_RESULT_FIELDS or key.startswith("sub_score_regex."):
                p.fail(line, f"benchmark.{key}", "describes the check's result, and the goal has no check",
                       "add '- check: ...' (a sealed command that reads the run's stdout), or remove the line")
    if score_from == "output" and bench.get("parse") == "regex" and not bench.get("score_regex"):
        p.fail(None, "benchmark.score_regex", "missing (parse: regex needs it)",
               "add '- score_regex: `score=([0-9.]+)`'")


def goal_metrics(goals_dir: Path | str) -> dict[str, Metric]:
    """The metric of every goal under ``goals_dir`` (``goals/<slug>/goal.md``), by slug. A goal file that
    does not parse is left out: ``harness improve`` is where its error is reported."""
    found: dict[str, Metric] = {}
    for path in sorted(Path(goals_dir).glob("*/goal.md")):
        try:
            goal = load_goal(path)
        except HarnessConfigError:
            continue
        found[goal.slug] = goal.metric
    return found


def find_goal_file(target: Path | str) -> Path:
    """``goals/<slug>`` or ``goals/<slug>/goal.md`` to the goal file's path."""
    target = Path(target)
    candidate = target / "goal.md" if target.is_dir() else target
    if not candidate.is_file():
        raise HarnessConfigError(target, None, "no goal.md here", "pass goals/<slug> or goals/<slug>/goal.md")
    return candidate
