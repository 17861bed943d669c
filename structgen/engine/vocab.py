"""Token vocabularies as byte strings, and a sorted index of them for trie walks.

The grammar engine reads bytes, so every token id maps to the bytes it stands for:

* byte-level BPE (GPT-2 style, e.g. SmolLM2): token strings are bytes spelt through the GPT-2
  byte-to-unicode map; we invert it;
* SentencePiece (e.g. Gemma): ``▁`` is a space and ``<0xNN>`` is the raw byte ``NN``;
* added tokens that are plain text stay text; special tokens (control tokens, chat markers,
  Gemma's thousands of ``<unused>`` slots) map to ``None`` and never match grammar text;
* ids between ``len(tokenizer)`` and the model's logits width are ``None`` too;
* any other family (WordPiece's ``##`` continuations, WordLevel, Unigram or BPE without byte
  fallback, character-level vocabularies) is refused with a
  :class:`~structgen.errors.TokenizerError` naming it, never read into wrong bytes; a sample of
  tokens is also checked against the tokenizer's own decoding.

Example
-------
>>> v = Vocabulary([b"a", b"b", b"ab", None], eos_ids=[3])
>>> v.size, sorted(v.eos_ids), v.index.keys
(4, [3], [b'a', b'ab', b'b'])
"""

from __future__ import annotations

import hashlib
import re
import weakref
from array import array
from bisect import bisect_left
from functools import cached_property
from typing import Any, Iterable

import numpy as np

from structgen.engine.collector import gc_paused
from structgen.engine.lru import LRUCache
from structgen.errors import OptionError, TokenizerError

__all__ = ["Vocabulary", "TokenIndex", "vocabulary_for"]


def _gpt2_unicode_to_byte() -> dict[str, int]:
    # The GPT-2 map sends printable latin-1 bytes to themselves and the rest to U+0100 onward.
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    out = {chr(b): b for b in keep}
    n = 0
    for b in range(256):
        if b not in keep:
            out[chr(256 + n)] = b
            n += 1
    return out


_GPT2 = _gpt2_unicode_to_byte()
_CONTROL = re.compile(r"^(<[^<>\s]+>|\[[A-Za-z_]+\])$")


#: Marked variants of one vocabulary kept (each a full copy of its tokens and its own mask caches).
MARKED_VARIANTS = 16

#: Entries kept in a vocabulary's shared mask cache (each holds about one bitmask: 6 KB for a
#: 49k vocabulary, 32 KB for 262k).
MASK_CACHE_ENTRIES = 4096
#: Entries kept in a vocabulary's cache of crossing reads (each a few sets of key numbers:
#: hundreds of bytes, so many more than of masks)
READS_CACHE_ENTRIES = 32768


