"""A pytest plugin for budget.py: the thread CPU time spent inside chosen functions, written as JSON at the end.

``BUDGET_PARTS`` names the functions (``module:Qualified.name``, comma-separated); each is wrapped so that the CPU
time of the thread that calls it (``time.thread_time``: user and system, nothing while it waits) is added to its
total. A part is counted once however deeply it recurses; parts nest (the item's run holds the model calls). Two
clock reads a call cost about a microsecond, against the milliseconds a case takes. ``BUDGET_OUT`` is the JSON
file: {part: [seconds, calls]}.
"""

from __future__ import annotations

import importlib
import json
import os
import threading
import time
from collections.abc import Callable
from typing import Any

_totals: dict[str, list[float]] = {}


def _metered(name: str, function: Callable[..., Any]) -> Callable[..., Any]:
    inside = threading.local()
    total = _totals.setdefault(name, [0.0, 0])

    def metered(*args: Any, **kwargs: Any) -> Any:
        if getattr(inside, "depth", 0):
            return function(*args, **kwargs)
        inside.depth = 1
        started = time.thread_time()
        try:
            return function(*args, **kwargs)
        finally:
            total[0] += time.thread_time() - started
            total[1] += 1
            inside.depth = 0

    return metered


def _meter(target: str) -> None:
    module_name, _, qualified = target.partition(":")
    owner: Any = importlib.import_module(module_name)
    *path, attribute = qualified.split(".")
    for step in path:
        owner = getattr(owner, step)
    setattr(owner, attribute, _metered(target, getattr(owner, attribute)))


for _target in filter(None, os.environ.get("BUDGET_PARTS", "").split(",")):
    _meter(_target)


def pytest_unconfigure(config: Any) -> None:
    out = os.environ.get("BUDGET_OUT")
    if out:
        with open(out, "w", encoding="utf-8") as handle:
            json.dump(_totals, handle)
