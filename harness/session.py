"""Per-session state: the record store, the cycle id, model clients and loaded files.

Everything is created lazily, so a pytest session that collects none of our files writes nothing.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from harness.errors import HarnessConfigError
from harness.llm import ModelClient, ModelSettings
from harness.records import RecordStore

SESSION_KEY = pytest.StashKey["HarnessSession"]()


@dataclass
class HarnessSession:
    config: pytest.Config
    work_dir: Path
    rubrics_dir: Path
    import_root: Path
    indeterminate: str  # "skip" or "fail"
    _store: RecordStore | None = None
    _cycle_id: str | None = None
    _clients: dict[ModelSettings, ModelClient] = field(default_factory=dict)
    _cache: dict[tuple[str, Path], Any] = field(default_factory=dict)
    _lock: threading.RLock = field(default_factory=threading.RLock)

    @property
    def store(self) -> RecordStore:
        with self._lock:
            if self._store is None:
                self._store = RecordStore(self.work_dir)
            return self._store

    @property
    def cycle_id(self) -> str:
        """The cycle of this session: chosen by the controller, shared with xdist workers."""
        with self._lock:
            if self._cycle_id is None:
                given = getattr(self.config, "workerinput", {}).get("harness_cycle_id")
                self._cycle_id = given or self.store.allocate_cycle()
            return self._cycle_id

    @property
    def cycle_started(self) -> bool:
        return self._cycle_id is not None

    def model_client(self, settings: ModelSettings) -> ModelClient:
        with self._lock:
            if settings not in self._clients:
                self._clients[settings] = ModelClient(settings)
            return self._clients[settings]

    def cached(self, kind: str, path: Path, load: Any) -> Any:
        """Load each file once per session; a load error is raised again for every user of the file."""
        key = (kind, path.resolve())
        with self._lock:
            if key not in self._cache:
                try:
                    self._cache[key] = load()
                except HarnessConfigError as exc:
                    self._cache[key] = exc
            value = self._cache[key]
        if isinstance(value, HarnessConfigError):
            raise value
        return value


def harness_session(config: pytest.Config) -> HarnessSession:
    return config.stash[SESSION_KEY]
