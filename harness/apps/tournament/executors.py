"""The three kinds of executor, each confined to its own git worktree:

* ``diff``: a plan carrying a unified diff is applied with ``git apply``;
* ``model``: a model edits files through tools that cannot leave the worktree; every command it
  proposes is checked by :class:`~harness.safety.SafetyGuard` and runs in the sandbox;
* ``command``: the goal's ``executor_command`` (e.g. a coding agent CLI) runs in the sandbox, in the
  worktree, with the plan's JSON file at ``{plan}``.

Commands run only in the sandbox (:mod:`harness.sandbox`): where none can be made, they are refused
unless the user passed ``--allow-unconfined``.
"""

from __future__ import annotations

import json
import shlex
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.apps.tournament.agents import CostMeter, ModelAccess, goal_summary
from harness.apps.tournament.benchmark import SealedPaths
from harness.apps.tournament.confine import GoalSandbox
from harness.apps.tournament.costs import no_cost
from harness.apps.tournament.gitops import GitError, GitRepo
from harness.safety import SafetyGuard
from harness.apps.tournament.store import append_log
from harness.base.errors import HarnessError
from harness.llm import Message, ToolResult, ToolSpec
from harness.loading.goal import Goal

_MAX_READ = 40_000
_MAX_OUTPUT = 8_000
_COMMAND_TIMEOUT_S = 120.0
PLAN_INSIDE = "/tmp/harness/plan.json"  # where a confined executor_command finds the plan


@dataclass
class ChangeOutcome:
    """What an executor did to its worktree; ``category`` is a failure analysis category when not ``ok``."""

    kind: str
    ok: bool
    detail: str = ""
    category: str | None = None
    cost: dict[str, Any] = field(default_factory=no_cost)
    blocked_commands: list[str] = field(default_factory=list)


def executor_kind(plan: dict[str, Any], goal: Goal) -> str:
    if plan.get("diff"):
        return "diff"
    if goal.agents.executor_command:
        return "command"
    return "model"


def make_change(kind: str, *, repo: GitRepo, goal: Goal, plan: dict[str, Any], worktree: Path, log: Path,
                access: ModelAccess | None, cancel: threading.Event, plan_file: Path,
                box: GoalSandbox) -> ChangeOutcome:
    if kind == "diff":
        try:
            repo.apply_diff(worktree, plan["diff"])
        except GitError as exc:
            return ChangeOutcome("diff", False, str(exc), "scope_error")
        return ChangeOutcome("diff", True, "applied the plan's diff with git apply")
    if kind == "command":
        return _run_command_executor(goal, worktree, log, cancel, plan_file, box)
    if access is None or not access.available:
        reason = access.skip_reason if access else "no model access"
        return ChangeOutcome("model", False, f"the plan has no diff and the model-driven executor was skipped "
                                             f"({reason}); add a diff or an executor_command", "infrastructure")
    return ModelExecutor(goal, plan, worktree, log, access, cancel, box).run()


def _run_command_executor(goal: Goal, worktree: Path, log: Path, cancel: threading.Event, plan_file: Path,
                          box: GoalSandbox) -> ChangeOutcome:
    refused = box.may_run_commands()
    if refused:
        return ChangeOutcome("command", False, f"executor_command {refused}", "infrastructure")
    command = goal.agents.executor_command or ""
    confined = box.box.available
    plan_path = PLAN_INSIDE if confined else str(plan_file)
    argv = [a.replace("{plan}", plan_path).replace("{worktree}", str(worktree)).replace("{python}", sys.executable)
            for a in shlex.split(command)]
    confinement = box.confinement(worktree, network=goal.sandbox.executor_network,
                                  env={"HARNESS_PLAN_FILE": plan_path},
                                  overlays=((plan_file, PLAN_INSIDE),) if confined else ())
    run = box.box.run(argv, confinement, box.limits(goal.agents.executor_timeout_s, cpu=True), cancel=cancel,
                      merge_stderr=True)
    append_log(log, f"$ {command}\n{run.stdout}")
    if run.timed_out:
        return ChangeOutcome("command", False, f"executor_command ran longer than "
                                               f"{goal.agents.executor_timeout_s:g} s", "timeout")
    if run.exit_code != 0:
        tail = run.stdout.strip().splitlines()[-1:] or ["no output"]
        return ChangeOutcome("command", False, f"executor_command exited {run.exit_code}: {tail[0][:300]}",
                             "infrastructure")
    return ChangeOutcome("command", True, "executor_command finished")


