"""The demo skills' models, on the mock provider: offline, deterministic, no key.

``mock/skills-writer`` answers summarize-article the way a careful model would, from the article in the prompt.
On its first answer for a long article (over 60 words) it leaves out ``key_points``, as real models sometimes drop
a field; the harness shows it the validation error and it answers in full (the retry, ``attempts: 2``).

``mock/skills-reviewer`` reviews a summary against the summary-review rubric: ``faithful`` passes when every
sentence of the summary is in the article (quoted as evidence), ``names-subject`` when a word of the title is in it.
"""

from __future__ import annotations

import json
import re

from harness.llm.providers.mock import mock_model

from skills.handlers import sentences

LONG_ARTICLE_WORDS = 60


def _between(text: str, start: str, end: str) -> str:
    return text.split(start, 1)[1].split(end, 1)[0].strip() if start in text else ""


@mock_model("skills-writer")
def writer(request):
    prompt = request.messages[0].text
    title = _between(prompt, "Title: ", "\n")
    article = _between(prompt, "<<<", ">>>")
    said = sentences(article)
    words = len(re.findall(r"[A-Za-z0-9'-]+", article))
    answer = {"title": title, "summary": " ".join(said[:2]), "key_points": said[:3], "word_count": words}
    retried = any(message.tool_results for message in request.messages)
    if words > LONG_ARTICLE_WORDS and not retried:
        del answer["key_points"]
    return answer


@mock_model("skills-reviewer")
def reviewer(request):
    message = request.messages[-1].text
    inputs = json.loads(_between(message, "```json", "```"))
    summary = message.split("## Asset\n", 1)[1]
    wanted = request.tools[0].schema["properties"]["criteria"]["required"]
    title_words = [w for w in re.findall(r"[A-Za-z]+", inputs["title"]) if len(w) > 3]
    found = [s for s in sentences(summary) if s in inputs["text"]]
    named = [w for w in title_words if w.lower() in summary.lower()]
    verdicts = {
        "faithful": ("pass" if len(found) == len(sentences(summary)) else "fail",
                     f"{len(found)} of {len(sentences(summary))} sentences are the article's own", 0.9, found),
        "names-subject": ("pass" if named else "fail",
                          f"names {', '.join(named)}" if named else "names nothing of the title", 0.8,
                          [w for w in named][:3]),
    }
    criteria = {c: dict(zip(("verdict", "reasoning", "confidence", "evidence"), verdicts[c])) for c in wanted}
    fixes = [f"Rewrite so that {c} passes" for c, v in criteria.items() if v["verdict"] == "fail"]
    return {"criteria": criteria, "suggested_fixes": fixes}
