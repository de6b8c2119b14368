"""The demo skills' own handlers (``implementation: {type: python_function, handler: skills.handlers:NAME}``):
each takes the skill's input, a JSON object, and returns its output."""

from __future__ import annotations

import re

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE_END.split(text.strip()) if s.strip()]


def word_stats(skill_input: dict) -> dict:
    """word-stats: how many words and sentences a text has, and its longest word."""
    words = re.findall(r"[A-Za-z0-9'-]+", skill_input["text"])
    return {"words": len(words), "sentences": len(sentences(skill_input["text"])),
            "longest_word": max(words, key=len) if words else ""}


def lead_summary(skill_input: dict) -> str:
    """review-summary's handler: the article's first two sentences, the summary a newsroom calls the lead."""
    return " ".join(sentences(skill_input["text"])[:2])
