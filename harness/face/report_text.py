"""Plain-text reports for the terminal: the failure table of one item and the session summary."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shutil
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from harness.base.usage import shown_cost
from harness.evaluation.comparison import GridEntry, PairwiseTable, pair_entry, pairwise_tables, variant_grids
from harness.evaluation.ensemble import agreement_lines
from harness.evaluation.items.result import ItemResult, item_title
from harness.evaluation.judge_program import PROGRAM_MARK
from harness.evaluation.steps import LoopResult
from harness.llm.prompt_cache import shortfall_line

REASON_WIDTH = 90
PROGRAM_LINES = 40  # the lines of a judge program's steps a failure report shows

#: pytest's words, in the order of its summary line, and how each counts in a pass rate (None: left out)
VERDICTS = ("failed", "passed", "skipped", "xfailed", "xpassed")
VERDICT_PASSED = {"passed": 1.0, "xpassed": 1.0, "failed": 0.0, "xfailed": 0.0, "skipped": None}


def default_verdict(outcome: str) -> str:
    """pytest's word for an outcome under the default options (docs: README "Thresholds and outcomes")."""
    if outcome == "passed":
        return "passed"
    if outcome in ("indeterminate", "running", "interrupted"):
        return "skipped"
    return "failed"


def _score(value: float | None) -> str:
    return "  -  " if value is None else f"{value:.2f}"


def failure_table(result: LoopResult, agent: str, case: str, threshold: float, variant: str | None = None) -> str:
    """Why an item did not pass: each dimension (score, weight, reason), the fixes, the artifacts."""
    attempts = f"{result.final_attempt} attempt{'s' * (result.final_attempt != 1)}"
    score = result.final_score
    gates = result.last_evaluation.failed_gates if result.last_evaluation is not None else []
    below = f"below min_score ({', '.join(gates)})" if gates else f"overall {_score(score)} < threshold {threshold:.2f}"
    headline = {
        "failed": f"FAILED after {attempts}: {below}",
        "escalated": f"ESCALATED after {attempts}: {result.escalation_reason}",
        "indeterminate": f"NOT SCORED (indeterminate) after {attempts}: {result.escalation_reason}",
        "error": f"ERROR on attempt {result.final_attempt}: {result.escalation_reason}",
        "validation_failed": f"VALIDATION FAILED on attempt {result.final_attempt}: {result.escalation_reason}",
    }.get(result.outcome, result.outcome)
    headline, _, trace = headline.partition("\n")  # an agent's crash: its own frames follow the line
    lines = [f"{item_title(agent, case, variant)} {headline}", *([trace] if trace else [])]
    evaluation = result.last_evaluation
    if evaluation is not None:
        width = max(len("dimension"), *(len(n) for n in evaluation.dimensions))
        lines.append(f"  {'dimension':<{width}}  score  weight  reason")
        for name, dim in evaluation.dimensions.items():
            reason = dim.reason if len(dim.reason) <= REASON_WIDTH else dim.reason[: REASON_WIDTH - 3] + "..."
            lines.append(f"  {name:<{width}}  {_score(dim.score):>5}  {dim.weight:>6.2f}  {reason}")
        low, high = evaluation.bounds
        overall = _score(low) if low == high else f"{low:.2f}..{high:.2f}"
        lines.append(f"  {'overall':<{width}}  {overall:>5}          threshold {threshold:.2f} "
                     "(recomputed from the rubric's weights)")
        steps = (evaluation.reasoning or "").splitlines()
        if steps and steps[0].startswith(PROGRAM_MARK):  # a judge program's every step: its answer and why
            lines += [f"  {line}" for line in steps[:PROGRAM_LINES]]
            if len(steps) > PROGRAM_LINES:
                lines.append(f"  ... {len(steps) - PROGRAM_LINES} more lines in the attempt's eval.json")
        if evaluation.suggested_fixes:
            lines.append("  suggested fixes:")
            lines.extend(f"    - {fix}" for fix in evaluation.suggested_fixes)
    lines.append("  artifacts:")
    for attempt in result.attempts:
        run = attempt.record
        where = run.artifact_path or "none (the attempt made no artifact)"
        lines.append(f"    attempt {run.attempt} ({attempt.outcome}, {_score(run.overall_score).strip()}): {where}")
    return "\n".join(lines)


