"""Folders of versioned files that others name by id: the rubrics folder (review rubrics, by ``rubric_id``) and the
prompt registry (prompts, by ``prompt_id``). Each YAML or JSON file in the folder is one version of one entry; its
id and version are read without validating the file (a broken file is said when it is loaded, not when it is
looked through)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from harness.base.errors import HarnessConfigError
from harness.base.yamlfile import load_yaml

REGISTRY_SUFFIXES = (".yaml", ".yml", ".json")


def registry_files(folder: Path) -> list[Path]:
    """The YAML and JSON files of ``folder`` (none when it does not exist), sorted."""
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.iterdir() if p.suffix in REGISTRY_SUFFIXES and p.is_file())


def file_identity(path: Path, id_key: str) -> tuple[str | None, str | None]:
    """A file's id (its ``id_key``) and ``version``, None for each it does not have as text."""
    try:
        raw = load_yaml(path)
    except HarnessConfigError:
        return None, None
    if not isinstance(raw, Mapping) or not isinstance(raw.get(id_key), str):
        return None, None
    version = raw.get("version")
    return raw[id_key], version if isinstance(version, str) else None
