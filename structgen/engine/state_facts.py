"""State facts: what the isolated walk from one rule state found, and their form on disk.

A rule state's facts are its **inside** tokens (a bitmask, or per token the items a counted
rule's token starts) and its **crossing** tokens grouped by remainder (:class:`Remainders`).
:mod:`structgen.engine.masks` computes them and shares them per vocabulary; facts that were slow
to compute are also kept on disk as numbers only (a numpy ``.npz`` read with
``allow_pickle=False``) in a sealed entry (:mod:`structgen.engine.sealed`).

>>> rems = Remainders.build([(b'"}', 7, 0, 1), (b"", 9, 0, 2), (b'"}', 8, 0, 1)])
>>> rems.keys, rems.rows([1]).tolist()
([b'', b'"}'], [[7, 0, 1], [8, 0, 1]])
"""

from __future__ import annotations

import hashlib
import io
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from structgen.engine.disk_cache import code_digest
from structgen.engine.sealed import read_sealed, write_sealed
from structgen.engine.vocab import TokenIndex, Vocabulary

__all__ = ["FACTS_FORMAT", "Remainders", "StateFacts", "disk_name", "load", "record_crossing", "save"]

#: Layout of a facts file on disk; bump it when it changes (2: sealed ``.npz``, was a raw pickle).
FACTS_FORMAT = 2


@dataclass
class Remainders:
    """Crossing tokens of one rule state: sorted distinct remainders and who owns each.

    ``owners[starts[k]:starts[k + 1]]`` are key ``k``'s rows ``(token id, items counted before
    the return, byte offset of the return)``: one array, so a walk's hits gather without a
    Python loop over tokens.
    """

    keys: list[bytes]
    owners: np.ndarray  # int64, shape (n, 3)
    starts: np.ndarray  # int64, shape (len(keys) + 1,)

    @staticmethod
    def build(entries: list[tuple[bytes, int, int, int]]) -> "Remainders":
        by: dict[bytes, list[tuple[int, int, int]]] = {}
        for rem, tid, n, d in entries:
            by.setdefault(rem, []).append((tid, n, d))
        return Remainders._grouped(by)

    @staticmethod
    def of_keys(idx: TokenIndex, pairs: np.ndarray) -> "Remainders":
        """From rows ``(key, depth)`` of the index (:func:`~structgen.engine.walk_kernel.walk_crossings`):
        each key's tokens cross with the remainder after ``depth`` bytes, no items counted."""
        by: dict[bytes, list[tuple[int, int, int]]] = {}
        keys, ids = idx.keys, idx.ids
        for j, d in pairs.tolist():
            rem = keys[j][d:]
            got = by.get(rem)
            if got is None:
                got = by[rem] = []
            got.extend((tid, 0, d) for tid in ids[j])
        return Remainders._grouped(by)

    @staticmethod
    def _grouped(by: dict[bytes, list[tuple[int, int, int]]]) -> "Remainders":
        keys = sorted(by)
        counts = np.fromiter((len(by[k]) for k in keys), dtype=np.int64, count=len(keys))
        rows = np.array([o for k in keys for o in by[k]], dtype=np.int64).reshape(-1, 3)
        return Remainders(keys, rows, _starts(counts))

    def rows(self, hits: list[int]) -> np.ndarray:
        """The owner rows of keys ``hits``, in order."""
        if not hits:
            return self.owners[:0]
        k = np.asarray(hits, dtype=np.int64)
        lo, counts = self.starts[k], self.starts[k + 1] - self.starts[k]
        # output row p of key j is owners row lo[j] + (p - where key j's rows start in the output)
        shift = np.repeat(lo - _starts(counts)[:-1], counts)
        return self.owners[np.arange(shift.size) + shift]


def _starts(counts: np.ndarray) -> np.ndarray:
    out = np.zeros(counts.size + 1, dtype=np.int64)
    np.cumsum(counts, out=out[1:])
    return out


@dataclass
class StateFacts:
    """What a rule state accepts in isolation (shared across grammars on one vocabulary)."""

    key: tuple  # the cache key: rule fingerprint (or counted item digest), state, follow bytes
    inside: np.ndarray  # uint32 bitmask (plain rules) or int32 items-started per token (counted)
    crossing: Remainders