@dataclass
class RubricTally:
    items: int = 0
    passed: int = 0
    scored: int = 0
    indeterminate: int = 0
    escalated: int = 0
    errors: int = 0
    invalid: int = 0  # validation_failed: an output that did not match its schema or checks (84)
    scores: list[float] = field(default_factory=list)
    attempts: list[int] = field(default_factory=list)
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    unstable: list[str] = field(default_factory=list)
    spreads: list[float] = field(default_factory=list)
    cached_answers: int = 0
    unscored_because: Counter[str] = field(default_factory=Counter)  # why items were not scored, how often
    no_score: Counter[str] = field(default_factory=Counter)  # why items that ran have no score, how often
    cost_complete: bool = True  # no item called a model without a price
    # per dimension with a scale or choices: how often the judge gave each rating or label
    answers: dict[str, Counter[str | int]] = field(default_factory=dict)
    judge_agreement: list[dict[str, Any]] = field(default_factory=list)  # judge ensembles' votes, per item

    def add(self, result: ItemResult, nodeid: str = "", word: str = "") -> None:
        """One item; ``word`` is pytest's verdict on it (passed, failed, skipped, xfailed, xpassed)."""
        outcome = result.outcome
        self.items += 1
        self.passed += word in ("passed", "xpassed")
        self.indeterminate += outcome == "indeterminate"
        self.escalated += outcome == "escalated"
        self.errors += outcome == "error"
        self.invalid += outcome == "validation_failed"
        if word != "skipped":  # the pass rate divides by the items pytest passed or failed, as it counts them
            self.scored += 1
        if result.score is not None:
            self.scores.append(result.score)
        else:
            self.no_score[result.no_score or "no score"] += 1
        self.cost_complete = self.cost_complete and result.cost_known
        self.attempts.append(result.attempts)
        self.input_tokens += result.input_tokens
        self.output_tokens += result.output_tokens
        self.cost_usd += result.cost_usd
        self.cached_answers += result.cached_answers
        if outcome == "indeterminate" and result.unscored:
            self.unscored_because[result.unscored.removeprefix("not scored (indeterminate): ")] += 1
        if result.spread is not None:
            self.spreads.append(result.spread)
        if result.unstable:
            self.unstable.append(nodeid)
        for dim_id, given in result.answers().items():
            self.answers.setdefault(dim_id, Counter())[given] += 1
        if result.judge_agreement:
            self.judge_agreement.append(result.judge_agreement)


def tally(results: Iterable[tuple[str, ItemResult | None, str]]) -> dict[str, RubricTally]:
    """Per rubric totals from ``(nodeid, the item's result, pytest's word)``."""
    tallies: dict[str, RubricTally] = {}
    for nodeid, result, word in results:
        if result is not None and result.rubric:  # an item scored by a rubric (a goal's checks are not)
            tallies.setdefault(result.rubric, RubricTally()).add(result, nodeid, word)
    return dict(sorted(tallies.items()))


def _row(name: str, t: RubricTally) -> tuple[str, ...]:
    rate = f"{t.passed / t.scored:.0%} of {t.scored}" if t.scored else "-"
    attempts = f"{sum(t.attempts) / len(t.attempts):.1f}" if t.attempts else "-"
    return (name, str(t.items), str(t.passed), rate, mean_over(t.scores, t.items), attempts,
            f"{t.input_tokens}/{t.output_tokens}", shown_cost(t.cost_usd, t.cost_complete))