class TokenIndex:
    """Distinct non-empty token byte strings, sorted, with each one's token ids.

    Sorted order makes a trie implicit: tokens sharing a prefix are contiguous (a subtree ends at
    :func:`prefix_range_end`), and ``lcp[i]`` is the common-prefix length of ``keys[i-1]`` and
    ``keys[i]``, so a walk in key order can reuse the state of the shared prefix.
    """

    def __init__(self, tokens: list[bytes | None]) -> None:
        by_bytes: dict[bytes, list[int]] = {}
        for tid, data in enumerate(tokens):
            if data:
                by_bytes.setdefault(data, []).append(tid)
        self.keys: list[bytes] = sorted(by_bytes)
        self.ids: list[tuple[int, ...]] = [tuple(by_bytes[k]) for k in self.keys]
        self.lcp: list[int] = _common_prefixes(self.keys).tolist()
        self._ends: array | None = None  # built on first use (see subtree_end)
        self._firsts: array | None = None
        self._tables: tuple | None = None
        self._flat_ids: tuple[np.ndarray, np.ndarray] | None = None

    def subtree_end(self, i: int, d: int) -> int:
        """End of the subtree of the trie node ``keys[i][:d]`` (``d >= 1``), where ``i`` is the
        first key under that node: the first index past ``i`` whose key does not start with it.

        A table lookup, built once per index (every node is ``(i, d)`` with
        ``lcp[i] < d <= len(keys[i])``), so walks enumerate a node's children without bisecting.

        >>> ix = TokenIndex([b"a", b"ab", b"abc", b"b"])
        >>> ix.keys, ix.subtree_end(0, 1), ix.subtree_end(1, 2), ix.subtree_end(3, 1)
        ([b'a', b'ab', b'abc', b'b'], 3, 3, 4)
        """
        if self._ends is None:
            self._build_ends()
        lcp = self.lcp[i]
        if not lcp < d <= len(self.keys[i]):  # not a node starting at i: bisect instead
            return prefix_range_end(self.keys, self.keys[i][:d], i + 1, len(self.keys))
        return self._ends[self._firsts[i] + d - lcp - 1]  # type: ignore[index]

    def tables(self) -> tuple[bytes, np.ndarray, np.ndarray, array, array]:
        """The index as flat tables for the compiled walk (:mod:`structgen.engine.walk_kernel`):
        ``(keys joined, key offsets, lcp, node firsts, node ends)``, the last two as in
        :meth:`subtree_end`; built once.
        """
        if self._tables is None:
            if self._ends is None:
                self._build_ends()
            lens = np.fromiter((len(k) for k in self.keys), dtype=np.int64, count=len(self.keys))
            offs = np.zeros(len(self.keys) + 1, dtype=np.int64)
            np.cumsum(lens, out=offs[1:])
            self._tables = (b"".join(self.keys), offs, np.asarray(self.lcp, dtype=np.int64),
                            self._firsts, self._ends)  # type: ignore[assignment]
        return self._tables  # type: ignore[return-value]

    def token_ids(self, keys: np.ndarray) -> np.ndarray:
        """The token ids of the keys numbered ``keys`` (a key may stand for several tokens).

        >>> TokenIndex([b"b", b"a", b"b"]).token_ids(np.array([0, 1])).tolist()
        [1, 0, 2]
        """
        if self._flat_ids is None:
            counts = np.fromiter((len(t) for t in self.ids), dtype=np.int64, count=len(self.ids))
            starts = np.zeros(len(self.ids) + 1, dtype=np.int64)
            np.cumsum(counts, out=starts[1:])
            flat = np.fromiter((t for ts in self.ids for t in ts), dtype=np.int64, count=int(starts[-1]))
            self._flat_ids = (flat, starts)
        flat, starts = self._flat_ids
        if len(flat) == len(self.ids):  # one token per key, the usual case
            return flat[keys]
        lo, n = starts[keys], starts[keys + 1] - starts[keys]
        return flat[np.repeat(lo - np.cumsum(n) + n, n) + np.arange(int(n.sum()))]

    def _build_ends(self) -> None:
        # Node (i, d) ends at the next key j > i with lcp[j] < d: per depth, the next element of
        # {j : lcp[j] < d} after i (numpy, one pass per depth rather than one per node).
        n = len(self.keys)
        lens = np.fromiter((len(k) for k in self.keys), dtype=np.int64, count=n)
        lcp = np.asarray(self.lcp, dtype=np.int64)
        firsts = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(lens - lcp, out=firsts[1:])
        ends = np.zeros(int(firsts[-1]), dtype=np.int64)
        for d in range(1, int(lens.max(initial=0)) + 1):
            starts = np.append(np.flatnonzero(lcp < d), n)  # nodes of depth d start here (and end at the next)
            here = starts[:-1]
            ok = lens[here] >= d
            at = here[ok]
            ends[firsts[at] + d - lcp[at] - 1] = starts[1:][ok]
        self._firsts = array("q", firsts.tobytes())
        self._ends = array("q", ends.tobytes())


