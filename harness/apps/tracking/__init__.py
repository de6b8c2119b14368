"""Tracking: history, plots, the compare gate and CI reports over the harness records (issue 4).

Modules: ``frames`` (pandas over the SQLite records), ``history`` (the ``harness history`` table),
``compare`` (baseline cycles and the regression gate), ``rawdata`` (seed 001 raw_data.json and
events.json), ``plots`` (matplotlib, headless), ``report`` (Markdown and HTML), ``versioning``
(rubric version bumps), ``cli`` (subcommands) and ``pytest_plugin`` (options and hooks).
"""
