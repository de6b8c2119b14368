"""A conversation case's turns: a case file's ``turns:`` and ``system:``, or a dataset row's chat messages
(``dataset: {messages: "{messages}"}``), read into :class:`~harness.base.models.Turn` s (docs/conversations.md).

A turn is a user message: text, or ``{role: user, content: ...}``. An assistant message is the reference reply to
the user turn just before it (what a good answer says; the agent never sees it); a system message may only come
first. ``content`` may be text or a list of text parts (``[{type: text, text: ...}]``, OpenAI's shape).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from harness.base import slots
from harness.base.conversation import Conversation
from harness.base.fields import Fields, Section
from harness.base.models import AgentConfig, Case, Rubric, Turn
from harness.checks.base import check_slots

ROLES = ("system", "user", "assistant")
EXAMPLE = "`turns: [\"What is the capital of France?\", \"Which river runs through it?\"]`"


def parse_turns(raw: Any, place: Fields, *, system: str | None = None,
                strict: bool = True) -> tuple[tuple[Turn, ...], str | None]:
    """The user turns ``raw`` lists (each with its reference reply, if one follows it) and the system prompt: a
    leading system message's, or ``system``, not both. ``place`` is the field holding the list (``cases[0].turns``,
    ``dataset (row 3).messages``). ``strict`` refuses a message's unknown keys (a case file: a typo); a dataset's
    messages may carry keys of their own (``name``, ``weight``), which are left out."""
    if isinstance(raw, (str, Mapping)) or not isinstance(raw, Sequence) or not raw:
        raise place.expected(None, "a list of turns (each a user message, or {role, content})", raw, f"write {EXAMPLE}")
    turns: list[Turn] = []
    for index, item in enumerate(raw):
        here = place.nested(f"[{index}]")
        role, content = _message(item, here, strict)
        if role == "system":
            if index or system is not None:
                raise here.error("role", "a system message comes first, and only once" + (
                    " (the case gives `system:` already)" if system is not None and not index else ""),
                                 "keep one system prompt, at the start of the list or in `system:`")
            system = content
        elif role == "user":
            turns.append(Turn(user=content))
        elif not turns or turns[-1].expected is not None:
            raise here.error("role", "an assistant turn where a user turn must be: an assistant message is the "
                             "reference reply to the user turn just before it",
                             "start with a user turn, and give each user turn at most one assistant reply after it")
        else:
            turns[-1] = Turn(user=turns[-1].user, expected=content)
    if not turns:
        raise place.error(None, "no user turn: the agent has nothing to answer", "add a user message")
    return tuple(turns), system


def _message(item: Any, here: Fields, strict: bool) -> tuple[str, str]:
    """A message's role and text: a plain text is the user's."""
    if isinstance(item, str):
        return "user", here.string(item, None, what="a user message (text)")
    section = here.section(item, known=("role", "content") if strict else None, required=("role", "content"),
                           example="`{role: user, content: \"...\"}` or the user's text")
    role = section.choice("role", ROLES, "role")
    return role, _content(section.raw["content"], here.nested("content"))


def _content(raw: Any, place: Fields) -> str:
    """A message's text: text, or OpenAI's list of text parts joined."""
    if isinstance(raw, str):
        return raw
    if isinstance(raw, list) and raw and all(isinstance(part, Mapping) and part.get("type") == "text"
                                             and isinstance(part.get("text"), str) for part in raw):
        return "".join(part["text"] for part in raw)
    raise place.expected(None, "text (or a list of {type: text, text} parts)", raw,
                         "give the message's text; images, audio and tool calls are not supported")


def read_case_turns(case: Section) -> dict[str, Any]:
    """A hand-written case's ``turns:`` and ``system:`` as :class:`Case` fields (none for a case without turns)."""
    if "turns" not in case:
        if "system" in case:
            raise case.error("system", "a system prompt is for a conversation, and the case has no `turns:`",
                             f"add the user's turns, e.g. {EXAMPLE}, or remove system")
        return {}
    system = case.text("system") if "system" in case else None
    turns, system = parse_turns(case.raw["turns"], case.fields.nested("turns"), system=system)
    return {"turns": turns, "system": system}


def conversation_problem(case: Case, rubric: Rubric, agent: AgentConfig) -> tuple[str, str] | None:
    """What a conversation case cannot do with this agent and rubric, as (problem, fix); None when nothing.

    A producer template must place each user turn (``{input}``), or every turn would send the same text; a
    ``per_turn`` dimension whose check uses ``{expected}`` needs a reference reply after every user turn."""
    producer = agent.templates.get("producer")
    if producer is not None and not any(producer.slot_for(name) == "input"
                                        for name in slots.slots_in(producer.turn_text)):
        where = "its last message" if producer.messages else "the template"
        return (f"the producer template {producer.path.name} has no {{input}} slot"
                + (" in its last message" if producer.messages else "") + ", so it cannot send each user turn",
                f"put {{input}} (the user turn being answered) in {where}, or use a prompt producer (.md)")
    for dim in rubric.dimensions:
        if dim.per_turn and dim.check is not None and "expected" in check_slots(dim.check):
            bare = [str(number) for number, turn in enumerate(case.turns, 1) if turn.expected is None]
            if bare:
                return (f"the check of per_turn dimension {dim.id} uses {{expected}}, but turn {bare[0]} has no "
                        "reference reply", "give every user turn an assistant reply after it (its reference), or "
                        "score the dimension on the whole transcript")
    return None


def user_text(case: Case) -> str | None:
    """A conversation case's ``{input}``: its user turns, in order, a blank line between; None for another case."""
    return Conversation(case.turns).user_text if case.turns else None
