"""Case files (``*.cases.yaml``): an agent and a list of cases, each with an id, inputs, flags and a date."""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from harness.base.conversation import reference_transcript
from harness.base.fields import ID_PATTERN, Fields, Section
from harness.base.models import AgentConfig, Case, Dimension
from harness.base.yamlfile import LineDict, load_yaml
from harness.checks import CheckParser
from harness.checks.compare import SelectedCheck, parse_values
from harness.loading.conversations import parse_turns, read_case_turns
from harness.loading.datasets import dataset_rows
from harness.loading.inputs import load_inputs
from harness.loading.rubrics import DIMENSION_KEYS, parse_dimension

_CASE_KEYS = ("id", "inputs", "flags", "today", "description", "agent", "expected", "criteria", "checks",
              "selection", "turns", "system")
SELECTION_DIMENSION = "selection"  # the dimension a case's ``selection:`` adds: the selection gate reads it


def load_cases(path: Path, *, agents: Mapping[str, AgentConfig], input_roots: Sequence[Path] | None = None,
               import_root: Path | None = None, check_kinds: Mapping[str, CheckParser] | None = None,
               data_modules: Sequence[str] = ()) -> list[Case]:
    """A case file: ``agent:`` (default for its cases), and ``cases:`` (a list with an id each) or ``dataset:``
    (a JSONL, CSV or JSON file, one case a row: harness/loading/datasets.py), not both.

    Input files must lie under ``input_roots`` (the plugin passes the rootdir and ini harness_input_dirs;
    default: the case file's own folder). A case's ``criteria:`` and ``checks:`` add dimensions to its rubric
    (harness/loading/per_case.py weighs them in); ``import_root`` and ``check_kinds`` are for their checks.
    A case file and its dataset are data: their checks name code only from ``data_modules`` (ini
    harness_data_modules; default none), whatever a row says."""
    roots = tuple(input_roots) if input_roots else (path.parent,)
    top = Fields.of(path, import_root=import_root, roots=roots, data_modules=data_modules).section(
        load_yaml(path), known=("agent", "cases", "inputs", "dataset"), required_any=("cases", "dataset"),
        example="`cases:` with `- id: my-case` entries, or `dataset: {file: data.jsonl}`")
    if "cases" in top and "dataset" in top:
        raise top.error("cases", "given beside dataset:, but a case file takes its cases from one of them",
                        "move the hand-written cases to a case file of their own")
    default_agent = top.text("agent")
    shared_inputs = load_inputs(top.raw.get("inputs") or {}, path, "inputs", path.parent, roots)
    cases_raw = top.raw.get("cases", [])
    if not isinstance(cases_raw, list) or ("dataset" not in top and not cases_raw):
        raise top.fields.expected("cases", "a list with at least one case", cases_raw, "add `- id: my-case` entries")
    cases: list[Case] = []
    seen: set[str] = set()
    for index, item in enumerate(cases_raw):
        case = top.fields.nested(f"cases[{index}]").section(item, known=_CASE_KEYS, required=("id",))
        case_id = case.identifier("id", "case id")
        if case_id in seen:
            raise case.error("id", f"duplicate case id {case_id!r}", "give every case its own id")
        seen.add(case_id)
        agent = case.text("agent", default_agent)
        if agent is None:
            raise case.error("agent", "no agent for this case", "add `agent:` at the top of the file")
        # a case's own agent is named at the case, the file's default at the top of the file
        (case if "agent" in case else top).fields.choice(
            agent, "agent", sorted(agents), "agent", fix=f"use one of: {', '.join(sorted(agents))} (defined in "
            "agents.yaml)")
        today = case.raw.get("today")
        if today is not None and not isinstance(today, dt.date):
            raise case.fields.expected("today", "a date", today, "write YYYY-MM-DD")
        inputs = {**shared_inputs, **load_inputs(case.raw.get("inputs") or {}, path, case.sub("inputs"), path.parent,
                                                 roots)}
        talk = read_case_turns(case)  # a conversation's turns and system prompt (docs/conversations.md)
        cases.append(Case(id=case_id, agent=agent, path=path, line=item.line if isinstance(item, LineDict) else 0,
                          inputs=inputs, flags=case.text_list("flags"), today=today,
                          description=case.text("description"), expected=_expected(case.raw.get("expected"), talk),
                          **talk, **with_selection(case, additions(case, import_root or path.parent, check_kinds))))
    if "dataset" in top:
        cases.extend(_dataset_cases(top, path, roots, default_agent, shared_inputs, agents, seen,
                                    import_root or path.parent, check_kinds))
    return cases


