/* The Lark lexer's token split (structgen/frontends/lark/lexer.py), in C: the product of a
 * token's automaton with the union of all terminals, then one trimmed, minimized copy per class
 * of bytes the token forbids next. In Python (structgen/core/dfa.py: product_rows, trim_rows,
 * minimize_rows) this was most of compiling a SQL grammar: ~95 ms of 176, most of it on the
 * identifier terminals, whose products with a database's names have ~1,600 states.
 *
 * Automata come as grouped rows (dfa.Rows: one (256-bit byte mask, target) pair per target),
 * packed by dfa.py: int32 row offsets, the masks as 32 little-endian bytes each, int32 targets.
 * What comes back is exactly what the Python functions make, state numbers included:
 * the product is explored breadth first in the same order, trimmed keeping state 0, and
 * minimized to the same partition (the coarsest one where equal states accept alike and
 * reach equal states on equal byte sets, which is unique), numbered by first member.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define KERNEL_VERSION 9

typedef struct {
    uint64_t w[4];
} Mask;

static int mask_empty(const Mask *m) { return !(m->w[0] | m->w[1] | m->w[2] | m->w[3]); }

static uint64_t mix(uint64_t h) {
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ULL;
    h ^= h >> 33;
    return h;
}

static uint64_t mask_hash(const Mask *m) {
    return mix(m->w[0] ^ mix(m->w[1] ^ mix(m->w[2] ^ mix(m->w[3] + 0x9e3779b97f4a7c15ULL))));
}

/* A growable array of any element size. */
typedef struct {
    char *data;
    Py_ssize_t len, cap, size;
} Buf;

/* Room for `need` elements (doubling from 256). */
static int buf_reserve(Buf *b, Py_ssize_t need) {
    if (need <= b->cap)
        return 0;
    Py_ssize_t cap = b->cap ? b->cap : 256;
    while (cap < need)
        cap *= 2;
    char *data = PyMem_Realloc(b->data, cap * b->size);
    if (!data) {
        PyErr_NoMemory();
        return -1;
    }
    b->data = data;
    b->cap = cap;
    return 0;
}

static void *buf_push(Buf *b) {
    if (b->len == b->cap && buf_reserve(b, b->len + 1) < 0)
        return NULL;
    return b->data + b->size * b->len++;
}

#define AT(b, T, i) (((T *)(b).data)[i])

/* Open addressing from a 64-bit key to an int32 value (keys never all ones). */
typedef struct {
    uint64_t *keys;
    int32_t *vals;
    Py_ssize_t cap, len;
} Map;

static int map_init(Map *m, Py_ssize_t cap) {
    m->cap = cap;
    m->len = 0;
    m->keys = PyMem_Malloc(cap * sizeof(uint64_t));
    m->vals = PyMem_Malloc(cap * sizeof(int32_t));
    if (!m->keys || !m->vals) {
        PyErr_NoMemory();
        return -1;
    }
    memset(m->keys, 0xff, cap * sizeof(uint64_t));
    return 0;
}

static void map_free(Map *m) {
    PyMem_Free(m->keys);
    PyMem_Free(m->vals);
}

/* The slot of key: where it is, or the empty slot where it goes. */
static Py_ssize_t map_slot(const Map *m, uint64_t key) {
    Py_ssize_t i = (Py_ssize_t)(mix(key) & (uint64_t)(m->cap - 1));
    while (m->keys[i] != UINT64_MAX && m->keys[i] != key)
        i = (i + 1) & (m->cap - 1);
    return i;
}

static int map_grow(Map *m) {
    Map bigger;
    if (map_init(&bigger, m->cap * 2) < 0)
        return -1;
    for (Py_ssize_t i = 0; i < m->cap; i++)
        if (m->keys[i] != UINT64_MAX) {
            Py_ssize_t j = map_slot(&bigger, m->keys[i]);
            bigger.keys[j] = m->keys[i];
            bigger.vals[j] = m->vals[i];
        }
    bigger.len = m->len;
    map_free(m);
    *m = bigger;
    return 0;
}

/* Masks interned to ids: minimizing compares ids, not 256 bits. */
typedef struct {
    Buf masks; /* Mask */
    int32_t *slots;
    Py_ssize_t cap;
} Masks;

/* An open-addressing table of cap ids, all empty (-1); NULL with MemoryError set. */
static int32_t *empty_slots(Py_ssize_t cap) {
    int32_t *slots = PyMem_Malloc(cap * sizeof(int32_t));
    if (!slots)
        PyErr_NoMemory();
    else
        memset(slots, 0xff, cap * sizeof(int32_t));
    return slots;
}

static int masks_init(Masks *s) {
    memset(s, 0, sizeof(*s));
    s->masks.size = sizeof(Mask);
    s->cap = 1024;
    s->slots = empty_slots(s->cap);
    return s->slots ? 0 : -1;
}

static void masks_free(Masks *s) {
    PyMem_Free(s->masks.data);
    PyMem_Free(s->slots);
}

static Py_ssize_t masks_slot(const Masks *s, int32_t *slots, Py_ssize_t cap, const Mask *m) {
    Py_ssize_t i = (Py_ssize_t)(mask_hash(m) & (uint64_t)(cap - 1));
    while (slots[i] >= 0 && memcmp(&AT(s->masks, Mask, slots[i]), m, sizeof(Mask)))
        i = (i + 1) & (cap - 1);
    return i;
}

static int32_t masks_id(Masks *s, const Mask *m) {
    Py_ssize_t i = masks_slot(s, s->slots, s->cap, m);
    if (s->slots[i] >= 0)
        return s->slots[i];
    if (2 * (s->masks.len + 1) > s->cap) {
        Py_ssize_t cap = s->cap * 2;
        int32_t *slots = empty_slots(cap);
        if (!slots)
            return -1;
        for (Py_ssize_t k = 0; k < s->masks.len; k++)
            slots[masks_slot(s, slots, cap, &AT(s->masks, Mask, k))] = (int32_t)k;
        PyMem_Free(s->slots);
        s->slots = slots;
        s->cap = cap;
        i = masks_slot(s, s->slots, s->cap, m);
    }
    Mask *slot = buf_push(&s->masks);
    if (!slot)
        return -1;
    *slot = *m;
    s->slots[i] = (int32_t)(s->masks.len - 1);
    return s->slots[i];
}

/* Grouped rows as dfa.py packs them. */
typedef struct {
    Py_buffer off, mask, tgt;
    Py_ssize_t n;
} Rows;

/* The last rows checked with remember set, when all three were bytes (immutable, and held here,
 * so no other object takes their addresses): the union of a grammar's terminals is the second
 * automaton of every token's product, and checking its ~10^4 edges again cost most of a
 * keyword's product (~35 of ~41 µs on a SQL database's union). */
static PyObject *checked_rows[3];

static int rows_open(Rows *r, PyObject *off, PyObject *mask, PyObject *tgt, int remember) {
    memset(r, 0, sizeof(*r));
    if (PyObject_GetBuffer(off, &r->off, PyBUF_SIMPLE) < 0)
        return -1;
    if (PyObject_GetBuffer(mask, &r->mask, PyBUF_SIMPLE) < 0)
        return -1;
    if (PyObject_GetBuffer(tgt, &r->tgt, PyBUF_SIMPLE) < 0)
        return -1;
    r->n = r->off.len / (Py_ssize_t)sizeof(int32_t) - 1;
    int immutable = PyBytes_CheckExact(off) && PyBytes_CheckExact(mask) && PyBytes_CheckExact(tgt);
    if (remember && immutable && checked_rows[0] == off && checked_rows[1] == mask && checked_rows[2] == tgt)
        return 0;
    Py_ssize_t edges = r->tgt.len / (Py_ssize_t)sizeof(int32_t);
    const int32_t *o = r->off.buf, *t = r->tgt.buf;
    int ok = r->n >= 1 && r->mask.len == edges * (Py_ssize_t)sizeof(Mask) && o[0] == 0 && o[r->n] == edges;
    for (Py_ssize_t q = 0; ok && q < r->n; q++)
        ok = o[q] <= o[q + 1];
    for (Py_ssize_t e = 0; ok && e < edges; e++)
        ok = t[e] >= 0 && t[e] < r->n;
    /* a row's masks are disjoint (a DFA's): so a product row has at most 256 edges */
    const Mask *m = r->mask.buf;
    for (Py_ssize_t q = 0; ok && q < r->n; q++) {
        Mask seen = {{0, 0, 0, 0}};
        for (int32_t e = o[q]; ok && e < o[q + 1]; e++)
            for (int w = 0; w < 4; w++) {
                ok = ok && !(seen.w[w] & m[e].w[w]);
                seen.w[w] |= m[e].w[w];
            }
    }
    if (!ok) {
        PyErr_SetString(PyExc_ValueError, "malformed packed rows");
        return -1;
    }
    if (remember && immutable) {
        PyObject *now[3] = {off, mask, tgt};
        for (int i = 0; i < 3; i++) {
            Py_INCREF(now[i]);
            Py_XSETREF(checked_rows[i], now[i]);
        }
    }
    return 0;
}

static void rows_close(Rows *r) {
    if (r->off.obj)
        PyBuffer_Release(&r->off);
    if (r->mask.obj)
        PyBuffer_Release(&r->mask);
    if (r->tgt.obj)
        PyBuffer_Release(&r->tgt);
}

/* The product: states as (a, b) pairs, edges as (mask id, target), CSR by state. */
typedef struct {
    Buf pa, pb;      /* int32: the pair of each state */
    Buf off;         /* int32: first edge of each state, then the total */
    Buf emask, etgt; /* int32: each edge's mask id and target */
} Product;

static void product_free(Product *p) {
    PyMem_Free(p->pa.data);
    PyMem_Free(p->pb.data);
    PyMem_Free(p->off.data);
    PyMem_Free(p->emask.data);
    PyMem_Free(p->etgt.data);
}

/* Explore breadth first, numbering targets in row order (as dfa._explored). Returns 1 when a
 * new state would pass `limit`, 0 when done, -1 on error. */
static int explore(const Rows *a, const Rows *b, Py_ssize_t limit, Product *p, Masks *ms) {
    Map index;
    int status = 0;
    if (map_init(&index, 1024) < 0)
        return -1;
    const int32_t *aoff = a->off.buf, *atgt = a->tgt.buf, *boff = b->off.buf, *btgt = b->tgt.buf;
    const Mask *amask = a->mask.buf, *bmask = b->mask.buf;
    int32_t *slot;
    if (!(slot = buf_push(&p->pa)))
        goto fail;
    *slot = 0;
    if (!(slot = buf_push(&p->pb)))
        goto fail;
    *slot = 0;
    index.keys[map_slot(&index, 0)] = 0;
    index.vals[map_slot(&index, 0)] = 0;
    index.len = 1;
    for (Py_ssize_t i = 0; i < p->pa.len; i++) {
        if (!(slot = buf_push(&p->off)))
            goto fail;
        *slot = (int32_t)p->emask.len;
        int32_t s = AT(p->pa, int32_t, i), t = AT(p->pb, int32_t, i);
        for (int32_t ea = aoff[s]; ea < aoff[s + 1]; ea++)
            for (int32_t eb = boff[t]; eb < boff[t + 1]; eb++) {
                Mask both;
                for (int w = 0; w < 4; w++)
                    both.w[w] = amask[ea].w[w] & bmask[eb].w[w];
                if (mask_empty(&both))
                    continue;
                uint64_t key = ((uint64_t)(uint32_t)atgt[ea] << 32) | (uint32_t)btgt[eb];
                Py_ssize_t k = map_slot(&index, key);
                int32_t target;
                if (index.keys[k] == key) {
                    target = index.vals[k];
                } else {
                    if (p->pa.len >= limit) {
                        status = 1;
                        goto done;
                    }
                    target = (int32_t)p->pa.len;
                    index.keys[k] = key;
                    index.vals[k] = target;
                    if (2 * ++index.len > index.cap && map_grow(&index) < 0)
                        goto fail;
                    if (!(slot = buf_push(&p->pa)))
                        goto fail;
                    *slot = atgt[ea];
                    if (!(slot = buf_push(&p->pb)))
                        goto fail;
                    *slot = btgt[eb];
                }
                int32_t id = masks_id(ms, &both);
                if (id < 0)
                    goto fail;
                if (!(slot = buf_push(&p->emask)))
                    goto fail;
                *slot = id;
                if (!(slot = buf_push(&p->etgt)))
                    goto fail;
                *slot = target;
            }
    }
    if (!(slot = buf_push(&p->off)))
        goto fail;
    *slot = (int32_t)p->emask.len;
done:
    map_free(&index);
    return status;
fail:
    map_free(&index);
    return -1;
}

/* Predecessor lists (CSR) of the edges whose both ends `keep` marks. */
static int preds_of(const Product *p, const char *keep, Py_ssize_t n, int32_t **off_out, int32_t **src_out) {
    const int32_t *off = (const int32_t *)p->off.data, *tgt = (const int32_t *)p->etgt.data;
    int32_t *count = PyMem_Calloc(n + 1, sizeof(int32_t));
    int32_t *src = PyMem_Malloc((p->etgt.len + 1) * sizeof(int32_t));
    if (!count || !src) {
        PyMem_Free(count);
        PyMem_Free(src);
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t q = 0; q < n; q++)
        if (keep[q])
            for (int32_t e = off[q]; e < off[q + 1]; e++)
                if (keep[tgt[e]])
                    count[tgt[e] + 1]++;
    for (Py_ssize_t q = 0; q < n; q++)
        count[q + 1] += count[q];
    int32_t *fill = PyMem_Malloc((n + 1) * sizeof(int32_t));
    if (!fill) {
        PyMem_Free(count);
        PyMem_Free(src);
        PyErr_NoMemory();
        return -1;
    }
    memcpy(fill, count, (n + 1) * sizeof(int32_t));
    for (Py_ssize_t q = 0; q < n; q++)
        if (keep[q])
            for (int32_t e = off[q]; e < off[q + 1]; e++)
                if (keep[tgt[e]])
                    src[fill[tgt[e]]++] = (int32_t)q;
    PyMem_Free(fill);
    *off_out = count;
    *src_out = src;
    return 0;
}

/* A state's signature: its (mask id, block of target) pairs, sorted (ids are distinct in a row). */
typedef struct {
    int32_t id, block;
} Pair;

static int pair_cmp(const void *x, const void *y) {
    const Pair *a = x, *b = y;
    return (a->id > b->id) - (a->id < b->id);
}

typedef struct {
    Py_ssize_t start; /* into the round's pair pool */
    const Pair *pairs; /* the same, once the pool is complete (it may move while it grows) */
    int32_t len, state;
    uint64_t hash;
    int32_t block;
} Sig;

static int sig_cmp(const void *x, const void *y) {
    const Sig *a = x, *b = y;
    if (a->block != b->block)
        return (a->block > b->block) - (a->block < b->block);
    if (a->hash != b->hash)
        return (a->hash > b->hash) - (a->hash < b->hash);
    if (a->len != b->len)
        return (a->len > b->len) - (a->len < b->len);
    int c = memcmp(a->pairs, b->pairs, a->len * sizeof(Pair));
    if (c)
        return c;
    return (a->state > b->state) - (a->state < b->state); /* stable: the first member first */
}

/* Moore refinement on the kept states, re-signing only states whose successor moved (as
 * dfa.minimize_rows). block[q] for kept q comes back; *visits counts re-signings. */
