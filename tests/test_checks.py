"""Deterministic rubric checks: what a rubric author writes under `check:` and what they get back."""

from __future__ import annotations

import datetime as dt
import json
import sys
import textwrap
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from harness.base.errors import AgentRunError, HarnessConfigError
from harness.checks import KNOWN_KINDS, CheckContext, CheckResult, parse_check

FIELD = "dimensions.d.check"
TODAY = dt.date(2026, 1, 31)
CTX = CheckContext(inputs={}, today=TODAY)


def rubric(tmp_path: Path) -> Path:
    return tmp_path / "rubrics" / "target-quality.yaml"


def parse(raw: Any, tmp_path: Path):
    return parse_check(raw, path=rubric(tmp_path), field=FIELD, base_dir=tmp_path, import_root=tmp_path)


def run(raw: Any, tmp_path: Path, artifact: str, context: CheckContext = CTX) -> CheckResult:
    return parse(raw, tmp_path).run(artifact, context)


def config_error(raw: Any, tmp_path: Path) -> HarnessConfigError:
    with pytest.raises(HarnessConfigError) as info:
        parse(raw, tmp_path)
    err = info.value
    text = str(err)
    assert text.startswith(f"{rubric(tmp_path)}: {FIELD}"), text
    assert err.fix, text
    assert "(fix: " in text
    assert "\n" not in text
    return err


# ------------------------------------------------------------------ regex


def test_regex_shorthand_passes_and_fails(tmp_path: Path) -> None:
    check = parse({"regex": r"BU:\s*(Bitwage|TeamPay|Mining)"}, tmp_path)
    assert check.kind == "regex"
    ok = check.run("Company: Acme\nBU: TeamPay\n", CTX)
    assert ok.score == 1.0
    assert "1 match" in ok.reason
    bad = check.run("Company: Acme\n", CTX)
    assert bad.score == 0.0
    assert "0 matches" in bad.reason and "need at least 1" in bad.reason
    assert bad.fixes and "Add text matching" in bad.fixes[0]


def test_regex_flags_and_min_count(tmp_path: Path) -> None:
    raw = {"regex": {"pattern": "^source: https?://", "flags": "im", "min_count": 2}}
    assert run(raw, tmp_path, "SOURCE: http://a\nsource: https://b\n").score == 1.0
    one = run(raw, tmp_path, "Source: http://a\n")
    assert one.score == 0.0
    assert "1 match " in one.reason and "need at least 2" in one.reason


def test_regex_must_not_match(tmp_path: Path) -> None:
    raw = {"regex": {"pattern": r"\bTODO\b", "must_match": False}}
    assert run(raw, tmp_path, "all done").score == 1.0
    bad = run(raw, tmp_path, "TODO fill in; TODO check")
    assert bad.score == 0.0
    assert "2 matches" in bad.reason and "'TODO'" in bad.reason
    assert bad.fixes[0].startswith("Remove text matching")


# ------------------------------------------------------------------ contains


def test_contains_scores_fraction_of_all_and_names_missing(tmp_path: Path) -> None:
    raw = {"contains": {"all": ["LinkedIn", "Head of Payroll", "source"], "any": ["Bitwage", "TeamPay"]}}
    full = run(raw, tmp_path, "Jane, head of\npayroll (linkedin). Source: x. BU: teampay")
    assert full.score == 1.0 and full.fixes == ()
    partial = run(raw, tmp_path, "Jane, Head of Payroll. BU: Bitwage")
    assert partial.score == pytest.approx(1 / 3)
    assert "1/3 required phrases present" in partial.reason
    assert "'LinkedIn'" in partial.reason
    assert partial.fixes == ("Add 'LinkedIn'", "Add 'source'")


def test_contains_any_is_a_gate(tmp_path: Path) -> None:
    raw = {"contains": {"all": ["LinkedIn"], "any": ["Bitwage", "TeamPay", "Mining"]}}
    result = run(raw, tmp_path, "LinkedIn profile found, no BU")
    assert result.score == 0.0
    assert "none of 'Bitwage', 'TeamPay', 'Mining' present" in result.reason
    assert result.fixes == ("Add at least one of 'Bitwage', 'TeamPay', 'Mining'",)


