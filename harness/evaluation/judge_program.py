"""The judge of several calls: a judge program (harness.loading.judge_programs) run on one judge request.

Its steps run from the first, each a model call on the judge's client (the session's call policy: the response
cache, the concurrency bound, rate limits, prices, the cost cap), each answer typed: free text through
``complete``, anything else as JSON through ``generate_json`` (a forced tool call or the server's JSON Schema
output, checked, asked once more with the errors shown), as a pipeline's prompt stage asks for its typed output.
A ``for_each`` step is asked once per element of an earlier list, the elements concurrently; a label's ``next:``
chooses the step that comes next; a step made ``once`` is asked once per rubric version in the session
(:class:`GeneratedOnce`) and reused. The score comes from the step the program ends at, or the one ``score.from``
names, its per-element verdicts combined by a registered reducer (harness.base.reducers), and becomes the scored
dimensions' answer on their own scales. Every call's spend is the answer's; every step's answer and reason are its
``metadata.reasoning``, which the evaluation's record keeps and the failure report shows. docs/judge-programs.md.
"""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from harness.base import slots
from harness.base.errors import HarnessConfigError, HarnessError, ValidationFailed
from harness.base.fields import one_line
from harness.base.models import Dimension
from harness.base.reducers import REDUCERS, Verdict
from harness.base.requests import JudgeRequest
from harness.base.usage import Spend
from harness.evaluation.ensemble import ask_judges
from harness.evaluation.evaluate import SCORE_DECIMALS
from harness.evaluation.runners import RunnerOutput
from harness.evaluation.weighted import TOP_LOGPROBS, weigh_rating
from harness.llm import Message, ModelClient, ModelReply
from harness.loading.judge_programs import JudgeProgram, ProgramStep, ScoreRule

FOR_EACH_WORKERS = 8  # elements asked at once by one for_each step (the session's policy bounds all calls)
PROGRAM_MARK = "judge program "  # how the reasoning of a judge program starts (the failure report shows it)
SHOWN_ELEMENTS = 3  # the elements that lowered the score, named in the dimension's reason


@dataclass(frozen=True)
class Element:
    """One element of a for_each step: what it was given, what it answered and why."""

    given: Any
    value: Any
    reason: str


@dataclass
class StepResult:
    """A step's answer (a for_each step's: the list of its elements' answers), its reason, its calls."""

    step: ProgramStep
    value: Any
    reason: str = ""
    elements: tuple[Element, ...] = ()
    spend: Spend = field(default_factory=Spend)
    note: str = ""  # a step made once: for which rubric, and whether this evaluation reused it
    weighted: dict[str, Any] | None = None  # a weighted rating's record, and the rating as written ("written")

    @property
    def reasons(self) -> Any:
        return [e.reason for e in self.elements] if self.step.for_each is not None else self.reason


class GeneratedOnce:
    """The answers of the steps made once per rubric version (``once: true``) in a session: one call makes each,
    whichever evaluation asks first; the others wait for it and reuse it. A call that fails keeps nothing: the next
    evaluation asks again."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: dict[tuple[Any, ...], tuple[threading.Lock, list[StepResult]]] = {}

    def get(self, key: tuple[Any, ...], make: Callable[[], StepResult]) -> tuple[StepResult, bool]:
        """The answer kept under ``key``, made now if there is none; True when it was made earlier (reused)."""
        with self._lock:
            lock, kept = self._entries.setdefault(key, (threading.Lock(), []))
        with lock:
            if kept:
                return kept[0], True
            made = make()
            kept.append(made)
            return made, False


class JudgeProgramRunner:
    """An evaluator ``{steps: FILE}``: the program run on each judge request, on ``client``'s model (each judge of
    a judge ensemble runs it whole, and their answers are combined as single judges' are)."""

    def __init__(self, program: JudgeProgram, client: ModelClient, once: GeneratedOnce):
        self.program = program
        self.client = client
        self.once = once
        ensemble = client.settings.ensemble
        self.ensemble = ensemble
        self.judges = [] if ensemble is None else [
            (judge.qualified, client if index == 0 else ModelClient(judge, policy=client.policy))
            for index, judge in enumerate(ensemble.judges)]

    def run(self, request: JudgeRequest) -> RunnerOutput:
        if self.ensemble is None:
            return ProgramRun(self.program, self.client, request, self.once).answer()
        return ask_judges([(name, lambda c=client: ProgramRun(self.program, c, request, self.once).answer())
                           for name, client in self.judges], self.ensemble.aggregate)