def _expected(expected: Any, talk: dict[str, Any]) -> Any:
    """A case's reference answer; a conversation without one has its references' transcript, when every turn has
    a reference reply."""
    if expected is not None or not talk:
        return expected
    return reference_transcript(talk["turns"], talk["system"])


T = TypeVar("T")


def owned_cases(top: Section, what_inputs: str, known: Sequence[str], roots: Sequence[Path],
                data_modules: Sequence[str], make: Callable[..., T]) -> Iterator[T]:
    """The items of a file that runs one thing (a skill, a pipeline): its ``cases:`` (each an ``id``, its
    ``inputs``, and what ``known`` allows more) or a ``dataset:``'s rows, with the ``inputs:`` they all share.
    They are data: their checks name code only from ``data_modules``. ``make`` turns each into the owner's
    :class:`Case`, checking what the owner's cases may and may not say (``what_inputs`` names their input in
    errors): ``make(place, case_id, inputs, line, **more)``, ``more`` a hand-written case's ``today`` and
    ``description``."""
    path = top.fields.path
    data = dataclasses.replace(top.fields, data_modules=tuple(data_modules))
    shared = load_inputs(top.raw.get("inputs") or {}, path, "inputs", path.parent, roots)
    if "dataset" in top:
        raw = top.raw["dataset"]
        where = data.nested("dataset")
        for number, row in dataset_rows(raw, where, path.parent, roots):
            place = dataclasses.replace(where, field=f"dataset (row {number})")
            case_id = place.identifier(str(row["id"]), "id", "case id")
            inputs = row["inputs"]
            if not isinstance(inputs, Mapping):
                raise place.expected("inputs", f"a mapping ({what_inputs})", inputs,
                                     "write `inputs: {name: \"{column}\"}`")
            yield make(Section(row, place), case_id, {**shared, **inputs}, raw.line if isinstance(raw, LineDict) else 0)
        return
    listed = top.raw["cases"]
    if not isinstance(listed, list) or not listed:
        raise top.fields.expected("cases", "a list with at least one case", listed, "add `- id: first` entries")
    for index, item in enumerate(listed):
        case = data.nested(f"cases[{index}]").section(item, known=known, required=("id",))
        today = case.raw.get("today")
        if today is not None and not isinstance(today, dt.date):
            raise case.fields.expected("today", "a date", today, "write YYYY-MM-DD")
        inputs = {**shared, **load_inputs(case.raw.get("inputs") or {}, path, case.sub("inputs"), path.parent, roots)}
        yield make(case, case.identifier("id", "case id"), inputs, item.line if isinstance(item, LineDict) else 0,
                   today=today, description=case.text("description"))


def additions(place: Section, import_root: Path, check_kinds: Mapping[str, CheckParser] | None
              ) -> dict[str, tuple[Dimension, ...]]:
    """A case's ``criteria:`` (judged dimensions: ``"id: description"`` or a dimension's mapping with ``id``) and
    ``checks:`` (a check such as ``{contains: {all: [x]}}``, or ``{id, check, weight, min_score}``)."""
    found: dict[str, tuple[Dimension, ...]] = {}
    for key, kind in (("criteria", "criterion"), ("checks", "check")):
        raw = place.raw.get(key)
        if raw is None:
            continue
        items = raw if isinstance(raw, list) else [raw]
        found[key] = tuple(_added(place.fields.nested(f"{key}[{index}]"), item, kind, index, import_root,
                                  check_kinds) for index, item in enumerate(items))
    return found


def with_selection(case: Section, found: dict[str, Any]) -> dict[str, Any]:
    """A case's ``selection:`` (the agent or skill a router should choose for it) as the dimension the selection
    gate reads: checked by rule (``selection: summarize``: the router's answer names it) or by the judge
    (``selection: {expected: summarize, by: judge}``); either way a wrong choice fails the case (``min_score``)."""
    raw = case.raw.get("selection")
    if raw is None:
        return found
    example = "`selection: summarize` or `selection: {expected: [summarize, digest], by: judge}`"
    place = case.fields.nested("selection")
    by = "rule"
    if isinstance(raw, Mapping):
        options = place.mapping(raw, allowed=("expected", "by"), example=example)
        if "expected" not in options:
            raise place.expected("expected", "the agent or skill to choose", None, f"write {example}")
        by = place.choice(options.get("by", "rule"), "by", ("rule", "judge"), "way to check the choice")
        raw = options["expected"]
    values = parse_values(raw, place, "expected" if isinstance(case.raw["selection"], Mapping) else None, example)
    taken = {d.id for d in (*found.get("criteria", ()), *found.get("checks", ()))}
    if SELECTION_DIMENSION in taken:
        raise case.error("selection", f"the case already adds a dimension {SELECTION_DIMENSION!r}",
                         "rename that criterion or check")
    if by == "rule":
        dim = Dimension(id=SELECTION_DIMENSION, weight=1.0, description=f"the router chose {' or '.join(values)}",
                        check=SelectedCheck(values), min_score=1.0)
        return {**found, "checks": (*found.get("checks", ()), dim), "selection": values}
    dim = Dimension(id=SELECTION_DIMENSION, weight=1.0, min_score=0.5,
                    description=f"Was the right agent or skill chosen for this request? The right one is "
                                f"{' or '.join(values)}: 1.0 when the answer chooses it, 0.0 when it chooses another "
                                "or none.")
    return {**found, "criteria": (*found.get("criteria", ()), dim), "selection": values}