def mean_over(scores: list[float], items: int) -> str:
    """A mean score that says what it divides by when some items have none: ``0.820 (18/20)``."""
    if not scores:
        return "-"
    mean = f"{sum(scores) / len(scores):.3f}"
    return mean if len(scores) == items else f"{mean} ({len(scores)}/{items})"


def summary_lines(tallies: dict[str, RubricTally]) -> list[str]:
    header = ("rubric", "items", "passed", "pass rate", "mean score", "mean attempts", "tokens in/out", "cost")
    rows = [_row(name, t) for name, t in tallies.items()]
    if len(tallies) > 1:
        total = RubricTally()
        for t in tallies.values():
            for key in ("items", "passed", "scored", "input_tokens", "output_tokens", "cost_usd"):
                setattr(total, key, getattr(total, key) + getattr(t, key))
            total.scores += t.scores
            total.cost_complete = total.cost_complete and t.cost_complete
            total.attempts += t.attempts
        rows.append(_row("total", total))
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    lines = ["  ".join(h.ljust(w) if i == 0 else h.rjust(w) for i, (h, w) in enumerate(zip(header, widths)))]
    lines += ["  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths)))
              for r in rows]
    notes = []
    for name, t in tallies.items():
        if t.indeterminate:  # why, in the words of the cause: a missing key names its provider's own variable
            because = t.unscored_because.most_common()
            why = f": {because[0][0]}" if because else ""
            others = len(because) - 1
            notes.append(f"{name}: {t.indeterminate} not scored (indeterminate){why}"
                         + (f" (and {others} other reason{'s' * (others != 1)}: see the items)" if others > 0 else ""))
        if t.no_score and t.scores:
            why = ", ".join(f"{n} {reason}" for reason, n in t.no_score.most_common())
            notes.append(f"{name}: mean score over {len(t.scores)} of {t.items} items; the others have none ({why})")
        if t.escalated:
            notes.append(f"{name}: {t.escalated} escalated to a human")
        if t.errors:
            notes.append(f"{name}: {t.errors} ended in an error (model or agent failure)")
        if t.invalid:
            notes.append(f"{name}: {t.invalid} failed validation (an output did not match its schema or its checks: "
                         "exit code 84)")
        if t.cached_answers:
            notes.append(f"{name}: {t.cached_answers} model answer{'s' * (t.cached_answers != 1)} from the response "
                         "cache (replayed, not called: no tokens, $0)")
        if t.spreads:
            notes.append(f"{name}: judge samples spread (max - min of the overall score): mean "
                         f"{sum(t.spreads) / len(t.spreads):.3f}, worst {max(t.spreads):.3f}")
        if t.unstable:
            notes.append(f"{name}: unstable verdicts (samples on both sides of the threshold): "
                         + ", ".join(t.unstable))
        for dim_id, counts in t.answers.items():
            shown = ", ".join(f"{answer} x{n}" for answer, n in sorted(counts.items(), key=lambda kv: str(kv[0])))
            notes.append(f"{name}: {dim_id} answered {shown} (the judge's own labels or ratings, last attempts)")
    return lines + notes + agreement_lines(a for t in tallies.values() for a in t.judge_agreement)