class ProgramRun:
    """One run of the program on one request."""

    def __init__(self, program: JudgeProgram, client: ModelClient, request: JudgeRequest, once: GeneratedOnce):
        self.program, self.client, self.request, self.once = program, client, request, once
        self.results: dict[str, StepResult] = {}
        self.spend = Spend()  # the calls of the steps that answered so far

    def answer(self) -> RunnerOutput:
        try:
            last, ended_with = self._walk()
            data = self._scored(last, ended_with)
        except HarnessError as exc:  # the calls made before it are spent all the same
            spent = Spend()
            spent.merge(self.spend)
            spent.merge(getattr(exc, "spend", None) or Spend())
            exc.spend = spent  # type: ignore[attr-defined]
            raise
        return RunnerOutput(data=data, spend=self.spend)

    # -- the steps ------------------------------------------------------------------------------------

    def _walk(self) -> tuple[ProgramStep, float | None]:
        """Run the steps from the first, each followed by what its answer chooses; the step the program ended at
        and, when a ``next:`` ended it with a score, that score."""
        step = self.program.steps[0]
        for _ in self.program.steps:  # the loader refused loops: each step runs at most once
            result = self._run(step)
            self.results[step.name] = result
            self.spend.merge(result.spend)
            after = self.program.following(step, result.value if step.for_each is None else None)
            if after is None or isinstance(after, float):
                return step, after
            step = self.program.step(after)
        raise AssertionError("a judge program ran more steps than it has")

    def _run(self, step: ProgramStep) -> StepResult:
        if step.for_each is not None:
            return self._for_each(step)
        prompt = self._prompt(step)
        if not step.once:
            value, reason, spend, weighted = self._ask(step, prompt, {"sample": self.request.sample})
            return StepResult(step, value, reason, spend=spend, weighted=weighted)
        rubric = self.request.rubric
        key = (self.program.name, self.program.version, step.name, self.client.model, rubric.name, rubric.version,
               prompt)

        def make() -> StepResult:
            value, reason, spend, weighted = self._ask(step, prompt, {})
            return StepResult(step, value, reason, spend=spend, weighted=weighted)

        made, reused = self.once.get(key, make)
        note = f"made once for rubric {rubric.name}@{rubric.version}"
        if reused:
            return StepResult(step, made.value, made.reason, note=note + ", reused: no call", weighted=made.weighted)
        return StepResult(step, made.value, made.reason, spend=made.spend, note=note, weighted=made.weighted)

    def _for_each(self, step: ProgramStep) -> StepResult:
        assert step.for_each is not None
        source = self.results.get(step.for_each)
        if step.over_input is not None:
            given = self._input_elements(step)
        elif source is None:
            raise HarnessConfigError(self.program.path, f"steps[{step.index}].for_each", f"step {step.for_each} did "
                                     f"not run before {step.name} on this path", "make every path to the step pass "
                                     "through the list it goes over")
        else:
            given = list(source.value)
        spends: list[Spend] = []

        def one(index: int, element: Any) -> Element:
            value, reason, spend, _ = self._ask(step, self._prompt(step, element, index),
                                                {"sample": self.request.sample, "element": index})
            spends.append(spend)
            return Element(element, value, reason)

        if not given:
            return StepResult(step, [])
        try:
            with ThreadPoolExecutor(max_workers=min(FOR_EACH_WORKERS, len(given)),
                                    thread_name_prefix="harness-judge-steps") as pool:
                futures = [pool.submit(contextvars.copy_context().run, one, index, element)
                           for index, element in enumerate(given, 1)]
                elements = tuple(future.result() for future in futures)
        except HarnessError:
            for spent in spends:  # the elements that answered are spent all the same
                self.spend.merge(spent)
            raise
        spend = Spend()
        for spent in spends:
            spend.merge(spent)
        return StepResult(step, [e.value for e in elements], elements=elements, spend=spend)

    def _input_elements(self, step: ProgramStep) -> list[Any]:
        """The elements of the case input a step goes over (``for_each: inputs.context``): a list's, or a text as
        one element."""
        assert step.over_input is not None
        where = f"steps[{step.index}].for_each"
        try:
            value = self.request.slot(step.over_input)
        except KeyError:
            raise HarnessConfigError(self.program.path, where, f"goes over {{{step.over_input}}}, which case "
                                     f"{self.request.case} cannot fill", "give the case that input") from None
        if isinstance(value, str):
            return [value]
        if not isinstance(value, list):
            raise HarnessConfigError(self.program.path, where, f"goes over {{{step.over_input}}}, and case "
                                     f"{self.request.case} gives {type(value).__name__}", "give the input as a list "
                                     "of texts, or one text")
        return value

    def _prompt(self, step: ProgramStep, element: Any = None, index: int | None = None) -> str:
        def lookup(name: str) -> Any:
            head, _, rest = name.partition(".")
            if head in self.results:
                result = self.results[head]
                return result.value if not rest else result.reasons
            if index is not None and name == step.element:
                return element
            if index is not None and name == "index":
                return index
            if head in (s.name for s in self.program.steps):
                raise HarnessConfigError(self.program.path, f"steps[{step.index}].prompt", f"uses {{{name}}}, but "
                                         f"step {head} did not run on this path", "read only the steps every path "
                                         "to this one passes through")
            try:
                return self.request.slot(name)
            except KeyError:
                raise HarnessConfigError(self.program.path, f"steps[{step.index}].prompt", f"uses {{{name}}}, which "
                                         f"case {self.request.case} cannot fill", "give the case that input (or "
                                         "`expected:`), or remove the slot") from None

        return slots.render_text(step.prompt, lookup)

    def _ask(self, step: ProgramStep, prompt: str, extra: dict[str, Any]) -> tuple[Any, str, Spend, Any]:
        """One call: the step's answer, its reason (none for free text), what the call cost and, for a weighted
        rating, its record."""
        cache_extra = {"judge_program": f"{self.program.name}@{self.program.version}", "step": step.name, **extra}
        if step.verdict is not None:
            return self._read(step, prompt, cache_extra)
        output = step.answer.output
        if output is None:
            reply = self.client.complete(system=self.program.system, messages=[Message.user(prompt)],
                                         cache_extra=cache_extra)
            return reply.text, "", reply.spend, None
        result = self.client.generate_json(system=self.program.system, prompt=prompt, schema=output.json_schema,
                                           tool_name="submit_answer", cache_extra=cache_extra)
        errors = list(result.validation_errors) if not result.success else output.errors(result.data)
        if errors:
            raise ValidationFailed(
                f"judge program {self.program.name}, step {step.name}: the model's answer is not "
                f"{step.answer.words} after {result.attempts} attempts: {'; '.join(errors[:3])} (fix: make the "
                f"step's prompt ask for {step.answer.words}; raise judge.max_tokens if answers are cut off)",
                errors, result.raw_response, spend=result.spend)
        data = result.data or {}
        return data["answer"], str(data.get("reason") or ""), result.spend, None

    def _read(self, step: ProgramStep, prompt: str, cache_extra: dict[str, Any]) -> tuple[Any, str, Spend, Any]:
        """A step with ``verdict:``: free text, the answer read from it (weighted by its token's probabilities with
        ``weighted: true``); an answer that cannot be read is asked for once more, showing what was wrong."""
        assert step.verdict is not None
        messages = [Message.user(prompt)]
        spend = Spend()
        problem = ""
        for _ in (1, 2):
            reply = self.client.complete(system=self.program.system, messages=messages, cache_extra=cache_extra,
                                         top_logprobs=TOP_LOGPROBS if step.weighted else None)
            spend.merge(reply.spend)
            read, problem = read_answer(step, reply)
            if read is not None:
                value, reason, weighted = read
                return value, reason, spend, weighted
            messages += [Message.assistant(reply.text or "(no answer)"),
                         Message.user(f"{problem}. Answer again, ending with your answer exactly in the form the "
                                      "instructions ask for.")]
        raise ValidationFailed(f"judge program {self.program.name}, step {step.name}: the answer could not be read "
                               f"after 2 attempts: {problem} (fix: make the step's prompt ask for {step.answer.words} "
                               f"that the pattern /{step.verdict.pattern}/ matches)", [problem],
                               messages[-2].text[:2000], spend=spend)

    # -- the score ------------------------------------------------------------------------------------

    def _scored(self, last: ProgramStep, ended_with: float | None) -> dict[str, Any]:
        """The evaluator output: each dimension asked for, scored by its rule, on its own scale."""
        request = self.request
        answers: dict[str, dict[str, Any]] = {}
        scores: dict[str, float | None] = {}
        lines: list[str] = []
        named = {dim for rule in self.program.scores for dim in rule.dimensions}
        for rule in self.program.scores:
            dims = [d for d in request.dimensions if d in rule.dimensions or not rule.dimensions]
            if not dims:
                continue
            score, reason = self._score(rule, last, ended_with)
            lines.append(f"{', '.join(dims)}: {reason}")
            source = self.results.get(rule.source or last.name) if ended_with is None else None
            for dim_id in dims:
                scores[dim_id] = score
                dim = _dimension(request, dim_id)
                answers[dim_id] = _weighted_answer(dim, source, reason) or dimension_answer(dim, score, reason)
        missing = [d for d in request.dimensions if d not in answers]
        if missing:
            raise HarnessConfigError(self.program.path, "score", f"scores {', '.join(sorted(named))}, and the judge "
                                     f"is asked for {', '.join(missing)} too", "add a score block for it, or drop "
                                     "`dimension:` to score every judged dimension")
        weights = {d: _dimension(request, d).weight for d in scores if scores[d] is not None}
        total = sum(weights.values())
        overall = sum(w * (scores[d] or 0.0) for d, w in weights.items()) / total if total else 0.0
        overall = round(min(1.0, max(0.0, overall)), SCORE_DECIMALS)
        return {"overallScore": overall, "passed": overall >= (request.rubric.threshold or 1.0),
                "dimensionScores": answers, "feedback": f"{PROGRAM_MARK}{self.program.name}: " + "; ".join(lines),
                "suggestedFixes": [], "metadata": {"reasoning": self._record(lines)}}

    def _score(self, rule: ScoreRule, last: ProgramStep, ended_with: float | None) -> tuple[float | None, str]:
        path = self._path()
        if ended_with is not None:
            return ended_with, f"{path} -> score {ended_with:g}"
        source = self.results.get(rule.source or last.name)
        if source is None:
            raise HarnessConfigError(self.program.path, f"{rule.field}.from", f"step {rule.source} did not run on "
                                     f"this path ({path})", "take the score from a step every path passes through")
        step = source.step
        if step.for_each is None:
            score = step.score_of(source.value)
            why = f"{step.name} answered {slots.as_text(source.value)}" + (f": {source.reason}" * bool(source.reason))
            branched = any(r.step.next or r.step.goto for r in self.results.values())
            shown = f"{path}; {why}" if branched else why
            return score, shown if score is None else f"{shown} (score {score:.2f})"
        if not source.elements:
            if rule.empty is None:
                return None, f"{step.name} had no elements to judge (not scored; `empty:` gives such a case a score)"
            return rule.empty, f"{step.name} had no elements to judge: score {rule.empty:g} (empty:)"
        reducer = REDUCERS[rule.reduce or "mean"]
        verdicts = [Verdict(e.value, step.score_of(e.value)) for e in source.elements]
        score, how = reducer.reduce(verdicts, rule.options)
        lowered = [e for e, v in zip(source.elements, verdicts, strict=True) if _counts(rule, v) < 1.0]
        detail = "; ".join(f"{one_line(slots.as_text(e.given), 80)} -> {e.value}"
                           + (f" ({one_line(e.reason, 120)})" if e.reason else "") for e in lowered[:SHOWN_ELEMENTS])
        more = f"; and {len(lowered) - SHOWN_ELEMENTS} more" if len(lowered) > SHOWN_ELEMENTS else ""
        return round(score, SCORE_DECIMALS), f"{step.name}: {how}" + (f"; {detail}{more}" if detail else "")

    def _path(self) -> str:
        return " -> ".join(f"{name}={slots.as_text(r.value)}" if r.step.answer.kind == "label" else name
                           for name, r in self.results.items())

    def _record(self, lines: list[str]) -> str:
        """Every step's answer and reason, in the order they ran, then each score: the evaluation's reasoning."""
        calls = self.spend.calls + self.spend.cached
        out = [f"{PROGRAM_MARK}{self.program.name}@{self.program.version} ({self.program.path.name}) on "
               f"{self.client.model}: {calls} call{'s' * (calls != 1)}"]
        for name, result in self.results.items():
            step = result.step
            kind = step.answer.words + (f", {result.note}" if result.note else "")
            if step.for_each is None:
                out.append(f"{name} ({kind}): {slots.as_text(result.value)}"
                           + (f" -- {result.reason}" if result.reason else ""))
                continue
            out.append(f"{name} ({kind}, for each of {len(result.elements)} {step.for_each}):")
            out += [f"  {i}. {one_line(slots.as_text(e.given), 200)} -> {slots.as_text(e.value)}"
                    + (f" -- {e.reason}" if e.reason else "") for i, e in enumerate(result.elements, 1)]
        out += [f"score {line}" for line in lines]
        return "\n".join(out)


