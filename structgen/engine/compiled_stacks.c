/* The stack machine's inner step for structgen/engine/pda.py, in C: interning a stack, the
closure of a plain frame, the step of a frame and of a set by a byte, and masks.py's trie walk
of a sorted key list (the crossing reads).

Why: a cold parse position steps new stacks, and each new stack is interned and closed (its
calls pushed, its completed rule popped). In Python that costs a few microseconds a stack, and
a cold mask of the C-like grammar makes ~3,700 of them (an expression's chain of precedence
rules pushed again under each new parent). This is the same algorithm on the same Python
objects (pda.py's frames list, id dict and closure memo), without the interpreter between.

What it does not do: frames of counted and unordered rules and guard frames are closed by the
Python code (``slow``, pda.py's ``_closure_py``), which calls back here for the plain frames
it pushes. Past ``DEEP`` closures in progress in this thread, the C code hands the frame to
``deep`` (the same Python, recursing in Python only), so a chain of a thousand rules uses no
more C stack than ``DEEP`` frames.

Threads: every call runs under the GIL and calls no Python code while it interns (the keys are
tuples of ints, tuples and frozensets, whose hashing and comparison run no Python code), so a
lookup and the store of a new stack are one step for other threads; pda.py then interns only
through here (its lock guards the Python fallback alone).

Context: a tuple, made once per machine by pda.py:
    (frames, ids, closures, plain, entries, escapes, slow, deep, steps, step_sets, slow_step, local,
     next_bytes, reads)
    frames    list of (rule, state, parent) tuples, indexed by stack id
    ids       dict (rule, state, parent) -> stack id
    closures  dict stack id -> frozenset (the memo; ACCEPT and ESCAPE preset)
    plain     list per rule: (trans, calls, accept, lookahead) for a plain rule, else None
              (trans: list of dicts; calls: list of tuples (or lists) of (callee, return state);
              accept: list of bools; lookahead: frozenset or None), as automaton.RuleAutomaton has them
    entries   list per rule: its entry state
    escapes   dict stack id -> forbidden bytes, for guards on the escape (recorded at intern)
    slow      callable (sid, busy) -> frozenset: pda.py's closure of any frame, in Python
    deep      the same, recursing in Python only
    steps     dict sid * 256 + byte -> frozenset (the step memo)
    step_sets list of 256 dicts, frozenset -> frozenset (the memo of sets stepped by a byte)
    slow_step callable (sid, byte) -> frozenset: pda.py's step of any frame, in Python
    local     the machine's threading.local: ``roomy`` while a closure is in progress in this
              thread, ``busy`` the closures in progress
    next_bytes dict frozenset -> frozenset of the bytes it reads (the memo)
    reads     callable (frozenset) -> those bytes: pda.py's next_bytes, which fills the memo

The trie walk of masks.py's ``walk_keys`` (the keys a set reads whole, escapes reported) is here
too, for the sorted remainders the crossing reads walk: each node is a step (above) and a
lookup of the bytes the set reads, and in Python each also cost a call and a bisection. With
it, MaskBench masks' p99 fell 12% on an 80-schema sample (interleaved A/B).

STACKS_VERSION is pda.py's STACKS_KERNEL_VERSION: a build of another version (another context
layout) is not used.
*/
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#define STACKS_VERSION 3
#define ESCAPE 1
#define GUARD (-2)
/* closures in progress in one thread beyond which the C code recurses no further */
#define DEEP 100

typedef struct {
    PyObject *frames, *ids, *closures, *plain, *entries, *escapes, *slow, *deep;
    PyObject *steps, *step_sets, *slow_step, *local, *next_bytes, *reads;
} Ctx;

