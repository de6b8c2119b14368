"""Gate 1 of a phase, besides the handoff it receives: its named precondition checks
(:mod:`harness.loading.construct_checks`), its contract's inputs, and, for the first phase, what it receives."""

from __future__ import annotations

import datetime as dt

from harness.checks import CheckContext
from harness.evaluation.assessment import Check
from harness.evaluation.items.construct.artifacts import (
    READ_LIMIT,
    Workspace,
    check_artifact,
    text_of,
)
from harness.loading.construct_checks import Precondition
from harness.loading.construct_parts import ArtifactSpec
from harness.loading.constructs import Construct, Phase


def precondition_checks(phase: Phase, construct: Construct, workspace: Workspace, *,
                        first: bool) -> tuple[list[Check], bool]:
    """The checks, and whether one that failed found something missing (66, no_input) rather than wrong (65)."""
    checks: list[tuple[Check, bool]] = [_precondition(p, phase, construct, workspace) for p in phase.preconditions]
    for contract_input in phase.contract.inputs:
        if contract_input.optional:
            continue
        there = bool(workspace.matches(contract_input.path))
        checks.append((Check(f"contract input: {contract_input.path}", there, "there" if there else "missing",
                             None if there else f"put {contract_input.path} in the workspace (workspace: in the "
                             "construct copies project files in) or have an earlier phase write it"), not there))
    if first:
        for spec in phase.receives:
            checked = check_artifact(spec, workspace, construct.schemas)
            checks.append((Check(f"receives: {spec.path}", checked.passed, "; ".join(checked.problems) or "there",
                                 "; ".join(checked.fixes) or None), checked.missing and spec.required))
    return [check for check, _ in checks], any(not check.passed and missing for check, missing in checks)


def _precondition(check: Precondition, phase: Phase, construct: Construct, workspace: Workspace) -> tuple[Check, bool]:
    if check.kind == "files_exist":
        wanted = [s.path for s in phase.receives if s.required]
        wanted += [c.path for c in phase.contract.inputs if not c.optional]
        absent = [path for path in wanted if not workspace.matches(path)]
        said = f"missing: {', '.join(absent)}" if absent else f"{len(wanted)} there"
        return Check(check.name, not absent, said, f"provide {', '.join(absent)}" if absent else None), bool(absent)
    assert check.path is not None
    files = workspace.matches(check.path)
    if not files:
        return Check(check.name, False, f"{check.path}: missing", f"provide {check.path}"), True
    if check.kind == "exists":
        return Check(check.name, True, f"{check.path}: {len(files)} file(s)"), False
    if check.kind == "completeness":
        score = check_artifact(ArtifactSpec(path=check.path, schema_id=check.schema_id), workspace,
                               construct.schemas).completeness
        enough = score >= (check.minimum or 0.0) - 1e-9
        return Check(check.name, enough, f"{check.path}: completeness {score:.2f} (at least {check.minimum:g})",
                     None if enough else f"complete {check.path}"), False
    today = dt.datetime.now(dt.timezone.utc).date()
    result = check.check.run(text_of(files[0], READ_LIMIT), CheckContext(inputs=dict(construct.vars), today=today))
    passed = result.score >= 1.0 - 1e-9
    return Check(check.name, passed, f"{check.path}: {result.reason}", None if passed else
                 "; ".join(result.fixes) or f"make {check.path} pass {check.name}"), False