def read_answer(step: ProgramStep, reply: ModelReply) -> tuple[tuple[Any, str, Any] | None, str]:
    """The answer a ``verdict:`` step's free text gives (the last match of the pattern's group, on the step's answer
    type), what the model wrote before its first match, and a weighted rating's record; or None and what is
    wrong."""
    assert step.verdict is not None
    text, answer = reply.text or "", step.answer
    matches = [m for m in step.verdict.finditer(text) if m.group(1) is not None]
    if not matches:
        return None, f"the answer has no match of /{step.verdict.pattern}/"
    found = matches[-1].group(1)
    written, at = found.strip(), matches[-1].start(1) + len(found) - len(found.lstrip())
    reason = one_line(text[:matches[0].start()].strip(), 300) or f"answered {written}"
    if answer.kind == "label":
        label = next((label for label in answer.labels if label.casefold() == written.casefold()), None)
        return ((label, reason, None), "") if label is not None else (
            None, f"{written!r} is not one of {', '.join(answer.labels)}")
    try:
        number = float(written)
    except ValueError:
        return None, f"{written!r} is not {answer.words}"
    if not answer.low <= number <= answer.high or (answer.kind == "rating" and not number.is_integer()):
        return None, f"{written!r} is not {answer.words}"
    value: Any = int(number) if answer.kind == "rating" else number
    if not step.weighted:
        return (value, reason, None), ""
    scale = Dimension(id=step.name, weight=1.0, description=step.name, scale=(int(answer.low), int(answer.high)))
    record, note = weigh_rating(scale, written, at, reply)
    return (record["rating"] if record["used"] else value, reason + note, {**record, "written": value}), ""


