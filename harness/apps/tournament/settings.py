"""``agent-settings.json`` (the current phase, the agent counts last used, the ideas taken) and the events
that change it: ``config_change`` when goal.md's counts or phases changed, ``phase_transition`` when the
tournament moves to the next phase."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from harness.apps.tournament.models import AgentSettings
from harness.apps.tournament.schemas import write_record
from harness.apps.tournament.store import Layout, append_array, histories, now_iso, read_model
from harness.loading.goal import Goal


def load_settings(layout: Layout) -> AgentSettings | None:
    try:
        return read_model(layout.settings_file, "agent_settings", AgentSettings)
    except FileNotFoundError:
        return None


def save_settings(layout: Layout, settings: AgentSettings) -> None:
    write_record(layout.settings_file, "agent_settings", settings.to_json())


def event(goal: Goal, kind: str, iteration: int, name: str, old: Any, new: Any, source: str) -> dict[str, Any]:
    """An ``event_log`` entry: ``name`` went from ``old`` to ``new``."""
    return {"timestamp": now_iso(), "event_type": kind, "iteration": iteration,
            "details": {"field": name, "old_value": old, "new_value": new, "source": source},
            "goal": goal.slug}


def write_events(layout: Layout, events: list[dict[str, Any]]) -> None:
    append_array(layout.events, "event_log", events)


def sync_settings(goal: Goal, layout: Layout, echo: Callable[[str], None]) -> AgentSettings:
    """The settings as goal.md has them now: a changed agent count, or a phase goal.md no longer has, is
    taken over and recorded as a ``config_change`` from the user."""
    settings = load_settings(layout)
    active = goal.phase(None)
    if settings is None:
        settings = AgentSettings(goal_slug=goal.slug, current_phase=active.phase if active else None,
                                 number_of_planners=goal.agents.planners,
                                 number_of_executors=goal.agents.executors, consumed_ideas=[])
        save_settings(layout, settings)
        return settings
    events = []
    upcoming = len(histories(layout)) + 1
    if settings.number_of_planners != goal.agents.planners:
        events.append(event(goal, "config_change", upcoming, "number_of_planners", settings.number_of_planners,
                            goal.agents.planners, "user"))
        settings.number_of_planners = goal.agents.planners
    if settings.number_of_executors != goal.agents.executors:
        events.append(event(goal, "config_change", upcoming, "number_of_executors", settings.number_of_executors,
                            goal.agents.executors, "user"))
        settings.number_of_executors = goal.agents.executors
    if settings.current_phase and not any(p.phase == settings.current_phase for p in goal.phases):
        new_phase = active.phase if active else None
        events.append(event(goal, "config_change", upcoming, "current_phase", settings.current_phase, new_phase,
                            "user"))
        settings.current_phase = new_phase
    if events:
        write_events(layout, events)
        for e in events:
            echo(f"config change from goal.md: {e['details']['field']} "
                 f"{e['details']['old_value']} -> {e['details']['new_value']}")
    save_settings(layout, settings)
    return settings
