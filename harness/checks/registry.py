"""Check kinds by name, and the one entry point that turns a rubric's ``check:`` into a check.

The built-in kinds register themselves with ``@check_kind("regex")``; plugins add kinds through the
``pytest_harness_check_kinds`` hook, merged once per session by :func:`with_plugin_kinds`.

Every parser, built-in or not, has one signature (:data:`CheckParser`)::

    def parse_max_words(options: Any, fields: Fields) -> Check: ...

``options`` is the YAML value under the kind, as written; ``fields`` names the rubric file and field
(:class:`~harness.base.fields.Fields`), knows the rubric's folder and the import root, and validates
options with one-line errors. A parser raises ``HarnessConfigError`` (``fields.error(...)``) for every
mistake and returns a frozen check whose ``run(artifact, context)`` is pure and thread-safe.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from types import MappingProxyType
from typing import Any, TypeVar

from harness.base import slots
from harness.base.errors import HarnessConfigError
from harness.base.fields import Fields, one_line
from harness.checks.base import Check
from harness.checks.templated import templated_check

CheckParser = Callable[[Any, Fields], Check]
"""``parser(options, fields) -> Check``: see the module docstring."""

HOOK = "pytest_harness_check_kinds"

_BUILTIN: dict[str, CheckParser] = {}
_P = TypeVar("_P", bound=CheckParser)


def check_kind(name: str) -> Callable[[_P], _P]:
    """Register the decorated parser as the built-in check kind ``name``."""

    def register(parser: _P) -> _P:
        if name in _BUILTIN:
            raise ValueError(f"check kind {name!r} is registered twice")
        _BUILTIN[name] = parser
        return parser

    return register


def builtin_kinds() -> Mapping[str, CheckParser]:
    """The built-in kinds, in the order they registered."""
    return MappingProxyType(_BUILTIN)


def with_plugin_kinds(contributions: Iterable[tuple[str, Any]]) -> Mapping[str, CheckParser]:
    """The built-in kinds plus those plugins add.

    ``contributions`` pairs each plugin (its file, or its name) with what its ``pytest_harness_check_kinds``
    returned. A kind that shadows a built-in or another plugin's kind, a name that is not an identifier and
    a parser that is not callable are each a ``HarnessConfigError`` naming the plugin and the kind.
    """
    kinds: dict[str, CheckParser] = dict(_BUILTIN)
    added_by: dict[str, str] = {}
    for source, offered in contributions:
        if offered is None:
            continue
        if not isinstance(offered, Mapping):
            raise HarnessConfigError(source, HOOK, f"returned {type(offered).__name__} "
                                     f"{one_line(repr(offered), 60)}, not a mapping of kind names to parsers",
                                     "return e.g. {'max_words': parse_max_words}")
        for name, parser in offered.items():
            if not isinstance(name, str) or not name.isidentifier():
                raise HarnessConfigError(source, HOOK, f"check kind {name!r} is not a name",
                                         "use letters, digits and '_', such as 'max_words'")
            if name in _BUILTIN:
                raise HarnessConfigError(source, HOOK, f"check kind {name!r} shadows the built-in kind {name!r}",
                                         f"give the plugin's kind its own name, such as 'my_{name}'")
            if name in added_by:
                raise HarnessConfigError(source, HOOK, f"check kind {name!r} is also added by {added_by[name]}",
                                         "keep one of the two plugins' kinds, or rename one")
            if not callable(parser):
                raise HarnessConfigError(source, HOOK, f"the parser of check kind {name!r} is a "
                                         f"{type(parser).__name__}, not a function",
                                         "map the name to a function parser(options, fields) -> check")
            kinds[name] = parser
            added_by[name] = source
    return MappingProxyType(kinds)


def parse_check(raw: Any, *, path: Path, field: str, base_dir: Path, import_root: Path,
                kinds: Mapping[str, CheckParser] | None = None, roots: Sequence[Path] = (),
                data_modules: Sequence[str] | None = None) -> Check:
    """Parse the YAML value under a dimension's ``check:`` into a runnable check.

    ``path`` and ``field`` (e.g. ``dimensions.bu_fit.check``) name the rubric file and field in errors;
    ``base_dir`` resolves relative schema paths; ``import_root`` is put on ``sys.path`` while importing
    ``module:function`` callables (temporarily, under a lock, only if not already there; a callable that
    imports more modules lazily at call time must find them on the normal sys.path). ``kinds`` are the
    kinds in effect (:func:`with_plugin_kinds`); by default the built-ins. ``roots`` are the folders a file the
    check names must lie in (the project and ini harness_input_dirs; default: ``import_root``); ``data_modules``
    is set when the check is data (a case's ``checks:``, a dataset row): the only modules its code may come from
    (:attr:`~harness.base.fields.Fields.data_modules`).

    Options that hold case slots (``contains: {all: ["{expected}"]}``, harness/base/slots.py) make a check that fills
    them from each case when it runs (harness/checks/templated.py); :func:`~harness.checks.base.check_slots`
    names the slots a case must fill.

    Raises HarnessConfigError for every mistake.
    """
    known = builtin_kinds() if kinds is None else kinds
    place = Fields(path, field, base_dir, import_root, tuple(roots),
                   None if data_modules is None else tuple(data_modules))
    if isinstance(raw, Mapping) and len(raw) > 1:
        raise place.error(None, f"has {len(raw)} keys ({', '.join(map(str, raw))}); a check has exactly one kind",
                          "keep one kind per dimension (split the others into their own dimensions)")
    if not isinstance(raw, Mapping) or not raw:
        raise place.expected(None, "a mapping with one key, the check kind", raw,
                             f"write e.g. check: {{regex: 'BU: \\w+'}}; kinds: {', '.join(known)}")
    (kind, options), = raw.items()
    place.choice(kind, str(kind), tuple(known), "check kind")
    parser = known[kind]

    def parse(filled: Any, fields: Fields) -> Check:
        check = parser(filled, fields)
        if kind not in _BUILTIN and not callable(getattr(check, "run", None)):
            raise place.error(kind, f"the plugin parser of check kind {kind!r} returned {type(check).__name__}, "
                              "which has no run(artifact, context)",
                              "make the parser return a check: an object with run(artifact, context)")
        return check

    problem = slots.nested_filter_problem(options)
    if problem:
        raise place.error(kind, problem, "use one of the filters, or remove the '|'")
    if slots.nested_slots(options):
        return templated_check(kind, options, parse, place.nested(kind))
    return parse(options, place.nested(kind))