def _weighted_answer(dim: Dimension, source: StepResult | None, reason: str) -> dict[str, Any] | None:
    """A weighted rating as the answer of a dimension on the rating's own scale: the rating as written, and the
    weighted one beside it, as a ``score: weighted`` evaluator answers (docs/material.md); None otherwise."""
    if source is None or source.weighted is None or source.step.for_each is not None:
        return None
    if dim.scale is None or dim.step is not None or tuple(dim.scale) != (source.step.answer.low,
                                                                          source.step.answer.high):
        return None
    record = {key: value for key, value in source.weighted.items() if key != "written"}
    return {"rating": source.weighted["written"], "weighted": record, "reason": reason}


def _counts(rule: ScoreRule, verdict: Verdict) -> float:
    """How much one element counts toward a full score (below 1: it lowered the score)."""
    if "of" in rule.options:
        wanted = rule.options["of"]
        return 1.0 if verdict.value in ([wanted] if isinstance(wanted, str) else wanted) else 0.0
    if "weights" in rule.options:
        return float(rule.options["weights"][verdict.value])
    return 1.0 if verdict.score is None else verdict.score


def _dimension(request: JudgeRequest, dim_id: str) -> Dimension:
    return next(d for d in request.rubric.dimensions if d.id == dim_id)


def dimension_answer(dim: Dimension, score: float | None, reason: str) -> dict[str, Any]:
    """A program's score from 0 to 1 as the dimension's answer on its own scale: the nearest rating of a
    ``scale``, the label of ``choices`` nearest its score, the nearest level of exhaustive levels, pass (1) from
    0.5 for a pass/fail criterion; no score at all is an indeterminate answer."""
    value = 0.0 if score is None else score
    extra: dict[str, Any] = {"indeterminate": True} if score is None else {}
    if dim.scale is not None:
        low, high = dim.scale
        step = getattr(dim, "step", None) or 1
        rating = round(low + round(value * (high - low) / step) * step, 9)
        rating = int(rating) if float(rating).is_integer() else rating
        return {"rating": rating, "reason": _on_scale(reason, f"rating {rating}", score), **extra}
    if dim.choices:
        label = min(dim.choices, key=lambda name: abs(dim.choices[name] - value))
        return {"label": label, "reason": _on_scale(reason, f"label {label}", score), **extra}
    if dim.binary:
        value, how = (1.0, "pass") if value >= 0.5 else (0.0, "fail")
        reason = _on_scale(reason, how, score)
    elif dim.exhaustive and dim.scoring:
        level = min(dim.scoring, key=lambda level: abs(level - value))
        reason = _on_scale(reason, f"level {level:g}", score) if level != value else reason
        value = level
    return {"score": round(value, SCORE_DECIMALS), "weight": dim.weight, "reason": reason, **extra}


def _on_scale(reason: str, answer: str, score: float | None) -> str:
    return reason if score is None else f"{reason} [as {answer}]"