def _common_prefixes(keys: list[bytes]) -> np.ndarray:
    """``out[i]``: the common-prefix length of ``keys[i-1]`` and ``keys[i]`` (``out[0] == 0``).

    Column by column over the pairs still equal (numpy): on Gemma 3's 262k tokens 0.07 s, where
    a byte loop per pair in Python took 0.27 s, half of building the index.

    >>> _common_prefixes([b"a", b"ab", b"abc", b"b"]).tolist()
    [0, 1, 2, 0]
    """
    n = len(keys)
    out = np.zeros(n, dtype=np.int64)
    if n < 2:
        return out
    data = np.frombuffer(b"".join(keys), dtype=np.uint8)
    lens = np.fromiter(map(len, keys), dtype=np.int64, count=n)
    starts = np.zeros(n, dtype=np.int64)
    np.cumsum(lens[:-1], out=starts[1:])
    pairs = np.arange(1, n)  # pair i: keys[i-1] and keys[i], equal on their first d bytes
    d = 0
    while pairs.size:
        pairs = pairs[(lens[pairs - 1] > d) & (lens[pairs] > d)]
        pairs = pairs[data[starts[pairs - 1] + d] == data[starts[pairs] + d]]
        out[pairs] = d + 1
        d += 1
    return out


def prefix_range_end(keys: list[bytes], prefix: bytes, lo: int, hi: int) -> int:
    """Index of the first key in ``keys[lo:hi]`` (sorted) greater than every ``prefix...`` key."""
    p = prefix.rstrip(b"\xff")
    if not p:
        return hi
    upper = p[:-1] + bytes((p[-1] + 1,))
    return bisect_left(keys, upper, lo, hi)


