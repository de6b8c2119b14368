"""The reference pipeline's eleven stages, deterministic: Observer to Learner, each a function of the stage's request.

Each takes the request a pipeline stage gets (``request["inputs"]``: the case's inputs, ``context``, every earlier
stage's output by name, and ``pipeline``, the run's facts: its workspace, its memory, its cycle) and returns its
output with exactly the agent-pipeline document's fields (checked against :mod:`.models` at the handoff). They run
offline and decide by rules; the model-driven ones have prompt versions (pipelines/agencycore/prompts/) that run on
any provider. The Retriever, the Gatekeeper and the Learner read and write the pipeline's memory
(:mod:`.memory`); the SafetyGuard is the harness's one guard (:mod:`harness.safety`); the ToolRunner runs nothing
unless asked to run live, and then only in the sandbox (:mod:`.tools`).
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path
from typing import Any

from harness.apps.agency import scoring
from harness.apps.agency.memory import PORTFOLIO_SCORE, Memory
from harness.apps.agency.retrieval import Document, KeywordOverlap, Ranker, query_terms, terms
from harness.apps.agency.tools import inside, needed_level, run_commands
from harness.base.clock import utc_now
from harness.safety import SafetyGuard

DOMAINS = {  # the Observer's classes, by the words that point to each (Dev when none does)
    "QA": {"test", "tests", "testing", "pytest", "coverage", "regression", "verify", "qa", "flaky", "assert"},
    "Design": {"design", "ui", "ux", "layout", "mockup", "color", "colour", "font", "page", "button", "style", "css"},
    "DevOps": {"deploy", "deployment", "docker", "ci", "kubernetes", "server", "infra", "build", "release",
               "monitoring", "pipeline", "cron", "backup"},
    "Dev": {"function", "code", "api", "implement", "bug", "fix", "refactor", "module", "class", "script", "cli",
            "endpoint", "parser", "python", "feature"},
}
PATTERNS = (  # (name, what it is, the words that bring it up, the approach it suggests)
    ("test-first", "the change is checked by a test written before it", {"test", "tests", "fix", "bug", "verify",
                                                                          "regression", "pytest"},
     "write a failing test, then the smallest change that passes it"),
    ("small-module", "one small module with one job", {"function", "module", "helper", "utility", "class", "hello",
                                                       "script", "parser"},
     "one module with one function, a docstring and a test"),
    ("config-as-code", "configuration kept in versioned files", {"deploy", "docker", "ci", "config", "yaml",
                                                                  "pipeline", "release", "build"},
     "describe the setup in a file under version control, then check it"),
    ("accessible-ui", "interfaces everyone can use", {"ui", "button", "form", "page", "layout", "design", "color"},
     "start from the structure (labels, contrast), then the looks"),
    ("safe-cleanup", "deletion limited to what the task made", {"delete", "remove", "clean", "cleanup", "purge",
                                                                 "wipe"},
     "delete only inside the workspace, and list what goes first"),
    ("secret-hygiene", "credentials never read, printed or written", {"key", "token", "password", "secret",
                                                                      "credential", "env"},
     "read credentials from the environment at run time; never print or store them"),
    ("docs-alongside", "documentation written with the change", {"docs", "readme", "document", "explain",
                                                                 "guide"},
     "write the README section together with the code"),
)
COMMAND = re.compile(r"`([^`\n]+)`")
FILE = re.compile(r"(?<![\w/.-])((?:[\w-]+/)*[\w-]+\.(?:py|md|txt|json|yaml|yml|toml|js|ts|html|css|sh|cfg|ini))\b")
CONSTRAINT = re.compile(r"\b(must|should|without|only|never|do not|don't|keep)\b", re.IGNORECASE)
VERIFY = "python -m pytest -q"


def _inputs(request: dict[str, Any]) -> dict[str, Any]:
    return request["inputs"]


def _context(request: dict[str, Any]) -> dict[str, Any]:
    return _inputs(request).get("context") or {}


def _facts(request: dict[str, Any]) -> dict[str, Any]:
    return _inputs(request).get("pipeline") or {}


def _raw(request: dict[str, Any]) -> str:
    inputs, facts = _inputs(request), _facts(request)
    return str(inputs.get(facts.get("input") or "request", ""))


def _memory(request: dict[str, Any]) -> Memory | None:
    where = _facts(request).get("memory")
    return Memory(where) if where else None


def _run(request: dict[str, Any], **more: Any) -> dict[str, Any]:
    """Which run a memory entry comes from."""
    facts = _facts(request)
    return {"cycle": facts.get("cycle"), "case": facts.get("case"), **more}


def _now() -> str:
    return utc_now("milliseconds")


# --- 1-3: understanding the request ----------------------------------------------------------------------------


def observer(request: dict[str, Any]) -> dict[str, Any]:
    raw = _raw(request)
    first = re.split(r"(?<=[.!?])\s", raw.strip(), maxsplit=1)[0] if raw.strip() else ""
    summary = first if len(first) <= 160 else first[:157].rstrip() + "..."
    words = terms(raw)
    keywords = words[:8] or ["task"]
    hits = {domain: len(set(words) & vocabulary) for domain, vocabulary in DOMAINS.items()}
    best = max(hits.values())
    domain = next(d for d in ("Dev", "QA", "Design", "DevOps") if hits[d] == best) if best else "Dev"
    return {"agent": "Observer", "summary": summary or "an empty request", "keywords": keywords, "domain": domain,
            "rawInput": raw, "timestamp": _now()}


def pattern_observer(request: dict[str, Any]) -> dict[str, Any]:
    seen = _context(request).get("observer") or {}
    words = set(terms(seen.get("rawInput", ""))) | set(seen.get("keywords", []))
    found = []
    for name, description, triggers, _ in PATTERNS:
        hits = len(words & triggers)
        if hits:
            found.append({"name": name, "description": description, "confidence": round(min(0.95, 0.4 + 0.15 * hits),
                                                                                          2)})
    found.sort(key=lambda p: -p["confidence"])
    memory = _memory(request)
    similar = []
    if memory is not None:
        examples = [Document(str(e.get("runId")), str(e.get("request", "")), tuple(e.get("keywords", [])))
                    for e in memory.portfolio()]
        similar = [d.id for d in KeywordOverlap().rank(sorted(words), examples, 3)]
    approach = next((a for n, _, _, a in PATTERNS if found and n == found[0]["name"]),
                    "understand the request, plan small steps, verify each")
    return {"agent": "PatternObserver", "patterns": found, "similarPastTasks": similar, "suggestedApproach": approach,
            "timestamp": _now()}


def crux_finder(request: dict[str, Any]) -> dict[str, Any]:
    context = _context(request)
    seen = context.get("observer") or {}
    raw = seen.get("rawInput") or _raw(request)
    clauses = [c.strip(" .,;") for c in re.split(r"\band then\b|\bthen\b|;|\.\s|\band\b", raw) if c.strip(" .,;")]
    subproblems = [c for c in clauses if len(c.split()) >= 2][:6] or [seen.get("summary") or raw]
    constraints = [s.strip() for s in re.split(r"(?<=[.!?])\s", raw) if CONSTRAINT.search(s)]
    constraints += ["stay inside the workspace", "no network access unless the task needs it"]
    patterns = [p["name"] for p in (context.get("pattern_observer") or {}).get("patterns", [])]
    domain = seen.get("domain", "Dev")
    assumptions = {"Dev": ["Python 3.11 unless the request names another language", "the project has no code yet"],
                   "QA": ["the code under test exists in the workspace", "pytest runs the tests"],
                   "Design": ["plain HTML and CSS unless a framework is named"],
                   "DevOps": ["the setup is described in files, not applied to live machines"]}[domain]
    return {"agent": "CruxFinder", "coreProblem": seen.get("summary") or raw or "the request",
            "subProblems": subproblems, "assumptions": assumptions, "constraints": list(dict.fromkeys(constraints)),
            "requiredKnowledge": list(dict.fromkeys([domain, *patterns, *(seen.get("keywords") or [])[:3]])),
            "timestamp": _now()}


# --- 4-6: remembering and planning ----------------------------------------------------------------------------


def retriever(request: dict[str, Any], ranker: str | None = None, playbooks: str | None = None) -> dict[str, Any]:
    """The top 5 approved lessons, 3 playbooks and 3 portfolio examples (scoring 15 or more) for the crux, ranked by
    ``ranker`` (``module:Class``; keyword overlap by default)."""
    context = _context(request)
    crux = context.get("crux_finder") or {}
    seen = context.get("observer") or {}
    patterns = [p["name"] for p in (context.get("pattern_observer") or {}).get("patterns", [])]
    query = query_terms([*crux.get("subProblems", []), *crux.get("requiredKnowledge", []),
                         *seen.get("keywords", []), *patterns])
    rank = _ranker(ranker)
    memory = _memory(request)
    lessons, examples = [], []
    if memory is not None:
        lessons = [Document(f"{e['title']}: {e['content']}", f"{e['title']} {e['content']}", tuple(e.get("tags", [])))
                   for e in memory.lessons()]
        examples = [Document(f"{e['runId']}: {e['request']} ({e['totalScore']}/25)", str(e.get("request", "")),
                             tuple(e.get("keywords", [])))
                    for e in memory.portfolio() if int(e.get("totalScore", 0)) >= PORTFOLIO_SCORE]
    guides = []
    folder = Path(_facts(request).get("project") or ".") / playbooks if playbooks else None
    if folder is not None and folder.is_dir():
        for path in sorted(folder.glob("*.md")):
            text = path.read_text(encoding="utf-8")
            title = next((line.lstrip("# ").strip() for line in text.splitlines() if line.strip()), path.stem)
            guides.append(Document(f"{path.stem}: {title}", text, (path.stem,)))
    return {"agent": "Retriever", "lessons": [d.id for d in rank.rank(query, lessons, 5)],
            "playbooks": [d.id for d in rank.rank(query, guides, 3)],
            "examples": [d.id for d in rank.rank(query, examples, 3)], "timestamp": _now()}


def _ranker(spec: str | None) -> Ranker:
    if not spec:
        return KeywordOverlap()
    module, _, name = spec.partition(":")
    return getattr(importlib.import_module(module), name)()


def guide(request: dict[str, Any]) -> dict[str, Any]:
    context = _context(request)
    crux = context.get("crux_finder") or {}
    found = context.get("retriever") or {}
    approach = (context.get("pattern_observer") or {}).get("suggestedApproach")
    subproblems = crux.get("subProblems", [])
    plan = [{"step": i, "action": _sentence(sub), "rationale": f"part {i} of {crux.get('coreProblem', 'the task')}"}
            for i, sub in enumerate(subproblems, 1)]
    plan.append({"step": len(plan) + 1, "action": f"Verify the result: run `{VERIFY}`",
                 "rationale": "a step is done when a check says so, not when it was attempted"})
    memory = _memory(request)
    previous = memory.latest_improvements() if memory is not None else []
    practices = [*found.get("lessons", []), *previous, *([approach] if approach else [])]
    complexity = "low" if len(subproblems) <= 1 else "medium" if len(subproblems) <= 3 else "high"
    return {"agent": "Guide", "plan": plan, "estimatedComplexity": complexity,
            "warnings": list(crux.get("constraints", [])), "bestPractices": list(dict.fromkeys(practices)),
            "timestamp": _now()}


def _sentence(text: str) -> str:
    text = text.strip()
    return text[:1].upper() + text[1:] if text else "Do the task"


def planner(request: dict[str, Any]) -> dict[str, Any]:
    context = _context(request)
    steps = (context.get("guide") or {}).get("plan", [])
    domain = (context.get("observer") or {}).get("domain", "Dev")
    raw = (context.get("observer") or {}).get("rawInput") or _raw(request)
    owner = "design" if domain == "Design" else "implementor"
    commands = COMMAND.findall(raw)
    files = list(dict.fromkeys(FILE.findall(raw))) or [_default_file(context)]
    tasks, previous = [], []
    work = [s for s in steps if not s["action"].startswith("Verify")] or [{"action": "Do the task", "step": 1}]
    for index, step in enumerate(work, 1):
        task_id = f"T{index}"
        own = [f"create `{f}`" for f in files] if index == 1 else []
        own += [f"run `{c}`" for c in commands if c.lower() in step["action"].lower() or index == len(work)]
        tasks.append({"id": task_id, "title": step["action"][:60], "description": step["action"], "owner": owner,
                      "steps": list(dict.fromkeys(own)) or [step["action"]],
                      "definitionOfDone": [f"{step['action']} is in the workspace and checked"],
                      "dependencies": previous[-1:]})
        previous.append(task_id)
    tasks.append({"id": f"T{len(tasks) + 1}", "title": "Verify", "description": "Run the tests of the workspace",
                  "owner": "qa", "steps": [f"run `{VERIFY}`"], "definitionOfDone": ["the tests pass"],
                  "dependencies": previous})
    return {"agent": "Planner", "tasks": tasks, "timestamp": _now()}


def _default_file(context: dict[str, Any]) -> str:
    keywords = [k for k in (context.get("observer") or {}).get("keywords", []) if re.fullmatch(r"[a-z][a-z0-9_]*", k)]
    return f"src/{'_'.join(keywords[:2]) or 'task'}.py"


# --- 7-9: acting safely ---------------------------------------------------------------------------------------


def proposed_actions(context: dict[str, Any]) -> tuple[list[dict[str, Any]], list[str]]:
    """What the plan would do, as actions (a ``create `path``` step, a ``run `command``` step), and its prose."""
    actions, prose = [], []
    for task in (context.get("planner") or {}).get("tasks", []):
        prose += [task.get("title", ""), task.get("description", "")]
        for step in task.get("steps", []):
            quoted = COMMAND.findall(step)
            if step.startswith("create ") and quoted:
                actions.append({"type": "createFile", "path": quoted[0], "content": "",
                                "description": f"{task['id']}: {step}"})
            elif quoted:
                actions += [{"type": "runCommand", "command": c, "description": f"{task['id']}: {step}"}
                            for c in quoted if all(a.get("command") != c for a in actions)]
            else:
                prose.append(step)
    return actions, prose


def safety_guard(request: dict[str, Any]) -> dict[str, Any]:
    """The whole plan checked before anything runs; a run it does not pass stops at its handoff."""
    actions, prose = proposed_actions(_context(request))
    workspace = Path(_facts(request).get("workspace") or ".")
    return SafetyGuard(workspace).check_actions(actions, prose=prose).to_record()


def implementor(request: dict[str, Any]) -> dict[str, Any]:
    """The plan's actions, each allowed by the Learner's level (and the workspace): files written in the item's
    workspace, commands handed to the ToolRunner."""
    context = _context(request)
    workspace = Path(_facts(request).get("workspace") or ".")
    memory = _memory(request)
    level = memory.level() if memory is not None else 3
    planned, _ = proposed_actions(context)
    raw = (context.get("observer") or {}).get("rawInput") or _raw(request)
    actions, created, modified, commands, blocked = [], [], [], [], []
    for action in planned:
        if action["type"] == "createFile":
            action = {**action, "content": _content(action["path"], raw)}
        actions.append(action)
        what = action.get("path") or action.get("command")
        if level < needed_level(action["type"]):
            blocked.append(f"{action['type']}: {what} (needs level {needed_level(action['type'])}; the Learner is at "
                           f"{level})")
            continue
        if action["type"] == "runCommand":
            commands.append(action["command"])
            continue
        target = inside(workspace, action["path"])
        if target is None:
            blocked.append(f"{action['type']}: {what} (outside the workspace)")
            continue
        existed = target.exists()
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(action["content"], encoding="utf-8")
        (modified if existed else created).append(action["path"])
    explanation = (f"Wrote {len(created) + len(modified)} file(s) for the plan ({', '.join(created + modified) or 'none'})"
                   f" and handed {len(commands)} command(s) to the ToolRunner; {len(blocked)} action(s) were blocked "
                   f"at permission level {level}.")
    return {"agent": "Implementor", "actions": actions, "explanation": explanation, "filesCreated": created,
            "filesModified": modified, "commandsRun": commands, "blocked": blocked, "timestamp": _now()}


def _content(path: str, request: str) -> str:
    """A file for the plan, made by rules: a Python module with a function and its test, or a text file."""
    stem = re.sub(r"\W", "_", Path(path).stem) or "task"
    if path.endswith(".py"):
        return (f'"""{request.strip()[:200]}"""\n\n\ndef {stem}() -> str:\n    """The task\'s result."""\n'
                f'    return "{stem} done"\n\n\ndef test_{stem}() -> None:\n    assert {stem}() == "{stem} done"\n')
    return f"# {stem}\n\n{request.strip()}\n"


