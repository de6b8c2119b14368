"""The LLM judge: the rubric, its examples and the artifact to a model, its forced tool call back as the
evaluator output, validated against the schema of the judged dimensions with one retry that shows the model its
errors; or, with ``reasoning: first`` or a ``verdict:`` pattern, free text first and the verdict after."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from harness.base import slots
from harness.base.errors import ValidationFailed
from harness.base.fields import one_line
from harness.base.models import JudgeStyle, PromptFile, PromptTemplate, Rubric
from harness.base.requests import JudgeRequest, render_messages, rubric_as_text
from harness.base.usage import Spend
from harness.evaluation.cascade import ask_cascade
from harness.evaluation.ensemble import ask_judges
from harness.evaluation.evaluate import SCORE_DECIMALS
from harness.evaluation.judge_prefix import PrefixNote, cached_chars, prefix_note, template_prompt
from harness.evaluation.judge_schema import answer_shape, validation_errors
from harness.evaluation.runners import RunnerOutput, chat_messages
from harness.evaluation.weighted import TOP_LOGPROBS, weigh_rating
from harness.llm import Message, ModelClient, ModelReply

REASON_FIRST = ("Before you give any score, reason step by step in plain text about each dimension. "
                "Do not give the scores yet.")
VERDICT_NOW = "Now submit your evaluation with the submit_evaluation tool, consistent with your reasoning above."


class LlmJudge:
    """The evaluator prompt as an LLM judge: structured output validated against EvaluatorOutput.

    With a ``template`` the judge's message is the template as written, its slots filled (a published judge
    prompt; a chat template's messages in their roles, its system message the system prompt); without one, the
    evaluator prompt, the rubric and the examples are a cached system prefix and the message carries the inputs,
    the reference answer and the artifact. ``style`` says how the model commits:
    at once, after reasoning in free text, or in free text that a pattern reads the verdict from.

    When ``client``'s settings carry a judge ensemble (``judge: {models: [...]}``), every judge of it is asked
    exactly so, each on a client of its own sharing ``client``'s call policy (cache, limits, cost), and the answer
    carries them all (harness.evaluation.ensemble). A judge cascade (``judge: {cascade: {first: M}}``) asks M so
    first, and ``client``'s model only when M's answer is uncertain (harness.evaluation.cascade).

    What is stable goes in the cached prefix (harness.evaluation.judge_prefix); ``notice`` hears, once per rubric
    and model, of a prefix too short for the model to cache. ``prompt_cache=False`` marks nothing as cacheable
    (the prefix is sent as plain system prompt)."""

    def __init__(self, prompt: PromptFile | None, client: ModelClient, *, template: PromptTemplate | None = None,
                 style: JudgeStyle = JudgeStyle(), notice: Callable[[PrefixNote], None] | None = None,
                 prompt_cache: bool = True):
        self.prompt = prompt
        self.client = client
        self.template = template
        self.style = style
        self.notice = notice
        self.prompt_cache = prompt_cache
        self._prefixes: dict[tuple[Any, ...], str] = {}
        self._examples: dict[tuple[str, str], list[str]] = {}
        self._checked: set[tuple[str, str, str, str]] = set()  # (rubric, version, model, agent) checked for length
        self.cascade = client.settings.cascade
        self.first = None if self.cascade is None else ModelClient(self.cascade.first, policy=client.policy)
        ensemble = client.settings.ensemble
        self.ensemble = ensemble
        # the first judge is ``client`` itself (its settings are the first judge's): one client per model
        self.judges = [] if ensemble is None else [
            (judge.qualified, client if index == 0 else ModelClient(judge, policy=client.policy))
            for index, judge in enumerate(ensemble.judges)]

    def stable_prefix(self, rubric: Rubric, dimension_ids: list[str]) -> str:
        """Everything that is the same for every artifact: sent as a cached prompt prefix.

        Built once per rubric (the examples are read from disk once, not on every evaluation). A case's own copy
        of the rubric (its criteria, its filled text) changes with the case: it goes in the message, and the
        prefix (the evaluator prompt, the examples, the instruction) stays the same for every case.
        """
        instruction = self._instruction(rubric, dimension_ids)
        key = (str(rubric.path), rubric.version, tuple(dimension_ids), bool(rubric.variant), instruction)
        prefix = self._prefixes.get(key)
        if prefix is None:
            prefix = self._prefixes[key] = self._build_prefix(rubric, dimension_ids, instruction)
        return prefix

    def _examples_text(self, rubric: Rubric) -> list[str]:
        key = (str(rubric.path), rubric.version)
        texts = self._examples.get(key)
        if texts is None:
            texts = self._examples[key] = [
                f"# {title}: {p.name}\n{p.read_text(encoding='utf-8')}"
                for title, paths in (("Gold example (scores at or above the threshold)", rubric.examples.gold),
                                     ("Anti-pattern (scores below the threshold)", rubric.examples.anti_patterns))
                for p in paths]
        return texts

    def _build_prefix(self, rubric: Rubric, dimension_ids: list[str], instruction: str) -> str:
        assert self.prompt is not None
        own = [] if rubric.variant else [rubric_as_text(rubric, dimension_ids)]  # a case's own: in the message
        return "\n\n".join([self.prompt.text, *own, *self._examples_text(rubric), instruction])

    def _instruction(self, rubric: Rubric, dimension_ids: list[str]) -> str:
        """The last words of the prefix: how to answer."""
        if self.style.verdict is not None:
            return "Reason step by step, then give your verdict exactly in the form the evaluator prompt asks for."
        where = "in the message" if rubric.variant else "above"
        if all(answer_shape(d) == ("score",) for d in rubric.dimensions if d.id in dimension_ids):
            return (f"Score only the dimensions listed in the rubric {where}, each between 0 and 1, with a reason. "
                    "If you cannot judge a dimension from the artifact, set indeterminate: true.")
        return (f"Score only the dimensions listed in the rubric {where}, each as its levels say (a score, a rating "
                "or a label), with a reason. If you cannot judge a dimension from the artifact, set indeterminate: "
                "true.")

    def _prompt(self, request: JudgeRequest) -> tuple[Message, str | None, str, tuple[Message, ...]]:
        """:meth:`_message`, or with ``prompt_cache`` off the same text with nothing marked as cacheable."""
        message, prefix, system, history = self._message(request)
        if self.prompt_cache:
            return message, prefix, system, history
        plain = [replace(m, cache_head=0) for m in (*history, message)]
        return plain[-1], None, "\n\n".join(filter(None, (prefix, system))), tuple(plain[:-1])

    def _message(self, request: JudgeRequest) -> tuple[Message, str | None, str, tuple[Message, ...]]:
        """The user message, the cached system prefix, the plain system prompt and the messages before the user
        message. A template is the whole prompt: a text template's one message, or a chat template's system message
        (the system prompt, sent as the prefix unless a case slot is in it), its messages before the last (a
        few-shot exchange) and its last user message; a breakpoint marks the prompt cacheable up to its first case
        slot (harness.evaluation.judge_prefix)."""
        if self.template is not None:
            system, chat = chat_messages(render_messages(self.template, request))
            prefix, plain, messages = template_prompt(self.template, request, system, chat)
            return messages[-1], prefix, plain, messages[:-1]
        reference = ("" if request.expected is None else
                     f"\n\n## Reference answer (what a correct answer says)\n{slots.as_text(request.expected)}")
        inputs = f"\n\n## Inputs\n```json\n{json.dumps(request.inputs, default=str)}\n```"
        talk = request.conversation
        if talk is None:
            message = f"Evaluate this artifact.{inputs}{reference}\n\n## Artifact\n{request.artifact}"
        elif request.turn is None:  # a conversation: its transcript, whole (docs/conversations.md)
            message = ("Evaluate this conversation: the assistant's replies to the user's turns."
                       f"{inputs if request.inputs else ''}{reference}\n\n## Conversation\n{request.artifact}")
        else:  # one reply, and the conversation up to it
            message = (f"Evaluate the assistant's reply in turn {request.turn} of this conversation."
                       f"{inputs if request.inputs else ''}\n\n## Conversation so far\n"
                       f"{talk.transcript(request.turn, asking=True).rstrip()}{reference}\n\n## Reply to evaluate\n"
                       f"{request.artifact}")
        if request.rubric.variant:  # a case's own rubric is not the same for every case: not in the prefix
            message = f"{request.rubric_text}\n\n{message}"
        return Message.user(message), self.stable_prefix(request.rubric, list(request.dimensions)), "", ()

    def run(self, request: JudgeRequest) -> RunnerOutput:
        if self.ensemble is not None:
            return ask_judges([(name, lambda client=client: self._judge(client, request))
                               for name, client in self.judges], self.ensemble.aggregate)
        if self.cascade is not None and self.first is not None:
            return ask_cascade((self.first.model, lambda: self._judge(self.first, request)),  # type: ignore[arg-type]
                               (self.client.model, lambda: self._judge(self.client, request)), request,
                               self.cascade.margin)
        return self._judge(self.client, request)

    def _check_prefix(self, client: ModelClient, request: JudgeRequest, prefix: str | None,
                      messages: tuple[Message, ...]) -> None:
        """Tell ``notice``, once per rubric, model and agent, when the cached prefix is too short to cache."""
        key = (request.rubric.name, request.rubric.version, client.model, request.agent)
        if self.notice is None or key in self._checked:
            return
        self._checked.add(key)
        as_tool = self.style.verdict is None and client.settings.structured_output != "json_schema"
        note = prefix_note(client, request, cached_chars(prefix, messages, request.schema if as_tool else None,
                                                         "submit_evaluation"))
        if note is not None:
            self.notice(note)

    def _judge(self, client: ModelClient, request: JudgeRequest) -> RunnerOutput:
        """One judge's answer to ``request``, from the model of ``client``."""
        message, prefix, system, history = self._prompt(request)
        self._check_prefix(client, request, prefix, (*history, message))
        extra = {"cache_extra": {"sample": request.sample}} if request.sample is not None else {}
        if self.style.verdict is not None:
            return self._read_verdict(client, request, message, prefix, extra, history=history, system=system)
        spend = Spend()
        reasoning = None
        if self.style.reasoning_first:
            asked = (message if self.template is not None
                     else replace(message, text=f"{message.text}\n\n{REASON_FIRST}"))
            reply = client.complete(system=system, messages=[*history, asked], cached_system_prefix=prefix, **extra)
            spend.merge(reply.spend)
            reasoning = reply.text
            history = (*history, asked, Message.assistant(reasoning or "(no reasoning)"))
            message = Message.user(VERDICT_NOW)
        result = client.generate_json(system=system, prompt=message, schema=request.schema,
                                      tool_name="submit_evaluation", cached_system_prefix=prefix,
                                      history=history, **extra)
        spend.merge(result.spend)
        if not result.success:
            errors = result.validation_errors
            raise ValidationFailed(
                f"the judge's answer did not match EvaluatorOutput after {result.attempts} "
                f"attempts: {'; '.join(errors[:3])} (fix: check that the evaluator prompt asks for the listed "
                "dimensions, each answered as its levels say with a reason; raise judge.max_tokens if answers are "
                "cut off)", errors, result.raw_response, spend=spend)
        data = result.data or {}
        if reasoning:  # metadata is an object of any keys in every judge schema: the answer still matches
            data = {**data, "metadata": {**(data.get("metadata") or {}), "reasoning": reasoning}}
        return RunnerOutput(data=data, spend=spend, checked_against=request.schema)

    def _read_verdict(self, client: ModelClient, request: JudgeRequest, message: Message, prefix: str | None,
                      extra: dict[str, Any], *, history: tuple[Message, ...] = (), system: str = "") -> RunnerOutput:
        """Free text, the verdict read from it by the pattern; an answer without a readable verdict on the
        dimension's levels is asked for once more, showing the model what was wrong."""
        pattern = self.style.verdict
        assert pattern is not None
        messages = [*history, message]  # a chat template's messages before its last
        spend = Spend()
        problem = ""
        for _ in (1, 2):
            reply = client.complete(system=system, messages=messages, cached_system_prefix=prefix, **extra,
                                    top_logprobs=TOP_LOGPROBS if self.style.weighted else None)
            spend.merge(reply.spend)
            data, problem = verdict_from_text(reply.text, pattern, request,
                                              reply=reply if self.style.weighted else None)
            if data is not None:
                return RunnerOutput(data=data, spend=spend)
            messages += [Message.assistant(reply.text or "(no answer)"),
                         Message.user(f"{problem}. Answer again: reason, then give the verdict exactly in the form "
                                      "the instructions ask for.")]
        raise ValidationFailed(f"the judge's verdict could not be read after 2 attempts: {problem} "
                               f"(fix: make the judge prompt ask for a verdict that the pattern /{pattern.pattern}/ "
                               "matches, on the dimension's levels)", [problem], messages[-2].text[:2000],
                               spend=spend)