class Vocabulary:
    """A tokenizer's tokens as bytes, its end-of-sequence ids and the logits width.

    Parameters
    ----------
    tokens
        ``tokens[i]`` is the byte string of token ``i``, or ``None`` for tokens that never match
        grammar text (special tokens, unused ids).
    eos_ids
        Token ids that end a sequence; the matcher allows them exactly when the value is complete.
    size
        Width of the logits (``>= len(tokens)``); ids past ``len(tokens)`` are always masked.
    """

    def __init__(self, tokens: Iterable[bytes | None], *, eos_ids: Iterable[int],
                 size: int | None = None, name: str = "", specials: "dict[int, bytes] | None" = None) -> None:
        self.tokens: list[bytes | None] = _checked_tokens(tokens)
        self.size = max(_checked_size(size), len(self.tokens))
        if self.size == 0:
            raise OptionError(f"Vocabulary: tokens is empty and size is {size!r}; a vocabulary needs at least "
                              "one token (the end-of-sequence token counts)")
        self.tokens += [None] * (self.size - len(self.tokens))
        self.eos_ids = _checked_eos_ids(eos_ids)
        if not isinstance(name, str):
            raise OptionError(f"Vocabulary: name must be a str, not {name!r:.80} ({type(name).__name__})")
        self.name = name
        for i in self.eos_ids:
            if not 0 <= i < self.size:
                raise OptionError(f"Vocabulary: eos_ids holds {i}, outside the vocabulary (size {self.size}: ids "
                                  f"0 to {self.size - 1}); pass size= the logits width if the id lies beyond "
                                  "the tokens")
            self.tokens[i] = None
        #: per-vocabulary cache of token-mask facts shared by every grammar (see structgen.engine.masks);
        #: bounded, so a server compiling schema after schema does not grow without limit
        self.mask_cache: LRUCache = LRUCache(MASK_CACHE_ENTRIES)
        #: the same for what the tokens crossing out of a rule state read after it (masks.py's
        #: isolated reads): small and many, kept apart so they never push masks out
        self.reads_cache: LRUCache = LRUCache(READS_CACHE_ENTRIES)
        #: names of the mask-fact files in this vocabulary's disk cache folder (listed lazily)
        self.facts_on_disk: set[str] | None = None
        #: the text of each special token (which spells nothing here): a format's markers
        #: (:meth:`with_markers`) and an output's text (:meth:`text_bytes`) read it
        self.specials: dict[int, bytes] = {int(i): bytes(t) for i, t in (specials or {}).items()
                                           if 0 <= int(i) < self.size and self.tokens[int(i)] is None}
        #: variants with markers spelled (:meth:`with_markers`), the most recent few: a server whose
        #: clients name ever new sets of special tokens must not keep a vocabulary per set
        self._marked: LRUCache = LRUCache(MARKED_VARIANTS)
        #: the vocabulary this one was marked from (:meth:`with_markers`), and the ids it marked
        self.base: Vocabulary = self
        self.marked_ids: frozenset[int] = frozenset()

    @property
    def words(self) -> int:
        """Number of 32-bit words of a token bitmask."""
        return (self.size + 31) // 32

    def token_bytes(self, token_ids: Iterable[int]) -> bytes:
        """The bytes that ``token_ids`` spell (special tokens spell nothing)."""
        return b"".join(self.tokens[t] or b"" for t in token_ids)

    def text_bytes(self, token_ids: Iterable[int]) -> bytes:
        """The bytes of an output's text: as :meth:`token_bytes`, but a special token other than
        an end of sequence spells its own text (a format's marker the grammar let through).

        >>> v = Vocabulary([b"a", None, None], eos_ids=[2], specials={1: b"<m>", 2: b"</s>"})
        >>> v.token_bytes([1, 0, 2]), v.text_bytes([1, 0, 2])
        (b'a', b'<m>a')
        """
        return b"".join(self.tokens[t] or (b"" if t in self.eos_ids else self.specials.get(t, b""))
                        for t in token_ids)

    @property
    def eos_texts(self) -> frozenset[str]:
        """The texts of the end-of-sequence tokens that have one (gpt-oss's ``<|call|>``)."""
        return frozenset(self.specials[i].decode("utf-8", "replace") for i in self.eos_ids if i in self.specials)

    def markers_in(self, texts: Iterable[str]) -> frozenset[int]:
        """The special tokens whose text occurs in one of ``texts`` (a grammar's fixed strings:
        tags' begins and ends, triggers, separators).

        >>> v = Vocabulary([b"a", None, None], eos_ids=[], specials={1: b"<m>", 2: b"<n>"})
        >>> sorted(v.markers_in(["x<m>y", "<n"]))
        [1]
        """
        trie = self.base._special_trie
        found: set[int] = set()
        if not trie:
            return frozenset()
        firsts = np.array(sorted(b for b in trie if b >= 0), dtype=np.uint8)
        for text in texts:
            data = text.encode("utf-8", "surrogatepass")
            size = len(data)
            starts = np.flatnonzero(np.isin(np.frombuffer(data, np.uint8), firsts)).tolist()
            for at in starts:  # a trie walk from each possible first byte (about 1 s per MB at worst)
                node, j = trie[data[at]], at + 1
                while node is not None:
                    found.update(node.get(-1, ()))
                    node = node.get(data[j]) if j < size else None
                    j += 1
        return frozenset(found)

    @cached_property
    def _special_trie(self) -> dict[int, Any]:
        """The special tokens' texts (end-of-sequence ones aside) as a trie of bytes; key ``-1``
        holds the ids a node's text is."""
        root: dict[int, Any] = {}
        for tid, text in self.specials.items():
            if text and tid not in self.eos_ids:
                node = root
                for byte in text:
                    node = node.setdefault(byte, {})
                node.setdefault(-1, []).append(tid)
        return root

    def with_markers(self, ids: Iterable[int]) -> "Vocabulary":
        """This vocabulary with the special tokens ``ids`` spelling their text (a format's markers
        on a tokenizer that has them as special tokens: the grammar's marker then matches the
        model's own token). One vocabulary per set of ids (the :data:`MARKED_VARIANTS` most recent
        kept); ``self`` when none is new.

        >>> v = Vocabulary([b"a", None, None], eos_ids=[2], specials={1: b"<m>"})
        >>> m = v.with_markers([1])
        >>> m.tokens[1], m.with_markers([1]) is m, v.with_markers([]) is v
        (b'<m>', True, True)
        """
        base = self.base
        wanted = frozenset(int(i) for i in ids if int(i) in base.specials and int(i) not in base.eos_ids)
        wanted |= self.marked_ids
        if wanted == self.marked_ids:
            return self
        got = base._marked.get(wanted)
        if got is None:
            tokens = list(base.tokens)
            for tid in wanted:
                tokens[tid] = base.specials[tid]
            got = Vocabulary(tokens, eos_ids=base.eos_ids, size=base.size, specials=base.specials,
                             name=f"{base.name}+{len(wanted)} markers")
            got.base, got.marked_ids = base, wanted
            base._marked[wanted] = got
        return got

    @cached_property
    def fingerprint(self) -> str:
        h = hashlib.sha1()
        h.update(f"{self.size}|{sorted(self.eos_ids)}|".encode())
        for t in self.tokens:
            h.update(b"\x00" if t is None else len(t).to_bytes(2, "little") + t)
        return h.hexdigest()[:20]

    @cached_property
    def index(self) -> TokenIndex:
        with gc_paused():  # 10^5 tuples of ids: collections over the whole heap otherwise
            return TokenIndex(self.tokens)

    @cached_property
    def eos_mask(self) -> np.ndarray:
        return ids_to_mask(sorted(self.eos_ids), self.words)

    def __getstate__(self) -> dict:
        return {"tokens": self.tokens, "size": self.size, "eos_ids": self.eos_ids, "name": self.name,
                "specials": self.specials}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["tokens"], eos_ids=state["eos_ids"], size=state["size"], name=state["name"],
                      specials=state.get("specials"))

    def __repr__(self) -> str:
        return f"Vocabulary({self.name or 'unnamed'}, size={self.size}, eos={sorted(self.eos_ids)})"

    # ------------------------------------------------------------------ constructors

    @classmethod
    def from_tokenizer(cls, tokenizer: Any, *, vocab_size: int | None = None,
                       eos_ids: Iterable[int] = (), generation_config: Any = None) -> "Vocabulary":
        """Read a Hugging Face tokenizer (fast or slow) into a vocabulary.

        ``vocab_size`` is the model's logits width when it exceeds ``len(tokenizer)``;
        ``generation_config`` adds its ``eos_token_id`` (an int or a list) to the EOS set.

        Two families map to bytes exactly: byte-level BPE and SentencePiece with byte fallback.
        Any other (WordPiece, WordLevel, Unigram or BPE without byte fallback, ...) raises
        :class:`~structgen.errors.TokenizerError` naming it, and so does a tokenizer whose own
        decoding of a sample of tokens disagrees with the bytes read here.
        """
        n = len(tokenizer)
        pieces = tokenizer.convert_ids_to_tokens(list(range(n)))
        byte_level = _family(tokenizer, pieces) == BYTE_LEVEL
        special = set(getattr(tokenizer, "all_special_ids", []) or [])
        added_text: dict[int, str] = {}
        special_text: dict[int, bytes] = {}
        for tid, tok in (getattr(tokenizer, "added_tokens_decoder", {}) or {}).items():
            content = str(getattr(tok, "content", tok))
            # Gemma leaves markers like <start_of_image> and [multimodal] unflagged: treat
            # bracketed single words as control tokens too, never as text.
            if getattr(tok, "special", False) or _CONTROL.match(content):
                special.add(int(tid))
                special_text[int(tid)] = content.encode("utf-8", "replace")
            else:
                added_text[int(tid)] = content
        tokens: list[bytes | None] = []
        for tid, piece in enumerate(pieces):
            if tid in special or piece is None:
                tokens.append(None)
            elif tid in added_text:
                tokens.append(added_text[tid].encode("utf-8"))
            elif byte_level:
                tokens.append(_byte_level_bytes(piece))
            else:
                tokens.append(_sentencepiece_bytes(piece))
        _check_decodes(tokenizer, tokens, skip=special | set(added_text))
        eos = set(eos_ids)
        if tokenizer.eos_token_id is not None:
            eos.add(int(tokenizer.eos_token_id))
        eos |= _generation_eos(generation_config)
        name = getattr(tokenizer, "name_or_path", "") or type(tokenizer).__name__
        return cls(tokens, eos_ids=eos, size=vocab_size, name=str(name), specials=special_text)


