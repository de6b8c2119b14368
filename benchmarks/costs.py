"""What a judged item costs: naive, with prompt caching, with caching and Message Batches, and with a judge cascade.

    python benchmarks/costs.py                 # 200 items, both suites; about two minutes
    python benchmarks/costs.py --items 50 --suite long

Each suite is the demo's judged agent (brief_writer: the brief-quality rubric, the demo's evaluator prompt and its
examples, judged by claude-sonnet-4-6, threshold 0.80), generated at ``--items`` accounts, one attempt each:

- ``demo``: the rubric and examples of the repository, as they are;
- ``long``: the same agent with a rubric whose criteria are written out at length and eighteen calibration
  examples, so that the judge's cached prefix passes claude-sonnet-4-6's 2,048 tokens and claude-haiku-4-5's 4,096.

Both run on the fake Anthropic server (harness/testing/fake_anthropic.py), in this process, which models the real
API's prompt cache: a prefix shorter than the model's minimum is neither written nor read, a longer one is written
by the first request and read by the next; batched answers cost half. Its judge scores each brief as a careful
judge would (a source cited, the buyer named, one concrete ask): 60% of the briefs pass every criterion, 20% miss
the ask (0.80, at the threshold), 20% miss the source and the buyer (0.50). Each way is a fresh ``pytest`` process
with the response cache off, the fake's prompt cache emptied before it:

1. naive: ``--harness-prompt-cache off``, direct calls;
2. cached: the judge's stable prefix marked for the prompt cache (the default);
3. cached + batch: ``--harness-batch``;
4. cascade + batch: ``judge: {cascade: {first: claude-haiku-4-5, escalate_when: {margin: 0.1}}}``, cached, batched.

The cost table is computed from the tokens the records hold per model (``attempt_details.model_usage``) and the
price table (harness/llm/prices.py), and checked against the cost the records hold.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from harness.base.usage import Usage  # noqa: E402
from harness.llm.prices import price_usd  # noqa: E402
from harness.testing import FakeAnthropic  # noqa: E402
from harness.testing.fake_anthropic import judge_responder  # noqa: E402

JUDGE, FIRST = "claude-sonnet-4-6", "claude-haiku-4-5"
WAYS = (("naive", ["--harness-prompt-cache", "off"], False, False),
        ("cached", [], False, False),
        ("cached + batch", ["--harness-batch"], True, False),
        ("cascade + batch", ["--harness-batch"], True, True))
COMPANIES = ("Acme", "Globex", "Initech", "Umbrella", "Hooli", "Stark", "Wayne", "Tyrell", "Soylent", "Cyberdyne",
             "Vandelay", "Wonka", "Gringotts", "Oceanic", "Pied Piper", "Aperture", "Massive Dynamic", "Dunder")
BUYERS = (("Maria Lopez", "VP Finance"), ("Tom Becker", "CFO"), ("Aiko Tanaka", "Head of Payroll"),
          ("Samir Haddad", "Director of Finance Operations"), ("Lena Novak", "VP People"))
TRIGGERS = (("funding_round", "raised a Series B"), ("expansion", "opened an office in Mexico City"),
            ("hiring", "posted 40 engineering roles in Colombia"), ("acquisition", "acquired a Brazilian startup"))

AGENTS = """\
judge:
  model: {judge}
  max_tokens: 4096
  timeout_s: 120{cascade}
agents:
  brief_writer:
    rubric: brief-quality
    producer: {{python: "briefagent:produce"}}
    evaluator: prompts/evaluators/brief-writer-evaluator.md
    threshold: 0.80
    max_attempts: 1
"""
CASCADE = "\n  cascade: {first: " + FIRST + ", escalate_when: {margin: 0.1}}"

PRODUCER = '''\
"""A generated version of the demo's brief writer (suites/brief_writer/produce.py): the brief of an account, whose
``tier`` says what it leaves out (a source and the buyer, or the concrete ask)."""


def produce(request):
    account = request["inputs"]["account"]
    buyer, trigger, tier = account["buyer"], account["trigger"], account["tier"]
    source = "" if tier == "vague" else f" (source: {trigger['source']})"
    who = "The finance team owns the decision." if tier == "vague" else (
        f"{buyer['name']}, {buyer['title']} ({buyer['linkedin']}). They own payroll and vendor payments.")
    ask = ("Happy to chat sometime if that is ever of interest to your team." if tier == "no-ask" else
           f"Would a 20-minute look next Tuesday at how {account['bu']} pays them in local currency be useful?")
    first = buyer["name"].split()[0]
    return f"""# {account['name']}: account brief