def test_contains_whole_words_and_case_sensitivity(tmp_path: Path) -> None:
    assert run({"contains": {"any": ["AI"]}}, tmp_path, "she said so").score == 0.0
    raw = {"contains": {"all": ["Bitwage"], "case_sensitive": True}}
    assert run(raw, tmp_path, "bitwage").score == 0.0
    assert run(raw, tmp_path, "Bitwage.").score == 1.0


# ------------------------------------------------------------------ json_schema

TARGET_SCHEMA = {
    "type": "object",
    "required": ["company", "buyer"],
    "properties": {"company": {"type": "string"}, "buyer": {"type": "string"}, "date": {"format": "date"}},
}


def test_json_schema_whole_document(tmp_path: Path) -> None:
    raw = {"json_schema": {"schema": TARGET_SCHEMA}}
    good = run(raw, tmp_path, 'Here you go:\n```json\n{"company": "Acme", "buyer": "Jane"}\n```\n')
    assert good.score == 1.0
    bad = run(raw, tmp_path, '{"company": 3, "date": "2026-13-01"}')
    assert bad.score == 0.0
    assert bad.reason.startswith("3 schema errors: ")
    assert "company: 3 is a number, not text" in bad.reason
    assert "date: '2026-13-01' is not a valid date" in bad.reason
    assert "buyer: missing" in bad.reason
    assert len(bad.fixes) == 3


def test_json_schema_unparseable_json_is_a_score_not_an_exception(tmp_path: Path) -> None:
    result = run({"json_schema": {"schema": TARGET_SCHEMA}}, tmp_path, "```json\n{\"company\": \n```")
    assert result.score == 0.0
    assert result.reason.startswith("```json block is not valid JSON: ")
    assert "line 2" in result.reason
    plain = run({"json_schema": {"schema": TARGET_SCHEMA, "source": "text"}}, tmp_path, "not json")
    assert plain.reason.startswith("artifact is not valid JSON")


def test_json_schema_json_block_source_requires_a_block(tmp_path: Path) -> None:
    result = run({"json_schema": {"schema": TARGET_SCHEMA, "source": "json_block"}}, tmp_path, '{"a": 1}')
    assert result.score == 0.0
    assert "no ```json block" in result.reason


def test_json_schema_items_scores_fraction_and_names_invalid_elements(tmp_path: Path) -> None:
    (tmp_path / "schemas").mkdir()
    (tmp_path / "schemas" / "target.json").write_text(json.dumps(TARGET_SCHEMA))
    raw = {"json_schema": {"schema": "schemas/target.json", "items": "data.targets"}}
    doc = {"data": {"targets": [
        {"company": "Acme", "buyer": "Jane"},
        {"company": "Globex"},
        {"id": 7, "company": 1, "buyer": "Bo"},
        {"buyer": "Al"},
    ]}}
    result = run(raw, tmp_path, f"```json\n{json.dumps(doc)}\n```")
    assert result.score == 0.25
    assert result.reason.startswith("1/4 items in 'data.targets' valid; invalid: ")
    assert result.fixes == (
        "Fix item 1 'Globex': data.targets[1].buyer: missing",
        "Fix item 2 '7': data.targets[2].company: 1 is a number, not text",
        "Fix item 3: data.targets[3].company: missing",
    )


def test_json_schema_items_path_must_lead_to_a_list(tmp_path: Path) -> None:
    raw = {"json_schema": {"schema": TARGET_SCHEMA, "items": "targets"}}
    assert "no value at 'targets'" in run(raw, tmp_path, '{"other": []}').reason
    assert "is a dict, not a list" in run(raw, tmp_path, '{"targets": {}}').reason
    empty = run(raw, tmp_path, '{"targets": []}')
    assert empty.score == 0.0 and "empty list" in empty.reason



def test_json_schema_errors_read_in_the_order_of_the_list(tmp_path: Path) -> None:
    raw = {"json_schema": {"schema": {"type": "array", "items": {"type": "integer"}}}}
    result = run(raw, tmp_path, json.dumps([1, "two", 3, 4, 5, 6, 7, 8, 9, 10, "eleven"]))
    assert result.fixes == ("Fix [1]: 'two' is text, not a whole number",
                            "Fix [10]: 'eleven' is text, not a whole number")


