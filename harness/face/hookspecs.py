"""Hooks that users implement in a conftest.py or a plugin to extend the harness.

Registered with ``pytest_addhooks``; the harness calls them with keyword arguments.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from harness.base.events import Event
    from harness.base.models import AgentConfig, RunnerSpec
    from harness.checks import CheckParser
    from harness.evaluation.items import ItemKind
    from harness.evaluation.runners import Runner


def pytest_harness_item_kinds(config: pytest.Config) -> list[ItemKind]:
    """Return the kinds of item this plugin adds: instances of subclasses of
    :class:`harness.evaluation.items.ItemKind`, each with its own ``name``.

    A kind says which files it collects (``claims``, cheap: a suffix or a folder), what items a file holds
    (``collect``: :class:`~harness.evaluation.items.ItemSpec` each; a mistake is a ``HarnessConfigError`` naming
    the file, the field and the fix, shown as one collection line) and how one item runs (``run``, maybe on a
    worker thread, from the shared steps of ``context.item_run(...)``, which record every attempt and emit its
    events). Its items run concurrently beside the cases, honour ``-x``, ``--maxfail``, Ctrl-C, the cost cap,
    ``--rubric`` and pytest-xdist, and their results reach the summary, JUnit XML, ``harness history`` and the
    records like a case's. A name already taken is refused. For example, answers kept in ``*.smoke.yaml`` files,
    scored by a rubric::

        from harness.evaluation.items import ItemKind, ItemSpec

        class Smoke(ItemKind):
            name = "smoke"

            def claims(self, path, *, rubrics_dir):
                return path.name.endswith(".smoke.yaml")

            def collect(self, path, context):
                rubric = context.rubric(context.rubrics_dir / "quality.yaml")
                for line, answer in enumerate(path.read_text().splitlines()):
                    yield ItemSpec(name=f"answer{line}", label=answer[:40], payload=answer, line=line,
                                   rubrics=(rubric.name,), agent="smoke", case=f"answer{line}",
                                   threshold=rubric.threshold)

            def run(self, spec, nodeid, context):
                run = context.item_run(nodeid, spec, context.rubric(context.rubrics_dir / "quality.yaml"))
                run.start(1)
                with run.attempt() as attempt:
                    attempt.keep(spec.payload)
                    attempt.evaluate()
                    attempt.decide()
                return run.finish()

        def pytest_harness_item_kinds():   # or (config): a kind may take the session's options
            return [Smoke()]

    Installed packages may instead declare an entry point in the ``harness.item_kinds`` group (a class or an
    instance).
    """


def pytest_harness_runner_kinds() -> list[str]:
    """Return the runner kinds this plugin provides, beyond ``prompt``, ``python`` and ``command``.

    A kind named here may be used in ``agents.yaml`` as ``{kind: NAME, target: ..., other: options}``
    or as the shorthand ``{NAME: target}``::

        def pytest_harness_runner_kinds():
            return ["http"]
    """


@pytest.hookspec(firstresult=True)
def pytest_harness_make_runner(spec: RunnerSpec, role: str, agent: AgentConfig,
                               config: pytest.Config) -> Runner | None:
    """Build the runner for one role (``producer``, ``reviser`` or ``evaluator``) of an agent.

    Return ``None`` for kinds you do not handle. A runner is any object with
    ``run(request) -> RunnerOutput`` (see ``harness.evaluation.runners``). The request is typed
    (``harness.base.requests.AgentRequest`` for a producer or reviser, ``JudgeRequest`` for an evaluator, whose
    ``rubric`` is the loaded rubric); it also reads like the JSON a ``command`` runner receives on stdin
    (``request["inputs"]``), and ``request.wire()`` is that JSON. An evaluator's answer is validated
    against ``request.schema``::

        def pytest_harness_make_runner(spec, role, agent, config):
            if spec.kind == "http":
                return HttpRunner(url=spec.target, timeout=spec.options.get("timeout_s", 30))
    """


def pytest_harness_attempt_finished(record: dict, details: dict) -> None:
    """Called after every attempt is recorded, with the RunRecord and its details as dicts.

    Useful to forward results elsewhere (a dashboard, a queue)::

        def pytest_harness_attempt_finished(record, details):
            print(record["agent_name"], record["attempt"], record["overall_score"])
    """


def pytest_harness_check_kinds() -> Mapping[str, CheckParser]:
    """Return the deterministic check kinds this plugin adds, as a mapping of kind name to parser.

    A kind named here may be used in a rubric as ``check: {NAME: options}``. Its parser has the signature
    of the built-in ones, ``parser(options: Any, fields: harness.checks.Fields) -> Check``: ``options`` is
    the YAML value under the kind, as written; ``fields`` names the rubric file and field (``fields.path``,
    ``fields.field``), knows ``fields.base_dir`` (the rubric's folder) and ``fields.import_root``, and
    validates options with one-line errors (``fields.mapping``, ``fields.integer``, ``fields.string_list``,
    ``fields.regex``, ... and ``fields.error(key, problem, fix)`` to raise your own). The check it returns
    has ``kind`` and ``run(artifact: str, context: CheckContext) -> CheckResult``, and is frozen: one check
    runs on many threads at once. A parser that reads a file its options name resolves it with
    ``fields.project_path(raw, key)`` (inside the project, symbolic links followed). ``fields.data_modules`` is
    set when the options come from data (a case's ``checks:``, a dataset row): a kind that imports code named
    in its options must refuse modules outside it. A name that is already a kind (built-in or another
    plugin's) is refused when the rubrics are collected::

        from dataclasses import dataclass

        from harness.checks import CheckResult


        @dataclass(frozen=True)
        class MaxWords:
            limit: int
            kind = "max_words"

            def run(self, artifact, context):
                words = len(artifact.split())
                return CheckResult(1.0 if words <= self.limit else 0.0, f"{words} words (max {self.limit})")


        def parse_max_words(options, fields):
            return MaxWords(fields.integer(options, None, minimum=1))


        def pytest_harness_check_kinds():
            return {"max_words": parse_max_words}  # rubric: check: {max_words: 400}
    """


def pytest_harness_providers() -> Mapping[str, Any]:
    """Return model providers this plugin adds: ``{name: factory}``, used for models named ``name/...``.

    A factory is called as ``factory(settings, policy, *, api_key=None, base_url=None)`` (``settings`` a
    :class:`harness.base.models.ModelSettings`, ``policy`` the session's :class:`harness.llm.CallPolicy`) and returns a
    :class:`harness.llm.providers.Provider`, whose ``send(request, *, batch=False)`` turns a neutral
    :class:`harness.llm.ModelRequest` into a :class:`harness.llm.ModelReply`. Wrap each HTTP attempt in
    ``policy.http_attempt(...)`` so the session's concurrency bound and rate limits hold; the response cache,
    prices and the cost cap are applied around ``send`` for you, and ``send`` runs under the deadline of
    ``settings.timeout_s`` (the whole call, retries included); what it raises other than a ``ModelCallError`` is
    one redacted line. A name already taken is refused::

        from harness.llm import ModelReply, Usage
        from harness.llm.providers import Provider


        class Echo(Provider):
            name = "echo"

            def send(self, request, *, batch=False):
                text = request.messages[-1].text
                return ModelReply(text=text, tool_calls=(), usage=Usage(), model=f"echo/{request.model}",
                                  stop_reason="end_turn")


        def pytest_harness_providers():
            return {"echo": Echo}  # agents.yaml: judge: {model: echo/any}

    Installed packages may instead declare an entry point in the ``harness.providers`` group.
    """


def pytest_harness_event_sinks(config: pytest.Config) -> list[Callable[[Event], None]]:
    """Return callables that receive every event of the run (``harness.base.events``): items started and finished,
    artifacts, judgements, attempts recorded, model calls. Called once per session (and per xdist worker);
    sinks run on the emitting thread, so they must be quick and thread-safe::

        from harness.base.events import ItemFinished

        def pytest_harness_event_sinks(config):
            def log(event):
                if isinstance(event, ItemFinished):
                    print(event.nodeid, event.outcome, event.final_score)
            return [log]
    """