static int refine(const Product *p, const char *keep, const char *acc, Py_ssize_t n, int32_t *block,
                  Py_ssize_t *visits) {
    const int32_t *off = (const int32_t *)p->off.data, *tgt = (const int32_t *)p->etgt.data,
                  *mid = (const int32_t *)p->emask.data;
    int32_t *poff = NULL, *psrc = NULL, *mark = NULL;
    Buf size = {NULL, 0, 0, sizeof(int32_t)};      /* per block */
    Buf kept_start = {NULL, 0, 0, sizeof(Py_ssize_t)}; /* per block: its signature in `store`, -1 none */
    Buf kept_len = {NULL, 0, 0, sizeof(int32_t)};
    Buf store = {NULL, 0, 0, sizeof(Pair)};         /* the blocks' signatures */
    Buf pool = {NULL, 0, 0, sizeof(Pair)};          /* this round's signatures */
    Buf sigs = {NULL, 0, 0, sizeof(Sig)};
    Buf dirty = {NULL, 0, 0, sizeof(int32_t)}, moved = {NULL, 0, 0, sizeof(int32_t)};
    int rc = -1;
    if (preds_of(p, keep, n, &poff, &psrc) < 0)
        goto out;
    mark = PyMem_Calloc(n ? n : 1, sizeof(int32_t));
    if (!mark) {
        PyErr_NoMemory();
        goto out;
    }
    for (int b = 0; b < 2; b++) {
        int32_t *s = buf_push(&size);
        Py_ssize_t *ks = buf_push(&kept_start);
        int32_t *kl = buf_push(&kept_len);
        if (!s || !ks || !kl)
            goto out;
        *s = 0;
        *ks = -1;
        *kl = 0;
    }
    for (Py_ssize_t q = 0; q < n; q++)
        if (keep[q]) {
            block[q] = acc[q] ? 1 : 0;
            AT(size, int32_t, block[q])++;
            int32_t *d = buf_push(&dirty);
            if (!d)
                goto out;
            *d = (int32_t)q;
        }
    int32_t round = 0;
    while (dirty.len) {
        round++;
        *visits += dirty.len;
        pool.len = sigs.len = moved.len = 0;
        for (Py_ssize_t i = 0; i < dirty.len; i++) {
            int32_t q = AT(dirty, int32_t, i);
            Sig *s = buf_push(&sigs);
            if (!s)
                goto out;
            s->start = pool.len;
            s->state = q;
            s->block = block[q];
            for (int32_t e = off[q]; e < off[q + 1]; e++)
                if (keep[tgt[e]]) {
                    Pair *pr = buf_push(&pool);
                    if (!pr)
                        goto out;
                    pr->id = mid[e];
                    pr->block = block[tgt[e]];
                }
            s->len = (int32_t)(pool.len - s->start);
            qsort(&AT(pool, Pair, s->start), s->len, sizeof(Pair), pair_cmp);
            uint64_t h = 0x9e3779b97f4a7c15ULL + (uint64_t)s->len;
            for (int32_t k = 0; k < s->len; k++) {
                Pair pr = AT(pool, Pair, s->start + k);
                h = mix(h ^ (((uint64_t)(uint32_t)pr.id << 32) | (uint32_t)pr.block));
            }
            s->hash = h;
        }
        for (Py_ssize_t x = 0; x < sigs.len; x++)
            AT(sigs, Sig, x).pairs = &AT(pool, Pair, AT(sigs, Sig, x).start);
        const Pair *sig_pool = (const Pair *)pool.data;
        qsort(sigs.data, sigs.len, sizeof(Sig), sig_cmp);
        Py_ssize_t i = 0;
        while (i < sigs.len) { /* one block's re-signed members */
            int32_t b = AT(sigs, Sig, i).block;
            Py_ssize_t j = i;
            while (j < sigs.len && AT(sigs, Sig, j).block == b)
                j++;
            if (j - i == AT(size, int32_t, b)) { /* all re-signed: the first part keeps b */
                Sig *s = &AT(sigs, Sig, i);
                AT(kept_start, Py_ssize_t, b) = store.len;
                AT(kept_len, int32_t, b) = s->len;
                for (int32_t x = 0; x < s->len; x++) {
                    Pair *pr = buf_push(&store);
                    if (!pr)
                        goto out;
                    *pr = AT(pool, Pair, s->start + x);
                }
            }
            Py_ssize_t k = i;
            while (k < j) { /* one part: equal signatures */
                Sig *s = &AT(sigs, Sig, k);
                Py_ssize_t m = k + 1;
                while (m < j && AT(sigs, Sig, m).hash == s->hash && AT(sigs, Sig, m).len == s->len &&
                       !memcmp(sig_pool + AT(sigs, Sig, m).start, sig_pool + s->start, s->len * sizeof(Pair)))
                    m++;
                Py_ssize_t ks = AT(kept_start, Py_ssize_t, b);
                int same = ks >= 0 && AT(kept_len, int32_t, b) == s->len &&
                           !memcmp(&AT(store, Pair, ks), sig_pool + s->start, s->len * sizeof(Pair));
                if (!same) { /* a new block, with this signature */
                    int32_t nb = (int32_t)size.len;
                    int32_t *sz = buf_push(&size);
                    Py_ssize_t *kst = buf_push(&kept_start);
                    int32_t *kl = buf_push(&kept_len);
                    if (!sz || !kst || !kl)
                        goto out;
                    *sz = (int32_t)(m - k);
                    AT(size, int32_t, b) -= (int32_t)(m - k);
                    *kst = store.len;
                    *kl = s->len;
                    for (int32_t x = 0; x < s->len; x++) {
                        Pair *pr = buf_push(&store);
                        if (!pr)
                            goto out;
                        *pr = AT(pool, Pair, s->start + x);
                    }
                    for (Py_ssize_t x = k; x < m; x++) {
                        int32_t q = AT(sigs, Sig, x).state;
                        block[q] = nb;
                        int32_t *mv = buf_push(&moved);
                        if (!mv)
                            goto out;
                        *mv = q;
                    }
                }
                k = m;
            }
            i = j;
        }
        dirty.len = 0;
        for (Py_ssize_t x = 0; x < moved.len; x++) {
            int32_t q = AT(moved, int32_t, x);
            for (int32_t e = poff[q]; e < poff[q + 1]; e++) {
                int32_t src = psrc[e];
                if (mark[src] != round) {
                    mark[src] = round;
                    int32_t *d = buf_push(&dirty);
                    if (!d)
                        goto out;
                    *d = src;
                }
            }
        }
    }
    rc = 0;
out:
    PyMem_Free(poff);
    PyMem_Free(psrc);
    PyMem_Free(mark);
    PyMem_Free(size.data);
    PyMem_Free(kept_start.data);
    PyMem_Free(kept_len.data);
    PyMem_Free(store.data);
    PyMem_Free(pool.data);
    PyMem_Free(sigs.data);
    PyMem_Free(dirty.data);
    PyMem_Free(moved.data);
    return rc;
}

/* Python ints of mask ids, each made once. */
typedef struct {
    PyObject **items;
    Py_ssize_t cap;
} Ints;

/* The slot of id in the cache, grown to hold it (NULL: no memory). */
static PyObject **ints_slot(Ints *cache, int32_t id) {
    if (id >= cache->cap) {
        Py_ssize_t cap = cache->cap ? cache->cap : 256;
        while (cap <= id)
            cap *= 2;
        PyObject **items = PyMem_Realloc(cache->items, cap * sizeof(PyObject *));
        if (!items) {
            PyErr_NoMemory();
            return NULL;
        }
        memset(items + cache->cap, 0, (cap - cache->cap) * sizeof(PyObject *));
        cache->items = items;
        cache->cap = cap;
    }
    return &cache->items[id];
}

/* A 256-bit mask as a Python int (bit b: byte b). */
static PyObject *mask_long(const Mask *m) {
    unsigned char le[32];
    for (int i = 0; i < 32; i++)
        le[i] = (unsigned char)(m->w[i >> 3] >> (8 * (i & 7)));
#if PY_VERSION_HEX >= 0x030D0000
    return PyLong_FromUnsignedNativeBytes(le, 32, Py_ASNATIVEBYTES_LITTLE_ENDIAN | Py_ASNATIVEBYTES_UNSIGNED_BUFFER);
#else
    return _PyLong_FromByteArray(le, 32, 1, 0);
#endif
}

static PyObject *mask_int(const Masks *ms, Ints *cache, int32_t id) {
    if (!ints_slot(cache, id))
        return NULL;
    if (!cache->items[id])
        cache->items[id] = mask_long(&AT(ms->masks, Mask, id));
    Py_XINCREF(cache->items[id]);
    return cache->items[id];
}

/* The lowest byte of a non-empty mask (a row's masks are disjoint: their order). */
static int lowest_byte(const Mask *m) {
    for (int w = 0; w < 4; w++)
        if (m->w[w]) {
            uint64_t x = m->w[w];
            int b = 64 * w;
            while (!(x & 1)) {
                x >>= 1;
                b++;
            }
            return b;
        }
    return 256;
}

/* The byte class of a mask id: byte_class(mask) called once per id; a new reference. */
static PyObject *class_of(const Masks *ms, Ints *ints, Ints *classes, PyObject *byte_class, int32_t id) {
    PyObject **slot = ints_slot(classes, id);
    if (!slot)
        return NULL;
    if (!*slot) {
        PyObject *mask = mask_int(ms, ints, id);
        if (!mask)
            return NULL;
        *slot = PyObject_CallOneArg(byte_class, mask);
        Py_DECREF(mask);
    }
    Py_XINCREF(*slot);
    return *slot;
}

/* Append n bytes to a Buf of chars. */
static int text_put(Buf *t, const char *s, Py_ssize_t n) {
    if (buf_reserve(t, t->len + n) < 0)
        return -1;
    memcpy(t->data + t->len, s, n);
    t->len += n;
    return 0;
}

static int text_int(Buf *t, long long v) {
    char num[24];
    int n = snprintf(num, sizeof(num), "%lld", v);
    return text_put(t, num, n);
}

/* repr(label.ranges) of a mask id's byte class, as bytes, made once per id; borrowed. */
static PyObject *ranges_text(Ints *texts, PyObject *label, int32_t id) {
    PyObject **slot = ints_slot(texts, id);
    if (!slot)
        return NULL;
    if (!*slot) {
        PyObject *ranges = PyObject_GetAttrString(label, "ranges");
        PyObject *r = ranges ? PyObject_Repr(ranges) : NULL;
        Py_XDECREF(ranges);
        *slot = r ? PyUnicode_AsASCIIString(r) : NULL;
        Py_XDECREF(r);
    }
    return *slot;
}

/* One class's automaton: trimmed to `acc` (state 0 kept), minimized unless `minimal` is 0, as
 * (rows, accept), and with byte_class the text structgen.core.ir writes of the automaton for its
 * digest. */
static PyObject *one_class(const Product *p, Masks *ms, Ints *ints, Ints *classes, Ints *texts,
                           PyObject *byte_class, const int32_t *cls, int32_t c, int minimal, Py_ssize_t *visits) {
    Py_ssize_t n = p->pa.len;
    const int32_t *off = (const int32_t *)p->off.data, *tgt = (const int32_t *)p->etgt.data,
                  *mid = (const int32_t *)p->emask.data;
    char *acc = PyMem_Calloc(n, 1), *live = PyMem_Calloc(n, 1), *keep = PyMem_Calloc(n, 1);
    int32_t *block = PyMem_Malloc(n * sizeof(int32_t)), *order = NULL, *first = NULL, *todo = NULL;
    int32_t *poff = NULL, *psrc = NULL, *merged = NULL;
    Mask *mmask = NULL;
    PyObject *rows = NULL, *accept = NULL, *result = NULL, *written = NULL;
    Buf text = {NULL, 0, 0, 1}; /* ir._fsm_text: rows by ";", edges by ",", "ranges>target" */
    if (!acc || !live || !keep || !block) {
        PyErr_NoMemory();
        goto out;
    }
    memset(keep, 1, n);
    if (preds_of(p, keep, n, &poff, &psrc) < 0)
        goto out;
    todo = PyMem_Malloc(n * sizeof(int32_t));
    if (!todo) {
        PyErr_NoMemory();
        goto out;
    }
    Py_ssize_t top = 0;
    for (Py_ssize_t q = 0; q < n; q++)
        if (cls[q] == c) {
            acc[q] = live[q] = 1;
            todo[top++] = (int32_t)q;
        }
    while (top) {
        int32_t q = todo[--top];
        for (int32_t e = poff[q]; e < poff[q + 1]; e++)
            if (!live[psrc[e]]) {
                live[psrc[e]] = 1;
                todo[top++] = psrc[e];
            }
    }
    memcpy(keep, live, n);
    keep[0] = 1;
    if (!minimal) /* each kept state its own block: trimmed only, numbered as dfa.trim_rows */
        for (Py_ssize_t q = 0; q < n; q++)
            block[q] = (int32_t)q;
    else if (refine(p, keep, acc, n, block, visits) < 0)
        goto out;
    /* number the blocks by first kept member, state 0's first */
    Py_ssize_t nblocks = 0;
    for (Py_ssize_t q = 0; q < n; q++)
        if (keep[q] && block[q] + 1 > nblocks)
            nblocks = block[q] + 1;
    order = PyMem_Malloc(nblocks * sizeof(int32_t));
    first = PyMem_Malloc(nblocks * sizeof(int32_t));
    merged = PyMem_Malloc(nblocks * sizeof(int32_t));
    mmask = PyMem_Malloc((nblocks ? nblocks : 1) * sizeof(Mask));
    if (!order || !first || !merged || !mmask) {
        PyErr_NoMemory();
        goto out;
    }
    memset(order, 0xff, nblocks * sizeof(int32_t));
    memset(merged, 0xff, nblocks * sizeof(int32_t));
    Py_ssize_t count = 0;
    order[block[0]] = (int32_t)count;
    first[count++] = 0;
    for (Py_ssize_t q = 1; q < n; q++)
        if (keep[q] && order[block[q]] < 0) {
            order[block[q]] = (int32_t)count;
            first[count++] = (int32_t)q;
        }
    /* rows: a list of [(mask, target)]; or, given byte_class, the edges of an IR Fsm: a tuple
     * of rows, each a tuple of (byte class, target) in byte order, and accept the frozenset of
     * accepting states */
    rows = byte_class ? PyTuple_New(count) : PyList_New(count);
    accept = byte_class ? PyList_New(0) : PyList_New(count);
    if (!rows || !accept)
        goto out;
    for (Py_ssize_t k = 0; k < count; k++) {
        int32_t q = first[k];
        if (!byte_class)
            PyList_SET_ITEM(accept, k, PyBool_FromLong(acc[q]));
        else if (acc[q]) {
            PyObject *num = PyLong_FromSsize_t(k);
            int bad = !num || PyList_Append(accept, num) < 0;
            Py_XDECREF(num);
            if (bad)
                goto out;
        }
        /* the row's masks merged per target block, in first-seen order (as dfa._merged_row) */
        int32_t targets[256];
        int nt = 0;
        for (int32_t e = off[q]; e < off[q + 1]; e++) {
            if (!live[tgt[e]])
                continue;
            int32_t tb = order[block[tgt[e]]];
            const Mask *m = &AT(ms->masks, Mask, mid[e]);
            if (merged[tb] < 0) {
                merged[tb] = nt;
                targets[nt] = tb;
                mmask[nt++] = *m;
            } else {
                for (int w = 0; w < 4; w++)
                    mmask[merged[tb]].w[w] |= m->w[w];
            }
        }
        int32_t ids[256], lows[256];
        for (int x = 0; x < nt; x++) {
            merged[targets[x]] = -1;
            if ((ids[x] = masks_id(ms, &mmask[x])) < 0)
                goto out;
            lows[x] = lowest_byte(&mmask[x]);
        }
        if (byte_class) /* in byte order: by lowest byte, insertion sort of a few */
            for (int x = 1; x < nt; x++)
                for (int y = x; y > 0 && lows[y - 1] > lows[y]; y--) {
                    int32_t t;
                    t = lows[y], lows[y] = lows[y - 1], lows[y - 1] = t;
                    t = ids[y], ids[y] = ids[y - 1], ids[y - 1] = t;
                    t = targets[y], targets[y] = targets[y - 1], targets[y - 1] = t;
                }
        PyObject *row = byte_class ? PyTuple_New(nt) : PyList_New(nt);
        if (!row)
            goto out;
        if (byte_class)
            PyTuple_SET_ITEM(rows, k, row);
        else
            PyList_SET_ITEM(rows, k, row);
        if (byte_class && k && text_put(&text, ";", 1) < 0)
            goto out;
        for (int x = 0; x < nt; x++) {
            PyObject *label = byte_class ? class_of(ms, ints, classes, byte_class, ids[x]) : mask_int(ms, ints, ids[x]);
            if (label && byte_class) {
                PyObject *r = ranges_text(texts, label, ids[x]);
                if (!r || (x && text_put(&text, ",", 1) < 0)
                    || text_put(&text, PyBytes_AS_STRING(r), PyBytes_GET_SIZE(r)) < 0
                    || text_put(&text, ">", 1) < 0 || text_int(&text, targets[x]) < 0) {
                    Py_DECREF(label);
                    goto out;
                }
            }
            PyObject *pair = label ? Py_BuildValue("(Ni)", label, targets[x]) : NULL;
            if (!pair)
                goto out;
            if (byte_class) {
                PyObject_GC_UnTrack(pair); /* an IR edge: no cycle (see untrack_edges) */
                PyTuple_SET_ITEM(row, x, pair);
            } else
                PyList_SET_ITEM(row, x, pair);
        }
        if (byte_class)
            PyObject_GC_UnTrack(row);
    }
    if (byte_class) {
        if (text_put(&text, "|[", 2) < 0) /* then sorted(accept), as a list's repr */
            goto out;
        for (Py_ssize_t i = 0; i < PyList_GET_SIZE(accept); i++)
            if ((i && text_put(&text, ", ", 2) < 0)
                || text_int(&text, PyLong_AsLongLong(PyList_GET_ITEM(accept, i))) < 0)
                goto out;
        if (text_put(&text, "]", 1) < 0 || !(written = PyBytes_FromStringAndSize(text.data, text.len)))
            goto out;
        PyObject *set = PyFrozenSet_New(accept);
        if (!set)
            goto out;
        Py_SETREF(accept, set);
        result = Py_BuildValue("(iOOO)", c, rows, accept, written);
    } else
        result = Py_BuildValue("(iOO)", c, rows, accept);
out:
    PyMem_Free(text.data);
    Py_XDECREF(written);
    Py_XDECREF(rows);
    Py_XDECREF(accept);
    PyMem_Free(acc);
    PyMem_Free(live);
    PyMem_Free(keep);
    PyMem_Free(block);
    PyMem_Free(order);
    PyMem_Free(first);
    PyMem_Free(merged);
    PyMem_Free(mmask);
    PyMem_Free(todo);
    PyMem_Free(poff);
    PyMem_Free(psrc);
    return result;
}

