"""``timeout_s`` bounds a whole model call, whatever the provider does: a server that trickles its answer a byte at a
time (through the real anthropic and openai SDKs, against the fake servers on 127.0.0.1), a 429 whose retry-after
is longer than the call may take, and a plugin provider that blocks. Each ends as the timeout error (exit code 81)
near ``timeout_s``, not later; the bounds asserted are generous (the machine is shared), the point is that the
call does not take as long as the server would.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from conftest import JUDGED_CASES, Project
from harness.base.errors import ExitCode, ModelCallError
from harness.llm import CallPolicy, Message, ModelClient, ModelReply, ModelSettings, Price, Usage
from harness.llm.providers import Provider, register_provider, unregister_provider
from harness.testing import FakeAnthropic, Reply
from harness.testing.fake_openai import FakeOpenAI
from harness.testing.fake_openai import Reply as OpenAIReply

TIMEOUT_S = 1.0
LONG_ANSWER = "x" * 4000  # at 0.05 s a byte the server would take minutes to write it
BYTE_EVERY_S = 0.05
WELL_BEFORE_THE_SERVER = 15.0  # seconds: far under the trickle's minutes, far over timeout_s on a loaded machine


def timed(call: Callable[[], Any]) -> tuple[BaseException | None, float]:
    started = time.monotonic()
    try:
        call()
    except Exception as exc:  # noqa: BLE001 - returned for the assertions
        return exc, time.monotonic() - started
    return None, time.monotonic() - started


def wait_for(condition: Callable[[], bool], seconds: float = WELL_BEFORE_THE_SERVER) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.02)
    return condition()


SERVERS = {
    "anthropic": (FakeAnthropic, Reply, "claude-haiku-4-5"),
    "openai": (FakeOpenAI, OpenAIReply, "openai/gpt-4.1-mini"),
}


@pytest.fixture(params=sorted(SERVERS))
def server(request: pytest.FixtureRequest) -> Iterator[tuple[Any, Any, str]]:
    fake_class, reply_class, model = SERVERS[request.param]
    with fake_class() as fake:
        yield fake, reply_class, model


def client_for(server: tuple[Any, Any, str], *, timeout_s: float = TIMEOUT_S, max_retries: int = 2,
               policy: CallPolicy | None = None) -> ModelClient:
    fake, _, model = server
    return ModelClient(ModelSettings(model=model, timeout_s=timeout_s, max_retries=max_retries), api_key="sk-test",
                       base_url=fake.base_url, policy=policy)


@pytest.mark.parametrize("head", [True, False], ids=["whole-answer", "body-only"])
def test_a_trickling_server_ends_at_timeout_s_through_the_sdk(server: tuple[Any, Any, str], head: bool) -> None:
    fake, reply, model = server
    fake.queue(reply.trickle(BYTE_EVERY_S, reply.text(LONG_ANSWER), head=head))
    client = client_for(server)

    error, took = timed(lambda: client.complete(messages=[Message.user("hi")]))

    assert isinstance(error, ModelCallError) and error.exit_code == ExitCode.TIMEOUT, error
    assert str(error).startswith(f"model call to {model} timed out after 1s (timeout_s bounds the whole call, "
                                 "retries included")
    assert TIMEOUT_S * 0.9 <= took < WELL_BEFORE_THE_SERVER, took
    if not head:  # the abandoned attempt stops reading too: the server sees the client hang up, long before the end
        assert wait_for(lambda: fake.hangups), "the SDK kept reading the trickled answer"
    client.close()


def test_a_retry_after_longer_than_the_call_may_take_ends_at_timeout_s(server: tuple[Any, Any, str]) -> None:
    """Retries count against timeout_s: the SDK would sleep out a 30 s retry-after before trying again."""
    fake, reply, _ = server
    fake.queue(reply.error(429, retry_after=30), reply.text("too late"))
    error, took = timed(lambda: client_for(server, max_retries=3).complete(messages=[Message.user("hi")]))
    assert isinstance(error, ModelCallError) and error.exit_code == ExitCode.TIMEOUT, error
    assert took < WELL_BEFORE_THE_SERVER, took
    assert fake.calls == 1  # no attempt starts once the call's time is up


def test_an_sdk_call_runs_on_the_callers_thread(server: tuple[Any, Any, str]) -> None:
    """The built-in providers bound every wait of a call themselves, so a call is not handed to another thread and
    back."""
    fake, reply, _ = server
    fake.queue(reply.text("hello"))
    client = client_for(server)
    attempts_on: list[int] = []
    http_attempt = client.policy.http_attempt

    def noting_the_thread(send: Callable[[], Any], **options: Any) -> Any:
        attempts_on.append(threading.get_ident())
        return http_attempt(send, **options)

    client.policy.http_attempt = noting_the_thread  # type: ignore[method-assign]
    assert client.complete(messages=[Message.user("hi")]).text == "hello"
    assert attempts_on == [threading.get_ident()]
    client.close()


def test_an_sdk_whose_retry_wait_cannot_be_capped_still_ends_at_timeout_s(
        server: tuple[Any, Any, str], monkeypatch: pytest.MonkeyPatch) -> None:
    """A release of an SDK that computes its retry wait elsewhere: its calls go back to a thread of their own, and
    a 30 s retry-after still ends the call at timeout_s."""
    monkeypatch.setattr("harness.llm.providers.cap_retry_waits", lambda sdk_client: False)
    fake, reply, _ = server
    fake.queue(reply.error(429, retry_after=30), reply.text("too late"))
    error, took = timed(lambda: client_for(server, max_retries=3).complete(messages=[Message.user("hi")]))
    assert isinstance(error, ModelCallError) and error.exit_code == ExitCode.TIMEOUT, error
    assert TIMEOUT_S * 0.9 <= took < WELL_BEFORE_THE_SERVER, took


def test_waiting_for_a_concurrency_slot_does_not_count_against_timeout_s(fake_anthropic: FakeAnthropic) -> None:
    """The harness's own queue is not the model's slowness: a call that waits for a slot still gets its timeout_s."""
    policy = CallPolicy(1)
    fake_anthropic.queue(Reply.slow(2.0, Reply.text("slow")), Reply.text("fast"))
    patient = client_for((fake_anthropic, Reply, "claude-haiku-4-5"), timeout_s=10, policy=policy)
    hurried = client_for((fake_anthropic, Reply, "claude-haiku-4-5"), timeout_s=TIMEOUT_S, policy=policy)
    first = threading.Thread(target=lambda: patient.complete(messages=[Message.user("one")]))
    first.start()
    assert wait_for(lambda: fake_anthropic.calls == 1)
    error, took = timed(lambda: hurried.complete(messages=[Message.user("two")]))  # waits ~2 s for the slot
    first.join()
    assert error is None and took > TIMEOUT_S


def test_an_abandoned_call_lets_its_slot_go(fake_anthropic: FakeAnthropic) -> None:
    """A server still trickling an answer its caller gave up on holds no slot that the next call waits for."""
    policy = CallPolicy(1)
    fake_anthropic.queue(Reply.trickle(BYTE_EVERY_S, Reply.text(LONG_ANSWER)), Reply.text("next"))
    server = (fake_anthropic, Reply, "claude-haiku-4-5")
    error, _ = timed(lambda: client_for(server, policy=policy).complete(messages=[Message.user("one")]))
    assert isinstance(error, ModelCallError) and error.exit_code == ExitCode.TIMEOUT
    error, took = timed(lambda: client_for(server, timeout_s=5, policy=policy).complete(messages=[Message.user("two")]))
    assert error is None and took < 5, error


# -- plugin providers --------------------------------------------------------------------------------


class Blocking(Provider):
    """A plugin provider that never answers until released."""

    name = "blocking"
    release = threading.Event()

    def send(self, request: Any, *, batch: bool = False) -> Any:
        self.release.wait(60)
        raise RuntimeError("released")


@pytest.fixture
def blocking() -> Iterator[type[Blocking]]:
    register_provider("blocking", Blocking)
    Blocking.release.clear()
    yield Blocking
    Blocking.release.set()
    unregister_provider("blocking")


def test_a_blocking_plugin_provider_ends_at_timeout_s(blocking: type[Blocking]) -> None:
    client = ModelClient(ModelSettings(model="blocking/m1", timeout_s=TIMEOUT_S))
    error, took = timed(lambda: client.complete(messages=[Message.user("hi")]))
    assert isinstance(error, ModelCallError) and error.exit_code == ExitCode.TIMEOUT, error
    assert str(error) == ("model call to blocking/m1 timed out after 1s (timeout_s bounds the whole call, retries "
                          "included); raise timeout_s or retry later")
    assert TIMEOUT_S * 0.9 <= took < WELL_BEFORE_THE_SERVER


class Late(Provider):
    """A plugin provider that answers, but after its caller's timeout_s."""

    name = "late"

    def send(self, request: Any, *, batch: bool = False) -> ModelReply:
        time.sleep(TIMEOUT_S + 0.5)
        return ModelReply(text="late", tool_calls=(), usage=Usage(input_tokens=1000, output_tokens=1000),
                          model="late/m1", stop_reason="end_turn")


