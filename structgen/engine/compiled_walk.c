/* The trie walk of structgen/engine/masks.py, in C: its hot loop, one Python-level step per
 * trie node, costs ~1 us in Python; a cold SQL parse state walks ~10^5 nodes.
 *
 * The walk never computes a grammar step itself. Stack sets are numbered by the caller
 * (walk_kernel.SetRows), and row k of `rows` (a bytearray of 512 int32) says, for set k and
 * each byte b:
 *   row[b]       the number of the set after reading b, DEAD when nothing is left to walk,
 *                UNKNOWN until fill(k, b) has stepped it;
 *   row[256 + b] 0, or the code of the escape markers reading b reached (reported, then dropped).
 * An escape is reported as (first key under the node, depth, code), the code negated when the
 * walk goes on below the node (a key ending there is then inside, and no crossing is needed).
 * A row still None is made by calling fill(k, -1) (the bytes the set cannot read are DEAD, the
 * rest UNKNOWN), and a step by fill(k, b) (Python, which may number new sets), so the grammar is
 * only stepped where the walk goes. What comes back is exactly what
 * masks.walk_keys returns, and the escapes it would report, for keys given as the sorted
 * token index (blob + offsets, lcp and the subtree-end table of vocab.TokenIndex).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define KERNEL_VERSION 6
#define DEAD (-1)    /* a row entry: no set to walk on with */
#define UNKNOWN (-2) /* a row entry: not stepped yet */

typedef struct {
    int64_t *data;
    Py_ssize_t len, cap;
} Vec;

/* Room for `need` items (doubling from 1024). */
static int vec_reserve(Vec *v, Py_ssize_t need) {
    if (need <= v->cap)
        return 0;
    Py_ssize_t cap = v->cap ? v->cap : 1024;
    while (cap < need)
        cap *= 2;
    int64_t *data = PyMem_Realloc(v->data, cap * sizeof(int64_t));
    if (!data) {
        PyErr_NoMemory();
        return -1;
    }
    v->data = data;
    v->cap = cap;
    return 0;
}

static int vec_push(Vec *v, int64_t x) {
    if (v->len == v->cap && vec_reserve(v, v->len + 1) < 0)
        return -1;
    v->data[v->len++] = x;
    return 0;
}

/* Append xs[:n], or n places to fill (xs NULL). */
static int vec_extend(Vec *v, const int64_t *xs, Py_ssize_t n) {
    if (vec_reserve(v, v->len + n) < 0)
        return -1;
    if (xs)
        memcpy(v->data + v->len, xs, n * sizeof(int64_t));
    v->len += n;
    return 0;
}

static PyObject *vec_bytes(Vec *v) {
    return PyBytes_FromStringAndSize((const char *)v->data, v->len * (Py_ssize_t)sizeof(int64_t));
}

/* The sorted keys and the tables that make their trie implicit. */
typedef struct {
    Py_buffer blob, offs, lcp, firsts, ends;
    Py_ssize_t n;
} Index;

static int index_open(Index *ix, PyObject *blob, PyObject *offs, PyObject *lcp, PyObject *firsts,
                      PyObject *ends) {
    memset(ix, 0, sizeof(*ix));
    PyObject *objs[5] = {blob, offs, lcp, firsts, ends};
    Py_buffer *bufs[5] = {&ix->blob, &ix->offs, &ix->lcp, &ix->firsts, &ix->ends};
    for (int k = 0; k < 5; k++) {
        if (PyObject_GetBuffer(objs[k], bufs[k], PyBUF_C_CONTIGUOUS) < 0) {
            for (int j = 0; j < k; j++)
                PyBuffer_Release(bufs[j]);
            return -1;
        }
    }
    ix->n = ix->lcp.len / 8;
    if (ix->offs.len != (ix->n + 1) * 8 || ix->firsts.len != (ix->n + 1) * 8 || ix->ends.len % 8) {
        PyErr_SetString(PyExc_ValueError, "index tables of unequal lengths");
        for (int k = 0; k < 5; k++)
            PyBuffer_Release(bufs[k]);
        return -1;
    }
    return 0;
}

static void index_close(Index *ix) {
    PyBuffer_Release(&ix->blob);
    PyBuffer_Release(&ix->offs);
    PyBuffer_Release(&ix->lcp);
    PyBuffer_Release(&ix->firsts);
    PyBuffer_Release(&ix->ends);
}

#define OFFS(ix) ((const int64_t *)(ix)->offs.buf)
#define BYTE(ix, i, d) (((const uint8_t *)(ix)->blob.buf)[OFFS(ix)[i] + (d)])
#define KLEN(ix, i) (OFFS(ix)[(i) + 1] - OFFS(ix)[i])

/* End of the subtree of node keys[i][:d], i being its first key (so lcp[i] < d <= len(keys[i])). */
static inline int64_t subtree_end(const Index *ix, int64_t i, int64_t d) {
    const int64_t *lcp = ix->lcp.buf, *firsts = ix->firsts.buf, *ends = ix->ends.buf;
    return ends[firsts[i] + d - lcp[i] - 1];
}

typedef struct {
    Index ix;
    PyObject *rows, *fill;
    int escaping;
    Vec inside, events;
} Walk;

/* Row k, filled first when it is not yet; a new reference (the caller keeps it alive while it
 * reads it: another thread may replace an equal row meanwhile). */
static PyObject *row_of(Walk *w, int64_t k) {
    PyObject *row = k < PyList_GET_SIZE(w->rows) ? PyList_GET_ITEM(w->rows, k) : Py_None;
    if (row == Py_None) {
        PyObject *res = PyObject_CallFunction(w->fill, "Li", (long long)k, -1);
        if (!res)
            return NULL;
        Py_DECREF(res);
        row = k < PyList_GET_SIZE(w->rows) ? PyList_GET_ITEM(w->rows, k) : Py_None;
    }
    if (!PyByteArray_Check(row) || PyByteArray_GET_SIZE(row) != 512 * 4) {
        PyErr_Format(PyExc_ValueError, "row %lld is not 512 int32", (long long)k);
        return NULL;
    }
    Py_INCREF(row);
    return row;
}

