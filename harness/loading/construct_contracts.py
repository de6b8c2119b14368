"""A construct's contracts (``contracts.<phase>``: the files a phase reads and writes, what its own exit codes
mean) and the names it gives exit codes (``assessment.exit_codes``).

A phase's exit code is its own (a command's status, a Python phase's ``sys.exit``); ``contracts.<phase>.exit_codes``
says what it means (``2: blocked``), and the meaning is a code of the exit codes' list (``blocked`` is 80) or a name
``assessment.exit_codes`` gives one (``80: waiting_for_human``). docs/constructs.md, "Exit codes".
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import Field

from harness.base import exit_codes
from harness.base.errors import did_you_mean
from harness.base.fields import Fields, Section
from harness.base.models import Frozen
from harness.loading.construct_parts import Fill, in_workspace

CONTRACT_KEYS = ("inputs", "outputs", "exit_codes")
OPTIONAL_MARK = re.compile(r"\s*\(optional\)\s*$", re.IGNORECASE)


class ContractPath(Frozen):
    path: str
    optional: bool = False


class PhaseContract(Frozen):
    """``contracts.<phase>``: the files it reads and writes, and what its own exit codes mean."""

    inputs: tuple[ContractPath, ...] = ()
    outputs: tuple[ContractPath, ...] = ()
    exit_codes: dict[int, str] = Field(default_factory=dict)  # the phase's own code -> its meaning, as written
    # the phase's own code -> the code of the exit codes' list it stands for
    standard: dict[int, int] = Field(default_factory=dict)


def exit_code(place: Fields, raw: Any, key: str) -> int:
    if isinstance(raw, str) and raw.strip().isdigit():
        raw = int(raw)
    if isinstance(raw, bool) or not isinstance(raw, int) or not 0 <= raw <= 255:
        raise place.error(key, f"{raw!r} is not an exit code", "use a whole number from 0 to 255")
    return raw


def exit_names(assessment: Section) -> dict[int, str]:
    """``assessment.exit_codes``: a name of the construct's own for a code of the list (``80: waiting_for_human``)."""
    listed = assessment.section("exit_codes", known=None, example="`exit_codes: {80: waiting_for_human}`")
    names = {}
    for key, value in listed.raw.items():
        code = exit_code(listed.fields, key, str(key))
        names[code] = listed.fields.identifier(value, str(key), "exit code name")
    return names


def meaning_code(place: Fields, key: str, meaning: str, exit_names: dict[int, str]) -> int:
    """The code of the list a phase's exit code means: the construct's own name for one, else the list's."""
    own = {name: code for code, name in exit_names.items()}
    code = own.get(meaning)
    if code is None:
        code = exit_codes.named(meaning)
    if code is None:
        words = [*exit_codes.NAMES.values(), *exit_codes.SYNONYMS, *own]
        raise place.error(key, f"{meaning!r} is not a meaning of the exit codes' list{did_you_mean(meaning, words)}",
                          "use a name of the list (success, incomplete, blocked, timeout, escalation, "
                          "validation_failed, ...), or name the code in assessment.exit_codes")
    return code


def phase_contract(name: str, contracts: Section, fill: Fill, names: dict[int, str]) -> PhaseContract:
    """``contracts.<phase>``: ``inputs`` and ``outputs`` (paths in the workspace; ``(optional)`` after one marks
    it), and ``exit_codes``, the phase's own codes and what they mean."""
    contract = contracts.fields.nested(name).section(contracts.raw.get(name) or {}, known=CONTRACT_KEYS)
    lists = {}
    for key in ("inputs", "outputs"):
        entries = []
        for index, text in enumerate(contract.text_list(key)):
            optional = bool(OPTIONAL_MARK.search(text))
            path = in_workspace(OPTIONAL_MARK.sub("", text), contract.fields, f"{key}[{index}]", fill)
            entries.append(ContractPath(path=path, optional=optional))
        lists[key] = tuple(entries)
    codes = contract.section("exit_codes", known=None, example="`exit_codes: {0: success, 2: blocked}`")
    own, standard = {}, {}
    for key, meaning in codes.raw.items():
        code = exit_code(codes.fields, key, str(key))
        own[code] = codes.fields.string(meaning, str(key), what="a meaning such as blocked")
        standard[code] = meaning_code(codes.fields, str(key), own[code].strip(), names)
    return PhaseContract(inputs=lists["inputs"], outputs=lists["outputs"], exit_codes=own, standard=standard)
