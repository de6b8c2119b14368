"""What the Implementor may do and how the ToolRunner runs commands.

Permissions: each action needs a level (0-3), the Learner's ``currentLevel``, which grows with the Gatekeeper's
promotions: ``readFile`` 0, ``createFile`` 1, ``editFile`` 2, ``runCommand`` 2; running a command for real (the
ToolRunner's live mode) needs 3. Paths stay inside the item's workspace whatever the level.

The ToolRunner runs in mock mode by default: every command is recorded as an ExecutedCommand and none is run. In
live mode a command runs only when the SafetyGuard passes it, inside the workspace, in the sandbox (bubblewrap from
an empty root: the workspace its only writable folder, no network, the allowlisted environment, time and output
bounded); where no sandbox can be made, it is skipped and says why.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness.base.redaction import child_environment
from harness.safety import SafetyGuard
from harness.sandbox import Confinement, Limits, sandbox

ACTION_LEVELS = {"readFile": 0, "createFile": 1, "editFile": 2, "runCommand": 2}
LIVE_LEVEL = 3
OUTPUT_LIMIT = 4000  # what an ExecutedCommand keeps of a command's output


def needed_level(action_type: str) -> int:
    return ACTION_LEVELS[action_type]


def inside(workspace: Path, relative: str) -> Path | None:
    """``relative`` in ``workspace``, or None when it would leave it (an absolute path, ``..``, a link out)."""
    target = (workspace / relative).resolve()
    try:
        target.relative_to(workspace.resolve())
    except ValueError:
        return None
    return target


def run_commands(commands: list[str], *, workspace: Path, mode: str, level: int,
                 timeout_s: float = 60.0) -> tuple[list[dict[str, Any]], list[str]]:
    """The ExecutedCommands of ``commands`` and the commands skipped (each saying why)."""
    if mode == "mock":
        return [{"command": c, "success": True, "output": "mock mode: recorded, not run", "mockMode": True}
                for c in commands], []
    executed, skipped = [], []
    guard = SafetyGuard(workspace)
    box = sandbox()
    for command in commands:
        if level < LIVE_LEVEL:
            skipped.append(f"{command} (live commands need level {LIVE_LEVEL}; the Learner is at {level})")
            continue
        verdict = guard.check(command)
        if not verdict.safe:
            skipped.append(f"{command} (the SafetyGuard blocks it: {verdict.reason()})")
            continue
        if not box.available:
            skipped.append(f"{command} (no sandbox can be made here: {box.reason})")
            continue
        confinement = Confinement(workdir=workspace, workdir_writable=True, env=child_environment(()),
                                  network=False)
        done = box.run(["/bin/sh", "-c", command], confinement, Limits(timeout_s=timeout_s, output_kb=256))
        output = (done.stdout + done.stderr)[-OUTPUT_LIMIT:]
        executed.append({"command": command, "success": done.exit_code == 0 and not done.timed_out,
                         "output": output, "mockMode": False})
    return executed, skipped
