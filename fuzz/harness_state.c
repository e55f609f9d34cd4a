/* SPDX-License-Identifier: MIT */
/* harness_state.c - the harness's run state and the pieces every node
 * builder uses: the counting, alternative and guarded-stack allocators,
 * boxed ints, the tap sender that records what each node did, and the
 * record of callback failures. */
#include "harness.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

sg_state G;

/* ---------------------------------------------------------- allocators */

/* Counting allocator: the process default for the whole run. */
atomic_long sg_cnt_in_use;
static atomic_long cnt_allocs;

static void *cnt_allocate(void *ctx, size_t size, size_t align) {
    (void)ctx;
    const ex_allocator *u = ex_libc_allocator();
    void *p = u->allocate(u->ctx, size, align);
    if (p) {
        atomic_fetch_add(&sg_cnt_in_use, 1);
        atomic_fetch_add(&cnt_allocs, 1);
    }
    return p;
}

static void cnt_deallocate(void *ctx, void *p, size_t size, size_t align) {
    (void)ctx;
    const ex_allocator *u = ex_libc_allocator();
    u->deallocate(u->ctx, p, size, align);
    atomic_fetch_sub(&sg_cnt_in_use, 1);
}

const ex_allocator sg_counting_alloc = { cnt_allocate, cnt_deallocate, NULL, "fuzz-counting", NULL };

/* Another allocator (A_ALT) with the same counters: what write_env
 * (WK_ALLOC) and a task's allocator option hand out, told apart by address. */
const ex_allocator sg_alt_alloc = { cnt_allocate, cnt_deallocate, NULL, "fuzz-alt", NULL };

/* Task stacks from the options' stack_allocator: mapped with a
 * PROT_NONE page below (a stack that overflows faults at once instead of
 * silently corrupting the heap below it, as a malloc'ed stack would) and
 * counted like every other block.  allocate returns the lowest usable
 * address (task.h). */
static size_t page_size(void) {
    static size_t page;
    if (!page) page = (size_t)sysconf(_SC_PAGESIZE);
    return page;
}

static size_t guarded_span(size_t size) {
    size_t pg = page_size();
    return (size + pg - 1) / pg * pg + pg;
}

static void *guarded_allocate(void *ctx, size_t size, size_t align) {
    (void)ctx;
    if (align > page_size()) return NULL;
    unsigned char *m = mmap(NULL, guarded_span(size), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) return NULL;
    if (mprotect(m, page_size(), PROT_NONE)) abort();
    atomic_fetch_add(&sg_cnt_in_use, 1);
    atomic_fetch_add(&cnt_allocs, 1);
    return m + page_size();
}

static void guarded_deallocate(void *ctx, void *p, size_t size, size_t align) {
    (void)ctx, (void)align;
    if (munmap((unsigned char *)p - page_size(), guarded_span(size))) abort();
    atomic_fetch_sub(&sg_cnt_in_use, 1);
}

const ex_allocator sg_guarded_alloc = { guarded_allocate, guarded_deallocate, NULL, "fuzz-guarded-stacks", NULL };

const ex_key sg_user_key = { "fuzz.user", true };

/* ---------------------------------------------------------- boxed ints */

static bool unbox(const ex_value *v, int64_t *out) {
    if (v->type == EX_T_INT) {
        *out = v->as.i;
        return true;
    }
    if (v->type != EX_T_TUPLE) return false;
    const ex_tuple *t = v->as.tuple;
    if (t->n != 2 || t->v[0].type != EX_T_INT || t->v[1].type != EX_T_TUPLE) return false;
    const ex_tuple *in = t->v[1].as.tuple;
    if (in->n != 1 || in->v[0].type != EX_T_INT || in->v[0].as.i != (t->v[0].as.i ^ G_BOX_KEY)) return false;
    *out = t->v[0].as.i;
    return true;
}

bool sg_ints_of(const ex_value *v, size_t n, int64_t *out) {
    if (n > G_MAX_VALUES) return false;
    for (size_t i = 0; i < n; i++)
        if (!unbox(&v[i], &out[i])) return false;
    return true;
}

/* ------------------------------------------------------------ tap sender */

/* A transparent pass-through sender: same signatures, status, attributes
 * and environment as its child; records what the child completed with. */
typedef struct tap_sender {
    ex_sender base;
    ex_sender *child;
    unsigned node;       /* NO_REC: records nothing */
    bool opaque;         /* no attributes (completion schedulers) */
} tap_sender;

typedef struct tap_op {
    ex_operation base;
    ex_receiver r;
    ex_operation *child;
    unsigned node;
} tap_op;

