/* SPDX-License-Identifier: MIT */
/* graph_decode.c - the decoder: any byte string becomes a valid bounded
 * graph (fuzz/README.md, "Input grammar").  Shared by the harness and the
 * seed writer. */
#include "graph.h"

#include <string.h>

typedef struct reader {
    const uint8_t *p;
    size_t n, i;
} reader;

static uint8_t rd(reader *r) { return r->i < r->n ? r->p[r->i++] : 0; }

typedef struct dstate {
    g_graph *g;
    reader r;
    unsigned reserved;  /* node slots promised to children not yet decoded */
    unsigned splits_reserved;  /* splits whose child is being decoded */
    uint8_t scope;      /* 0xff: root tree; else the let whose body we are in */
    bool in_body;
} dstate;

static const uint8_t then_fns[8] = { TF_ADD, TF_MUL, TF_ERR, TF_ADD, TF_MUL, TF_ERR, TF_ADD, TF_STOPREQ };
static const uint8_t let_fns[8] = { LF_JUST, LF_ERR, LF_STOPPED, LF_BODY, LF_NULL, LF_ECHO, LF_BODY, LF_JUST };

static unsigned dec_node(dstate *d, unsigned depth);

/* Takes one of the reserved slots for a child and decodes it there. */
static uint8_t dec_child(dstate *d, unsigned depth) { return (uint8_t)dec_node(d, depth); }

/* Element counts of the algorithm nodes: around the edges of blocks (8),
 * of the parallel split (8 tiles or more on the 2-worker pool: for_each
 * from 16 indices, transform from 2048 elements, a generic scan of
 * 4096-byte elements from 225, a typed one from 114689) and of tiles
 * (16384 8-byte elements; 32 and 128 generic elements of 4096 and 1024
 * bytes).  The last four are slow under the sanitizers (tens of ms): one
 * input in 16. */
static const uint32_t algo_sizes[64] = {
    0,    1,    2,    3,    4,    5,    6,    7,    8,    9,    10,    11,    12,    15,    16,    17,
    20,   23,   24,   25,   31,   32,   33,   39,   40,   41,   47,    48,    49,    63,    64,    65,
    100,  127,  128,  129,  200,  224,  225,  255,  256,  257,  288,   300,   511,   512,   513,   1000,
    1023, 1024, 1025, 2047, 2048, 2049, 4095, 4096, 4097, 8191, 8192, 8193, 16383, 16385, 40000, 131073,
};

/* G_ALGO: op, then scheduler (bits 0-1) and flags (in-place, wide doubles or
 * generic element size, a bad argument: 6 a NULL array, 7 overlapping
 * arrays), the element count, the input seed, and k (scans: init; for_each:
 * the failing index and the grain). */
static void dec_algo(dstate *d, g_node *nd) {
    uint8_t op = rd(&d->r), cfg = rd(&d->r), size = rd(&d->r), seed = rd(&d->r), k = rd(&d->r);
    nd->op = (uint8_t)(op % AO_COUNT);
    nd->sched = (uint8_t)((cfg & 3) % GS_COUNT);
    unsigned f = cfg >> 2;
    nd->aflags = (uint8_t)(f & (AF_INPLACE | 6));
    unsigned bad = (f >> 3) & 7;
    if (bad == 6) nd->aflags |= AF_BAD_NULL;
    if (bad == 7) nd->aflags |= AF_BAD_OVERLAP;
    nd->n = algo_sizes[size % 64];
    /* Big generic elements: at most 300 of them (1.2 MB). */
    if (nd->op >= AO_ISCAN_GEN && nd->op <= AO_REDUCE_GEN && g_algo_gsize(nd) > 16 && nd->n > 300) nd->n = 300;
    if (g_algo_invalid(nd) && nd->n < 2) nd->n = 2;
    nd->seed = (uint32_t)seed | (uint32_t)op << 8;
    nd->k = (int8_t)k;
    static const uint8_t grains[4] = { 0, 1, 2, 5 };
    nd->agrain = grains[(k >> 5) & 3];
    nd->fail_idx = (k & 31) < 16 ? (uint32_t)(((uint64_t)(k & 31) * nd->n) / 16) : nd->n;
}

