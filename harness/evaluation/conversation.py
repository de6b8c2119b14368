"""A conversation case's steps (docs/conversations.md): the producer asked once per user turn, and a ``per_turn``
check run on each reply. The loop (:mod:`harness.evaluation.engine`) answers a conversation with
:class:`Conversing`; the evaluation (:mod:`harness.evaluation.evaluate`) scores its ``per_turn`` dimensions, the
judge's through one request per reply.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from harness.base.conversation import Conversation, reduce_turns
from harness.base.errors import HarnessError
from harness.base.models import Dimension
from harness.base.requests import AgentRequest
from harness.base.usage import Spend
from harness.checks import CheckContext
from harness.checks.transforms import noted
from harness.evaluation.runners import Request, Runner, RunnerOutput


class Conversing:
    """A producer answering a conversation case turn by turn: for each user turn it gets the request with the
    conversation so far in ``messages`` (the system prompt, the user's turns, its own earlier replies, each without
    trailing whitespace), and the transcript of its replies is the artifact. One per attempt: :attr:`conversation` is the conversation it had,
    replies and all."""

    def __init__(self, producer: Runner, conversation: Conversation):
        self.producer = producer
        self.conversation = conversation

    def run(self, request: Request) -> RunnerOutput:
        assert isinstance(request, AgentRequest)
        spend, flags, commands = Spend(), [], []
        try:
            for turn in range(1, len(self.conversation.turns) + 1):
                made = self.producer.run(dataclasses.replace(request, messages=self.conversation.history(turn)))
                spend.merge(made.spend)
                flags += made.flags
                commands += made.commands
                self.conversation = self.conversation.answered(made.text.rstrip())  # a command's last newline
        except HarnessError as exc:  # the turns answered before it are billed all the same
            spend.merge(getattr(exc, "spend", None) or Spend())
            exc.spend = spend
            exc.commands = (*commands, *getattr(exc, "commands", ()))
            raise
        return RunnerOutput(text=self.conversation.transcript(), flags=tuple(dict.fromkeys(flags)), spend=spend,
                            commands=tuple(commands))


def check_turns(dim: Dimension, talk: Conversation, rubric_transform: Any,
                context: CheckContext) -> tuple[float | None, str, tuple[str, ...]]:
    """A ``per_turn`` check's score, reason and fixes: the check run on each reply (as the rubric's and the
    dimension's transforms make it), ``{input}`` the user turn it answers and ``{expected}`` that turn's reference;
    the scores combined by the dimension's reducer."""
    assert dim.per_turn is not None and dim.check is not None
    scored: list[tuple[float | None, str]] = []
    fixes: list[str] = []
    for turn, reply in enumerate(talk.replies, 1):
        for transform in (rubric_transform, dim.transform):
            reply = transform.apply(reply) if transform is not None else reply
        result = dim.check.run(reply, dataclasses.replace(context, expected=talk.expected_at(turn),
                                                          input_text=talk.turns[turn - 1].user))
        scored.append((result.score, noted(reply, result.reason)))
        fixes += [f"turn {turn}: {fix}" for fix in result.fixes]
    score, reason = reduce_turns(dim.per_turn, scored)
    return score, reason, tuple(fixes)