def test_json_schema_checks_the_formats_of_the_schemas_own_draft(tmp_path: Path) -> None:
    draft7 = {"$schema": "http://json-schema.org/draft-07/schema#", "properties": {"on": {"format": "date"}}}
    result = run({"json_schema": {"schema": draft7}}, tmp_path, '{"on": "2026-02-30"}')
    assert result.score == 0.0 and "on: '2026-02-30' is not a valid date" in result.reason


@pytest.mark.parametrize(("schema", "problem"), [
    ({"properties": {"a": {"type": "strin"}}},
     "inline schema is not a valid JSON Schema at properties.a.type: 'strin' is not a JSON Schema type (use one of "
     "array, boolean, integer, null, number, object, string)"),
    ({"properties": {"a": {"anyOf": [{"minimum": "1"}]}}},
     "inline schema is not a valid JSON Schema at properties.a.anyOf[0].minimum: '1' is text, not a number"),
])
def test_a_broken_schema_names_the_place_inside_it_in_our_words(tmp_path: Path, schema: Any, problem: str) -> None:
    err = config_error({"json_schema": {"schema": schema}}, tmp_path)
    assert err.field == f"{FIELD}.json_schema.schema" and err.problem == problem
    assert "draft 2020-12" in (err.fix or "")


# ------------------------------------------------------------------ length


def test_length_bounds(tmp_path: Path) -> None:
    raw = {"length": {"min_words": 3, "max_words": 5, "max_lines": 2}}
    ok = run(raw, tmp_path, "one two three four")
    assert ok.score == 1.0
    assert ok.reason == "4 words (3..5); 1 lines (max 2)"
    long = run(raw, tmp_path, "a b c\nd e f\ng")
    assert long.score == 0.0
    assert "7 words (3..5)" in long.reason and "3 lines (max 2)" in long.reason
    assert long.fixes == ("Shorten to at most 5 words (now 7)", "Shorten to at most 2 lines (now 3)")
    short = run({"length": {"min_chars": 10}}, tmp_path, "tiny")
    assert short.fixes == ("Lengthen to at least 10 chars (now 4)",)


# ------------------------------------------------------------------ banned_phrases


def test_banned_phrases(tmp_path: Path) -> None:
    check = parse({"banned_phrases": ["synergy", "as an AI", "circle back"]}, tmp_path)
    assert check.run("Plain, specific prose.", CTX).score == 1.0
    bad = check.run("Synergy! As an\nAI, I will circle back. synergy", CTX)
    assert bad.score == 0.0
    assert bad.reason == "banned phrases found: 'synergy' x2, 'as an AI' x1, 'circle back' x1"
    assert bad.fixes == (
        "Remove banned phrase 'synergy'", "Remove banned phrase 'as an AI'", "Remove banned phrase 'circle back'",
    )
    strict = parse({"banned_phrases": {"phrases": ["AI"], "case_sensitive": True}}, tmp_path)
    assert strict.run("ai said", CTX).score == 1.0
    assert strict.run("AI said", CTX).score == 0.0


# ------------------------------------------------------------------ date_age


def test_date_age_max_days_with_pinned_as_of(tmp_path: Path) -> None:
    raw = {"date_age": {"max_days": 14, "as_of": dt.date(2026, 1, 31)}}
    text = "Funding 2026-01-20; hired 2026-01-29; post 2026-02-03 (future); old news 2025-12-01; again 2026-01-20"
    result = run(raw, tmp_path, text, CheckContext(inputs={}, today=dt.date(2030, 1, 1)))
    assert result.score == 0.75
    assert result.reason == "3/4 dates within 14 days of 2026-01-31; stale: 2025-12-01 (61 days)"
    assert result.fixes == ("Replace stale date 2025-12-01 (61 days old as of 2026-01-31) with one within 14 days",)


def test_date_age_windows_mean_and_min(tmp_path: Path) -> None:
    windows = {14: 1.0, 30: 0.8, "60": 0.5}
    text = "2026-01-25 2026-01-10 2025-12-15 2025-06-01"  # ages 6, 21, 47, 244
    mean = run({"date_age": {"windows": windows}}, tmp_path, text)
    assert mean.score == pytest.approx((1.0 + 0.8 + 0.5 + 0.0) / 4)
    assert mean.reason.startswith(
        "1/4 dates within 14 days of 2026-01-31; mean 0.57; stale: 2026-01-10 (21 days, 0.80)"
    )
    assert len(mean.fixes) == 3
    low = run({"date_age": {"windows": windows, "aggregate": "min"}}, tmp_path, "2026-01-25 2026-01-10")
    assert low.score == 0.8