def verdict_from_text(text: str, pattern: re.Pattern[str], request: JudgeRequest, *, reply: ModelReply | None = None
                      ) -> tuple[dict[str, Any] | None, str]:
    """The EvaluatorOutput a free-text answer gives: for each judged dimension, the last match of its group
    (a named group per dimension, or the one group for the one dimension), on the dimension's scale (a whole number,
    or with a ``step`` a rating on it). None and what is wrong when it gives none. With ``reply`` (``score:
    weighted``), a rating is weighted by the probabilities of the ratings at its token where the reply has them
    (harness.evaluation.weighted)."""
    dims = [d for d in request.rubric.dimensions if d.id in request.dimensions]
    matches = list(pattern.finditer(text or ""))
    if not matches:
        return None, f"the answer has no verdict matching /{pattern.pattern}/"
    found: dict[str, tuple[str, int]] = {}  # each dimension's verdict, and where in the text it starts
    for match in matches:
        groups = match.groupdict() if pattern.groupindex else {dims[0].id: match.group(1)}
        for name, value in groups.items():
            if value is not None:
                at = match.start(name if pattern.groupindex else 1) + len(value) - len(value.lstrip())
                found[name] = (value.strip(), at)
    answers: dict[str, Any] = {}
    for dim in dims:
        if dim.id not in found:
            return None, f"the answer gives no verdict for {dim.id} (the pattern's group {dim.id!r})"
        value, at = found[dim.id]
        # the reason: what the model wrote before its first verdict (a chain of thought may repeat the verdict)
        reason = one_line(text[:matches[0].start()].strip(), 300) or f"verdict {value}"
        answer: dict[str, Any] = {"reason": reason, "weight": dim.weight}
        if dim.scale is not None:
            rating = dim.rating_from_text(value)
            if rating is None:
                return None, f"{value!r} is not {dim.rating_words}"
            answer["rating"] = rating
            if reply is not None:
                answer["weighted"], note = weigh_rating(dim, value, at, reply)
                answer["reason"] += note
        elif dim.choices:
            if value not in dim.choices:
                return None, f"{value!r} is not one of {', '.join(dim.choices)}"
            answer["label"] = value
        else:
            try:
                answer["score"] = float(value)
            except ValueError:
                return None, f"{value!r} is not a score from 0 to 1"
        answers[dim.id] = answer
    data = {"overallScore": 0.0, "passed": False, "dimensionScores": answers, "feedback": "", "suggestedFixes": [],
            "metadata": {"reasoning": text}}
    errors = validation_errors(data, request.schema)
    if errors:
        return None, f"the verdict is not on the dimension's levels: {errors[0]}"
    total = sum(dim.weight for dim in dims) or 1.0
    data["overallScore"] = round(sum(dim.weight * dim.score_of(answers[dim.id]) for dim in dims) / total,
                                 SCORE_DECIMALS)
    return data, ""


