"""A judge program's ``score:``: which dimensions it scores, from which step, its verdicts combined by which
registered reducer (harness.base.reducers) with which options; each checked against the steps it reads."""

from __future__ import annotations

from typing import Any

from harness.base.errors import did_you_mean
from harness.base.fields import Section
from harness.base.reducers import REDUCERS, Reducer
from harness.loading.judge_programs.model import SCORE_KEYS, JudgeProgram, ProgramStep, ScoreRule, labelled, terminal


def score_rules(top: Section, program: JudgeProgram) -> tuple[ScoreRule, ...]:
    raw = top.raw.get("score", {})
    blocks = raw if isinstance(raw, list) else [raw]
    if not blocks:
        raise top.fields.expected("score", "a mapping or a non-empty list of them", raw,
                                  "write e.g. `score: {dimension: relevancy, from: verdicts, reduce: share, of: yes}`")
    options = tuple(dict.fromkeys(o for r in REDUCERS.values() for o in r.options))
    rules: list[ScoreRule] = []
    taken: set[str] = set()
    for index, block in enumerate(blocks):
        key = f"score[{index}]" if isinstance(raw, list) else "score"
        rule = _score_rule(top.fields.nested(key).section(block or {}, known=SCORE_KEYS + options), program)
        if len(blocks) > 1 and not rule.dimensions:
            raise top.error(key, "one of several score blocks names no dimension",
                            "give each block `dimension: ID` (or `dimensions: [...]`)")
        clash = taken.intersection(rule.dimensions)
        if clash:
            raise top.error(key, f"dimension {sorted(clash)[0]} is scored twice", "score each dimension once")
        taken.update(rule.dimensions)
        rules.append(rule)
    return tuple(rules)


def _score_rule(block: Section, program: JudgeProgram) -> ScoreRule:
    where = block.fields.field
    if "dimension" in block and "dimensions" in block:
        raise block.error("dimensions", "given beside dimension", "keep one")
    dims = ((block.identifier("dimension", "dimension id"),) if "dimension" in block else
            tuple(block.fields.identifier(d, f"dimensions[{i}]", "dimension id")
                  for i, d in enumerate(block.fields.string_list(block.raw["dimensions"], "dimensions",
                                                                  example="`dimensions: [relevancy]`")))
            if "dimensions" in block else ())
    names = [s.name for s in program.steps]
    source = None
    if "from" in block:
        source = block.raw["from"]
        if not isinstance(source, str) or source not in names:
            raise block.error("from", f"no step {source!r}{did_you_mean(source, names)}",
                              f"use one of: {', '.join(names)}")
    reducer = None
    if "reduce" in block:
        reducer = REDUCERS[block.choice("reduce", sorted(REDUCERS), "reducer")]
    rule = ScoreRule(field=where, dimensions=dims, source=source, reduce=reducer.name if reducer else None,
                     empty=block.number("empty", None, low=0.0, high=1.0))
    ends = [program.step(source)] if source is not None else terminal(program)
    for step in ends:
        _check_scorer(block, step, reducer, source is not None)
    taken = reducer.options if reducer is not None else {}
    for key in block.raw:
        if key not in SCORE_KEYS and key not in taken:
            users = [r.name for r in REDUCERS.values() if key in r.options]
            raise block.error(str(key), f"is an option of {', '.join(users)}, not of "
                              f"{'reduce ' + reducer.name if reducer else 'a score without reduce'}",
                              f"remove it, or use `reduce: {users[0]}`")
    opts = {key: _option(block, key, kind, ends) for key, kind in taken.items() if key in block}
    if reducer is not None:
        for key in reducer.required:
            if key not in block:
                raise block.error(key, f"missing: reduce {reducer.name} needs it", f"add `{key}:` ({reducer.summary})")
    return rule.model_copy(update={"options": opts})


def _check_scorer(block: Section, step: ProgramStep, reducer: Reducer | None, named: bool) -> None:
    """The step ``block`` takes its score from can give one: its verdicts reduced, or its one answer scored."""
    where = f"step {step.name}" if named else f"the program can end at step {step.name}, and it"
    if step.for_each is None:
        if reducer is not None:
            raise block.error("reduce", f"combines the verdicts of a for_each step, and {where} answers once",
                              "remove reduce, or take the score from a for_each step")
        if not step.gives_score:
            raise block.error("from" if named else None, f"{where} answers {step.answer.words}, which gives no score",
                              "give the step `scores: {label: score}` or a rating or number answer, end the program "
                              "with a score (`next: {no: 0.0}`), or name the scoring step in `from:`")
        return
    if reducer is None:
        if not step.gives_score:
            raise block.error("reduce", f"missing: {where} answers once per element, and its answers have no "
                              "score to take the mean of", "add e.g. `reduce: share` and `of: yes`")
        return
    if reducer.reads == "labels" and step.answer.kind != "label":
        raise block.error("reduce", f"{reducer.name} reads labels, and {where} answers {step.answer.words}",
                          "use mean, min, max or median")
    if reducer.reads == "scores" and not step.gives_score:
        raise block.error("reduce", f"{reducer.name} reads scores, and {where} answers {step.answer.words} with no "
                          "scores", "give the step `scores: {label: score}`, or use share (with `of:`)")


def _option(block: Section, key: str, kind: str, ends: list[ProgramStep]) -> Any:
    labels = tuple(dict.fromkeys(label for step in ends for label in step.answer.labels))
    raw = labelled(block.raw[key])
    if kind == "labels":
        given = (raw,) if isinstance(raw, str) else block.fields.string_list(raw, key, example=f"`{key}: yes`")
        unknown = [label for label in given if label not in labels]
        if unknown:
            raise block.error(key, f"{unknown[0]!r} is not a label of the step{did_you_mean(unknown[0], labels)}",
                              f"use one of: {', '.join(labels)}")
        return given[0] if isinstance(raw, str) else list(given)
    weights = block.fields.nested(key).section(raw, known=labels, example=f"`{key}: {{yes: 1, idk: 0.5, no: 0}}`")
    missing = [label for label in labels if label not in weights.raw]
    if missing:
        raise weights.error(None, f"has no weight for {', '.join(missing)}", "give every label a weight from 0 to 1")
    return {str(label): weights.fields.unit_score(value, str(label)) for label, value in weights.raw.items()}
