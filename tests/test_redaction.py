"""Secrets are never written: the redaction filter, the environment children get, and a leaky producer end to end."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from conftest import JUDGED_CASES, QUALITY_RUBRIC, Project
from harness.base.redaction import (
    child_environment,
    is_credential_name,
    redact,
    redact_json,
    redact_objects,
    redacted_json,
)

CANARY_KEY = "sk-ant-api03-CANARYcanaryCANARY0123456789abcdefghij"
CANARY_PASSWORD = "canary-pass-5c1e7d"
CANARY_DB_PASS = "canary-dbpass-93ab27"
AWS_KEY_ID = "AKIACANARY0123456789"


# ---------------------------------------------------------------------------------------------- the filter


@pytest.mark.parametrize(("text", "expected"), [
    ("key=sk-ant-api03-abcdefghijklmnopqrstuvwxyz0123", "key=[REDACTED:anthropic-key]"),
    ("sk-proj-abcdefghijklmnopqrstuvwxyz012345 used", "[REDACTED:openai-key] used"),
    ("id AKIAABCDEFGHIJKLMNOP here", "id [REDACTED:aws-access-key-id] here"),
    ("ghp_abcdefghijklmnopqrstuvwxyz0123456789AB", "[REDACTED:github-token]"),
    ("github_pat_" + "a" * 50, "[REDACTED:github-token]"),
    ("Authorization: Bearer abcdefghijklmnopqrstuvwxyz", "Authorization: Bearer [REDACTED:bearer-token]"),
    ("nothing secret here: sk-short, AKIA1", "nothing secret here: sk-short, AKIA1"),
])
def test_key_shapes_are_redacted_wherever_they_come_from(text: str, expected: str) -> None:
    assert redact(text) == expected


def test_values_of_credential_variables_are_redacted_by_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DB_PASS", "hunter2-hunter2")          # the name the old filter missed
    monkeypatch.setenv("MY_SERVICE_TOKEN", "tok-0123456789")
    monkeypatch.setenv("KEYBOARD_LAYOUT", "dvorak-intl")      # KEY inside a word: not a credential
    text = "db hunter2-hunter2, token tok-0123456789, layout dvorak-intl"
    assert redact(text) == "db [REDACTED:DB_PASS], token [REDACTED:MY_SERVICE_TOKEN], layout dvorak-intl"


def test_a_key_set_after_start_up_is_redacted_too(monkeypatch: pytest.MonkeyPatch) -> None:
    assert redact("late-secret-value") == "late-secret-value"
    monkeypatch.setenv("LATE_SECRET", "late-secret-value")
    assert redact("late-secret-value") == "[REDACTED:LATE_SECRET]"


def test_short_values_are_not_redacted_by_value(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DEBUG_TOKEN", "1")
    monkeypatch.setenv("FEATURE_KEY", "true")
    assert redact("1 passed, true") == "1 passed, true"


def test_names_that_look_like_credentials() -> None:
    assert all(map(is_credential_name, ["ANTHROPIC_API_KEY", "DB_PASS", "DB_PASSWORD", "AWS_SECRET_ACCESS_KEY",
                                        "GITHUB_TOKEN", "SENTRY_DSN", "GPG_PASSPHRASE", "session_cookie"]))
    assert not any(map(is_credential_name, ["PATH", "HOME", "PWD", "KEYBOARD", "MONKEY", "SSL_CERT_FILE",
                                            "XDG_SESSION_ID", "PASSENGER"]))


def test_redact_json_reaches_every_string(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("API_TOKEN", 'tok"with\\quotes')
    data = {"a": ['tok"with\\quotes', 3, None], 'tok"with\\quotes': {"b": True}}
    assert redact_json(data) == {"a": ["[REDACTED:API_TOKEN]", 3, None], "[REDACTED:API_TOKEN]": {"b": True}}


@pytest.mark.parametrize("ascii_only", [True, False])
def test_json_text_of_a_record_holds_no_secret_however_it_is_escaped(monkeypatch: pytest.MonkeyPatch,
                                                                     ascii_only: bool) -> None:
    # the text is scanned once as written: a secret with a quote, a backslash or letters beyond ASCII reads escaped
    # there (\" \\ \u00e9 with the default ensure_ascii), and must still be found and redacted
    monkeypatch.setenv("API_TOKEN", 'tök"with\\quotes-é')
    data = {"a": ['tök"with\\quotes-é', 3, None], "b": {"c": "clean"}, 'tök"with\\quotes-é': 1}
    text = redacted_json(data, ensure_ascii=ascii_only, sort_keys=True)
    assert json.loads(text) == {"a": ["[REDACTED:API_TOKEN]", 3, None], "b": {"c": "clean"}, "[REDACTED:API_TOKEN]": 1}
    clean = {"a": ["nothing secret", 3], "b": "é"}
    assert redacted_json(clean, ensure_ascii=ascii_only) == json.dumps(clean, ensure_ascii=ascii_only)


def test_redact_objects_reaches_every_string_of_a_pytest_traceback(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_SERVICE_TOKEN", CANARY_PASSWORD)

    def fails(token: str) -> None:
        raise RuntimeError(f"refused {token}")

    with pytest.raises(RuntimeError) as info:
        fails(CANARY_PASSWORD)
    shown = info.getrepr(showlocals=True, funcargs=True)
    assert CANARY_PASSWORD in str(shown)
    assert redact_objects(shown) is shown  # changed in place, its shape kept for pytest's terminal and JUnit XML
    assert CANARY_PASSWORD not in str(shown) and "refused [REDACTED:MY_SERVICE_TOKEN]" in str(shown)
    assert shown.reprcrash is not None and shown.reprcrash.message == "RuntimeError: refused [REDACTED:MY_SERVICE_TOKEN]"


def test_children_get_the_allowlist_and_what_is_declared() -> None:
    base = {"PATH": "/bin", "HOME": "/h", "LC_ALL": "C", "ANTHROPIC_API_KEY": "k" * 20, "DB_PASS": "p" * 10,
            "AWS_PROFILE": "prod", "PYTHONPATH": "/x", "MY_TOOL_HOME": "/t"}
    assert child_environment(base=base) == {"PATH": "/bin", "HOME": "/h", "LC_ALL": "C"}
    declared = child_environment(["DB_PASS", "MY_TOOL_HOME"], base=base)
    assert declared == {"PATH": "/bin", "HOME": "/h", "LC_ALL": "C", "DB_PASS": "p" * 10, "MY_TOOL_HOME": "/t"}


# ---------------------------------------------------------------------------------------------- end to end

LEAKY = '''\
"""A producer that prints its whole environment: to stderr before failing, or as its artifact."""
import json, os, sys
request = json.load(sys.stdin)
dump = json.dumps(dict(os.environ), sort_keys=True)
if request["inputs"]["mode"] == "fail":
    sys.stderr.write("producer crashed; environment: " + dump + "\\n")
    sys.exit(1)
print("hello " + dump)
'''

LEAKY_AGENTS = """\
agents:
  writer:
    rubric: quality
    producer: {command: "python leaky.py", env: [DB_PASS, HELPER_NOTE]}
    max_attempts: 1
    escalate_on_fail: false
