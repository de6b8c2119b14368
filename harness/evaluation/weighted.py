"""Probability-weighted ratings (G-Eval's score, DeepEval's): a judge's rating replaced by the sum of each rating it
could have written times its probability.

With ``score: weighted`` on an evaluator that reads its verdict from free text (``verdict: PATTERN``), the judge is
asked for the log probabilities of the likeliest tokens at each place of its answer (``top_logprobs``: OpenAI and
OpenAI-compatible servers such as vLLM return them). At the token that holds a rating, the likeliest tokens that
are themselves ratings on the dimension's scale give its probabilities, renormalised over those ratings; the
weighted rating is ``sum(rating * probability)``. Where there are none (Anthropic, the mock, a server that ignores
the parameter, a rating written in several tokens) the plain rating stands, and the record says why
(docs/material.md, "Probability-weighted scores").
"""

from __future__ import annotations

import math
from typing import Any

from harness.base.models import Dimension
from harness.llm import ModelReply, TokenLogprob

TOP_LOGPROBS = 20  # the most OpenAI's API (and vLLM's default max_logprobs) allows
SHOWN = 5  # the likeliest ratings named in a dimension's reason
DECIMALS = 6


def weigh_rating(dim: Dimension, value: str, start: int, reply: ModelReply) -> tuple[dict[str, Any], str]:
    """The ``weighted`` record of the rating ``value`` that ``reply``'s text holds at ``start``, and the note its
    dimension's reason ends with: ``{"used": true, "rating": 3.4, "probabilities": {"3": 0.6, "4": 0.4}}``, or
    ``{"used": false, "why": ...}`` where the plain rating stands."""
    found = _ratings_at(dim, value, start, reply)
    if isinstance(found, str):
        return {"used": False, "why": found}, f" [plain rating {value}: {found}]"
    total = sum(found.values())
    weighted = round(sum(rating * probability for rating, probability in found.items()) / total, DECIMALS)
    probabilities = {rating: probability / total for rating, probability in found.items()}
    likeliest = sorted(probabilities.items(), key=lambda pair: -pair[1])
    shown = ", ".join(f"{rating:g} ({probability:.2f})" for rating, probability in likeliest[:SHOWN])
    record = {"used": True, "rating": weighted,
              "probabilities": {f"{rating:g}": round(probability, DECIMALS)
                                for rating, probability in sorted(probabilities.items())}}
    return record, f" [probability-weighted rating {weighted:g} from {shown}]"


def _ratings_at(dim: Dimension, value: str, start: int, reply: ModelReply) -> dict[float, float] | str:
    """Each rating the model could have written at ``start`` and its probability (not yet renormalised), or why
    there are none to read."""
    if not reply.logprobs:
        return f"{reply.model} returned no log probabilities"
    located = _token_at(reply.logprobs, reply.text, start)
    if located is None:
        return f"the log probabilities {reply.model} returned do not line up with its answer's text"
    token, token_start = located
    before = reply.text[token_start:start]
    after_at = start + len(value) - token_start
    if after_at > len(token.token):
        return f"the rating {value} is written in more than one token"
    after = token.token[after_at:]
    candidates = dict(token.top)
    candidates.setdefault(token.token, token.logprob)
    ratings: dict[float, float] = {}
    for text, logprob in candidates.items():
        if not (text.startswith(before) and text.endswith(after) and len(text) > len(before) + len(after)):
            continue
        rating = dim.rating_from_text(text[len(before):len(text) - len(after)].strip())
        if rating is not None and math.isfinite(logprob):
            ratings[float(rating)] = ratings.get(float(rating), 0.0) + math.exp(logprob)
    if not ratings or sum(ratings.values()) <= 0:
        return "no rating on the scale among the likeliest tokens"
    return ratings


def _token_at(tokens: tuple[TokenLogprob, ...], text: str, at: int) -> tuple[TokenLogprob, int] | None:
    """The token whose text holds the character at ``at``, and where it starts; None when the tokens do not spell
    the text (a server's byte tokens, an answer cut differently)."""
    if "".join(token.token for token in tokens) != text:
        return None
    offset = 0
    for token in tokens:
        if offset <= at < offset + len(token.token):
            return token, offset
        offset += len(token.token)
    return None
