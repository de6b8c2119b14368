"""The evaluation layer: one item's work from the shared steps. Runners make and revise artifacts, the
evaluation scores them (checks, then the judge), the engine runs the loop (produce, evaluate, revise, record
through the event stream). It uses the services below it and knows nothing of pytest."""
