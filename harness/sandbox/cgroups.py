"""Memory and process bounds for a whole run: a control group of its own, where the machine lets us make one.

A run's group holds every process of the run (bubblewrap, the runner, the command and whatever it starts),
and the kernel counts their memory together, the files they write to the private ``/tmp`` (memory too)
included: past ``memory_mb`` it kills a process of the run (the out-of-memory killer, confined to the
group), and past ``processes`` a ``fork`` fails. The group is made before the run and removed after it.

Where groups can be made:

* cgroup v1 (a ``memory`` and a ``pids`` hierarchy): a child of the harness's own group in each;
* cgroup v2: a child of the harness's own group when that group hands the ``memory`` and ``pids``
  controllers to its children, else a sibling of it (systemd's delegated user session, ``app.slice``,
  does); a group that has processes cannot give controllers to children, so the harness never moves itself.

Elsewhere (no write access, controllers missing) :func:`cgroup_family` is None and the runner's per-process
limits apply instead; :func:`describe` says which. ``HARNESS_SANDBOX_CGROUP=off`` turns groups off (tests
of the fallback use it).
"""

from __future__ import annotations

import functools
import itertools
import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path

CGROUP_ENV = "HARNESS_SANDBOX_CGROUP"
CONTROLLERS = ("memory", "pids")
_NAMES = itertools.count()
_PREFIX = "harness-"
# Writes the path of each cgroup.procs it is given with "0" (the writing process itself), then becomes the
# command: everything the run starts is born in the group.
ENTER = 'while [ "$1" != -- ]; do echo 0 > "$1" || exit 125; shift; done; shift; exec "$@"'


@dataclass(frozen=True)
class CgroupFamily:
    """Where run groups are made: a folder per controller (v1), or one folder for both (v2)."""

    version: int
    parents: tuple[Path, ...]

    def describe(self) -> str:
        return f"cgroup v{self.version}"


def cgroup_family() -> CgroupFamily | None:
    """This process's place to make run groups, probed once; None where none can be made."""
    if os.environ.get(CGROUP_ENV, "").lower() in ("off", "0", "no", "false"):
        return None
    return _probe()


@functools.lru_cache(maxsize=1)
def _probe() -> CgroupFamily | None:
    try:
        mounts = _mounts()
        own = _own_groups()
    except OSError:
        return None
    v1 = _v1_parents(mounts, own)
    if v1 is not None and _can_make(CgroupFamily(1, v1)):
        return CgroupFamily(1, v1)
    for parent in _v2_parents(mounts, own):
        family = CgroupFamily(2, (parent,))
        if _can_make(family):
            return family
    return None


def _mounts() -> list[tuple[str, str, str, set[str]]]:
    """(root, mount point, file system type, super options) of each cgroup mount."""
    found = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        head, _, tail = line.partition(" - ")
        fields, rest = head.split(), tail.split()
        if len(fields) < 5 or len(rest) < 3 or rest[0] not in ("cgroup", "cgroup2"):
            continue
        found.append((_unescape(fields[3]), _unescape(fields[4]), rest[0], set(rest[2].split(","))))
    return found


def _unescape(field: str) -> str:
    return field.replace("\\040", " ").replace("\\011", "\t").replace("\\012", "\n").replace("\\134", "\\")


def _own_groups() -> dict[str, str]:
    """Controller (``""`` for cgroup v2) -> this process's group path in its hierarchy."""
    groups = {}
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        for name in controllers.split(",") if controllers else [""]:
            groups[name] = path
    return groups


def _inside(mount_root: str, mount_point: str, group: str) -> Path | None:
    """The folder of ``group`` under a mount of its hierarchy rooted at ``mount_root``."""
    root = mount_root.rstrip("/")
    if group != root and not group.startswith(root + "/"):
        return None
    return Path(mount_point + group[len(root):])


def _v1_parents(mounts: list[tuple[str, str, str, set[str]]], own: dict[str, str]) -> tuple[Path, ...] | None:
    parents = []
    for controller in CONTROLLERS:
        mount = next((m for m in mounts if m[2] == "cgroup" and controller in m[3]), None)
        if mount is None or controller not in own:
            return None
        folder = _inside(mount[0], mount[1], own[controller])
        if folder is None or not folder.is_dir():
            return None
        parents.append(folder)
    return tuple(parents)


