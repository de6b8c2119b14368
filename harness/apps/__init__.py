"""Applications on top of the plugin: the ``harness`` command, tracking (history, plots, the compare gate,
reports), self-improvement tournaments and importers of other tools' configurations."""
