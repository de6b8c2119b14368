"""A fake Anthropic server in its own process, so its work does not share the harness's GIL.

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

from harness.testing.fake_anthropic import FakeAnthropic, Reply, judge_responder


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--latency", type=float, default=0.0)
    parser.add_argument("--port-file", type=Path, required=True)
    parser.add_argument("--stats-file", type=Path, required=True)
    args = parser.parse_args()
    judge = judge_responder(default=0.9)
    first_request_at: list[float] = []

    def respond(request: dict) -> Reply:
        if not first_request_at:
            first_request_at.append(time.time())
        if request.get("tools"):
            return judge(request)
        return Reply.text("# Artifact\n\nA short answer produced for the benchmark.\n")

    stopped = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopped.set())
    with FakeAnthropic(keep_alive=True) as server:  # the real API keeps connections alive too
        server.responder = respond
        server.latency_s = args.latency
        args.port_file.write_text(server.base_url)
        stopped.wait()
        args.stats_file.write_text(json.dumps({"calls": server.calls, "peak_in_flight": server.peak_in_flight,
                                               "first_request_at": first_request_at[0] if first_request_at else None}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