void sg_tap_record(unsigned node, uint8_t disp, const ex_value *v, size_t n, int code) {
    node_rec *rc = &G.rec[node];
    int k = atomic_fetch_add(&rc->completions, 1);
    if (k < 2) {
        r_out *o = &rc->out[k];
        o->disp = disp;
        o->code = code;
        o->n = (uint8_t)(n > G_MAX_VALUES ? G_MAX_VALUES : n);
        if (disp == R_VALUE && !sg_ints_of(v, n, o->v)) rc->bad[k] = true;
    }
    if (node == TOP_REC) atomic_store_explicit(&G.top_done, 1, memory_order_release);
}

static void tap_set_value(void *self, const ex_value *v, size_t n) {
    tap_op *o = self;
    if (o->node != NO_REC) sg_tap_record(o->node, R_VALUE, v, n, 0);
    ex_set_value(o->r, v, n);
}

static void tap_set_error(void *self, ex_error e) {
    tap_op *o = self;
    if (o->node != NO_REC) sg_tap_record(o->node, R_ERROR, NULL, 0, e.code);
    ex_set_error(o->r, e);
}

static void tap_set_stopped(void *self) {
    tap_op *o = self;
    if (o->node != NO_REC) sg_tap_record(o->node, R_STOPPED, NULL, 0, 0);
    ex_set_stopped(o->r);
}

static ex_env tap_env(void *self) { return ex_receiver_env(((tap_op *)self)->r); }

static const ex_receiver_vtable tap_rcvr_vt = { tap_set_value, tap_set_error, tap_set_stopped, tap_env, NULL };

static void tap_start(ex_operation *op) {
    tap_op *o = (tap_op *)op;
    if (o->node != NO_REC) atomic_fetch_add(&G.rec[o->node].started, 1);
    ex_start(o->child);
}

static void tap_op_destroy(ex_operation *op) { ex_operation_destroy(((tap_op *)op)->child); }

static const ex_operation_vtable tap_op_vt = { tap_start, tap_op_destroy };

static size_t tap_child_off(const ex_sender *child) { return ex_align_up(sizeof(tap_op), child->op_align); }

static ex_error tap_connect(const ex_sender *s, ex_receiver r, void *storage) {
    const tap_sender *ts = (const tap_sender *)s;
    tap_op *o = storage;
    o->base.vt = &tap_op_vt;
    o->r = r;
    o->node = ts->node;
    o->child = (ex_operation *)(void *)((char *)storage + tap_child_off(ts->child));
    ex_receiver cr = { &tap_rcvr_vt, o };
    return ex_connect_child(ts->child, cr, o->child);
}

static ex_env tap_attrs(const ex_sender *s) {
    const tap_sender *ts = (const tap_sender *)s;
    return ts->opaque ? ex_env_empty() : ex_sender_attrs(ts->child);
}

static void tap_destroy(ex_sender *s) { ex_sender_release(((tap_sender *)s)->child); }

static const ex_sender_vtable tap_vt = { "fuzz_tap", tap_connect, tap_attrs, tap_destroy, NULL };

ex_sender *sg_wrap(ex_sender *child, unsigned node, bool opaque) {
    ex_sender *s = ex_sender_alloc(&tap_vt, sizeof(tap_sender));
    if (!s) {
        ex_sender_release(child);
        return ex_invalid_sender(EX_ENOMEM, "fuzz_tap: out of memory");
    }
    tap_sender *ts = (tap_sender *)s;
    ts->child = child;
    ts->node = node;
    ts->opaque = opaque;
    s->sigs = child->sigs;
    s->status = child->status;
    s->op_size = tap_child_off(child) + child->op_size;
    s->op_align = child->op_align > _Alignof(tap_op) ? child->op_align : _Alignof(tap_op);
    return s;
}

ex_sender *sg_tap(ex_sender *child, unsigned node) { return sg_wrap(child, node, false); }

/* ------------------------------------------------------------- helpers */

ex_scheduler sg_sched_of(unsigned s) {
    switch (s) {
    case GS_LOOP: return ex_run_loop_scheduler(&G.loop);
    case GS_POOL: return ex_pool_scheduler(G.pool);
    default: return ex_inline_scheduler();
    }
}

ex_sig sg_int_sig(unsigned arity) {
    ex_sig s;
    memset(&s, 0, sizeof s);
    s.arity = (uint8_t)arity;
    for (unsigned i = 0; i < arity; i++) s.types[i] = EX_T_INT;
    return s;
}

unsigned sg_node_index(const g_node *nd) { return (unsigned)(nd - G.g.nodes); }

/* ---------------------------------------------------- callback failures */

void sg_fn_inputs_bad(void) { atomic_store(&G.fn_bad, 1); }

/* Records the first failure a callback (converter, algorithm function,
 * task body) saw; it is reported after the run, on the harness thread. */
void sg_cb_fail(unsigned node, const char *why, size_t at) {
    int expected = 0;
    if (atomic_compare_exchange_strong(&G.cb_bad, &expected, (int)node + 1)) {
        G.cb_why = why;
        G.cb_at = at;
    }
}