/* The step of set k by byte b, asking fill(k, b) first when it is not known yet. */
static inline int step_of(Walk *w, int64_t k, int32_t *next, int b) {
    if (next[b] == UNKNOWN) {
        PyObject *res = PyObject_CallFunction(w->fill, "Li", (long long)k, b);
        if (!res)
            return -1;
        Py_DECREF(res);
        if (next[b] == UNKNOWN) {
            PyErr_Format(PyExc_ValueError, "step %lld, %d was not filled", (long long)k, b);
            return -1;
        }
    }
    return 0;
}

/* keys[lo:hi] share their first d bytes and s is the set after them. */
static int visit(Walk *w, int64_t s, int64_t lo, int64_t hi, int64_t d) {
    const Index *ix = &w->ix;
    if (KLEN(ix, lo) == d) { /* the key that is exactly the prefix sorts first */
        if (vec_push(&w->inside, lo) < 0)
            return -1;
        if (++lo >= hi)
            return 0;
    }
    PyObject *row = row_of(w, s);
    if (!row)
        return -1;
    int32_t *next = (int32_t *)PyByteArray_AS_STRING(row);
    int rc = 0;
    while (lo < hi) { /* each child: its byte, then its subtree when the set can read the byte */
        int b = BYTE(ix, lo, d);
        int64_t z = subtree_end(ix, lo, d + 1);
        if (next[b] != DEAD && step_of(w, s, next, b) < 0) {
            rc = -1;
            break;
        }
        if (w->escaping && next[256 + b]) {
            if (vec_push(&w->events, lo) < 0 || vec_push(&w->events, d + 1) < 0
                || vec_push(&w->events, next[b] >= 0 ? -next[256 + b] : next[256 + b]) < 0) {
                rc = -1;
                break;
            }
        }
        if (next[b] >= 0 && visit(w, next[b], lo, z, d + 1) < 0) {
            rc = -1;
            break;
        }
        lo = z;
    }
    Py_DECREF(row);
    return rc;
}

static PyObject *walk(PyObject *self, PyObject *args) {
    PyObject *blob, *offs, *lcp, *firsts, *ends, *rows, *fill;
    long long start;
    int escaping;
    if (!PyArg_ParseTuple(args, "OOOOOLO!Op:walk", &blob, &offs, &lcp, &firsts, &ends, &start,
                          &PyList_Type, &rows, &fill, &escaping))
        return NULL;
    Walk w;
    memset(&w, 0, sizeof(w));
    if (index_open(&w.ix, blob, offs, lcp, firsts, ends) < 0)
        return NULL;
    w.rows = rows;
    w.fill = fill;
    w.escaping = escaping;
    PyObject *out = NULL;
    if (w.ix.n == 0 || visit(&w, start, 0, w.ix.n, 0) == 0) {
        PyObject *inside = vec_bytes(&w.inside), *events = vec_bytes(&w.events);
        if (inside && events)
            out = PyTuple_Pack(2, inside, events);
        Py_XDECREF(inside);
        Py_XDECREF(events);
    }
    PyMem_Free(w.inside.data);
    PyMem_Free(w.events.data);
    index_close(&w.ix);
    return out;
}

/* ------------------------------------------------------------------ the walk frame by frame
 *
 * walk_frames is walk's answer, reached another way. A walk's position is a list of components
 * (k, P): the stacks of set k, whose chains end at the escape, with that end replaced by the
 * stack P (P == ESCAPE: the stacks as they are). Rows belong to sets, not to components, so a
 * lexer token's states are stepped once per grammar, whatever rule called the token: a SQL
 * name after `SELECT`, after `FROM` or after `AS` walks the rows the first walk made.
 *
 * Row k's entry for byte b is then a set k2 >= 0, the component (k2, P), or SPLIT - c for a
 * configuration c, and configs[c] the int64 pairs (k2, p) it splits into: each the component
 * (k2, rebase(p, P)), the frames of set k2 under the parent p, moved onto P. FrameRows splits a
 * set only where that shares rows (walk_kernel.py says when); a set kept whole is one entry. An escape code reached by a component with P == ESCAPE is
 * the walk's own escape, reported as walk reports it; under another P it is where the frames
 * return into P, and cont(code, P) gives what goes on (an entry as in a row, read with
 * P == ESCAPE) and the code of what escapes the walk there. Both callbacks are memoized here
 * per walk (Python memoizes them per grammar).
 *
 * Given follow (the bytes that may follow the walked rule) and blocked (per escape code, the
 * bytes all its markers forbid next), walk_frames returns, instead of the escape events, what
 * crossings makes of them, found during the walk: at a node where the walk escapes, the keys
 * under a child whose byte is in follow and not blocked, and the key ending there unless the
 * walk goes on (then it is inside). A SQL name state escapes at ~70,000 nodes and crosses at
 * a handful: a second pass over every escape cost as much as a third of the walk.
 */

typedef struct {
    uint64_t *keys;
    int64_t *vals;
    Py_ssize_t cap, len;
} Memo;

#define MEMO_EMPTY UINT64_MAX

static int memo_find(Memo *m, uint64_t key, int64_t *val) {
    if (!m->cap)
        return 0;
    Py_ssize_t i = (Py_ssize_t)((key * 0x9E3779B97F4A7C15ULL) >> 20) & (m->cap - 1);
    while (m->keys[i] != MEMO_EMPTY) {
        if (m->keys[i] == key) {
            *val = m->vals[i];
            return 1;
        }
        i = (i + 1) & (m->cap - 1);
    }
    return 0;
}

static int memo_put(Memo *m, uint64_t key, int64_t val) {
    if (2 * (m->len + 1) > m->cap) {
        Memo g = {0};
        g.cap = m->cap ? 2 * m->cap : 256;
        g.keys = PyMem_Malloc(g.cap * sizeof(uint64_t));
        g.vals = PyMem_Malloc(g.cap * sizeof(int64_t));
        if (!g.keys || !g.vals) {
            PyMem_Free(g.keys);
            PyMem_Free(g.vals);
            PyErr_NoMemory();
            return -1;
        }
        memset(g.keys, 0xff, g.cap * sizeof(uint64_t));
        for (Py_ssize_t i = 0; i < m->cap; i++)
            if (m->keys[i] != MEMO_EMPTY)
                memo_put(&g, m->keys[i], m->vals[i]);
        PyMem_Free(m->keys);
        PyMem_Free(m->vals);
        *m = g;
    }
    Py_ssize_t i = (Py_ssize_t)((key * 0x9E3779B97F4A7C15ULL) >> 20) & (m->cap - 1);
    while (m->keys[i] != MEMO_EMPTY && m->keys[i] != key)
        i = (i + 1) & (m->cap - 1);
    if (m->keys[i] == MEMO_EMPTY)
        m->len++;
    m->keys[i] = key;
    m->vals[i] = val;
    return 0;
}

