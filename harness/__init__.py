"""pytest-rubric: evaluate LLM agents the way pytest tests code."""

__version__ = "0.1.0"