static int ctx_open(PyObject *t, Ctx *c) {
    if (!PyTuple_Check(t) || PyTuple_GET_SIZE(t) != 14) {
        PyErr_SetString(PyExc_TypeError, "compiled_stacks: the context is a 14-tuple");
        return -1;
    }
    c->frames = PyTuple_GET_ITEM(t, 0);
    c->ids = PyTuple_GET_ITEM(t, 1);
    c->closures = PyTuple_GET_ITEM(t, 2);
    c->plain = PyTuple_GET_ITEM(t, 3);
    c->entries = PyTuple_GET_ITEM(t, 4);
    c->escapes = PyTuple_GET_ITEM(t, 5);
    c->slow = PyTuple_GET_ITEM(t, 6);
    c->deep = PyTuple_GET_ITEM(t, 7);
    c->steps = PyTuple_GET_ITEM(t, 8);
    c->step_sets = PyTuple_GET_ITEM(t, 9);
    c->slow_step = PyTuple_GET_ITEM(t, 10);
    c->local = PyTuple_GET_ITEM(t, 11);
    c->next_bytes = PyTuple_GET_ITEM(t, 12);
    c->reads = PyTuple_GET_ITEM(t, 13);
    if (!PyList_Check(c->frames) || !PyDict_Check(c->ids) || !PyDict_Check(c->closures) ||
        !PyList_Check(c->plain) || !PyList_Check(c->entries) || !PyDict_Check(c->escapes) ||
        !PyDict_Check(c->steps) || !PyList_Check(c->step_sets) || PyList_GET_SIZE(c->step_sets) != 256 ||
        !PyDict_Check(c->next_bytes)) {
        PyErr_SetString(PyExc_TypeError, "compiled_stacks: a context field has the wrong type");
        return -1;
    }
    return 0;
}

/* The id of stack (rule, state, parent), interned when new; -1 on error. */
static Py_ssize_t intern_stack(Ctx *c, PyObject *rule, PyObject *state, PyObject *parent) {
    PyObject *key = PyTuple_Pack(3, rule, state, parent);
    if (!key) return -1;
    PyObject *got = PyDict_GetItemWithError(c->ids, key); /* borrowed */
    Py_ssize_t sid;
    if (got) {
        sid = PyLong_AsSsize_t(got);
        Py_DECREF(key);
        return sid;
    }
    if (PyErr_Occurred()) goto fail;
    sid = PyList_GET_SIZE(c->frames);
    PyObject *id = PyLong_FromSsize_t(sid);
    if (!id) goto fail;
    /* as pda.py: the frame first, then the escape, then the id is published */
    if (PyList_Append(c->frames, key) < 0) goto fail_id;
    if (PyLong_AsLong(rule) == GUARD && PyLong_AsSsize_t(parent) == ESCAPE &&
        PyDict_SetItem(c->escapes, id, state) < 0)
        goto fail_id;
    if (PyDict_SetItem(c->ids, key, id) < 0) goto fail_id;
    Py_DECREF(id);
    Py_DECREF(key);
    return sid;
fail_id:
    Py_DECREF(id);
fail:
    Py_DECREF(key);
    return -1;
}

static PyObject *closure_of(Ctx *c, PyObject *sid, PyObject *busy);

/* A new frozenset of ``iterable``'s items, which the caller knows are ints (stack ids, bytes),
   kept out of the cyclic collector's sight, as CPython keeps tuples and dicts of atoms: a set of
   ints can be in no reference cycle. The memos hold 10^5-10^6 such sets per grammar, and every
   full collection visited each (Snowplow sp_341's walks: 161k sets, 128 ms a collection, in the
   middle of a mask). NULL on error. */
static PyObject *frozen_ints(PyObject *iterable) {
    PyObject *out = PyFrozenSet_New(iterable);
    if (out) PyObject_GC_UnTrack(out);
    return out;
}

/* out |= closure of stack ``sid``; -1 on error. */
static int add_closure(Ctx *c, PyObject *out, Py_ssize_t sid, PyObject *busy) {
    PyObject *id = PyLong_FromSsize_t(sid);
    if (!id) return -1;
    PyObject *got = closure_of(c, id, busy);
    Py_DECREF(id);
    if (!got) return -1;
    PyObject *same = PyNumber_InPlaceOr(out, got); /* set |= frozenset: out, updated in place */
    Py_DECREF(got);
    if (!same) return -1;
    Py_DECREF(same);
    return 0;
}

/* Stack ``sid``'s frame (borrowed) and its rule's plain-rule entry (borrowed; Py_None for a
   guard, a marker, a counted or an unordered rule); for a plain rule, its state ``*q``, checked
   against the entry's tables. NULL on error. */