#define ESCAPE_SID 1 /* pda.ESCAPE */
#define SPLIT (-3)   /* a row entry SPLIT - c: configuration c */
#define PACK(a, b) (((uint64_t)(uint32_t)(a) << 32) | (uint32_t)(b))

typedef struct {
    Walk base;
    PyObject *sets; /* the FrameRows: its rebase and cont */
    PyObject *configs;
    Memo rebased, conts;
    Vec comps; /* the components of every level being walked, a stack of lists */
    /* crossings mode (follow given): instead of escape events, (key, depth) pairs of the keys
     * that may go on past the walk's escape with a byte of follow less what the escape's
     * markers all forbid (blocked[code], a 32-byte bit set each) */
    const uint8_t *follow;
    PyObject *blocked;
    uint8_t (*allowed)[32]; /* per code, once known */
    char *known;
    Py_ssize_t nallowed;
    Vec pairs;
    /* token summaries (crossings mode, when given): leafy[k] marks the sets that are a lexer
     * token's state alone; summaries maps (set, first key, depth) to what that set reads below
     * the node walked alone: (inside keys, its escapes that a caller may go on from) */
    PyObject *summaries, *leafy;
    int summarized; /* a summary was applied: the results are put in order at the end */
} FrameWalk;

/* What a walk allocated (its index buffers are released by whoever opened them). */
static void frame_walk_free(FrameWalk *w) {
    PyMem_Free(w->base.inside.data);
    PyMem_Free(w->base.events.data);
    PyMem_Free(w->comps.data);
    PyMem_Free(w->pairs.data);
    PyMem_Free(w->allowed);
    PyMem_Free(w->known);
    Memo *memos[2] = {&w->rebased, &w->conts};
    for (int q = 0; q < 2; q++) {
        PyMem_Free(memos[q]->keys);
        PyMem_Free(memos[q]->vals);
    }
}

/* An int from a callback's result (a new reference, dropped here). */
static int take_int(PyObject *res, int64_t *out) {
    if (!res)
        return -1;
    long long v = PyLong_AsLongLong(res);
    Py_DECREF(res);
    if (v == -1 && PyErr_Occurred())
        return -1;
    *out = v;
    return 0;
}

static int lifted(FrameWalk *w, Memo *m, const char *method, int64_t a, int64_t p, int64_t *out) {
    if (a < 0 || a > INT32_MAX || p < 0 || p > INT32_MAX) {
        PyErr_SetString(PyExc_OverflowError, "stack or set number past 2**31");
        return -1;
    }
    uint64_t key = PACK(a, p);
    if (memo_find(m, key, out))
        return 0;
    if (take_int(PyObject_CallMethod(w->sets, method, "LL", (long long)a, (long long)p), out) < 0)
        return -1;
    return memo_put(m, key, *out);
}

/* Push the components of configuration c, read under the parent P. */
static int push_config(FrameWalk *w, int64_t c, int64_t P) {
    if (c < 0 || c >= PyList_GET_SIZE(w->configs)) {
        PyErr_Format(PyExc_ValueError, "configuration %lld out of range", (long long)c);
        return -1;
    }
    PyObject *cfg = PyList_GET_ITEM(w->configs, c);
    if (!PyBytes_Check(cfg) || PyBytes_GET_SIZE(cfg) % 16) {
        PyErr_Format(PyExc_ValueError, "configuration %lld is not int64 pairs", (long long)c);
        return -1;
    }
    Py_INCREF(cfg); /* a callback may grow the list meanwhile */
    const int64_t *e = (const int64_t *)PyBytes_AS_STRING(cfg);
    Py_ssize_t n = PyBytes_GET_SIZE(cfg) / 16;
    int rc = 0;
    for (Py_ssize_t j = 0; j < n && !rc; j++) {
        int64_t k = e[2 * j], p = e[2 * j + 1], got;
        if (p == ESCAPE_SID)
            got = P;
        else if (P == ESCAPE_SID)
            got = p;
        else if (lifted(w, &w->rebased, "rebase", p, P, &got) < 0) {
            rc = -1;
            break;
        }
        if (!rc)
            rc = vec_push(&w->comps, (int64_t)PACK(k, got));
    }
    Py_DECREF(cfg);
    return rc;
}

/* Push what a row entry read under the parent P is: the component (entry, P), the components of
 * a configuration, or nothing (dead). */
static int push_entry(FrameWalk *w, int64_t entry, int64_t P) {
    if (entry >= 0)
        return vec_push(&w->comps, (int64_t)PACK(entry, P));
    return entry <= SPLIT ? push_config(w, SPLIT - entry, P) : 0;
}

static int cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* Sort a few int64 in place: insertion sort where qsort's call per compare would dominate. */
static void sort_i64(int64_t *a, Py_ssize_t n) {
    if (n > 16) {
        qsort(a, n, sizeof(int64_t), cmp_i64);
        return;
    }
    for (Py_ssize_t i = 1; i < n; i++) {
        int64_t x = a[i];
        Py_ssize_t j = i;
        while (j > 0 && a[j - 1] > x) {
            a[j] = a[j - 1];
            j--;
        }
        a[j] = x;
    }
}

#define MAX_CODES 64

/* The bytes all markers of an escape code forbid next (32 bytes, a bit per byte). */
static const uint8_t *blocked_of(FrameWalk *w, int64_t code) {
    if (code < 0 || code >= PyList_GET_SIZE(w->blocked)) {
        PyErr_Format(PyExc_ValueError, "escape code %lld has no blocked bytes", (long long)code);
        return NULL;
    }
    PyObject *b = PyList_GET_ITEM(w->blocked, code);
    if (!PyBytes_Check(b) || PyBytes_GET_SIZE(b) != 32) {
        PyErr_Format(PyExc_ValueError, "blocked bytes of code %lld are not 32 bytes", (long long)code);
        return NULL;
    }
    return (const uint8_t *)PyBytes_AS_STRING(b);
}

