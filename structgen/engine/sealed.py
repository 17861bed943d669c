"""Sealed disk-cache entries: what structgen reads back from its caches is what it wrote there.

Why: the compile cache holds pickles, and unpickling runs code. A checksum anyone can recompute
(the sha256 the compile cache had) catches damage, not a crafted file, and anyone who can write
into the cache folder could make the next compile run their code. Three layers close that:

1. **Ownership.** Before anything is read, the cache root, every folder down to the entry, the
   entry and the key file must belong to the current user and be writable by no one else (the
   key file also unreadable by others). Otherwise the cache is not read (a miss) and one
   :class:`~structgen.errors.UnsafeCacheWarning` per path says what is wrong and how to fix it.
   Folders are created with mode 0700, files with 0600. Where there are no user ids (Windows,
   no ``os.geteuid``) these checks are skipped and the other two layers remain.
2. **A seal.** An entry is ``header`` (one line naming the kind, the format and the entry's
   key, given by the caller), 32 bytes of HMAC-SHA256 over header and payload, then the payload.
   The HMAC key is :data:`KEY_NAME` under the cache root: 32 random bytes made once per cache
   (written under a temporary name with ``O_CREAT | O_EXCL`` and mode 0600, then linked into
   place, so no process ever reads a half-written key). Without it no one can forge an entry,
   and an entry copied under another key's name fails too, since the header is sealed with it.
   A bad seal is a miss, never unpickled, and the caller recomputes and overwrites the entry.
3. **A restricted unpickler** (:func:`restricted_loads`): only the classes the caller lists
   (structgen's own data classes) can be built, so even a sealed entry runs no other code.

Every way an entry can be bad (absent, truncated, random bytes, another format, a wrong seal or
key, unreadable, a folder in its place) is a miss, never an exception.

Example
-------
>>> import os, tempfile
>>> from unittest import mock
>>> with mock.patch.dict(os.environ, {"STRUCTGEN_CACHE_DIR": tempfile.mkdtemp()}):
...     path = cache_dir() / "demo" / "entry"
...     wrote = write_sealed(path, b"demo 1 k\\n", b"payload")
...     read = read_sealed(path, b"demo 1 k\\n"), read_sealed(path, b"demo 1 other-key\\n")
...     _ = path.write_bytes(path.read_bytes()[:-1] + b"?")   # tampered: the seal fails
...     tampered = read_sealed(path, b"demo 1 k\\n")
>>> wrote, read, tampered
(True, (b'payload', None), None)
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import io
import os
import pickle
import secrets
import stat
import tempfile
import threading
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from structgen.engine.disk_cache import atomic_write_bytes, cache_dir, private_dirs
from structgen.errors import UnsafeCacheWarning

__all__ = ["KEY_NAME", "read_sealed", "write_sealed", "restricted_loads"]

#: The HMAC key's file name under the cache root.
KEY_NAME = "cache.key"
_KEY_BYTES = 32
_MAC_BYTES = 32
#: User ids exist here (POSIX): ownership and mode bits are checked.
_POSIX = hasattr(os, "geteuid")
_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_BINARY", 0)

_warned: set[str] = set()
_warn_lock = threading.Lock()


def read_sealed(path: Path, header: bytes) -> bytes | None:
    """The payload of the entry at ``path`` sealed under ``header``, or None for a miss."""
    root = cache_dir()
    if not _folders_trusted(root, path.parent):
        return None
    key = _read_key(root)
    if key is None:
        return None
    data = _read_owned(path, secret=False)
    if data is None or not data.startswith(header) or len(data) < len(header) + _MAC_BYTES:
        return None
    mac, payload = data[len(header):len(header) + _MAC_BYTES], data[len(header) + _MAC_BYTES:]
    if not hmac.compare_digest(mac, _mac(key, header, payload)):
        return None
    return payload


def write_sealed(path: Path, header: bytes, payload: bytes) -> bool:
    """Seal and write an entry atomically; False when the cache cannot take it (not writable,
    not safe to use). No fsync: a write cut short reads as a bad seal, a miss."""
    root = cache_dir()
    try:
        private_dirs(path.parent)
    except OSError:
        return False
    if not _folders_trusted(root, path.parent):
        return False
    key = _read_key(root, create=True)
    if key is None:
        return False
    try:
        atomic_write_bytes(path, header + _mac(key, header, payload) + payload, fsync=False)
    except OSError:
        return False
    return True


class _Restricted(pickle.Unpickler):
    """An unpickler that builds only the listed classes (module name to class names)."""

    def __init__(self, data: bytes, allowed: Mapping[str, frozenset[str]]) -> None:
        super().__init__(io.BytesIO(data))
        self.allowed = allowed

    def find_class(self, module: str, name: str) -> Any:
        if name in self.allowed.get(module, ()):
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"{module}.{name} may not appear in a structgen cache entry")


def restricted_loads(data: bytes, allowed: Mapping[str, frozenset[str]]) -> Any:
    """Unpickle ``data``, building only the classes in ``allowed`` (module name to class names):
    anything else (``os.system``, ``builtins.eval``, ``subprocess.Popen``) raises
    :class:`pickle.UnpicklingError` instead of being called."""
    return _Restricted(data, allowed).load()


# ------------------------------------------------------------------ the key and the checks

def _mac(key: bytes, header: bytes, payload: bytes) -> bytes:
    return hmac.new(key, header + payload, hashlib.sha256).digest()


def _read_key(root: Path, *, create: bool = False) -> bytes | None:
    """The cache's HMAC key; with ``create``, made first when there is none, or replaced when
    it is ours but damaged (wrong length: the entries sealed with it become misses)."""
    path = root / KEY_NAME
    key = _read_owned(path, secret=True)
    if key is None and os.path.lexists(path):  # another thread may have linked it in just now
        key = _read_owned(path, secret=True)
    if key is not None and len(key) == _KEY_BYTES:
        return key
    if not create:
        return None
    try:
        # With no key read, a link that finds the name taken keeps what is there: a key another
        # thread linked in since we looked, or one we may not use (reported), left as it is.
        _make_key(path, replace=key is not None)
    except OSError:
        return None
    key = _read_owned(path, secret=True)
    return key if key is not None and len(key) == _KEY_BYTES else None


def _make_key(path: Path, *, replace: bool) -> None:
    """Write 32 random bytes under a temporary name (``O_CREAT | O_EXCL``, mode 0600), then put
    the file in place whole: linked (a process that got there first keeps its key) or, for a
    damaged key, renamed over it."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(secrets.token_bytes(_KEY_BYTES))
            f.flush()
            os.fsync(f.fileno())
        if replace:
            os.replace(tmp, path)
        else:
            try:
                os.link(tmp, path)
            except FileExistsError:
                pass  # another process made it first: use theirs
            except OSError:  # no hard links here: create the name itself exclusively
                _write_exclusive(path)
    finally:
        with contextlib.suppress(OSError):
            os.unlink(tmp)


