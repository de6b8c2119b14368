"""Pairwise files (``*.pairwise.yaml``): the outputs of two or more sides compared case by case by a judge that is
shown two outputs and says which is better, asked twice with the positions swapped (docs/comparisons.md).

A side is a variant of the file's agent (or another agent) whose output the item makes itself, as the variant's
own item would on its first attempt, or, with ``cycle:``, the final output that side's item recorded in that cycle.
The judge's prompt is the library's graders/mt-bench-pair (MT-bench's pairwise judge, in our words) unless the file
gives a template of its own (AlpacaEval's, say), with a pattern that reads its verdict and what each verdict means.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from harness.base.fields import Fields, Section, shown
from harness.base.models import AgentConfig, Case, ModelSettings, SuiteConfig
from harness.base.slots import case_value, missing_case_slots, render_text, slots_in
from harness.base.yamlfile import load_yaml, read_text
from harness.loading.library import is_library_name, pair_judge
from harness.loading.suites import model_name

PAIRWISE_SUFFIXES = (".pairwise.yaml", ".pairwise.yml")
TOP_KEYS = ("pairwise", "description", "cases", "agent", "compare", "judge")
SIDE_KEYS = ("name", "variant", "agent", "cycle")
JUDGE_KEYS = ("model", "temperature", "max_tokens", "timeout_s", "max_retries", "base_url", "api_key_env",
              "template", "system", "verdict", "verdicts", "swap")
CYCLE = re.compile(r"^(latest|\d{4}-\d{2}-\d{2}-\d{3})$")
SIDE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+@-]*$")  # no space: an item's name is `case[a vs b]`

Preference = Literal["a", "b", "tie"]

DEFAULT_JUDGE = "graders/mt-bench-pair"  # MT-bench's pairwise judge, in our words (docs/graders.md)
MT_BENCH_VERDICT = r"\[\[(A|B|C)\]\]"
MT_BENCH_VERDICTS: dict[str, Preference] = {"A": "a", "B": "b", "C": "tie"}


@dataclass(frozen=True)
class Side:
    """One side of the comparison: whose output, and where it comes from."""

    name: str
    agent: str
    variant: str | None = None
    cycle: str | None = None  # None: made by the item; else read from this cycle's records (or the latest)

    @property
    def recorded(self) -> bool:
        return self.cycle is not None


@dataclass(frozen=True)
class PairJudge:
    """The judge shown two outputs: its model, its prompt and how its verdict is read."""

    settings: ModelSettings
    system: str
    template: str
    verdict: re.Pattern[str]
    verdicts: Mapping[str, Preference]  # what each verdict the pattern reads means: the first output, the second, tie
    swap: bool = True
    source: str = DEFAULT_JUDGE  # the prompt's origin, as reports name it


@dataclass(frozen=True)
class PairwiseFile:
    path: Path
    name: str
    description: str | None
    cases: Path
    agent: str
    sides: tuple[Side, ...]
    judge: PairJudge

    @property
    def pairs(self) -> list[tuple[Side, Side]]:
        """Every pair of sides, each once, in the order they were listed."""
        return [(a, b) for i, a in enumerate(self.sides) for b in self.sides[i + 1:]]


def load_pairwise(path: Path, *, suite: SuiteConfig, roots: Sequence[Path] = ()) -> PairwiseFile:
    """Read a pairwise file against ``suite`` (its agents and their variants); ``agent:`` defaults to its case
    file's."""
    top = Fields.of(path, roots=roots).section(load_yaml(path), known=TOP_KEYS, required=("cases", "compare", "judge"),
                                               example="`pairwise: my-comparison`, `cases:`, `compare:` and `judge:`")
    name = top.fields.identifier(top.raw.get("pairwise", _stem(path)), "pairwise", "comparison name")
    cases = top.fields.project_path(top.text("cases"), "cases", example="a case file inside the project")
    agent = top.text("agent", default_agent(cases) if cases.is_file() else None)
    if agent is None or agent not in suite.agents:
        raise top.error("agent", f"no agent {agent!r} in {suite.path.name}",
                        f"use one of: {', '.join(sorted(suite.agents))}")
    sides = _sides(top, agent, suite)
    return PairwiseFile(path=path, name=name, description=top.text("description"), cases=cases, agent=agent,
                        sides=sides, judge=_judge(top.section("judge", known=JUDGE_KEYS, required=("model",), shorthand="model"), roots))