static unsigned dec_node(dstate *d, unsigned depth) {
    g_graph *g = d->g;
    unsigned idx = g->nnodes++;
    d->reserved--;
    g_node *nd = &g->nodes[idx];
    memset(nd, 0, sizeof *nd);
    nd->depth = (uint8_t)depth;
    nd->in_body = d->in_body;
    uint8_t b = rd(&d->r);
    unsigned kind = b % G_KIND_COUNT;
    unsigned need = 0;          /* children this node wants */
    uint8_t p1 = 0, p2 = 0, p3 = 0;
    int split_ref = -1;
    switch (kind) {
    case G_JUST: case G_JUST_ERROR: case G_JUST_STOPPED: break;
    case G_THEN: case G_UPON_ERROR: case G_UPON_STOPPED:
    case G_CONTINUES_ON: case G_STARTS_ON: case G_STOP_ENV:
        p1 = rd(&d->r);
        if (kind <= G_UPON_STOPPED) p2 = rd(&d->r);
        need = 1;
        break;
    case G_LET_VALUE: case G_LET_ERROR: case G_LET_STOPPED:
        p1 = rd(&d->r);
        p2 = rd(&d->r);
        need = let_fns[p1 % 8] == LF_BODY ? 2 : 1;
        break;
    case G_WHEN_ALL:
        p1 = rd(&d->r);
        need = 2 + p1 % 2;
        break;
    case G_TASK:
        p1 = rd(&d->r);
        p2 = rd(&d->r);
        if (p1 & TK_OPTS) p3 = rd(&d->r);
        need = (p1 & TK_TWO) ? 2 : 1;
        break;
    case G_SPAWN_FUTURE: need = 1; break;
    case G_VARIANT: case G_WRITE_ENV:
        p1 = rd(&d->r);
        need = 1;
        break;
    case G_READ_ENV: p1 = rd(&d->r); break;
    case G_SCOPE:
        p1 = rd(&d->r);
        need = 1 + p1 % 3;
        break;
    case G_ALGO: break;  /* a leaf: its bytes are read below */
    case G_BULK:
        p1 = rd(&d->r);
        p2 = rd(&d->r);
        p3 = rd(&d->r);
        need = 1;
        break;
    case G_SPLIT: {
        p1 = rd(&d->r);
        unsigned avail[G_MAX_SPLITS], navail = 0;
        for (unsigned s = 0; s < g->nsplits; s++)
            if (g->splits[s].scope == d->scope && g->splits[s].consumers < G_MAX_CONSUMERS) avail[navail++] = s;
        if ((p1 & 1) && navail) split_ref = (int)avail[(p1 >> 1) % navail];
        else if (g->nsplits + d->splits_reserved < G_MAX_SPLITS) need = 1;
        else if (navail) split_ref = (int)avail[(p1 >> 1) % navail];
        else kind = G_JUST;  /* no room for another split */
        break;
    }
    default: break;
    }
    if (need && (depth >= G_MAX_DEPTH || g->nnodes + d->reserved + need > G_MAX_NODES)) {
        /* Too deep or too big: a leaf instead. */
        kind = b % 3;
        need = 0;
        split_ref = -1;
    }
    nd->kind = (uint8_t)kind;
    switch (kind) {
    case G_JUST:
        p1 = rd(&d->r);
        nd->arity = (uint8_t)(p1 % 4);
        /* Tuple boxing is decoded but off: the reference models a value
         * signature by its arity only, and a tuple signature next to an int
         * one of the same arity (upon_stopped over a boxed just) makes
         * when_all reject what the reference accepts.  Turn it on with a
         * type-aware signature model (fuzz/README.md, "not covered"). */
        nd->boxed = G_BOXING && ((p1 >> 2) & 1);
        for (unsigned i = 0; i < nd->arity; i++) nd->vals[i] = (int8_t)rd(&d->r);
        break;
    case G_JUST_ERROR: nd->code = G_EUSER + rd(&d->r) % 16; break;
    case G_JUST_STOPPED: break;
    case G_THEN: case G_UPON_ERROR: case G_UPON_STOPPED:
        nd->fn = then_fns[p1 % 8];
        nd->arity = (uint8_t)((p1 >> 3) % 4);
        nd->k = (int8_t)p2;
        d->reserved += 1;
        nd->nchild = 1;
        nd->child[0] = dec_child(d, depth + 1);
        break;
    case G_LET_VALUE: case G_LET_ERROR: case G_LET_STOPPED:
        nd->fn = let_fns[p1 % 8];
        nd->arity = (uint8_t)((p1 >> 3) % 4);
        nd->k = (int8_t)p2;
        d->reserved += need;
        nd->nchild = (uint8_t)need;
        nd->child[0] = dec_child(d, depth + 1);
        if (need == 2) {
            uint8_t saved_scope = d->scope;
            bool saved_body = d->in_body;
            d->scope = (uint8_t)idx;
            d->in_body = true;
            nd->child[1] = dec_child(d, depth + 1);
            d->scope = saved_scope;
            d->in_body = saved_body;
        }
        break;
    case G_WHEN_ALL:
        d->reserved += need;
        nd->nchild = (uint8_t)need;
        for (unsigned i = 0; i < need; i++) nd->child[i] = dec_child(d, depth + 1);
        break;
    case G_BULK:
        nd->shape = p1 % 8;
        nd->fail_at = p2 % 12;
        nd->grain = (p2 >> 4) % 4;
        nd->k = (int8_t)p3;
        d->reserved += 1;
        nd->nchild = 1;
        nd->child[0] = dec_child(d, depth + 1);
        break;
    case G_SPLIT:
        if (split_ref >= 0) {
            nd->split_id = (uint8_t)split_ref;
            g->splits[split_ref].consumers++;
        } else {
            d->reserved += 1;
            d->splits_reserved++;
            uint8_t c = dec_child(d, depth + 1);
            d->splits_reserved--;
            /* Defined once its child is complete: no split refers to itself,
             * and splits inside it get smaller ids. */
            unsigned id = g->nsplits++;
            g->splits[id].child = c;
            g->splits[id].consumers = 1;
            g->splits[id].scope = d->scope;
            nd->split_id = (uint8_t)id;
        }
        break;
    case G_CONTINUES_ON: case G_STARTS_ON:
        nd->sched = p1 % GS_COUNT;
        d->reserved += 1;
        nd->nchild = 1;
        nd->child[0] = dec_child(d, depth + 1);
        break;
    case G_STOP_ENV:
        nd->stop_env = p1 % SE_COUNT;
        d->reserved += 1;
        nd->nchild = 1;
        nd->child[0] = dec_child(d, depth + 1);
        break;
    case G_TASK:
        nd->task = p1;
        nd->topt = p3;
        nd->sched = p2 % GS_COUNT;
        d->reserved += need;
        nd->nchild = (uint8_t)need;
        for (unsigned i = 0; i < need; i++) nd->child[i] = dec_child(d, depth + 1);
        /* Only a single leaf is awaited twice: its taps can count two runs. */
        if (need > 1 || g->nodes[nd->child[0]].kind > G_JUST_STOPPED) nd->task &= (uint8_t)~TK_TWICE;
        break;
    case G_ALGO: dec_algo(d, nd); break;
    case G_VARIANT:
        nd->op = (uint8_t)(p1 % VK_COUNT);
        nd->k = p1 >> 2;
        d->reserved += 1;
        nd->nchild = 1;
        nd->child[0] = dec_child(d, depth + 1);
        break;
    case G_READ_ENV: nd->op = (uint8_t)(p1 % RK_COUNT); break;
    case G_WRITE_ENV:
        nd->op = (p1 & 3) == 3 ? WK_ALLOC : (p1 & 3) == 2 ? WK_SCHED : WK_USER;
        nd->k = p1 >> 2;
        nd->sched = (uint8_t)((p1 >> 2) % GS_COUNT);
        d->reserved += 1;
        nd->nchild = 1;
        nd->child[0] = dec_child(d, depth + 1);
        break;
    case G_SCOPE:
        nd->op = (uint8_t)((p1 / 3) & 31);
        d->reserved += need;
        nd->nchild = (uint8_t)need;
        for (unsigned i = 0; i < need; i++) nd->child[i] = dec_child(d, depth + 1);
        break;
    case G_SPAWN_FUTURE:
        d->reserved += 1;
        nd->nchild = 1;
        nd->child[0] = dec_child(d, depth + 1);
        break;
    default: break;
    }
    return idx;
}