class ProgressLine:
    """Progress while the main thread waits for an item, through pytest's terminal reporter with pytest's capture
    suspended: the item waited for is in its call phase, whose output pytest captures (a line written plainly there
    would be swallowed, as pytest's live logging avoids).

    On a terminal the progress is one status at the end of the current line, rewritten each tick and erased before
    pytest writes the item's result (:meth:`clear`), so nothing of it stays behind. Elsewhere (CI logs, pipes) it is a
    plain line every ``harness_progress_interval``."""

    def __init__(self, config: Any, hs: Any, nodeid: str):
        self.config, self.hs, self.nodeid = config, hs, nodeid
        self.reporter = config.pluginmanager.get_plugin("terminalreporter")
        self.capture = config.pluginmanager.get_plugin("capturemanager")
        self.in_place = bool(getattr(self.reporter, "isatty", False)) and os.environ.get("TERM") != "dumb"
        self.status = ""  # the status now on the terminal

    @classmethod
    def of(cls, config: Any, hs: Any, nodeid: str) -> ProgressLine | None:
        """The progress of this wait; None when progress is off (interval 0) or there is no terminal reporter."""
        if hs.progress_interval_s <= 0 or config.pluginmanager.get_plugin("terminalreporter") is None:
            return None
        return cls(config, hs, nodeid)

    def _uncaptured(self) -> Any:
        return self.capture.global_and_fixture_disabled() if self.capture is not None else contextlib.nullcontext()

    def tick(self) -> None:
        if self.in_place:
            with self._uncaptured():
                self._rewrite(self.hs.progress_brief())
            return
        now = time.monotonic()
        if now - self.hs.last_progress < self.hs.progress_interval_s:
            return
        self.hs.last_progress = now
        with self._uncaptured():
            self.reporter.write_line(self.hs.progress_text())
            # the item waited for gets its place again: its file (and its result after it), as after a live log
            self.reporter.currentfspath = None
            if self.reporter.verbosity <= 0:
                self.reporter.write_fspath_result(self.nodeid, "")

    def clear(self) -> None:
        """Erase the status written in place, leaving the line as pytest left it."""
        if self.status:
            with self._uncaptured():
                self._rewrite("")

    def _rewrite(self, status: str) -> None:
        # Written to the reporter's stream, not through it: the terminal writer measures the line it is on to
        # align pytest's percentage, and the status must not count. Backspaces, not escape codes, and ASCII: any terminal.
        writer = getattr(self.reporter, "_tw", None)
        stream = getattr(writer, "_file", None) or sys.stdout
        room = shutil.get_terminal_size().columns - getattr(writer, "width_of_current_line", 0) - 3
        status = f"  {status}" if status and room >= 20 else ""
        if len(status) > room:
            status = status[:room - 3] + "..."
        if status == self.status:
            return
        shown = len(self.status)
        stream.write("\b" * shown + status + " " * max(0, shown - len(status)) + "\b" * max(0, shown - len(status)))
        stream.flush()
        self.status = status


class WorkersProgress:
    """pytest-xdist's controller: a plain progress line every interval, from the reports the workers send (a
    worker's own lines never reach the terminal). Registered as a plugin of the controller's session."""

    def __init__(self, config: Any, interval_s: float):
        self.config, self.interval_s = config, interval_s
        self.total = 0
        self.done: set[str] = set()
        self.harness_items = 0
        self.cost_usd = 0.0
        self.cost_complete = True
        self.started = self.last = time.monotonic()

    def pytest_xdist_node_collection_finished(self, node: Any, ids: list[str]) -> None:
        self.total = max(self.total, len(ids))  # every worker collects the whole session

    def pytest_runtest_logreport(self, report: Any) -> None:
        if report.nodeid in self.done or not (report.when == "call" or (report.when == "setup" and not report.passed)):
            return
        self.done.add(report.nodeid)
        result = ItemResult.read(getattr(report, "user_properties", ()) or ())
        if result is not None:
            self.harness_items += 1
            self.cost_usd += result.cost_usd
            self.cost_complete = self.cost_complete and result.cost_known
        now = time.monotonic()
        if now - self.last < self.interval_s or not self.harness_items:  # a session of plain tests: pytest's own
            return
        self.last = now
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            if getattr(getattr(reporter, "_tw", None), "width_of_current_line", 0):
                reporter.write("\n")  # after the workers' result letters: a line of its own
            reporter.write_line(self.text(now))

    def text(self, now: float) -> str:
        total, done = self.total, len(self.done)
        line = f"harness: {done}/{total} items done, {shown_cost(self.cost_usd, self.cost_complete)} spent"
        if done and total > done:
            line += f", about {duration((now - self.started) / done * (total - done))} left"
        return line


