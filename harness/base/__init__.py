"""The base layer: the typed models, requests, events, errors and the leaf helpers every other layer builds on
(file I/O, strict YAML, slots, the field-validation vocabulary, JSON Schema, redaction, clock, versions, usage).
It imports nothing of the harness above it."""
