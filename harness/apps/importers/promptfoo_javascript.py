"""promptfoo's ``javascript`` asserts: none runs here, and each becomes one ``not carried over:`` line that names the
nearest check, read from the shape of the expression (``output.includes('x')`` is a ``contains`` check,
``output.length < 100`` a ``length`` check, ``/x/.test(output)`` a ``regex`` check); an expression of no shape we
know points at a ``python:`` check."""

from __future__ import annotations

import json
import re

_QUOTED = r"""(?:'((?:[^'\\]|\\.)*)'|"((?:[^"\\]|\\.)*)"|`((?:[^`\\$]|\\.)*)`)"""
_OUTPUT = r"output(?:\.trim\(\))?"
_LOWER = r"(?:\.toLowerCase\(\))?"
_SHAPES: tuple[tuple[str, str], ...] = (
    (rf"^!\s*{_OUTPUT}{_LOWER}\.includes\(\s*{_QUOTED}\s*\)$", "banned"),
    (rf"^{_OUTPUT}{_LOWER}\.includes\(\s*{_QUOTED}\s*\)$", "contains"),
    (rf"^{_OUTPUT}\.startsWith\(\s*{_QUOTED}\s*\)$", "starts"),
    (rf"^{_OUTPUT}\.endsWith\(\s*{_QUOTED}\s*\)$", "ends"),
    (rf"^{_OUTPUT}\s*===?\s*{_QUOTED}$", "equals"),
    (r"^/((?:[^/\\\n]|\\.)+)/([a-z]*)\.test\(\s*output\s*\)$", "regex"),
    (r"^output\.match\(\s*/((?:[^/\\\n]|\\.)+)/([a-z]*)\s*\)$", "regex"),
    (rf"^{_OUTPUT}\.length\s*(<=?|>=?)\s*(\d+)$", "chars"),
    (rf"^{_OUTPUT}\.split\(\s*(?:' '|\" \"|/\\s\+/)\s*\)\.length\s*(<=?|>=?)\s*(\d+)$", "words"),
    (rf"^{_OUTPUT}\.split\(\s*(?:'\\n'|\"\\n\")\s*\)\.length\s*(<=?|>=?)\s*(\d+)$", "lines"),
)
PYTHON = ("a `python: module:function` check in the rubric (or in a case, once ini harness_data_modules lists its "
          "module): it gets the artifact and returns a score, (score, reason) or {score, reason, fixes}")


def nearest_check(code: object) -> str:
    """What to write instead of the JavaScript ``code``: the nearest check as YAML, or a python check."""
    text = " ".join(str(code).split()).strip().rstrip(";").strip()
    text = re.sub(r"^return\s+", "", text)
    if isinstance(code, str) and code.startswith("file://"):
        return f"write it as {PYTHON}"
    if "JSON.parse(output)" in text:
        return ("the nearest checks: `json_schema: {schema: ...}` for its shape, `json_path: {path: ..., equals: ...}` "
                f"for a value, else {PYTHON}")
    for pattern, kind in _SHAPES:
        match = re.match(pattern, text)
        if match:
            return f"the nearest check: `{_written(kind, match)}`"
    return f"write it as {PYTHON}"


def _quoted(match: re.Match[str]) -> str:
    """The one quoted text the expression holds, unescaped as JavaScript would."""
    raw = next(group for group in match.groups()[::-1] if group is not None)
    return re.sub(r"\\(.)", r"\1", raw)


def _written(kind: str, match: re.Match[str]) -> str:
    if kind in ("chars", "words", "lines"):
        sign, number = match.group(1), int(match.group(2))
        bound = {"<": ("max", number - 1), "<=": ("max", number), ">": ("min", number + 1),
                 ">=": ("min", number)}[sign]
        return f"length: {{{bound[0]}_{kind}: {bound[1]}}}"
    if kind == "regex":
        letters = "".join(flag for flag in match.group(2) if flag in "ims")  # JavaScript's g, u, y: no counterpart
        flags = f", flags: {letters}" if letters else ""
        return f"regex: {{pattern: {json.dumps(match.group(1))}{flags}}}"
    value = json.dumps(_quoted(match), ensure_ascii=False)
    folded = ", case_sensitive: false" if ".toLowerCase()" in match.group(0) else ""
    if kind == "contains":
        return f"contains: {{all: [{value}]{folded}}}"
    if kind == "banned":
        return f"banned_phrases: {{phrases: [{value}]{folded}}}"
    if kind == "equals":
        return f"equals: {{value: {value}, normalize: false}}"
    anchored = re.escape(_quoted(match))
    return "regex: {pattern: " + json.dumps(rf"\A{anchored}" if kind == "starts" else rf"{anchored}\Z") + "}"