/* split_product(a_off, a_mask, a_tgt, a_accept, b_off, b_mask, b_tgt, b_class, limit[, byte_class[, minimal]])
 *   -> (states, visits, [(class, rows, accept), ...]) or (states, visits, None) past `limit`;
 * minimal=False leaves each class trimmed, not minimized (a length counter's product: Moore
 * refinement takes a round per count, and the counts are distinct states anyway);
 * given byte_class (a mask -> IR ByteClass), rows and accept are an IR Fsm's edges and accept,
 * and each class also has the text structgen.core.ir's _fsm_text writes of that Fsm (bytes):
 * (class, rows, accept, text). Writing it here, from each class's text made once, spares
 * Python a loop over every edge (~10,000 per SQL compile) to digest the rule.
 * A product state (p, q) accepts in class b_class[q] (none where -1) where a_accept[p];
 * classes come in the order their first state was explored. */
static PyObject *split_product(PyObject *self, PyObject *args) {
    PyObject *ao, *am, *at, *bo, *bm, *bt;
    Py_buffer aacc = {0}, bcls = {0};
    Py_ssize_t limit;
    Rows a, b;
    memset(&a, 0, sizeof(a));
    memset(&b, 0, sizeof(b));
    Product p;
    memset(&p, 0, sizeof(p));
    p.pa.size = p.pb.size = p.off.size = p.emask.size = p.etgt.size = sizeof(int32_t);
    Masks ms;
    int masks_ok = 0;
    Ints ints = {NULL, 0}, classes_of = {NULL, 0}, texts = {NULL, 0};
    PyObject *classes = NULL, *result = NULL;
    int32_t *cls = NULL;
    char *seen = NULL;
    PyObject *byte_class = Py_None;
    int minimal = 1;
    if (!PyArg_ParseTuple(args, "OOOy*OOOy*n|Op", &ao, &am, &at, &aacc, &bo, &bm, &bt, &bcls, &limit, &byte_class,
                          &minimal))
        return NULL;
    if (byte_class == Py_None)
        byte_class = NULL;
    else if (!PyCallable_Check(byte_class)) {
        PyErr_SetString(PyExc_TypeError, "byte_class must be callable");
        PyBuffer_Release(&aacc);
        PyBuffer_Release(&bcls);
        return NULL;
    }
    if (rows_open(&a, ao, am, at, 0) < 0 || rows_open(&b, bo, bm, bt, 1) < 0)
        goto out;
    if (aacc.len != a.n || bcls.len != b.n * (Py_ssize_t)sizeof(int32_t)) {
        PyErr_SetString(PyExc_ValueError, "accept or class tables of the wrong size");
        goto out;
    }
    if (masks_init(&ms) < 0)
        goto out;
    masks_ok = 1;
    int status = explore(&a, &b, limit, &p, &ms);
    if (status < 0)
        goto out;
    Py_ssize_t visits = 0;
    if (status == 1) {
        result = Py_BuildValue("(nnO)", p.pa.len, visits, Py_None);
        goto out;
    }
    Py_ssize_t n = p.pa.len;
    const char *accept = aacc.buf;
    const int32_t *bclass = bcls.buf;
    cls = PyMem_Malloc(n * sizeof(int32_t));
    if (!cls) {
        PyErr_NoMemory();
        goto out;
    }
    int32_t most = -1;
    for (Py_ssize_t q = 0; q < b.n; q++) {
        if (bclass[q] < -1) {
            PyErr_SetString(PyExc_ValueError, "a class number out of range");
            goto out;
        }
        if (bclass[q] > most)
            most = bclass[q];
    }
    for (Py_ssize_t q = 0; q < n; q++)
        cls[q] = accept[AT(p.pa, int32_t, q)] ? bclass[AT(p.pb, int32_t, q)] : -1; /* -1: none */
    classes = PyList_New(0);
    if (!classes)
        goto out;
    seen = PyMem_Calloc((size_t)most + 2, 1);
    if (!seen) {
        PyErr_NoMemory();
        goto out;
    }
    for (Py_ssize_t q = 0; q < n; q++) {
        if (cls[q] < 0 || seen[cls[q]])
            continue;
        seen[cls[q]] = 1;
        Py_ssize_t v = 0; /* as minimize_rows counts: per class */
        PyObject *one = one_class(&p, &ms, &ints, &classes_of, &texts, byte_class, cls, cls[q], minimal, &v);
        if (!one || PyList_Append(classes, one) < 0) {
            Py_XDECREF(one);
            goto out;
        }
        Py_DECREF(one);
        if (v > visits)
            visits = v;
    }
    result = Py_BuildValue("(nnO)", n, visits, classes);
out:
    for (Py_ssize_t i = 0; i < ints.cap; i++)
        Py_XDECREF(ints.items[i]);
    PyMem_Free(ints.items);
    for (Py_ssize_t i = 0; i < classes_of.cap; i++)
        Py_XDECREF(classes_of.items[i]);
    PyMem_Free(classes_of.items);
    for (Py_ssize_t i = 0; i < texts.cap; i++)
        Py_XDECREF(texts.items[i]);
    PyMem_Free(texts.items);
    PyMem_Free(seen);
    Py_XDECREF(classes);
    PyMem_Free(cls);
    if (masks_ok)
        masks_free(&ms);
    product_free(&p);
    rows_close(&a);
    rows_close(&b);
    PyBuffer_Release(&aacc);
    PyBuffer_Release(&bcls);
    return result;
}

/* ---------------------------------------------------------------- subset construction
 *
 * determinize(eps, edges, calls, start, final, max_states, room) builds one rule's DFA from its
 * Thompson NFA as structgen/core/automaton.py's _determinize does, state numbers, row order and
 * work count included: a DFA state is the sorted set of important NFA states (those that read
 * a byte, call a rule, or the final one) of an epsilon closure; states are processed in the
 * order they are numbered; a state's byte groups (bytes with equal target sets) get their
 * targets by lowest byte, then its calls by callee name; a target set is closed once. The NFA
 * comes as automaton.py's _NFA lists: eps[q] (ints), edges[q] ((frozenset of bytes, target)
 * pairs), calls[q] ((callee name, target) pairs). In Python this loop was about a third of
 * compiling the largest JSON schemas (a Github_ultra schema: ~250 of ~1,000 ms).
 *
 * Returns (status, states, visits, trans, calls, accept): status 0 done; 1 stopped at a
 * budget check (every 16th state, as the Python checks) whose units exceed `room` (-1: no
 * budget), the caller raising as affordable() does; 2 more than max_states states.
 */

typedef struct {
    Buf items;  /* int32: every set's members back to back */
    Buf starts; /* Py_ssize_t: where set i starts; one more entry at the end */
    Buf hashes; /* uint64 */
    int32_t *slots;
    Py_ssize_t cap;
} Sets;

static int sets_init(Sets *s) {
    memset(s, 0, sizeof(*s));
    s->items.size = sizeof(int32_t);
    s->starts.size = sizeof(Py_ssize_t);
    s->hashes.size = sizeof(uint64_t);
    s->cap = 256;
    s->slots = empty_slots(s->cap);
    Py_ssize_t *zero = s->slots ? buf_push(&s->starts) : NULL;
    if (!zero)
        return -1;
    *zero = 0;
    return 0;
}

static void sets_free(Sets *s) {
    PyMem_Free(s->items.data);
    PyMem_Free(s->starts.data);
    PyMem_Free(s->hashes.data);
    PyMem_Free(s->slots);
}

static Py_ssize_t sets_len(const Sets *s) { return s->hashes.len; }

static const int32_t *set_at(const Sets *s, int32_t id, Py_ssize_t *n) {
    Py_ssize_t a = AT(s->starts, Py_ssize_t, id);
    *n = AT(s->starts, Py_ssize_t, id + 1) - a;
    return &AT(s->items, int32_t, a);
}

static uint64_t ints_hash(const int32_t *a, Py_ssize_t n) {
    uint64_t h = 0x9e3779b97f4a7c15ULL + (uint64_t)n;
    for (Py_ssize_t i = 0; i < n; i++)
        h = mix(h ^ (uint32_t)a[i]) + 0x9e3779b97f4a7c15ULL;
    return h;
}

/* The slot of set a[0..n): where it is, or the empty slot where it goes. */
static Py_ssize_t sets_slot(const Sets *s, const int32_t *a, Py_ssize_t n, uint64_t h) {
    Py_ssize_t i = (Py_ssize_t)(h & (uint64_t)(s->cap - 1));
    for (; s->slots[i] >= 0; i = (i + 1) & (s->cap - 1)) {
        int32_t id = s->slots[i];
        Py_ssize_t m;
        const int32_t *b = set_at(s, id, &m);
        if (AT(s->hashes, uint64_t, id) == h && m == n && !memcmp(a, b, n * sizeof(int32_t)))
            break;
    }
    return i;
}

/* The id of set a[0..n), or -1 when it is not there. */
static int32_t sets_find(const Sets *s, const int32_t *a, Py_ssize_t n, uint64_t h) {
    return s->slots[sets_slot(s, a, n, h)];
}

/* Add set a[0..n) (not there yet); its id, or -1 on a memory error. */
static int32_t sets_add(Sets *s, const int32_t *a, Py_ssize_t n, uint64_t h) {
    if (2 * (sets_len(s) + 1) > s->cap) {
        Py_ssize_t cap = s->cap * 2;
        int32_t *slots = empty_slots(cap);
        if (!slots)
            return -1;
        for (Py_ssize_t id = 0; id < sets_len(s); id++) {
            Py_ssize_t i = (Py_ssize_t)(AT(s->hashes, uint64_t, id) & (uint64_t)(cap - 1));
            while (slots[i] >= 0)
                i = (i + 1) & (cap - 1);
            slots[i] = (int32_t)id;
        }
        PyMem_Free(s->slots);
        s->slots = slots;
        s->cap = cap;
    }
    Py_ssize_t slot = sets_slot(s, a, n, h);
    int32_t id = (int32_t)sets_len(s);
    uint64_t *hp = buf_push(&s->hashes);
    if (!hp)
        return -1;
    *hp = h;
    for (Py_ssize_t i = 0; i < n; i++) {
        int32_t *x = buf_push(&s->items);
        if (!x)
            return -1;
        *x = a[i];
    }
    Py_ssize_t *end = buf_push(&s->starts);
    if (!end)
        return -1;
    *end = s->items.len;
    s->slots[slot] = id;
    return id;
}

static int cmp_i32(const void *x, const void *y) {
    int32_t a = *(const int32_t *)x, b = *(const int32_t *)y;
    return (a > b) - (a < b);
}

static int cmp_u64(const void *x, const void *y) {
    uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
    return (a > b) - (a < b);
}

static void sort_i32(int32_t *a, Py_ssize_t n) {
    if (n < 16) { /* closures are mostly a few states */
        for (Py_ssize_t i = 1; i < n; i++) {
            int32_t x = a[i];
            Py_ssize_t j = i;
            for (; j > 0 && a[j - 1] > x; j--)
                a[j] = a[j - 1];
            a[j] = x;
        }
    } else
        qsort(a, n, sizeof(int32_t), cmp_i32);
}

/* a[0..n) sorted with its repeats dropped; the new length. */
static Py_ssize_t sorted_distinct(int32_t *a, Py_ssize_t n) {
    sort_i32(a, n);
    Py_ssize_t d = 0;
    for (Py_ssize_t i = 0; i < n; i++)
        if (!d || a[i] != a[d - 1])
            a[d++] = a[i];
    return d;
}

/* The NFA, flattened; callees renamed to their rank among the sorted names. */
typedef struct {
    Py_ssize_t n;
    Py_ssize_t *eps_at, *edge_at, *call_at; /* n + 1 offsets each */
    int32_t *eps, *edge_tgt, *call_rank, *call_tgt, *width;
    Mask *edge_mask;
    char *important;
    PyObject *names; /* sorted callee names */
} Nfa;

static void nfa_free(Nfa *f) {
    PyMem_Free(f->eps_at);
    PyMem_Free(f->edge_at);
    PyMem_Free(f->call_at);
    PyMem_Free(f->eps);
    PyMem_Free(f->edge_tgt);
    PyMem_Free(f->call_rank);
    PyMem_Free(f->call_tgt);
    PyMem_Free(f->width);
    PyMem_Free(f->edge_mask);
    PyMem_Free(f->important);
    Py_XDECREF(f->names);
}

static int bad_nfa(const char *what) {
    PyErr_Format(PyExc_ValueError, "malformed NFA: %s", what);
    return -1;
}

/* A state number in range, from a Python int. */
static int nfa_state(PyObject *o, Py_ssize_t n, int32_t *out) {
    Py_ssize_t v = PyLong_AsSsize_t(o);
    if (v == -1 && PyErr_Occurred())
        return -1;
    if (v < 0 || v >= n)
        return bad_nfa("a state out of range");
    *out = (int32_t)v;
    return 0;
}

/* Room for an NFA of n states, ne epsilon edges, nb byte edges and nc calls (offsets, widths
 * and flags zeroed), its callee list, and *rank, a new name -> first-seen id dict. */
static int nfa_alloc(Nfa *f, Py_ssize_t n, Py_ssize_t ne, Py_ssize_t nb, Py_ssize_t nc, PyObject **rank) {
    f->n = n;
    f->eps_at = PyMem_Calloc(n + 1, sizeof(Py_ssize_t));
    f->edge_at = PyMem_Calloc(n + 1, sizeof(Py_ssize_t));
    f->call_at = PyMem_Calloc(n + 1, sizeof(Py_ssize_t));
    f->eps = PyMem_Malloc((ne + 1) * sizeof(int32_t));
    f->edge_tgt = PyMem_Malloc((nb + 1) * sizeof(int32_t));
    f->edge_mask = PyMem_Malloc((nb + 1) * sizeof(Mask));
    f->call_rank = PyMem_Malloc((nc + 1) * sizeof(int32_t));
    f->call_tgt = PyMem_Malloc((nc + 1) * sizeof(int32_t));
    f->width = PyMem_Calloc(n + 1, sizeof(int32_t));
    f->important = PyMem_Calloc(n + 1, 1);
    f->names = PyList_New(0);
    *rank = PyDict_New();
    if (!f->eps_at || !f->edge_at || !f->call_at || !f->eps || !f->edge_tgt || !f->edge_mask || !f->call_rank ||
        !f->call_tgt || !f->width || !f->important || !f->names || !*rank) {
        Py_CLEAR(*rank);
        if (!PyErr_Occurred())
            PyErr_NoMemory();
        return -1;
    }
    return 0;
}

