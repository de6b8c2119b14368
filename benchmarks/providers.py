"""The demo suites run on each provider, and once with the reviser and the judge on two providers.

    python benchmarks/providers.py [-v]      (-v: each run's pytest output too)

It starts the fake Anthropic Messages server and the fake OpenAI chat-completions server on 127.0.0.1
(harness/testing), points the real SDKs at them (``ANTHROPIC_BASE_URL``, ``OPENAI_BASE_URL``), and runs
``pytest suites/`` in fresh processes with a throw-away work folder:

- the demo (``--rubric target-quality``) judged by ``anthropic/claude-sonnet-4-6``, ``openai/gpt-4.1-mini``
  and ``mock/score-0.95`` (offline, no server); its checks decide its verdict, so no judge is called;
- the judged brief suite (``--rubric brief-quality``): judge and LLM reviser on anthropic; judged by
  ``mock/score-1.0`` offline; and its judge on openai with its reviser on anthropic. The fake judges fail
  each first attempt, so every case is revised (by the anthropic reviser) and judged again.

It prints each run's outcome and, from the records, the tokens and cost of each model. Nothing reaches the
internet. Needs the ``openai`` extra (``pip install -e ".[openai]"``).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from harness.records import RecordReader  # noqa: E402
from harness.testing import FakeAnthropic, Reply, fake_anthropic, fake_openai  # noqa: E402  # noqa: E402
from harness.testing.fake_openai import FakeOpenAI  # noqa: E402

PRICES = "gpt-4.1-mini: {input: 0.4, output: 1.6}\nopenai/gpt-4.1-mini: {input: 0.4, output: 1.6}\n"
ARTIFACT = re.compile(r"```json\n(?P<body>.*)\n```", re.S)


def revised_or_low(request: dict) -> dict[str, float]:
    """The judge: a first attempt fails every judged criterion (they are pass/fail), a revised one passes."""
    return {} if "REVISED" in json.dumps(request) else {"grounded": 0, "buyer_named": 0, "actionable": 0}


def anthropic_answer(request: dict):
    """A judge's forced tool call gets an evaluation; the reviser's text request its artifact, marked revised."""
    if request.get("tools"):
        return fake_anthropic.judge_responder(revised_or_low)(request)
    message = request["messages"][-1]["content"]
    text = message if isinstance(message, str) else "".join(block.get("text", "") for block in message)
    body = json.loads(ARTIFACT.search(text)["body"])
    return Reply.text(body["artifact"] + "\n\nREVISED")


def run(name: str, args: list[str], env: dict[str, str], work: Path) -> None:
    folder = work / name
    command = [sys.executable, "-m", "pytest", "suites/", "-q", "-p", "no:cacheprovider", "-p", "no:randomly",
               "--harness-work-dir", str(folder), "--harness-cache", "off", "-o", f"harness_prices={work / 'p.yaml'}",
               *args]
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    last = (done.stdout.strip().splitlines() or ["(no output)"])[-1]
    if "-v" in sys.argv[1:]:
        print(done.stdout, done.stderr)
    print(f"\n## {name}: exit {done.returncode}: {last}")
    print(f"   {' '.join(['pytest', 'suites/', *args])}")
    totals: dict[str, dict[str, float | None]] = {}
    for attempt in RecordReader(folder).attempts():
        for model, spent in (attempt.get("model_usage") or {}).items():
            row = totals.setdefault(model, {"calls": 0, "input_tokens": 0, "output_tokens": 0, "cost_usd": 0.0})
            for key in row:
                row[key] = None if row[key] is None or spent.get(key) is None else row[key] + spent[key]
    for model, row in sorted(totals.items()):
        print(f"   {model:24} {int(row['calls']):>3} calls {int(row['input_tokens']):>6} in"
              f" {int(row['output_tokens']):>5} out  "
              + ("cost unknown (no price)" if row["cost_usd"] is None else f"${row['cost_usd']:.6f}"))


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp, FakeAnthropic(responder=anthropic_answer) as claude, \
            FakeOpenAI(responder=fake_openai.judge_responder(revised_or_low)) as gpt:
        work = Path(tmp)
        (work / "p.yaml").write_text(PRICES)
        env = {**os.environ, "ANTHROPIC_API_KEY": "sk-fake", "ANTHROPIC_BASE_URL": claude.base_url,
               "OPENAI_API_KEY": "sk-fake", "OPENAI_BASE_URL": gpt.base_url, "NO_PROXY": "127.0.0.1"}
        offline = {k: v for k, v in env.items() if not k.startswith(("ANTHROPIC_", "OPENAI_"))}
        demo = ["--rubric", "target-quality"]
        run("demo, judge anthropic (fake server)", [*demo, "--harness-judge-model", "anthropic/claude-sonnet-4-6"],
            env, work)
        run("demo, judge openai (fake server, openai SDK)", [*demo, "--harness-judge-model", "openai/gpt-4.1-mini"],
            env, work)
        run("demo, judge mock (offline, no key)", [*demo, "--harness-judge-model", "mock/score-0.95"], offline, work)
        brief = ["--rubric", "brief-quality"]
        run("brief suite, judge and reviser anthropic", [*brief], env, work)
        run("brief suite, judge mock (offline; the first attempt passes)", [*brief, "--harness-judge-model",
                                                                            "mock/score-1.0"], offline, work)
        run("brief suite, judge openai, reviser anthropic", [*brief, "--harness-judge-model", "openai/gpt-4.1-mini"],
            env, work)
        print(f"\nrequests: fake Anthropic {len(claude.requests)}, fake OpenAI {len(gpt.requests)}")


if __name__ == "__main__":
    main()
