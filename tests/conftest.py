"""Shared fixtures. Other test modules may append fixtures here."""

from __future__ import annotations

import importlib
import os
from collections.abc import Iterator

import pytest

from harness.testing import FakeAnthropic
from harness.testing.fake_openai import FakeOpenAI

pytest_plugins = ["pytester"]


def _point_sdk_at(monkeypatch: pytest.MonkeyPatch, provider: str, base_url: str, api_key: str) -> None:
    """``{PROVIDER}_BASE_URL`` and a dummy ``{PROVIDER}_API_KEY``; 127.0.0.1 bypasses any proxy the machine sets."""
    monkeypatch.setenv(f"{provider}_BASE_URL", base_url)
    monkeypatch.setenv(f"{provider}_API_KEY", api_key)
    no_proxy = os.environ.get("NO_PROXY", "")
    monkeypatch.setenv("NO_PROXY", ",".join(p for p in (no_proxy, "127.0.0.1", "localhost") if p))


@pytest.fixture
def fake_anthropic(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeAnthropic]:
    """A running fake Messages API; ANTHROPIC_BASE_URL points at it and ANTHROPIC_API_KEY is a dummy."""
    with FakeAnthropic() as server:
        _point_sdk_at(monkeypatch, "ANTHROPIC", server.base_url, "sk-ant-test-dummy")
        yield server


@pytest.fixture
def fake_openai(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeOpenAI]:
    """A running fake chat-completions API; OPENAI_BASE_URL points at it and OPENAI_API_KEY is a dummy.

    The SDK is imported here, before a pytester run snapshots sys.modules: the harness preloads it on a thread,
    and a run that ends while that import is under way (a collection error) would take its half-imported modules
    away from under it."""
    importlib.import_module("openai")
    with FakeOpenAI() as server:
        _point_sdk_at(monkeypatch, "OPENAI", server.base_url, "sk-openai-test-dummy")
        yield server


# --- pytester projects for the plugin tests ---------------------------------------------------------
#
# A small, self-contained project in the pytester dir: rubrics/, suites/agents.yaml, suites/*.cases.yaml
# and Python producers/revisers as modules at the rootdir. Tests write the files they need; ``Project``
# reads back what the harness recorded (WORK/runs/..., run-log.json, harness.db).

import json  # noqa: E402
import re  # noqa: E402
import sqlite3  # noqa: E402
import sys  # noqa: E402
import textwrap  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

# Import the harness and the SDK once in this process: pytester's in-process runs then reuse these modules
# (and pydantic, jsonschema, yaml, anthropic) instead of importing them again in every run.
import anthropic  # noqa: E402,F401

# numpy (under pandas and matplotlib) refuses to be imported twice in one process, and a pytester run removes from
# sys.modules what was first imported inside it: a run whose report imported numpy would leave the next test that
# imports pandas with "cannot load module more than once per process". Imported here, it is never removed.
import numpy  # noqa: E402,F401

import harness.face.nodes  # noqa: E402,F401
import harness.face.plugin  # noqa: E402,F401

# Two deterministic dimensions: "hello" must appear (0.6) and the text stays short (0.4).
QUALITY_RUBRIC = """\
metadata:
  name: Quality
  version: "1.2.0"
  agent: writer
threshold: 0.8
dimensions:
  greeting:
    weight: 0.6
    description: "Says hello"
    scoring:
      1.0: "hello is there"
      0.0: "no hello"
    check:
      contains: {all: [hello]}
  concise:
    weight: 0.4
    description: "At most 12 words"
    check:
      length: {max_words: 12}
"""