static PyObject *frame_of(Ctx *c, Py_ssize_t sid, PyObject **info, Py_ssize_t *q) {
    if (sid < 0 || sid >= PyList_GET_SIZE(c->frames)) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_IndexError, "compiled_stacks: no such stack");
        return NULL;
    }
    PyObject *frame = PyList_GET_ITEM(c->frames, sid);
    if (!PyTuple_Check(frame) || PyTuple_GET_SIZE(frame) != 3) {
        PyErr_SetString(PyExc_TypeError, "compiled_stacks: a frame is a (rule, state, parent) tuple");
        return NULL;
    }
    long r = PyLong_AsLong(PyTuple_GET_ITEM(frame, 0));
    if (r == -1 && PyErr_Occurred()) return NULL;
    *info = r >= 0 && r < PyList_GET_SIZE(c->plain) ? PyList_GET_ITEM(c->plain, r) : Py_None;
    if (*info == Py_None) return frame;
    if (!PyTuple_Check(*info) || PyTuple_GET_SIZE(*info) != 4) {
        PyErr_SetString(PyExc_TypeError, "compiled_stacks: a plain rule is (trans, calls, accept, lookahead)");
        return NULL;
    }
    PyObject *trans = PyTuple_GET_ITEM(*info, 0), *calls = PyTuple_GET_ITEM(*info, 1);
    PyObject *accept = PyTuple_GET_ITEM(*info, 2), *state = PyTuple_GET_ITEM(frame, 1);
    if (!PyList_Check(trans) || !PyList_Check(calls) || !PyList_Check(accept)) {
        PyErr_SetString(PyExc_TypeError, "compiled_stacks: a rule's trans, calls and accept are lists");
        return NULL;
    }
    *q = PyLong_Check(state) ? PyLong_AsSsize_t(state) : -1;
    if (*q < 0 || *q >= PyList_GET_SIZE(trans) || *q >= PyList_GET_SIZE(calls) || *q >= PyList_GET_SIZE(accept) ||
        !PyDict_Check(PyList_GET_ITEM(trans, *q)) ||
        !(PyTuple_Check(PyList_GET_ITEM(calls, *q)) || PyList_Check(PyList_GET_ITEM(calls, *q)))) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_IndexError, "compiled_stacks: no such state");
        return NULL;
    }
    return frame;
}

/* New reference to the closure of stack ``sid`` (a frozenset); NULL on error. */
static PyObject *closure_of(Ctx *c, PyObject *sid, PyObject *busy) {
    PyObject *got = PyDict_GetItemWithError(c->closures, sid);
    if (got) return Py_NewRef(got);
    if (PyErr_Occurred()) return NULL;
    PyObject *info;
    Py_ssize_t q = -1;
    PyObject *frame = frame_of(c, PyLong_AsSsize_t(sid), &info, &q);
    if (!frame) return NULL;
    PyObject *rule = PyTuple_GET_ITEM(frame, 0), *parent = PyTuple_GET_ITEM(frame, 2);
    int in_busy = PySet_Contains(busy, sid);
    if (in_busy < 0) return NULL;
    if (info == Py_None || in_busy) /* not plain; or a cycle, which the Python code reports */
        return PyObject_CallFunctionObjArgs(c->slow, sid, busy, NULL);
    if (PySet_GET_SIZE(busy) >= DEEP)
        return PyObject_CallFunctionObjArgs(c->deep, sid, busy, NULL);

    PyObject *trans = PyTuple_GET_ITEM(info, 0), *calls = PyTuple_GET_ITEM(info, 1);
    PyObject *accept = PyTuple_GET_ITEM(info, 2), *lookahead = PyTuple_GET_ITEM(info, 3);
    PyObject *out = PySet_New(NULL), *result = NULL;
    if (!out) return NULL;
    if (PySet_Add(busy, sid) < 0) {
        Py_DECREF(out);
        return NULL;
    }
    if (PyDict_GET_SIZE(PyList_GET_ITEM(trans, q)) && PySet_Add(out, sid) < 0) goto done;
    PyObject *row = PyList_GET_ITEM(calls, q);
    for (Py_ssize_t k = 0; k < PySequence_Fast_GET_SIZE(row); k++) { /* a tuple or a list */
        PyObject *call = PySequence_Fast_GET_ITEM(row, k);
        if (!PyTuple_Check(call) || PyTuple_GET_SIZE(call) != 2) {
            PyErr_SetString(PyExc_TypeError, "compiled_stacks: a call is a (callee, return state) tuple");
            goto done;
        }
        PyObject *callee = PyTuple_GET_ITEM(call, 0), *ret = PyTuple_GET_ITEM(call, 1);
        Py_ssize_t back = intern_stack(c, rule, ret, parent);
        if (back < 0) goto done;
        PyObject *back_id = PyLong_FromSsize_t(back);
        if (!back_id) goto done;
        Py_ssize_t e = PyLong_AsSsize_t(callee);
        Py_ssize_t called = e >= 0 && e < PyList_GET_SIZE(c->entries)
            ? intern_stack(c, callee, PyList_GET_ITEM(c->entries, e), back_id) : -1;
        Py_DECREF(back_id);
        if (called < 0) {
            if (!PyErr_Occurred()) PyErr_SetString(PyExc_IndexError, "compiled_stacks: no such rule");
            goto done;
        }
        if (add_closure(c, out, called, busy) < 0) goto done;
    }
    int done_rule = PyObject_IsTrue(PyList_GET_ITEM(accept, q));
    if (done_rule < 0) goto done;
    if (done_rule) {
        Py_ssize_t after;
        if (lookahead == Py_None) {
            after = PyLong_AsSsize_t(parent);
        } else {
            PyObject *guard = PyLong_FromLong(GUARD);
            if (!guard) goto done;
            after = intern_stack(c, guard, lookahead, parent);
            Py_DECREF(guard);
        }
        if (after < 0 || add_closure(c, out, after, busy) < 0) goto done;
    }
    result = frozen_ints(out);
done:
    Py_DECREF(out);
    if (PySet_Discard(busy, sid) < 0) Py_CLEAR(result);
    if (result && PyDict_SetItem(c->closures, sid, result) < 0) Py_CLEAR(result);
    return result;
}