def disk_name(key: tuple) -> tuple[str, str]:
    """(file name, full identity) of a facts key on disk; the identity is sealed in the header,
    so a file copied under another name is a miss."""
    # Keyed on the code too: state numbers and what facts mean may change with it.
    text = repr((FACTS_FORMAT, code_digest(), key[:3], sorted(key[3])))
    ident = hashlib.sha256(text.encode()).hexdigest()
    return ident[:32] + ".facts", ident


def _header(ident: str) -> bytes:
    return b"structgen-facts %d %s\n" % (FACTS_FORMAT, ident.encode())


_FIELDS = ("inside", "key_lens", "key_bytes", "owner_counts", "owners")


def load(path: Path, key: tuple, ident: str, vocab: Vocabulary) -> StateFacts | None:
    """The facts at ``path``, or None for a miss (the caller recomputes and overwrites them):
    absent, damaged, not sealed by this cache, or not the shape these facts have."""
    payload = read_sealed(path, _header(ident))
    if payload is None:
        return None
    try:
        with np.load(io.BytesIO(payload), allow_pickle=False) as npz:
            if sorted(npz.files) != sorted(_FIELDS):
                return None
            inside, lens, blob, counts, owners = (npz[f] for f in _FIELDS)
    except Exception:  # noqa: BLE001 - whatever bad bytes make numpy raise, it is a miss
        return None
    want = (np.dtype(np.uint32), vocab.words) if key[0] == "facts" else (np.dtype(np.int32), vocab.size)
    ints = np.dtype(np.int64)
    if (inside.dtype != want[0] or inside.shape != (want[1],) or lens.dtype != ints
            or counts.dtype != ints or blob.dtype != np.uint8 or owners.dtype != ints
            or lens.ndim != 1 or blob.ndim != 1 or counts.shape != lens.shape
            or owners.ndim != 2 or owners.shape[1] != 3 or (lens < 0).any() or (counts < 0).any()
            or int(lens.sum()) != blob.size or int(counts.sum()) != owners.shape[0]
            or (owners.size and not ((owners[:, 0] >= 0) & (owners[:, 0] < vocab.size)).all())):
        return None
    data, ends = blob.tobytes(), np.cumsum(lens).tolist()
    keys = [data[a:b] for a, b in zip([0] + ends[:-1], ends)]
    if any(a >= b for a, b in zip(keys, keys[1:])):  # walks bisect them: sorted and distinct
        return None
    inside.flags.writeable = False
    return StateFacts(key, inside, Remainders(keys, owners, _starts(counts)))


def save(path: Path, ident: str, facts: StateFacts) -> bool:
    """Write the facts as plain arrays in a sealed entry; False when the cache cannot take them
    (a read-only or unsafe cache folder costs speed, never correctness)."""
    rems = facts.crossing
    buf = io.BytesIO()
    np.savez(buf, inside=facts.inside,
             key_lens=np.array([len(k) for k in rems.keys], dtype=np.int64),
             key_bytes=np.frombuffer(b"".join(rems.keys), dtype=np.uint8),
             owner_counts=np.diff(rems.starts), owners=rems.owners)
    return write_sealed(path, _header(ident), buf.getvalue())



def record_crossing(idx: TokenIndex, i: int, d: int, follow: frozenset[int], n: int,
                     out: list[tuple[bytes, int, int, int]], *, only_longer: bool = False) -> None:
    """Record the tokens below trie node ``keys[i][:d]`` (``i`` its first key) that may continue
    past the rule's end: those whose next byte is in ``follow``, child by child.

    ``i == -1`` means the root (``d == 0``). With ``only_longer`` the token that ends exactly at the
    node is skipped (a counted rule already counts it as inside).
    """
    keys, ids, lo = idx.keys, idx.ids, max(i, 0)
    hi = idx.subtree_end(i, d) if i >= 0 and d else len(keys)
    if i >= 0 and len(keys[i]) == d:
        if not only_longer:
            out.extend((b"", tid, n, d) for tid in ids[i])
        lo += 1
    while lo < hi:  # each child of the node: its byte, then its whole subtree when that byte may follow
        z = idx.subtree_end(lo, d + 1)
        if keys[lo][d] in follow:
            for j in range(lo, z):
                rem = keys[j][d:]
                out.extend((rem, tid, n, d) for tid in ids[j])
        lo = z
