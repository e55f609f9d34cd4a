/* SPDX-License-Identifier: MIT */
/* retry.c - P2300 §1.5.2 in C: a user-written sender adaptor.
 *
 * ex_retry-style adaptor `retry(child, max_attempts)`: every channel passes
 * through except set_error, which destroys the child operation, connects
 * the child sender again into the same storage and restarts it, up to
 * max_attempts; then the last error goes on.  It shows the authoring
 * interface of <cexec/sender.h>:
 *   - a sender struct that begins with ex_sender, built by ex_sender_alloc;
 *   - completion signatures, operation size and depth computed when building;
 *   - an operation state that embeds the child's operation at a fixed
 *     offset and is constructed by the vtable's connect;
 *   - ownership: the builder takes the child reference; the operation
 *     retains the child sender because it reconnects it later. */
#include <stdalign.h>
#include <stdio.h>

#include <cexec/cexec.h>

typedef struct retry_sender {
    ex_sender base;
    ex_sender *child;
    unsigned max_attempts;
} retry_sender;

typedef struct retry_op {
    ex_operation base;
    ex_receiver r;           /* downstream */
    ex_sender *child_sender; /* retained: needed to reconnect */
    ex_operation *child;     /* lives at a fixed offset inside this block */
    unsigned attempts_left;
} retry_op;

static size_t child_offset(const ex_sender *child) { return ex_align_up(sizeof(retry_op), ex_sender_op_align(child)); }

static void rr_set_value(void *self, const ex_value *v, size_t n) { ex_set_value(((retry_op *)self)->r, v, n); }
static void rr_set_stopped(void *self) { ex_set_stopped(((retry_op *)self)->r); }
static ex_env rr_env(void *self) { return ex_receiver_env(((retry_op *)self)->r); }
static void rr_set_error(void *self, ex_error e);

static const ex_receiver_vtable retry_receiver_vt = { rr_set_value, rr_set_error, rr_set_stopped, rr_env, NULL };

static void rr_set_error(void *self, ex_error e) {
    retry_op *o = self;
    if (--o->attempts_left == 0) {
        ex_set_error(o->r, e);  /* give up: the last error goes on */
        return;
    }
    ex_error_release(e);  /* this attempt's error is dropped: ours to release (cexec/error.h) */
    /* The child completed, so its operation may be destroyed and rebuilt. */
    void *storage = o->child;
    ex_operation_destroy(o->child);
    o->child = NULL;  /* nothing to destroy if reconnecting fails */
    ex_receiver me = { &retry_receiver_vt, o };
    ex_operation *op;
    ex_error ce = ex_connect(o->child_sender, me, storage, ex_sender_op_size(o->child_sender), &op);
    if (ce.code) {
        ex_set_error(o->r, ce);
        return;
    }
    o->child = op;
    ex_start(op);
}

static void retry_start(ex_operation *op) { ex_start(((retry_op *)op)->child); }

static void retry_op_destroy(ex_operation *op) {
    retry_op *o = (retry_op *)op;
    if (o->child) ex_operation_destroy(o->child);
    ex_sender_release(o->child_sender);
}

static const ex_operation_vtable retry_op_vt = { retry_start, retry_op_destroy };

static ex_error retry_connect(const ex_sender *s, ex_receiver r, void *storage) {
    const retry_sender *rs = (const retry_sender *)s;
    retry_op *o = storage;
    o->base.vt = &retry_op_vt;
    o->r = r;
    o->attempts_left = rs->max_attempts;
    o->child = (ex_operation *)(void *)((char *)storage + child_offset(rs->child));
    ex_receiver me = { &retry_receiver_vt, o };
    ex_error e = ex_connect_child(rs->child, me, o->child);
    if (e.code) return e;
    o->child_sender = ex_sender_retain(rs->child);
    return ex_ok();
}

static void retry_destroy(ex_sender *s) { ex_sender_release(((retry_sender *)s)->child); }

static const ex_sender_vtable retry_vt = { "retry", retry_connect, NULL, retry_destroy, NULL };

/* Takes ownership of child.  max_attempts >= 1. */
static ex_sender *retry(ex_sender *child, unsigned max_attempts) {
    ex_error e = ex_check_input(child, "retry: NULL input sender");
    if (e.code) return ex_reject(e.code, e.msg, 1, &child);
    if (max_attempts == 0) return ex_reject(EX_EINVAL, "retry: max_attempts must be at least 1", 1, &child);
    ex_sender *s = ex_sender_alloc(&retry_vt, sizeof(retry_sender));
    if (!s) return ex_reject(EX_ENOMEM, "retry: out of memory", 1, &child);
    retry_sender *rs = (retry_sender *)s;
    rs->child = child;
    rs->max_attempts = max_attempts;
    s->sigs = *ex_sender_sigs(child);        /* same completions as the child */
    s->op_size = ex_size_add(child_offset(child), ex_sender_op_size(child));
    s->op_align = ex_max_size(alignof(retry_op), ex_sender_op_align(child));
    s->depth = ex_sender_depth(child) + 1;   /* one level above the child */
    return s;
}

/* ------------------------------------------------------------------ demo */

/* Fails the first `fail_first` calls, then answers 42. */
typedef struct flaky { int calls, fail_first; } flaky;

static ex_error flaky_fetch(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)in, (void)n;
    flaky *f = ctx;
    f->calls++;
    printf("retry: attempt %d\n", f->calls);
    if (f->calls <= f->fail_first) return ex_err(EX_EUSER + 1, "flaky: service unavailable");
    out[0] = ex_int(42);
    return ex_ok();
}

static int run(int fail_first, unsigned max_attempts, ex_scheduler sch) {
    flaky f = { 0, fail_first };
    ex_sender *work = ex_then(ex_schedule(sch), flaky_fetch, &f, EX_SIG0, EX_SIG(EX_T_INT));
    ex_result r = ex_sync_wait(retry(work, max_attempts));
    int ok = r.disposition == EX_DISP_VALUE;
    if (ok) printf("retry: got %lld after %d attempts\n", (long long)r.values[0].as.i, f.calls);
    else printf("retry: gave up after %d attempts: %s\n", f.calls, r.error.msg);
    ex_result_destroy(&r);
    return ok;
}

int main(void) {
    ex_single_thread_context ctx;
    if (ex_single_thread_context_init(&ctx).code) return 1;
    ex_scheduler sch = ex_single_thread_context_scheduler(&ctx);
    int ok1 = run(3, 5, sch);   /* succeeds on the 4th attempt */
    int ok2 = run(10, 3, sch);  /* gives up after 3 */
    (void)ex_single_thread_context_destroy(&ctx);
    return ok1 && !ok2 ? 0 : 1;
}
