"""Regular expressions from users (rubric checks), guarded against catastrophic backtracking.

Python's ``re`` backtracks, and a pattern such as ``(a+)+b`` takes exponential time on ``aaaa...c``;
a C loop no thread can interrupt. Two guards:

- at load time, :func:`backtracking_problem` rejects the shapes that backtrack exponentially: a
  quantifier over a group that holds another variable quantifier (``(a+)+``, ``(a*)*``, ``(\\w+\\s?)*``,
  ``(a?){30}``), unless a required part of the group fences each such quantifier in (``(\\w+\\s)*`` and
  ``(-[a-z]+)*`` split a text one way only); and a quantifier over alternatives that can match the same
  text (``(a|a)*``, ``(a|ab)+``). A possessive quantifier (``a++``) or an atomic group (``(?>...)``) gives
  nothing back, so it is accepted inside a repeat;
- at run time, :func:`finditer` runs the pattern in a helper process that is killed after
  :data:`TIMEOUT_S` seconds, so whatever slipped through (``\\d+\\d+x`` is polynomial) stops:
  the check then fails with a one-line error naming the rubric field, never hangs the run.
"""

from __future__ import annotations

import atexit
import json
import re
import selectors
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from typing import Any

try:  # Python 3.11+: the parser behind ``re``
    from re import _constants as _c
    from re import _parser as _sre_parse
except ImportError:  # pragma: no cover - older layouts
    import sre_constants as _c  # type: ignore[no-redef]
    import sre_parse as _sre_parse  # type: ignore[no-redef]

TIMEOUT_S = 2.0  # one check's pattern on one artifact
LARGE_REPEAT = 10  # an outer {n,m} with m above this is treated like * (2**m paths otherwise)
MAX_MATCHES = 10_000  # distinct matches and groups a run reports back (the count stays exact)
_SAMPLE_CHARS = [chr(c) for c in range(0x300)] + ["\u00e9", "\u4e2d", "\u0660", "\u2003", "\U0001f600"]
_REPEATS = (_c.MAX_REPEAT, _c.MIN_REPEAT)
_POSSESSIVE = getattr(_c, "POSSESSIVE_REPEAT", None)  # a++: never gives back what it took
_ATOMIC_GROUP = getattr(_c, "ATOMIC_GROUP", None)  # (?>...): its match is final once made
_ZERO_WIDTH = (_c.AT, _c.ASSERT, _c.ASSERT_NOT)


# --------------------------------------------------------------------------------------------- load time


def backtracking_problem(pattern: str, flags: int = 0) -> str | None:
    """Why ``pattern`` can backtrack exponentially, or None when it has none of the shapes we know."""
    try:
        parsed = _sre_parse.parse(pattern, flags)
    except (re.error, RecursionError):
        return None  # re.compile reports it
    try:
        return _check(list(parsed))
    except RecursionError:
        return "it is nested too deeply to check"


def _children(op: Any, av: Any) -> list[list[Any]]:
    """The sub-sequences of one parsed item."""
    if op in _REPEATS or (_POSSESSIVE is not None and op == _POSSESSIVE):
        return [list(av[2])]
    if _ATOMIC_GROUP is not None and op == _ATOMIC_GROUP:
        return [list(av)]
    if op == _c.SUBPATTERN:
        return [list(av[-1])]
    if op == _c.BRANCH:
        return [list(alt) for alt in av[1]]
    if op in (_c.ASSERT, _c.ASSERT_NOT):
        return [list(av[1])]
    if op == _c.GROUPREF_EXISTS:
        return [list(part) for part in av[1:] if part is not None]
    return []


def _check(items: list[Any]) -> str | None:
    for op, av in items:
        if op in _REPEATS:
            high, body = av[1], list(av[2])
            if high == _c.MAXREPEAT or high > LARGE_REPEAT:
                if _ambiguous_iterations(body):
                    return "a repeated group holds another quantifier (nested quantifiers such as (a+)+)"
                if _has_overlapping_branch(body):
                    return "a repeated group has alternatives that can match the same text (such as (a|ab)*)"
        for child in _children(op, av):
            problem = _check(child)
            if problem:
                return problem
    return None


def _ambiguous_iterations(body: list[Any]) -> bool:
    """A repeated ``body`` with a variable quantifier inside can split a text into iterations in many ways,
    unless every such quantifier is fenced in by a required part of the body that it cannot match
    (``(-[a-z]+)*``, ``(\\w+\\s)*``, ``(a+b+)*`` split one way only)."""
    while len(body) == 1 and body[0][0] == _c.SUBPATTERN:  # (...)* repeats what the group holds
        body = list(body[0][1][-1])
    repeats = _variable_repeats(body)
    if not repeats:
        return False
    required = [(item, _all_chars([item])) for item in body if _required(item)]
    for repeat in repeats:
        chars = _all_chars(list(repeat[1][2]))
        if not any(fence is not repeat and not (fence_chars & chars) for fence, fence_chars in required):
            return True
    return False


