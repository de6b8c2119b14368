"""Hooks that users implement in a conftest.py or a plugin to extend the harness.

Registered with ``pytest_addhooks``; the harness calls them with keyword arguments.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from harness.models import AgentConfig, RunnerSpec
    from harness.runners import Runner


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
    ``run(request: dict) -> RunnerOutput`` (see ``harness.runners``); the request is the same JSON
    a ``command`` runner receives on stdin::

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