def test_date_age_as_of_from_input_custom_pattern_and_none_found(tmp_path: Path) -> None:
    raw = {"date_age": {"max_days": 30, "pattern": r"Trigger date: (\S+)", "as_of": {"input": "run_date"},
                        "none_found": 0.2}}
    ctx = CheckContext(inputs={"run_date": "2026-03-01"}, today=TODAY)
    assert run(raw, tmp_path, "Founded 1999-01-01. Trigger date: 2026-02-15", ctx).score == 1.0
    missing = run(raw, tmp_path, "Founded 1999-01-01.", ctx)
    assert missing.score == 0.2
    assert missing.reason.startswith("no dates matching /Trigger date: (\\S+)/ found")
    bogus = run(raw, tmp_path, "Trigger date: soon", ctx)
    assert bogus.score == 0.2 and "ignored unparseable 'soon'" in bogus.reason
    with pytest.raises(HarnessConfigError, match=r"as_of\.input: the case has no input 'run_date'.*fix: add inputs"):
        run(raw, tmp_path, "Trigger date: 2026-02-15", CTX)


def test_date_age_custom_format(tmp_path: Path) -> None:
    raw = {"date_age": {"max_days": 7, "pattern": r"on (\w{3} \d{1,2}, \d{4})", "format": "%b %d, %Y"}}
    assert run(raw, tmp_path, "raised on Jan 28, 2026").score == 1.0
    assert run(raw, tmp_path, "raised on Jan 02, 2026").score == 0.0


# ------------------------------------------------------------------ python