/* The first-seen id of callee name (rank: name -> id, f->names in that order); -1 on an error. */
static int32_t callee_id(Nfa *f, PyObject *rank, PyObject *name) {
    PyObject *got = PyDict_GetItemWithError(rank, name);
    if (got)
        return (int32_t)PyLong_AsLong(got);
    if (PyErr_Occurred() || PyList_Append(f->names, name) < 0)
        return -1;
    Py_ssize_t id = PyList_GET_SIZE(f->names) - 1;
    PyObject *v = PyLong_FromSsize_t(id);
    int bad = !v || PyDict_SetItem(rank, name, v) < 0;
    Py_XDECREF(v);
    return bad ? -1 : (int32_t)id;
}

/* Callees from first-seen ids (rank: name -> id) to their ranks among the sorted names. */
static int rank_callees(Nfa *f, PyObject *rank) {
    Py_ssize_t k = PyList_GET_SIZE(f->names), nc = f->call_at[f->n];
    if (k < 2)
        return 0;
    int32_t *to_rank = PyMem_Malloc(k * sizeof(int32_t));
    if (!to_rank) {
        PyErr_NoMemory();
        return -1;
    }
    if (PyList_Sort(f->names) < 0) {
        PyMem_Free(to_rank);
        return -1;
    }
    for (Py_ssize_t r = 0; r < k; r++) {
        PyObject *id = PyDict_GetItemWithError(rank, PyList_GET_ITEM(f->names, r));
        if (!id) {
            PyMem_Free(to_rank);
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_RuntimeError, "a callee lost its id");
            return -1;
        }
        to_rank[PyLong_AsLong(id)] = (int32_t)r;
    }
    for (Py_ssize_t i = 0; i < nc; i++)
        f->call_rank[i] = to_rank[f->call_rank[i]];
    PyMem_Free(to_rank);
    return 0;
}

static int nfa_open(Nfa *f, PyObject *eps, PyObject *edges, PyObject *calls, int32_t final) {
    memset(f, 0, sizeof(*f));
    if (!PyList_Check(eps) || !PyList_Check(edges) || !PyList_Check(calls))
        return bad_nfa("eps, edges and calls must be lists");
    Py_ssize_t n = f->n = PyList_GET_SIZE(eps);
    if (PyList_GET_SIZE(edges) != n || PyList_GET_SIZE(calls) != n || final < 0 || final >= n)
        return bad_nfa("lists of different lengths");
    Py_ssize_t ne = 0, nb = 0, nc = 0;
    for (Py_ssize_t q = 0; q < n; q++) {
        PyObject *a = PyList_GET_ITEM(eps, q), *b = PyList_GET_ITEM(edges, q), *c = PyList_GET_ITEM(calls, q);
        if (!PyList_Check(a) || !PyList_Check(b) || !PyList_Check(c))
            return bad_nfa("a state's entries must be lists");
        ne += PyList_GET_SIZE(a);
        nb += PyList_GET_SIZE(b);
        nc += PyList_GET_SIZE(c);
    }
    PyObject *rank;
    if (nfa_alloc(f, n, ne, nb, nc, &rank) < 0)
        return -1;
    int ok = -1;
    ne = nb = nc = 0;
    for (Py_ssize_t q = 0; q < n; q++) {
        PyObject *a = PyList_GET_ITEM(eps, q), *b = PyList_GET_ITEM(edges, q), *c = PyList_GET_ITEM(calls, q);
        f->eps_at[q] = ne;
        f->edge_at[q] = nb;
        f->call_at[q] = nc;
        int32_t width = 0;
        for (Py_ssize_t i = 0; i < PyList_GET_SIZE(a); i++)
            if (nfa_state(PyList_GET_ITEM(a, i), n, &f->eps[ne++]) < 0)
                goto out;
        for (Py_ssize_t i = 0; i < PyList_GET_SIZE(b); i++) {
            PyObject *e = PyList_GET_ITEM(b, i);
            if (!PyTuple_Check(e) || PyTuple_GET_SIZE(e) != 2 || !PyAnySet_Check(PyTuple_GET_ITEM(e, 0))) {
                bad_nfa("an edge must be a (set of bytes, target) pair");
                goto out;
            }
            if (nfa_state(PyTuple_GET_ITEM(e, 1), n, &f->edge_tgt[nb]) < 0)
                goto out;
            Mask *m = &f->edge_mask[nb++];
            memset(m, 0, sizeof(*m));
            PyObject *it = PyObject_GetIter(PyTuple_GET_ITEM(e, 0)), *x;
            if (!it)
                goto out;
            while ((x = PyIter_Next(it))) {
                long v = PyLong_AsLong(x);
                Py_DECREF(x);
                if (v < 0 || v > 255) {
                    Py_DECREF(it);
                    if (!PyErr_Occurred())
                        bad_nfa("a byte out of range");
                    goto out;
                }
                m->w[v >> 6] |= 1ULL << (v & 63);
                width++;
            }
            Py_DECREF(it);
            if (PyErr_Occurred())
                goto out;
        }
        for (Py_ssize_t i = 0; i < PyList_GET_SIZE(c); i++) {
            PyObject *e = PyList_GET_ITEM(c, i);
            if (!PyTuple_Check(e) || PyTuple_GET_SIZE(e) != 2 || !PyUnicode_Check(PyTuple_GET_ITEM(e, 0))) {
                bad_nfa("a call must be a (name, target) pair");
                goto out;
            }
            if (nfa_state(PyTuple_GET_ITEM(e, 1), n, &f->call_tgt[nc]) < 0)
                goto out;
            if ((f->call_rank[nc++] = callee_id(f, rank, PyTuple_GET_ITEM(e, 0))) < 0)
                goto out; /* a first-seen id; ranked below */
            width++;
        }
        f->width[q] = width;
        f->important[q] = PyList_GET_SIZE(b) || PyList_GET_SIZE(c);
    }
    f->eps_at[n] = ne;
    f->edge_at[n] = nb;
    f->call_at[n] = nc;
    f->important[final] = 1;
    if (rank_callees(f, rank) < 0)
        goto out;
    ok = 0;
out:
    Py_DECREF(rank);
    return ok;
}

typedef struct {
    const Nfa *f;
    Sets dfa, reached;
    Buf reached_to; /* int32: the DFA state of reached set i */
    uint32_t *mark, stamp;
    int32_t *stack, *seen;
    Py_ssize_t visits, max_states;
    int too_many;
} Subsets;

/* The DFA state of the closure of ts[0..n) (distinct states), numbered if new; -1 on an error
 * (with too_many set past max_states). */
static int32_t close_set(Subsets *s, const int32_t *ts, Py_ssize_t n) {
    const Nfa *f = s->f;
    uint32_t stamp = ++s->stamp;
    Py_ssize_t top = 0, k = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        s->mark[ts[i]] = stamp;
        s->stack[top++] = ts[i];
        s->seen[k++] = ts[i];
    }
    while (top) {
        int32_t q = s->stack[--top];
        for (Py_ssize_t i = f->eps_at[q]; i < f->eps_at[q + 1]; i++) {
            int32_t t = f->eps[i];
            if (s->mark[t] != stamp) {
                s->mark[t] = stamp;
                s->stack[top++] = t;
                s->seen[k++] = t;
            }
        }
    }
    s->visits += k;
    Py_ssize_t m = 0;
    for (Py_ssize_t i = 0; i < k; i++)
        if (f->important[s->seen[i]])
            s->seen[m++] = s->seen[i];
    sort_i32(s->seen, m);
    uint64_t h = ints_hash(s->seen, m);
    int32_t got = sets_find(&s->dfa, s->seen, m, h);
    if (got < 0) {
        if (sets_len(&s->dfa) >= s->max_states) {
            s->too_many = 1;
            return -1;
        }
        got = sets_add(&s->dfa, s->seen, m, h);
    }
    return got;
}

/* target(ts) of _determinize: a target set's DFA state, closed once per distinct set. */
static int32_t target_of(Subsets *s, const int32_t *ts, Py_ssize_t n) {
    uint64_t h = ints_hash(ts, n);
    int32_t r = sets_find(&s->reached, ts, n, h);
    if (r >= 0)
        return AT(s->reached_to, int32_t, r);
    int32_t got = close_set(s, ts, n);
    if (got < 0)
        return -1;
    int32_t *to = buf_push(&s->reached_to);
    if (sets_add(&s->reached, ts, n, h) < 0 || !to)
        return -1;
    *to = got;
    return got;
}

/* A cached Python int per DFA state. */
static PyObject *state_int(Ints *cache, int32_t id) {
    PyObject **slot = ints_slot(cache, id);
    if (!slot)
        return NULL;
    if (!*slot)
        *slot = PyLong_FromLong(id);
    return *slot;
}

/* A dict with room for n entries: a state's row of ~250 bytes is not resized on the way (a fifth
 * of making a wide automaton). The sizing call is CPython's private one (restored in 3.13 after
 * its removal, as Cython and orjson use it); a Python without it gets a plain dict. */
static PyObject *dict_presized(Py_ssize_t n) {
#if PY_VERSION_HEX < 0x030F0000
    return _PyDict_NewPresized(n);
#else
    (void)n;
    return PyDict_New();
#endif
}

/* A grouped row: the pairs (masks[i], targets[i]) ordered by target, a tuple untracked by the
 * collector when frozen (a row's masks and ints hold no cycle), else a list; new reference. */
static PyObject *pairs_by_target(const int32_t *targets, const Mask *masks, int k, int frozen) {
    int order[256];
    for (int i = 0; i < k; i++) { /* insertion by target: at most 256 a row, most have one or two */
        int j = i;
        while (j > 0 && targets[order[j - 1]] > targets[i]) {
            order[j] = order[j - 1];
            j--;
        }
        order[j] = i;
    }
    PyObject *pairs = frozen ? PyTuple_New(k) : PyList_New(k);
    if (!pairs)
        return NULL;
    for (int i = 0; i < k; i++) {
        PyObject *m = mask_long(&masks[order[i]]), *t = m ? PyLong_FromLong(targets[order[i]]) : NULL;
        PyObject *pair = t ? PyTuple_Pack(2, m, t) : NULL;
        Py_XDECREF(m);
        Py_XDECREF(t);
        if (!pair) {
            Py_DECREF(pairs);
            return NULL;
        }
        if (frozen) {
            PyObject_GC_UnTrack(pair);
            PyTuple_SET_ITEM(pairs, i, pair);
        } else
            PyList_SET_ITEM(pairs, i, pair);
    }
    if (frozen)
        PyObject_GC_UnTrack(pairs);
    return pairs;
}

/* The subset construction of NFA *fp from start to final (the caller frees *fp). With as_rows,
 * each state's row is not a {byte: target} dict but its grouped row (as grouped makes with
 * frozen set): (mask, target) pairs by target, tuples out of the collector's sight. */
static PyObject *subsets(const Nfa *fp, int start, int final, Py_ssize_t max_states, Py_ssize_t room, int as_rows) {
    Nfa f = *fp; /* a shallow copy: the arrays stay the caller's */
    Subsets s;
    memset(&s, 0, sizeof(s));
    int sets_ok = 0;
    Ints ints = {NULL, 0};
    uint64_t *pairs = NULL;
    int32_t *tgts = NULL; /* as many: a state's byte edges' targets, bucketed by byte */
    /* per NFA state t: the group of the bytes whose only target is t, valid where
     * single_stamp[t] is the DFA state's number + 1 */
    uint32_t *single_stamp = NULL;
    int32_t *single_group = NULL;
    PyObject *trans = NULL, *call_rows = NULL, *accept = NULL, *result = NULL;
    if (start < 0 || start >= f.n || final < 0 || final >= f.n) {
        bad_nfa("start or final out of range");
        goto out;
    }
    s.f = &f;
    s.max_states = max_states;
    s.reached_to.size = sizeof(int32_t);
    if (sets_init(&s.dfa) < 0 || sets_init(&s.reached) < 0)
        goto out;
    sets_ok = 1;
    s.mark = PyMem_Calloc(f.n, sizeof(uint32_t));
    single_stamp = PyMem_Calloc(f.n, sizeof(uint32_t));
    single_group = PyMem_Malloc(f.n * sizeof(int32_t));
    s.stack = PyMem_Malloc(f.n * sizeof(int32_t));
    s.seen = PyMem_Malloc(f.n * sizeof(int32_t));
    Py_ssize_t pairs_cap = 256; /* grown to a state's width: (byte or call, target) pairs */
    pairs = PyMem_Malloc(pairs_cap * sizeof(uint64_t));
    tgts = PyMem_Malloc(pairs_cap * sizeof(int32_t));
    trans = PyList_New(0);
    call_rows = PyList_New(0);
    accept = PyList_New(0);
    if (!s.mark || !s.stack || !s.seen || !pairs || !tgts || !single_stamp || !single_group) {
        PyErr_NoMemory();
        goto out;
    }
    if (!trans || !call_rows || !accept)
        goto out;
    int32_t start_set[1] = {start};
    int status = 0;
    if (close_set(&s, start_set, 1) < 0) {
        if (!s.too_many)
            goto out;
        status = 2;
        goto done;
    }
    for (Py_ssize_t i = 0; i < sets_len(&s.dfa); i++) {
        Py_ssize_t n;
        const int32_t *cur = set_at(&s.dfa, (int32_t)i, &n);
        Py_ssize_t width = 0;
        for (Py_ssize_t j = 0; j < n; j++)
            width += f.width[cur[j]];
        s.visits += width / 4; /* the byte edges read below (~4 a visit) */
        if (width >= pairs_cap) {
            while (width >= pairs_cap)
                pairs_cap *= 2;
            uint64_t *more = PyMem_Realloc(pairs, pairs_cap * sizeof(uint64_t));
            if (!more) {
                PyErr_NoMemory();
                goto out;
            }
            pairs = more;
            int32_t *more_tgts = PyMem_Realloc(tgts, pairs_cap * sizeof(int32_t));
            if (!more_tgts) {
                PyErr_NoMemory();
                goto out;
            }
            tgts = more_tgts;
        }
        if (!((i + 1) & 15) && room >= 0) {
            Py_ssize_t units = (f.n + s.visits) / 16;
            if (sets_len(&s.dfa) > units)
                units = sets_len(&s.dfa);
            if (units > room) {
                status = 1;
                goto done;
            }
        }
        /* each byte's targets, sorted and distinct: its run, which is its target set. Bucketed by
         * byte (a counting sort): sorting (byte, target) pairs was most of the time of a wide
         * automaton (a lexer union, a string's ~250 bytes a state) */
        int32_t run_at[256], run_len[256], next_in_group[256], group_first[256], group_last[256];
        int is_final = 0;
        memset(run_len, 0, sizeof(run_len));
        for (Py_ssize_t j = 0; j < n; j++) {
            int32_t q = cur[j];
            is_final |= q == final;
            for (Py_ssize_t e = f.edge_at[q]; e < f.edge_at[q + 1]; e++) {
                const Mask *m = &f.edge_mask[e];
                for (int w = 0; w < 4; w++)
                    for (uint64_t bits = m->w[w]; bits; bits &= bits - 1)
                        run_len[w * 64 + __builtin_ctzll(bits)]++;
            }
        }
        Py_ssize_t np = 0;
        for (int b = 0; b < 256; b++) {
            run_at[b] = (int32_t)np;
            np += run_len[b];
            run_len[b] = 0;
        }
        for (Py_ssize_t j = 0; j < n; j++) {
            int32_t q = cur[j];
            for (Py_ssize_t e = f.edge_at[q]; e < f.edge_at[q + 1]; e++) {
                const Mask *m = &f.edge_mask[e];
                for (int w = 0; w < 4; w++)
                    for (uint64_t bits = m->w[w]; bits; bits &= bits - 1) {
                        int b = w * 64 + __builtin_ctzll(bits);
                        tgts[run_at[b] + run_len[b]++] = f.edge_tgt[e];
                    }
            }
        }
        /* bytes with equal runs form a group, groups in order of lowest byte */
        int ngroups = 0;
        for (int b = 0; b < 256; b++) {
            if (!run_len[b])
                continue;
            int32_t *run = &tgts[run_at[b]];
            run_len[b] = (int32_t)sorted_distinct(run, run_len[b]);
            next_in_group[b] = -1;
            int g = 0;
            if (run_len[b] == 1) { /* one target (every run of a DFA-like rule): found by it, not by a scan */
                g = single_stamp[run[0]] == i + 1 ? single_group[run[0]] : ngroups;
                if (g == ngroups) {
                    single_stamp[run[0]] = (uint32_t)i + 1;
                    single_group[run[0]] = ngroups;
                }
            } else
                for (; g < ngroups; g++) {
                    int c = group_first[g];
                    if (run_len[c] == run_len[b] && !memcmp(&tgts[run_at[c]], run, run_len[b] * sizeof(int32_t)))
                        break;
                }
            if (g == ngroups) {
                group_first[g] = group_last[g] = b;
                ngroups++;
            } else {
                next_in_group[group_last[g]] = b;
                group_last[g] = b;
            }
        }
        PyObject *row = NULL;
        if (!as_rows) {
            int nbytes = 0;
            for (int b = 0; b < 256; b++)
                nbytes += run_len[b] > 0;
            row = dict_presized(nbytes);
            if (!row || PyList_Append(trans, row) < 0) {
                Py_XDECREF(row);
                goto out;
            }
            Py_DECREF(row);
        }
        int32_t row_t[256];
        Mask row_m[256];
        int nrow = 0;
        for (int g = 0; g < ngroups; g++) {
            int b0 = group_first[g];
            int32_t t = target_of(&s, &tgts[run_at[b0]], run_len[b0]);
            if (t < 0) {
                if (s.too_many) {
                    status = 2;
                    goto done;
                }
                goto out;
            }
            if (as_rows) { /* groups whose target sets close alike share the state: one mask */
                int k = 0;
                while (k < nrow && row_t[k] != t)
                    k++;
                if (k == nrow) {
                    row_t[nrow] = t;
                    memset(&row_m[nrow++], 0, sizeof(Mask));
                }
                for (int b = b0; b >= 0; b = next_in_group[b])
                    row_m[k].w[b >> 6] |= (uint64_t)1 << (b & 63);
                continue;
            }
            PyObject *tv = state_int(&ints, t);
            if (!tv)
                goto out;
            for (int b = b0; b >= 0; b = next_in_group[b]) {
                PyObject *bv = PyLong_FromLong(b);
                int bad = !bv || PyDict_SetItem(row, bv, tv) < 0;
                Py_XDECREF(bv);
                if (bad)
                    goto out;
            }
        }
        if (as_rows) { /* not `pairs`: that name is the (rank, target) buffer the calls reuse below */
            PyObject *grouped = pairs_by_target(row_t, row_m, nrow, 1);
            int bad = !grouped || PyList_Append(trans, grouped) < 0;
            Py_XDECREF(grouped);
            if (bad)
                goto out;
        }
        /* calls: (rank, target) pairs sorted; one target set per callee, by name */
        cur = set_at(&s.dfa, (int32_t)i, &n); /* the targets above may have moved the sets */
        np = 0;
        for (Py_ssize_t j = 0; j < n; j++) {
            int32_t q = cur[j];
            for (Py_ssize_t c = f.call_at[q]; c < f.call_at[q + 1]; c++)
                pairs[np++] = ((uint64_t)(uint32_t)f.call_rank[c] << 32) | (uint32_t)f.call_tgt[c];
        }
        qsort(pairs, np, sizeof(uint64_t), cmp_u64);
        Py_ssize_t d = 0;
        for (Py_ssize_t j = 0; j < np; j++)
            if (!d || pairs[j] != pairs[d - 1])
                pairs[d++] = pairs[j];
        np = d;
        PyObject *crow = PyList_New(0);
        if (!crow)
            goto out;
        for (Py_ssize_t j = 0; j < np;) {
            uint32_t r = (uint32_t)(pairs[j] >> 32);
            Py_ssize_t e = j;
            while (e < np && (uint32_t)(pairs[e] >> 32) == r)
                e++;
            /* the run's targets, written over the pairs already read (4 bytes into 8) */
            int32_t *ts = (int32_t *)&pairs[j];
            for (Py_ssize_t x = 0; x < e - j; x++)
                ts[x] = (int32_t)(uint32_t)pairs[j + x];
            int32_t t = target_of(&s, ts, e - j);
            if (t < 0) {
                Py_DECREF(crow);
                if (s.too_many) {
                    status = 2;
                    goto done;
                }
                goto out;
            }
            PyObject *tv = state_int(&ints, t);
            PyObject *pair = tv ? PyTuple_Pack(2, PyList_GET_ITEM(f.names, r), tv) : NULL;
            if (!pair || PyList_Append(crow, pair) < 0) {
                Py_XDECREF(pair);
                Py_DECREF(crow);
                goto out;
            }
            Py_DECREF(pair);
            j = e;
        }
        PyObject *ctuple = PyList_AsTuple(crow);
        Py_DECREF(crow);
        if (!ctuple || PyList_Append(call_rows, ctuple) < 0) {
            Py_XDECREF(ctuple);
            goto out;
        }
        Py_DECREF(ctuple);
        if (PyList_Append(accept, is_final ? Py_True : Py_False) < 0)
            goto out;
    }
done:
    result = Py_BuildValue("(innOOO)", status, sets_len(&s.dfa), s.visits, trans, call_rows, accept);
out:
    for (Py_ssize_t i = 0; i < ints.cap; i++)
        Py_XDECREF(ints.items[i]);
    PyMem_Free(ints.items);
    Py_XDECREF(trans);
    Py_XDECREF(call_rows);
    Py_XDECREF(accept);
    PyMem_Free(pairs);
    PyMem_Free(tgts);
    PyMem_Free(s.mark);
    PyMem_Free(single_stamp);
    PyMem_Free(single_group);
    PyMem_Free(s.stack);
    PyMem_Free(s.seen);
    PyMem_Free(s.reached_to.data);
    if (sets_ok) {
        sets_free(&s.dfa);
        sets_free(&s.reached);
    }
    return result;
}

