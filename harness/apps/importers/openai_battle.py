"""openai/evals' pairwise specs (``battle``: two ``input_outputs`` pairs, ``input1: completion1`` and ``input2:
completion2``) as a pairwise comparison (docs/comparisons.md, "Pairwise judging").

openai/evals sends each sample's ``input1`` to the first completion function and ``input2`` to the second, and asks
the judge, shown both instructions and both responses, whether the first response is better. Here each pair is an
agent (named for its completion) whose producer sends its input, and ``NAME.pairwise.yaml`` compares the two case by
case with the spec's prompt as the judge's template: ``{completion1}`` and ``{completion2}`` are the two outputs,
the instructions the case's inputs, and the choices read as which side is better. The samples are the cases of
``NAME.pairs.yaml``, a case file that is not collected on its own: only the comparison runs them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from harness.apps.importers import NO_REVISION, ImportInputError, Plan, dump_yaml, identifier, unique
from harness.apps.importers.openai_samples import every_row_has, producer_template, read_samples
from harness.base.models import ModelSettings

# what a choice's score says about the first response: better, worse, or as good
_PREFERENCE = {1.0: "a", 0.0: "b", 0.5: "tie"}


def plan_battle(plan: Plan, source: str, spec_path: Path, key: str, template: str, pairs: dict[str, str],
                scores: dict[str, float], verdict: str, samples_path: Path) -> Plan:
    """The files of a pairwise spec: two agents, the samples as the comparison's cases, the pairwise file.
    ``template`` is the spec's prompt as a template, ``pairs`` its ``input_outputs``, ``verdict`` the pattern that
    reads a choice, ``scores`` each choice's score (1: the first response is better, 0: the second, 0.5: a tie)."""
    verdicts = {}
    for choice, score in scores.items():
        if score not in _PREFERENCE:
            raise ImportInputError(spec_path, f"{key}.choice_scores.{choice}", f"a score of {score:g} says neither "
                                   "which response is better nor that they tie", "score each choice 1 (the first "
                                   "is better), 0 (the second is) or 0.5 (a tie)")
        verdicts[choice] = _PREFERENCE[score]
    if not {"a", "b"} <= set(verdicts.values()):
        raise ImportInputError(spec_path, f"{key}.choice_scores", "no choice says the first response is better, or "
                               "none says the second is", "score one choice 1 and another 0")
    (first_input, first_output), (second_input, second_output) = pairs.items()
    samples = read_samples(samples_path, plan, (first_input, second_input))
    for name in (first_input, second_input):
        every_row_has(samples_path, samples.rows, name, "it is the input of one side of the comparison")
    agents: dict[str, Any] = {}
    for input_key, output in ((first_input, first_output), (second_input, second_output)):
        file, text = producer_template(samples, input_key, input_key)
        plan.add(f"{plan.suite_dir}/{file}", text)
        agents[unique(identifier(output, "side"), agents)] = {
            "description": f"openai/evals {source}: answers each sample's {input_key}",
            "rubric": f"../../{plan.rubric_file}", "producer": {"template": file}}
    first, second = agents
    for output, slot in ((first_output, "output_a"), (second_output, "output_b")):
        template = template.replace("{" + output + "}", "{" + slot + "}")
    plan.add(f"{plan.suite_dir}/judges/{plan.name}.txt", template)
    plan.add(plan.rubric_file, dump_yaml(
        {"metadata": {"name": f"{plan.name} (openai/evals)", "version": "1.0.0",
                      "description": f"each side of {plan.name}.pairwise.yaml answered; the comparison scores them"},
         "threshold": 1, "dimensions": {"answered": {"weight": 1, "description": "The side gave an answer",
                                                     "check": {"length": {"min_chars": 1}}}}},
        comment=f"Imported from {source} by `harness import openai-evals`: the rubric the two sides' agents name."))
    suite = {"defaults": dict(NO_REVISION), "model": {"model": ModelSettings().model}, "agents": agents}
    plan.add(f"{plan.suite_dir}/agents.yaml", dump_yaml(suite, comment=(
        f"Imported from {source} by `harness import openai-evals`: one agent a side. openai/evals takes the two\n"
        f"models on its command line (completion_fns): set each agent's `producer: {{..., model: ...}}`.")))
    data_file = f"data/{plan.name}.samples.jsonl"
    plan.add(f"{plan.suite_dir}/{data_file}", "".join(json.dumps(row, ensure_ascii=False) + "\n"
                                                      for row in samples.rows))
    columns = [*samples.columns(first_input), *samples.columns(second_input)]
    plan.add(f"{plan.suite_dir}/{plan.name}.pairs.yaml", dump_yaml(
        {"agent": first, "dataset": {"file": data_file, "inputs": {c: "{" + c + "}" for c in columns}}},
        comment=f"The samples of {samples_path.name}, one case a row: the cases {plan.name}.pairwise.yaml compares\n"
                "the two sides on. The name does not end in .cases.yaml: they are not run on their own."))
    plan.add(f"{plan.suite_dir}/{plan.name}.pairwise.yaml", dump_yaml(
        {"pairwise": plan.name, "description": f"openai/evals {source}", "cases": f"{plan.name}.pairs.yaml",
         "compare": [{"agent": first}, {"agent": second}],
         "judge": {"model": ModelSettings().model, "template": f"judges/{plan.name}.txt", "verdict": verdict,
                   "verdicts": verdicts, "swap": False}},
        comment=f"openai/evals {source} as a pairwise comparison: the judge is the spec's prompt, as written\n"
                "(openai/evals, MIT licence), asked once in openai/evals' order (swap: false): its instructions are\n"
                "numbered, so the responses cannot trade places."))
    plan.notes.append(f"note: {spec_path.name}: {key} compares two completions: imported as {plan.suite_dir}/"
                      f"{plan.name}.pairwise.yaml, {first} vs {second}, judged once in openai/evals' order (the "
                      "numbered instructions cannot swap places, so the first position's bias is not measured)")
    plan.notes.append(f"note: the two models are not in the spec (openai/evals takes them as completion_fns): set "
                      f"each agent's model in {plan.suite_dir}/agents.yaml, and the judge's in "
                      f"{plan.name}.pairwise.yaml")
    return plan