@pytest.fixture
def user_module(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[str]:
    """A check module in tmp_path with a name unique to the test, removed from sys.modules afterwards."""
    name = "rubric_checks_" + "".join(c if c.isalnum() else "_" for c in request.node.name)
    (tmp_path / f"{name}.py").write_text(textwrap.dedent('''
        from harness.checks import CheckResult

        def as_float(artifact, context):
            return 0.5

        def as_tuple(artifact, context, word="ok"):
            return (1.0 if word in artifact else 0.0, f"looked for {word}")

        def as_dict(artifact, context):
            return {"score": 0.25, "reason": "one of four", "fixes": ["Add three more"]}

        def as_result(artifact, context):
            return CheckResult(0.75, "from input " + context.inputs["x"], ("Do a thing",))

        def too_high(artifact, context):
            return 1.5

        def wrong_type(artifact, context):
            return "0.5"

        def bad_dict(artifact, context):
            return {"score": 1.0, "why": "x"}

        def boom(artifact, context):
            raise ValueError("no sources\\nsecond line")

        NOT_CALLABLE = 3
    '''))
    yield name
    sys.modules.pop(name, None)


def test_python_callable_return_shapes(tmp_path: Path, user_module: str) -> None:
    m = user_module
    f = run({"python": f"{m}:as_float"}, tmp_path, "x")
    assert (f.score, f.fixes) == (0.5, ())
    assert f.reason == f"{m}:as_float scored 0.50"
    raw = {"python": {"function": f"{m}:as_tuple", "options": {"word": "Acme"}}}
    assert run(raw, tmp_path, "Acme Corp") == CheckResult(1.0, "looked for Acme")
    assert run({"python": f"{m}:as_dict"}, tmp_path, "x") == CheckResult(0.25, "one of four", ("Add three more",))
    ctx = CheckContext(inputs={"x": "case"}, today=TODAY)
    expected = CheckResult(0.75, "from input case", ("Do a thing",))
    assert run({"python": f"{m}:as_result"}, tmp_path, "x", ctx) == expected
    assert str(tmp_path) not in sys.path


@pytest.mark.parametrize(
    ("function", "message"),
    [
        ("too_high", r"returned score 1\.5, outside 0\.0\.\.1\.0"),
        ("wrong_type", r"returned score '0\.5' \(str\)"),
        ("bad_dict", r"returned a dict with unknown keys why"),
        ("boom", r"^check rubric_checks_\w+:boom raised ValueError: no sources second line$"),
    ],
)
def test_python_callable_bugs_are_agent_run_errors(
    tmp_path: Path, user_module: str, function: str, message: str
) -> None:
    check = parse({"python": f"{user_module}:{function}"}, tmp_path)
    with pytest.raises(AgentRunError, match=message) as info:
        check.run("x", CTX)
    assert "\n" not in str(info.value)


def test_python_module_name_taken_by_another_root(tmp_path: Path, user_module: str) -> None:
    parse({"python": f"{user_module}:as_float"}, tmp_path)
    other = tmp_path / "other"
    other.mkdir()
    (other / f"{user_module}.py").write_text("def as_float(a, c):\n    return 1.0\n")
    with pytest.raises(HarnessConfigError, match="already taken"):
        parse_check({"python": f"{user_module}:as_float"}, path=rubric(tmp_path), field=FIELD,
                    base_dir=other, import_root=other)


def test_python_checks_parse_concurrently_from_separate_roots(tmp_path: Path) -> None:
    roots = []
    for n in range(8):
        root = tmp_path / f"root{n}"
        root.mkdir()
        (root / f"concurrent_check_{n}.py").write_text(f"def score(artifact, context):\n    return {n} / 10\n")
        roots.append(root)
    before = list(sys.path)

    def parse_and_run(n: int) -> float:
        check = parse_check({"python": f"concurrent_check_{n}:score"}, path=rubric(tmp_path), field=FIELD,
                            base_dir=roots[n], import_root=roots[n])
        return check.run("x", CTX).score

    try:
        with ThreadPoolExecutor(max_workers=8) as pool:
            assert list(pool.map(parse_and_run, range(8))) == [n / 10 for n in range(8)]
    finally:
        for n in range(8):
            sys.modules.pop(f"concurrent_check_{n}", None)
    assert sys.path == before


# ------------------------------------------------------------------ configuration errors


def test_unknown_kind_lists_known_kinds(tmp_path: Path) -> None:
    err = config_error({"regx": "a"}, tmp_path)
    assert err.field == f"{FIELD}.regx"
    assert "(did you mean 'regex'?)" in err.problem
    for kind in KNOWN_KINDS:
        assert kind in err.fix


@pytest.mark.parametrize(
    ("raw", "field", "problem"),
    [
        ("regex", FIELD, "expected a mapping with one key"),
        ({"regex": "a", "length": {"max_chars": 1}}, FIELD, "exactly one kind"),
        ({"regex": "([a-z"}, f"{FIELD}.regex", "invalid regular expression"),
        ({"regex": {"pattern": "a", "flags": "iq"}}, f"{FIELD}.regex.flags", "unknown regex flag"),
        ({"regex": {"pattern": "a", "min_cout": 2}}, f"{FIELD}.regex.min_cout", "did you mean 'min_count'"),
        ({"regex": {"flags": "i"}}, f"{FIELD}.regex", "needs at least one of pattern"),
        ({"regex": {"pattern": "a", "min_count": 0}}, f"{FIELD}.regex.min_count", "whole number >= 1"),
        ({"regex": {"pattern": "a", "must_match": "no"}}, f"{FIELD}.regex.must_match", "expected true or false"),
        ({"regex": {"pattern": "a", "must_match": False, "min_count": 2}}, f"{FIELD}.regex.min_count", "no meaning"),
        ({"contains": {"case_sensitive": True}}, f"{FIELD}.contains", "needs at least one of all or any"),
        ({"contains": {"all": {"LinkedIn": 1}}}, f"{FIELD}.contains.all", "text or a non-empty list of text"),
        ({"contains": {"any": []}}, f"{FIELD}.contains.any", "non-empty list of text"),
        ({"contains": {"all": ["ok", ""]}}, f"{FIELD}.contains.all[1]", "non-empty text"),
        ({"length": {}}, f"{FIELD}.length", "needs at least one of"),
        ({"length": {"min_words": 10, "max_words": 5}}, f"{FIELD}.length.max_words", "is below min_words"),
        ({"length": {"max_chars": -1}}, f"{FIELD}.length.max_chars", "whole number >= 0"),
        ({"banned_phrases": []}, f"{FIELD}.banned_phrases", "non-empty list"),
        ({"banned_phrases": {"phrases": ["x"], "case": True}}, f"{FIELD}.banned_phrases.case", "unknown key"),
        ({"date_age": {}}, f"{FIELD}.date_age", "needs at least one of max_days or windows"),
        ({"date_age": {"max_days": 1, "windows": {1: 1.0}}}, f"{FIELD}.date_age", "both max_days and windows"),
        ({"date_age": {"windows": {14: 1.5}}}, f"{FIELD}.date_age.windows.14", "1.5 is outside 0..1"),
        ({"date_age": {"windows": {14: 0.5, 30: 1.0}}}, f"{FIELD}.date_age.windows.30", "more than the 0.5"),
        ({"date_age": {"windows": {"soon": 1.0}}}, f"{FIELD}.date_age.windows.soon", "whole number"),
        ({"date_age": {"max_days": 1, "pattern": r"\d+"}}, f"{FIELD}.date_age.pattern", "needs exactly 1"),
        ({"date_age": {"max_days": 1, "as_of": "last week"}}, f"{FIELD}.date_age.as_of", "expected a date"),
        ({"date_age": {"max_days": 1, "as_of": {"inputs": "d"}}}, f"{FIELD}.date_age.as_of.inputs", "unknown key"),
        ({"date_age": {"max_days": 1, "aggregate": "max"}}, f"{FIELD}.date_age.aggregate", "unknown aggregate"),
        ({"date_age": {"max_days": 1, "none_found": 2}}, f"{FIELD}.date_age.none_found", "2 is outside 0..1"),
        ({"json_schema": {"schema": {"type": "objekt"}}}, f"{FIELD}.json_schema.schema", "not a valid JSON Schema"),
        ({"json_schema": {"schema": "missing.json"}}, f"{FIELD}.json_schema.schema", "cannot read schema file"),
        ({"json_schema": {"schema": 3}}, f"{FIELD}.json_schema.schema", "inline mapping or a file path"),
        ({"json_schema": {"schema": {}, "source": "html"}}, f"{FIELD}.json_schema.source", "unknown source"),
        ({"json_schema": {"schema": {}, "items": "a..b"}}, f"{FIELD}.json_schema.items", "bad dotted path"),
        ({"python": "no_colon"}, f"{FIELD}.python", "is not 'module:function'"),
        ({"python": "surely_missing_module_xyz:f"}, f"{FIELD}.python",
         "module 'surely_missing_module_xyz' cannot be imported: not found"),
        ({"python": {"function": "json:loads", "extra": 1}}, f"{FIELD}.python.extra", "unknown key"),
        ({"python": {"function": "json:loads", "options": [1]}}, f"{FIELD}.python.options", "mapping of keyword"),
    ],
)
def test_bad_check_config(tmp_path: Path, raw: Any, field: str, problem: str) -> None:
    err = config_error(raw, tmp_path)
    assert err.field == field
    assert problem in err.problem


def test_bad_schema_file_contents(tmp_path: Path) -> None:
    (tmp_path / "broken.json").write_text('{"type": ')
    err = config_error({"json_schema": {"schema": "broken.json"}}, tmp_path)
    assert "schema file 'broken.json' is not valid JSON" in err.problem
    (tmp_path / "list.json").write_text("[]")
    err = config_error({"json_schema": {"schema": "list.json"}}, tmp_path)
    assert "is a list, not a JSON Schema object" in err.problem


def test_python_import_problems_name_the_culprit(tmp_path: Path, user_module: str) -> None:
    err = config_error({"python": f"{user_module}:as_flaot"}, tmp_path)
    assert f"module {user_module!r} has no function 'as_flaot'" in err.problem
    assert "did you mean 'as_float'?" in err.fix
    err = config_error({"python": f"{user_module}:NOT_CALLABLE"}, tmp_path)
    assert "is a int, not a function" in err.problem
    err = config_error({"python": {"function": f"{user_module}:as_float", "options": {"word": "x"}}}, tmp_path)
    assert "cannot be called as as_float(artifact, context, **options) with word" in err.problem

    (tmp_path / "needs_dep_mod.py").write_text("import surely_missing_dep_xyz\n")
    (tmp_path / "syntax_err_mod.py").write_text("def f(:\n")
    try:
        err = config_error({"python": "needs_dep_mod:f"}, tmp_path)
        assert "it needs 'surely_missing_dep_xyz'" in err.problem
        err = config_error({"python": "syntax_err_mod:f"}, tmp_path)
        assert "module 'syntax_err_mod' cannot be imported: SyntaxError" in err.problem
    finally:
        sys.modules.pop("needs_dep_mod", None)
        sys.modules.pop("syntax_err_mod", None)
    assert str(tmp_path) not in sys.path