static PyObject *determinize(PyObject *self, PyObject *args) {
    PyObject *eps, *edges, *calls;
    int start, final;
    Py_ssize_t max_states, room;
    if (!PyArg_ParseTuple(args, "O!O!O!iinn", &PyList_Type, &eps, &PyList_Type, &edges, &PyList_Type, &calls,
                          &start, &final, &max_states, &room))
        return NULL;
    Nfa f;
    PyObject *result = NULL;
    if (nfa_open(&f, eps, edges, calls, final) == 0)
        result = subsets(&f, start, final, max_states, room, 0);
    nfa_free(&f);
    return result;
}

/* ---------------------------------------------------------------- Thompson NFA from IR
 *
 * compile_expr(expr, types, max_unroll, max_states, room[, as_rows]) builds expr's NFA as automaton.py's
 * _build does (the same states, in the same order) and runs the subset construction on it:
 * in Python, building the NFA had become the larger half of the two. types is the IR classes
 * (Lit, ByteClass, Ref, Seq, Alt, Repeat, Fsm). Returns (status, states, visits, trans, calls,
 * accept, nfa_states, info): statuses 0-2 as determinize's; 3 a repeat bound over max_unroll
 * (info: the bound); 4 a node _build does not take (info: its type name); 5 stopped at an NFA
 * budget check (every 1,024 states, as _NFA.new checks: nfa_states // 16 over room); 6 nested
 * deeper than this builder recurses, for the Python to build. With as_rows, trans holds grouped
 * rows, not dicts (a lexer's union of terminals: 200k dict entries, half its time).
 */

enum { T_LIT, T_CLASS, T_REF, T_SEQ, T_ALT, T_REPEAT, T_FSM, N_TYPES };

typedef struct {
    int32_t src, dst;
} Arc;

typedef struct {
    int32_t src, dst;
    Mask m;
} ByteArc;

typedef struct {
    int32_t src, dst;
    PyObject *name; /* borrowed from the IR */
} CallArc;

typedef struct {
    PyObject *types[N_TYPES];
    Py_ssize_t n, max_unroll, room;
    Buf eps, edges, calls; /* Arc, ByteArc, CallArc in the order _build adds them */
    int status;
    PyObject *info;
} Builder;

#define MAX_BUILD_DEPTH 1000 /* C stack: a thread may have 1 MiB; the Python goes deeper */

static int new_state(Builder *B, int32_t *out) {
    if (!(B->n & 1023) && B->room >= 0 && B->n / 16 > B->room) {
        B->status = 5;
        return -1;
    }
    if (B->n >= INT32_MAX - 1) {
        PyErr_SetString(PyExc_OverflowError, "NFA too large");
        return -1;
    }
    *out = (int32_t)B->n++;
    return 0;
}

static int add_eps(Builder *B, int32_t a, int32_t b) {
    Arc *x = buf_push(&B->eps);
    if (!x)
        return -1;
    x->src = a;
    x->dst = b;
    return 0;
}

static int add_edge(Builder *B, int32_t a, const Mask *m, int32_t b) {
    ByteArc *x = buf_push(&B->edges);
    if (!x)
        return -1;
    x->src = a;
    x->dst = b;
    x->m = *m;
    return 0;
}

/* An IR ByteClass's bytes, from its ranges. */
static int class_mask(PyObject *cls, Mask *m) {
    memset(m, 0, sizeof(*m));
    PyObject *ranges = PyObject_GetAttrString(cls, "ranges");
    if (!ranges)
        return -1;
    int ok = -1;
    if (!PyTuple_Check(ranges)) {
        PyErr_SetString(PyExc_TypeError, "ByteClass.ranges must be a tuple");
        goto out;
    }
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(ranges); i++) {
        PyObject *r = PyTuple_GET_ITEM(ranges, i);
        long lo, hi;
        if (!PyTuple_Check(r) || PyTuple_GET_SIZE(r) != 2) {
            PyErr_SetString(PyExc_TypeError, "a ByteClass range must be a (lo, hi) pair");
            goto out;
        }
        lo = PyLong_AsLong(PyTuple_GET_ITEM(r, 0));
        hi = PyLong_AsLong(PyTuple_GET_ITEM(r, 1));
        if (PyErr_Occurred())
            goto out;
        if (lo < 0 || hi > 255) {
            PyErr_SetString(PyExc_ValueError, "a ByteClass range out of 0-255");
            goto out;
        }
        for (long b = lo; b <= hi; b++)
            m->w[b >> 6] |= 1ULL << (b & 63);
    }
    ok = 0;
out:
    Py_DECREF(ranges);
    return ok;
}

static int build(Builder *B, PyObject *e, int depth, int32_t *s_out, int32_t *t_out);

/* A tuple attribute of e, as a new reference. */
static PyObject *tuple_attr(PyObject *e, const char *name) {
    PyObject *v = PyObject_GetAttrString(e, name);
    if (v && !PyTuple_Check(v)) {
        PyErr_Format(PyExc_TypeError, "IR attribute %s must be a tuple", name);
        Py_CLEAR(v);
    }
    return v;
}

static int build_fsm(Builder *B, PyObject *e, int32_t s, int32_t *t_out) {
    PyObject *edges = tuple_attr(e, "edges"), *accept = edges ? PyObject_GetAttrString(e, "accept") : NULL;
    int32_t *states = NULL;
    int ok = -1;
    if (!edges || !accept)
        goto out;
    Py_ssize_t k = PyTuple_GET_SIZE(edges);
    states = PyMem_Malloc((k + 1) * sizeof(int32_t));
    if (!states) {
        PyErr_NoMemory();
        goto out;
    }
    states[0] = s;
    for (Py_ssize_t q = 1; q < k; q++)
        if (new_state(B, &states[q]) < 0)
            goto out;
    int32_t end;
    if (new_state(B, &end) < 0)
        goto out;
    for (Py_ssize_t q = 0; q < k; q++) {
        PyObject *row = PyTuple_GET_ITEM(edges, q);
        if (!PyTuple_Check(row)) {
            PyErr_SetString(PyExc_TypeError, "an Fsm row must be a tuple");
            goto out;
        }
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(row); i++) {
            PyObject *edge = PyTuple_GET_ITEM(row, i);
            if (!PyTuple_Check(edge) || PyTuple_GET_SIZE(edge) != 2) {
                PyErr_SetString(PyExc_TypeError, "an Fsm edge must be a (ByteClass, target) pair");
                goto out;
            }
            Mask m;
            Py_ssize_t t = PyLong_AsSsize_t(PyTuple_GET_ITEM(edge, 1));
            if (t == -1 && PyErr_Occurred())
                goto out;
            if (t < 0 || t >= k) {
                PyErr_SetString(PyExc_ValueError, "an Fsm target out of range");
                goto out;
            }
            if (class_mask(PyTuple_GET_ITEM(edge, 0), &m) < 0 || add_edge(B, states[q], &m, states[t]) < 0)
                goto out;
        }
        PyObject *qv = PyLong_FromSsize_t(q);
        int in = qv ? PySequence_Contains(accept, qv) : -1;
        Py_XDECREF(qv);
        if (in < 0 || (in && add_eps(B, states[q], end) < 0))
            goto out;
    }
    *t_out = end;
    ok = 0;
out:
    PyMem_Free(states);
    Py_XDECREF(edges);
    Py_XDECREF(accept);
    return ok;
}

/* Repeat: hi = max, or min when unbounded; its bounds as _build reads them. */
static int build_repeat(Builder *B, PyObject *e, int depth, int32_t s, int32_t *t_out) {
    PyObject *item = PyObject_GetAttrString(e, "item"), *lo_o = NULL, *hi_o = NULL;
    int ok = -1;
    if (!item || !(lo_o = PyObject_GetAttrString(e, "min")) || !(hi_o = PyObject_GetAttrString(e, "max")))
        goto out;
    Py_ssize_t lo = PyLong_AsSsize_t(lo_o), hi = hi_o == Py_None ? lo : PyLong_AsSsize_t(hi_o);
    if (PyErr_Occurred())
        goto out;
    if (hi > B->max_unroll) {
        B->status = 3;
        B->info = PyLong_FromSsize_t(hi);
        goto out;
    }
    int32_t cur = s, a, b;
    for (Py_ssize_t i = 0; i < lo; i++) {
        if (build(B, item, depth + 1, &a, &b) < 0 || add_eps(B, cur, a) < 0)
            goto out;
        cur = b;
    }
    if (hi_o == Py_None) { /* star loop */
        if (build(B, item, depth + 1, &a, &b) < 0 || add_eps(B, cur, a) < 0 || add_eps(B, b, cur) < 0)
            goto out;
        *t_out = cur;
        ok = 0;
        goto out;
    }
    int32_t end;
    if (new_state(B, &end) < 0 || add_eps(B, cur, end) < 0)
        goto out;
    for (Py_ssize_t i = 0; i < hi - lo; i++) {
        if (build(B, item, depth + 1, &a, &b) < 0 || add_eps(B, cur, a) < 0 || add_eps(B, b, end) < 0)
            goto out;
        cur = b;
    }
    *t_out = end;
    ok = 0;
out:
    Py_XDECREF(item);
    Py_XDECREF(lo_o);
    Py_XDECREF(hi_o);
    return ok;
}

/* _build: add e to the NFA, its (entry, exit) states in *s_out, *t_out; -1 with B->status set
 * (or a Python error) when it cannot. */
