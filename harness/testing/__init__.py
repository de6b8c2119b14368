"""Test helpers for pytest-rubric and its users: a fake Anthropic Messages API server."""

from harness.testing.fake_anthropic import FakeAnthropic, Reply, judge_responder

__all__ = ["FakeAnthropic", "Reply", "judge_responder"]