/* New reference to the closure of stack ``sid`` from outside a closure in progress, as pda.py's
   ``closure``: this thread's closures in progress are ``local.busy`` while one is (roomy), else
   none yet. */
static PyObject *closure_top(Ctx *c, PyObject *sid) {
    PyObject *got = PyDict_GetItemWithError(c->closures, sid);
    if (got) return Py_NewRef(got);
    if (PyErr_Occurred()) return NULL;
    PyObject *roomy = PyObject_GetAttrString(c->local, "roomy");
    PyObject *busy = NULL;
    if (!roomy) {
        if (!PyErr_ExceptionMatches(PyExc_AttributeError)) return NULL;
        PyErr_Clear();
    }
    int in_room = roomy ? PyObject_IsTrue(roomy) : 0;
    Py_XDECREF(roomy);
    if (in_room < 0) return NULL;
    busy = in_room ? PyObject_GetAttrString(c->local, "busy") : PySet_New(NULL);
    if (!busy) return NULL;
    if (!PySet_Check(busy)) {
        Py_DECREF(busy);
        PyErr_SetString(PyExc_TypeError, "compiled_stacks: busy is a set");
        return NULL;
    }
    PyObject *out = closure_of(c, sid, busy);
    Py_DECREF(busy);
    return out;
}

static PyObject *EMPTY; /* frozenset(): a frame that cannot read the byte */

/* New reference to the closed set after stack ``sid`` reads ``byte``, as pda.py's ``step``. */
static PyObject *step_of(Ctx *c, Py_ssize_t sid, int byte) {
    PyObject *key = PyLong_FromSsize_t(sid * 256 + byte);
    if (!key) return NULL;
    PyObject *got = PyDict_GetItemWithError(c->steps, key), *result = NULL;
    if (got || PyErr_Occurred()) {
        Py_DECREF(key);
        return got ? Py_NewRef(got) : NULL;
    }
    PyObject *info;
    Py_ssize_t q = -1;
    PyObject *frame = frame_of(c, sid, &info, &q);
    if (!frame) goto done;
    PyObject *rule = PyTuple_GET_ITEM(frame, 0);
    if (info == Py_None) { /* guards, counted and unordered rules, the markers: Python (which stores) */
        PyObject *id = PyLong_FromSsize_t(sid);
        if (id) result = PyObject_CallFunction(c->slow_step, "Oi", id, byte);
        Py_XDECREF(id);
        Py_DECREF(key);
        return result;
    }
    PyObject *trans = PyTuple_GET_ITEM(info, 0);
    PyObject *b = PyLong_FromLong(byte);
    if (!b) goto done;
    PyObject *t = PyDict_GetItemWithError(PyList_GET_ITEM(trans, q), b);
    Py_DECREF(b);
    if (!t) {
        if (PyErr_Occurred()) goto done;
        result = Py_NewRef(EMPTY);
    } else {
        Py_ssize_t next = intern_stack(c, rule, t, PyTuple_GET_ITEM(frame, 2));
        PyObject *id = next < 0 ? NULL : PyLong_FromSsize_t(next);
        if (!id) goto done;
        result = closure_top(c, id);
        Py_DECREF(id);
    }
    if (result && PyDict_SetItem(c->steps, key, result) < 0) Py_CLEAR(result);
done:
    Py_DECREF(key);
    return result;
}