static int build(Builder *B, PyObject *e, int depth, int32_t *s_out, int32_t *t_out) {
    if (depth > MAX_BUILD_DEPTH) {
        B->status = 6;
        return -1;
    }
    int32_t s, t;
    if (new_state(B, &s) < 0)
        return -1;
    *s_out = s;
    PyTypeObject *type = Py_TYPE(e);
    if (type == (PyTypeObject *)B->types[T_LIT]) {
        PyObject *data = PyObject_GetAttrString(e, "data");
        if (!data)
            return -1;
        if (!PyBytes_Check(data)) {
            Py_DECREF(data);
            PyErr_SetString(PyExc_TypeError, "Lit.data must be bytes");
            return -1;
        }
        const unsigned char *p = (const unsigned char *)PyBytes_AS_STRING(data);
        int32_t cur = s;
        for (Py_ssize_t i = 0; i < PyBytes_GET_SIZE(data); i++) {
            Mask m = {{0, 0, 0, 0}};
            m.w[p[i] >> 6] = 1ULL << (p[i] & 63);
            if (new_state(B, &t) < 0 || add_edge(B, cur, &m, t) < 0) {
                Py_DECREF(data);
                return -1;
            }
            cur = t;
        }
        Py_DECREF(data);
        *t_out = cur;
        return 0;
    }
    if (type == (PyTypeObject *)B->types[T_CLASS]) {
        Mask m;
        if (new_state(B, &t) < 0 || class_mask(e, &m) < 0 || add_edge(B, s, &m, t) < 0)
            return -1;
        *t_out = t;
        return 0;
    }
    if (type == (PyTypeObject *)B->types[T_REF]) {
        PyObject *name = PyObject_GetAttrString(e, "name");
        if (!name)
            return -1;
        if (!PyUnicode_Check(name)) {
            Py_DECREF(name);
            PyErr_SetString(PyExc_TypeError, "Ref.name must be a str");
            return -1;
        }
        Py_DECREF(name); /* the Ref holds it */
        CallArc *x;
        if (new_state(B, &t) < 0 || !(x = buf_push(&B->calls)))
            return -1;
        x->src = s;
        x->dst = t;
        x->name = name;
        *t_out = t;
        return 0;
    }
    if (type == (PyTypeObject *)B->types[T_SEQ] || type == (PyTypeObject *)B->types[T_ALT]) {
        int is_alt = type == (PyTypeObject *)B->types[T_ALT];
        PyObject *items = tuple_attr(e, "items");
        if (!items)
            return -1;
        int ok = -1;
        int32_t cur = s, a, b;
        if (is_alt && new_state(B, &t) < 0)
            goto done;
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(items); i++) {
            if (build(B, PyTuple_GET_ITEM(items, i), depth + 1, &a, &b) < 0)
                goto done;
            if (is_alt ? add_eps(B, s, a) < 0 || add_eps(B, b, t) < 0 : add_eps(B, cur, a) < 0)
                goto done;
            cur = b;
        }
        *t_out = is_alt ? t : cur;
        ok = 0;
    done:
        Py_DECREF(items);
        return ok;
    }
    if (type == (PyTypeObject *)B->types[T_FSM])
        return build_fsm(B, e, s, t_out);
    if (type == (PyTypeObject *)B->types[T_REPEAT])
        return build_repeat(B, e, depth, s, t_out);
    B->status = 4;
    B->info = PyUnicode_FromString(_PyType_Name(type));
    return -1;
}

/* The built arcs as an Nfa (arcs of a state in the order added, as _build's lists). */
static int nfa_pack(Nfa *f, Builder *B, int32_t final) {
    memset(f, 0, sizeof(*f));
    Py_ssize_t n = B->n, ne = B->eps.len, nb = B->edges.len, nc = B->calls.len;
    PyObject *rank;
    if (nfa_alloc(f, n, ne, nb, nc, &rank) < 0)
        return -1;
    /* counting sort by source state, stable */
    for (Py_ssize_t i = 0; i < ne; i++)
        f->eps_at[AT(B->eps, Arc, i).src + 1]++;
    for (Py_ssize_t i = 0; i < nb; i++)
        f->edge_at[AT(B->edges, ByteArc, i).src + 1]++;
    for (Py_ssize_t i = 0; i < nc; i++)
        f->call_at[AT(B->calls, CallArc, i).src + 1]++;
    for (Py_ssize_t q = 0; q < n; q++) {
        f->eps_at[q + 1] += f->eps_at[q];
        f->edge_at[q + 1] += f->edge_at[q];
        f->call_at[q + 1] += f->call_at[q];
    }
    Py_ssize_t *fill = PyMem_Malloc((n + 1) * sizeof(Py_ssize_t));
    if (!fill) {
        Py_DECREF(rank);
        PyErr_NoMemory();
        return -1;
    }
    memcpy(fill, f->eps_at, (n + 1) * sizeof(Py_ssize_t));
    for (Py_ssize_t i = 0; i < ne; i++) {
        const Arc *x = &AT(B->eps, Arc, i);
        f->eps[fill[x->src]++] = x->dst;
    }
    memcpy(fill, f->edge_at, (n + 1) * sizeof(Py_ssize_t));
    for (Py_ssize_t i = 0; i < nb; i++) {
        const ByteArc *x = &AT(B->edges, ByteArc, i);
        Py_ssize_t j = fill[x->src]++;
        f->edge_tgt[j] = x->dst;
        f->edge_mask[j] = x->m;
        f->width[x->src] += (int32_t)(__builtin_popcountll(x->m.w[0]) + __builtin_popcountll(x->m.w[1]) +
                                      __builtin_popcountll(x->m.w[2]) + __builtin_popcountll(x->m.w[3]));
        f->important[x->src] = 1;
    }
    int ok = -1;
    memcpy(fill, f->call_at, (n + 1) * sizeof(Py_ssize_t));
    for (Py_ssize_t i = 0; i < nc; i++) {
        const CallArc *x = &AT(B->calls, CallArc, i);
        Py_ssize_t j = fill[x->src]++;
        f->call_tgt[j] = x->dst;
        f->width[x->src]++;
        f->important[x->src] = 1;
        if ((f->call_rank[j] = callee_id(f, rank, x->name)) < 0)
            goto out;
    }
    f->important[final] = 1;
    ok = rank_callees(f, rank);
out:
    PyMem_Free(fill);
    Py_DECREF(rank);
    return ok;
}

static PyObject *compile_expr(PyObject *self, PyObject *args) {
    PyObject *expr, *types, *result = NULL;
    Py_ssize_t max_states;
    Builder B;
    memset(&B, 0, sizeof(B));
    B.eps.size = sizeof(Arc);
    B.edges.size = sizeof(ByteArc);
    B.calls.size = sizeof(CallArc);
    int as_rows = 0;
    if (!PyArg_ParseTuple(args, "OO!nnn|p", &expr, &PyTuple_Type, &types, &B.max_unroll, &max_states, &B.room,
                          &as_rows))
        return NULL;
    if (PyTuple_GET_SIZE(types) != N_TYPES) {
        PyErr_SetString(PyExc_ValueError, "types must be (Lit, ByteClass, Ref, Seq, Alt, Repeat, Fsm)");
        return NULL;
    }
    for (int i = 0; i < N_TYPES; i++)
        B.types[i] = PyTuple_GET_ITEM(types, i);
    Nfa f;
    memset(&f, 0, sizeof(f));
    int32_t s, t;
    if (build(&B, expr, 0, &s, &t) < 0) {
        if (!PyErr_Occurred())
            result = Py_BuildValue("(innOOOnO)", B.status, (Py_ssize_t)0, (Py_ssize_t)0, Py_None, Py_None, Py_None,
                                   B.n, B.info ? B.info : Py_None);
        goto out;
    }
    if (nfa_pack(&f, &B, t) < 0)
        goto out;
    PyObject *got = subsets(&f, s, t, max_states, B.room, as_rows);
    if (got) {
        PyObject *tail = Py_BuildValue("(nO)", B.n, Py_None);
        result = tail ? PySequence_Concat(got, tail) : NULL;
        Py_XDECREF(tail);
        Py_DECREF(got);
    }
out:
    nfa_free(&f);
    PyMem_Free(B.eps.data);
    PyMem_Free(B.edges.data);
    PyMem_Free(B.calls.data);
    Py_XDECREF(B.info);
    return result;
}


/* ---------------------------------------------------------------- grammar liveness
 *
 * structgen/core/liveness.py's liveness, in C: which rules match some string (the least
 * fixpoint) and, per rule, the states from which an accepting state can be reached by bytes or
 * by calls to rules that match. On the largest JSON schemas (7,000 rules, 72,000 states,
 * 60,000 call edges) the Python search took ~150 ms, a tenth of the compile, most of it making
 * per-state lists of backward edges; here the edges are flat arrays grouped by state. The
 * result is the Python's (the fixpoint is unique). States are numbered across the grammar:
 * rule i's state q is base[i] + q.
 */
typedef struct {
    int32_t key, a, b, c;
} Edge4;

static int edge_push(Buf *b, int32_t key, int32_t x, int32_t y, int32_t z) {
    Edge4 *e = buf_push(b);
    if (!e) return -1;
    e->key = key;
    e->a = x;
    e->b = y;
    e->c = z;
    return 0;
}

/* The edges of b grouped by key (0 <= key < n), stably: start[key] .. start[key + 1] in *out. */
static int group_by_key(const Buf *b, Py_ssize_t n, int32_t **start_out, Edge4 **out) {
    int32_t *start = PyMem_Calloc(n + 2, sizeof(int32_t));
    int32_t *fill = PyMem_Malloc((n + 1) * sizeof(int32_t));
    Edge4 *sorted = PyMem_Malloc((b->len + 1) * sizeof(Edge4));
    if (!start || !fill || !sorted) {
        PyMem_Free(start);
        PyMem_Free(fill);
        PyMem_Free(sorted);
        PyErr_NoMemory();
        return -1;
    }
    const Edge4 *in = (const Edge4 *)b->data;
    for (Py_ssize_t k = 0; k < b->len; k++) start[in[k].key + 1]++;
    for (Py_ssize_t k = 0; k < n; k++) start[k + 1] += start[k];
    memcpy(fill, start, n * sizeof(int32_t));
    for (Py_ssize_t k = 0; k < b->len; k++) sorted[fill[in[k].key]++] = in[k];
    PyMem_Free(fill);
    *start_out = start;
    *out = sorted;
    return 0;
}

/* A grammar's rule automata (trans, calls, accept: one list entry per rule) as flat arrays,
 * states numbered across the grammar: rule i's state q is base[i] + q. Read once per kernel call
 * by the whole-grammar analyses below. Rules where skip[i] is not None (skip may be NULL) keep
 * their accept flags but no edges: their caller knows their answer already. */
typedef struct {
    Py_ssize_t n, total;
    int32_t *base;
    char *accept;
    Mask *bytes;                    /* per state: the bytes its row reads */
    int32_t *tstart, *target;       /* per state: the distinct states its row goes to */
    int32_t *cstart, *callee, *ret; /* per state: its calls, the rule called and the state (in the
                                     * caller) returned to */
} Rules;

static void rules_free(Rules *g) {
    PyMem_Free(g->base);
    PyMem_Free(g->accept);
    PyMem_Free(g->bytes);
    PyMem_Free(g->tstart);
    PyMem_Free(g->target);
    PyMem_Free(g->cstart);
    PyMem_Free(g->callee);
    PyMem_Free(g->ret);
}

/* State q's calls (a sequence of (callee, return state) pairs) into callee and ret. */
static int rules_read_calls(Rules *g, PyObject *calls, int32_t q, int32_t states, Buf *callee, Buf *ret) {
    PyObject *qc = PySequence_Fast(PySequence_Fast_GET_ITEM(calls, q), "calls of a state");
    if (!qc)
        return -1;
    for (Py_ssize_t k = 0; k < PySequence_Fast_GET_SIZE(qc); k++) {
        PyObject *edge = PySequence_Fast_GET_ITEM(qc, k);
        long c = -1, t = -1;
        if (PyTuple_Check(edge) && PyTuple_GET_SIZE(edge) == 2) {
            c = PyLong_AsLong(PyTuple_GET_ITEM(edge, 0));
            t = PyLong_AsLong(PyTuple_GET_ITEM(edge, 1));
        }
        int32_t *pc = (c < 0 || c >= g->n || t < 0 || t >= states) ? NULL : buf_push(callee);
        int32_t *pt = pc ? buf_push(ret) : NULL;
        if (!pt) {
            Py_DECREF(qc);
            return -1;
        }
        *pc = (int32_t)c;
        *pt = (int32_t)t;
    }
    Py_DECREF(qc);
    return 0;
}

/* A rule's rows as rows_read packs them: int32 states and an int32 0 (so the masks fall on
 * 8-byte words), then per state its 32-byte mask of
 * the bytes it reads, then int32 tstart[states + 1], then the int32 distinct targets of each
 * state (tstart[q] .. tstart[q + 1]). The number of states, or -1 (an error set) when the bytes
 * are not such a table. */
static Py_ssize_t packed_states(PyObject *packed) {
    const char *buf = PyBytes_AS_STRING(packed);
    Py_ssize_t len = PyBytes_GET_SIZE(packed), states = -1;
    if (len >= 12) {
        int32_t n;
        memcpy(&n, buf, 4);
        Py_ssize_t head = 8 + (Py_ssize_t)n * (Py_ssize_t)(sizeof(Mask) + 4) + 4;
        if (n >= 0 && n < INT32_MAX / 64 && len >= head) {
            const int32_t *tstart = (const int32_t *)(buf + 8 + (Py_ssize_t)n * sizeof(Mask));
            const int32_t *target = (const int32_t *)(buf + head);
            int ok = tstart[0] == 0 && len == head + (Py_ssize_t)tstart[n] * 4;
            for (int32_t q = 0; ok && q < n; q++)
                ok = tstart[q] <= tstart[q + 1];
            for (int32_t k = 0; ok && k < tstart[n]; k++)
                ok = target[k] >= 0 && target[k] < n;
            if (ok)
                states = n;
        }
    }
    if (states < 0)
        PyErr_SetString(PyExc_ValueError, "rule automata: malformed packed rows");
    return states;
}

/* One row of a rule with `states` states (a {byte: target} dict): its bytes into *m, its
 * distinct targets plus `base` onto target (stamp[t] == mark: t already pushed for this row).
 * 0, or -1 (an error set only where reading a number failed) for a malformed row. */
static int row_read(PyObject *row, int32_t states, int32_t base, int32_t mark, Mask *m, int32_t *stamp, Buf *target) {
    PyObject *key, *value;
    Py_ssize_t pos = 0;
    if (!PyDict_Check(row))
        return -1;
    while (PyDict_Next(row, &pos, &key, &value)) {
        long b = PyLong_AsLong(key), t = PyLong_AsLong(value);
        if (b < 0 || b > 255 || t < 0 || t >= states)
            return -1;
        m->w[b >> 6] |= (uint64_t)1 << (b & 63);
        if (stamp[t] != mark) { /* up to 256 bytes a row, most to a few targets */
            stamp[t] = mark;
            int32_t *slot = buf_push(target);
            if (!slot)
                return -1;
            *slot = base + (int32_t)t;
        }
    }
    return 0;
}

/* rows_read(trans) -> bytes: one rule's rows (a list of {byte: target} dicts) packed as
 * packed_states reads them, which the whole-grammar analyses below take in place of the dicts:
 * a rule's automaton is cached across grammars, and reading its dicts again was most of
 * first_and_follow (a SQL grammar's name tokens are ~1,000 states of ~60 bytes). */
static PyObject *rows_read(PyObject *self, PyObject *arg) {
    PyObject *rows = PySequence_Fast(arg, "rows");
    if (!rows)
        return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(rows);
    PyObject *out = NULL;
    Mask *masks = PyMem_Calloc(n ? n : 1, sizeof(Mask));
    int32_t *tstart = PyMem_Malloc((n + 1) * sizeof(int32_t)), *stamp = PyMem_Malloc((n ? n : 1) * sizeof(int32_t));
    Buf target = {NULL, 0, 0, sizeof(int32_t)};
    if (!masks || !tstart || !stamp) {
        PyErr_NoMemory();
        goto done;
    }
    if (n >= INT32_MAX / 64) {
        PyErr_SetString(PyExc_ValueError, "rows_read: too many states");
        goto done;
    }
    for (Py_ssize_t q = 0; q < n; q++)
        stamp[q] = -1;
    for (Py_ssize_t q = 0; q < n; q++) {
        tstart[q] = (int32_t)target.len;
        if (row_read(PySequence_Fast_GET_ITEM(rows, q), (int32_t)n, 0, (int32_t)q, &masks[q], stamp, &target) < 0) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_ValueError, "rows_read: a row is not a dict of bytes to states");
            goto done;
        }
    }
    tstart[n] = (int32_t)target.len;
    Py_ssize_t size = 8 + n * (Py_ssize_t)sizeof(Mask) + (n + 1) * 4 + target.len * 4;
    out = PyBytes_FromStringAndSize(NULL, size);
    if (!out)
        goto done;
    char *w = PyBytes_AS_STRING(out);
    int32_t head[2] = {(int32_t)n, 0};
    memcpy(w, head, 8);
    memcpy(w + 8, masks, n * sizeof(Mask));
    memcpy(w + 8 + n * sizeof(Mask), tstart, (n + 1) * 4);
    if (target.len)
        memcpy(w + 8 + n * sizeof(Mask) + (n + 1) * 4, target.data, target.len * 4);
done:
    Py_DECREF(rows);
    PyMem_Free(masks);
    PyMem_Free(tstart);
    PyMem_Free(stamp);
    PyMem_Free(target.data);
    return out;
}

/* Rule i's rows and calls into g (state offsets and accept flags already there); rows is a
 * sequence of dicts, or the bytes of rows_read. */
