"""The statistics of every comparison the harness makes, in one place.

The tournament's noise-aware acceptance: the spread of repeated baseline runs, a minimum effect, and a
significance test (an exact Mann-Whitney U permutation test, or a bootstrap interval) on interleaved fresh
samples; everything there is in "gain" units, positive meaning better in the metric's direction.

The comparisons of variants, cycles and pairs of outputs (docs/comparisons.md): a mean with its bootstrap
interval, a paired test over the cases two runs share (an exact sign-flip permutation test of the mean
difference), and the Wilson interval of a rate (a pass rate, a win rate). Every random draw is seeded: the same
scores give the same interval on every run and every machine.
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


# --- comparing variants, cycles and pairs ---------------------------------------------------------

CONFIDENCE = 0.95
_RESAMPLES = 2000
_SEED = 20261127


@dataclass(frozen=True)
class Interval:
    """An estimate and its two-sided ``confidence`` interval; ``n`` values went in."""

    estimate: float
    low: float
    high: float
    n: int

    def text(self, digits: int = 3) -> str:
        """``0.812 [0.771, 0.850]``, or the estimate alone when one value cannot make an interval."""
        if self.n < 2:
            return f"{self.estimate:.{digits}f}"
        return f"{self.estimate:.{digits}f} [{self.low:.{digits}f}, {self.high:.{digits}f}]"

    def percent(self) -> str:
        """A rate as ``50% [9%, 91%]``."""
        if self.n < 1:
            return "-"
        return f"{self.estimate:.0%} [{self.low:.0%}, {self.high:.0%}]"

    def to_json(self) -> dict[str, float | int]:
        return {"estimate": self.estimate, "low": self.low, "high": self.high, "n": self.n}


def mean_interval(values: list[float], *, confidence: float = CONFIDENCE, resamples: int = _RESAMPLES) -> Interval:
    """The mean of ``values`` and its bootstrap percentile interval (no assumption of normal scores: a score
    bounded by 0 and 1, often piled at 1, is not). One value is its own interval."""
    if not values:
        raise ValueError("no values")
    estimate = statistics.fmean(values)
    if len(values) < 2 or min(values) == max(values):
        return Interval(estimate, estimate, estimate, len(values))
    rng = random.Random(_SEED)
    n = len(values)
    means = sorted(statistics.fmean(rng.choices(values, k=n)) for _ in range(resamples))
    tail = (1 - confidence) / 2
    return Interval(estimate, means[int(math.floor(tail * (resamples - 1)))],
                    means[int(math.ceil((1 - tail) * (resamples - 1)))], n)


def wilson_interval(successes: float, trials: int, *, confidence: float = CONFIDENCE) -> Interval:
    """A rate and its Wilson score interval: honest at 0 and 1 and for a few trials, where the normal
    approximation says [1, 1] for 5 out of 5. A tie counted as half a win is allowed (``successes`` 2.5)."""
    if trials <= 0:
        raise ValueError("no trials")
    z = statistics.NormalDist().inv_cdf(1 - (1 - confidence) / 2)
    rate = successes / trials
    centre = (rate + z * z / (2 * trials)) / (1 + z * z / trials)
    half = z * math.sqrt(rate * (1 - rate) / trials + z * z / (4 * trials * trials)) / (1 + z * z / trials)
    low = 0.0 if successes <= 0 else max(0.0, centre - half)  # exact at the ends, not 1e-17 off them
    high = 1.0 if successes >= trials else min(1.0, centre + half)
    return Interval(rate, low, high, trials)


@dataclass(frozen=True)
class PairedTest:
    """Two runs over the same cases: the mean of ``b - a`` per case with its interval, and the two-sided p-value
    that the difference is zero (an exact sign-flip permutation test; a seeded Monte Carlo one beyond 2^14
    cases that differ)."""

    difference: Interval
    p_value: float
    pairs: int
    b_better: int   # cases where b scored higher
    a_better: int
    exact: bool

    @property
    def significant(self) -> bool:
        return self.p_value < 1 - CONFIDENCE

    def text(self, a: str = "a", b: str = "b") -> str:
        """One line a person reads: the difference, its interval, the p-value and what it means."""
        if self.pairs == 0:
            return f"{b} vs {a}: no case scored in both"
        verdict = (f"{b if self.difference.estimate > 0 else a} is better" if self.significant
                   else "no significant difference")
        return (f"{b} vs {a}: {self.difference.estimate:+.3f} [{self.difference.low:+.3f}, "
                f"{self.difference.high:+.3f}] over {self.pairs} cases ({self.b_better} up, {self.a_better} down), "
                f"p={self.p_value:.3g}: {verdict}")

    def to_json(self) -> dict[str, object]:
        return {"difference": self.difference.to_json(), "p_value": self.p_value, "pairs": self.pairs,
                "b_better": self.b_better, "a_better": self.a_better, "exact": self.exact,
                "significant": self.significant}


_EXACT_SIGN_FLIPS = 14  # 2^14 = 16,384 sign patterns enumerated exactly; more cases are sampled


def paired_test(a: list[float], b: list[float], *, resamples: int = 20_000) -> PairedTest:
    """Whether ``b`` differs from ``a`` over the cases both scored (``a[i]`` and ``b[i]`` are one case's)."""
    if len(a) != len(b):
        raise ValueError("paired values must come in pairs")
    diffs = [y - x for x, y in zip(a, b)]
    if not diffs:
        return PairedTest(Interval(0.0, 0.0, 0.0, 0), 1.0, 0, 0, 0, True)
    observed = abs(sum(diffs))
    moving = [abs(d) for d in diffs if d != 0]
    exact = len(moving) <= _EXACT_SIGN_FLIPS
    if not moving:
        p_value = 1.0
    elif exact:
        hits = total = 0
        for signs in itertools.product((1, -1), repeat=len(moving)):
            total += 1
            hits += abs(sum(s * d for s, d in zip(signs, moving))) >= observed - 1e-12
        p_value = hits / total
    else:  # the observed pattern counts as one draw, so p is never 0
        rng = random.Random(_SEED)
        hits = sum(abs(sum(d if rng.random() < 0.5 else -d for d in moving)) >= observed - 1e-12
                   for _ in range(resamples))
        p_value = (hits + 1) / (resamples + 1)
    return PairedTest(mean_interval(diffs), p_value, len(diffs), sum(d > 0 for d in diffs),
                      sum(d < 0 for d in diffs), exact)


def holm(p_values: list[float]) -> list[float]:
    """Holm's step-down adjustment of several p-values (in their order): comparing one variant with each of the
    others is several tests, and the chance that one of them is a fluke grows with their number."""
    order = sorted(range(len(p_values)), key=lambda i: p_values[i])
    adjusted = [1.0] * len(p_values)
    running = 0.0
    for rank, index in enumerate(order):
        running = max(running, min(1.0, (len(p_values) - rank) * p_values[index]))
        adjusted[index] = running
    return adjusted


# --- agreement between raters (a judge ensemble) --------------------------------------------------------
#
# Chance-corrected agreement of several raters on categorical answers (docs/model-calls.md, "Judge ensembles"):
# Cohen's kappa for two raters, Fleiss' kappa for three or more. A subject is one thing rated (a dimension of an
# item); an answer is any hashable category (a label, a rating, "pass"). Kappa is None where it is undefined: no
# subject, or a chance agreement of 1 (every answer in one category), where the observed agreement says it all.


def _counts(answers: list[object]) -> dict[object, int]:
    counts: dict[object, int] = {}
    for answer in answers:
        counts[answer] = counts.get(answer, 0) + 1
    return counts


def _pairs_agreeing(answers: list[object]) -> float:
    """The share of a subject's rater pairs that gave the same answer."""
    n = len(answers)
    return sum(c * (c - 1) for c in _counts(answers).values()) / (n * (n - 1))


def _kappa(observed: float, chance: float) -> float | None:
    return None if chance >= 1 - 1e-12 else (observed - chance) / (1 - chance)


def observed_agreement(subjects: list[list[object]]) -> float | None:
    """The share of agreeing rater pairs, averaged over the subjects with two answers or more (for two raters:
    the share of subjects they agree on); None without such a subject."""
    rated = [answers for answers in subjects if len(answers) >= 2]
    return sum(_pairs_agreeing(answers) for answers in rated) / len(rated) if rated else None


def cohen_kappa(pairs: list[tuple[object, object]]) -> float | None:
    """Cohen's kappa of two raters, one ``(first's answer, second's answer)`` per subject: ``(p_o - p_e) / (1 -
    p_e)``, ``p_o`` the share of subjects they agree on, ``p_e`` the agreement their own answer distributions give by
    chance (the sum over categories of ``p_first(k) * p_second(k)``)."""
    if not pairs:
        return None
    n = len(pairs)
    first, second = _counts([a for a, _ in pairs]), _counts([b for _, b in pairs])
    observed = sum(a == b for a, b in pairs) / n
    chance = sum(count * second.get(category, 0) for category, count in first.items()) / (n * n)
    return _kappa(observed, chance)


def fleiss_kappa(subjects: list[list[object]]) -> float | None:
    """Fleiss' kappa of ``m >= 2`` raters, the same number on every subject (one list of answers per subject):
    ``(P - P_e) / (1 - P_e)``, ``P`` the mean over subjects of the share of agreeing rater pairs, ``P_e`` the sum
    over categories of ``p_j ** 2``, ``p_j`` the share of all answers in category ``j``."""
    if not subjects:
        return None
    raters = len(subjects[0])
    if raters < 2 or any(len(answers) != raters for answers in subjects):
        raise ValueError("Fleiss' kappa needs the same number of raters, two or more, on every subject")
    observed = sum(_pairs_agreeing(answers) for answers in subjects) / len(subjects)
    total = raters * len(subjects)
    chance = sum((count / total) ** 2 for count in _counts([a for answers in subjects for a in answers]).values())
    return _kappa(observed, chance)


def kappa(subjects: list[list[object]]) -> tuple[str, float | None]:
    """The kappa the number of raters calls for, and its name: Cohen's for two, Fleiss' for three or more."""
    if subjects and len(subjects[0]) == 2:
        return "Cohen's kappa", cohen_kappa([(answers[0], answers[1]) for answers in subjects])
    return "Fleiss' kappa", fleiss_kappa(subjects)


def mcnemar_p(a_only: int, b_only: int) -> float:
    """Two-sided exact McNemar test over paired verdicts: of the cases where the two disagree, ``a_only`` passed
    only for a, ``b_only`` only for b; under no difference each side is a coin toss."""
    n = a_only + b_only
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, k) for k in range(min(a_only, b_only) + 1)) / 2 ** n
    return min(1.0, 2 * tail)