/* New reference to the closed set after the stacks of frozenset ``stacks`` read ``byte``. */
static PyObject *step_set_of(Ctx *c, PyObject *stacks, int byte) {
    PyObject *memo = PyList_GET_ITEM(c->step_sets, byte);
    if (!PyDict_Check(memo)) {
        PyErr_SetString(PyExc_TypeError, "compiled_stacks: a step set memo is a dict");
        return NULL;
    }
    PyObject *got = PyDict_GetItemWithError(memo, stacks);
    if (got) return Py_NewRef(got);
    if (PyErr_Occurred()) return NULL;
    PyObject *it = PyObject_GetIter(stacks), *x, *acc = NULL, *result = NULL;
    if (!it) return NULL;
    Py_ssize_t n = PySet_GET_SIZE(stacks);
    if (n != 1 && !(acc = PySet_New(NULL))) goto done;
    while ((x = PyIter_Next(it))) {
        Py_ssize_t sid = PyLong_AsSsize_t(x);
        Py_DECREF(x);
        if (sid == -1 && PyErr_Occurred()) goto done;
        PyObject *one = step_of(c, sid, byte);
        if (!one) goto done;
        if (n == 1) {
            result = one;
            break;
        }
        PyObject *same = PyNumber_InPlaceOr(acc, one);
        Py_DECREF(one);
        if (!same) goto done;
        Py_DECREF(same);
    }
    if (PyErr_Occurred()) {
        Py_CLEAR(result);
        goto done;
    }
    if (!result) result = acc ? frozen_ints(acc) : Py_NewRef(EMPTY);
    if (result && PyDict_SetItem(memo, stacks, result) < 0) Py_CLEAR(result);
done:
    Py_DECREF(it);
    Py_XDECREF(acc);
    return result;
}

static PyObject *py_closure_top(PyObject *self, PyObject *args) {
    PyObject *ctx, *sid;
    Ctx c;
    if (!PyArg_ParseTuple(args, "OO!", &ctx, &PyLong_Type, &sid)) return NULL;
    if (ctx_open(ctx, &c) < 0) return NULL;
    return closure_top(&c, sid);
}

static PyObject *py_step(PyObject *self, PyObject *args) {
    PyObject *ctx;
    Py_ssize_t sid;
    int byte;
    Ctx c;
    if (!PyArg_ParseTuple(args, "Oni", &ctx, &sid, &byte)) return NULL;
    if (byte < 0 || byte > 255) {
        PyErr_SetString(PyExc_ValueError, "compiled_stacks: a byte is 0 to 255");
        return NULL;
    }
    if (ctx_open(ctx, &c) < 0) return NULL;
    return step_of(&c, sid, byte);
}

static PyObject *py_step_set(PyObject *self, PyObject *args) {
    PyObject *ctx, *stacks;
    int byte;
    Ctx c;
    if (!PyArg_ParseTuple(args, "OO!i", &ctx, &PyFrozenSet_Type, &stacks, &byte)) return NULL;
    if (byte < 0 || byte > 255) {
        PyErr_SetString(PyExc_ValueError, "compiled_stacks: a byte is 0 to 255");
        return NULL;
    }
    if (ctx_open(ctx, &c) < 0) return NULL;
    return step_set_of(&c, stacks, byte);
}

/* ------------------------------------------------------------------ the trie walk of keys */

typedef struct {
    int b;
    Py_ssize_t a, z; /* the child's keys: [a, z) */
} Child;

typedef struct {
    Ctx *c;
    PyObject *keys;      /* tuple of bytes, sorted */
    PyObject *on_escape; /* callable (i, d, forbidden), or None: markers stay in the sets */
    PyObject *out;       /* list of key indices read whole */
    unsigned char *prefix; /* the node's bytes (a prefix of the longest key), shared by all levels */
    Child *kids;         /* the children of every node on the path, each level's above its parent's */
    Py_ssize_t nkids, cap;
} KeyWalk;

