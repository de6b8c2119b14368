"""Reading YAML strictly: duplicate keys are errors, and every mapping knows its line."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, NoReturn

import yaml

from harness.base.errors import HarnessConfigError


class LineDict(dict):
    """A dict that remembers the 0-based line where its mapping started."""

    line: int = 0


# libyaml's parser is ~10x faster than the pure-Python one (10,000 cases collect in seconds).
class _StrictLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
    pass


def _construct_mapping(loader: _StrictLoader, node: yaml.MappingNode, deep: bool = False) -> LineDict:
    loader.flatten_mapping(node)
    result = LineDict()
    result.line = node.start_mark.line
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=True)
        if isinstance(key, (dict, list)):  # `{{x}}` in a flow mapping: a mapping as a key, which no file means
            raise yaml.constructor.ConstructorError(
                None, None, "a mapping or list used as a key (is `{{...}}` a template slot that needs quotes?)",
                key_node.start_mark)
        if key in result:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key!r}", key_node.start_mark
            )
        result[key] = loader.construct_object(value_node, deep=True)
    return result


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


# The largest file of ours the harness reads (rubrics, agents.yaml, cases, prompts, input files, goals,
# ideas, price tables): a bigger one is a mistake, and parsing it would take ~7x its size in memory.
MAX_FILE_BYTES = 4 * 1024 * 1024


def read_text(path: Path, *, limit: int = MAX_FILE_BYTES) -> str:
    """A user file's text. Unreadable, larger than ``limit`` or not UTF-8: one ``HarnessConfigError``
    naming the file (and for a bad byte, its line), never a traceback."""
    try:
        with open(path, "rb") as handle:
            data = handle.read(limit + 1)
    except OSError as exc:
        raise HarnessConfigError(path, None, f"cannot read file ({exc.strerror or exc})", "check the path") from None
    if len(data) > limit:
        try:
            size = f"{_megabytes(path.stat().st_size)}"
        except OSError:
            size = "too large"
        raise HarnessConfigError(path, None, f"file is {size}, over the {_megabytes(limit)} limit for a file the "
                                 "harness reads", "make it smaller: split it, or keep bulky data out of it")
    return decode_utf8(data, path)


def decode_utf8(data: bytes, path: Path | str) -> str:
    """``data`` as UTF-8 text; a byte that is not UTF-8 is an error naming its line and column."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        raise HarnessConfigError(path, f"line {line}", f"byte 0x{data[exc.start]:02x} at column {column} (byte "
                                 f"offset {exc.start}) is not UTF-8", "save the file as UTF-8") from None


def _megabytes(size: int) -> str:
    megabytes = size / (1024 * 1024)
    return f"{megabytes:.0f} MB" if megabytes == int(megabytes) else f"{megabytes:.1f} MB"


def load_yaml(path: Path) -> Any:
    """Parse ``path``; a syntax error or a duplicate key is one ``HarnessConfigError`` with its line."""
    return parse_yaml(read_text(path), path)


# A file's values, aliases expanded: more is an alias bomb (``&a [*b, *b, ...]``) that would hang whatever
# walks the data next (JSON for the model, a check), not a real configuration.
MAX_VALUES = 2_000_000


MAX_DEPTH = 1000  # flow collections nested deeper crash libyaml's parser (a C stack overflow, not an error)
_BRACKETS = re.compile(r"[^\[\]{}]+")


def parse_yaml(text: str, path: Path) -> Any:
    if text.count("[") + text.count("{") > MAX_DEPTH:
        _check_nesting(text, path)
    try:
        data = yaml.load(text, Loader=_StrictLoader)  # noqa: S506 - a SafeLoader subclass
    except (RecursionError, yaml.YAMLError) as exc:
        _explain(exc, text, path)
    if "&" in text:  # only anchors make aliases
        _check_expansion(data, path)
    return data