/* The bytes a key may go on with past an escape of this code: follow less blocked[code]. */
static const uint8_t *allowed_of(FrameWalk *w, int64_t code) {
    if (code >= 0 && code < w->nallowed && w->known[code])
        return w->allowed[code];
    const uint8_t *bl = blocked_of(w, code);
    if (!bl)
        return NULL;
    if (code >= w->nallowed) {
        Py_ssize_t n = w->nallowed ? w->nallowed : 64;
        while (n <= code)
            n *= 2;
        uint8_t(*a)[32] = PyMem_Realloc(w->allowed, n * 32);
        if (!a) {
            PyErr_NoMemory();
            return NULL;
        }
        w->allowed = a;
        char *k = PyMem_Realloc(w->known, n);
        if (!k) {
            PyErr_NoMemory();
            return NULL;
        }
        memset(k + w->nallowed, 0, n - w->nallowed);
        w->known = k;
        w->nallowed = n;
    }
    for (int q = 0; q < 32; q++)
        w->allowed[code][q] = w->follow[q] & ~bl[q];
    w->known[code] = 1;
    return w->allowed[code];
}

static inline int has_byte(const uint8_t *set, int b) { return (set[b >> 3] >> (b & 7)) & 1; }

/* Pairs (j, d) for every key j in keys[lo:hi]. */
static int push_range(FrameWalk *w, int64_t lo, int64_t hi, int64_t d) {
    for (int64_t j = lo; j < hi; j++)
        if (vec_push(&w->pairs, j) < 0 || vec_push(&w->pairs, d) < 0)
            return -1;
    return 0;
}

/* The crossings at node keys[lo:hi][:d] where the walk stops: the key ending there, and every
 * key under a child whose byte is in ok. */
static int cross_children(FrameWalk *w, int64_t lo, int64_t hi, int64_t d, const uint8_t *ok);

static int cross_node(FrameWalk *w, int64_t lo, int64_t hi, int64_t d, const uint8_t *ok) {
    if (KLEN(&w->base.ix, lo) == d) {
        if (push_range(w, lo, lo + 1, d) < 0)
            return -1;
        lo++;
    }
    return cross_children(w, lo, hi, d, ok);
}

/* Every key under a child (keys[lo:hi], none ending at the node) whose byte is in ok. */
static int cross_children(FrameWalk *w, int64_t lo, int64_t hi, int64_t d, const uint8_t *ok) {
    const Index *ix = &w->base.ix;
    while (lo < hi) {
        int64_t z = subtree_end(ix, lo, d + 1);
        if (has_byte(ok, BYTE(ix, lo, d)) && push_range(w, lo, z, d) < 0)
            return -1;
        lo = z;
    }
    return 0;
}

static int visit_frames(FrameWalk *w, Py_ssize_t at, Py_ssize_t n, int64_t lo, int64_t hi, int64_t d,
                        const uint8_t *cross);

/* ------------------------------------------------------------------ token summaries
 *
 * Most of a cold SQL mask's walks go through the same name tokens: after `SELECT`, after `*`,
 * after `(`, each walk reads the ~15,000 keys a name takes whole again, under a different
 * caller. A token's state alone at a node reads the same keys whatever called it; the caller
 * only matters where the token may end (an escape) and the caller could read on. So the first
 * walk that meets set k under a caller (P is not the escape: a token the walked rule reads
 * itself is walked with the rest, which costs less the once it is met) at a node with
 * SUMMARY_MIN_KEYS keys or more below walks k alone there
 * (in events mode, as walk_frames without follow) and keeps its inside keys and the escapes a
 * caller may go on from; every later walk, under any caller P, adds those keys and goes on
 * from those escapes only, as the walk would (cont(code, P), then the walk's own escape).
 *
 * Which escapes: cont(code, P) is the caller's closure under a guard that forbids the bytes
 * the token forbids next (pda.StackMachine._guard_closure), and what escapes it forbids them
 * too; so an escape matters only where the node has a child byte the token's lookahead lets
 * through, or where a key ends and the token did not go on (else that key is inside already).
 * A key is inside when any part of the walk reads it whole, so the results are unions: the
 * walk returns them sorted and without repeats, and leaves out the crossing of a key ending
 * where it is inside (which the walk without summaries never reports either). */
#define SUMMARY_MIN_KEYS 256

static int leafy_set(FrameWalk *w, int64_t k) {
    return k < PyByteArray_GET_SIZE(w->leafy) && PyByteArray_AS_STRING(w->leafy)[k];
}

/* Whether a caller may go on from the token's escape (code, < 0 where the token went on) at
 * node keys[i][:d]: a key ends there and the token stopped, or a child's byte is not blocked. */
static int escape_matters(const Index *ix, int64_t i, int64_t d, int64_t code, const uint8_t *blocked) {
    if (code > 0 && KLEN(ix, i) == d)
        return 1;
    int64_t z = subtree_end(ix, i, d), c = i;
    if (KLEN(ix, c) == d)
        c++;
    while (c < z) {
        if (!has_byte(blocked, BYTE(ix, c, d)))
            return 1;
        c = subtree_end(ix, c, d + 1);
    }
    return 0;
}

/* The summary of set k at node keys[lo:hi][:d] (a new reference), made when first asked. */
static PyObject *summary_of(FrameWalk *w, int64_t k, int64_t lo, int64_t hi, int64_t d) {
    PyObject *key = Py_BuildValue("(LLL)", (long long)k, (long long)lo, (long long)d);
    if (!key)
        return NULL;
    PyObject *got = PyDict_GetItemWithError(w->summaries, key);
    if (got || PyErr_Occurred()) {
        Py_XINCREF(got);
        Py_DECREF(key);
        return got;
    }
    FrameWalk s; /* events mode, no summaries: the token walked alone, on the same rows */
    memset(&s, 0, sizeof(s));
    s.base.ix = w->base.ix; /* the outer walk holds and releases the buffers */
    s.base.rows = w->base.rows;
    s.base.fill = w->base.fill;
    s.base.escaping = 1;
    s.sets = w->sets;
    s.configs = w->configs;
    Vec kept = {NULL, 0, 0};
    int rc = vec_push(&s.comps, (int64_t)PACK(k, ESCAPE_SID));
    if (!rc)
        rc = visit_frames(&s, 0, 1, lo, hi, d, NULL);
    const int64_t *ev = s.base.events.data;
    for (Py_ssize_t e = 0; !rc && e < s.base.events.len; e += 3) {
        const uint8_t *blocked = blocked_of(w, ev[e + 2] < 0 ? -ev[e + 2] : ev[e + 2]);
        if (!blocked)
            rc = -1;
        else if (escape_matters(&w->base.ix, ev[e], ev[e + 1], ev[e + 2], blocked))
            for (int q = 0; q < 3 && !rc; q++)
                rc = vec_push(&kept, ev[e + q]);
    }
    PyObject *inside = NULL;
    if (!rc) { /* the inside keys as int32 (an index of 2**31 keys is far off): half the memory */
        inside = PyBytes_FromStringAndSize(NULL, s.base.inside.len * (Py_ssize_t)sizeof(int32_t));
        if (!inside)
            rc = -1;
        else
            for (Py_ssize_t j = 0; j < s.base.inside.len; j++)
                ((int32_t *)PyBytes_AS_STRING(inside))[j] = (int32_t)s.base.inside.data[j];
    }
    if (!rc) {
        PyObject *events = vec_bytes(&kept);
        got = inside && events ? PyTuple_Pack(2, inside, events) : NULL;
        Py_XDECREF(inside);
        Py_XDECREF(events);
        if (got && PyDict_SetItem(w->summaries, key, got) < 0)
            Py_CLEAR(got);
    }
    Py_DECREF(key);
    PyMem_Free(kept.data);
    frame_walk_free(&s);
    return got;
}