# Producers and revisers of the test projects (module "agentlib" at the rootdir).
AGENT_MODULE = '''\
"""Test producers and revisers: the request is the JSON a command runner would get on stdin."""
import os


def produce(request):
    return request["inputs"]["text"]


def revise(request):
    """Apply the suggested fixes: "Add 'x'" adds x, "Shorten ..." keeps the first words."""
    text = request["artifact"]
    for fix in request["suggested_fixes"]:
        if fix.startswith("Add '"):
            text = fix[5:-1] + " " + text
        elif fix.startswith("Shorten"):
            text = " ".join(text.split()[:10])
    return text


def spy_revise(request):
    """revise(), after appending the request it was given to revise-requests.jsonl."""
    import json
    with open("revise-requests.jsonl", "a", encoding="utf-8") as handle:
        handle.write(json.dumps(request, default=str) + "\\n")
    return revise(request)


def stubborn(request):
    """A reviser that changes nothing: the case can never pass."""
    return request["artifact"]


def flagged(request):
    inputs = request["inputs"]
    return {"artifact": inputs["text"], "flags": inputs.get("raise", [])}


def interrupt(request):
    raise KeyboardInterrupt


def hard_exit(request):
    os._exit(3)


def broken(request):
    raise ValueError("the producer fell over")
'''

AGENTS_YAML = """\
agents:
  writer:
    rubric: quality
    producer: {python: "agentlib:produce"}
    reviser: {python: "agentlib:revise"}
    max_attempts: 3
"""

# Seed 000 section 4: every prompt file has these six sections.
PROMPT_SECTIONS = ("Role", "Inputs", "Outputs", "Instructions", "Examples", "Constraints")


def prompt_text(title: str = "Test Evaluator", *, marker: str = "EVALUATOR-PROMPT-MARKER",
                without: str | None = None) -> str:
    parts = [f"# {title}\n"]
    for name in PROMPT_SECTIONS:
        if name != without:
            parts.append(f"## {name}\n{marker if name == 'Role' else 'Some ' + name.lower() + '.'}\n")
    return "\n".join(parts)


def forget_stale_harness_modules() -> None:
    """Work around a harness bug for in-process runs (see test_two_in_process_sessions_in_a_row).

    pytester restores sys.modules after each in-process run, but a package that stays imported (``harness``)
    keeps attributes pointing at the removed submodules; ``from harness import runners`` then returns the
    stale module of an earlier session, whose classes differ from the fresh ones.
    """
    import types

    for name, module in list(sys.modules.items()):
        if module is None or not (name == "harness" or name.startswith("harness.")):
            continue
        for attr, value in list(vars(module).items()):
            if isinstance(value, types.ModuleType) and value.__name__ == f"{name}.{attr}" \
                    and sys.modules.get(value.__name__) is not value:
                delattr(module, attr)


# Two dimensions scored by the LLM judge (tone 0.5, clarity 0.3) and one by a check (greeting 0.2).
JUDGED_RUBRIC = """\
metadata:
  name: Judged Quality
  version: "2.1.0"
  agent: judged_writer
threshold: 0.8
dimensions:
  tone:
    weight: 0.5
    description: "TONE-DESCRIPTION: warm and specific"
    scoring:
      1.0: "warm"
      0.0: "cold"
  clarity:
    weight: 0.3
    description: "CLARITY-DESCRIPTION: one clear ask"
  greeting:
    weight: 0.2
    description: "Says hello"
    check:
      contains: {all: [hello]}
examples:
  gold: ["examples/judged/gold/*.md"]
  anti_patterns: ["examples/judged/anti/*.md"]
"""

JUDGED_AGENTS = """\
judge:
  model: claude-haiku-4-5
  max_tokens: 1024
  timeout_s: {timeout_s}
  max_retries: {max_retries}
agents:
  judged_writer:
    rubric: judged
    producer: {{python: "agentlib:produce"}}
    evaluator: prompts/judge.md
"""

JUDGED_CASES = """\
agent: judged_writer
cases:
  - id: warm-hello
    inputs: {text: "hello friend, shall we meet on Tuesday?"}
"""


