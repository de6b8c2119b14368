"""The ``python`` check: a function of the user's project scores the artifact.

Also :func:`import_callable`, which the ``python`` runners use to import ``module:function`` the same way, and
:func:`callable_at`, which transforms use. Data never chooses code: where the place is data (a case's ``checks:``,
a dataset row: ``Fields.data_modules`` is set), a ``module:function`` outside the modules ini
harness_data_modules lists is refused before anything is imported, and the function must be defined in one of
them (not merely reachable through one, as ``mychecks:shutil.rmtree`` would be). A check's function is never a
slot, in a rubric either: a case's values would choose the code.
"""

from __future__ import annotations

import contextlib
import difflib
import importlib
import inspect
import math
import sys
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.base import slots
from harness.base.errors import AgentRunError, HarnessConfigError
from harness.base.fields import Fields, one_line
from harness.checks.base import CheckContext, CheckResult
from harness.checks.registry import check_kind

_SYS_PATH_LOCK = threading.RLock()


@contextlib.contextmanager
def _on_sys_path(root: Path) -> Iterator[None]:
    """Put ``root`` first on sys.path for the duration, unless it is already there."""
    entry = str(root)
    with _SYS_PATH_LOCK:
        added = entry not in sys.path and str(root.resolve()) not in sys.path
        if added:
            sys.path.insert(0, entry)
        importlib.invalidate_caches()
        try:
            yield
        finally:
            if added:
                with contextlib.suppress(ValueError):
                    sys.path.remove(entry)


def _is_under(file: str | None, root: Path) -> bool:
    if not file:
        return False
    try:
        Path(file).resolve().relative_to(root.resolve())
    except ValueError:
        return False
    return True


DATA_MODULES_FIX = "name the {what} in the rubric, or list the module in ini harness_data_modules"


def in_modules(module_name: str, modules: tuple[str, ...]) -> bool:
    """``module_name`` is one of ``modules`` or a submodule of one."""
    return any(module_name == listed or module_name.startswith(listed + ".") for listed in modules)


def _refused_by_data(spec: str, module_name: str, f: Fields, key: str | None, what: str) -> HarnessConfigError:
    listed = f", which lists {', '.join(f.data_modules)}" if f.data_modules else ", which lists none"
    return f.error(key, f"{spec!r} names code in module {module_name!r}: data (a case, a dataset row) may name code "
                   f"only from the modules of ini harness_data_modules{listed}", DATA_MODULES_FIX.format(what=what))


def callable_at(spec: str, f: Fields, key: str | None = None, *, what: str = "check") -> Callable[..., Any]:
    """The function ``spec`` (``module:function``) names at the place ``f`` (``key`` under it), imported from
    ``f.import_root``; every problem is one error naming the file and field. Where ``f`` is data, only the
    modules of ini harness_data_modules may be named (``what``, "check" or "transform", words the fix)."""
    import_root = f.import_root
    module_name, sep, attr_path = spec.partition(":")
    if not sep or not all(p.isidentifier() for p in module_name.split(".")) or not all(
        p.isidentifier() for p in attr_path.split(".")
    ):
        raise f.error(key, f"{spec!r} is not 'module:function'",
                      "write e.g. 'my_checks:score_sources' (module importable from the rubric's project root)")
    data = f.data_modules
    if data is not None and (not in_modules(module_name, data) or any(p.startswith("_") for p in attr_path.split("."))):
        raise _refused_by_data(spec, module_name, f, key, what)  # before the import: importing runs code
    top = module_name.split(".")[0]
    with _on_sys_path(import_root):
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name and (exc.name == module_name or module_name.startswith(exc.name + ".")):
                raise f.error(key, f"module {module_name!r} cannot be imported: not found under {import_root} "
                              "or on sys.path",
                              f"create {import_root / module_name.replace('.', '/')}.py or fix the name") from None
            raise f.error(key, f"module {module_name!r} cannot be imported: it needs {exc.name!r}, which is missing",
                          f"install {exc.name!r} or remove the import") from None
        except Exception as exc:  # a broken user module: SyntaxError, NameError, anything at import time
            problem = f"module {module_name!r} cannot be imported: {type(exc).__name__}: {one_line(str(exc))}"
            raise f.error(key, problem,
                          "fix the module so `python -c 'import " + module_name + "'` works") from None
    candidates = (import_root / f"{top}.py", import_root / top / "__init__.py")
    if any(c.exists() for c in candidates) and not _is_under(getattr(module, "__file__", None), import_root):
        raise f.error(key, f"module name {module_name!r} is already taken by {getattr(module, '__file__', None)}, "
                      f"so {import_root / top} is not the one imported",
                      "rename the check module to a unique name")
    target: Any = module
    for part in attr_path.split("."):
        if not hasattr(target, part):
            names = [n for n in dir(module) if not n.startswith("_") and callable(getattr(module, n, None))]
            close = difflib.get_close_matches(part, names, n=1)
            hint = (f"did you mean {close[0]!r}?" if close
                    else f"define it (callables there: {', '.join(names[:8]) or 'none'})")
            raise f.error(key, f"module {module_name!r} has no function {attr_path!r}", hint)
        target = getattr(target, part)
    if not callable(target):
        raise f.error(key, f"{spec} is a {type(target).__name__}, not a function",
                      "point at a function taking (artifact, context, **options)")
    if data is not None and not in_modules(str(getattr(target, "__module__", None)), data):
        # a name the module imported (`from shutil import rmtree`) is reachable through it, not defined in it
        raise _refused_by_data(spec, str(getattr(target, "__module__", None)), f, key, what)
    return target