def _variable_repeats(items: list[Any]) -> list[Any]:
    found = []
    for item in items:
        op, av = item
        if op in _REPEATS and av[0] != av[1] and _can_match_text(list(av[2])):
            found.append(item)
        if op in (_POSSESSIVE, _ATOMIC_GROUP):
            continue  # gives nothing back: no second way to split the text
        for child in _children(op, av):
            found.extend(_variable_repeats(child))
    return found


def _required(item: Any) -> bool:
    """The item matches at least one character every time (a single character, x+, a group that must)."""
    op, av = item
    if op in _ZERO_WIDTH or op == _c.BRANCH or op == _c.GROUPREF_EXISTS:
        return False
    if op in _REPEATS or op == _POSSESSIVE:
        return av[0] > 0 and not _first(list(av[2]))[1]
    if op in (_c.SUBPATTERN, _ATOMIC_GROUP):
        return not _first(_children(op, av)[0])[1]
    return True


def _all_chars(items: list[Any]) -> frozenset[str]:
    """Every sample character some part of ``items`` can match."""
    found: set[str] = set()
    for op, av in items:
        if op in _ZERO_WIDTH:
            continue
        children = _children(op, av)
        if children:
            for child in children:
                found |= _all_chars(child)
        else:
            found |= {ch for ch in _SAMPLE_CHARS if _matches_char(op, av, ch)}
    return frozenset(found)


def _can_match_text(items: list[Any]) -> bool:
    """False for a body that only ever matches the empty string (anchors, lookarounds)."""
    return any(op not in _ZERO_WIDTH for op, _ in items)


def _has_overlapping_branch(items: list[Any]) -> bool:
    for op, av in items:
        if op == _c.BRANCH:
            alternatives = [list(alt) for alt in av[1]]
            firsts = []
            for alt in alternatives:
                first, nullable = _first(alt)
                if nullable:
                    return True
                firsts.append(first)
            for i, one in enumerate(firsts):
                if any(one & other for other in firsts[i + 1:]):
                    return True
        if op not in (_POSSESSIVE, _ATOMIC_GROUP) and any(
                _has_overlapping_branch(child) for child in _children(op, av)):
            return True
    return False


def _first(items: list[Any]) -> tuple[frozenset[str], bool]:
    """The sample characters a match of ``items`` can start with, and whether it can match nothing."""
    found: set[str] = set()
    for op, av in items:
        if op in _ZERO_WIDTH:
            continue
        if op in _REPEATS or op == _POSSESSIVE:
            first, nullable = _first(list(av[2]))
            found |= first
            if av[0] > 0 and not nullable:
                return frozenset(found), False
            continue
        if op in (_c.SUBPATTERN, _ATOMIC_GROUP, _c.BRANCH):
            nullable_any = False
            for child in _children(op, av):
                first, nullable = _first(child)
                found |= first
                nullable_any = nullable_any or nullable
            if not nullable_any:
                return frozenset(found), False
            continue
        found |= {ch for ch in _SAMPLE_CHARS if _matches_char(op, av, ch)}
        return frozenset(found), False
    return frozenset(found), True


def _matches_char(op: Any, av: Any, ch: str) -> bool:
    """Whether one-character item ``(op, av)`` can match ``ch`` (anything unknown: yes, the safe side)."""
    if op == _c.LITERAL:
        return ord(ch) == av
    if op == _c.NOT_LITERAL:
        return ord(ch) != av
    if op == _c.ANY:
        return True
    if op == _c.CATEGORY:
        return _category(av, ch)
    if op == _c.IN:
        negate = any(item_op == _c.NEGATE for item_op, _ in av)
        hit = False
        for item_op, item_av in av:
            if item_op == _c.LITERAL and ord(ch) == item_av:
                hit = True
            elif item_op == _c.RANGE and item_av[0] <= ord(ch) <= item_av[1]:
                hit = True
            elif item_op == _c.CATEGORY and _category(item_av, ch):
                hit = True
            elif item_op not in (_c.LITERAL, _c.RANGE, _c.CATEGORY, _c.NEGATE):
                hit = True
        return hit != negate
    return True


def _category(code: Any, ch: str) -> bool:
    name = str(code)
    if "DIGIT" in name:
        value = ch.isdecimal()
    elif "SPACE" in name:
        value = ch.isspace()
    elif "WORD" in name:
        value = ch.isalnum() or ch == "_"
    elif "LINEBREAK" in name:
        value = ch == "\n"
    else:
        return True
    return not value if "NOT" in name else value


# --------------------------------------------------------------------------------------------- run time


class RegexTimeout(Exception):
    """A pattern ran longer than :data:`TIMEOUT_S` on a text; the helper that ran it was killed."""


@dataclass(frozen=True)
class Matches:
    """What a run found: how many matches, the distinct whole matches in order (at most ``MAX_MATCHES``),
    and each match's first group (for patterns with one). With a ``pick`` (:func:`finditer`), ``first`` and
    ``last`` are what it picks from the first and the last match (None: no match, or the group took no part)."""

    count: int
    distinct: tuple[str, ...]
    groups: tuple[str | None, ...]
    first: str | None = None
    last: str | None = None


