"""What a session says about its Message Batches: the batches of an earlier run it finds when it starts (recorded in
``WORK/batches.db``, :mod:`harness.llm.batch_journal`), and when it ends what the batcher said (a batch resumed,
expired, no longer known, left running), the answers it took from earlier runs' batches and, with
``--harness-batch-submit``, how to take the answers of the batches it submitted.
"""

from __future__ import annotations

import shlex
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from harness.base.errors import HarnessError
from harness.face.report_text import duration
from harness.face.session import SESSION_KEY
from harness.llm.batch_journal import JOURNAL_FILE, BatchJournal

SUBMIT_FLAG = "--harness-batch-submit"


def _batches(n: int) -> str:
    return f"{n} Message Batch{'es' * (n != 1)}"


def _count(n: int, noun: str) -> str:
    return f"{n:,} {noun}{'s' * (n != 1)}"


def _ids(ids: list[str], shown: int = 3) -> str:
    return ", ".join(ids[:shown]) + (f" and {len(ids) - shown} more" if len(ids) > shown else "")


def pending_lines(work_dir: Path, *, batch: bool) -> list[str]:
    """The session's first line when the journal holds batches of an earlier run (none when it holds nothing)."""
    path = work_dir / JOURNAL_FILE
    if not path.is_file():
        return []
    journal = BatchJournal(path)
    try:
        pending = journal.pending()
    except HarnessError as err:
        return [f"harness: {err}"]
    finally:
        journal.close()
    if not pending:
        return []
    requests = sum(b.requests for b in pending)
    age = duration(max(0.0, time.time() - min(b.submitted_at for b in pending)))
    head = (f"harness: {_batches(len(pending))} of an earlier run hold{'s' * (len(pending) == 1)} "
            f"{_count(requests, 'request')} "
            f"({_ids([b.batch_id for b in pending])}; submitted {age} ago, recorded in {path})")
    they, hold, them = ("it", "holds", "it") if len(pending) == 1 else ("they", "hold", "them")
    if batch:
        return [f"{head}: the requests {they} {hold} are taken from {them}, not submitted again"]
    return [f"{head}: run with --harness-batch to take their answers (without it, those requests are sent again, "
            "at full price)"]


def summary_lines(config: Any) -> list[str]:
    """The batcher's notices, the answers taken from earlier runs' batches, and with ``--harness-batch-submit`` how to
    take the answers (nothing when the session made no batched call)."""
    session = config.stash.get(SESSION_KEY, None)
    batcher = session.batcher if session is not None else None
    if batcher is None:
        return []
    args: Sequence[str] = config.invocation_params.args
    lines = [f"harness: {notice}" for notice in batcher.notices]
    if batcher.resumed:
        lines.append(f"harness: {_count(batcher.resumed, 'answer')} taken from Message Batches of earlier runs: "
                     "not submitted, not paid for again")
    if batcher.submit_only and batcher.submitted:
        ids = [batch_id for batch_id, _ in batcher.submitted]
        requests = sum(size for _, size in batcher.submitted)
        again = "pytest " + shlex.join("--harness-batch" if arg == SUBMIT_FLAG else arg for arg in args)
        lines.append(f"harness: submitted {_count(requests, 'request')} in {_batches(len(ids))} ({_ids(ids)}) without "
                     f"waiting, recorded in {batcher.journal.path}; to take their answers run: {again} (a batch ends "
                     "within 24 hours, most within one)")
    return lines
