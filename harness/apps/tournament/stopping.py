"""The stop check, the last step of an iteration: phase transitions (the active phase's targets met by the
current best), then the stop rules (max_iterations, target_score, circuit breaker, plateau)."""

from __future__ import annotations

from harness.apps.tournament.context import Context
from harness.apps.tournament.models import AgentSettings
from harness.apps.tournament.settings import event, save_settings, write_events
from harness.apps.tournament.state import IterationState, StopCheckStep
from harness.apps.tournament.store import Layout, histories, recorded_baseline
from harness.loading.goal import Goal

_FAILED_STATUSES = ("no_winner", "all_rejected")


def stop_reason(goal: Goal, layout: Layout) -> str | None:
    """Why no further iteration should start, or None."""
    history = histories(layout)
    stop = goal.stop
    if len(history) >= stop.max_iterations:
        return f"max_iterations ({stop.max_iterations}) reached"
    best = recorded_baseline(layout)
    if best is not None and stop.target_score is not None:
        if goal.metric.better(best.score, stop.target_score) >= 0:
            return f"target_score {stop.target_score:g} reached ({goal.metric.name} {best.score:g})"
    statuses = [h.get("merge_status") for h in history]
    if len(statuses) >= stop.circuit_breaker and all(
            s in _FAILED_STATUSES for s in statuses[-stop.circuit_breaker:]):
        return (f"circuit breaker: the last {stop.circuit_breaker} iterations failed "
                f"({', '.join(map(str, statuses[-stop.circuit_breaker:]))})")
    if len(statuses) >= stop.plateau_window and "merged" not in statuses[-stop.plateau_window:]:
        return f"plateau: no merge in the last {stop.plateau_window} iterations"
    return None


def stop_check(ctx: Context, n: int, st: IterationState, settings: AgentSettings) -> None:
    ctx.store.step("stop_check")
    if st.stop_check is None:
        st.stop_check = StopCheckStep()
    if not st.stop_check.events_written:
        goal = ctx.goal
        events = []
        best = recorded_baseline(ctx.layout)
        phase = goal.phase(settings.current_phase)
        while best is not None and phase is not None and not phase.unmet(best.sub_scores):
            nxt = goal.next_phase(phase.phase)
            if nxt is None:
                break
            events.append(event(goal, "phase_transition", n, "current_phase", phase.phase, nxt.phase, "tournament"))
            ctx.echo(f"  phase {phase.phase} targets met ({', '.join(map(str, phase.targets))}): "
                     f"now {nxt.phase} ({nxt.focus})")
            phase = nxt
        if events:
            write_events(ctx.layout, events)
            settings.current_phase = phase.phase if phase else None
            save_settings(ctx.layout, settings)
        st.stop_check.events_written = True
        ctx.store.save()
    st.stop_reason = stop_reason(ctx.goal, ctx.layout)
    st.status = "completed"
    ctx.store.save()
