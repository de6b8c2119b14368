"""promptfoo's asserts as this harness's checks and criteria, and the config file they are read from.

A deterministic assert (``contains``, ``equals``, ``regex``, ``is-json``, ``similar``...) becomes a check; a
model-graded one (``llm-rubric``, ``model-graded-closedqa``, ``factuality``, ``g-eval``) a judged criterion; each
has ``min_score`` its threshold or 1, because promptfoo passes a test only when every assert passes. An assert with
no counterpart is one ``not carried over:`` line of the plan: why, and what to do instead.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.apps.importers import ImportInputError, Plan, identifier, protect_literal_braces, unique
from harness.apps.importers.promptfoo_javascript import nearest_check
from harness.base import slots
from harness.base.errors import HarnessConfigError
from harness.base.fields import inside
from harness.base.yamlfile import parse_yaml, read_text

# factuality: the options of the fact prompt of openai/evals, which promptfoo uses, and promptfoo's default scores
FACTUALITY_CHOICES = {
    "A": (1.0, "The submitted answer is a subset of the expert answer and is fully consistent with it."),
    "B": (1.0, "The submitted answer is a superset of the expert answer and is fully consistent with it."),
    "C": (1.0, "The submitted answer contains all the same details as the expert answer."),
    "D": (0.0, "There is a disagreement between the submitted answer and the expert answer."),
    "E": (1.0, "The answers differ, but these differences don't matter from the perspective of factuality."),
}
FACTUALITY_OPTIONS = {"A": "subset", "B": "superset", "C": "agree", "D": "disagree", "E": "differButFactual"}

# Code is named by the project (a rubric), never by imported data: a case may name it only from a module the
# project lists (ini harness_data_modules), so the importers write none and say where it goes.
PYTHON_CHECK = ("a `python: module:function` check in the rubric (or in a case, once ini harness_data_modules lists "
                "its module)")
PYTHON_TRANSFORM = ("write a `transform: module:function` in Python in the rubric (or on a case's check, once ini "
                    "harness_data_modules lists its module)")
JUDGED = ("llm-rubric", "model-graded-closedqa", "factuality", "model-graded-factuality", "g-eval")
ONE_KIND = "it is the only kind of model-graded assert in the config, every test with vars"
NOT_CARRIED = {
    "javascript": ("JavaScript does not run here",
                   f"write it as {PYTHON_CHECK}: it gets the artifact and returns a score, (score, reason) or "
                   "{score, reason, fixes}"),
    "python": ("promptfoo's get_assert(output, context) is not this harness's check signature",
               "wrap it in a function that returns a score, (score, reason) or {score, reason, fixes}, named by "
               f"{PYTHON_CHECK}"),
    "webhook": ("the harness calls no webhooks", f"call the service from {PYTHON_CHECK}"),
    "cost": ("the run record keeps every model call's cost, but there is no cost gate per test",
             "cap a run's spend with --harness-max-cost USD"),
    "latency": ("there is no latency gate", "bound each model call with `timeout_s:` under `model:`"),
    "perplexity": ("needs the model's token log-probabilities, which the harness does not ask for", None),
    "perplexity-score": ("needs the model's token log-probabilities, which the harness does not ask for", None),
    "moderation": ("needs a moderation API", "write a criterion describing what must not appear"),
    "select-best": ("compares the outputs of several prompts", "compare the agents' scores with `harness history`"),
    "max-score": ("compares the outputs of several prompts", "compare the agents' scores with `harness history`"),
    "assert-set": ("nested assertion sets are not carried over", "list its assertions on the test itself"),
    "is-refusal": ("there is no refusal detector", "use a `banned_phrases` check or a criterion"),
}
NGRAM = ("rouge-n", "bleu", "gleu", "meteor")
RAG = ("answer-relevance", "context-faithfulness", "context-recall", "context-relevance")


@dataclass
class Dim:
    """One assert carried over: a check (``check`` set) or a judged criterion (``judge`` fields set)."""

    id: str
    weight: float
    min_score: float | None
    description: str
    check: dict[str, Any] | None = None
    judge: dict[str, Any] | None = None
    transform: dict[str, Any] | None = None
    kind: str = ""
    criterion: str | None = None  # a judged assert's own text (closed QA's criterion, a case's expected: there)
    note: str | None = None  # the not-carried line of its fallback, taken back when a library grader carries it

    def as_case_item(self) -> dict[str, Any]:
        item: dict[str, Any] = {"id": self.id}
        if self.check is not None:
            item["check"] = self.check
        else:
            item["description"] = self.description
            item.update(self.judge or {})
        item["weight"] = self.weight
        if self.min_score is not None:
            item["min_score"] = self.min_score
        if self.transform is not None:
            item["transform"] = self.transform
        return item

    def as_rubric_dimension(self, weight: float) -> dict[str, Any]:
        item = {"weight": weight, "description": self.description}
        item.update((k, v) for k, v in self.as_case_item().items() if k not in ("id", "weight", "description"))
        return item


class Config:
    """The config file being read: where it is, how its places are named in messages, and the folders the files
    it names must lie in (its own folder and the project the import writes into, ``out``)."""

    def __init__(self, path: Path, out: Path):
        self.path = path
        self.base = path.parent
        self.roots = (self.base, out)

    def error(self, where: str, problem: str, fix: str | None = None) -> ImportInputError:
        return ImportInputError(self.path, where or None, problem, fix)

    def json(self, text: str, where: str) -> Any:
        """``text`` parsed as JSON; invalid JSON is an error at ``where``."""
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise self.error(where, f"invalid JSON ({exc.msg})") from None

    def _outside(self, ref: str, where: str) -> ImportInputError:
        return self.error(where, f"{ref} is outside the project: the files a config names must be under its folder "
                          f"({self.base.resolve()}) or --out ({self.roots[1].resolve()})",
                          "copy the file into the project and name it relative to the config")

    def load(self, path: Path, where: str) -> Any:
        """A YAML or JSON file the config names (``file://``), parsed; an unreadable one names the field."""
        try:
            return parse_yaml(read_text(path), path)
        except HarnessConfigError as exc:
            raise self.error(where, f"cannot read {path.name}: {exc.problem}", exc.fix) from None

    def file_path(self, ref: str, where: str) -> Path:
        """The file a ``file://`` reference names, relative to the config: refused unless it lies inside the
        project (symbolic links resolved), before anything is read or written."""
        text = ref[len("file://"):]
        try:
            path = (self.base / text).resolve()
            within = bool(text.strip()) and "\0" not in text and inside(path, self.roots)
        except (OSError, RuntimeError, ValueError):  # a loop of links, a NUL byte
            within = False
        if not within:
            raise self._outside(ref, where)
        if not path.is_file() and not any(ch in ref for ch in "*?["):
            raise self.error(where, f"no file {text} (looked in {self.base})",
                             "fix the path; it is relative to the config file")
        return path

    def files(self, ref: str, where: str) -> list[Path]:
        """The files a ``file://`` reference names (a glob names several, in sorted order), all inside the
        project."""
        text = ref[len("file://"):]
        if not any(ch in text for ch in "*?["):
            return [self.file_path(ref, where)]
        if Path(text).is_absolute():
            raise self._outside(ref, where)  # a glob is relative to the config, as every path it names
        found = sorted(p for p in self.base.glob(text) if p.is_file())
        if any(not inside(p, self.roots) for p in found):
            raise self._outside(ref, where)
        if not found:
            raise self.error(where, f"{text!r} matches no file under {self.base}", "fix the glob")
        return found


# --- CSV tests' asserts -------------------------------------------------------------------------


_CSV_ASSERT = re.compile(r"^(not-)?([a-z][a-z0-9-]*)(?:\((\d+(?:\.\d+)?)\))?(?::(.*))?$", re.DOTALL)


def assert_from_text(text: str) -> dict[str, Any]:
    """An ``__expected`` cell as an assert: ``contains: x``, ``similar(0.8): x``, ``grade: ...``; else equals."""
    for prefix, kind in (("javascript:", "javascript"), ("fn:", "javascript"), ("eval:", "javascript"),
                         ("grade:", "llm-rubric"), ("llm-rubric:", "llm-rubric"), ("python:", "python")):
        if text.startswith(prefix):
            return {"type": kind, "value": text[len(prefix):].strip()}
    match = _CSV_ASSERT.match(text)
    known = {"equals", "contains", "icontains", "contains-all", "contains-any", "icontains-all", "icontains-any",
             "regex", "starts-with", "is-json", "contains-json", "similar", "levenshtein", "llm-rubric",
             "model-graded-closedqa", "factuality", "g-eval", "javascript", "python", "cost", "latency",
             "rouge-n", "bleu", "answer-relevance", "context-faithfulness", "context-recall", "context-relevance",
             "perplexity", "perplexity-score", "classifier", "moderation", "is-refusal", "is-sql", "is-xml"}
    if not match or match[2] not in known:
        return {"type": "equals", "value": text}
    kind = (match[1] or "") + match[2]
    value = (match[4] or "").strip()
    found: dict[str, Any] = {"type": kind}
    if match[2] in ("contains-all", "contains-any", "icontains-all", "icontains-any"):
        found["value"] = [part.strip() for part in value.split(",")]
    elif value:
        found["value"] = value
    if match[3]:
        found["threshold"] = float(match[3])
    elif match[2] == "similar":
        found["threshold"] = 0.8
    return found


# --- asserts -----------------------------------------------------------------------------------


def dimension(config: Config, item: Mapping[str, Any], where: str, plan: Plan, taken: list[str],
               test_transform: dict[str, Any] | None) -> Dim | None:
    kind = str(item["type"])
    negated = kind.startswith("not-")
    base = kind[4:] if negated else kind
    value = item.get("value")
    threshold = item.get("threshold")
    if threshold is not None and not isinstance(threshold, (int, float)):
        try:
            threshold = float(threshold)
        except ValueError:
            raise config.error(f"{where}.threshold", f"expected a number, got {threshold!r}") from None
    weight = item.get("weight", 1)
    if not isinstance(weight, (int, float)) or isinstance(weight, bool) or weight < 0:
        raise config.error(f"{where}.weight", f"expected a number of 0 or more, got {weight!r}")
    if weight == 0:
        plan.not_carried(where, kind, "an assert of weight 0 counts for nothing in promptfoo; every dimension here "
                         "counts", "drop it, or give it a weight")
        return None
    name = unique(identifier(item.get("metric") or kind.replace("-", "_"), "assert"), taken)
    if base in JUDGED:
        if negated:
            plan.not_carried(where, kind, "a negated judge has no counterpart", "reword the criterion")
            return None
        return _judged(config, base, value, threshold, float(weight), name, where, plan, item)
    check, description, score = _check(config, base, negated, value, threshold, where, plan)
    if check is None:
        return None
    transform = _assert_transform(item, test_transform, where, plan)
    if transform is False:
        return None
    return Dim(id=name, weight=float(weight), min_score=score, description=description, check=check,
               transform=transform or None, kind=kind)


def _check(config: Config, base: str, negated: bool, value: Any, threshold: float | None, where: str,
           plan: Plan) -> tuple[dict[str, Any] | None, str, float]:
    """The check an assert is here, its description and its min_score; (None, ...) when it does not carry."""
    kind = f"not-{base}" if negated else base
    if value is None and base in ("contains", "icontains", "contains-all", "contains-any", "icontains-all",
                                  "icontains-any", "equals", "regex", "starts-with", "similar", "levenshtein"):
        raise config.error(f"{where}.value", "missing", f"give the {base} assert its value")
    text = _text_value(value)
    described = f"promptfoo {kind}" + (f": {text}" if isinstance(text, str) and len(text) < 80 else "")
    if base in ("contains", "icontains") and isinstance(text, str):
        sensitive = base == "contains"
        if negated:
            return {"banned_phrases": {"phrases": [text], "case_sensitive": sensitive}}, described, 1.0
        return {"contains": {"all": [text], "case_sensitive": sensitive}}, described, 1.0
    if base in ("contains-all", "contains-any", "icontains-all", "icontains-any"):
        phrases = _phrases(value)
        if not phrases:
            raise config.error(f"{where}.value", "expected a list of phrases")
        sensitive = not base.startswith("i")
        if negated and base.endswith("-any"):
            return {"banned_phrases": {"phrases": phrases, "case_sensitive": sensitive}}, described, 1.0
        if not negated:
            mode = "all" if base.endswith("-all") else "any"
            return {"contains": {mode: phrases, "case_sensitive": sensitive}}, described, 1.0
    if base == "equals" and isinstance(text, str):
        if negated:
            return {"regex": {"pattern": rf"\A{_escaped(text)}\Z", "must_match": False}}, described, 1.0
        return {"equals": {"value": text, "normalize": False}}, described, 1.0
    if base == "regex" and isinstance(text, str):
        return {"regex": {"pattern": text, **({"must_match": False} if negated else {})}}, described, 1.0
    if base == "starts-with" and isinstance(text, str):
        return ({"regex": {"pattern": rf"\A{_escaped(text)}", **({"must_match": False} if negated else {})}},
                described, 1.0)
    if base in ("is-json", "contains-json") and not negated:
        schema = value if value is not None else {}
        if isinstance(schema, str) and schema.startswith("file://"):
            schema = config.load(config.file_path(schema, f"{where}.value"), f"{where}.value")
        if not isinstance(schema, Mapping):
            raise config.error(f"{where}.value", "expected a JSON Schema (a mapping) or a file:// path")
        if base == "contains-json":
            plan.not_carried(where, kind, "promptfoo finds JSON anywhere in the text; the json_schema check reads "
                             "the first ```json block, else the whole text", None)
        return ({"json_schema": {"schema": dict(schema), "source": "text" if base == "is-json" else "auto"}},
                "promptfoo " + kind, 1.0)
    if base in ("similar", "levenshtein") and not negated and (isinstance(text, str) or _phrases(value)):
        return _similar(base, value, text, threshold, where, plan), described, (
            1.0 if base == "levenshtein" else threshold if threshold is not None else 0.75)
    why, instead = _not_carried_reason(base, negated)
    if base == "javascript" and not negated:  # the check nearest to what the expression tests
        instead = nearest_check(value)
    plan.not_carried(where, kind, why, instead)
    return None, "", 1.0


def _similar(base: str, value: Any, text: Any, threshold: float | None, where: str, plan: Plan) -> dict[str, Any]:
    if base == "similar":
        plan.not_carried(where, base, "promptfoo compares embeddings; the similar check compares the text "
                         "(difflib)", "check the threshold on a few outputs")
        return {"similar": {"value": text if isinstance(text, str) else _phrases(value),
                            "threshold": threshold if threshold is not None else 0.75}}
    distance = threshold if threshold is not None else 5
    size = max(len(text) if isinstance(text, str) else 1, 1)
    ratio = round(max(0.0, 1 - float(distance) / size), 3)
    plan.not_carried(where, base, f"an edit distance of at most {distance:g} is written as a similarity of at least "
                     f"{ratio:g} (difflib ratio)", None)
    return {"similar": {"value": text, "threshold": ratio}}


def _not_carried_reason(base: str, negated: bool) -> tuple[str, str | None]:
    if base in NOT_CARRIED:
        return NOT_CARRIED[base]
    if base in NGRAM:
        return "there is no n-gram overlap metric", f"use a `similar` check or {PYTHON_CHECK}"
    if base in RAG:
        return "retrieval metrics need the retrieved context", "write a criterion describing what the answer needs"
    if base.startswith("is-valid-openai") or base in ("is-xml", "contains-xml", "is-sql", "contains-sql", "is-html",
                                                      "contains-html", "classifier", "finish-reason"):
        return "no check of this kind", f"use a `regex` check or {PYTHON_CHECK}"
    if negated:
        return "the negation of this assert has no counterpart", f"use {PYTHON_CHECK}"
    return "no counterpart", f"use {PYTHON_CHECK}, or a criterion"


def _judged(config: Config, base: str, value: Any, threshold: float | None, weight: float, name: str, where: str,
            plan: Plan, item: Mapping[str, Any]) -> Dim | None:
    text = _criterion_text(value)
    if text is None:
        raise config.error(f"{where}.value", f"{base} needs the text it grades by", "write `value: <criterion>`")
    text, protected = protect_literal_braces(text)
    for slot in protected:
        plan.not_carried(where, "braces", f"`{{{slot}}}` is text in promptfoo but a slot here; it is written "
                         f"`{{ {slot} }}`", None)
    if item.get("provider") is not None:
        plan.not_carried(f"{where}.provider", None, "one judge model grades every criterion",
                         "set `judge: {model: ...}` in suites/<name>/agents.yaml")
    if base == "llm-rubric":
        judge: dict[str, Any] = {}
        if threshold is None:  # promptfoo passes on the judge's pass: true
            judge = {"scoring": {1.0: "the statement in the rubric is true of the output (pass)",
                                 0.0: "the statement in the rubric is not true of the output (fail)"},
                     "exhaustive": True}
        return Dim(name, weight, threshold if threshold is not None else 1.0, text, judge=judge, kind=base)
    if base == "model-graded-closedqa":
        note = plan.not_carried(where, base, "promptfoo's closed-QA prompt: graded with the llm-rubric prompt, as "
                                "choices Y and N", f"graders/closedqa judges it when {ONE_KIND}, one in every test")
        return Dim(name, weight, 1.0, f"Does the output meet this criterion? {text}",
                   judge={"choices": {"Y": {"score": 1, "description": "the output meets the criterion"},
                                      "N": {"score": 0, "description": "the output does not meet the criterion"}}},
                   kind=base, criterion=text, note=note)
    if base in ("factuality", "model-graded-factuality"):
        plan.not_carried(where, base, "promptfoo's factuality prompt: graded with the llm-rubric prompt, as choices "
                         "A to E", None)
        scores = _factuality_scores(item)
        choices = {label: {"score": scores.get(label, score), "description": text_}
                   for label, (score, text_) in FACTUALITY_CHOICES.items()}
        return Dim(name, weight, 1.0, f"Compare the factual content of the output with this expert answer: {text}",
                   judge={"choices": choices}, kind=base)
    note = plan.not_carried(where, base, "G-Eval's generated evaluation steps: the criterion is rated 0 to 10 "
                            "without them", f"add `steps:` (a list) to the criterion; graders/g-eval writes them "
                            f"when {ONE_KIND}, at most one a test")
    return Dim(name, weight, threshold if threshold is not None else 0.7, text, judge={"scale": [0, 10]}, kind=base,
               criterion=text, note=note)


def _factuality_scores(item: Mapping[str, Any]) -> dict[str, float]:
    options = item.get("options") if isinstance(item.get("options"), Mapping) else {}
    factuality = options.get("factuality") if isinstance(options.get("factuality"), Mapping) else {}
    return {label: float(factuality[key]) for label, key in FACTUALITY_OPTIONS.items()
            if isinstance(factuality.get(key), (int, float))}


def _assert_transform(item: Mapping[str, Any], test_transform: dict[str, Any] | None, where: str,
                      plan: Plan) -> dict[str, Any] | None | bool:
    """The check's transform: the test's, then the assert's (both as JSON paths); False when it cannot be."""
    if "transform" not in item:
        return test_transform
    own = _json_path_of(str(item["transform"]))
    if own is None:
        plan.not_carried(f"{where}.transform", "JavaScript", f"`{item['transform']}` does not run here",
                         PYTHON_TRANSFORM)
        return False
    if own == "":
        return test_transform
    prefix = test_transform["json_path"] + "." if test_transform else ""
    return {"json_path": prefix + own}


def transform_of(options: Any, where: str, plan: Plan) -> dict[str, Any] | None:
    """A test's or defaultTest's ``options.transform`` as ``{json_path: ...}``; None when there is none (or
    when ``JSON.parse(output)`` needs none: the JSON checks parse the artifact themselves)."""
    if not isinstance(options, Mapping) or options.get("transform") is None:
        return None
    text = str(options["transform"])
    path = _json_path_of(text)
    if path is None:
        plan.not_carried(where, "JavaScript", f"`{' '.join(text.split())}` does not run here",
                         PYTHON_TRANSFORM)
        return None
    return {"json_path": path} if path else None


_PATH_STEP = r"(?:\.[A-Za-z_$][\w$]*|\[\d+\]|\[['\"][^'\"]+['\"]\])"


def _json_path_of(text: str) -> str | None:
    """``output.a.b[0]`` or ``JSON.parse(output).a`` as the dotted path ``a.b.0``; "" for the whole JSON; None for
    JavaScript that is more than a path."""
    body = text.strip().rstrip(";").strip()
    match = re.fullmatch(rf"(?:JSON\.parse\(\s*output\s*\)|output)((?:{_PATH_STEP})*)", body)
    if not match:
        return None
    steps = re.findall(r"\.([A-Za-z_$][\w$]*)|\[(\d+)\]|\[['\"]([^'\"]+)['\"]\]", match[1])
    return ".".join(next(part for part in step if part) for step in steps)


def _text_value(value: Any) -> Any:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    return value


def _criterion_text(value: Any) -> str | None:
    """What a judge grades by: text, a list of texts (joined), or a mapping (as JSON)."""
    if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
        return "; ".join(value)
    if isinstance(value, Mapping):
        return json.dumps(value, ensure_ascii=False, default=str)
    value = _text_value(value)
    return value if isinstance(value, str) and value.strip() else None


def _phrases(value: Any) -> list[str]:
    if isinstance(value, str):
        return [part.strip() for part in value.split(",") if part.strip()]
    if isinstance(value, list) and value and all(isinstance(v, (str, int, float)) for v in value):
        return [str(v) for v in value]
    return []


def _escaped(text: str) -> str:
    """``text`` as a regular expression matching it literally; its slots stay slots."""
    parts, last = [], 0
    for match in slots.SLOT.finditer(text):
        parts.append(re.escape(text[last:match.start()]) + match[0])
        last = match.end()
    return "".join(parts) + re.escape(text[last:])