/* The component (k, P) at node keys[lo:hi][:d] from k's summary: its inside keys, and from each
 * of its escapes what the walk does there, the caller going on (cont) and the walk's own escape. */
static int apply_summary(FrameWalk *w, int64_t k, int64_t P, int64_t lo, int64_t hi, int64_t d) {
    PyObject *sum = summary_of(w, k, lo, hi, d);
    if (!sum)
        return -1;
    /* the dict is Python's: a summary that is not what summary_of makes is refused */
    const Index *ix = &w->base.ix;
    PyObject *inside = PyTuple_Check(sum) && PyTuple_GET_SIZE(sum) == 2 ? PyTuple_GET_ITEM(sum, 0) : NULL;
    PyObject *events = inside ? PyTuple_GET_ITEM(sum, 1) : NULL;
    int rc = !inside || !PyBytes_Check(inside) || !PyBytes_Check(events) || PyBytes_GET_SIZE(inside) % 4
             || PyBytes_GET_SIZE(events) % 24 ? -1 : 0;
    const int32_t *keys = rc ? NULL : (const int32_t *)PyBytes_AS_STRING(inside);
    const int64_t *ev = rc ? NULL : (const int64_t *)PyBytes_AS_STRING(events);
    Py_ssize_t nkeys = rc ? 0 : PyBytes_GET_SIZE(inside) / 4, nev = rc ? 0 : PyBytes_GET_SIZE(events) / 8;
    Py_ssize_t at = w->base.inside.len;
    if (!rc) /* places for them, filled (widened to int64) below */
        rc = vec_extend(&w->base.inside, NULL, nkeys);
    for (Py_ssize_t j = 0; !rc && j < nkeys; j++) {
        if (keys[j] < 0 || keys[j] >= ix->n)
            rc = 1;
        else
            w->base.inside.data[at + j] = keys[j];
    }
    Py_ssize_t codes = PyList_GET_SIZE(w->blocked);
    for (Py_ssize_t e = 0; !rc && e < nev; e += 3) {
        int64_t i = ev[e], dd = ev[e + 1], code = ev[e + 2];
        rc = i < 0 || i >= ix->n || dd <= ((const int64_t *)ix->lcp.buf)[i] || dd > KLEN(ix, i)
             || code <= -codes || code >= codes || !code ? -1 : 0;
    }
    if (rc) {
        if (rc > 0 || !PyErr_Occurred())
            PyErr_Format(PyExc_ValueError, "the summary of set %lld at key %lld, depth %lld is malformed",
                         (long long)k, (long long)lo, (long long)d);
        Py_DECREF(sum);
        return -1;
    }
    w->summarized = 1;
    for (Py_ssize_t e = 0; !rc && e < nev; e += 3) {
        int64_t i = ev[e], dd = ev[e + 1], code = ev[e + 2] < 0 ? -ev[e + 2] : ev[e + 2];
        int64_t entry = DEAD, escaped = code;
        if (P != ESCAPE_SID) {
            int64_t packed;
            if (lifted(w, &w->conts, "cont", code, P, &packed) < 0) {
                rc = -1;
                break;
            }
            entry = (int32_t)(packed >> 32);
            escaped = (int64_t)(uint32_t)packed;
        }
        Py_ssize_t child = w->comps.len;
        rc = push_entry(w, entry, ESCAPE_SID);
        uint8_t ok[32];
        const uint8_t *cross = NULL;
        if (!rc && escaped) {
            const uint8_t *a = allowed_of(w, escaped);
            if (!a)
                rc = -1;
            else {
                memcpy(ok, a, 32);
                cross = ok;
            }
        }
        int64_t z = subtree_end(&w->base.ix, i, dd);
        Py_ssize_t m = w->comps.len - child;
        if (!rc && m)
            rc = visit_frames(w, child, m, i, z, dd, cross);
        else if (!rc && cross)
            rc = cross_node(w, i, z, dd, ok);
        w->comps.len = child;
    }
    Py_DECREF(sum);
    return rc;
}

#define LOOP_MIN_KEYS 16

/* Whether every key in keys[lo:hi] reads only bytes of loops from depth d on. */
static int keys_loop(const Index *ix, int64_t lo, int64_t hi, int64_t d, const uint8_t *loops) {
    const uint8_t *blob = ix->blob.buf;
    for (int64_t j = lo; j < hi; j++) {
        const uint8_t *key = blob + OFFS(ix)[j];
        for (int64_t p = d; p < KLEN(ix, j); p++)
            if (!loops[key[p]])
                return 0;
    }
    return 1;
}

/* comps[at:at+n] is the position after keys[lo:hi]'s shared first d bytes; in crossings mode,
 * cross (or NULL) is what the walk's escape at this node lets go on: the keys under a child
 * whose byte it holds cross here. */