static int rules_read_edges(Rules *g, Py_ssize_t i, PyObject *rows, PyObject *calls, int32_t *stamp, Buf *target,
                            Buf *callee, Buf *ret) {
    int32_t base = g->base[i], states = g->base[i + 1] - base;
    int packed = PyBytes_CheckExact(rows);
    const char *buf = packed ? PyBytes_AS_STRING(rows) : NULL;
    const char *pmask = packed ? buf + 8 : NULL;
    const int32_t *ptstart = packed ? (const int32_t *)(buf + 8 + (Py_ssize_t)states * sizeof(Mask)) : NULL;
    const int32_t *ptarget = packed ? ptstart + states + 1 : NULL;
    for (int32_t q = 0; q < states; q++) {
        g->tstart[base + q] = (int32_t)target->len;
        g->cstart[base + q] = (int32_t)callee->len;
        if (packed) { /* checked by packed_states: masks and targets in range */
            memcpy(&g->bytes[base + q], pmask + (Py_ssize_t)q * sizeof(Mask), sizeof(Mask));
            for (int32_t k = ptstart[q]; k < ptstart[q + 1]; k++) {
                int32_t *slot = buf_push(target);
                if (!slot)
                    return -1;
                *slot = base + ptarget[k];
            }
        } else if (row_read(PySequence_Fast_GET_ITEM(rows, q), states, base, base + q, &g->bytes[base + q],
                            stamp + base, target) < 0)
            return -1;
        if (rules_read_calls(g, calls, q, states, callee, ret) < 0)
            return -1;
    }
    return 0;
}

static int rules_read(Rules *g, PyObject *trans_l, PyObject *calls_l, PyObject *accept_l, PyObject *skip_l) {
    memset(g, 0, sizeof(*g));
    Py_ssize_t n = g->n = PyList_GET_SIZE(trans_l);
    if (PyList_GET_SIZE(calls_l) != n || PyList_GET_SIZE(accept_l) != n || (skip_l && PyList_GET_SIZE(skip_l) != n)) {
        PyErr_SetString(PyExc_ValueError, "rule automata: one entry per rule in every list");
        return -1;
    }
    Buf target = {0}, callee = {0}, ret = {0};
    target.size = callee.size = ret.size = sizeof(int32_t);
    int32_t *stamp = NULL;
    int status = -1;
    g->base = PyMem_Malloc((n + 1) * sizeof(int32_t));
    if (!g->base)
        goto nomem;
    for (Py_ssize_t i = 0; i < n; i++) {
        g->base[i] = (int32_t)g->total;
        PyObject *rows = PyList_GET_ITEM(trans_l, i);
        Py_ssize_t states = PyBytes_CheckExact(rows) ? packed_states(rows) : PySequence_Length(rows);
        if (states < 0)
            goto out;
        g->total += states;
        if (g->total > INT32_MAX / 2) {
            PyErr_SetString(PyExc_ValueError, "rule automata: too many states");
            goto out;
        }
    }
    g->base[n] = (int32_t)g->total;
    g->accept = PyMem_Calloc(g->total + 1, 1);
    g->bytes = PyMem_Calloc(g->total + 1, sizeof(Mask));
    g->tstart = PyMem_Calloc(g->total + 1, sizeof(int32_t));
    g->cstart = PyMem_Calloc(g->total + 1, sizeof(int32_t));
    stamp = PyMem_Malloc((g->total + 1) * sizeof(int32_t));
    if (!g->accept || !g->bytes || !g->tstart || !g->cstart || !stamp)
        goto nomem;
    for (Py_ssize_t t = 0; t < g->total; t++)
        stamp[t] = -1;
    for (Py_ssize_t i = 0; i < n; i++) {
        int32_t base = g->base[i], states = g->base[i + 1] - base;
        int skip = skip_l && PyList_GET_ITEM(skip_l, i) != Py_None;
        PyObject *accept = PySequence_Fast(PyList_GET_ITEM(accept_l, i), "accept");
        PyObject *given = PyList_GET_ITEM(trans_l, i), *rows = NULL;
        if (accept && !skip && PyBytes_CheckExact(given)) {
            rows = given;
            Py_INCREF(rows);
        } else if (accept && !skip)
            rows = PySequence_Fast(given, "rows");
        PyObject *calls = rows ? PySequence_Fast(PyList_GET_ITEM(calls_l, i), "calls") : NULL;
        int bad = !accept || PySequence_Fast_GET_SIZE(accept) != states || (!skip && !calls) ||
                  (calls && PySequence_Fast_GET_SIZE(calls) != states);
        for (int32_t q = 0; q < states && !bad; q++) {
            int a = PyObject_IsTrue(PySequence_Fast_GET_ITEM(accept, q));
            bad = a < 0;
            g->accept[base + q] = (char)(a > 0);
        }
        for (int32_t q = 0; q < states && skip; q++) { /* no edges */
            g->tstart[base + q] = (int32_t)target.len;
            g->cstart[base + q] = (int32_t)callee.len;
        }
        bad = bad || (!skip && rules_read_edges(g, i, rows, calls, stamp, &target, &callee, &ret) < 0);
        Py_XDECREF(accept);
        Py_XDECREF(rows);
        Py_XDECREF(calls);
        if (bad) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_ValueError, "rule automata: a malformed row, call or accept flag");
            goto out;
        }
    }
    g->tstart[g->total] = (int32_t)target.len;
    g->cstart[g->total] = (int32_t)callee.len;
    g->target = (int32_t *)target.data;
    g->callee = (int32_t *)callee.data;
    g->ret = (int32_t *)ret.data;
    target.data = callee.data = ret.data = NULL;
    status = 0;
    goto out;
nomem:
    PyErr_NoMemory();
out:
    PyMem_Free(stamp);
    PyMem_Free(target.data);
    PyMem_Free(callee.data);
    PyMem_Free(ret.data);
    if (status < 0)
        rules_free(g);
    return status;
}

typedef struct {
    char *live, *alive;
    int32_t *base, *stack, *turned;
    Py_ssize_t n_turned;
    int32_t *bstart, *cstart, *wstart;
    /* by target state: (target, source) of bytes, (target, source, callee) of calls;
     * by callee: (callee, caller rule, call state, return state) */
    Edge4 *bback, *cback, *wait;
    PyObject *always, *groups;
} Live;

/* Mark live every state that reaches one of the sp states on the stack (already marked). */
static void live_spread(Live *L, Py_ssize_t sp) {
    while (sp) {
        int32_t t = L->stack[--sp];
        for (int32_t k = L->bstart[t]; k < L->bstart[t + 1]; k++) {
            int32_t p = L->bback[k].a;
            if (!L->live[p]) {
                L->live[p] = 1;
                L->stack[sp++] = p;
            }
        }
        for (int32_t k = L->cstart[t]; k < L->cstart[t + 1]; k++) {
            int32_t p = L->cback[k].a;
            if (L->alive[L->cback[k].b] && !L->live[p]) {
                L->live[p] = 1;
                L->stack[sp++] = p;
            }
        }
    }
}

/* liveness._matches_given: a counted rule with min 0 always matches (always[i]); an unordered
 * one also needs, per required slot, a matching callee that fills it (groups[i]: a tuple of
 * callee tuples, one per required slot, or None). */
static void live_check(Live *L, Py_ssize_t i) {
    if (L->alive[i]) return;
    int ok = PyList_GET_ITEM(L->always, i) == Py_True;
    if (!ok) {
        PyObject *groups = PyList_GET_ITEM(L->groups, i);
        if (groups != Py_None) {
            for (Py_ssize_t g = 0; g < PyTuple_GET_SIZE(groups); g++) {
                PyObject *group = PyTuple_GET_ITEM(groups, g);
                int any = 0;
                for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(group) && !any; k++)
                    any = L->alive[PyLong_AsSsize_t(PyTuple_GET_ITEM(group, k))];
                if (!any) return;
            }
        }
        ok = L->live[L->base[i]];
    }
    if (ok) {
        L->alive[i] = 1;
        L->turned[L->n_turned++] = (int32_t)i;
    }
}

static PyObject *liveness_kernel(PyObject *self, PyObject *args) {
    PyObject *trans_l, *calls_l, *accept_l, *solo_l, *always_l, *groups_l;
    if (!PyArg_ParseTuple(args, "O!O!O!O!O!O!", &PyList_Type, &trans_l, &PyList_Type, &calls_l, &PyList_Type,
                          &accept_l, &PyList_Type, &solo_l, &PyList_Type, &always_l, &PyList_Type, &groups_l))
        return NULL;
    Rules g;
    if (rules_read(&g, trans_l, calls_l, accept_l, solo_l) < 0)
        return NULL;
    Py_ssize_t n = g.n, total = g.total;
    Live L;
    memset(&L, 0, sizeof L);
    L.always = always_l;
    L.groups = groups_l;
    L.base = g.base;
    Buf bb = {0}, cb = {0}, wb = {0};
    bb.size = cb.size = wb.size = sizeof(Edge4);
    PyObject *result = NULL, *alive = NULL, *live = NULL;
    if (PyList_GET_SIZE(always_l) != n || PyList_GET_SIZE(groups_l) != n) {
        PyErr_SetString(PyExc_ValueError, "liveness: one entry per rule in every list");
        goto done;
    }
    L.live = PyMem_Malloc(total + 1);
    L.alive = PyMem_Calloc(n + 1, 1);
    L.stack = PyMem_Malloc((total + 1) * sizeof(int32_t));
    L.turned = PyMem_Malloc((n + 1) * sizeof(int32_t));
    if (!L.live || !L.alive || !L.stack || !L.turned)
        goto nomem;
    memcpy(L.live, g.accept, total);
    for (Py_ssize_t i = 0; i < n; i++) { /* known live states (a rule that calls nothing) */
        PyObject *solo = PyList_GET_ITEM(solo_l, i), *flags;
        if (solo == Py_None)
            continue;
        flags = PySequence_Fast(solo, "live states");
        int bad = !flags || PySequence_Fast_GET_SIZE(flags) != g.base[i + 1] - g.base[i];
        for (int32_t q = 0; !bad && q < g.base[i + 1] - g.base[i]; q++) {
            int v = PyObject_IsTrue(PySequence_Fast_GET_ITEM(flags, q));
            bad = v < 0;
            L.live[g.base[i] + q] = (char)(v > 0);
        }
        Py_XDECREF(flags);
        if (bad) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_ValueError, "liveness: one live flag per state");
            goto done;
        }
    }
    for (Py_ssize_t i = 0; i < n; i++) /* backward edges: bytes and calls by target, calls by callee */
        for (int32_t s = g.base[i]; s < g.base[i + 1]; s++) {
            for (int32_t k = g.tstart[s]; k < g.tstart[s + 1]; k++)
                if (edge_push(&bb, g.target[k], s, 0, 0) < 0)
                    goto done;
            for (int32_t k = g.cstart[s]; k < g.cstart[s + 1]; k++) {
                int32_t t = g.base[i] + g.ret[k];
                if (edge_push(&cb, t, s, g.callee[k], 0) < 0 || edge_push(&wb, g.callee[k], (int32_t)i, s, t) < 0)
                    goto done;
            }
        }
    if (group_by_key(&bb, total, &L.bstart, &L.bback) < 0 || group_by_key(&cb, total, &L.cstart, &L.cback) < 0 ||
        group_by_key(&wb, n, &L.wstart, &L.wait) < 0)
        goto done;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (PyList_GET_ITEM(solo_l, i) == Py_None) {
            Py_ssize_t sp = 0;
            for (int32_t g = L.base[i]; g < L.base[i + 1]; g++)
                if (L.live[g]) L.stack[sp++] = g;
            live_spread(&L, sp);
        }
        live_check(&L, i);
    }
    while (L.n_turned) {
        int32_t c = L.turned[--L.n_turned];
        for (int32_t k = L.wstart[c]; k < L.wstart[c + 1]; k++) {
            const Edge4 *w = &L.wait[k]; /* the call from state b returns to state c: open it */
            if (L.live[w->c] && !L.live[w->b]) {
                L.live[w->b] = 1;
                L.stack[0] = w->b;
                live_spread(&L, 1);
            }
            live_check(&L, w->a);
        }
    }
    if (PyErr_Occurred()) goto done;
    alive = PyList_New(n);
    live = PyList_New(n);
    if (!alive || !live) goto done;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *flag = L.alive[i] ? Py_True : Py_False, *solo = PyList_GET_ITEM(solo_l, i), *states = solo;
        Py_INCREF(flag);
        PyList_SET_ITEM(alive, i, flag);
        if (solo == Py_None) {
            states = PyList_New(L.base[i + 1] - L.base[i]);
            if (!states) goto done;
            for (int32_t g = L.base[i]; g < L.base[i + 1]; g++) {
                PyObject *v = L.live[g] ? Py_True : Py_False;
                Py_INCREF(v);
                PyList_SET_ITEM(states, g - L.base[i], v);
            }
        } else {
            Py_INCREF(states);
        }
        PyList_SET_ITEM(live, i, states);
    }
    result = PyTuple_Pack(2, alive, live);
    goto done;
nomem:
    PyErr_NoMemory();
done:
    Py_XDECREF(alive);
    Py_XDECREF(live);
    rules_free(&g);
    PyMem_Free(L.live);
    PyMem_Free(L.alive);
    PyMem_Free(L.stack);
    PyMem_Free(L.turned);
    PyMem_Free(L.bstart);
    PyMem_Free(L.cstart);
    PyMem_Free(L.wstart);
    PyMem_Free(L.bback);
    PyMem_Free(L.cback);
    PyMem_Free(L.wait);
    PyMem_Free(bb.data);
    PyMem_Free(cb.data);
    PyMem_Free(wb.data);
    return result;
}


/* ---------------------------------------------------------------- first and follow bytes
 *
 * structgen/core/grammar_facts.py's first_and_follow, in C: the bytes each rule may read first
 * (through calls, skipping nullable ones), then the bytes that may come right after each rule
 * returns, as 256-bit masks; both are least fixpoints over a dependency graph (a worklist). On
 * the largest JSON schemas the Python sets took ~100 ms; the answer is the same sets.
 */
typedef struct {
    Rules g;
    char *null, *counted;
    int32_t *seen, *todo, *rule_seen; /* scratch for one reach: stamps and a stack */
    int32_t stamp;
} Reach;

static void mask_or(Mask *a, const Mask *b) {
    for (int k = 0; k < 4; k++) a->w[k] |= b->w[k];
}

static int mask_within(const Mask *a, const Mask *b) {
    for (int k = 0; k < 4; k++)
        if (a->w[k] & ~b->w[k]) return 0;
    return 1;
}

/* grammar_facts._reach from rule i's state q: bytes into *out, callees appended to calls
 * (each once), and whether it may complete without reading. */
static int reach(Reach *R, Py_ssize_t i, int32_t q, Mask *out, Buf *calls) {
    int32_t base = R->g.base[i], sp = 0, stamp = ++R->stamp;
    int done = 0;
    R->seen[base + q] = stamp;
    R->todo[sp++] = base + q;
    while (sp) {
        int32_t s = R->todo[--sp];
        mask_or(out, &R->g.bytes[s]);
        done |= R->g.accept[s];
        for (int32_t k = R->g.cstart[s]; k < R->g.cstart[s + 1]; k++) {
            int32_t c = R->g.callee[k], t = base + R->g.ret[k];
            if (R->rule_seen[c] != stamp) {
                R->rule_seen[c] = stamp;
                int32_t *slot = buf_push(calls);
                if (!slot) return -1;
                *slot = c;
            }
            if (R->null[c] && R->seen[t] != stamp) {
                R->seen[t] = stamp;
                R->todo[sp++] = t;
            }
        }
    }
    return done;
}

/* The least fixpoint of sets[j] >= sets[i] for each flow (i -> j), flows grouped by i. */
static int propagate(Mask *sets, Py_ssize_t n, const Buf *flows) {
    int32_t *start = NULL;
    Edge4 *by = NULL;
    char *queued = PyMem_Malloc(n + 1);
    int32_t *todo = PyMem_Malloc((n + 1) * sizeof(int32_t));
    if (!queued || !todo || group_by_key(flows, n, &start, &by) < 0) {
        PyMem_Free(queued);
        PyMem_Free(todo);
        if (!PyErr_Occurred()) PyErr_NoMemory();
        return -1;
    }
    Py_ssize_t sp = 0;
    for (Py_ssize_t i = n - 1; i >= 0; i--) { /* popped from 0 up, as the Python's list */
        todo[sp++] = (int32_t)i;
        queued[i] = 1;
    }
    while (sp) {
        int32_t i = todo[--sp];
        queued[i] = 0;
        for (int32_t k = start[i]; k < start[i + 1]; k++) {
            int32_t j = by[k].a;
            if (!mask_within(&sets[i], &sets[j])) {
                mask_or(&sets[j], &sets[i]);
                if (!queued[j]) {
                    queued[j] = 1;
                    todo[sp++] = j;
                }
            }
        }
    }
    PyMem_Free(queued);
    PyMem_Free(todo);
    PyMem_Free(start);
    PyMem_Free(by);
    return 0;
}