static int push_child(KeyWalk *w, int b, Py_ssize_t a, Py_ssize_t z) {
    if (w->nkids == w->cap) {
        Py_ssize_t cap = w->cap ? 2 * w->cap : 64;
        Child *kids = PyMem_Realloc(w->kids, cap * sizeof(Child));
        if (!kids) {
            PyErr_NoMemory();
            return -1;
        }
        w->kids = kids;
        w->cap = cap;
    }
    w->kids[w->nkids++] = (Child){b, a, z};
    return 0;
}

static inline const unsigned char *key_of(KeyWalk *w, Py_ssize_t i, Py_ssize_t *n) {
    PyObject *k = PyTuple_GET_ITEM(w->keys, i);
    *n = PyBytes_GET_SIZE(k);
    return (const unsigned char *)PyBytes_AS_STRING(k);
}

static inline int has_prefix(KeyWalk *w, Py_ssize_t i, const unsigned char *p, Py_ssize_t np) {
    Py_ssize_t n;
    const unsigned char *k = key_of(w, i, &n);
    return n >= np && memcmp(k, p, np) == 0;
}

/* The first index in [lo, hi) whose key does not start with p (those that do come first). */
static Py_ssize_t prefix_end(KeyWalk *w, const unsigned char *p, Py_ssize_t np, Py_ssize_t lo, Py_ssize_t hi) {
    while (lo < hi) {
        Py_ssize_t mid = lo + (hi - lo) / 2;
        if (has_prefix(w, mid, p, np)) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

/* The first index in [lo, hi) whose key is >= p (bytes order), as bisect_left. */
static Py_ssize_t lower_bound(KeyWalk *w, const unsigned char *p, Py_ssize_t np, Py_ssize_t lo, Py_ssize_t hi) {
    while (lo < hi) {
        Py_ssize_t mid = lo + (hi - lo) / 2, n;
        const unsigned char *k = key_of(w, mid, &n);
        int cmp = memcmp(k, p, n < np ? n : np);
        if (cmp < 0 || (cmp == 0 && n < np)) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

/* The bytes set ``s`` reads, as 32 bytes of bits; -1 on error. */
static int readable_bits(Ctx *c, PyObject *s, unsigned char bits[32]) {
    PyObject *got = PyDict_GetItemWithError(c->next_bytes, s), *owned = NULL;
    if (!got) {
        if (PyErr_Occurred()) return -1;
        got = owned = PyObject_CallOneArg(c->reads, s);
        if (!got) return -1;
    }
    memset(bits, 0, 32);
    PyObject *it = PyObject_GetIter(got), *x;
    if (!it) {
        Py_XDECREF(owned);
        return -1;
    }
    while ((x = PyIter_Next(it))) {
        long b = PyLong_AsLong(x);
        Py_DECREF(x);
        if (b < 0 || b > 255) {
            if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "compiled_stacks: a byte is 0 to 255");
            break;
        }
        bits[b >> 3] |= (unsigned char)(1u << (b & 7));
    }
    Py_DECREF(it);
    Py_XDECREF(owned);
    return PyErr_Occurred() ? -1 : 0;
}

static inline int bit(const unsigned char bits[32], int b) { return (bits[b >> 3] >> (b & 7)) & 1; }

/* ``*s`` stepped into at key ``i``, depth ``d``: report its escape markers to on_escape and take
   them out (a new reference replaces *s); -1 on error. */
static int escaped(KeyWalk *w, PyObject **s, Py_ssize_t i, Py_ssize_t d) {
    if (w->on_escape == Py_None) return 0;
    PyObject *found = NULL, *x, *forbidden;
    Py_ssize_t pos = 0;
    while (PyDict_Next(w->c->escapes, &pos, &x, &forbidden)) { /* the markers: a few */
        int in = PySet_Contains(*s, x);
        if (in < 0) goto fail;
        if (in) {
            if (!found && !(found = PySet_New(NULL))) goto fail;
            if (PySet_Add(found, x) < 0) goto fail;
        }
    }
    if (!found) return 0;
    PyObject *it = PyObject_GetIter(found);
    if (!it) goto fail;
    while ((x = PyIter_Next(it))) {
        forbidden = PyDict_GetItemWithError(w->c->escapes, x);
        PyObject *r = forbidden ? PyObject_CallFunction(w->on_escape, "nnO", i, d, forbidden) : NULL;
        Py_DECREF(x);
        if (!r) {
            if (!PyErr_Occurred()) PyErr_SetString(PyExc_KeyError, "compiled_stacks: an escape marker vanished");
            Py_DECREF(it);
            goto fail;
        }
        Py_DECREF(r);
    }
    Py_DECREF(it);
    if (PyErr_Occurred()) goto fail;
    PyObject *rest = PyNumber_Subtract(*s, found);
    Py_DECREF(found);
    if (!rest) return -1;
    Py_SETREF(*s, rest);
    return 0;
fail:
    Py_XDECREF(found);
    return -1;
}

static int append_index(KeyWalk *w, Py_ssize_t i) {
    PyObject *x = PyLong_FromSsize_t(i);
    if (!x) return -1;
    int rc = PyList_Append(w->out, x);
    Py_DECREF(x);
    return rc;
}

/* keys[lo:hi] share their first d bytes; s (borrowed) is the set after them. 0, or -1 on error. */
static int visit_keys(KeyWalk *w, PyObject *s, Py_ssize_t lo, Py_ssize_t hi, Py_ssize_t d) {
    unsigned char bits[32];
    Py_ssize_t n;
    const unsigned char *key = key_of(w, lo, &n);
    if (hi - lo == 1) { /* one key left: its bytes in a loop, not a call each */
        Py_INCREF(s);
        while (n > d) {
            int b = key[d];
            if (readable_bits(w->c, s, bits) < 0) goto fail_one;
            if (!bit(bits, b)) {
                Py_DECREF(s);
                return 0;
            }
            PyObject *next = step_set_of(w->c, s, b);
            Py_SETREF(s, next);
            if (!s) return -1;
            d++;
            if (escaped(w, &s, lo, d) < 0) goto fail_one;
            if (PySet_GET_SIZE(s) == 0) {
                Py_DECREF(s);
                return 0;
            }
        }
        Py_DECREF(s);
        return append_index(w, lo);
    fail_one:
        Py_DECREF(s);
        return -1;
    }
    if (n == d) { /* the key that is exactly the prefix sorts first */
        if (append_index(w, lo) < 0) return -1;
        if (++lo >= hi) return 0;
        key = key_of(w, lo, &n);
    }
    if (readable_bits(w->c, s, bits) < 0) return -1;
    int nread = 0;
    for (int k = 0; k < 32; k++)
        for (unsigned v = bits[k]; v; v &= v - 1) nread++;
    if (!nread) return 0;
    unsigned char *prefix = w->prefix;
    memcpy(prefix, key, d);
    Py_ssize_t base = w->nkids;
    if ((Py_ssize_t)nread * 4 < hi - lo) { /* few bytes, many keys: jump to each child */
        for (int b = 0; b < 256; b++) {
            if (!bit(bits, b)) continue;
            prefix[d] = (unsigned char)b;
            Py_ssize_t a = lower_bound(w, prefix, d + 1, lo, hi);
            if (a < hi && has_prefix(w, a, prefix, d + 1) &&
                push_child(w, b, a, prefix_end(w, prefix, d + 1, a + 1, hi)) < 0)
                return -1;
        }
    } else { /* visit every child in order */
        for (Py_ssize_t i = lo; i < hi;) {
            const unsigned char *k = key_of(w, i, &n);
            int b = k[d];
            prefix[d] = (unsigned char)b;
            Py_ssize_t z = prefix_end(w, prefix, d + 1, i + 1, hi);
            if (bit(bits, b) && push_child(w, b, i, z) < 0) return -1;
            i = z;
        }
    }
    int rc = 0;
    for (Py_ssize_t j = base; j < w->nkids && rc == 0; j++) { /* by index: a child's visit may grow kids */
        Child kid = w->kids[j];
        PyObject *next = step_set_of(w->c, s, kid.b);
        if (!next) {
            rc = -1;
            break;
        }
        if (escaped(w, &next, kid.a, d + 1) < 0 ||
            (PySet_GET_SIZE(next) && visit_keys(w, next, kid.a, kid.z, d + 1) < 0))
            rc = -1;
        Py_DECREF(next);
    }
    w->nkids = base;
    return rc;
}

static PyObject *py_walk_keys(PyObject *self, PyObject *args) {
    PyObject *ctx, *keys, *start, *on_escape;
    Ctx c;
    if (!PyArg_ParseTuple(args, "OO!O!O", &ctx, &PyTuple_Type, &keys, &PyFrozenSet_Type, &start, &on_escape))
        return NULL;
    if (ctx_open(ctx, &c) < 0) return NULL;
    Py_ssize_t longest = 0;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(keys); i++) {
        PyObject *k = PyTuple_GET_ITEM(keys, i);
        if (!PyBytes_Check(k)) {
            PyErr_SetString(PyExc_TypeError, "compiled_stacks: keys are bytes");
            return NULL;
        }
        if (PyBytes_GET_SIZE(k) > longest) longest = PyBytes_GET_SIZE(k);
    }
    KeyWalk w = {&c, keys, on_escape, PyList_New(0), PyMem_Malloc(longest + 1), NULL, 0, 0};
    if (!w.out || !w.prefix) {
        Py_XDECREF(w.out);
        PyMem_Free(w.prefix);
        return w.prefix ? NULL : PyErr_NoMemory();
    }
    if (PySet_GET_SIZE(start) && PyTuple_GET_SIZE(keys) &&
        visit_keys(&w, start, 0, PyTuple_GET_SIZE(keys), 0) < 0)
        Py_CLEAR(w.out);
    PyMem_Free(w.prefix);
    PyMem_Free(w.kids);
    return w.out;
}

static PyObject *py_closure(PyObject *self, PyObject *args) {
    PyObject *ctx, *sid, *busy;
    Ctx c;
    if (!PyArg_ParseTuple(args, "OO!O!", &ctx, &PyLong_Type, &sid, &PySet_Type, &busy)) return NULL;
    if (ctx_open(ctx, &c) < 0) return NULL;
    return closure_of(&c, sid, busy);
}

static PyObject *py_intern(PyObject *self, PyObject *args) {
    PyObject *ctx, *rule, *state, *parent;
    Ctx c;
    if (!PyArg_ParseTuple(args, "OO!OO!", &ctx, &PyLong_Type, &rule, &state, &PyLong_Type, &parent)) return NULL;
    if (ctx_open(ctx, &c) < 0) return NULL;
    Py_ssize_t sid = intern_stack(&c, rule, state, parent);
    return sid < 0 ? NULL : PyLong_FromSsize_t(sid);
}

/* frozen_ints(iterable) for pda.py's sets made in Python; an item that is not an int leaves
   the set tracked, as frozenset() would. */
static PyObject *py_frozen_ints(PyObject *self, PyObject *iterable) {
    PyObject *out = PyFrozenSet_New(iterable);
    if (!out) return NULL;
    PyObject *it = PyObject_GetIter(out), *item;
    if (!it) {
        Py_DECREF(out);
        return NULL;
    }
    int ints = 1;
    while (ints && (item = PyIter_Next(it))) {
        ints = PyLong_CheckExact(item);
        Py_DECREF(item);
    }
    Py_DECREF(it);
    if (PyErr_Occurred()) {
        Py_DECREF(out);
        return NULL;
    }
    if (ints) PyObject_GC_UnTrack(out);
    return out;
}

static PyMethodDef methods[] = {
    {"frozen_ints", py_frozen_ints, METH_O,
     "frozen_ints(iterable) -> frozenset: of ints, out of the cyclic collector's sight (see frozen_ints)"},
    {"closure", py_closure, METH_VARARGS,
     "closure(ctx, sid, busy) -> frozenset: the closed set of stack sid (see the file's comment)"},
    {"intern", py_intern, METH_VARARGS, "intern(ctx, rule, state, parent) -> the stack's id"},
    {"closure_top", py_closure_top, METH_VARARGS,
     "closure_top(ctx, sid) -> frozenset: as closure, from outside a closure in progress"},
    {"step", py_step, METH_VARARGS, "step(ctx, sid, byte) -> frozenset: the closed set after sid reads byte"},
    {"walk_keys", py_walk_keys, METH_VARARGS,
     "walk_keys(ctx, keys, start, on_escape) -> list: as masks.walk_keys, for a sorted tuple of keys"},
    {"step_set", py_step_set, METH_VARARGS,
     "step_set(ctx, stacks, byte) -> frozenset: the closed set after the frozenset stacks read byte"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "compiled_stacks", NULL, -1, methods};

PyMODINIT_FUNC PyInit_compiled_stacks(void) {
    EMPTY = frozen_ints(NULL);
    if (!EMPTY) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m && PyModule_AddIntConstant(m, "VERSION", STACKS_VERSION) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