def _write_exclusive(path: Path) -> None:
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o600)
    except FileExistsError:
        return
    with os.fdopen(fd, "wb") as f:
        f.write(secrets.token_bytes(_KEY_BYTES))


def _read_owned(path: Path, *, secret: bool) -> bytes | None:
    """The bytes of the plain file at ``path`` when it is safe to read (not a link; ours; not
    writable, and for a ``secret`` not readable, by others), else None (a warning if unsafe)."""
    try:
        fd = os.open(path, _OPEN_FLAGS)
    except OSError:
        return None
    try:
        with os.fdopen(fd, "rb") as f:
            st = os.fstat(f.fileno())  # the file opened, not whatever the name points to later
            if not stat.S_ISREG(st.st_mode):
                return None
            problem = _problem(st, 0o077 if secret else 0o022)
            if problem:
                _warn(path, problem)
                return None
            return f.read()
    except OSError:
        return None


def _folders_trusted(root: Path, folder: Path) -> bool:
    """Whether ``root`` and each folder from it down to ``folder`` exists, is a folder, is ours and
    is writable by no one else. An unsafe one is reported once; a missing one is a quiet miss."""
    try:
        parts = folder.relative_to(root).parts
    except ValueError:
        return False
    here = root
    for part in (None, *parts):
        if part is not None:
            here = here / part
        try:
            st = os.stat(here)
        except OSError:
            return False
        if not stat.S_ISDIR(st.st_mode):
            return False
        problem = _problem(st, 0o022)
        if problem:
            _warn(here, problem)
            return False
    return True


def _problem(st: os.stat_result, forbidden: int) -> str | None:
    if not _POSIX:
        return None
    if st.st_uid != os.geteuid():
        return f"belongs to user id {st.st_uid}, not to you ({os.geteuid()})"
    if st.st_mode & forbidden:
        what = "writable" if forbidden == 0o022 else "readable or writable"
        return f"is {what} by other users (mode {stat.S_IMODE(st.st_mode):o})"
    return None


def _warn(path: Path, problem: str) -> None:
    with _warn_lock:
        if str(path) in _warned:
            return
        _warned.add(str(path))
    mode = "600" if path.name == KEY_NAME else "700"
    warnings.warn(
        f"structgen is not using its disk cache: {path} {problem}, so another user could have "
        f"planted code there. Fix it with `chown $USER {path}` and `chmod {mode} {path}`, or "
        f"point STRUCTGEN_CACHE_DIR at a folder only you can write.",
        UnsafeCacheWarning, stacklevel=4)
