"""The file system a confined command sees: built from an empty root, never from the machine's.

bubblewrap starts every run on an empty in-memory root; only what a run needs is put in it:

* the system's programs and libraries (``/usr`` and the ``/bin``, ``/lib`` ... links or folders beside it),
  read-only;
* from ``/etc``, the few files programs read to start, resolve names and check certificates (the dynamic
  linker's cache, ``alternatives``, ``nsswitch.conf``, the CA bundle, the time zone), and a ``passwd`` and
  ``group`` that name only root, nobody and the user running the harness: never ``shadow``, ``ssh``, other
  users' entries or private keys;
* a private ``/dev``, a ``/proc`` of the run's own processes, and a private ``/tmp``, ``/dev/shm`` and
  ``$HOME`` in memory, each of bounded size;
* the interpreter running the harness and its libraries, the harness's own code, read-only paths the caller
  declares, the working folder and writable paths the caller declares, and files laid read-only over paths
  of the working folder.

Nothing else of the machine exists inside: not ``/home``, ``/root``, ``/srv``, ``/work``, other projects, the
user's checkout, nor the rest of ``/etc``.
"""

from __future__ import annotations

import atexit
import functools
import os
import shutil
import site
import sys
import tempfile
from collections.abc import Iterable
from pathlib import Path

RUNNER = Path(__file__).with_name("runner.py")
HARNESS_CODE = Path(__file__).resolve().parent.parent  # the installed harness package
RUNNER_INSIDE = "/tmp/.harness/runner.py"

# The system: each is a folder bound read-only, or (merged /usr) a link recreated as the same link.
SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
# What of /etc programs need: the dynamic linker, Debian's alternatives (many programs in /usr/bin are links
# into it), name service and host lookups, TLS trust (the certificates, never /etc/ssl/private), the time
# zone, the OS's name, fonts (plots), and Debian's Python configuration.
ETC = ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "alternatives", "nsswitch.conf", "host.conf", "hosts",
       "gai.conf", "services", "protocols", "ssl/certs", "ssl/openssl.cnf", "ca-certificates",
       "ca-certificates.conf", "pki/tls/certs", "pki/ca-trust/extracted", "crypto-policies", "localtime",
       "timezone", "os-release", "mime.types", "fonts", f"python{sys.version_info.major}.{sys.version_info.minor}")


def system_args() -> list[str]:
    """The read-only system, /etc's allowlist and the made-up user database, as bubblewrap arguments."""
    return list(_system_args())


@functools.lru_cache(maxsize=1)
def _system_args() -> tuple[str, ...]:
    args: list[str] = []
    for path in SYSTEM:
        if os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            args += ["--ro-bind", path, path]
    for name in ETC:
        path = Path("/etc", name)
        if path.exists():
            args += ["--ro-bind", str(path.resolve()), str(path)]
    users = _user_database()
    for name in ("passwd", "group"):
        args += ["--ro-bind", str(users / name), f"/etc/{name}"]
    return tuple(args)


def network_args() -> list[str]:
    """What name resolution needs when a run may use the network (resolv.conf is often a link into /run)."""
    resolv = Path("/etc/resolv.conf")
    return ["--ro-bind", str(resolv.resolve()), str(resolv)] if resolv.exists() else []


@functools.lru_cache(maxsize=1)
def _user_database() -> Path:
    """A passwd and group naming root, nobody and the user running the harness (so ``id``, ``git`` and
    ``getpass`` work inside), written once per process in a private folder."""
    folder = Path(tempfile.mkdtemp(prefix="harness-sandbox-"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    uid, gid = os.getuid(), os.getgid()
    home = os.environ.get("HOME") or "/"
    users = {0: f"root:x:0:0:root:{home if uid == 0 else '/root'}:/bin/sh",
             65534: "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin"}
    users.setdefault(uid, f"{_login_name(uid)}:x:{uid}:{gid}::{home}:/bin/sh")
    groups = {0: "root:x:0:", 65534: "nogroup:x:65534:"}
    groups.setdefault(gid, f"{_login_name(uid)}:x:{gid}:")
    (folder / "passwd").write_text("".join(f"{line}\n" for line in users.values()))
    (folder / "group").write_text("".join(f"{line}\n" for line in groups.values()))
    for name in ("passwd", "group"):
        (folder / name).chmod(0o644)
    return folder


def _login_name(uid: int) -> str:
    name = os.environ.get("USER") or os.environ.get("LOGNAME") or ""
    return name if name.isidentifier() else f"user{uid}"


@functools.lru_cache(maxsize=None)
def interpreter_paths() -> tuple[Path, ...]:
    """What ``{python}`` and the runner need inside: the interpreter's installation, the virtual environment,
    the user's site-packages and the harness's own code (an editable install's lies in its checkout)."""
    paths = {Path(sys.prefix), Path(sys.base_prefix), Path(os.path.realpath(sys.executable)).parent.parent,
             HARNESS_CODE}
    user_site = site.getusersitepackages() if site.ENABLE_USER_SITE else None
    if user_site:
        paths.add(Path(user_site))
    inside_system = tuple(Path(p) for p in SYSTEM)
    return tuple(sorted(p for p in paths if p.exists() and not any(p == s or s in p.parents for s in inside_system)))


def private_tmpfs(paths: Iterable[Path], size_mb: int) -> list[str]:
    """An empty folder in memory of at most ``size_mb`` at each path."""
    args: list[str] = []
    for path in dict.fromkeys(paths):
        args += ["--size", str(size_mb * 1024 * 1024), "--tmpfs", str(path)]
    return args