"""

LEAKY_CASES = """\
agent: writer
cases:
  - id: crashes
    inputs: {mode: fail}
  - id: leaks-in-its-artifact
    inputs: {mode: artifact}
"""


def everything_written(root: Path) -> dict[str, str]:
    """Every file of the project as text, the SQLite databases as a dump of their rows."""
    out = {}
    for path in sorted(root.rglob("*")):
        if not path.is_file() or path.name in ("leaky.py", "pytest.ini"):
            continue
        if path.suffix == ".db":
            conn = sqlite3.connect(path)
            out[str(path)] = "\n".join(line for line in conn.iterdump())
            conn.close()
        else:
            out[str(path)] = path.read_bytes().decode("utf-8", errors="replace")
    return out


def test_a_leaky_command_producer_leaves_no_secret_anywhere(project: Project, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", CANARY_KEY)
    monkeypatch.setenv("DB_PASSWORD", CANARY_PASSWORD)
    monkeypatch.setenv("DB_PASS", CANARY_DB_PASS)            # declared: the producer sees this one...
    monkeypatch.setenv("HELPER_NOTE", f"aws id {AWS_KEY_ID}")  # ...and this, holding a key in a known shape
    project.rubric("quality", QUALITY_RUBRIC)
    project.write("leaky.py", LEAKY)
    project.agents(LEAKY_AGENTS)
    project.cases("writer", LEAKY_CASES)
    result = project.run("suites", "-rA", "--junitxml=junit.xml", "--harness-html", "report.html",
                         "--harness-markdown", "summary.md", subprocess=True)
    result.assert_outcomes(failed=2)

    written = everything_written(project.root)
    assert {"junit.xml", "report.html", "summary.md"} <= {Path(p).name for p in written}
    assert any("/WORK/" in p for p in written) and any(p.endswith("harness.db") for p in written)
    terminal = result.stdout.str() + result.stderr.str()
    for canary in (CANARY_KEY, CANARY_PASSWORD, CANARY_DB_PASS, AWS_KEY_ID):
        assert canary not in terminal
        leaks = [path for path, text in written.items() if canary in text]
        assert leaks == [], f"{canary} written to {leaks}"

    # the declared secrets reached the producer and were redacted where it printed them
    assert "[REDACTED:DB_PASS]" in terminal and "[REDACTED:aws-access-key-id]" in terminal
    artifact = next(text for path, text in written.items() if path.endswith("leaks-in-its-artifact/attempt-1.md"))
    assert "[REDACTED:DB_PASS]" in artifact
    # the undeclared ones never did: its environment had no ANTHROPIC_API_KEY and no DB_PASSWORD
    seen = json.loads(artifact.removeprefix("hello "))
    assert "ANTHROPIC_API_KEY" not in seen and "DB_PASSWORD" not in seen and "DB_PASS" in seen


@pytest.mark.parametrize(("options", "message"), [
    ("env: DB_PASS", "producer.env: expected a list of environment variable names, got 'DB_PASS'"),
    ("env: [DB-PASS]", "producer.env: expected a list of environment variable names"),
    ("timeout_s: -1", "producer.timeout_s: expected a positive number of seconds, got -1"),
    ("timeot_s: 5", "producer.timeot_s: unknown key (did you mean 'timeout_s'?) (fix: remove it or use one of: "
                    "timeout_s, env, network, read, write, memory_mb)"),
    ("network: yes please", "producer.network: expected true or false"),
    ("write: out", "producer.write: expected a list of text"),
])
def test_command_runner_options_are_checked(project: Project, options: str, message: str) -> None:
    project.rubric("quality", QUALITY_RUBRIC)
    project.agents(f"agents:\n  writer:\n    rubric: quality\n    producer: {{command: \"python x.py\", {options}}}\n")
    project.cases("writer", "agent: writer\ncases:\n  - id: a\n    inputs: {text: hi}\n")
    result = project.run("suites")
    assert message in result.stdout.str() and "Traceback" not in result.stdout.str()


# ------------------------------------------------------------------ pytest's own failure text and the JUnit XML

HOUSE_KEY = "house-secret-4f9a0c2e7b"  # a credential-looking variable's value: no key shape, redacted by its name

LEAKY_PROVIDER = '''
import os
from harness.llm.providers import Provider


class House(Provider):
    """A plugin provider whose error message carries the keys it was given."""

    name = "house"

    def send(self, request, *, batch=False):
        raise RuntimeError(f"upstream refused key {os.environ['ANTHROPIC_API_KEY']} "
                           f"(house token {os.environ['HOUSE_API_TOKEN']}, literal sk-ant-api03-{'L' * 40})")


def pytest_harness_providers():
    return {"house": House}
'''

# pytest's own tracebacks: a plain test that fails with the key in its message and a local variable, and a test
# module that fails to import with the key in its error
LEAKY_TEST = '''
import os


def test_a_plain_test_that_fails_with_a_key():
    key = os.environ["ANTHROPIC_API_KEY"]
    assert key == "something else", "the key " + key
'''
LEAKY_IMPORT = 'import os\nraise RuntimeError("cannot start with " + os.environ["HOUSE_API_TOKEN"])\n'


@pytest.mark.parametrize("workers", [(), ("-n", "2")], ids=["one-process", "xdist"])
def test_a_plugin_providers_error_with_a_key_is_one_redacted_line_in_the_terminal_and_junit_xml(
        project: Project, monkeypatch: pytest.MonkeyPatch, workers: tuple[str, ...]) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", CANARY_KEY)
    monkeypatch.setenv("HOUSE_API_TOKEN", HOUSE_KEY)
    project.judged(JUDGED_CASES)
    agents = project.root / "suites/agents.yaml"
    agents.write_text(agents.read_text().replace("claude-haiku-4-5", "house/judge-1"))
    project.write("conftest.py", LEAKY_PROVIDER)
    project.write("tests/test_plain.py", LEAKY_TEST)
    project.write("tests/test_broken_import.py", LEAKY_IMPORT)
    result = project.run("suites/", "tests/", "-rA", "-l", "--junitxml=junit.xml", "--continue-on-collection-errors",
                         *workers, subprocess=True)
    outcomes = result.parseoutcomes()
    assert outcomes["failed"] == 2 and outcomes["errors"] >= 1, outcomes  # each xdist worker reports the import error

    terminal = result.stdout.str() + result.stderr.str()
    xml = (project.root / "junit.xml").read_text(encoding="utf-8")
    for text in (terminal, xml):
        for secret in (CANARY_KEY, HOUSE_KEY, "sk-ant-api03-LLLL"):
            assert secret not in text
    # the provider's failure: one line, redacted, no traceback
    line = ("judged_writer[warm-hello] ERROR on attempt 1: model provider 'house' for house/judge-1 failed: "
            "RuntimeError: upstream refused key [REDACTED:ANTHROPIC_API_KEY] (house token "
            "[REDACTED:HOUSE_API_TOKEN], literal [REDACTED:anthropic-key]); check the provider (its plugin or its "
            "server)")
    assert line in result.stdout.lines
    assert xml.count(line.replace("'", "&apos;")) + xml.count(line) >= 1
    assert "conftest.py" not in result.stdout.str().split("warm-hello")[1].split("artifacts")[0]  # no frames
    # pytest's own traceback, its locals, its crash line and the short summary: redacted where they show the key
    assert "E       AssertionError: the key [REDACTED:ANTHROPIC_API_KEY]" in result.stdout.lines
    assert "key        = '[REDACTED:ANTHROPIC_API_KEY]'" in result.stdout.lines
    assert "cannot start with [REDACTED:HOUSE_API_TOKEN]" in terminal
    assert xml.count("[REDACTED:ANTHROPIC_API_KEY]") >= 3 and "[REDACTED:HOUSE_API_TOKEN]" in xml
