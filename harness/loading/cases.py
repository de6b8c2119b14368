"""Case files (``*.cases.yaml``): an agent and a list of cases, each with an id, inputs, flags and a date."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from harness.fields import Fields, Section
from harness.loading.datasets import dataset_rows
from harness.loading.inputs import load_inputs
from harness.models import AgentConfig, Case
from harness.yamlfile import LineDict, load_yaml

_CASE_KEYS = ("id", "inputs", "flags", "today", "description", "agent", "expected")


def load_cases(path: Path, *, agents: Mapping[str, AgentConfig],
               input_roots: Sequence[Path] | None = None) -> list[Case]:
    """A case file: ``agent:`` (default for its cases), and ``cases:`` (a list with an id each) or ``dataset:``
    (a JSONL, CSV or JSON file, one case a row: harness/loading/datasets.py) or both.

    Input files must lie under ``input_roots`` (the plugin passes the rootdir and ini harness_input_dirs;
    default: the case file's own folder)."""
    roots = tuple(input_roots) if input_roots else (path.parent,)
    top = Fields.of(path).section(load_yaml(path), known=("agent", "cases", "inputs", "dataset"),
                                  required_any=("cases", "dataset"),
                                  example="`cases:` with `- id: my-case` entries, or `dataset: {file: data.jsonl}`")
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
        cases.append(Case(id=case_id, agent=agent, path=path, line=item.line if isinstance(item, LineDict) else 0,
                          inputs=inputs, flags=case.text_list("flags"), today=today,
                          description=case.text("description"), expected=case.raw.get("expected")))
    if "dataset" in top:
        cases.extend(_dataset_cases(top, path, roots, default_agent, shared_inputs, agents, seen))
    return cases


def _dataset_cases(top: Section, path: Path, roots: Sequence[Path], agent: str | None, shared: dict[str, Any],
                   agents: Mapping[str, AgentConfig], seen: set[str]) -> Iterator[Case]:
    if agent is None:
        raise top.error("agent", "a dataset's cases need an agent", "add `agent:` at the top of the file")
    top.fields.choice(agent, "agent", sorted(agents), "agent")
    raw = top.raw["dataset"]
    line = raw.line if isinstance(raw, LineDict) else 0
    where = top.fields.nested("dataset")
    for number, row in dataset_rows(raw, where, path.parent, roots):
        case_id = str(row["id"])
        row_place = Fields.of(where.path, f"dataset (row {number})")
        row_place.identifier(case_id, "id", "case id")
        if case_id in seen:
            raise row_place.error("id", f"duplicate case id {case_id!r}", "make the id template unique per row")
        seen.add(case_id)
        inputs = row["inputs"]
        if not isinstance(inputs, Mapping):
            raise row_place.expected("inputs", "a mapping of input names", inputs,
                                     "write `inputs: {name: \"{column}\"}`")
        yield Case(id=case_id, agent=agent, path=path, line=line, inputs={**shared, **inputs},
                   expected=row.get("expected"))