def test_an_answer_that_comes_after_the_timeout_is_still_counted_in_the_spend() -> None:
    """It was billed all the same: the policy's counters (and so the cost cap) count it, though the caller had its
    timeout error."""
    register_provider("late", Late)
    try:
        policy = CallPolicy(prices={"late/m1": Price(1.0, 1.0, 1.0, 1.0)})
        client = ModelClient(ModelSettings(model="late/m1", timeout_s=TIMEOUT_S), policy=policy)
        error, _ = timed(lambda: client.complete(messages=[Message.user("hi")]))
        assert isinstance(error, ModelCallError) and error.exit_code == ExitCode.TIMEOUT
        assert wait_for(lambda: policy.stats.snapshot()["output_tokens"] == 1000)
        assert policy.stats.cost_usd == pytest.approx(2000 / 1e6)
    finally:
        unregister_provider("late")


BLOCKING_CONFTEST = '''
import threading
from harness.llm.providers import Provider

RELEASE = threading.Event()


class House(Provider):
    name = "house"

    def send(self, request, *, batch=False):
        RELEASE.wait(60)  # a provider that hangs: a socket without a timeout, a lock never released
        raise RuntimeError("too late")


def pytest_harness_providers():
    return {"house": House}


def pytest_unconfigure(config):
    RELEASE.set()
'''


def test_a_blocking_plugin_provider_fails_the_item_as_a_timeout_in_a_run(project: Project) -> None:
    project.judged(JUDGED_CASES, timeout_s=TIMEOUT_S)
    agents = project.root / "suites/agents.yaml"
    agents.write_text(agents.read_text().replace("claude-haiku-4-5", "house/judge-1"))
    project.write("conftest.py", BLOCKING_CONFTEST)
    started = time.monotonic()
    result = project.run("suites/")
    assert time.monotonic() - started < WELL_BEFORE_THE_SERVER
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*ERROR on attempt 1: model call to house/judge-1 timed out after 1s (timeout_s "
                                 "bounds the whole call, retries included); raise timeout_s or retry later*"])
    assert "Traceback" not in result.stdout.str()
    (row,) = project.runs()
    assert (row["outcome"], row["exit_code"]) == ("error", int(ExitCode.TIMEOUT))