def duration(seconds: float) -> str:
    """``45 s``, ``3 min``, ``1 h 20 min``: how long, as a progress line says it."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    minutes = round(seconds / 60)
    return f"{minutes} min" if minutes < 60 else f"{minutes // 60} h {minutes % 60} min"


def not_run_by_cost_cap(reporter: Any) -> int:
    """How many items the cost cap left not run, xdist workers' included, from the terminal reporter's statistics."""
    return sum(ItemResult.read_not_run(getattr(report, "user_properties", ()) or ()) == "cost_cap"
               for report in getattr(reporter, "stats", {}).get("skipped", []))


def failed_exit_codes(reporter: Any) -> list[int]:
    """The exit code of every failed item, xdist workers' included: its result's, else 1 (a plain test, or a
    failure outside the loop)."""
    codes = []
    for report in getattr(reporter, "stats", {}).get("failed", []) + getattr(reporter, "stats", {}).get("error", []):
        result = ItemResult.read(getattr(report, "user_properties", ()) or ())
        code = result.exit_code if result is not None else None
        codes.append(code if code else 1)
    return codes


def result_of(report: Any) -> ItemResult | None:
    """The item's result on its report; an item a gate failed after its loop passed (``--harness-compare``)
    reads as failed."""
    result = ItemResult.read(getattr(report, "user_properties", ()) or ())
    if result is not None and result.outcome == "passed" and getattr(report, "failed", False):
        result = dataclasses.replace(result, outcome="failed")
    return result


def verdict_word(report: Any) -> str:
    """passed, failed, skipped, xfailed or xpassed: the words of pytest's own summary line."""
    if hasattr(report, "wasxfail"):
        return "xpassed" if report.passed else "xfailed"
    return report.outcome


def unpriced_models(results: Iterable[ItemResult]) -> list[str]:
    """The models whose cost is unknown (no price)."""
    return sorted({model for result in results for model in result.unpriced_models})


def cascade_lines(results: Iterable[ItemResult]) -> list[str]:
    """Per judge cascade (first judge, named judge): how many items its first judge decided and how many went on to
    the named judge (harness.evaluation.cascade)."""
    counts: dict[tuple[str, str], list[int]] = {}
    for result in results:
        if result.cascade:
            seen = counts.setdefault((str(result.cascade.get("first")), str(result.cascade.get("named"))), [0, 0])
            seen[bool(result.cascade.get("escalated"))] += 1
    return [f"judge cascade: {kept + sent} item{'s' * (kept + sent != 1)} judged first by {first}: {kept} decided "
            f"by it, {sent} ({sent / (kept + sent):.0%}) escalated to {named} (uncertain answers)"
            for (first, named), (kept, sent) in sorted(counts.items())]


def prefix_lines(rows: Iterable[dict[str, Any]]) -> list[str]:
    """One line per (rubric, model) whose judge's cached prefix is too short for the model to cache."""
    merged: dict[tuple[str, str], dict[str, Any]] = {}
    for row in rows:  # the same rubric and model from several workers: one line, its shortest prefix
        known = merged.setdefault((row["rubric"], row["model"]), {**row, "agents": []})
        known["tokens"] = min(known["tokens"], row["tokens"])
        known["agents"] = sorted({*known["agents"], *row["agents"]})
    return [shortfall_line(rubric, model, row["tokens"], row["minimum"], row["agents"])
            for (rubric, model), row in sorted(merged.items())]


def unconfined_line(results: Iterable[ItemResult]) -> str | None:
    """The one line naming the commands that ran without the sandbox (ini harness_unconfined), with their items."""
    items: dict[str, int] = {}
    for result in results:
        for name in result.unconfined:
            items[name] = items.get(name, 0) + 1
    if not items:
        return None
    named = ", ".join(f"{name} ({n} item{'s' * (n != 1)})" for name, n in sorted(items.items()))
    return f"ran without the sandbox (ini harness_unconfined): {named}"