void g_decode(g_graph *g, const uint8_t *data, size_t size) {
    memset(g, 0, sizeof *g);
    dstate d = { g, { data, size, 0 }, 0, 0, 0xff, false };
    uint8_t m0 = rd(&d.r), m1 = rd(&d.r), m2 = rd(&d.r);
    static const uint8_t stop_modes[4] = { GM_STOP_NONE, GM_STOP_BEFORE, GM_STOP_ASYNC, GM_STOP_NONE };
    g->mode.stop = stop_modes[m0 & 3];
    g->mode.spawn = (m0 >> 7) & 1;
    g->mode.use_sync_wait = ((m0 >> 2) & 1) && !g->mode.spawn;
    g->mode.loop_thread = ((m0 >> 3) & 1) || g->mode.use_sync_wait;
    unsigned f = (m0 >> 4) & 3;
    g->mode.fault = f == 2 ? GM_FAULT_DEFAULT : f == 3 ? GM_FAULT_ENV : GM_FAULT_NONE;
    g->mode.taps = !((m0 >> 6) & 1);
    static const uint8_t env_scheds[4] = { GS_COUNT, GS_LOOP, GS_POOL, GS_COUNT };
    g->mode.env_sched = env_scheds[m1 & 3];
    g->mode.stop_delay = (uint16_t)(m1 >> 2);
    g->mode.fault_param = m2;
    g->mode.fault_seed = 0x9E3779B97F4A7C15ull * (uint64_t)(m2 + 1);
    d.reserved = 1;
    g->root = (uint8_t)dec_node(&d, 0);
    for (unsigned i = 0; i < g->nnodes; i++) {
        const g_node *nd = &g->nodes[i];
        if (nd->kind >= G_THEN && nd->kind <= G_UPON_STOPPED && nd->fn == TF_STOPREQ) g->has_stopreq = true;
    }
}