_HELPER = r"""
import json, re, sys
def picked(m, pick):  # as _picked below
    if pick == "":
        return next((g for g in m.groups() if g is not None), None) if m.re.groups else m.group(0)
    return m.group(pick)
for line in sys.stdin:
    request = json.loads(line)
    try:
        rx = re.compile(request["pattern"], request["flags"])
        count, distinct, groups, ends, pick = 0, {}, [], [None, None], request.get("pick")
        for m in rx.finditer(request["text"]):
            count += 1
            if len(distinct) < request["limit"]:
                distinct.setdefault(m.group(0), None)
            if rx.groups and len(groups) < request["limit"]:
                groups.append(m.group(1))
            if pick is not None:
                ends[1] = picked(m, pick)
                if count == 1:
                    ends[0] = ends[1]
        answer = {"count": count, "distinct": list(distinct), "groups": groups, "first": ends[0], "last": ends[1]}
    except Exception as exc:
        answer = {"error": f"{type(exc).__name__}: {exc}"}
    sys.stdout.write(json.dumps(answer) + "\n")
    sys.stdout.flush()
"""


class _Helpers:
    """Idle helper processes, one per thread that needs one at a time; each exits when its stdin closes."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._idle: list[subprocess.Popen[str]] = []

    def take(self) -> subprocess.Popen[str]:
        with self._lock:
            while self._idle:
                proc = self._idle.pop()
                if proc.poll() is None:
                    return proc
        return subprocess.Popen([sys.executable, "-I", "-S", "-c", _HELPER], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, encoding="utf-8",
                                bufsize=1)

    def give(self, proc: subprocess.Popen[str]) -> None:
        with self._lock:
            if len(self._idle) < 8:
                self._idle.append(proc)
                return
        _stop(proc)

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for proc in idle:
            _stop(proc)


def _stop(proc: subprocess.Popen[str]) -> None:
    try:
        proc.kill()
        proc.wait(timeout=5)
    except (OSError, subprocess.TimeoutExpired):
        pass
    for stream in (proc.stdin, proc.stdout):
        try:
            if stream is not None:
                stream.close()
        except OSError:
            pass


_helpers = _Helpers()
atexit.register(_helpers.close)


def finditer(pattern: re.Pattern[str], text: str, *, timeout_s: float | None = None,
             pick: int | str | None = None) -> Matches:
    """Every match of ``pattern`` in ``text``, found in a helper process stopped after ``timeout_s``
    (default :data:`TIMEOUT_S`). Raises :class:`RegexTimeout` when the pattern does not finish in time.

    ``pick`` (a group's number or name, or ``""`` for the first group that took part) fills ``first`` and
    ``last`` of the :class:`Matches`."""
    timeout_s = TIMEOUT_S if timeout_s is None else timeout_s
    request = json.dumps({"pattern": pattern.pattern, "flags": pattern.flags, "text": text,
                          "limit": MAX_MATCHES, "pick": pick}) + "\n"
    try:
        proc = _helpers.take()
    except OSError:  # no processes here: run in this one, unguarded (the load-time check still applies)
        return _in_process(pattern, text, pick)
    try:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(request)
        proc.stdin.flush()
        deadline = time.monotonic() + timeout_s
        with selectors.DefaultSelector() as selector:
            selector.register(proc.stdout, selectors.EVENT_READ)
            while not selector.select(max(0.0, deadline - time.monotonic())):
                if time.monotonic() >= deadline:
                    raise RegexTimeout(f"did not finish within {timeout_s:g} s on a {len(text):,}-character text")
        answer = json.loads(proc.stdout.readline())
    except RegexTimeout:
        _stop(proc)
        raise
    except (OSError, ValueError):  # the helper died or could not be watched: once more, in this process
        _stop(proc)
        return _in_process(pattern, text, pick)
    _helpers.give(proc)
    if "error" in answer:
        return _in_process(pattern, text, pick)
    return Matches(answer["count"], tuple(answer["distinct"]), tuple(answer["groups"]), answer["first"],
                   answer["last"])


def _picked(m: re.Match[str], pick: int | str) -> str | None:
    """What ``pick`` takes from a match (the helper has the same lines): a group by number or name, or for
    ``""`` the first group that took part in the match (the whole match of a pattern without groups)."""
    if pick == "":
        return next((g for g in m.groups() if g is not None), None) if m.re.groups else m.group(0)
    return m.group(pick)


def _in_process(pattern: re.Pattern[str], text: str, pick: int | str | None = None) -> Matches:
    count, distinct, groups, ends = 0, {}, [], [None, None]
    for m in pattern.finditer(text):
        count += 1
        if len(distinct) < MAX_MATCHES:
            distinct.setdefault(m.group(0), None)
        if pattern.groups and len(groups) < MAX_MATCHES:
            groups.append(m.group(1))
        if pick is not None:
            ends[1] = _picked(m, pick)
            ends[0] = ends[1] if count == 1 else ends[0]
    return Matches(count, tuple(distinct), tuple(groups), ends[0], ends[1])
