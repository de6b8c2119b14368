"""A judge cascade in agents.yaml: a cheap judge first, the named judge only when its answer is uncertain.

```yaml
judge:
  model: claude-sonnet-4-6              # the named judge: it decides whatever the first judge is unsure of
  cascade:
    first: claude-haiku-4-5             # or a mapping of model keys: {model: claude-haiku-4-5, max_tokens: 1024}
    escalate_when: {margin: 0.1}        # the default: a score within 0.1 of the threshold goes to the named judge
```

An agent's ``judge:`` keeps the cascade of the level above it (its own keys apply to the named judge) unless it
names ``cascade:`` itself; ``cascade: off`` removes it. A cascade is in front of one named judge, not an ensemble.
What the cascade does is harness.evaluation.cascade; docs/model-calls.md, "Judge cascades".
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace

from harness.base.fields import Section
from harness.base.models import JudgeCascade, ModelSettings

CASCADE_KEY = "cascade"
_EXAMPLE = "`cascade: {first: claude-haiku-4-5, escalate_when: {margin: 0.1}}`"
_OFF = (False, None, "off")

OneModel = Callable[[Section, ModelSettings], ModelSettings]  # one model's keys in a section, over the settings given


def with_cascade(section: Section, base: ModelSettings, settings_of: OneModel, one_model: OneModel,
                 model_keys: tuple[str, ...]) -> ModelSettings:
    """The judge settings of a ``judge:`` section over ``base``, carrying the cascade it names or inherits.
    ``settings_of`` reads the section's own judge (ignoring ``cascade``); ``one_model`` one model's keys, which are
    ``model_keys``."""
    own = Section({key: value for key, value in section.raw.items() if key != CASCADE_KEY}, section.fields)
    named = settings_of(own, replace(base))  # ``replace`` leaves the cascade of ``base`` behind
    raw = section.raw.get(CASCADE_KEY, base.cascade)
    if CASCADE_KEY in section and raw in _OFF:
        return named
    if named.ensemble is not None:
        where = "cascade" if CASCADE_KEY in section else "models"
        raise section.error(where, "a cascade is in front of one named judge, and this judge is an ensemble of models",
                            "keep `models:` and write `cascade: off`, or name one judge with `model:`"
                            if where == "models" else "remove cascade:, or name one judge with `model:`")
    if isinstance(raw, JudgeCascade):  # inherited as it is
        return raw.over(named)
    return _read(section, raw, named, one_model, model_keys).over(named)


def _read(section: Section, raw: object, named: ModelSettings, one_model: OneModel,
          model_keys: tuple[str, ...]) -> JudgeCascade:
    """``cascade: {first, escalate_when: {margin}}``: its first judge over the named judge's keys."""
    if not isinstance(raw, Mapping):
        raise section.fields.expected(CASCADE_KEY, "a mapping with the first judge", raw, f"write e.g. {_EXAMPLE}")
    cascade = section.fields.nested(CASCADE_KEY).section(raw, known=("first", "escalate_when"), required=("first",),
                                                        example=_EXAMPLE)
    first = cascade.raw["first"]
    if isinstance(first, str):
        first = {"model": first}
    if not isinstance(first, Mapping) or "model" not in first:
        raise cascade.fields.expected("first", "a model name, or a mapping of model keys with `model:`", first,
                                      f"write e.g. {_EXAMPLE}")
    entry = cascade.fields.nested("first").section(first, known=model_keys, required=("model",), example=_EXAMPLE)
    first_settings = one_model(entry, named)
    if first_settings.qualified == named.qualified:
        raise cascade.error("first", f"{named.qualified} is the named judge itself",
                            "name a cheaper model first, e.g. claude-haiku-4-5")
    when = cascade.section("escalate_when", known=("margin",), example="`escalate_when: {margin: 0.1}`")
    return JudgeCascade(first_settings, margin=when.number("margin", 0.1, low=0.0, high=1.0))
