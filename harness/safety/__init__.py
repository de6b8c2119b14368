"""The SafetyGuard, a service of its own: a plan's commands, paths, file contents and prose read before
anything runs (seed 002, section 7). The lowest service: it uses only ``harness.base``, so the sandbox's
callers, the runners and the applications can all ask it.

``guard`` holds the guard and its verdict, ``shell`` takes command lines apart, ``programs`` reads git's and
interpreters' arguments, ``patterns`` is the table of word patterns.
"""

from harness.safety.guard import Finding, SafetyGuard, SafetyVerdict, verdict_of
from harness.safety.patterns import WORD_PATTERNS, Place, WordPattern, word_risks
from harness.safety.shell import parse, script_lines

__all__ = ["WORD_PATTERNS", "Finding", "Place", "SafetyGuard", "SafetyVerdict", "WordPattern", "parse",
           "script_lines", "verdict_of", "word_risks"]
