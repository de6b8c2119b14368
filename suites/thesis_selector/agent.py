"""The thesis selector of the demo: ranks candidate theses by the evidence behind them.

Its artifact is a ranking (a fenced JSON block); the rubric's ``items:`` tells the harness where the
candidates and their scores are, and ``margin_required`` in agents.yaml asks that the top thesis
beat the second by a clear margin, else a human chooses.
"""

from __future__ import annotations

import json
from typing import Any

SIGNAL_WEIGHTS = {"funding": 0.4, "hiring": 0.3, "expansion": 0.2, "press": 0.1}


def score(thesis: dict[str, Any]) -> float:
    """The share of the weighted signals the thesis has evidence for."""
    return round(sum(SIGNAL_WEIGHTS.get(signal, 0.0) for signal in thesis.get("signals", [])), 2)


def rank(request: dict[str, Any]) -> str:
    theses = [{"title": t["title"], "score": score(t), "evidence": t.get("signals", [])}
              for t in request["inputs"]["candidates"]]
    theses.sort(key=lambda t: -t["score"])
    return "Ranked theses, best first:\n\n```json\n" + json.dumps({"theses": theses}, indent=2) + "\n```\n"