## Why now
{account['name']} {trigger['what']} on {trigger['date']}{source}. Teams that go through this usually revisit
how they pay contractors abroad within a quarter, which is where {account['bu']} fits: one payroll run in local
currency for every country they hire in, without opening an entity first.

## Buyer
{who}

## Suggested first message
Hi {first}, congratulations on the news from {trigger['date']}. As you start paying the new contractors in
Latin America, the payroll and currency questions tend to pile up quickly. {ask}
"""
'''


def brief_judge(request: dict[str, Any]) -> dict[str, float]:
    """The fake judge's scores, read from the brief as the rubric says: a sourced trigger, the buyer by name and
    title, one concrete ask. The first judge of the cascade reads the same."""
    text = json.dumps(request["messages"])
    artifact = text[text.rfind("## Artifact"):] if "## Artifact" in text else text
    return {"grounded": float("(source: https://" in artifact),
            "buyer_named": float("The finance team owns" not in artifact),
            "actionable": float("Would a 20-minute look" in artifact)}


# -- the suites ---------------------------------------------------------------------------------------------------


def write_suite(root: Path, items: int, *, long: bool) -> None:
    if root.exists():
        shutil.rmtree(root)
    (root / "suites" / "prompts" / "evaluators").mkdir(parents=True)
    shutil.copy(ROOT / "suites" / "prompts" / "evaluators" / "brief-writer-evaluator.md",
                root / "suites" / "prompts" / "evaluators")
    (root / "rubrics").mkdir()
    if long:
        write_long_rubric(root / "rubrics")
    else:
        shutil.copy(ROOT / "rubrics" / "brief-quality.yaml", root / "rubrics")
        examples = Path("rubrics") / "examples" / "brief-quality"
        shutil.copytree(ROOT / examples, root / examples)
    (root / "briefagent.py").write_text(PRODUCER)
    (root / "pytest.ini").write_text("[pytest]\nharness = true\n")
    rng = random.Random(25)
    cases = ["agent: brief_writer", "cases:"]
    for n in range(items):
        tier = ("ok", "ok", "ok", "no-ask", "vague", "ok", "ok", "no-ask", "vague", "ok")[n % 10]
        name, (buyer, title), (kind, what) = (f"{rng.choice(COMPANIES)} {n:03d}", rng.choice(BUYERS),
                                              rng.choice(TRIGGERS))
        slug = re.sub(r"\W+", "-", name.lower())
        account = {"name": name, "bu": "Bitwage", "tier": tier,
                   "buyer": {"name": buyer, "title": title, "linkedin": f"https://www.linkedin.com/in/{slug}"},
                   "trigger": {"type": kind, "what": what, "date": f"2026-{1 + n % 9:02d}-{1 + n % 27:02d}",
                               "source": f"https://news.example.com/{slug}"}}
        cases.append(f"  - id: {slug}\n    inputs: {json.dumps({'account': account})}")
    (root / "suites" / "brief_writer.cases.yaml").write_text("\n".join(cases) + "\n")


def write_agents(root: Path, *, cascade: bool) -> None:
    (root / "suites" / "agents.yaml").write_text(AGENTS.format(judge=JUDGE, cascade=CASCADE if cascade else ""))


LONG_CRITERIA = """\
rubric_id: brief-quality
version: "2.0.0"
agent: brief_writer
description: >-
  An account brief a sales rep can act on without further research: why the account may buy now, who decides, and
  the first message to send. The rep reads it minutes before the call; anything the rep would have to check again is
  a failure of the brief, not of the rep.
