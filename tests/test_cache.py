"""The response cache (harness.cache) on its own and behind ModelClient, against the fake Messages API."""

from __future__ import annotations

import dataclasses
import multiprocessing
import sqlite3
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from harness.base.errors import HarnessConfigError
from harness.llm import CallPolicy, Message, ModelClient, ModelSettings, ToolSpec
from harness.llm.cache import ResponseCache, cache_access, cache_key, canonical_json
from harness.testing import FakeAnthropic, Reply, judge_responder

FAST = ModelSettings(model="claude-haiku-4-5", max_retries=0, timeout_s=5.0)
HI = [Message.user("hi")]


def cached_client(
    tmp_path: Path, mode: str = "auto", settings: ModelSettings = FAST
) -> tuple[ModelClient, CallPolicy]:
    policy = CallPolicy(cache=ResponseCache(tmp_path / "cache.db"), cache_mode=mode)
    return ModelClient(settings, policy=policy), policy


# -- the store --------------------------------------------------------------------------------------


def test_key_is_canonical() -> None:
    assert canonical_json({"b": 1, "a": [1, {"y": 2, "x": "é"}]}) == '{"a":[1,{"x":"é","y":2}],"b":1}'
    assert cache_key({"a": 1, "b": 2}) == cache_key({"b": 2, "a": 1})
    assert cache_key({"a": 1}) != cache_key({"a": 1.5}) and len(cache_key({})) == 64


def test_modes() -> None:
    assert cache_access("auto", 0.0) == (True, True, True)
    assert cache_access("auto", 0.7) == (False, False, False)
    assert cache_access("read", 0.7) == (True, False, False)
    assert cache_access("write", 0.0) == (False, True, False)
    assert cache_access("refresh", 0.0) == (False, True, True)
    assert cache_access("off", 0.0) == (False, False, False)
    with pytest.raises(ValueError, match="unknown cache mode 'on'"):
        cache_access("on", 0.0)