static int visit_frames(FrameWalk *w, Py_ssize_t at, Py_ssize_t n, int64_t lo, int64_t hi, int64_t d,
                        const uint8_t *cross) {
    const Index *ix = &w->base.ix;
    if (w->summaries && hi - lo >= SUMMARY_MIN_KEYS) { /* tokens alone: from their summaries */
        Py_ssize_t keep = 0;
        for (Py_ssize_t j = 0; j < n; j++) {
            int64_t comp = w->comps.data[at + j];
            int64_t k = (int64_t)((uint64_t)comp >> 32), P = (int64_t)(uint32_t)comp;
            if (P == ESCAPE_SID || !leafy_set(w, k)) /* a token under a caller */
                w->comps.data[at + keep++] = comp;
            else if (apply_summary(w, k, P, lo, hi, d) < 0)
                return -1;
        }
        n = keep;
    }
    if (KLEN(ix, lo) == d) {
        if (vec_push(&w->base.inside, lo) < 0)
            return -1;
        if (++lo >= hi)
            return 0;
    }
    if (!n) /* all from summaries: what this node's escape lets cross is left */
        return cross ? cross_children(w, lo, hi, d, cross) : 0;
    /* the components' rows, fetched once for all the node's children */
    PyObject *small[8], **rows = n <= 8 ? small : PyMem_Malloc(n * sizeof(PyObject *));
    if (!rows) {
        PyErr_NoMemory();
        return -1;
    }
    Py_ssize_t held = 0;
    int rc = 0;
    for (; held < n; held++) {
        uint64_t comp = (uint64_t)w->comps.data[at + held];
        if (!(rows[held] = row_of(&w->base, (int64_t)(comp >> 32)))) {
            rc = -1;
            break;
        }
    }
    /* one set that reads most bytes back into itself (a string or a comment body): a child
     * whose keys read only such bytes from here on is inside whole, found from its keys' bytes
     * without a node-by-node walk (a string body's walk visits the whole trie: ~150,000 nodes) */
    uint8_t loops[256];
    int looping = n == 1 && hi - lo >= LOOP_MIN_KEYS, stale = 1;
    int64_t loop_k = (int64_t)((uint64_t)w->comps.data[at] >> 32);
    while (!rc && lo < hi) {
        int b = BYTE(ix, lo, d);
        int64_t z = subtree_end(ix, lo, d + 1);
        if (cross && has_byte(cross, b) && push_range(w, lo, z, d) < 0) {
            rc = -1;
            break;
        }
        if (looping && stale) { /* again once steps were filled: unknown bytes do not loop */
            const int32_t *row = (const int32_t *)PyByteArray_AS_STRING(rows[0]);
            for (int x = 0; x < 256; x++)
                loops[x] = row[x] == loop_k && !row[256 + x];
            stale = 0;
        }
        if (looping && loops[b] && keys_loop(ix, lo, z, d + 1, loops)) {
            for (int64_t j = lo; j < z && !rc; j++)
                rc = vec_push(&w->base.inside, j);
            lo = z;
            continue;
        }
        if (looping && ((int32_t *)PyByteArray_AS_STRING(rows[0]))[b] == UNKNOWN)
            stale = 1; /* this child's step is made by Python below */
        Py_ssize_t child = w->comps.len;
        int64_t codes[MAX_CODES];
        int ncodes = 0;
        for (Py_ssize_t j = 0; j < n && !rc; j++) {
            uint64_t comp = (uint64_t)w->comps.data[at + j];
            int64_t k = (int64_t)(comp >> 32), P = (int64_t)(uint32_t)comp;
            int32_t *next = (int32_t *)PyByteArray_AS_STRING(rows[j]);
            if (next[b] == DEAD && !next[256 + b])
                continue;
            if (next[b] != DEAD && step_of(&w->base, k, next, b) < 0) {
                rc = -1;
                break;
            }
            int64_t c = next[b], code = next[256 + b];
            if (push_entry(w, c, P) < 0) { /* one set or a configuration, under the same parent */
                rc = -1;
                break;
            }
            if (!code)
                continue;
            if (P != ESCAPE_SID) { /* the frames return into P: what P goes on with */
                int64_t packed;
                if (lifted(w, &w->conts, "cont", code, P, &packed) < 0) {
                    rc = -1;
                    break;
                }
                int32_t e = (int32_t)(packed >> 32); /* arithmetic: the entry's sign */
                code = (int64_t)(uint32_t)packed;
                if (push_entry(w, e, ESCAPE_SID) < 0) {
                    rc = -1;
                    break;
                }
                if (!code)
                    continue;
            }
            int seen = 0;
            for (int q = 0; q < ncodes; q++)
                seen |= codes[q] == code;
            if (!seen) {
                if (ncodes == MAX_CODES) {
                    PyErr_SetString(PyExc_ValueError, "too many escape codes at one node");
                    rc = -1;
                    break;
                }
                codes[ncodes++] = code;
            }
        }
        if (rc)
            break;
        Py_ssize_t m = w->comps.len - child;
        if (m > 1) { /* one component once */
            sort_i64(w->comps.data + child, m);
            Py_ssize_t u = 1;
            for (Py_ssize_t j = 1; j < m; j++)
                if (w->comps.data[child + j] != w->comps.data[child + u - 1])
                    w->comps.data[child + u++] = w->comps.data[child + j];
            w->comps.len = child + (m = u);
        }
        uint8_t ok[32];
        if (w->follow && ncodes) { /* crossings mode: what may go on past this escape */
            memset(ok, 0, 32);
            for (int q = 0; q < ncodes && !rc; q++) {
                const uint8_t *a = allowed_of(w, codes[q]);
                if (!a)
                    rc = -1;
                else
                    for (int r = 0; r < 32; r++)
                        ok[r] |= a[r];
            }
            if (!rc && !m && cross_node(w, lo, z, d + 1, ok) < 0)
                rc = -1;
        } else {
            for (int q = 0; q < ncodes && !rc; q++)
                if (vec_push(&w->base.events, lo) < 0 || vec_push(&w->base.events, d + 1) < 0
                    || vec_push(&w->base.events, m ? -codes[q] : codes[q]) < 0)
                    rc = -1;
        }
        if (!rc && m && visit_frames(w, child, m, lo, z, d + 1, w->follow && ncodes ? ok : NULL) < 0)
            rc = -1;
        w->comps.len = child;
        lo = z;
    }
    for (Py_ssize_t j = 0; j < held; j++)
        Py_DECREF(rows[j]);
    if (rows != small)
        PyMem_Free(rows);
    return rc;
}