static PyObject *first_and_follow_kernel(PyObject *self, PyObject *args) {
    PyObject *trans_l, *calls_l, *accept_l, *null_l, *counted_l;
    if (!PyArg_ParseTuple(args, "O!O!O!O!O!", &PyList_Type, &trans_l, &PyList_Type, &calls_l, &PyList_Type,
                          &accept_l, &PyList_Type, &null_l, &PyList_Type, &counted_l))
        return NULL;
    Reach R;
    memset(&R, 0, sizeof R);
    if (rules_read(&R.g, trans_l, calls_l, accept_l, NULL) < 0)
        return NULL;
    Py_ssize_t n = R.g.n, total = R.g.total;
    Buf calls = {0}, flows = {0};
    calls.size = sizeof(int32_t);
    flows.size = sizeof(Edge4);
    Mask *first = NULL, *follow = NULL, *after = NULL;
    char *after_done = NULL;
    PyObject *result = NULL, *interned = NULL;
    if (PyList_GET_SIZE(null_l) != n || PyList_GET_SIZE(counted_l) != n) {
        PyErr_SetString(PyExc_ValueError, "first_and_follow: one entry per rule in every list");
        goto done;
    }
    R.null = PyMem_Malloc(n + 1);
    R.counted = PyMem_Malloc(n + 1);
    R.rule_seen = PyMem_Calloc(n + 1, sizeof(int32_t));
    R.seen = PyMem_Calloc(total + 1, sizeof(int32_t));
    R.todo = PyMem_Malloc((total + 1) * sizeof(int32_t));
    first = PyMem_Calloc(n + 1, sizeof(Mask));
    follow = PyMem_Calloc(n + 1, sizeof(Mask));
    after = PyMem_Calloc(total + 1, sizeof(Mask));
    after_done = PyMem_Calloc(total + 1, 1); /* 0: not yet, 1: may not complete, 2: may */
    if (!R.null || !R.counted || !R.rule_seen || !R.seen || !R.todo || !first || !follow || !after || !after_done)
        goto nomem;
    for (Py_ssize_t i = 0; i < n; i++) {
        R.null[i] = PyList_GET_ITEM(null_l, i) == Py_True;
        R.counted[i] = PyList_GET_ITEM(counted_l, i) == Py_True;
    }
    for (Py_ssize_t i = 0; i < n; i++) { /* first bytes, and whose first bytes include whose */
        calls.len = 0;
        if (reach(&R, i, 0, &first[i], &calls) < 0) goto done;
        for (Py_ssize_t k = 0; k < calls.len; k++)
            if (edge_push(&flows, ((int32_t *)calls.data)[k], (int32_t)i, 0, 0) < 0) goto done;
    }
    if (propagate(first, n, &flows) < 0) goto done;
    flows.len = 0;
    for (Py_ssize_t i = 0; i < n; i++) { /* what follows each call, and who returns through whom */
        for (int32_t s = R.g.base[i]; s < R.g.base[i + 1]; s++) {
            for (int32_t k = R.g.cstart[s]; k < R.g.cstart[s + 1]; k++) {
                int32_t c = R.g.callee[k], t = R.g.base[i] + R.g.ret[k];
                if (!after_done[t]) {
                    Mask m = {{0, 0, 0, 0}};
                    calls.len = 0;
                    int done = reach(&R, i, R.g.ret[k], &m, &calls);
                    if (done < 0) goto done;
                    if (done && R.counted[i] && reach(&R, i, 0, &m, &calls) < 0) goto done;
                    for (Py_ssize_t d = 0; d < calls.len; d++) mask_or(&m, &first[((int32_t *)calls.data)[d]]);
                    after[t] = m;
                    after_done[t] = done ? 2 : 1;
                }
                mask_or(&follow[c], &after[t]);
                if (after_done[t] == 2 && edge_push(&flows, (int32_t)i, c, 0, 0) < 0) goto done;
            }
        }
    }
    if (propagate(follow, n, &flows) < 0) goto done;
    /* one frozenset per distinct mask: most rules share a few follow sets */
    interned = PyDict_New();
    result = interned ? PyList_New(n) : NULL;
    for (Py_ssize_t i = 0; result && i < n; i++) {
        PyObject *key = PyBytes_FromStringAndSize((const char *)&follow[i], sizeof(Mask));
        PyObject *set = key ? PyDict_GetItemWithError(interned, key) : NULL;
        if (set) {
            Py_INCREF(set);
        } else if (key && !PyErr_Occurred()) {
            PyObject *members = PyList_New(0);
            for (int b = 0; members && b < 256; b++) {
                if (!(follow[i].w[b >> 6] >> (b & 63) & 1)) continue;
                PyObject *v = PyLong_FromLong(b);
                if (!v || PyList_Append(members, v) < 0) Py_CLEAR(members);
                Py_XDECREF(v);
            }
            set = members ? PyFrozenSet_New(members) : NULL;
            Py_XDECREF(members);
            if (set && PyDict_SetItem(interned, key, set) < 0) Py_CLEAR(set);
        }
        Py_XDECREF(key);
        if (!set) {
            Py_CLEAR(result);
            break;
        }
        PyList_SET_ITEM(result, i, set);
    }
    goto done;
nomem:
    PyErr_NoMemory();
done:
    Py_XDECREF(interned);
    rules_free(&R.g);
    PyMem_Free(R.null);
    PyMem_Free(R.counted);
    PyMem_Free(R.rule_seen);
    PyMem_Free(R.seen);
    PyMem_Free(R.todo);
    PyMem_Free(first);
    PyMem_Free(follow);
    PyMem_Free(after);
    PyMem_Free(after_done);
    PyMem_Free(calls.data);
    PyMem_Free(flows.data);
    return result;
}


/* ---------------------------------------------------------------- strongly connected components
 *
 * grammar_facts._components (Tarjan, iterative), in C, step for step: the same components in
 * the same order, each after those it reaches. Half of the rule fingerprints' time on the
 * largest JSON schemas (~40 ms of ~80) was this loop in Python.
 */
static PyObject *components_kernel(PyObject *self, PyObject *args) {
    PyObject *succ_l;
    if (!PyArg_ParseTuple(args, "O!", &PyList_Type, &succ_l)) return NULL;
    Py_ssize_t n = PyList_GET_SIZE(succ_l);
    Buf targets = {0}, work = {0};
    targets.size = sizeof(int32_t);
    work.size = 2 * sizeof(int32_t);
    int32_t *start = PyMem_Malloc((n + 1) * sizeof(int32_t)), *index = PyMem_Malloc((n + 1) * sizeof(int32_t));
    int32_t *low = PyMem_Malloc((n + 1) * sizeof(int32_t)), *stack = PyMem_Malloc((n + 1) * sizeof(int32_t));
    char *on_stack = PyMem_Calloc(n + 1, 1);
    PyObject *out = NULL;
    Py_ssize_t sp = 0;
    int32_t counter = 0;
    if (!start || !index || !low || !stack || !on_stack) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t v = 0; v < n; v++) {
        PyObject *fast = PySequence_Fast(PyList_GET_ITEM(succ_l, v), "successors");
        if (!fast) goto done;
        start[v] = (int32_t)targets.len;
        for (Py_ssize_t k = 0; k < PySequence_Fast_GET_SIZE(fast); k++) {
            long w = PyLong_AsLong(PySequence_Fast_GET_ITEM(fast, k));
            int32_t *slot = (w < 0 || w >= n) ? NULL : buf_push(&targets);
            if (!slot) {
                Py_DECREF(fast);
                if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "components: a successor out of range");
                goto done;
            }
            *slot = (int32_t)w;
        }
        Py_DECREF(fast);
        index[v] = -1;
    }
    start[n] = (int32_t)targets.len;
    const int32_t *succ = (const int32_t *)targets.data;
    out = PyList_New(0);
    if (!out) goto done;
    for (Py_ssize_t root = 0; root < n; root++) {
        if (index[root] >= 0) continue;
        int32_t *item = buf_push(&work);
        if (!item) goto fail;
        item[0] = (int32_t)root;
        item[1] = 0;
        while (work.len) {
            int32_t *top = (int32_t *)work.data + 2 * --work.len;
            int32_t v = top[0], k = top[1];
            if (k == 0) {
                index[v] = low[v] = counter++;
                stack[sp++] = v;
                on_stack[v] = 1;
            }
            if (k < start[v + 1] - start[v]) {
                int32_t w = succ[start[v] + k];
                item = buf_push(&work);
                if (!item) goto fail;
                item[0] = v;
                item[1] = k + 1;
                if (index[w] < 0) {
                    item = buf_push(&work);
                    if (!item) goto fail;
                    item[0] = w;
                    item[1] = 0;
                } else if (on_stack[w] && index[w] < low[v]) {
                    low[v] = index[w];
                }
                continue;
            }
            if (work.len) { /* v is done: pass its low link to the parent */
                int32_t parent = ((int32_t *)work.data)[2 * (work.len - 1)];
                if (low[v] < low[parent]) low[parent] = low[v];
            }
            if (low[v] == index[v]) {
                PyObject *component = PyList_New(0);
                if (!component) goto fail;
                int32_t w;
                do {
                    w = stack[--sp];
                    on_stack[w] = 0;
                    PyObject *x = PyLong_FromLong(w);
                    if (!x || PyList_Append(component, x) < 0) {
                        Py_XDECREF(x);
                        Py_DECREF(component);
                        goto fail;
                    }
                    Py_DECREF(x);
                } while (w != v);
                int bad = PyList_Append(out, component) < 0;
                Py_DECREF(component);
                if (bad) goto fail;
            }
        }
    }
    goto done;
fail:
    Py_CLEAR(out);
done:
    PyMem_Free(start);
    PyMem_Free(index);
    PyMem_Free(low);
    PyMem_Free(stack);
    PyMem_Free(on_stack);
    PyMem_Free(targets.data);
    PyMem_Free(work.data);
    return out;
}

/* untrack_edges(edges): an IR Fsm's edges (a tuple of rows, each a tuple of (ByteClass, target)
 * pairs), or shared grouped rows ((mask, target) pairs), taken out of the cyclic collector's
 * sight. They are immutable and hold only ByteClass nodes (tuples of ints inside) and ints, so
 * no cycle runs through them; CPython never untracks a tuple that holds an instance, and a
 * tuple of tuples only one level per collection, so left tracked, full collections walk them
 * again (59k pairs after 200 MaskBench schemas, a fifth of what structgen's caches held). Rows
 * and pairs of another shape are left as they are. */
static PyObject *untrack_edges(PyObject *self, PyObject *edges) {
    (void)self;
    if (!PyTuple_CheckExact(edges)) {
        PyErr_SetString(PyExc_TypeError, "an Fsm's edges must be a tuple");
        return NULL;
    }
    int rows_all = 1;
    for (Py_ssize_t q = 0; q < PyTuple_GET_SIZE(edges); q++) {
        PyObject *row = PyTuple_GET_ITEM(edges, q);
        if (!PyTuple_CheckExact(row)) {
            rows_all = 0;
            continue;
        }
        int all = 1;
        for (Py_ssize_t x = 0; x < PyTuple_GET_SIZE(row); x++) {
            PyObject *pair = PyTuple_GET_ITEM(row, x);
            if (PyTuple_CheckExact(pair) && PyTuple_GET_SIZE(pair) == 2 && PyLong_CheckExact(PyTuple_GET_ITEM(pair, 1)))
                PyObject_GC_UnTrack(pair);
            else
                all = 0;
        }
        if (all)
            PyObject_GC_UnTrack(row);
        else
            rows_all = 0;
    }
    if (rows_all)
        PyObject_GC_UnTrack(edges);
    Py_RETURN_NONE;
}

/* grouped(trans, frozen) -> rows: dfa.grouped in C. Each {byte: target} row becomes its
 * (byte mask, target) pairs, one per target, by target; lists, or with `frozen` tuples taken
 * out of the collector's sight (the rows dfa.shared_grouped keeps). The SQL grammar's union of
 * terminals (1,669 states) took 15-30 ms of its first compile grouped in Python. */
static PyObject *grouped_rows(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *arg;
    int frozen;
    if (!PyArg_ParseTuple(args, "Op", &arg, &frozen))
        return NULL;
    PyObject *rows = PySequence_Fast(arg, "trans must be a sequence of dicts");
    if (!rows)
        return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(rows);
    PyObject *out = frozen ? PyTuple_New(n) : PyList_New(n);
    int32_t *stamp = PyMem_Malloc((n ? n : 1) * sizeof(int32_t)), *slot = PyMem_Malloc((n ? n : 1) * sizeof(int32_t));
    Mask masks[256];
    int32_t targets[256];
    if (!out || !stamp || !slot) {
        if (out)
            PyErr_NoMemory();
        goto fail;
    }
    for (Py_ssize_t q = 0; q < n; q++)
        stamp[q] = -1;
    for (Py_ssize_t q = 0; q < n; q++) {
        PyObject *row = PySequence_Fast_GET_ITEM(rows, q), *key, *value;
        Py_ssize_t pos = 0;
        int k = 0;
        if (!PyDict_Check(row)) {
            PyErr_SetString(PyExc_TypeError, "grouped: a row is not a dict");
            goto fail;
        }
        while (PyDict_Next(row, &pos, &key, &value)) {
            long b = PyLong_AsLong(key), t = PyLong_AsLong(value);
            if (b < 0 || b > 255 || t < 0 || t >= n) {
                if (!PyErr_Occurred())
                    PyErr_SetString(PyExc_ValueError, "grouped: a row maps a byte to a state that is not there");
                goto fail;
            }
            if (stamp[t] != (int32_t)q) {
                stamp[t] = (int32_t)q;
                slot[t] = k;
                targets[k] = (int32_t)t;
                memset(&masks[k], 0, sizeof(Mask));
                k++;
            }
            masks[slot[t]].w[b >> 6] |= (uint64_t)1 << (b & 63);
        }
        PyObject *pairs = pairs_by_target(targets, masks, k, frozen);
        if (!pairs)
            goto fail;
        if (frozen)
            PyTuple_SET_ITEM(out, q, pairs);
        else
            PyList_SET_ITEM(out, q, pairs);
    }
    if (frozen)
        PyObject_GC_UnTrack(out);
    Py_DECREF(rows);
    PyMem_Free(stamp);
    PyMem_Free(slot);
    return out;
fail:
    Py_XDECREF(out);
    Py_DECREF(rows);
    PyMem_Free(stamp);
    PyMem_Free(slot);
    return NULL;
}

static PyMethodDef methods[] = {
    {"grouped", grouped_rows, METH_VARARGS, "DFA rows grouped by target as byte masks, as dfa.grouped."},
    {"untrack_edges", untrack_edges, METH_O, "An IR Fsm's edge tuples out of the cyclic collector's sight."},
    {"rows_read", rows_read, METH_O, "One rule's rows packed (bytes), read by first_and_follow and liveness as the dicts."},
    {"split_product", split_product, METH_VARARGS,
     "A token's product with the union of terminals, split by class, trimmed and minimized."},
    {"determinize", determinize, METH_VARARGS, "One rule's DFA from its Thompson NFA, as automaton._determinize."},
    {"compile_expr", compile_expr, METH_VARARGS, "An expression's NFA, as automaton._build, then its DFA (its rows grouped given as_rows)."},
    {"liveness", liveness_kernel, METH_VARARGS, "Which rules match and their live states, as liveness.liveness."},
    {"first_and_follow", first_and_follow_kernel, METH_VARARGS,
     "The bytes that may follow each rule, as grammar_facts.first_and_follow."},
    {"components", components_kernel, METH_VARARGS, "Strongly connected components, as grammar_facts._components."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "compiled_dfa", NULL, -1, methods};

PyMODINIT_FUNC PyInit_compiled_dfa(void) {
    PyObject *m = PyModule_Create(&module);
    if (m && PyModule_AddIntConstant(m, "VERSION", KERNEL_VERSION) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