def _grid_entries(results: Iterable[tuple[str, ItemResult | None, str]]) -> list[GridEntry]:
    """The items of agents with variants, as the variant grid reads them, from ``(nodeid, result, pytest's word)``."""
    return [GridEntry(agent=result.agent or "", rubric=result.rubric, variant=result.variant, case=result.case or nodeid,
                      score=result.score, passed=None if (p := VERDICT_PASSED.get(word)) is None else bool(p),
                      cost_usd=result.cost_usd, cost_known=result.cost_known, no_score=result.no_score)
            for nodeid, result, word in results if result is not None and result.variant]


def variant_lines(results: Iterable[tuple[str, ItemResult | None, str]]) -> list[str]:
    """Per agent with variants, from ``(nodeid, result, pytest's word)``: each variant's pass rate and mean score with
    their 95% intervals and its cost, and each variant against the best, case by case."""
    lines: list[str] = []
    for grid in variant_grids(_grid_entries(results)):
        lines.append(f"{grid.agent}: {len(grid.variants)} variants x {len(grid.cases)} cases"
                     + (f", scored by {grid.rubric}" if grid.rubric else ""))
        header = ("variant", "items", "passed", "pass rate [95% CI]", "mean score [95% CI]", "cost")
        rows = []
        for name, column in grid.variants.items():
            rate, mean = column.pass_rate, column.mean
            decided = len(column.decided)
            rows.append((name, str(len(column.cells)), str(column.passed),
                         f"{rate.percent()} of {decided}" if rate is not None else "-",
                         (mean.text() + (f" ({mean.n}/{len(column.cells)})" if mean.n < len(column.cells) else ""))
                         if mean is not None else "-", column.cost))
        widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
        for row in [header, *rows]:
            lines.append("  " + "  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                                          for i, (c, w) in enumerate(zip(row, widths))))
        comparisons = grid.comparisons()
        if comparisons:
            lines.append(f"  each against the best ({comparisons[0].best}), case by case: scores over the cases both "
                         "scored, verdicts over the cases both decided"
                         + (" (p-values Holm-adjusted for the comparisons)" if len(comparisons) > 1 else "") + ":")
            lines += [f"    {comparison.text()}" for comparison in comparisons]
    return lines


def pairwise_lines(results: Iterable[tuple[str, ItemResult | None, str]]) -> list[str]:
    """Per pairwise comparison: each pair's wins, ties (and how many were the two orders disagreeing), the first
    side's win rate with its 95% interval, and with three sides or more their Bradley-Terry ranking."""
    entries = [entry for _, result, _ in results if result is not None
               for entry in [pair_entry(result.agent, result.variant, result.case, result.dimensions)] if entry]
    lines: list[str] = []
    for table in pairwise_tables(entries):
        lines.append(f"{table.comparison}: pairwise over {len(table.cases)} cases, each judged in both orders")
        lines += ["  " + line for line in pair_rows(table)]
        ranking = table.ranking()
        if ranking:
            lines.append("  Bradley-Terry ranking (strengths: A beats B with chance A / (A + B)): " + ", ".join(
                f"{n}. {side} {strength:.0%}" for n, (side, strength) in enumerate(ranking, 1)))
    return lines


def pair_rows(table: PairwiseTable) -> list[str]:
    """The table of a comparison's pairs, aligned."""
    header = ("pair", "first wins", "second wins", "ties (orders disagreed)", "first's win rate [95% CI]", "p")
    rows = []
    for pair, t in table.pairs.items():
        rate = t.win_rate
        rows.append((pair, str(t.a_wins), str(t.b_wins), f"{t.ties} ({t.inconsistent})",
                     f"{rate.percent()} of {t.judged}" if rate is not None else "-", f"{t.p_value:.3g}"))
        if t.unjudged:
            rows[-1] = (*rows[-1][:-1], rows[-1][-1] + f"  ({t.unjudged} not judged)")
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    return ["  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths)))
            for row in [header, *rows]]