def _v2_parents(mounts: list[tuple[str, str, str, set[str]]], own: dict[str, str]) -> list[Path]:
    mount = next((m for m in mounts if m[2] == "cgroup2"), None)
    if mount is None or "" not in own:
        return []
    folder = _inside(mount[0], mount[1], own[""])
    if folder is None:
        return []
    candidates = [folder, folder.parent] if folder != Path(mount[1]) else [folder]
    usable = []
    for candidate in candidates:
        try:
            handed_down = set((candidate / "cgroup.subtree_control").read_text().split())
        except OSError:
            continue
        if set(CONTROLLERS) <= handed_down:
            usable.append(candidate)
    return usable


def _can_make(family: CgroupFamily) -> bool:
    _remove_stale(family)
    try:
        group = RunGroup(family, memory_mb=64, processes=8)
    except OSError:
        return False
    group.remove()
    return True


def _remove_stale(family: CgroupFamily) -> None:
    """Empty groups a killed harness left behind (its process id is gone)."""
    for parent in family.parents:
        try:
            entries = list(parent.glob(f"{_PREFIX}*"))
        except OSError:
            continue
        for entry in entries:
            owner = entry.name[len(_PREFIX):].split("-")[0]
            if owner.isdigit() and not Path(f"/proc/{owner}").exists():
                try:
                    entry.rmdir()
                except OSError:
                    pass


class RunGroup:
    """The group(s) of one run: made with its limits, joined by the run's first process, removed after."""

    def __init__(self, family: CgroupFamily, *, memory_mb: int, processes: int):
        self.family = family
        name = f"{_PREFIX}{os.getpid()}-{next(_NAMES)}"
        self.folders = tuple(parent / name for parent in family.parents)
        made: list[Path] = []
        try:
            for folder in self.folders:
                folder.mkdir()
                made.append(folder)
            self._limit(memory_mb * 1024 * 1024, processes)
        except OSError:
            for folder in made:
                _rmdir(folder)
            raise

    @property
    def memory(self) -> Path:
        return self.folders[0]

    @property
    def pids(self) -> Path:
        return self.folders[-1]

    def _limit(self, memory: int, processes: int) -> None:
        if self.family.version == 1:
            _write(self.memory / "memory.limit_in_bytes", memory)
            if (self.memory / "memory.memsw.limit_in_bytes").exists():  # swap counted too, where accounted
                _write(self.memory / "memory.memsw.limit_in_bytes", memory)
        else:
            _write(self.memory / "memory.max", memory)
            if (self.memory / "memory.swap.max").exists():
                _write(self.memory / "memory.swap.max", 0)
        _write(self.pids / "pids.max", processes)

    def enter_argv(self, argv: list[str]) -> list[str]:
        """``argv`` started inside the group(s)."""
        return ["/bin/sh", "-c", ENTER, "sh", *(str(f / "cgroup.procs") for f in self.folders), "--", *argv]

    def limits_hit(self) -> tuple[str, ...]:
        hit = []
        if self.family.version == 1:
            oom = _counter(self.memory / "memory.oom_control", "oom_kill")
            if oom is None:  # kernels before 4.13 do not count kills: a failed charge is the sign
                oom = _counter_file(self.memory / "memory.failcnt")
        else:
            oom = _counter(self.memory / "memory.events", "oom_kill")
        if oom:
            hit.append("memory")
        if _counter(self.pids / "pids.events", "max"):
            hit.append("processes")
        return tuple(hit)

    def kill_all(self) -> None:
        """Every process of the run, wherever it moved to in its tree (a second session, a double fork)."""
        kill_file = self.pids / "cgroup.kill"
        if self.family.version == 2 and kill_file.exists():
            try:
                _write(kill_file, 1)
                return
            except OSError:
                pass
        for _ in range(20):
            pids = _pids_of(self.pids)
            if not pids:
                return
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
            time.sleep(0.01)

    def remove(self) -> None:
        for folder in self.folders:
            _rmdir(folder)


def _pids_of(folder: Path) -> list[int]:
    try:
        return [int(p) for p in (folder / "cgroup.procs").read_text().split()]
    except (OSError, ValueError):
        return []


def _write(path: Path, value: int) -> None:
    with open(path, "w") as handle:
        handle.write(str(value))


def _counter(path: Path, name: str) -> int | None:
    try:
        for line in path.read_text().splitlines():
            key, _, value = line.partition(" ")
            if key == name:
                return int(value)
    except (OSError, ValueError):
        return None
    return None


def _counter_file(path: Path) -> int | None:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None


def _rmdir(folder: Path) -> None:
    """A group goes once its last process is reaped; the kernel may lag a moment behind ``wait``."""
    for attempt in range(50):
        try:
            folder.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError:
            time.sleep(0.002 * (attempt + 1))
