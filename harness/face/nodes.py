"""pytest's File and Item for every kind of item (harness.evaluation.items): one of each, whatever the kind.

A :class:`KindFile` is a file a kind claimed; its ``collect`` asks the kind for the file's items (a mistake is a
one-line collection error). A :class:`KindItem` runs its item through the kind (in the session's pool when the
scheduler started it), writes its result as ``user_properties`` through the one codec, and turns it into
pytest's outcome: passed, failed with a readable table, skipped (not run, not scored) or xfailed (escalated,
where the agent's policy says an escalation does not fail the gate).
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from concurrent.futures import CancelledError
from pathlib import Path
from typing import Any

import pytest

from harness.base.errors import ExitCode, HarnessConfigError, HarnessError
from harness.base.events import item_span
from harness.base.stop import StopRequested
from harness.evaluation.items import ItemFailed, ItemKind, ItemResult, ItemSkipped, ItemSpec
from harness.evaluation.steps import LoopResult
from harness.face.report_text import ProgressLine, failure_table
from harness.face.session import harness_session

# An attempt cut short because the session stopped (-x, Ctrl-C, the cost cap): not a verdict.
STOPPED_EXIT_CODES = (int(ExitCode.INCOMPLETE), int(ExitCode.QUOTA_EXCEEDED))


class LoopFailed(Exception):
    """An item's loop did not pass; ``repr_failure`` turns it into a dimension table."""

    def __init__(self, result: LoopResult):
        super().__init__(result.outcome)
        self.result = result


class BrokenFile(pytest.File):
    """A file met while the kinds in effect could not be made (a conftest's kind that cannot be used): its
    collection is that one line."""

    def __init__(self, *, problem: str, **kwargs: Any):
        super().__init__(**kwargs)
        self.problem = problem

    def collect(self) -> Iterator[pytest.Item]:
        raise self.CollectError(self.problem)


class KindFile(pytest.File):
    """A file an item kind claimed: its items, as the kind reads them."""

    def __init__(self, *, kind: ItemKind, **kwargs: Any):
        super().__init__(**kwargs)
        self.kind = kind

    def collect(self) -> Iterator[pytest.Item]:
        hs = harness_session(self.config)
        try:
            specs = list(self.kind.collect(self.path, hs))
        except HarnessConfigError as exc:
            raise self.CollectError(exc.message(self.config.rootpath)) from None
        except HarnessError as exc:  # e.g. a plugin's model provider that cannot be set up: one line too
            raise self.CollectError(str(exc)) from None
        for spec in specs:
            yield KindItem.from_parent(self, name=spec.name, spec=spec, kind=self.kind)


@functools.cache
def item_mark() -> pytest.MarkDecorator:
    """The mark of every item of ours, made once: a new one per item costs 2 us and 0.25 KB (24 MB a 100,000
    rows)."""
    return pytest.mark.harness_case


class KindItem(pytest.Item):
    """One item of a kind."""

    def __init__(self, *, spec: ItemSpec, kind: ItemKind, **kwargs: Any):
        super().__init__(**kwargs)
        self.spec, self.kind = spec, kind
        self.add_marker(item_mark())

    def reportinfo(self) -> tuple[Path, int | None, str]:
        return self.path, self.spec.line, self.spec.label

    def run_item(self) -> LoopResult | ItemResult | None:
        """Run this item through its kind; may run on a worker thread (see harness.face.scheduler). Every event
        it causes, model calls included, carries its node id (``Event.span``)."""
        with item_span(self.nodeid):
            return self.kind.run(self.spec, self.nodeid, harness_session(self.config))

    def runtest(self) -> None:
        hs = harness_session(self.config)
        try:
            if hs.scheduler is not None and hs.scheduler.has(self.nodeid):
                progress = ProgressLine.of(self.config, hs, self.nodeid)
                try:
                    result = hs.scheduler.wait(self.nodeid, on_tick=progress.tick if progress else None,
                                               tick_s=min(1.0, hs.progress_interval_s) if progress else 1.0)
                finally:
                    if progress is not None:
                        progress.clear()
            else:
                result = self.run_item()
        except (StopRequested, CancelledError):
            self.user_properties.append(ItemResult.not_run_property(hs.stop.cause or "stop"))
            raise pytest.skip.Exception(f"not run: {hs.stop.reason or 'the session is stopping'}",
                                        _use_item_location=True) from None
        except ItemSkipped as exc:
            raise pytest.skip.Exception(str(exc), _use_item_location=True) from None
        except ItemFailed as exc:
            if exc.result is not None:
                self.user_properties.extend(exc.result.properties())
            raise
        if result is None:  # a kind that checks without recording: it passed
            return
        if isinstance(result, ItemResult):  # a kind that checks and reports what it found
            self.user_properties.extend(result.properties())
            return
        spec = self.spec
        self.user_properties.extend(ItemResult.of_run(
            result, kind=self.kind.name, agent=spec.agent, case=spec.case, variant=spec.variant,
            rubric=spec.rubrics[0] if spec.rubrics else None, threshold=spec.threshold,
            cycle=hs.cycle_id).properties())
        if result.outcome == "passed":
            return
        if result.exit_code in STOPPED_EXIT_CODES and hs.stop.is_set():
            self.user_properties.append(ItemResult.not_run_property(hs.stop.cause or "stop"))
            raise pytest.skip.Exception(f"not run: {hs.stop.reason} (attempt {result.final_attempt} was cut short)",
                                        _use_item_location=True)
        if result.outcome == "indeterminate" and hs.indeterminate == "skip":
            raise pytest.skip.Exception(result.escalation_reason or "not scored (indeterminate)",
                                        _use_item_location=True)
        if result.outcome == "escalated" and not spec.escalation_fails_gate:
            pytest.xfail(f"escalated: {result.escalation_reason}")
        raise LoopFailed(result)

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style=None) -> str:  # noqa: ANN001
        """Our own failures are readable text, never a traceback."""
        error = excinfo.value
        if isinstance(error, LoopFailed):
            return failure_table(error.result, self.spec.agent or self.name, self.spec.case or self.name,
                                 self.spec.threshold or 0.0, self.spec.variant)
        if isinstance(error, HarnessConfigError):
            return error.message(self.config.rootpath)
        if isinstance(error, (ItemFailed, HarnessError)):
            return str(error)
        return super().repr_failure(excinfo, style)