def _checked_tokens(tokens: Any) -> "list[bytes | None]":
    """``tokens`` as a list of bytes or None (a bytearray or memoryview becomes bytes)."""
    if isinstance(tokens, (str, bytes, bytearray)) or not isinstance(tokens, Iterable):
        raise OptionError(f"Vocabulary: tokens must be a list of byte strings (or None for special tokens), "
                          f"not {type(tokens).__name__} ({tokens!r:.80})")
    out = list(tokens)
    for i, t in enumerate(out):
        if t is None or type(t) is bytes:
            continue
        if isinstance(t, (bytes, bytearray, memoryview)):
            out[i] = bytes(t)
            continue
        hint = " (encode it: .encode('utf-8'))" if isinstance(t, str) else ""
        raise OptionError(f"Vocabulary: tokens[{i}] is {t!r:.80} ({type(t).__name__}); each token is a byte "
                          f"string, or None for a token that never matches grammar text{hint}")
    return out


def _checked_size(size: Any) -> int:
    if size is None:
        return 0
    if isinstance(size, (bool, np.bool_)) or not hasattr(size, "__index__"):
        raise OptionError(f"Vocabulary: size must be an integer (the logits width) or None, "
                          f"not {size!r:.80} ({type(size).__name__})")
    n = size.__index__()
    if n < 0:
        raise OptionError(f"Vocabulary: size must be 0 or more (the logits width), not {n}")
    return n