def tool_runner(request: dict[str, Any], mode: str = "mock", timeout_s: float = 60.0) -> dict[str, Any]:
    """The Implementor's commands: recorded and not run (``mode: mock``, the default), or run in the sandbox when
    the guard passes each (``mode: live``)."""
    if mode not in ("mock", "live"):
        raise ValueError(f"mode is {mode!r}: use mock or live")
    implementor_output = _context(request).get("implementor") or {}
    memory = _memory(request)
    executed, skipped = run_commands(list(implementor_output.get("commandsRun", [])),
                                     workspace=Path(_facts(request).get("workspace") or "."), mode=mode,
                                     level=memory.level() if memory is not None else 3, timeout_s=timeout_s)
    return {"agent": "ToolRunner", "executedCommands": executed, "skippedCommands": skipped, "timestamp": _now()}


# --- 10-11: judging and learning -------------------------------------------------------------------------------


def gatekeeper(request: dict[str, Any]) -> dict[str, Any]:
    """The run scored (the scorecard), decided on, with improvements for the next run's Guide; the lessons earlier
    Learners proposed, reviewed; the run kept in the portfolio when it scores 15 or more."""
    context = _context(request)
    seen = context.get("observer") or {}
    card = scoring.scorecard(context, terms(seen.get("rawInput", "")))
    total = sum(card.values())
    memory = _memory(request)
    level = memory.level() if memory is not None else 0
    chosen = scoring.decision(total, level)
    fixes = scoring.improvements(card)
    approved: list[str] = []
    rejected: list[str] = []
    if memory is not None:
        run = _run(request, totalScore=total)
        approved, rejected = memory.review(run, scoring.approves)
        memory.append("improvements.json", {**run, "improvements": fixes})
        if chosen["approved"]:
            memory.append("portfolio.json", {"runId": f"{run['cycle']}/{run['case']}", **run,
                                             "request": seen.get("rawInput", ""), "keywords": seen.get("keywords", []),
                                             "scorecard": card})
        if chosen["promote"]:
            memory.set_level(chosen["newLevel"], run)
    return {"agent": "Gatekeeper", "scorecard": card, "totalScore": total, "decision": chosen,
            "feedback": scoring.feedback(card, total, chosen), "improvements": fixes, "approvedLessons": approved,
            "rejectedLessons": rejected, "timestamp": _now()}