static inline int lowest_bit(uint64_t x) { /* x != 0 */
#if defined(__GNUC__) || defined(__clang__)
    return __builtin_ctzll(x);
#else
    int b = 0;
    while (!(x & 1)) {
        x >>= 1;
        b++;
    }
    return b;
#endif
}

static int cmp_pair(const void *a, const void *b) {
    const int64_t *x = a, *y = b;
    return x[0] != y[0] ? (x[0] > y[0]) - (x[0] < y[0]) : (x[1] > y[1]) - (x[1] < y[1]);
}

/* The walk's results with summaries, as the walk without them gives them: inside keys sorted
 * and once each; crossings (key, depth) sorted, once each, and none of a key ending where it
 * is inside (another part of the walk read it whole). */
static int normalized(FrameWalk *w) {
    Vec *in = &w->base.inside, *pr = &w->pairs;
    /* a bit per key, then the keys in order: the summaries' runs are ~15,000-50,000 keys */
    Py_ssize_t words = w->base.ix.n / 64 + 1, u = 0;
    uint64_t *seen = PyMem_Calloc(words, sizeof(uint64_t));
    if (!seen) {
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t j = 0; j < in->len; j++)
        seen[in->data[j] >> 6] |= (uint64_t)1 << (in->data[j] & 63);
    for (Py_ssize_t q = 0; q < words; q++)
        for (uint64_t x = seen[q]; x; x &= x - 1)
            in->data[u++] = q * 64 + lowest_bit(x);
    in->len = u;
    Py_ssize_t n = pr->len / 2;
    if (n > 1)
        qsort(pr->data, n, 2 * sizeof(int64_t), cmp_pair);
    u = 0;
    for (Py_ssize_t j = 0; j < n; j++) {
        int64_t key = pr->data[2 * j], d = pr->data[2 * j + 1];
        if (u && pr->data[2 * (u - 1)] == key && pr->data[2 * (u - 1) + 1] == d)
            continue;
        /* the key ends there: a crossing unless inside */
        if (KLEN(&w->base.ix, key) == d && (seen[key >> 6] >> (key & 63) & 1))
            continue;
        pr->data[2 * u] = key;
        pr->data[2 * u + 1] = d;
        u++;
    }
    pr->len = 2 * u;
    PyMem_Free(seen);
    return 0;
}

static PyObject *walk_frames(PyObject *self, PyObject *args) {
    PyObject *blob, *offs, *lcp, *firsts, *ends, *rows, *fill, *sets, *configs;
    PyObject *follow = Py_None, *blocked = Py_None, *summaries = Py_None, *leafy = Py_None;
    long long start;
    if (!PyArg_ParseTuple(args, "OOOOOLO!OOO!|OOOO:walk_frames", &blob, &offs, &lcp, &firsts, &ends,
                          &start, &PyList_Type, &rows, &fill, &sets, &PyList_Type, &configs, &follow,
                          &blocked, &summaries, &leafy))
        return NULL;
    FrameWalk w;
    memset(&w, 0, sizeof(w));
    if (follow != Py_None) { /* crossings mode */
        if (!PyBytes_Check(follow) || PyBytes_GET_SIZE(follow) != 32 || !PyList_Check(blocked)) {
            PyErr_SetString(PyExc_TypeError, "follow must be 32 bytes and blocked a list");
            return NULL;
        }
        w.follow = (const uint8_t *)PyBytes_AS_STRING(follow);
        w.blocked = blocked;
        if (summaries != Py_None) { /* token summaries */
            if (!PyDict_Check(summaries) || !PyByteArray_Check(leafy)) {
                PyErr_SetString(PyExc_TypeError, "summaries must be a dict and leafy a bytearray");
                return NULL;
            }
            w.summaries = summaries;
            w.leafy = leafy;
        }
    }
    if (index_open(&w.base.ix, blob, offs, lcp, firsts, ends) < 0)
        return NULL;
    w.base.rows = rows;
    w.base.fill = fill;
    w.base.escaping = 1;
    w.sets = sets;
    w.configs = configs;
    PyObject *out = NULL;
    int rc = 0;
    if (w.base.ix.n) {
        rc = vec_push(&w.comps, (int64_t)PACK(start, ESCAPE_SID));
        if (!rc)
            rc = visit_frames(&w, 0, 1, 0, w.base.ix.n, 0, NULL);
    }
    if (!rc && w.summarized)
        rc = normalized(&w);
    if (!rc) {
        PyObject *inside = vec_bytes(&w.base.inside);
        PyObject *events = vec_bytes(w.follow ? &w.pairs : &w.base.events);
        if (inside && events)
            out = PyTuple_Pack(2, inside, events);
        Py_XDECREF(inside);
        Py_XDECREF(events);
    }
    frame_walk_free(&w);
    index_close(&w.base.ix);
    return out;
}

/* For each escape (i, d, code): the keys below node keys[i][:d] that may go on past the rule's
 * end, as (key, d) pairs: the key ending at the node (unless the code is negative: that key is
 * inside), and every key under a child whose byte is in allowed[|code|] (32 bytes, a bit per
 * byte value). */