def _stem(path: Path) -> str:
    return next(path.name[: -len(s)] for s in PAIRWISE_SUFFIXES if path.name.endswith(s))


def _sides(top: Section, default_agent: str, suite: SuiteConfig) -> tuple[Side, ...]:
    raw = top.raw["compare"]
    place = top.fields.nested("compare")
    if not isinstance(raw, list) or len(raw) < 2:
        raise place.expected(None, "a list of two or more sides", raw,
                             "list variants to compare: `compare: [careful+terse, careful+explained]`")
    sides: list[Side] = []
    for index, item in enumerate(raw):
        side = place.nested(f"[{index}]")
        given = {"variant": item} if isinstance(item, str) else item
        entry = side.section(given, known=SIDE_KEYS, required_any=("variant", "agent", "cycle"),
                             example="`careful+terse`, or `{variant: careful+terse, cycle: latest}`")
        agent = entry.text("agent", default_agent)
        if agent not in suite.agents:
            raise entry.error("agent", f"no agent {agent!r} in {suite.path.name}",
                              f"use one of: {', '.join(sorted(suite.agents))}")
        variant = entry.text("variant")
        known = [v.variant for v in suite.agents[agent].variants]
        if (variant is None) != (not known) or (variant is not None and variant not in known):
            raise entry.error("variant", f"{agent} has no variant {variant!r}" if known or variant else
                              f"{agent} has variants: name one",
                              f"use one of: {', '.join(known)}" if known else f"{agent} has no `variants:`: remove "
                              "`variant:`")
        cycle = entry.text("cycle")
        if cycle is not None and not CYCLE.match(cycle):
            raise entry.error("cycle", f"{shown(cycle)} is not a cycle", "write `latest` or an id such as "
                              "2026-11-27-001")
        name = entry.text("name") or "@".join(filter(None, (
            variant or (agent if agent != default_agent or not variant else None), cycle)))
        if not SIDE_NAME.match(name):
            raise entry.error("name", f"{shown(name)} is not a side's name", "use letters, digits and `_.+@-`")
        if any(s.name == name for s in sides):
            raise entry.error("name", f"a second side named {name!r}", "give each side its own `name:`")
        sides.append(Side(name=name, agent=agent, variant=variant, cycle=cycle))
    if len({(s.agent, s.variant, s.cycle) for s in sides}) < len(sides):
        raise place.error(None, "names the same output twice", "compare different variants, agents or cycles")
    return tuple(sides)


