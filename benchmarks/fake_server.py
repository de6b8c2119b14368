"""A fake Anthropic (or, with --provider openai, OpenAI chat-completions) server in its own process, so its work does not share the harness's GIL.

Producer requests get a short artifact, judge requests (a forced tool call) a valid evaluation.
On SIGTERM it writes its statistics (calls, peak calls in flight, the wall-clock time of the first
request) as JSON to the given path. With ``--requests-file`` it also writes, once it has seen one of each, the first
producer request and the first judge request it got (their JSON bodies, a list of two): the bare SDK's reference
run sends the very same requests (speed.py's ``BARE_SDK``).

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
    parser.add_argument("--requests-file", type=Path, help="where to write a producer's and a judge's request")
    args = parser.parse_args()
    fake = fake_openai if args.provider == "openai" else fake_anthropic
    Reply = fake.Reply  # noqa: N806
    judge = fake.judge_responder(default=0.9)
    first_request_at: list[float] = []
    first_of_kind: dict[bool, dict] = {}  # the first request that is not a judge's (a producer's), and a judge's

    def is_judge(request: dict) -> bool:  # a forced tool, or a JSON schema to answer in
        return bool(request.get("tools") or request.get("response_format"))

    def keep_first(request: dict) -> None:
        first_of_kind.setdefault(is_judge(request), request)
        if len(first_of_kind) == 2 and args.requests_file:  # respond() stops asking once both are kept
            partial = args.requests_file.with_name(args.requests_file.name + ".partial")
            partial.write_text(json.dumps([first_of_kind[False], first_of_kind[True]]))
            partial.replace(args.requests_file)

    def respond(request: dict) -> object:
        if not first_request_at:
            first_request_at.append(time.time())
        if len(first_of_kind) < 2:
            keep_first(request)
        if is_judge(request):
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