def import_callable(spec: str, *, path: Path | str, field: str, import_root: Path) -> Callable[..., Any]:
    """Import ``module:function`` from ``import_root``; every problem names ``path`` and ``field``."""
    return callable_at(spec, Fields.of(path, field, import_root=import_root))


def _to_result(spec: str, value: Any) -> CheckResult:
    """Turn what a check function returned into a CheckResult, or raise AgentRunError."""

    def score_of(raw: Any) -> float:
        if isinstance(raw, bool) or not isinstance(raw, (int, float)):
            raise AgentRunError(f"check {spec} returned score {one_line(repr(raw), 60)} "
                                f"({type(raw).__name__}); return a number from 0.0 to 1.0")
        if math.isnan(raw) or not 0.0 <= raw <= 1.0:
            raise AgentRunError(f"check {spec} returned score {raw!r}, outside 0.0..1.0")
        return float(raw)

    def reason_of(raw: Any, score: float) -> str:
        if raw is None:
            return f"{spec} scored {score:.2f}"
        if not isinstance(raw, str):
            raise AgentRunError(f"check {spec} returned reason {one_line(repr(raw), 60)} "
                                f"({type(raw).__name__}); return a string")
        return one_line(raw, 300) or f"{spec} scored {score:.2f}"

    def fixes_of(raw: Any) -> tuple[str, ...]:
        if raw is None:
            return ()
        if isinstance(raw, str) or not isinstance(raw, (list, tuple)) or not all(isinstance(x, str) for x in raw):
            raise AgentRunError(f"check {spec} returned fixes {one_line(repr(raw), 60)}; return a list of strings")
        return tuple(raw)

    if isinstance(value, CheckResult):
        score = score_of(value.score)
        return CheckResult(score, reason_of(value.reason, score), fixes_of(value.fixes))
    if isinstance(value, tuple):
        if len(value) != 2:
            raise AgentRunError(f"check {spec} returned a tuple of {len(value)}; return (score, reason)")
        score = score_of(value[0])
        return CheckResult(score, reason_of(value[1], score))
    if isinstance(value, Mapping):
        extra = sorted(set(map(str, value)) - {"score", "reason", "fixes"})
        if extra or "score" not in value:
            problem = f"unknown keys {', '.join(extra)}" if extra else "no 'score'"
            raise AgentRunError(f"check {spec} returned a dict with {problem}; return {{score, reason, fixes}}")
        score = score_of(value["score"])
        return CheckResult(score, reason_of(value.get("reason"), score), fixes_of(value.get("fixes")))
    score = score_of(value)
    return CheckResult(score, reason_of(None, score))


@dataclass(frozen=True)
class PythonCheck:
    """Call ``function(artifact, context, **options)``; it returns a float, ``(score, reason)``,
    ``{score, reason, fixes}`` or a CheckResult. An exception or a malformed return is an AgentRunError."""

    spec: str
    function: Callable[..., Any] = field(compare=False, repr=False)
    options: Mapping[str, Any] = field(default_factory=dict)
    kind = "python"

    def run(self, artifact: str, context: CheckContext) -> CheckResult:
        try:
            value = self.function(artifact, context, **dict(self.options))
        except Exception as exc:
            raise AgentRunError(f"check {self.spec} raised {type(exc).__name__}: {one_line(str(exc), 300)}") from exc
        return _to_result(self.spec, value)


@check_kind("python")
def parse_python(raw: Any, f: Fields) -> PythonCheck:
    example = "python: {function: 'my_checks:score_sources', options: {min_sources: 2}}"
    if isinstance(raw, str) or not isinstance(raw, Mapping):
        spec, key, options = raw, None, {}
    else:
        opts = f.mapping(raw, allowed=("function", "options"), example=example, required_any=("function",))
        spec, key = opts["function"], "function"
        options = opts.get("options", {})
        if options is None:
            options = {}
        if not isinstance(options, Mapping) or not all(isinstance(k, str) and k.isidentifier() for k in options):
            raise f.expected("options", "a mapping of keyword arguments", options,
                             "write options: {name: value} with identifier names")
    if not isinstance(spec, str) or slots.nested_slots(spec):
        # One problem whatever a slot would be filled with, so that checks/templated.py refuses the slot when the
        # rubric loads instead of filling the function from each case: a case's values never choose code.
        raise f.error(key, "expected module:function written as text in the file, never a value or a slot: "
                      "a case would choose the code", "write e.g. 'my_checks:score_sources'; pass a case's values "
                      "as options: {function: ..., options: {name: \"{inputs.name}\"}}")
    function = callable_at(spec, f, key)
    problem = call_problem(function, "artifact", None, **options)
    if problem:
        names = ", ".join(options) or "no options"
        raise f.error(key, f"{spec} cannot be called as {spec.partition(':')[2]}(artifact, context, **options) "
                      f"with {names}: {problem}", "accept (artifact, context) plus each option as a keyword argument")
    return PythonCheck(spec, function, dict(options))


def call_problem(function: Callable[..., Any], *args: Any, **kwargs: Any) -> str | None:
    """Why ``function`` cannot be called with these arguments, told from its signature before any call; None
    when it can, or when it has no signature to tell by (some builtins: the call will say)."""
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError):
        return None
    try:
        signature.bind(*args, **kwargs)
    except TypeError as exc:
        return str(exc)
    return None