def _added(place: Fields, item: Any, kind: str, index: int, import_root: Path,
           check_kinds: Mapping[str, CheckParser] | None) -> Dimension:
    default_id = f"{kind}-{index + 1}"
    if kind == "criterion" and isinstance(item, str):  # "conciseness: Is the answer concise?"
        head, sep, text = item.partition(":")
        named = bool(sep) and ID_PATTERN.match(head.strip()) is not None and " " not in head.strip()
        description = text.strip() if named else item.strip()
        if not description:
            raise place.expected(None, "a criterion such as `conciseness: Is the answer concise?`", item)
        return Dimension(id=head.strip() if named else default_id, weight=1.0, description=description)
    if kind == "check" and isinstance(item, Mapping) and "check" not in item:
        item = {"check": item}  # the check itself: `- contains: {all: [Paris]}`
    known = ("id",) + DIMENSION_KEYS
    section = place.section(item, known=known, required=("check",) if kind == "check" else ("description",),
                            example="`{id: relevance, description: ..., weight: 1}`" if kind == "criterion" else
                            "`{contains: {all: [Paris]}}` or `{id: exact, check: {equals: \"{expected}\"}}`")
    if kind == "criterion" and "check" in section:
        raise section.error("check", "a criterion is judged", "move a case's checks under `checks:`")
    dim_id = section.identifier("id", f"{kind} id") if "id" in section else default_id
    weight = section.number("weight", 1.0, low=0.0)
    if weight is not None and weight <= 0:
        raise section.error("weight", f"weight must be positive, got {weight:g}", "use a number above 0")
    dim = parse_dimension(dim_id, section, weight or 1.0, import_root, check_kinds)
    return dim if dim.description else dim.model_copy(update={"description": f"the case's check {dim_id}"})


def _dataset_cases(top: Section, path: Path, roots: Sequence[Path], agent: str | None, shared: dict[str, Any],
                   agents: Mapping[str, AgentConfig], seen: set[str], import_root: Path,
                   check_kinds: Mapping[str, CheckParser] | None) -> Iterator[Case]:
    if agent is None:
        raise top.error("agent", "a dataset's cases need an agent", "add `agent:` at the top of the file")
    top.fields.choice(agent, "agent", sorted(agents), "agent")
    raw = top.raw["dataset"]
    line = raw.line if isinstance(raw, LineDict) else 0
    where = top.fields.nested("dataset")
    for number, row in dataset_rows(raw, where, path.parent, roots):
        case_id = str(row["id"])
        row_place = dataclasses.replace(where, field=f"dataset (row {number})")  # no Path parsing per row
        row_place.identifier(case_id, "id", "case id")
        if case_id in seen:
            raise row_place.error("id", f"duplicate case id {case_id!r}", "make the id template unique per row")
        seen.add(case_id)
        inputs = row["inputs"]
        if not isinstance(inputs, Mapping):
            raise row_place.expected("inputs", "a mapping of input names", inputs,
                                     "write `inputs: {name: \"{column}\"}`")
        added = additions(Section(row, row_place), import_root, check_kinds) if (
            "criteria" in row or "checks" in row) else {}
        talk: dict[str, Any] = {}
        if "messages" in row:  # a chat message list kept as messages: a conversation (docs/conversations.md)
            turns, system = parse_turns(row["messages"], row_place.nested("messages"), strict=False)
            talk = {"turns": turns, "system": system}
        yield Case(id=case_id, agent=agent, path=path, line=line, inputs={**shared, **inputs},
                   expected=_expected(row.get("expected"), talk), **talk, **added)