class ModelExecutor:
    """A model that carries out one plan with file tools confined to the worktree."""

    TOOLS = [
        ToolSpec("list_files", "List files under a folder of the worktree (default: the root).",
                 {"type": "object", "properties": {"folder": {"type": "string"}}}),
        ToolSpec("read_file", "Read a text file of the worktree.",
                 {"type": "object", "required": ["path"], "properties": {"path": {"type": "string"}}}),
        ToolSpec("write_file", "Create or overwrite a text file of the worktree.",
                 {"type": "object", "required": ["path", "content"],
                  "properties": {"path": {"type": "string"}, "content": {"type": "string"}}}),
        ToolSpec("replace_in_file", "Replace one exact occurrence of `old` with `new` in a file.",
                 {"type": "object", "required": ["path", "old", "new"],
                  "properties": {"path": {"type": "string"}, "old": {"type": "string"}, "new": {"type": "string"}}}),
        ToolSpec("run_command", "Run a shell command in the worktree, in a sandbox without network (120 s limit). "
                                "Use it to run tests.",
                 {"type": "object", "required": ["command"], "properties": {"command": {"type": "string"}}}),
        ToolSpec("finish", "Say you are done, with a one-line summary of the change.",
                 {"type": "object", "required": ["summary"], "properties": {"summary": {"type": "string"}}}),
    ]

    def __init__(self, goal: Goal, plan: dict[str, Any], worktree: Path, log: Path, access: ModelAccess,
                 cancel: threading.Event, box: GoalSandbox):
        self.goal, self.plan, self.worktree, self.log = goal, plan, worktree.resolve(), log
        self.access, self.cancel, self.box = access, cancel, box
        self.guard = SafetyGuard(self.worktree)
        self.sealed = SealedPaths(goal.sealed_paths)
        self.meter = CostMeter()
        self.blocked: list[str] = []

    def run(self) -> ChangeOutcome:
        shown = {k: v for k, v in self.plan.items() if k not in ("cost", "critic_review", "architect_review", "diff")}
        messages = [Message.user(
            f"{goal_summary(self.goal)}\n\nCarry out this plan exactly, in the repository worktree you have tools "
            f"for, then call finish.\n\nPlan:\n{json.dumps(shown, indent=1)}")]
        system = ("You are an executor in a self-improvement tournament. Edit files only through your tools; paths "
                  "are relative to the repository root. Never change sealed paths. Keep the change to the plan.")
        try:
            for step in range(1, self.goal.agents.executor_max_steps + 1):
                if self.cancel.is_set():
                    raise KeyboardInterrupt
                reply = self.access.client.complete(system=system, messages=messages, tools=self.TOOLS,
                                                    parallel_tools=False)
                self.meter.add(reply)
                call = reply.tool_call
                if call is None or not call.id:
                    append_log(self.log, f"[model] {reply.text}")
                    return self._outcome(True, f"the model stopped after {step} step(s): {reply.text[:200]}")
                if call.name == "finish":
                    summary = str(call.input.get("summary", ""))
                    append_log(self.log, f"[finish] {summary}")
                    return self._outcome(True, summary or "finished")
                result, is_error = self.call_tool(call.name, call.input)
                append_log(self.log, f"[{call.name}] {json.dumps(call.input)[:500]}\n-> {result[:1000]}")
                messages.append(Message("assistant", reply.text, tool_calls=(call,)))
                messages.append(Message("user", tool_results=(ToolResult(call.id, result, is_error),)))
        except HarnessError as exc:
            self.meter.add_failed(exc)  # what the failed operation spent before it failed
            return self._outcome(False, f"model call failed: {exc}", "infrastructure")
        return self._outcome(True, f"stopped after {self.goal.agents.executor_max_steps} steps")

    def _outcome(self, ok: bool, detail: str, category: str | None = None) -> ChangeOutcome:
        return ChangeOutcome("model", ok, detail, category, self.meter.cost, self.blocked)

    def _path(self, raw: str | None, *, write: bool = False) -> Path:
        rel = (raw or ".").strip()
        target = (self.worktree / rel).resolve()
        try:
            inside = target.relative_to(self.worktree)
        except ValueError:
            raise PermissionError(f"{rel}: outside the worktree") from None
        if inside.parts[:1] == (".git",):
            raise PermissionError(f"{rel}: git internals are off limits")
        if write and self.sealed.match(inside.as_posix()):
            raise PermissionError(f"{rel}: a sealed path (the benchmark); it may not change")
        return target

    def call_tool(self, name: str, args: dict[str, Any]) -> tuple[str, bool]:
        try:
            if name == "list_files":
                folder = self._path(args.get("folder"))
                files = sorted(str(p.relative_to(self.worktree)) for p in folder.rglob("*")
                               if p.is_file() and ".git" not in p.relative_to(self.worktree).parts)
                return "\n".join(files[:500]) or "(empty)", False
            if name == "read_file":
                return self._path(args["path"]).read_text(encoding="utf-8")[:_MAX_READ], False
            if name == "write_file":
                target = self._path(args["path"], write=True)
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(str(args["content"]), encoding="utf-8")
                return f"wrote {args['path']}", False
            if name == "replace_in_file":
                target = self._path(args["path"], write=True)
                text = target.read_text(encoding="utf-8")
                if text.count(args["old"]) != 1:
                    return f"`old` occurs {text.count(args['old'])} times in {args['path']}; it must occur once", True
                target.write_text(text.replace(args["old"], args["new"], 1), encoding="utf-8")
                return f"edited {args['path']}", False
            if name == "run_command":
                return self._run(str(args["command"]))
        except PermissionError as exc:
            return f"refused: {exc}", True
        except (OSError, UnicodeDecodeError, KeyError) as exc:
            return f"error: {exc}", True
        return f"unknown tool {name}", True

    def _run(self, command: str) -> tuple[str, bool]:
        verdict = self.guard.check(command)
        if not verdict.safe:
            self.blocked.append(command)
            return f"blocked by SafetyGuard: {verdict.reason()}", True
        refused = self.box.may_run_commands()
        if refused:
            self.blocked.append(command)
            return refused, True
        run = self.box.box.run(["/bin/sh", "-c", command], self.box.confinement(self.worktree),
                               self.box.limits(_COMMAND_TIMEOUT_S, cpu=True), cancel=self.cancel, merge_stderr=True)
        if run.timed_out:
            return f"the command ran longer than {_COMMAND_TIMEOUT_S:g} s and was stopped", True
        return f"exit {run.exit_code}\n{run.stdout[-_MAX_OUTPUT:]}", run.exit_code != 0
