"""Brute-force oracles for the matcher: every vocabulary token walked byte by byte.

These deliberately ignore the token index, the memoized state facts and the crossing
remainders that :mod:`structgen.engine.masks` builds, and only use the byte-level step of the stack
machine, so a disagreement points at the mask machinery.
"""

from __future__ import annotations

import numpy as np

from structgen.engine.matcher import Matcher, _ENDED
from structgen.engine.pda import ACCEPT


def brute_force_allowed(m: Matcher) -> set[int]:
    """Token ids legal from the matcher's current state, found token by token."""
    state = m._states[-1]
    vocab = m._vocab
    if state is _ENDED:
        return set()
    sm = m._rt.machine
    firsts = sm.next_bytes(state)
    out = set(vocab.eos_ids) if ACCEPT in state else set()
    for tid, data in enumerate(vocab.tokens):
        if not data or data[0] not in firsts:
            continue
        s = state
        for b in data:
            s = sm.step_set(s, b)
            if not s:
                break
        if s:
            out.add(tid)
    return out


def brute_force_forced(m: Matcher) -> bytes:
    """The forced continuation found by trying all 256 bytes at each step."""
    state = m._states[-1]
    sm = m._rt.machine
    out = bytearray()
    while state and state is not _ENDED and ACCEPT not in state and len(out) < 4096:
        ok = [b for b in range(256) if sm.step_set(state, b)]
        if len(ok) != 1:
            break
        out.append(ok[0])
        state = sm.step_set(state, ok[0])
    return bytes(out)


def mask_ids(m: Matcher) -> set[int]:
    bits = np.unpackbits(m.mask_words().view(np.uint8), bitorder="little")
    return set(np.flatnonzero(bits[: m._vocab.size]).tolist())


def check_walk(m: Matcher, token_ids: list[int], *, check_forced: bool = True) -> int:
    """Walk ``token_ids``; at each position assert mask == brute force (and forced text).

    Returns the number of positions checked. Ends by checking that EOS is allowed.
    """
    n = 0
    for pos, tid in enumerate(token_ids + [None]):
        got = mask_ids(m)
        want = brute_force_allowed(m)
        if got != want:
            extra = sorted(got - want)[:10]
            missing = sorted(want - got)[:10]
            v = m._vocab.tokens
            raise AssertionError(
                f"mask mismatch at position {pos} after {m._vocab.tokens and [v[t] for t in token_ids[:pos]][-6:]}: "
                f"extra {[(t, v[t]) for t in extra]}, missing {[(t, v[t]) for t in missing]}")
        if check_forced:
            assert m.forced_bytes() == brute_force_forced(m), f"forced text differs at position {pos}"
        n += 1
        if tid is None:
            assert m.can_end(), "a complete value must allow end-of-sequence"
            break
        assert tid in got, f"token {tid} ({m._vocab.tokens[tid]!r}) of a valid instance is masked at {pos}"
        assert m.advance(tid), m.last_rejection
    return n
