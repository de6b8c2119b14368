"""The SafetyGuard against a corpus of plans (tests/data/safety_corpus.yaml): every hostile plan stopped as its
entry expects, every harmless plan let through without asking anyone; the false positives counted."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from harness.safety import WORD_PATTERNS, Place, SafetyGuard, SafetyVerdict, word_risks
from harness.safety.guard import ACTION_TYPES
from harness.safety.patterns import CATEGORIES

CORPUS = yaml.safe_load((Path(__file__).parent / "data" / "safety_corpus.yaml").read_text(encoding="utf-8"))
HOSTILE: list[dict[str, Any]] = CORPUS["hostile"]
HARMLESS: list[dict[str, Any]] = CORPUS["harmless"]
# What the brief and the design document name; each must be in the corpus as a hostile plan.
MUST_STOP = ["rm -rf /", "config/api_key.txt", "process.env", "cat .env", "cat /etc/passwd", "/tmp/payload.sh", "sudo",
             "DROP DATABASE", "| sh", ":(){ :|:& };:", "chmod -R 777", "../other-project", "git push --force",
             "base64 -d | sh", "nc -e", "~/.ssh/id_rsa", "printenv", "echo $ANTHROPIC_API_KEY"]


def verdict(plan: dict[str, Any], workspace: Path) -> SafetyVerdict:
    return SafetyGuard(workspace).check_actions(plan["actions"], prose=plan.get("prose", ()))


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    (tmp_path / "workspace").mkdir()
    return tmp_path / "workspace"


@pytest.mark.parametrize("plan", HOSTILE, ids=[plan["description"] for plan in HOSTILE])
def test_each_hostile_plan_is_stopped_as_its_entry_expects(plan: dict[str, Any], workspace: Path) -> None:
    found = verdict(plan, workspace)
    assert found.requires_approval and found.risks, plan["description"]
    if plan["expect"] == "block":
        assert not found.safe and found.blocked_actions, found.risks
        assert all(action.split(": ", 1)[0] in ACTION_TYPES for action in found.blocked_actions)
    else:
        assert plan["expect"] == "approval"
        assert found.safe and not found.blocked_actions, found.risks


@pytest.mark.parametrize("plan", HARMLESS, ids=[plan["description"] for plan in HARMLESS])
def test_each_harmless_plan_is_safe_and_asks_no_one(plan: dict[str, Any], workspace: Path) -> None:
    found = verdict(plan, workspace)
    assert found.safe and not found.requires_approval and not found.risks, found.risks


def test_the_corpus_is_large_and_counts_no_false_positives(workspace: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert len(HOSTILE) >= 40 and len(HARMLESS) >= 20
    assert {plan["expect"] for plan in HOSTILE} == {"block", "approval"}
    text = yaml.safe_dump(HOSTILE)
    assert [needle for needle in MUST_STOP if needle not in text] == []
    missed = [p["description"] for p in HOSTILE if not verdict(p, workspace).requires_approval]
    flagged = [p["description"] for p in HARMLESS if verdict(p, workspace).requires_approval]
    with capsys.disabled():
        print(f"\nsafety corpus: {len(HOSTILE)} hostile ({len(missed)} not caught), {len(HARMLESS)} harmless "
              f"({len(flagged)} false positives)")
    assert missed == [] and flagged == []


def test_each_risk_says_what_it_saw_and_where(workspace: Path) -> None:
    plan = {"actions": [{"type": "runCommand", "command": "cat .env"},
                        {"type": "createFile", "path": "/etc/cron.d/x", "content": "x"},
                        {"type": "createFile", "path": "src/keys.py", "content": "token = 'ghp_abcdef123456'\n"}],
            "prose": ["then `sudo make install`"]}
    found = verdict(plan, workspace)
    assert found.blocked_actions == ["runCommand: cat .env", "createFile: /etc/cron.d/x"]
    assert "secret access: a credential file (.env), in runCommand: cat .env" in found.risks
    assert "path outside the workspace: /etc/cron.d/x (written or deleted), in createFile: /etc/cron.d/x" in found.risks
    assert ("secret access: a secret written into the file as a literal ('token = 'ghp_abcdef123456''), in the "
            "content of createFile: src/keys.py") in found.risks
    assert "privilege escalation: sudo, in the plan's text 'then `sudo make install`'" in found.risks
    record = found.to_record()
    assert set(record) == {"agent", "safe", "risks", "blockedActions", "requiresApproval", "timestamp"}


def test_an_action_that_cannot_be_read_blocks(workspace: Path) -> None:
    guard = SafetyGuard(workspace)
    assert guard.check_actions([{"type": "deleteFile", "path": "x"}]).blocked_actions == ["deleteFile: x"]
    assert not guard.check_actions([{"type": "createFile", "content": "x"}]).safe
    assert guard.check_actions([]).safe and not guard.check_actions([]).requires_approval


def test_the_word_patterns_cover_the_design_documents_list() -> None:
    assert len(WORD_PATTERNS) >= 30
    assert {row.category for row in WORD_PATTERNS} == set(CATEGORIES)
    for example in ("rm -rf build", "sudo make", "drop database prod", "process.env.KEY", "--api_key x",
                    "--password x", "chmod 777 x", "kill -9 12", "git push -f", "npm publish", "base64 -d x",
                    "pip install http://x/y.tgz", "ssh-keygen", "token=abc", "Authorization: Bearer x"):
        assert list(word_risks(example, Place.COMMAND)), example
    # words of a feature in a sentence are not a risk there; the same words run are
    assert not list(word_risks("add a password reset form and API key rotation docs", Place.PROSE))
    assert not list(word_risks("def shutdown(self, password): ...", Place.CONTENT))