# Characters YAML does not allow in a file (YAML 1.1's printable set, which libyaml reads): C0 controls but tab,
# line feed and carriage return; DEL; C1 controls but NEL; the surrogates; U+FFFE and U+FFFF.
_NOT_PRINTABLE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x84\x86-\x9f\ud800-\udfff\ufffe\uffff]")


def _explain(exc: RecursionError | yaml.YAMLError, text: str, path: Path) -> NoReturn:
    """A file that failed to load, as one line. What the harness can tell by itself (a structure nested too
    deep, a character YAML does not allow) is said in its own words, whatever the library said; the rest is
    the parser's problem and line. Measured only after a failure: a file that loads pays nothing."""
    if _block_depth(text) > MAX_DEPTH:
        raise HarnessConfigError(path, None, f"indented blocks nested more than {MAX_DEPTH} levels deep",
                                 "flatten the YAML structure") from None
    if isinstance(exc, RecursionError):
        raise HarnessConfigError(path, None, "nested too deeply to read", "flatten the YAML structure") from None
    bad = _NOT_PRINTABLE.search(text)
    if bad is not None:
        line = text.count("\n", 0, bad.start()) + 1
        column = bad.start() - (text.rfind("\n", 0, bad.start()) + 1) + 1
        code = ord(bad.group())
        raise HarnessConfigError(path, f"line {line}", f"control character U+{code:04X} at column {column} is not "
                                 "allowed in YAML", f"remove it, or write it as the escape \"\\x{code:02x}\" in a "
                                 "double-quoted string" if code < 0x100 else "remove it") from None
    if isinstance(exc, yaml.MarkedYAMLError):
        mark = exc.problem_mark or exc.context_mark
        where = f"line {mark.line + 1}" if mark else "YAML"
        problem = exc.problem or str(exc)
        fix = "rename or remove the duplicate" if "duplicate key" in problem else "fix the YAML syntax"
        raise HarnessConfigError(path, where, problem, fix) from None
    raise HarnessConfigError(path, None, f"invalid YAML: {' '.join(str(exc).split())}", "fix the YAML syntax") from None


def _check_nesting(text: str, path: Path) -> None:
    depth = 0
    for char in _BRACKETS.sub("", text):
        depth = depth + 1 if char in "[{" else max(depth - 1, 0)
        if depth > MAX_DEPTH:
            raise HarnessConfigError(path, None, f"brackets nested more than {MAX_DEPTH} levels deep",
                                     "flatten the YAML structure")


_SEQUENCE_DASHES = re.compile(r"(?:-(?:[ \t]+|$))*")


def _block_depth(text: str) -> int:
    """How deep the indented blocks of ``text`` nest, by its indentation alone: a line indented deeper than the
    blocks open above it opens one more, and each ``- `` that starts a line opens a sequence. An estimate for
    the message of a file that failed to load, not a parser."""
    open_indents: list[int] = []
    deepest = 0
    for line in text.splitlines():
        body = line.lstrip(" ")
        if not body or body.startswith("#"):
            continue
        indent = len(line) - len(body)
        while open_indents and open_indents[-1] >= indent:
            open_indents.pop()
        open_indents.append(indent)
        dashes = _SEQUENCE_DASHES.match(body).group().count("-")  # type: ignore[union-attr]
        deepest = max(deepest, len(open_indents) + dashes)
    return deepest


def _check_expansion(data: Any, path: Path) -> None:
    """Count the values once each alias is expanded, stopping at :data:`MAX_VALUES`."""
    stack, seen = [data], 0
    while stack:
        value = stack.pop()
        seen += 1
        if seen > MAX_VALUES:
            raise HarnessConfigError(path, None, f"expands to more than {MAX_VALUES:,} values (YAML aliases "
                                     "repeated inside each other?)", "write the values out, without nested aliases")
        if isinstance(value, dict):
            stack.extend(value.values())
        elif isinstance(value, list):
            stack.extend(value)
