"""The comparison demo's models, on the mock provider: offline, deterministic, no key.

``mock/careful`` knows every capital of the dataset but one (Myanmar's, which it gives as Yangon, its former
capital). ``mock/hasty`` answers with a country's best-known city, which for twelve of the fifty is not the
capital (Sydney for Australia). Asked for one full sentence, both explain, and some explanations run long.

Three judges rate how clear an answer is, on 1 to 5, as an ensemble: ``mock/judge-brief`` likes a bare city,
``mock/judge-thorough`` a sentence that says why, ``mock/judge-fair`` any answer that names the right city. They
disagree by design: the summary's kappa says how much. ``mock/pair-judge`` compares two answers.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from harness.llm.providers.mock import mock_model
from harness.llm.schema_fill import evaluator_output

CAPITALS = {row["country"]: row["capital"] for row in map(json.loads, (Path(__file__).parent / "data" /
                                                                      "capitals.jsonl").read_text().splitlines())}
BEST_KNOWN_CITY = {"Australia": "Sydney", "Canada": "Toronto", "Turkey": "Istanbul", "Brazil": "Rio de Janeiro",
                   "Switzerland": "Zurich", "Nigeria": "Lagos", "Pakistan": "Karachi", "New Zealand": "Auckland",
                   "Morocco": "Casablanca", "Vietnam": "Ho Chi Minh City", "Myanmar": "Yangon",
                   "Tanzania": "Dar es Salaam"}
FORMER_CAPITAL = {"Myanmar": "Yangon"}


def _answer(prompt: str, city_of: dict[str, str]) -> str:
    country = re.search(r"capital of (.+?)\?", prompt).group(1)
    city = city_of.get(country, CAPITALS[country])
    if "full sentence" not in prompt:
        return city
    why = ("where the government sits" if len(country) % 2 else
           "where its parliament, its government and most of its ministries have their seats")
    return f"The capital of {country} is {city}, {why}."


@mock_model("careful")
def careful(request):
    return _answer(request.messages[-1].text, FORMER_CAPITAL)


@mock_model("hasty")
def hasty(request):
    return _answer(request.messages[-1].text, BEST_KNOWN_CITY)


@mock_model("pair-judge")
def pair_judge(request):
    """MT-bench's verdict format (graders/mt-bench-pair's prompt): the right capital wins; between two right answers, the shorter one, unless both
    are short, when this judge, like many, prefers the answer it was shown first (the swap catches it)."""
    prompt = request.messages[-1].text
    country = re.search(r"capital of (.+?)\?", prompt).group(1)
    first = prompt.split("[Assistant A's answer]\n", 1)[1].split("\n[End of", 1)[0]
    second = prompt.split("[Assistant B's answer]\n", 1)[1].split("\n[End of", 1)[0]
    right = [CAPITALS[country] in answer for answer in (first, second)]
    if right[0] != right[1]:
        verdict = "A" if right[0] else "B"
    elif len(first.split()) > 3 and len(second.split()) > 3 or abs(len(first) - len(second)) < 4:
        verdict = "A"  # position bias
    else:
        verdict = "A" if len(first) < len(second) else "B"
    return f"Both answers address the question. Final verdict: [[{verdict}]]"


def _judged(request, rating_of):
    """A judge's answer: the clear dimension rated by ``rating_of(answer, country)``."""
    schema = next(t.schema for t in request.tools if t.name == request.tool_choice)
    text = request.messages[-1].text
    answer = text.rsplit("## Artifact", 1)[-1] if "## Artifact" in text else text
    country = re.search(r"capital of (.+?)\?", text).group(1)
    rating = rating_of(answer.strip(), country)
    return evaluator_output(schema, {"clear": (rating - 1) / 4}, 1.0, 0.0)


@mock_model("judge-brief")
def judge_brief(request):
    return _judged(request, lambda answer, country: 5 if len(answer.split()) <= 3 else 3)


@mock_model("judge-thorough")
def judge_thorough(request):
    return _judged(request, lambda answer, country: 5 if " because " in answer or "where" in answer else 3)


@mock_model("judge-fair")
def judge_fair(request):
    return _judged(request, lambda answer, country: 5 if CAPITALS[country] in answer else 1)
from comparisons import conversation_models  # noqa: E402,F401  (mock/guide, for followups.cases.yaml)