static PyObject *crossings(PyObject *self, PyObject *args) {
    PyObject *blob, *offs, *lcp, *firsts, *ends, *events_obj, *allowed_obj;
    if (!PyArg_ParseTuple(args, "OOOOOOO:crossings", &blob, &offs, &lcp, &firsts, &ends, &events_obj,
                          &allowed_obj))
        return NULL;
    Index ix;
    if (index_open(&ix, blob, offs, lcp, firsts, ends) < 0)
        return NULL;
    Py_buffer ev, al;
    if (PyObject_GetBuffer(events_obj, &ev, PyBUF_C_CONTIGUOUS) < 0) {
        index_close(&ix);
        return NULL;
    }
    if (PyObject_GetBuffer(allowed_obj, &al, PyBUF_C_CONTIGUOUS) < 0) {
        PyBuffer_Release(&ev);
        index_close(&ix);
        return NULL;
    }
    const int64_t *e = ev.buf;
    const uint8_t *allowed = al.buf;
    Py_ssize_t m = ev.len / (3 * 8), codes = al.len / 32;
    Vec out = {0};
    int bad = 0;
    for (Py_ssize_t k = 0; k < m && !bad; k++) {
        int64_t i = e[3 * k], d = e[3 * k + 1], c = e[3 * k + 2];
        int alive = c < 0; /* the walk went on below the node: a key ending there is inside */
        if (alive)
            c = -c;
        if (i < 0 || i >= ix.n || d <= ((const int64_t *)ix.lcp.buf)[i] || d > KLEN(&ix, i) || c < 0
            || c >= codes) {
            PyErr_SetString(PyExc_ValueError, "escape outside the index");
            bad = 1;
            break;
        }
        int64_t lo = i, hi = subtree_end(&ix, i, d);
        const uint8_t *ok = allowed + 32 * c;
        if (KLEN(&ix, i) == d) {
            if (!alive && (vec_push(&out, i) < 0 || vec_push(&out, d) < 0)) {
                bad = 1;
                break;
            }
            lo++;
        }
        while (lo < hi && !bad) {
            int64_t z = subtree_end(&ix, lo, d + 1);
            int b = BYTE(&ix, lo, d);
            if (ok[b >> 3] & (1 << (b & 7))) {
                for (int64_t j = lo; j < z; j++) {
                    if (vec_push(&out, j) < 0 || vec_push(&out, d) < 0) {
                        bad = 1;
                        break;
                    }
                }
            }
            lo = z;
        }
    }
    PyBuffer_Release(&ev);
    PyBuffer_Release(&al);
    index_close(&ix);
    PyObject *res = bad ? NULL : vec_bytes(&out);
    PyMem_Free(out.data);
    return res;
}

/* leaf_rows(trans, accept, nums, code) -> [bytearray]: the rows (see the top of this file) of a
 * leaf rule's states that read a byte, in state order. A leaf rule's set after a byte is the
 * target state alone: row[b] is nums[target] (DEAD where no step; nums holds DEAD for a target
 * that reads nothing) and row[256 + b] is code where the target accepts, else 0. Made in Python
 * (numpy over the rule's dicts), this was ~1 ms a rule, a fifth of a SQL grammar's first masks. */
static PyObject *leaf_rows(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *trans_o, *accept_o, *nums_o, *trans = NULL, *accept = NULL, *nums = NULL, *out = NULL;
    long long code;
    int32_t *num = NULL;
    char *acc = NULL;
    if (!PyArg_ParseTuple(args, "OOOL", &trans_o, &accept_o, &nums_o, &code))
        return NULL;
    if (code < INT32_MIN || code > INT32_MAX) {
        PyErr_SetString(PyExc_OverflowError, "code out of int32 range");
        return NULL;
    }
    if (!(trans = PySequence_Fast(trans_o, "trans must be a sequence")) ||
        !(accept = PySequence_Fast(accept_o, "accept must be a sequence")) ||
        !(nums = PySequence_Fast(nums_o, "nums must be a sequence")))
        goto out;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(trans);
    if (PySequence_Fast_GET_SIZE(accept) != n || PySequence_Fast_GET_SIZE(nums) != n) {
        PyErr_SetString(PyExc_ValueError, "trans, accept and nums differ in length");
        goto out;
    }
    num = PyMem_Malloc((n ? n : 1) * sizeof(int32_t));
    acc = PyMem_Malloc(n ? n : 1);
    if (!num || !acc) {
        PyErr_NoMemory();
        goto out;
    }
    for (Py_ssize_t q = 0; q < n; q++) {
        long long k = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(nums, q));
        int a = PyObject_IsTrue(PySequence_Fast_GET_ITEM(accept, q));
        if ((k == -1 && PyErr_Occurred()) || a < 0)
            goto out;
        if (k < DEAD || k > INT32_MAX) {
            PyErr_SetString(PyExc_ValueError, "a set number out of range");
            goto out;
        }
        num[q] = (int32_t)k;
        acc[q] = (char)a;
    }
    if (!(out = PyList_New(0)))
        goto out;
    for (Py_ssize_t q = 0; q < n; q++) {
        PyObject *row = PySequence_Fast_GET_ITEM(trans, q);
        if (!PyDict_Check(row)) {
            PyErr_SetString(PyExc_TypeError, "a trans row must be a dict");
            goto fail;
        }
        if (!PyDict_GET_SIZE(row))
            continue;
        PyObject *ba = PyByteArray_FromStringAndSize(NULL, 512 * sizeof(int32_t));
        if (!ba)
            goto fail;
        int bad = PyList_Append(out, ba);
        Py_DECREF(ba);
        if (bad)
            goto fail;
        int32_t *r = (int32_t *)PyByteArray_AS_STRING(ba);
        for (int b = 0; b < 256; b++) {
            r[b] = DEAD;
            r[256 + b] = 0;
        }
        Py_ssize_t pos = 0;
        PyObject *key, *value;
        while (PyDict_Next(row, &pos, &key, &value)) {
            long b = PyLong_AsLong(key), t = PyLong_AsLong(value);
            if (PyErr_Occurred())
                goto fail;
            if (b < 0 || b > 255 || t < 0 || t >= n) {
                PyErr_SetString(PyExc_ValueError, "a step out of range");
                goto fail;
            }
            r[b] = num[t];
            r[256 + b] = acc[t] ? (int32_t)code : 0;
        }
    }
    goto out;
fail:
    Py_CLEAR(out);
out:
    PyMem_Free(num);
    PyMem_Free(acc);
    Py_XDECREF(trans);
    Py_XDECREF(accept);
    Py_XDECREF(nums);
    return out;
}

static PyMethodDef methods[] = {
    {"walk", walk, METH_VARARGS,
     "walk(blob, offs, lcp, firsts, ends, start, rows, fill, escaping) -> (inside, events)"},
    {"walk_frames", walk_frames, METH_VARARGS,
     "walk_frames(blob, offs, lcp, firsts, ends, start, rows, fill, sets, configs[, follow, blocked])"
     " -> (inside, events), or (inside, crossing (key, depth) pairs) given follow"},
    {"leaf_rows", leaf_rows, METH_VARARGS,
     "leaf_rows(trans, accept, nums, code) -> rows (bytearrays) of a leaf rule's states that read a byte"},
    {"crossings", crossings, METH_VARARGS,
     "crossings(blob, offs, lcp, firsts, ends, events, allowed) -> (key, depth) pairs"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "compiled_walk", NULL, -1, methods};

PyMODINIT_FUNC PyInit_compiled_walk(void) {
    PyObject *m = PyModule_Create(&module);
    if (m && PyModule_AddIntConstant(m, "VERSION", KERNEL_VERSION) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
