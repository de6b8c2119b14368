"""The statistics of comparisons: intervals a person can quote and a paired test that says what it can."""

from __future__ import annotations

import random

import pytest

from harness.base.stats import mean_interval, paired_test, wilson_interval


def test_a_mean_interval_holds_the_mean_narrows_with_more_cases_and_is_the_same_every_run() -> None:
    rng = random.Random(7)
    few = [rng.uniform(0.5, 1.0) for _ in range(10)]
    many = [rng.uniform(0.5, 1.0) for _ in range(200)]
    small, large = mean_interval(few), mean_interval(many)
    assert small.low < small.estimate < small.high
    assert large.high - large.low < small.high - small.low
    assert mean_interval(few) == small  # seeded: the report does not change between two reads
    assert mean_interval([0.7]).text() == "0.700"  # one value makes no interval, and does not pretend to
    assert mean_interval([1.0, 1.0, 1.0]).to_json() == {"estimate": 1.0, "low": 1.0, "high": 1.0, "n": 3}


def test_a_rate_of_five_out_of_five_is_not_certain() -> None:
    perfect = wilson_interval(5, 5)
    assert perfect.estimate == 1.0 and perfect.high == 1.0 and 0.5 < perfect.low < 0.6
    none = wilson_interval(0, 20)
    assert none.low == 0.0 and 0.1 < none.high < 0.2
    half = wilson_interval(2.5, 5)  # ties counted as half a win
    assert half.estimate == 0.5 and half.low == pytest.approx(1 - half.high)


def test_the_paired_test_is_exact_for_few_cases() -> None:
    # six cases, each 0.1 better: only "all up" and "all down" are as extreme, 2 of 64 sign patterns
    test = paired_test([0.5] * 6, [0.6] * 6)
    assert test.exact and test.p_value == pytest.approx(2 / 64) and test.significant
    assert (test.pairs, test.b_better, test.a_better) == (6, 6, 0)
    assert test.difference.estimate == pytest.approx(0.1)
    five = paired_test([0.5] * 5, [0.6] * 5)  # 2 of 32: five cases cannot reach 0.05 this way
    assert five.p_value == pytest.approx(2 / 32) and not five.significant
    assert "no significant difference" in five.text("A", "B")


def test_the_paired_test_finds_a_shift_among_many_noisy_cases_and_none_where_there_is_none() -> None:
    rng = random.Random(3)
    a = [rng.uniform(0.3, 0.9) for _ in range(50)]
    shifted = [x + 0.08 + rng.gauss(0, 0.05) for x in a]
    noise = [x + rng.gauss(0, 0.05) for x in a]
    found = paired_test(a, shifted)
    assert not found.exact and found.p_value < 0.001 and found.difference.low > 0
    assert "B is better" in found.text("A", "B")
    assert paired_test(a, noise).p_value > 0.05
    assert paired_test(a, a).p_value == 1.0 and paired_test([], []).pairs == 0
    with pytest.raises(ValueError):
        paired_test([0.1], [0.1, 0.2])
