"""Conversations: a case's turns as chat messages, the agent's replies to them, and the transcript they make.

A conversation case (docs/conversations.md) has user turns, each with the reply a reference gives to it when there
is one, and an optional system prompt. The agent answers each user turn given the conversation so far: the system
prompt, the user's turns and its own earlier replies, never the references. The transcript of the whole
conversation, in Markdown, is the attempt's artifact; a rubric's ``per_turn`` dimension scores each reply instead,
and its reducer (:data:`TURN_REDUCERS`) makes one score of theirs.
"""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from harness.base.models import Turn

TURN_REDUCERS: dict[str, Callable[[Sequence[float]], float]] = {"mean": statistics.fmean, "min": min}
"""How a ``per_turn`` dimension's reply scores make its score, by the name a rubric gives."""


@dataclass(frozen=True)
class ChatMessage:
    """One message of a conversation as a chat model takes it: ``system``, ``user`` or ``assistant``."""

    role: str
    content: str

    def wire(self) -> dict[str, str]:
        """The OpenAI and Hugging Face shape, ``{"role", "content"}``: what a python or command runner reads."""
        return {"role": self.role, "content": self.content}


@dataclass(frozen=True)
class Conversation:
    """A conversation case as far as it went: its system prompt, its user turns (with their references) and the
    agent's replies, one per turn answered so far. Turns are numbered from 1."""

    turns: tuple[Turn, ...]
    system: str | None = None
    replies: tuple[str, ...] = ()

    def answered(self, reply: str) -> Conversation:
        """This conversation with the agent's reply to its next turn."""
        return dataclasses.replace(self, replies=(*self.replies, reply))

    def history(self, turn: int) -> tuple[ChatMessage, ...]:
        """What the agent is sent to answer ``turn``: the system prompt, each earlier user turn and the agent's
        own reply to it, then that turn's user message."""
        return (*self.messages(turn - 1), ChatMessage("user", self.turns[turn - 1].user))

    def messages(self, upto: int | None = None) -> tuple[ChatMessage, ...]:
        """The conversation as chat messages, through the reply to turn ``upto`` (None: every turn answered)."""
        answered = len(self.replies) if upto is None else upto
        shown = [ChatMessage("system", self.system)] if self.system else []
        for turn, reply in zip(self.turns[:answered], self.replies):
            shown += [ChatMessage("user", turn.user), ChatMessage("assistant", reply)]
        return tuple(shown)

    def transcript(self, upto: int | None = None, *, asking: bool = False) -> str:
        """The conversation in Markdown, ``**user:** ...`` and ``**assistant:** ...`` paragraphs, through the reply
        to turn ``upto`` (None: every turn answered); with ``asking``, through turn ``upto``'s user message only
        (what the agent had been told when it answered)."""
        messages = list(self.messages(upto - 1 if asking and upto is not None else upto))
        if asking and upto is not None:
            messages.append(ChatMessage("user", self.turns[upto - 1].user))
        return transcript_of(messages)

    @property
    def user_text(self) -> str:
        """Every user turn, in order, a blank line between: a conversation's ``{input}``."""
        return "\n\n".join(turn.user for turn in self.turns)

    def expected_at(self, turn: int) -> str | None:
        """The reference reply to ``turn``, if it has one."""
        return self.turns[turn - 1].expected


def transcript_of(messages: Sequence[ChatMessage]) -> str:
    """Chat messages as a Markdown transcript, a paragraph each."""
    return "\n\n".join(f"**{message.role}:** {message.content}" for message in messages) + "\n"


def reference_transcript(turns: Sequence[Turn], system: str | None) -> str | None:
    """The transcript the references make (each user turn answered by its reference reply): a conversation's
    expected answer when the case gives none, if every turn has a reference."""
    if not turns or any(turn.expected is None for turn in turns):
        return None
    conversation = Conversation(tuple(turns), system, tuple(str(turn.expected) for turn in turns))
    return conversation.transcript()


def reduce_turns(how: str, scored: Sequence[tuple[float | None, str]]) -> tuple[float | None, str]:
    """One score and reason of a ``per_turn`` dimension from each reply's (score, reason), combined by the reducer
    ``how`` names; unscored when a reply is (it names the first such turn)."""
    for turn, (score, reason) in enumerate(scored, 1):
        if score is None:
            return None, f"turn {turn}: {reason}"
    scores = [float(score) for score, _ in scored if score is not None]
    value = TURN_REDUCERS[how](scores)
    worst = scores.index(min(scores))
    each = ", ".join(f"{score:.2f}" for score in scores)
    return value, f"per turn {each} ({how} {value:.2f}); turn {worst + 1}: {scored[worst][1]}"
