"""pytest-rubric: evaluate LLM agents the way pytest tests code.

PYTEST_DONT_REWRITE: the package is a plugin, not test code; its asserts need no rewriting.
"""

__version__ = "0.1.0"