def bradley_terry(wins: dict[tuple[str, str], float], *, iterations: int = 500,
                  tolerance: float = 1e-10) -> dict[str, float]:
    """Each player's Bradley-Terry strength from ``wins[(i, j)]``, how often i beat j (a tie counts half to each):
    the strengths sum to 1 and i beats j with probability s_i / (s_i + s_j). Hunter's MM iterations; a player that
    never won gets 0, and a small prior of half a win against each opponent keeps the others finite."""
    players = sorted({p for pair in wins for p in pair})
    if not players:
        return {}
    games: dict[tuple[str, str], float] = {}
    won = {p: 0.0 for p in players}
    for (i, j), count in wins.items():
        games[(i, j)] = games.get((i, j), 0.0) + count
        games[(j, i)] = games.get((j, i), 0.0) + count
        won[i] += count
    prior = 0.5 if len(players) > 2 else 0.0
    strength = {p: 1.0 / len(players) for p in players}
    for _ in range(iterations):
        updated = {}
        for i in players:
            opponents = [j for j in players if j != i and games.get((i, j), 0.0) + prior > 0]
            denominator = sum((games.get((i, j), 0.0) + prior) / (strength[i] + strength[j]) for j in opponents)
            updated[i] = (won[i] + prior * len(opponents) / 2) / denominator if denominator else 0.0
        total = sum(updated.values()) or 1.0
        updated = {p: s / total for p, s in updated.items()}
        if max(abs(updated[p] - strength[p]) for p in players) < tolerance:
            return updated
        strength = updated
    return strength