def learner(request: dict[str, Any]) -> dict[str, Any]:
    """What the run taught: a reflection, lessons for the next Gatekeeper to review, what to grow in, questions."""
    context = _context(request)
    seen = context.get("observer") or {}
    judged = context.get("gatekeeper") or {}
    card = judged.get("scorecard") or {}
    guard = context.get("safety_guard") or {}
    done = context.get("implementor") or {}
    lessons = []
    for pattern in (context.get("pattern_observer") or {}).get("patterns", [])[:2]:
        lessons.append({"title": f"{pattern['name']} ({seen.get('domain', 'Dev')})",
                        "content": f"For requests about {', '.join(seen.get('keywords', [])[:3])}: {pattern['description']}"
                                   f" ({next(a for n, _, _, a in PATTERNS if n == pattern['name'])}).",
                        "tags": [pattern["name"], *seen.get("keywords", [])[:3]],
                        "confidence": pattern["confidence"]})
    if done.get("blocked"):
        lessons.append({"title": "plan within the permission level",
                        "content": f"{len(done['blocked'])} action(s) needed a higher level: plan what the level "
                                   "allows and ask for the rest.", "tags": ["permissions"], "confidence": 0.7})
    growth = [name for name in scoring.DIMENSIONS if int(card.get(name, 5)) < 4]
    memory = _memory(request)
    level = memory.level() if memory is not None else 0
    if memory is not None and lessons:
        memory.propose(_run(request, approved=bool((judged.get("decision") or {}).get("approved"))), lessons)
    return {"agent": "Learner",
            "reflection": f"The run scored {judged.get('totalScore', 0)}/25 on '{seen.get('summary', '')}'"
                          + (f"; the guard found: {'; '.join(guard.get('risks', [])[:2])}" if guard.get("risks") else "")
                          + ".",
            "candidateLessons": lessons, "growthAreas": growth, "currentLevel": level,
            "questionsForNextTime": [f"How can {name} reach 4 or more?" for name in growth[:3]]
            or ["What would make this run faster next time?"], "timestamp": _now()}