def test_store_put_get_overwrite_and_lazy_file(tmp_path: Path) -> None:
    cache = ResponseCache(tmp_path / "w" / "cache.db")
    assert len(cache) == 0 and not cache.path.exists()  # nothing written until used
    assert cache.get("k") is None and not cache.path.exists()  # a lookup alone creates nothing
    cache.put("k", {"text": "one"})
    cache.put("k", {"text": "two"}, overwrite=False)
    assert cache.get("k") == {"text": "one"}
    cache.put("k", {"text": "three"})
    assert cache.get("k") == {"text": "three"} and len(cache) == 1
    with sqlite3.connect(cache.path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    cache.clear()
    assert len(cache) == 0
    cache.close()


def test_a_file_that_is_not_a_cache_is_a_config_error(tmp_path: Path) -> None:
    path = tmp_path / "cache.db"
    path.write_text("this is not sqlite " * 100)
    with pytest.raises(HarnessConfigError, match=r"cache\.db: cannot open the response cache .*--harness-cache off"):
        ResponseCache(path).get("k")


# -- behind the client ------------------------------------------------------------------------------


def test_hit_makes_no_call_and_returns_the_same_reply(fake_anthropic: FakeAnthropic, tmp_path: Path) -> None:
    fake_anthropic.responder = judge_responder()
    client, policy = cached_client(tmp_path)
    tools = [ToolSpec("submit_result", "", {"type": "object"})]
    kwargs: dict[str, Any] = {"system": "judge", "messages": HI, "tools": tools, "cached_system_prefix": "RUBRIC"}
    first = client.complete(**kwargs)
    second = client.complete(**kwargs)

    assert fake_anthropic.calls == 1
    assert not first.cached and second.cached
    assert second == replace(first, cached=True, cost_usd=0.0)
    assert first.cost_usd > 0 and second.usage == first.usage  # the tokens the answer took; not billed again
    stats = policy.stats.snapshot()
    assert stats["calls"] == 1 and stats["cache_hits"] == 1
    assert stats["cost_usd"] == pytest.approx(first.cost_usd)
    assert stats["input_tokens"] == first.usage.input_tokens  # a hit adds no tokens


def test_a_new_client_and_policy_reads_the_same_file(fake_anthropic: FakeAnthropic, tmp_path: Path) -> None:
    fake_anthropic.queue(Reply.text("stored"))
    cached_client(tmp_path)[0].complete(system="s", messages=HI)
    client, policy = cached_client(tmp_path)  # a second run
    assert client.complete(system="s", messages=HI).text == "stored"
    assert fake_anthropic.calls == 1 and policy.stats.snapshot()["calls"] == 0


@pytest.mark.parametrize(
    "change",
    [
        {"system": "other system"},
        {"messages": [Message.user("hi!")]},
        {"cached_system_prefix": "RUBRIC v2"},
        {"cache_extra": {"sample": 1}},
        {"tools": [ToolSpec("t", "", {"type": "object"})]},
        {"settings": replace(FAST, model="claude-opus-4-5")},
        {"settings": replace(FAST, max_tokens=100)},
        {"settings": replace(FAST, stop=("\n\n",))},
        {"settings": replace(FAST, top_p=0.9)},  # recorded and keyed, though Anthropic is not sent it
        {"settings": replace(FAST, seed=7)},
        {"top_logprobs": 20},
    ],
    ids=["system", "messages", "prefix", "cache_extra", "tools", "model", "max_tokens", "stop", "top_p", "seed",
         "logprobs"],
)
def test_anything_that_decides_the_answer_changes_the_key(
    fake_anthropic: FakeAnthropic, tmp_path: Path, change: dict[str, Any]
) -> None:
    fake_anthropic.responder = lambda request: Reply.text("answer")
    base: dict[str, Any] = {
        "system": "s",
        "messages": HI,
        "cached_system_prefix": "RUBRIC",
        "cache_extra": {"sample": 0},
    }
    client, _ = cached_client(tmp_path)
    client.complete(**base)
    changed = {**base, **change}
    other = cached_client(tmp_path, settings=changed.pop("settings", FAST))[0]
    assert other.complete(**changed).cached is False
    assert fake_anthropic.calls == 2
    assert client.complete(**base).cached is True  # the original is still there


def test_settings_left_unset_keep_the_keys_answers_were_stored_under() -> None:
    """The generation settings are in the key only when set: a cache written before they existed still answers."""
    from harness.llm.types import ModelRequest

    assert set(ModelRequest(model="m").cache_payload()) == {
        "model", "system", "prefix", "messages", "tools", "tool_choice", "output_schema", "max_tokens",
        "parallel_tools"}
    assert ModelRequest(model="m", stop=("\n",), seed=3).cache_payload()["stop"] == ["\n"]


def test_log_probabilities_are_replayed_from_the_cache(fake_openai: Any, tmp_path: Path) -> None:
    from harness.testing.fake_openai import Reply as OpenAIReply

    fake_openai.token_choices = {"3": {"3": 0.6, "4": 0.4}}
    fake_openai.responder = lambda request: OpenAIReply.text("Coherence: 3")
    settings = ModelSettings(model="openai/gpt-4.1-mini", max_retries=0, timeout_s=5.0)
    client = cached_client(tmp_path, settings=settings)[0]
    first = client.complete(messages=HI, top_logprobs=5)
    second = client.complete(messages=HI, top_logprobs=5)
    assert second.cached and fake_openai.calls == 1
    assert second.logprobs == first.logprobs and first.logprobs[-1].top == ((" 3", pytest.approx(-0.5108, abs=1e-4)),
                                                                             (" 4", pytest.approx(-0.9163, abs=1e-4)))


def test_auto_caches_only_temperature_zero(fake_anthropic: FakeAnthropic, tmp_path: Path) -> None:
    fake_anthropic.responder = lambda request: Reply.text("x")
    warm, _ = cached_client(tmp_path, settings=replace(FAST, temperature=0.7))
    warm.complete(system="s", messages=HI)
    warm.complete(system="s", messages=HI)
    assert fake_anthropic.calls == 2 and len(ResponseCache(tmp_path / "cache.db")) == 0
    # ...but K samples at temperature > 0 can be cached explicitly, told apart by cache_extra
    sampled, _ = cached_client(tmp_path, mode="write", settings=replace(FAST, temperature=0.7))
    for k in range(3):
        sampled.complete(system="s", messages=HI, cache_extra={"sample": k})
    assert len(ResponseCache(tmp_path / "cache.db")) == 3


def test_read_write_refresh_off(fake_anthropic: FakeAnthropic, tmp_path: Path) -> None:
    def ask(mode: str) -> tuple[str, bool]:
        reply = cached_client(tmp_path, mode)[0].complete(system="s", messages=HI)
        return reply.text, reply.cached

    fake_anthropic.queue(*(Reply.text(f"v{n}") for n in range(1, 7)))
    assert ask("read") == ("v1", False)  # a miss calls the API and stores nothing
    assert ask("read") == ("v2", False)
    assert ask("write") == ("v3", False)  # stored
    assert ask("write") == ("v4", False)  # never reads; keeps the existing entry
    assert ask("read") == ("v3", True)
    assert ask("refresh") == ("v5", False)  # ignores the entry and overwrites it
    assert ask("auto") == ("v5", True)
    assert ask("off") == ("v6", False)
    assert fake_anthropic.calls == 6


def test_a_hit_needs_no_api_key(
    fake_anthropic: FakeAnthropic, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_anthropic.queue(Reply.text("stored"))
    cached_client(tmp_path)[0].complete(system="s", messages=HI)
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    assert cached_client(tmp_path)[0].complete(system="s", messages=HI).text == "stored"


def test_generate_json_answers_from_the_cache(fake_anthropic: FakeAnthropic, tmp_path: Path) -> None:
    fake_anthropic.queue(Reply.tool({"a": "wrong"}), Reply.tool({"a": 1}))
    schema = {"type": "object", "required": ["a"], "properties": {"a": {"type": "integer"}}}
    first = cached_client(tmp_path)[0].generate_json(system="s", prompt="p", schema=schema)
    second = cached_client(tmp_path)[0].generate_json(system="s", prompt="p", schema=schema)
    assert first.data == second.data == {"a": 1} and first.attempts == second.attempts == 2
    assert (first.cache_hits, second.cache_hits) == (0, 2) and second.cost_usd == 0
    # a replayed answer took no tokens this time: the records count only what was spent
    assert first.usage.input_tokens > 0 and second.usage.total_tokens == 0 and fake_anthropic.calls == 2


# -- shared by processes, as pytest-xdist workers share it ------------------------------------------


def _worker(base_url: str, path: str, worker: int, n: int, queue: Any) -> None:
    try:
        _ask_all(base_url, path, worker, n, queue)
    except BaseException as exc:  # report it: the parent would otherwise wait for a result that never comes
        queue.put((worker, f"{type(exc).__name__}: {exc}", -1))
        raise


def _ask_all(base_url: str, path: str, worker: int, n: int, queue: Any) -> None:
    policy = CallPolicy(cache=ResponseCache(path))
    # a loaded machine may hold a process back for seconds: this test is about the shared file, not deadlines
    patient = dataclasses.replace(FAST, timeout_s=60.0)
    client = ModelClient(patient, api_key="sk-ant-test-dummy", base_url=base_url, policy=policy)
    texts = []
    for i in range(n):  # both workers ask the same questions, in opposite orders
        k = i if worker == 0 else n - 1 - i
        texts.append((k, client.complete(system="s", messages=[Message.user(f"q{k}")]).text))
    queue.put((worker, sorted(texts), policy.stats.snapshot()["cache_hits"]))


def test_two_processes_share_one_cache_file(fake_anthropic: FakeAnthropic, tmp_path: Path) -> None:
    fake_anthropic.responder = lambda request: Reply.text("a:" + request["messages"][0]["content"])
    path = str(tmp_path / "cache.db")
    # spawn, not fork: forking this multi-threaded process (the fake server, the SDK's pools) can copy a
    # lock held by another thread into the child, which then hangs.
    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    n = 30
    procs = [ctx.Process(target=_worker, args=(fake_anthropic.base_url, path, w, n, queue)) for w in (0, 1)]
    for p in procs:
        p.start()
    results = [queue.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(timeout=10)
        assert p.exitcode == 0, results

    expected = [(k, f"a:q{k}") for k in range(n)]
    assert all(texts == expected for _, texts, _ in results), results
    hits = sum(h for _, _, h in results)
    assert fake_anthropic.calls + hits == 2 * n  # every question answered once by the API or by the cache
    assert len(ResponseCache(path)) == n  # one entry per question, none torn or doubled
    again, policy = cached_client(tmp_path)
    assert [again.complete(system="s", messages=[Message.user(f"q{k}")]).text for k in range(n)] == [
        t for _, t in expected
    ]
    assert policy.stats.snapshot()["calls"] == 0


def _open_at_once(folder: str, trials: int, barrier: Any, queue: Any) -> None:
    answers = []
    for trial in range(trials):
        cache = ResponseCache(Path(folder) / f"cache-{trial}.db")
        barrier.wait()
        try:
            cache.put("k", {"text": "x"})
            answers.append("ok")
        except HarnessConfigError as err:
            answers.append(str(err))
        cache.close()
    queue.put(answers)


def test_processes_that_open_a_new_cache_file_at_once_all_get_it(tmp_path: Path) -> None:
    """pytest-xdist workers make their first model call at the same moment: each opens the fresh cache.db and
    switches it to WAL. SQLite fails one of two such switches at once, without waiting; none may fail."""
    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    trials, workers = 40, 6
    barrier = ctx.Barrier(workers)
    procs = [ctx.Process(target=_open_at_once, args=(str(tmp_path), trials, barrier, queue)) for _ in range(workers)]
    for p in procs:
        p.start()
    answers = [queue.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(timeout=10)
    assert answers == [["ok"] * trials] * workers, answers
    assert [len(ResponseCache(tmp_path / f"cache-{trial}.db")) for trial in range(trials)] == [1] * trials
