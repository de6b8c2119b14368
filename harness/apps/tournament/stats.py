"""Noise-aware acceptance: the spread of repeated baseline runs, a minimum effect, and a significance
test (an exact Mann-Whitney U permutation test, or a bootstrap interval) on interleaved fresh samples.

Everything is in "gain" units: positive means better in the metric's direction.
"""

from __future__ import annotations

import itertools
import math
import random
import statistics
from dataclasses import dataclass
from typing import Literal

_EXACT_LIMIT = 20_000  # permutations enumerated exactly up to this many splits


def median(values: list[float]) -> float:
    return float(statistics.median(values))


def spread(values: list[float]) -> float:
    """The spread of repeated runs of one commit: the sample standard deviation (0 for one sample or
    identical ones). A slow outlier widens it, which only makes acceptance more cautious."""
    if len(values) < 2:
        return 0.0
    return float(statistics.stdev(values))


def _ranks(values: list[float]) -> list[float]:
    order = sorted(range(len(values)), key=lambda i: values[i])
    ranks = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = (i + j) / 2 + 1
        i = j + 1
    return ranks


def mann_whitney_p(better: list[float], worse: list[float]) -> float:
    """One-sided p-value that ``better`` tends to be larger than ``worse`` (Mann-Whitney U).

    Exact (all splits of the pooled midranks, so ties are handled) when there are at most
    20,000 splits, otherwise the normal approximation with tie correction and continuity correction.
    """
    n1, n2 = len(better), len(worse)
    if n1 == 0 or n2 == 0:
        return 1.0
    ranks = _ranks(better + worse)
    observed = sum(ranks[:n1])
    if math.comb(n1 + n2, n1) <= _EXACT_LIMIT:
        total = hits = 0
        for combo in itertools.combinations(ranks, n1):
            total += 1
            if sum(combo) >= observed - 1e-9:
                hits += 1
        return hits / total
    u = observed - n1 * (n1 + 1) / 2
    mean = n1 * n2 / 2
    n = n1 + n2
    counts: dict[float, int] = {}
    for r in ranks:
        counts[r] = counts.get(r, 0) + 1
    tie = sum(t ** 3 - t for t in counts.values())
    var = n1 * n2 / 12 * ((n + 1) - tie / (n * (n - 1)))
    if var <= 0:
        return 1.0
    z = (u - mean - 0.5) / math.sqrt(var)
    return 0.5 * math.erfc(z / math.sqrt(2))


def bootstrap_lower(better: list[float], worse: list[float], alpha: float, *, resamples: int = 4000,
                    seed: int = 20240501) -> float:
    """The one-sided (1 - alpha) lower bound of median(better) - median(worse) by bootstrap."""
    rng = random.Random(seed)
    diffs = []
    for _ in range(resamples):
        a = [rng.choice(better) for _ in better]
        b = [rng.choice(worse) for _ in worse]
        diffs.append(median(a) - median(b))
    diffs.sort()
    return diffs[max(0, int(math.floor(alpha * resamples)) - 1)] if alpha * resamples >= 1 else diffs[0]


def exact_test_can_reach(n1: int, n2: int, alpha: float) -> bool:
    """Whether an exact Mann-Whitney test of ``n1`` against ``n2`` runs can reach ``alpha`` at all: its
    smallest p-value, complete separation, is 1 / C(n1 + n2, n1)."""
    return 1 / math.comb(n1 + n2, n1) < alpha


@dataclass(frozen=True)
class Significance:
    """Whether ``better`` runs are significantly better than ``worse`` runs by one test, and the sentence."""

    significant: bool
    p_value: float | None
    ci_lower: float | None
    text: str


def significance(better: list[float], worse: list[float], *, test: Literal["mann_whitney", "bootstrap"],
                 alpha: float, difference: str = "gain", unit: str = "") -> Significance:
    """The goal's significance test of ``better`` over ``worse`` (both in gain units, larger is better);
    ``difference`` names what the bootstrap bounds in the sentence ("gain", or "loss" when testing a regression)."""
    if test == "mann_whitney":
        p_value = mann_whitney_p(better, worse)
        significant = p_value < alpha
        return Significance(significant, p_value, None,
                            f"Mann-Whitney U p={p_value:.4g} {'<' if significant else '>='} alpha {alpha:g}")
    ci = bootstrap_lower(better, worse, alpha)
    significant = ci > 0
    return Significance(significant, None, ci, f"bootstrap {100 * (1 - alpha):g}% lower bound of the {difference} "
                                               f"{ci:.4g}{unit} {'>' if significant else '<='} 0")


@dataclass(frozen=True)
class Decision:
    """Whether a candidate's gain over the baseline is real, and which test decided."""

    accepted: bool
    decided_by: str
    gain: float
    min_effect: float
    spread: float
    test: Literal["mann_whitney", "bootstrap"]
    p_value: float | None
    ci_lower: float | None
    baseline_median: float
    candidate_median: float
    reason: str

    def to_json(self) -> dict[str, object]:
        return {
            "accepted": self.accepted, "decided_by": self.decided_by, "gain": self.gain,
            "min_effect": self.min_effect, "spread": self.spread, "test": self.test,
            "p_value": self.p_value, "ci_lower": self.ci_lower,
            "baseline_median": self.baseline_median, "candidate_median": self.candidate_median,
        }


def decide(baseline_gain_samples: list[float], candidate_gain_samples: list[float], *, noise_spread: float,
           min_effect_multiple: float, test: Literal["mann_whitney", "bootstrap"], alpha: float,
           unit: str = "") -> Decision:
    """Accept only when the median gain exceeds ``min_effect_multiple`` x the measured spread AND the
    significance test says the candidate is better. Samples are in gain units (larger is better)."""
    base_m, cand_m = median(baseline_gain_samples), median(candidate_gain_samples)
    gain = cand_m - base_m
    min_effect = min_effect_multiple * noise_spread
    sig = significance(candidate_gain_samples, baseline_gain_samples, test=test, alpha=alpha, unit=unit)
    effect_ok = gain > min_effect
    effect_text = (f"gain {gain:.4g}{unit} {'>' if effect_ok else '<='} min effect {min_effect:.4g}{unit} "
                   f"({min_effect_multiple:g} x spread {noise_spread:.4g}{unit})")
    if not effect_ok:
        verdict = "not better than the baseline" if gain <= 0 else "within the measured noise"
        decided_by, reason = "min_effect", f"{effect_text}: {verdict}"
    elif not sig.significant:
        decided_by, reason = test, f"{sig.text}: not significant"
    else:
        decided_by, reason = f"min_effect+{test}", f"{effect_text}; {sig.text}"
    return Decision(accepted=effect_ok and sig.significant, decided_by=decided_by, gain=gain, min_effect=min_effect,
                    spread=noise_spread, test=test, p_value=sig.p_value, ci_lower=sig.ci_lower, baseline_median=base_m,
                    candidate_median=cand_m, reason=reason)
