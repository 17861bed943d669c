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

#define KERNEL_VERSION 2
#define DEAD (-1)    /* a row entry: no set to walk on with */
#define UNKNOWN (-2) /* a row entry: not stepped yet */

typedef struct {
    int64_t *data;
    Py_ssize_t len, cap;
} Vec;

static int vec_push(Vec *v, int64_t x) {
    if (v->len == v->cap) {
        Py_ssize_t cap = v->cap ? v->cap * 2 : 1024;
        int64_t *data = PyMem_Realloc(v->data, cap * sizeof(int64_t));
        if (!data) {
            PyErr_NoMemory();
            return -1;
        }
        v->data = data;
        v->cap = cap;
    }
    v->data[v->len++] = x;
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

static PyMethodDef methods[] = {
    {"walk", walk, METH_VARARGS,
     "walk(blob, offs, lcp, firsts, ends, start, rows, fill, escaping) -> (inside, events)"},
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