def _judge(judge: Section, roots: Sequence[Path]) -> PairJudge:
    settings = ModelSettings(
        model=model_name(judge, "model", "claude-sonnet-4-6"),
        temperature=judge.number("temperature", 0.0, low=0.0, high=2.0),
        max_tokens=judge.integer("max_tokens", ModelSettings().max_tokens),
        timeout_s=judge.number("timeout_s", ModelSettings().timeout_s, low=0.001, high=3600.0),
        max_retries=judge.integer("max_retries", ModelSettings().max_retries, low=0),
        base_url=judge.text("base_url"), api_key_env=judge.text("api_key_env"))
    if "template" not in judge:
        if "verdict" in judge or "verdicts" in judge or "system" in judge:
            raise judge.error("verdict" if "verdict" in judge else "verdicts" if "verdicts" in judge else "system",
                              "reads the verdict of a template of your own, but there is no `template:`",
                              f"add `template:`, or remove it to use the library's {DEFAULT_JUDGE}")
    named = judge.raw.get("template", DEFAULT_JUDGE)
    prompt = judge  # where the prompt's files, its verdict and their meaning are: here, or a judge of the library
    if is_library_name(named):  # `template: graders/mt-bench-pair` (docs/graders.md)
        given = next((key for key in ("system", "verdict", "verdicts") if key in judge), None)
        if given is not None:
            raise judge.error(given, f"comes with the library's judge {named}", "remove it; to change the judge, "
                              "copy its files from harness/loading/graders/judges/ into your project")
        prompt = pair_judge(named, judge.fields, "template")
        roots = prompt.fields.roots
    template = _text_file(prompt, "template", roots)
    used = slots_in(template)  # besides these, a case's inputs by name: checked against each case at collection
    for needed in ("output_a", "output_b"):
        if needed not in used:
            raise prompt.error("template", f"never shows {{{needed}}}", "a pairwise judge must see both outputs")
    pattern = prompt.fields.regex(prompt.raw.get("verdict", MT_BENCH_VERDICT), "verdict")
    if pattern.groups < 1:
        raise prompt.error("verdict", "has no group to read the verdict from", "write e.g. '\\[\\[(A|B|C)\\]\\]'")
    verdicts = _verdicts(prompt)
    return PairJudge(settings, _text_file(prompt, "system", roots) if "system" in prompt else "", template, pattern,
                     verdicts, judge.boolean("swap", True), source=str(named))


def _verdicts(judge: Section) -> dict[str, Preference]:
    """``verdicts: {A: a, B: b, C: tie}``: what each verdict the pattern reads means (default MT-bench's)."""
    if "verdicts" not in judge:
        return dict(MT_BENCH_VERDICTS)
    given = judge.section("verdicts", known=None, example="`verdicts: {m: a, M: b}`")
    out: dict[str, Preference] = {}
    for label, meaning in given.raw.items():
        out[str(label)] = given.fields.choice(meaning, str(label), ("a", "b", "tie"), "preference")  # type: ignore
    if not {"a", "b"} <= set(out.values()):
        raise judge.error("verdicts", "must say which verdict means the first output (a) and which the second (b)",
                          "write e.g. `verdicts: {A: a, B: b, C: tie}`")
    return out


def _text_file(judge: Section, key: str, roots: Sequence[Path]) -> str:
    rel = judge.text(key)
    file = judge.fields.project_path(rel, key, example=f"a {key} file inside the project")
    if not file.is_file():
        raise judge.error(key, f"no file {file}", f"fix the path; it is relative to {judge.fields.path.name}")
    return read_text(file)


def agent_config(suite: SuiteConfig, side: Side) -> AgentConfig:
    """The agent (or its variant) that makes ``side``'s output."""
    agent = suite.agents[side.agent]
    return next((v for v in agent.variants if v.variant == side.variant), agent)


def read_verdict(judge: PairJudge, text: str) -> Preference | None:
    """The judge's verdict on the output shown first (``a``) and second (``b``), or a tie; None when its answer
    holds no verdict the pattern reads. The last match counts: a judge may quote the format before it answers."""
    found = [m.group(1) for m in judge.verdict.finditer(text)]
    return judge.verdicts.get(found[-1]) if found else None


def judge_prompt(template: str, case: Case, output_a: str, output_b: str) -> str:
    """The template with its slots filled: the two outputs, and the case's ``{input}``, ``{expected}`` and
    inputs, as every template of the harness fills them; every other brace stays as written."""
    outputs = {"output_a": output_a, "output_b": output_b}
    return render_text(template, lambda name: outputs[name] if name in outputs
                       else case_value(name, case.inputs, case.expected))


def unfilled_slots(template: str, case: Case) -> list[str]:
    """The slots of ``template`` that ``case`` cannot fill (checked at collection, before any model is called)."""
    return missing_case_slots([s for s in slots_in(template) if s not in ("output_a", "output_b")], case.inputs,
                              case.expected)


def default_agent(path: Path) -> str | None:
    """A case file's ``agent:`` (the pairwise file's default agent), without reading its cases."""
    raw = load_yaml(path)
    return raw.get("agent") if isinstance(raw, Mapping) and isinstance(raw.get("agent"), str) else None