def _checked_eos_ids(eos_ids: Any) -> frozenset[int]:
    if isinstance(eos_ids, (str, bytes)) or not isinstance(eos_ids, Iterable):
        hint = f"; for one id write eos_ids=[{eos_ids}]" if hasattr(eos_ids, "__index__") else ""
        raise OptionError(f"Vocabulary: eos_ids must be a list of token ids, not {eos_ids!r:.80} "
                          f"({type(eos_ids).__name__}){hint}")
    out = set()
    for i in eos_ids:
        if isinstance(i, (bool, np.bool_)) or not hasattr(i, "__index__"):
            raise OptionError(f"Vocabulary: eos_ids holds {i!r:.80} ({type(i).__name__}); a token id is an integer")
        out.add(i.__index__())
    return frozenset(out)


#: The tokenizer families :meth:`Vocabulary.from_tokenizer` reads.
BYTE_LEVEL = "byte-level BPE"
BYTE_FALLBACK = "SentencePiece with byte fallback"
_READS = (f"structgen reads {BYTE_LEVEL} (GPT-2's byte-to-unicode tokens: SmolLM2, Llama 3, Qwen, ...) and "
          f"{BYTE_FALLBACK} ('\u2581' for a space, <0xNN> byte pieces: Gemma, Llama 2, Mistral, ...)")
_BYTE_PIECES = frozenset(f"<0x{b:02X}>" for b in range(256))


def _family(tokenizer: Any, pieces: "list[str | None]") -> str:
    """:data:`BYTE_LEVEL` or :data:`BYTE_FALLBACK`, read from the fast tokenizer's model and
    decoder (a slow one: from its pieces); any other family is a :class:`TokenizerError`."""
    has_byte_pieces = _BYTE_PIECES <= set(pieces)
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None:  # a slow tokenizer: only its pieces tell
        if has_byte_pieces:
            return BYTE_FALLBACK
        sample = [p for p in pieces[:5000] if p]
        if any("Ġ" in p for p in sample):  # 'Ġ', GPT-2's space
            return BYTE_LEVEL
        if sum(p.startswith("##") for p in sample) > len(sample) // 100:
            raise _refused(tokenizer, _WORDPIECE)
        if any("▁" in p for p in sample):
            raise _refused(tokenizer, "SentencePiece without byte fallback",
                           "text outside its pieces becomes <unk>, which stands for no bytes")
        raise _refused(tokenizer, f"{type(tokenizer).__name__} (no byte-level map, no byte pieces)",
                       "its pieces have no known mapping to bytes")
    model = backend.model
    kind = type(model).__name__
    decoder = repr(backend.decoder) if backend.decoder is not None else ""
    if kind == "WordPiece":
        raise _refused(tokenizer, _WORDPIECE)
    if kind == "WordLevel":
        raise _refused(tokenizer, "WordLevel (one token per word or character, no byte mapping)",
                       "a word or character outside the vocabulary becomes <unk>, which stands for no bytes")
    affixes = [a for a in (getattr(model, "continuing_subword_prefix", None),
                           getattr(model, "end_of_word_suffix", None)) if a]
    if affixes:  # CLIP's '</w>', a '##' BPE: the pieces carry text that decoding drops
        raise _refused(tokenizer, f"{kind} with subword markers {affixes}",
                       "its pieces carry markers that decoding removes")
    if "ByteLevel" in decoder or (not decoder and any(p and "\u0120" in p for p in pieces[:5000])):
        return BYTE_LEVEL
    if has_byte_pieces and _byte_fallback(backend) and (not decoder or "ByteFallback" in decoder):
        return BYTE_FALLBACK  # (without a decoder, the decode check below has the last word)
    if kind == "Unigram":
        raise _refused(tokenizer, "Unigram (SentencePiece) without byte fallback",
                       "text outside its pieces becomes <unk>, which stands for no bytes")
    raise _refused(tokenizer, f"{kind} without a byte-level decoder or byte fallback (decoder: "
                   f"{decoder[:60] or 'none'})", "its pieces have no exact mapping to bytes")