class Project:
    """A pytester project with helpers to write its files and read the harness's records."""

    def __init__(self, pytester: pytest.Pytester):
        self.pytester = pytester
        self.root: Path = pytester.path
        self.ini()  # a harness project opts in (harness/face/activation.py)

    def ini(self, text: str = "") -> Path:
        """pytest.ini: the opt-in, then ``text`` (more ``key = value`` lines)."""
        return self.write("pytest.ini", f"[pytest]\nharness = true\n{textwrap.dedent(text)}")

    # -- files --------------------------------------------------------------------------------------
    def write(self, relpath: str, text: str) -> Path:
        path = self.root / relpath
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text), encoding="utf-8")
        return path

    def rubric(self, name: str, text: str = QUALITY_RUBRIC) -> Path:
        return self.write(f"rubrics/{name}.yaml", text)

    def agents(self, text: str = AGENTS_YAML) -> Path:
        return self.write("suites/agents.yaml", text)

    def cases(self, name: str, text: str) -> Path:
        return self.write(f"suites/{name}.cases.yaml", text)

    def standard(self, cases: str | None = None) -> Project:
        """The quality rubric, the agentlib module, one agent "writer" and (optionally) its cases."""
        self.rubric("quality")
        self.write("agentlib.py", AGENT_MODULE)
        self.agents()
        if cases is not None:
            self.cases("writer", cases)
        return self

    def judged(self, cases: str | None = JUDGED_CASES, *, timeout_s: float = 5, max_retries: int = 0) -> Project:
        """The judged rubric with its examples, an evaluator prompt and the agent "judged_writer"."""
        self.rubric("judged", JUDGED_RUBRIC)
        self.write("rubrics/examples/judged/gold/warm.md", "GOLD-EXAMPLE-MARKER hello, a warm note\n")
        self.write("rubrics/examples/judged/anti/cold.md", "ANTI-PATTERN-MARKER a cold note\n")
        self.write("suites/prompts/judge.md", prompt_text())
        self.write("agentlib.py", AGENT_MODULE)
        self.agents(JUDGED_AGENTS.format(timeout_s=timeout_s, max_retries=max_retries))
        if cases is not None:
            self.cases("judged_writer", cases)
        return self

    # -- running ------------------------------------------------------------------------------------
    def run(self, *args: str, subprocess: bool = False, forget_stale_modules: bool = True) -> pytest.RunResult:
        """Run pytest in this project (in-process unless ``subprocess``)."""
        args = ("-p", "no:cacheprovider", *args)
        if subprocess:
            return self.pytester.runpytest_subprocess(*args, timeout=60)
        if forget_stale_modules:
            forget_stale_harness_modules()
        # In this process the harness is already imported, so pytest cannot assertion-rewrite it: not news.
        return self.pytester.runpytest("-W", "ignore::pytest.PytestAssertRewriteWarning", *args)

    # -- records ------------------------------------------------------------------------------------
    @property
    def work(self) -> Path:
        return self.root / "WORK"

    def cycles(self) -> list[str]:
        runs = self.work / "runs"
        return sorted(p.name for p in runs.iterdir() if p.is_dir()) if runs.is_dir() else []

    def cycle_dir(self, cycle: str | None = None) -> Path:
        cycles = self.cycles()
        if cycle is None:
            assert len(cycles) == 1, f"expected one cycle, found {cycles}"
            cycle = cycles[0]
        return self.work / "runs" / cycle

    def run_log(self, cycle: str | None = None) -> list[dict[str, Any]]:
        return json.loads((self.cycle_dir(cycle) / "run-log.json").read_text(encoding="utf-8"))

    def execution_results(self, cycle: str | None = None) -> list[dict[str, Any]]:
        """The execution results of a cycle (the only one when not named), each line parsed, in the order written;
        a line that is not JSON fails the test."""
        path = self.cycle_dir(cycle) / "execution-results.jsonl"
        text = path.read_text(encoding="utf-8") if path.exists() else ""
        assert text == "" or text.endswith("\n"), "the last execution result is not a whole line"
        return [json.loads(line) for line in text.splitlines()]

    def connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.work / "harness.db")
        conn.row_factory = sqlite3.Row
        return conn

    def rows(self, sql: str = "SELECT * FROM agent_runs ORDER BY id", params: tuple = ()) -> list[dict[str, Any]]:
        conn = self.connect()
        try:
            return [dict(r) for r in conn.execute(sql, params)]
        finally:
            conn.close()

    def runs(self) -> list[dict[str, Any]]:
        """agent_runs joined with attempt_details, in insertion order."""
        return self.rows("SELECT r.*, d.case_id, d.outcome, d.exit_code, d.nodeid, d.rubric_name, d.model,"
                         " d.input_tokens, d.output_tokens, d.cache_write_tokens, d.cache_read_tokens, d.cost_usd,"
                         " d.cached_answers, d.dimensions AS details_dimensions FROM agent_runs r"
                         " JOIN attempt_details d ON d.run_id = r.id ORDER BY r.id")


