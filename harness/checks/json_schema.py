"""The ``json_schema`` check: the artifact's JSON (or each item of a list in it) against a JSON Schema."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from harness.base import jsonschemas
from harness.base.fields import Fields, one_line
from harness.base.yamlfile import parse_yaml, read_text
from harness.checks.base import REASON_ITEM_LIMIT, CheckContext, CheckResult, plural
from harness.checks.paths import MISSING, value_at
from harness.checks.registry import check_kind

if TYPE_CHECKING:
    from harness.base.jsonschemas import Validator

_JSON_BLOCK = re.compile(r"```[ \t]*json[ \t]*\r?\n(.*?)```", re.IGNORECASE | re.DOTALL)
_NAME_FIELDS = ("name", "id", "company")
_SOURCES = ("auto", "json_block", "text")


class NotJson(ValueError):
    """The artifact holds no JSON where the check looks: ``problem`` for a reason, ``fix`` for the reviser."""

    def __init__(self, problem: str, fix: str):
        super().__init__(problem)
        self.problem = problem
        self.fix = fix


def artifact_json(artifact: str, source: str = "auto") -> Any:
    """The artifact's JSON: with ``source`` auto, its first ```json block, else the whole text; json_block,
    only such a block; text, only the whole text. Raises :class:`NotJson` when there is none or it is invalid."""
    block = _JSON_BLOCK.search(artifact) if source != "text" else None
    if source == "json_block" and block is None:
        raise NotJson("no ```json block found", "Put the JSON output in a ```json fenced block")
    text = block.group(1) if block else artifact
    where = "```json block" if block else "artifact"
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise NotJson(f"{where} is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}",
                      f"Make the {where} valid JSON ({exc.msg} at line {exc.lineno})") from None
    except RecursionError:
        raise NotJson(f"{where} is JSON nested too deeply to read", f"Flatten the JSON in the {where}") from None


@dataclass(frozen=True)
class JsonSchemaCheck:
    """Validate the artifact's JSON (or each element of a list inside it) against a JSON Schema.

    ``format`` keywords (``date``, ``email``, ...) are checked, not just annotations."""

    schema: Mapping[str, Any]
    source: str = "auto"
    items: tuple[str, ...] = ()
    validator: Validator | None = field(default=None, compare=False, repr=False)
    kind = "json_schema"

    def _document(self, artifact: str) -> tuple[Any, CheckResult | None]:
        try:
            return artifact_json(artifact, self.source), None
        except NotJson as exc:
            return None, CheckResult(0.0, exc.problem, (exc.fix,))

    def _errors(self, instance: Any, prefix: str = "") -> list[str]:
        assert self.validator is not None
        return [one_line(line, 160) for line in jsonschemas.error_lines(self.validator.iter_errors(instance), prefix)]

    def run(self, artifact: str, context: CheckContext) -> CheckResult:
        document, failed = self._document(artifact)
        if failed is not None:
            return failed
        if not self.items:
            errors = self._errors(document)
            if not errors:
                return CheckResult(1.0, "JSON matches the schema")
            shown = "; ".join(errors[:REASON_ITEM_LIMIT])
            more = f" (+{len(errors) - REASON_ITEM_LIMIT} more)" if len(errors) > REASON_ITEM_LIMIT else ""
            return CheckResult(0.0, f"{plural(len(errors), 'schema error')}: {shown}{more}",
                               tuple(f"Fix {e}" for e in errors))

        dotted = ".".join(self.items)
        value = value_at(document, self.items)
        if value is MISSING:
            return CheckResult(0.0, f"no value at {dotted!r} in the JSON", (f"Add the list {dotted!r} to the JSON",))
        if not isinstance(value, list):
            return CheckResult(0.0, f"{dotted!r} is a {type(value).__name__}, not a list",
                               (f"Make {dotted!r} a JSON list",))
        if not value:
            return CheckResult(0.0, f"{dotted!r} is an empty list", (f"Add at least one item to {dotted!r}",))
        invalid: list[tuple[str, str]] = []
        for index, element in enumerate(value):
            errors = self._errors(element, f"{dotted}[{index}]")
            if errors:
                invalid.append((self._label(element, index), errors[0]))
        valid = len(value) - len(invalid)
        reason = f"{valid}/{len(value)} items in {dotted!r} valid"
        if invalid:
            reason += "; invalid: " + "; ".join(f"{label} ({error})" for label, error in invalid[:REASON_ITEM_LIMIT])
            if len(invalid) > REASON_ITEM_LIMIT:
                reason += f" (+{len(invalid) - REASON_ITEM_LIMIT} more)"
        return CheckResult(valid / len(value), reason, tuple(f"Fix {label}: {error}" for label, error in invalid))

    @staticmethod
    def _label(element: Any, index: int) -> str:
        if isinstance(element, Mapping):
            for key in _NAME_FIELDS:
                name = element.get(key)
                if isinstance(name, (str, int)) and not isinstance(name, bool) and str(name).strip():
                    return f"item {index} {one_line(str(name), 40)!r}"
        return f"item {index}"


def _load_schema_file(raw: str, f: Fields) -> Any:
    """The schema file ``raw`` names, relative to the file that names it and inside the project."""
    f.project_path(raw, "schema", example="a schema file inside the project, such as schemas/target.json")
    target = f.base_dir / raw
    if not target.is_file():
        raise f.error("schema", f"cannot read schema file {raw!r} ({target}): no such file",
                      f"check the path; relative paths resolve from {f.base_dir}")
    text = read_text(target)  # the size limit, and one line for a byte that is not UTF-8
    if target.suffix.lower() in (".yaml", ".yml"):
        return parse_yaml(text, target)  # the nesting and alias guards of every YAML file
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise f.error("schema", f"schema file {raw!r} is not valid JSON: {exc.msg} at line {exc.lineno} "
                      f"column {exc.colno}", "fix the JSON in the schema file") from None
    except RecursionError:
        raise f.error("schema", f"schema file {raw!r} is nested too deeply", "flatten the schema") from None


@check_kind("json_schema")
def parse_json_schema(raw: Any, f: Fields) -> JsonSchemaCheck:
    example = "json_schema: {schema: schemas/target.json, items: targets}"
    opts = f.mapping(raw, allowed=("schema", "source", "items"), example=example, required_any=("schema",))
    schema_raw = opts["schema"]
    if isinstance(schema_raw, str):
        schema = _load_schema_file(f.string(schema_raw, "schema"), f)
        origin = f"schema file {schema_raw!r}"
    elif isinstance(schema_raw, Mapping):
        schema, origin = schema_raw, "inline schema"
    else:
        raise f.expected("schema", "an inline mapping or a file path", schema_raw,
                         f"write {example} or an inline mapping such as schema: {{type: object}}")
    if not isinstance(schema, Mapping):
        raise f.error("schema", f"{origin} is a {type(schema).__name__}, not a JSON Schema object",
                      "make the schema a JSON object such as {\"type\": \"object\"}")
    schema = json.loads(json.dumps(schema, default=str))  # plain dicts; YAML dates become strings
    try:
        validator = jsonschemas.validator_for(schema, formats=True)
    except jsonschemas.SchemaInvalid as err:
        at = f" at {err.where}" if err.where else ""
        raise f.error("schema", f"{origin} is not a valid JSON Schema{at}: {err.problem}", err.fix) from None
    source = f.choice(opts["source"], "source", _SOURCES, "source") if "source" in opts else "auto"
    items: tuple[str, ...] = ()
    if "items" in opts:
        dotted = f.string(opts["items"], "items", what="a dotted path such as 'targets' or 'data.targets'")
        items = tuple(dotted.split("."))
        if any(not part.strip() for part in items):
            raise f.error("items", f"bad dotted path {dotted!r}",
                          "write keys separated by single dots, e.g. data.targets")
    return JsonSchemaCheck(schema, source, items, validator)
