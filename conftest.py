"""Project-level pytest configuration.

Being at the rootdir, this file also makes the rootdir importable, so the demo's Python agents and
checks (``suites.target_builder.agent:produce``) resolve the same way in every pytest session.
"""