scoring_mode: weighted
pass_threshold: 0.8
criteria:
  - id: grounded
    name: Grounded in sourced facts
    description: >-
      Every claim about the account comes from the account facts the writer was given, with its source. The trigger
      (a funding round, an expansion, a hiring wave, an acquisition) is the reason the brief exists; a rep who repeats
      an unsourced or invented trigger to a buyer loses the buyer's trust in the first minute of the call. Dates are
      the dates of the facts, not the dates the brief was written. Industry knowledge is allowed as context only when
      it is worded as general ("teams that go through this usually ...") and never attributed to the account.
    pass_condition: >-
      The trigger is named with its date and its source URL exactly as the account facts give them; every other
      statement about the account either comes from the facts or is clearly general context; no figure, name or
      event appears that the facts do not contain.
    fail_condition: >-
      The trigger has no source, or a source other than the facts' one; or the brief states an amount, a headcount,
      a product, a person or an event the facts do not contain; or it presents general context as the account's own.
    weight: 3
  - id: buyer_named
    name: Buyer named
    description: >-
      The brief names the decision-maker and their title, so the rep knows whom to address and at what level to pitch.
      A team, a department or "the finance team" is not a buyer. The profile link lets the rep check the person before
      the call; a brief that names the person without the title leaves the rep guessing whether they can decide.
    pass_condition: >-
      The buyer's full name and title appear, as the account facts give them, with the profile link; the brief says
      what the buyer owns when the facts say it.
    fail_condition: "The buyer is missing, only a team or a department is named, or the title is missing or wrong."
    weight: 2
  - id: actionable
    name: Actionable first message
    description: >-
      The suggested first message is specific to the trigger and asks for one concrete next step: a meeting of a
      stated length at a stated time, a reply to one question, an introduction to one named person. "Let me know if
      you are interested" is not a step; neither are three asks at once. The message is short enough to read on a
      phone and addresses the buyer by first name.
    pass_condition: >-
      The message references the trigger and proposes exactly one concrete next step with its length or its time;
      it names the buyer; it fits in a few lines.
    fail_condition: >-
      The message is generic, has no ask, asks vaguely ("sometime", "if of interest") or asks several things.
    weight: 2
  - id: length
    name: Fits on one page
    description: "Between 80 and 250 words."
    pass_condition: "80 to 250 words."
    fail_condition: "Shorter than 80 or longer than 250 words."
    weight: 1
    check:
      length: {min_words: 80, max_words: 250}
  - id: no_hype
    name: No marketing superlatives
    description: "Plain language a buyer trusts."
    pass_condition: "None of the banned phrases appear."
    fail_condition: "A banned phrase appears."
    weight: 2
    check:
      banned_phrases: ["world-class", "synergy", "game-changing", "best-in-class", "revolutionary"]
examples:
  gold: ["examples/brief-quality/gold/*.md"]
  anti_patterns: ["examples/brief-quality/anti/*.md"]
"""


def write_long_rubric(folder: Path) -> None:
    """The long suite's rubric: the demo's criteria written out at length, nine gold briefs, nine anti-patterns."""
    (folder / "brief-quality.yaml").write_text(LONG_CRITERIA)
    gold, anti = folder / "examples" / "brief-quality" / "gold", folder / "examples" / "brief-quality" / "anti"
    gold.mkdir(parents=True)
    anti.mkdir(parents=True)
    shutil.copy(ROOT / "rubrics" / "examples" / "brief-quality" / "gold" / "acme-series-b.md", gold)
    shutil.copy(ROOT / "rubrics" / "examples" / "brief-quality" / "anti" / "generic-outreach.md", anti)
    producer: dict[str, Any] = {}
    exec(PRODUCER, producer)  # noqa: S102 - our own generated producer, to write briefs in its shape
    for n, company in enumerate(COMPANIES[:8]):
        (buyer, title), (kind, what), slug = BUYERS[n % len(BUYERS)], TRIGGERS[n % len(TRIGGERS)], company.lower()
        account = {"name": company, "bu": "Bitwage", "tier": "ok",
                   "buyer": {"name": buyer, "title": title, "linkedin": f"https://www.linkedin.com/in/{slug}"},
                   "trigger": {"type": kind, "what": what, "date": f"2026-0{n + 2}-1{n}",
                               "source": f"https://news.example.com/{slug}"}}
        (gold / f"{slug}-{kind}.md").write_text(producer["produce"]({"inputs": {"account": account}}))
        for tier, why in (("vague", "no-source-no-buyer"), ("no-ask", "no-ask")):
            if (n + len(tier)) % 2 == 0:
                brief = producer["produce"]({"inputs": {"account": {**account, "tier": tier}}})
                (anti / f"{slug}-{why}.md").write_text(brief)


# -- running ------------------------------------------------------------------------------------------------------


def run_way(root: Path, server: FakeAnthropic, way: str, options: list[str], *, cascade: bool) -> dict[str, Any]:
    """One fresh pytest process; the calls it made and the records' tokens and cost per model."""
    write_agents(root, cascade=cascade)
    server.reset()  # the prompt cache starts empty, as after five idle minutes
    work = root / ("WORK-" + re.sub(r"\W+", "-", way))
    shutil.rmtree(work, ignore_errors=True)
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")},
           "ANTHROPIC_BASE_URL": server.base_url, "ANTHROPIC_API_KEY": "sk-benchmark"}
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "suites/",
                           "--harness-cache", "off", f"--harness-work-dir={work.name}", "-o",
                           "harness_progress_interval=0", *options], cwd=root, env=env, capture_output=True, text=True)
    if done.returncode not in (0, 1):
        raise SystemExit(f"{way}: pytest exited {done.returncode}\n{done.stdout[-3000:]}{done.stderr[-3000:]}")
    conn = sqlite3.connect(work / "harness.db")
    try:
        rows = conn.execute("SELECT model_usage, cost_usd FROM attempt_details").fetchall()
    finally:
        conn.close()
    per_model: dict[str, Usage] = {}
    calls: dict[str, int] = {}
    for usage_json, _ in rows:
        for model, spent in (json.loads(usage_json) if usage_json else {}).items():
            per_model[model] = per_model.get(model, Usage()) + Usage(
                spent["input_tokens"], spent["output_tokens"], spent["cache_write_tokens"], spent["cache_read_tokens"])
            calls[model] = calls.get(model, 0) + spent["calls"]
    batched = "--harness-batch" in options
    priced = sum(price_usd(model, usage, batch=batched) or 0.0 for model, usage in per_model.items())
    recorded = sum(cost or 0.0 for _, cost in rows)
    prefix_line = next((line for line in done.stdout.splitlines() if line.startswith("prompt cache:")), "")
    cascade_line = next((line for line in done.stdout.splitlines() if line.startswith("judge cascade:")), "")
    return {"way": way, "items": len(rows), "per_model": per_model, "calls": calls, "cost": priced,
            "recorded": recorded, "batched": batched, "prefix_line": prefix_line, "cascade_line": cascade_line,
            "server_calls": server.calls + len(server.batch_requests)}