@pytest.fixture(scope="session")
def sdk_warmed_up() -> None:
    """One real SDK call in this process before any in-process pytester run.

    The SDK imports its HTTP stack lazily on the first request. Imported inside an in-process run, those
    modules are dropped when the run ends while the SDK keeps references to their exception classes, so a
    later run's timeout would surface as a connection error. Importing them here keeps them for good.
    """
    from harness.llm import Message, ModelClient, ModelSettings
    from harness.testing import Reply

    with FakeAnthropic() as server:
        server.queue(Reply.text("warm"))
        client = ModelClient(ModelSettings(timeout_s=5, max_retries=0), api_key="sk-ant-test-dummy",
                             base_url=server.base_url)
        client.complete(system="s", messages=[Message.user("hi")])
        client.close()


@pytest.fixture
def project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest,
            sdk_warmed_up: None) -> Project:
    """An empty project. No API key and no base URL, unless the test also uses ``fake_anthropic``."""
    if "fake_anthropic" not in request.fixturenames:
        monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
        monkeypatch.delenv("ANTHROPIC_BASE_URL", raising=False)
    return Project(pytester)


def error_sections(result: pytest.RunResult) -> list[list[str]]:
    """The non-empty lines of each "ERROR collecting ..." section of a run's output, one list per section."""
    sections: list[list[str]] = []
    current: list[str] | None = None
    for line in result.outlines:
        if re.match(r"^_+ ERROR collecting .* _+$", line):
            current = []
            sections.append(current)
        elif line.startswith("=") or re.match(r"^_{3,} .* _{3,}$", line):
            current = None
        elif current is not None and line.strip():
            current.append(line)
    return sections


PYTHON = sys.executable

# The sandbox is bubblewrap's: tests of it skip where it cannot be made, except where it is required
# (.ci/run installs it and sets HARNESS_REQUIRE_SANDBOX, so there they fail instead).
from harness.sandbox import sandbox  # noqa: E402

needs_sandbox = pytest.mark.skipif(not sandbox().available and not os.environ.get("HARNESS_REQUIRE_SANDBOX"),
                                   reason=f"no sandbox on this machine: {sandbox().reason}")


@pytest.fixture(autouse=True)
def _no_ci_step_summary(monkeypatch: pytest.MonkeyPatch) -> None:
    """Runs inside the tests must never append to the real CI step summary."""
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)


# --- a host service a confined command must not reach ---------------------------------------------------

import socket  # noqa: E402
import threading  # noqa: E402


class Listener:
    """A TCP server on the host's loopback that counts the connections it accepts."""

    def __init__(self) -> None:
        self.server = socket.create_server(("127.0.0.1", 0))
        self.server.settimeout(0.2)
        self.port = self.server.getsockname()[1]
        self.connections = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.server.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self.connections += 1
            conn.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self.server.close()


@pytest.fixture
def listener() -> Iterator[Listener]:
    server = Listener()
    yield server
    server.close()
