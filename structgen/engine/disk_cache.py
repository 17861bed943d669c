"""On-disk cache location and atomic writes.

Everything structgen caches (converted tokenizers, dequantized model weights, token masks,
compiled grammars) lives under :func:`cache_dir`. Writes are atomic so that concurrent processes
(pytest-xdist workers, two notebooks) never see a half-written entry: a file is written to a
temporary name in the same directory and ``os.replace``-d into place; a directory is filled
under a temporary name and renamed, and when another process got there first its copy is kept.
Folders are created with mode 0700 and files with 0600: the cache is its user's alone (entries
read back are also sealed and checked, see :mod:`structgen.engine.sealed`).

``STRUCTGEN_DISK_CACHE=0`` (:func:`disk_cache_enabled`) turns off the caches the grammar engine
keeps on disk (compiled grammars, token-mask facts): nothing is read or written there.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

__all__ = ["cache_dir", "atomic_write_bytes", "atomic_dir", "file_fingerprint", "code_digest",
           "disk_cache_enabled", "private_dirs", "DISK_CACHE_ENV"]

ENV_VAR = "STRUCTGEN_CACHE_DIR"
#: ``STRUCTGEN_DISK_CACHE=0`` (or ``false``, ``no``, ``off``) turns the engine's disk caches off.
DISK_CACHE_ENV = "STRUCTGEN_DISK_CACHE"


def disk_cache_enabled() -> bool:
    """Whether the engine's disk caches are on: ``$STRUCTGEN_DISK_CACHE`` is not ``0``, ``false``,
    ``no`` or ``off``. Read on every call, so a process (or a test) can turn them off any time."""
    return os.environ.get(DISK_CACHE_ENV, "1").strip().lower() not in ("0", "false", "no", "off")


def cache_dir() -> Path:
    """Root of structgen's cache: ``$STRUCTGEN_CACHE_DIR`` or ``~/.cache/structgen``.

    Read on every call (not at import), so tests can point it elsewhere with monkeypatch.
    The directory is not created here; writers create what they need.
    """
    env = os.environ.get(ENV_VAR)
    if env:
        return Path(env).expanduser()
    return Path.home() / ".cache" / "structgen"


def private_dirs(path: str | os.PathLike[str]) -> Path:
    """Create folder ``path`` and its missing parents with mode 0700 (only the user can list or
    change them; ``Path.mkdir(parents=True)`` would give the parents the umask's 0755 or 0775).
    Folders that exist are left as they are."""
    path = Path(path)
    missing = []
    here = path
    while not here.is_dir() and here.parent != here:
        missing.append(here)
        here = here.parent
    for folder in reversed(missing):
        try:
            folder.mkdir(mode=0o700)
        except FileExistsError:
            if not folder.is_dir():
                raise
    return path


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes, *, fsync: bool = True) -> Path:
    """Write ``data`` to ``path`` atomically (temp file in the same directory, then replace).

    Readers never see a partial file, whatever other processes do. ``fsync=False`` skips flushing
    the data to the disk before the rename (a few milliseconds): after a power failure the entry
    may then be empty or garbled, so only pass it for entries whose readers detect that (a
    checksum) and treat it as a miss.
    """
    path = Path(path)
    private_dirs(path.parent)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            if fsync:
                f.flush()
                os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return path


@contextlib.contextmanager
def atomic_dir(path: str | os.PathLike[str]) -> Iterator[Path]:
    """Fill a directory atomically.

    Yields a fresh temporary directory next to ``path``; when the ``with`` block finishes
    without error it is renamed to ``path``. If ``path`` already exists by then (another
    process won the race), the temporary copy is discarded and the winner's is kept. On error
    the temporary directory is removed and ``path`` is left untouched::

        with atomic_dir(target) as tmp:
            tokenizer.save_pretrained(tmp)
    """
    path = Path(path)
    private_dirs(path.parent)
    tmp = Path(tempfile.mkdtemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp"))
    try:
        yield tmp
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    try:
        os.rename(tmp, path)
    except OSError:
        # rename onto an existing non-empty directory fails (ENOTEMPTY/EEXIST): someone else
        # finished first. Keep theirs. Anything else is a real error.
        shutil.rmtree(tmp, ignore_errors=True)
        if not path.is_dir():
            raise


def file_fingerprint(path: str | os.PathLike[str], *, head_bytes: int = 1 << 20) -> str:
    """A short, cheap cache key for a (large) file: sha256 of its size and first MiB.

    Stable across copies and reinstalls of the same file (unlike mtime), and reads at most
    ``head_bytes`` (GGUF headers, which hold the metadata and tokenizer, come first).
    """
    path = Path(path)
    h = hashlib.sha256()
    h.update(str(path.stat().st_size).encode())
    with path.open("rb") as f:
        h.update(f.read(head_bytes))
    return h.hexdigest()[:16]


@functools.cache
def code_digest() -> str:
    """Digest of structgen's source files, read once per process.

    A development checkout keeps its version number while its code changes; cache entries keyed
    on the source too (compiled grammars, token-mask facts) are never read by other code.
    """
    h = hashlib.sha256()
    package = Path(__file__).resolve().parents[1]
    for path in sorted(package.rglob("*.py")):
        h.update(b"\0" + path.relative_to(package).as_posix().encode() + b"\0")
        try:
            h.update(path.read_bytes())
        except OSError:
            pass
    return h.hexdigest()