def no_batch_hits(result: dict[str, Any]) -> float:
    """The batched run's cost had no batched request read the prompt cache (each one writing it instead): the
    Batches API gives cache hits on a best-effort basis."""
    total = 0.0
    for model, usage in result["per_model"].items():
        worst = Usage(usage.input_tokens, usage.output_tokens, usage.cache_write_tokens + usage.cache_read_tokens, 0)
        total += price_usd(model, worst, batch=True) or 0.0
    return total


def table(suite: str, results: list[dict[str, Any]]) -> list[str]:
    naive = results[0]["cost"] / results[0]["items"]
    lines = [f"\n{suite}: {results[0]['items']} judged items, judge {JUDGE}",
             "| way | model calls | input | cache write | cache read | output | $ per item | vs naive |",
             "|---|---|---|---|---|---|---|---|"]
    for r in results:
        usage = sum(r["per_model"].values(), Usage())
        calls = ", ".join(f"{n} {model}" for model, n in sorted(r["calls"].items(), key=lambda kv: kv[0] != JUDGE))
        per_item = r["cost"] / r["items"]
        lines.append(f"| {r['way']} | {calls} | {usage.input_tokens:,} | {usage.cache_write_tokens:,} | "
                     f"{usage.cache_read_tokens:,} | {usage.output_tokens:,} | ${per_item:.5f} | "
                     f"{per_item / naive - 1:+.0%} |")
        assert abs(r["cost"] - r["recorded"]) < 1e-6, (r["way"], r["cost"], r["recorded"])  # the records agree
    batch = next(r for r in results if r["way"] == "cached + batch")
    lines.append(f"\ncached + batch with no batched cache hit (the worst case): "
                 f"${no_batch_hits(batch) / batch['items']:.5f} per item, "
                 f"{no_batch_hits(batch) / batch['items'] / naive - 1:+.0%}")
    for r in results:
        for line in (r["prefix_line"], r["cascade_line"]):
            if line:
                lines.append(f"{r['way']}: {line}")
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--items", type=int, default=200, help="accounts (judged items) per suite (default 200)")
    parser.add_argument("--suite", choices=("demo", "long", "both"), default="both")
    parser.add_argument("--dir", type=Path, default=Path(__file__).resolve().parent / ".runs",
                        help="where the generated suites and their records go (default: benchmarks/.runs)")
    args = parser.parse_args()
    args.dir.mkdir(parents=True, exist_ok=True)
    base = Path(tempfile.mkdtemp(prefix="harness-costs-", dir=args.dir))
    suites = ("demo", "long") if args.suite == "both" else (args.suite,)
    out: list[str] = []
    with FakeAnthropic(keep_alive=True) as server:
        server.responder = judge_responder(brief_judge)
        for suite in suites:
            root = base / suite
            write_suite(root, args.items, long=suite == "long")
            results = [run_way(root, server, way, options, cascade=cascade) for way, options, _, cascade in WAYS]
            out += table(suite, results)
    print(textwrap.dedent("\n".join(out)))
    print(f"\n(the suites and their records: {base})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
