"""A fake Anthropic (or, with --provider openai, OpenAI chat-completions) server in its own process, so its work does not share the harness's GIL.

Producer requests get a short artifact, judge requests (a forced tool call) a valid evaluation.
On SIGTERM it writes its statistics (calls, peak calls in flight, the wall-clock time of the first
request) as JSON to the given path.

    python benchmarks/fake_server.py --latency 0.2 --port-file PORT --stats-file STATS
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
import time
from pathlib import Path

from harness.testing import fake_anthropic, fake_openai


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--latency", type=float, default=0.0)
    parser.add_argument("--port-file", type=Path, required=True)
    parser.add_argument("--stats-file", type=Path, required=True)
    parser.add_argument("--provider", choices=("anthropic", "openai"), default="anthropic")
    parser.add_argument("--port", type=int, default=0, help="0: any free port")
    args = parser.parse_args()
    fake = fake_openai if args.provider == "openai" else fake_anthropic
    Reply = fake.Reply  # noqa: N806
    judge = fake.judge_responder(default=0.9)
    first_request_at: list[float] = []

    def respond(request: dict) -> object:
        if not first_request_at:
            first_request_at.append(time.time())
        if request.get("tools"):
            return judge(request)
        return Reply.text("# Artifact\n\nA short answer produced for the benchmark.\n")

    stopped = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopped.set())
    server_class = fake_openai.FakeOpenAI if args.provider == "openai" else fake_anthropic.FakeAnthropic
    with server_class(keep_alive=True, port=args.port) as server:  # the real API keeps connections alive too
        server.responder = respond
        server.latency_s = args.latency
        args.port_file.write_text(server.base_url)
        stopped.wait()
        args.stats_file.write_text(json.dumps({"calls": server.calls, "peak_in_flight": server.peak_in_flight,
                                               "first_request_at": first_request_at[0] if first_request_at else None}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