_WORDPIECE = "WordPiece (BERT-style '##' continuations)"


def _byte_fallback(backend: Any) -> bool:
    """Whether the backend's model falls back to <0xNN> byte pieces (a BPE says so; a Unigram
    only in its JSON)."""
    flag = getattr(backend.model, "byte_fallback", None)
    if flag is None:
        import json

        flag = json.loads(backend.to_str()).get("model", {}).get("byte_fallback", False)
    return bool(flag)


def _refused(tokenizer: Any, family: str, why: str = "decoding joins pieces in a way that bytes "
             "per token cannot express") -> TokenizerError:
    name = getattr(tokenizer, "name_or_path", "") or type(tokenizer).__name__
    return TokenizerError(f"structgen cannot read tokenizer {str(name)!r:.120}: it is {family}, and {why}, "
                          f"so grammar masks over it would be wrong. {_READS}. For another tokenizer, "
                          "build a structgen.Vocabulary from each token's exact bytes and pass it "
                          "in place of the tokenizer.", family=family)


#: Tokens whose bytes are checked against the tokenizer's own decoding (a sample, spread over the ids).
DECODE_SAMPLE = 512


def _check_decodes(tokenizer: Any, tokens: "list[bytes | None]", *, skip: set[int]) -> None:
    """Decode a sample of tokens with the tokenizer itself and compare with ``tokens``: a family
    that slipped through :func:`_family` (or a decoder that edits text) shows up here.

    Each token is decoded after an anchor token (a letter), so a decoder that strips the first
    space of the text (Llama 2's) does not count as a disagreement.
    """
    anchor = next((i for i, t in enumerate(tokens) if t is not None and i not in skip
                   and len(t) == 1 and t.isalpha()), None)
    if anchor is None or not hasattr(tokenizer, "batch_decode"):
        return
    step = max(1, len(tokens) // DECODE_SAMPLE)
    sample: list[tuple[int, str]] = []
    for tid in range(0, len(tokens), step):
        data = tokens[tid]
        if data is None or tid in skip:
            continue
        try:  # a token that is part of a character cannot be compared as text
            sample.append((tid, data.decode("utf-8")))
        except UnicodeDecodeError:
            continue
    if not sample:
        return
    head = tokens[anchor].decode()
    try:
        texts = tokenizer.batch_decode([[anchor, tid] for tid, _ in sample], skip_special_tokens=False,
                                       clean_up_tokenization_spaces=False)
    except (TypeError, ValueError, KeyError, IndexError):  # it cannot decode plain ids: nothing to compare
        return
    for (tid, text), got in zip(sample, texts):
        if got != head + text:
            raise _refused(tokenizer, "a tokenizer whose decoding disagrees with its pieces",
                           f"token {tid} reads as {text!r:.40} but decodes as {got[len(head):]!r:.40}"
                           f" (after {head!r})")


def _byte_level_bytes(piece: str) -> bytes:
    try:
        return bytes(_GPT2[c] for c in piece)
    except KeyError:  # not byte-mapped (an added token spelt as text)
        return piece.encode("utf-8")


def _sentencepiece_bytes(piece: str) -> bytes:
    if len(piece) == 6 and piece.startswith("<0x") and piece.endswith(">"):
        try:
            return bytes((int(piece[3:5], 16),))
        except ValueError:
            pass
    return piece.replace("\u2581", " ").encode("utf-8")


def ids_to_mask(ids: "Iterable[int] | np.ndarray", words: int) -> np.ndarray:
    """Pack token ids into a ``uint32`` bitmask of ``words`` words (bit ``i % 32`` of word ``i // 32``)."""
    idx = ids if isinstance(ids, np.ndarray) else np.fromiter(ids, dtype=np.int64)
    if not idx.size:  # many states' walks find no token: a tenth of the packing's time
        return np.zeros(words, dtype=np.uint32)
    bits = np.zeros(words * 32, dtype=bool)  # a byte a token, packed: 4-9x faster than or.at
    bits[idx] = True
    return np.packbits(bits, bitorder="little").view(np.uint32)


#: Vocabularies built per tokenizer object, by (logits width, end-of-sequence ids added).
_BY_TOKENIZER: "weakref.WeakKeyDictionary[Any, dict[tuple[int, frozenset[int]], Vocabulary]]" = \
    weakref.WeakKeyDictionary()


def vocabulary_for(tokenizer: Any, *, vocab_size: int | None = None,
                   generation_config: Any = None) -> Vocabulary:
    """The :class:`Vocabulary` of a tokenizer, built once per tokenizer object and logits width.

    Parameters
    ----------
    tokenizer
        A Hugging Face tokenizer, or a :class:`Vocabulary` (returned as it is when the options
        ask for nothing it lacks).
    vocab_size
        The width of the model's logits (e.g. ``model.get_output_embeddings().weight.shape[0]``),
        which may exceed the tokenizer's vocabulary (padded embedding rows); ids past the
        tokenizer's tokens are never allowed. ``None``: the tokenizer's own size. A width smaller
        than the vocabulary is an :class:`~structgen.errors.OptionError`.
    generation_config
        Adds its ``eos_token_id`` (an int or a list) to the end-of-sequence ids.

    Example
    -------
    >>> v = Vocabulary([b"a", b"b", None], eos_ids=[2])
    >>> vocabulary_for(v) is v, vocabulary_for(v, vocab_size=64).size
    (True, 64)
    >>> vocabulary_for(v, vocab_size=64) is vocabulary_for(v, vocab_size=64)
    True
    """
    is_vocab = isinstance(tokenizer, Vocabulary)
    if not is_vocab and not (hasattr(tokenizer, "__len__") and hasattr(tokenizer, "convert_ids_to_tokens")):
        raise OptionError(f"tokenizer must be a Hugging Face tokenizer or a structgen.Vocabulary, "
                          f"not {type(tokenizer).__name__} ({tokenizer!r:.80})")
    own = tokenizer.size if is_vocab else len(tokenizer)
    width = own if vocab_size is None else _checked_width(vocab_size, own)
    extra = _generation_eos(generation_config)
    if is_vocab and width == tokenizer.size and extra <= tokenizer.eos_ids:
        return tokenizer
    try:
        built = _BY_TOKENIZER.setdefault(tokenizer, {})
    except TypeError:  # not weakly referable: built each time
        built = {}
    key = (width, extra)
    vocab = built.get(key)
    if vocab is None:
        if is_vocab:
            vocab = Vocabulary(tokenizer.tokens, eos_ids=tokenizer.eos_ids | extra, size=width,
                               name=tokenizer.name, specials=tokenizer.specials)
        else:
            vocab = Vocabulary.from_tokenizer(tokenizer, vocab_size=width, eos_ids=extra)
        built[key] = vocab
    return vocab


def _checked_width(vocab_size: Any, own: int) -> int:
    """``vocab_size`` (a logits width) checked against the ``own`` tokens of the tokenizer."""
    if isinstance(vocab_size, (bool, np.bool_)) or not hasattr(vocab_size, "__index__"):
        raise OptionError(f"vocab_size must be an integer (the width of the model's logits) or None, "
                          f"not {vocab_size!r:.80} ({type(vocab_size).__name__})")
    width = vocab_size.__index__()
    if width < own:
        raise OptionError(f"vocab_size={width} is smaller than the tokenizer's vocabulary ({own} tokens): the "
                          "logits need a column for every token id; pass the model's logits width "
                          "(model.get_output_embeddings().weight.shape[0], or model.config.vocab_size)")
    return width


def _generation_eos(generation_config: Any) -> frozenset[int]:
    """The end-of-sequence ids a generation config names (an int, a list or None)."""
    g = getattr(generation_config, "eos_token_id", None)
    return _checked_eos_ids([g] if hasattr(g, "__index__") else list(g or []))
