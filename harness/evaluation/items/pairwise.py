"""The pairwise kind: ``*.pairwise.yaml``, each case x pair of sides one item, judged by a model shown both outputs.

The item gets each side's output (made by its producer, as that side's own item makes its first attempt: a model's
answer comes back from the response cache when that item asked it already; or read from a recorded cycle), asks
the judge with the outputs in one order and then swapped, and records one attempt: its artifact the two outputs
and both verdicts, its ``preference`` the first side's share (1 better, 0.5 tie, 0 worse) and its ``agreement``
whether the two orders agreed (weight 0: a fact, not a score). Orders that disagree are a tie, counted. The item
passes once judged: a comparison informs, the win rates and the ranking are the summary's (docs/comparisons.md).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from harness.base.errors import HarnessConfigError, ModelUnavailable
from harness.base.models import Case, Dimension, Rubric
from harness.base.requests import AgentRequest
from harness.base.usage import Spend
from harness.evaluation.comparison import PAIRWISE_RUBRIC
from harness.evaluation.evaluate import DimensionVerdict, Evaluation
from harness.evaluation.items.case import find_agents_file
from harness.evaluation.items.kinds import ItemContext, ItemKind, ItemSpec, item_kind, role_runner
from harness.evaluation.runners import Runner, RunnerOutput
from harness.evaluation.steps import LoopResult
from harness.llm.types import Message
from harness.loading import load_cases
from harness.loading.pairwise import (
    PAIRWISE_SUFFIXES,
    PairwiseFile,
    Preference,
    Side,
    agent_config,
    judge_prompt,
    load_pairwise,
    read_verdict,
    unfilled_slots,
)
from harness.records import RecordReader

SHARE = {"a": 1.0, "tie": 0.5, "b": 0.0}
SWAPPED: dict[Preference, Preference] = {"a": "b", "b": "a", "tie": "tie"}


@dataclass(frozen=True)
class PairWork:
    file: PairwiseFile
    case: Case
    a: Side
    b: Side
    makers: dict[str, Runner]  # by side name: the producers of the sides the item makes itself


@item_kind
class PairwiseKind(ItemKind):
    name = "pairwise"

    def claims(self, path: Path, *, rubrics_dir: Path) -> bool:
        return path.name.endswith(PAIRWISE_SUFFIXES)

    def collect(self, path: Path, context: ItemContext) -> Iterator[ItemSpec]:
        agents_path = find_agents_file(path.parent, context.import_root)
        if agents_path is None:
            raise HarnessConfigError(path, None, "no agents.yaml in this folder or above it",
                                     "put the pairwise file beside the suite whose agents it compares")
        suite = context.suite(agents_path)
        file = load_pairwise(path, suite=suite, roots=context.input_roots)
        if not file.cases.is_file():
            raise HarnessConfigError(path, "cases", f"no case file {file.cases}",
                                     "name a *.cases.yaml, relative to this file")
        cases = [c for c in load_cases(file.cases, agents=suite.agents, input_roots=context.input_roots,
                                       import_root=context.import_root, check_kinds=context.check_kinds(),
                                       data_modules=context.data_modules) if c.agent == file.agent]
        if not cases:
            raise HarnessConfigError(path, "cases", f"{file.cases.name} has no case of {file.agent}",
                                     "name the case file of the agent it compares")
        for case in cases:
            missing = unfilled_slots(file.judge.template, case)
            if missing:
                raise HarnessConfigError(path, "judge.template", f"case {case.id} cannot fill {{{missing[0]}}}",
                                         "give every case that input, or take the slot out of the template")
        makers = {side.name: role_runner(context, agent_config(suite, side), "producer")
                  for side in file.sides if not side.recorded}
        models = tuple(dict.fromkeys([file.judge.settings.qualified] + [
            context.model_name(agent_config(suite, side), "producer") for side in file.sides
            if not side.recorded and "producer" in agent_config(suite, side).models]))
        for case in cases:
            for a, b in file.pairs:
                pair = f"{a.name} vs {b.name}"
                yield ItemSpec(name=f"{case.id}[{pair}]", label=f"{file.name}[{case.id}]: {pair}",
                               payload=PairWork(file, case, a, b, makers), line=case.line, agent=file.name,
                               case=case.id, variant=pair, threshold=0.0, models=models)

    def run(self, spec: ItemSpec, nodeid: str, context: ItemContext) -> LoopResult:
        work: PairWork = spec.payload
        rubric = pair_rubric(work)
        run = context.item_run(nodeid, spec, rubric)
        run.start(1, operator_type="pairwise", inputs=work.case.inputs, expected=work.case.expected,
                  description=work.case.description, goal=rubric.description)
        with run.attempt() as attempt:
            outputs = {}
            for side in (work.a, work.b):
                made = output_of(side, work, context, run.location.cycle_id)
                attempt.outputs.append(RunnerOutput(spend=made.spend))
                outputs[side.name] = made.text
            orders = [(work.a, work.b), (work.b, work.a)] if work.file.judge.swap else [(work.a, work.b)]
            answers = []
            spend = Spend()
            try:
                for first, second in orders:
                    text, spent = ask(work, context, outputs[first.name], outputs[second.name])
                    spend.merge(spent)
                    answers.append((first, second, text, read_verdict(work.file.judge, text)))
            finally:
                attempt.outputs.append(RunnerOutput(spend=spend))
            attempt.keep(transcript(work, outputs, answers), role="pairwise")
            attempt.evaluation = judged = verdict(work, rubric, answers, spend)
            if judged.indeterminate_reason:  # a judgment no verdict could be read from: neither side preferred
                attempt.finish("escalated", "indeterminate", judged.indeterminate_reason)
            else:
                attempt.finish("passed", "passed")
        return run.finish()


def pair_rubric(work: PairWork) -> Rubric:
    """What the item is scored by: the first side's preference, and whether the two orders agreed."""
    a, b = work.a.name, work.b.name
    return Rubric(
        name=PAIRWISE_RUBRIC, path=work.file.path, title=f"{work.file.name}: {a} vs {b}", version="1.0.0",
        description=f"which output a judge prefers: {a} or {b}", threshold=0.0, dimensions=(
            Dimension(id="preference", weight=1.0, description=f"1 when {a} is better, 0 when {b} is, 0.5 a tie"),
            Dimension(id="agreement", weight=0.0, description="1 when both orders gave the same verdict")))


def output_of(side: Side, work: PairWork, context: ItemContext, cycle: str) -> RunnerOutput:
    """A side's output for the case: made by its producer, or the final output its item recorded in a cycle."""
    if not side.recorded:
        agent = side.agent
        return work.makers[side.name].run(AgentRequest("producer", agent, work.case.id, 1, work.case.inputs))
    reader = RecordReader(context.work_dir)
    cycles = [c for c in reader.cycles() if c != cycle] if side.cycle == "latest" else [side.cycle]
    for candidate in reversed(cycles):
        finals = [row for row in reader.attempts([candidate]) if row["agent_name"] == side.agent
                  and row["case_id"] == work.case.id and row["variant"] == side.variant and row["artifact_path"]]
        if finals:
            path = Path(finals[-1]["artifact_path"])
            path = path if path.is_absolute() else context.import_root / path
            if path.is_file():
                return RunnerOutput(text=path.read_text(encoding="utf-8"))
    raise ModelUnavailable(f"no recorded output of {side.name} for case {work.case.id} in "
                           f"{'an earlier cycle' if side.cycle == 'latest' else f'cycle {side.cycle}'}")


def ask(work: PairWork, context: ItemContext, first: str, second: str) -> tuple[str, Spend]:
    """The judge's answer with ``first`` shown as output A and ``second`` as B."""
    judge = work.file.judge
    client = context.model_client(judge.settings)
    reply = client.complete(system=judge.system,
                            messages=[Message.user(judge_prompt(judge.template, work.case, first, second))])
    return reply.text, reply.spend


def verdict(work: PairWork, rubric: Rubric, answers: list[tuple[Side, Side, str, Preference | None]],
            spend: Spend) -> Evaluation:
    """The two orders' verdicts, mapped back to the sides, as the item's evaluation."""
    a, b = work.a.name, work.b.name
    unread = [n for n, (_, _, _, v) in enumerate(answers, 1) if v is None]
    if unread:
        order = "first" if unread[0] == 1 else "swapped"
        none = DimensionVerdict(None, 1.0, f"the judge's answer in the {order} order holds no verdict", "judge")
        return Evaluation(rubric, 0.0, {"preference": none, "agreement": DimensionVerdict(None, 0.0, "", "judge")},
                          "", [], spend=spend, indeterminate_reason=f"not scored (indeterminate): the judge's "
                          f"answer in the {order} order holds no verdict its pattern reads")
    # each answer's verdict, for side a: the swapped order showed b first
    said = [v if first.name == a else SWAPPED[v] for first, _, _, v in answers]  # type: ignore[index]
    agreed = len(set(said)) == 1
    final: Preference = said[0] if agreed else "tie"
    named = {"a": f"{a} is better", "b": f"{b} is better", "tie": "a tie"}
    orders = ", ".join(f"{'first' if n == 0 else 'swapped'} order: {named[s]}" for n, s in enumerate(said))
    reason = (f"{named[final]} ({orders})" if agreed or len(said) == 1 else
              f"a tie: the orders disagree ({orders}), so the position, not the outputs, decided")
    dims = {"preference": DimensionVerdict(SHARE[final], 1.0, reason, "judge",
                                           answer={"winner": {"a": a, "b": b, "tie": "tie"}[final], "a": a, "b": b,
                                                   "consistent": agreed}),
            "agreement": DimensionVerdict(1.0 if agreed else 0.0, 0.0, orders, "judge")}
    return Evaluation(rubric, 0.0, dims, reason, [], spend=spend)


def transcript(work: PairWork, outputs: dict[str, str],
               answers: list[tuple[Side, Side, str, Preference | None]]) -> str:
    """The item's artifact: the case, both outputs, and each order's prompt position and answer."""
    lines = [f"# {work.file.name}: {work.case.id}", "", f"judge: {work.file.judge.settings.qualified} "
             f"({work.file.judge.source}){', asked twice, the positions swapped' if len(answers) > 1 else ''}", ""]
    for side in (work.a, work.b):
        lines += [f"## {side.name}", "", outputs[side.name], ""]
    for number, (first, second, text, said) in enumerate(answers, 1):
        lines += [f"## Judgment {number}: A = {first.name}, B = {second.name}", "", text.strip(), "",
                  f"verdict: {said or 'none read'}", ""]
    return "\n".join(lines)
