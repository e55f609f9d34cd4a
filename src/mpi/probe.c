/* SPDX-License-Identifier: MIT */
/* mpi/probe.c - ex_mpi_recv_any_size: a message of unknown size, probed,
 * then received into a buffer made for it.
 *
 * The operation has no request to start with: the engine polls its
 * `advance` on the agent (mpi/exi_mpi.h).  The first call checks the
 * datatype; each call honours a stop request or probes with MPI_Improbe.
 * Once a message matched, MPI hands it to this operation alone (a matched
 * probe: no other receive can take it), so it must be received here,
 * whatever happens next: advance sizes a buffer, starts MPI_Imrecv, and
 * the engine tests that request like any other.  The receive is never
 * cancelled (the node is not `cancellable`): MPI would put a cancelled
 * matched message back for another probe, but this operation took it and
 * completes with it, stop or not.
 *
 * The buffer comes from the allocator of the receiver's environment,
 * behind a small header that remembers the allocator and the size, so
 * that ex_mpi_free gives it back.  When that allocation fails the message
 * is still received, into scratch memory mapped for it alone (or, should
 * even that fail, by a receive of zero elements that MPI truncates), and
 * dropped: the operation completes with EX_ENOMEM. */
#include <limits.h>
#include <stdalign.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/mman.h>

#include <cexec/allocator.h>
#include <cexec/env.h>
#include <cexec/error.h>
#include <cexec/sender.h>
#include <cexec/stop_token.h>
#include <cexec/value.h>

#include "mpi/exi_mpi.h"

#ifndef MAP_NORESERVE
#define MAP_NORESERVE 0
#endif

typedef struct probe_args {
    ex_mpi_progress *engine;
    MPI_Datatype datatype;
    int source, tag;
    MPI_Comm comm;
} probe_args;

typedef struct probe_sender {
    ex_sender base;
    probe_args args;
} probe_sender;

/* Where the message goes. */
typedef enum sink {
    SINK_NONE,     /* nothing matched yet, or an empty message */
    SINK_OWNED,    /* buf: the receiver's once the value is set */
    SINK_SCRATCH,  /* scratch: mapped to drain a message no buffer could hold */
    SINK_DISCARD,  /* nothing: zero elements, MPI truncates the message */
} sink;

typedef struct probe_op {
    ex_operation base;
    ex_receiver r;
    probe_args args;
    const ex_allocator *alloc;  /* the receiver environment's: the buffer's */
    exi_mpi_pending pend;
    ex_stop_callback stop_cb;
    bool stop_registered;
    /* The agent's, from start on. */
    bool typed;                 /* the datatype was checked */
    MPI_Aint extent, true_lb, true_extent;
    int type_size;
    bool stopped;               /* a stop request was honoured before a match */
    ex_error failed;            /* why the operation fails once the message (if any) is drained */
    sink sink;
    void *buf;
    void *scratch;
    size_t scratch_size;
} probe_op;

static probe_op *op_of_pending(exi_mpi_pending *n) {
    return (probe_op *)(void *)((char *)n - offsetof(probe_op, pend));
}

/* --------------------------------------------------------- the buffer */

/* What ex_mpi_free needs, kept in front of the data. */
typedef struct buffer_head {
    const ex_allocator *alloc;
    size_t size;  /* the whole block, head included */
} buffer_head;

#define BUFFER_ALIGN alignof(max_align_t)

static size_t head_size(void) { return ex_align_up(sizeof(buffer_head), BUFFER_ALIGN); }

static void *buffer_alloc(const ex_allocator *a, size_t bytes) {
    size_t size = ex_size_add(head_size(), bytes);
    if (size > EX_ALLOC_MAX_SIZE) return NULL;
    char *block = ex_allocate(a, size, BUFFER_ALIGN);
    if (!block) return NULL;
    buffer_head *h = (buffer_head *)(void *)block;
    h->alloc = a;
    h->size = size;
    return block + head_size();
}

void ex_mpi_free(void *buf) {
    if (!buf) return;
    char *block = (char *)buf - head_size();
    buffer_head *h = (buffer_head *)(void *)block;
    ex_deallocate(h->alloc, block, h->size, BUFFER_ALIGN);
}

/* Bytes that `count` (> 0) elements of the datatype span from the
 * buffer's start (the datatype was checked: extent > 0, true_lb >= 0);
 * SIZE_MAX if that does not fit in a size_t. */
static size_t span_of(const probe_op *o, int count) {
    size_t extent = (size_t)o->extent;
    size_t last = ex_size_add((size_t)o->true_lb, (size_t)o->true_extent);
    size_t before = (size_t)count - 1;
    if (last == SIZE_MAX || (before && extent > (SIZE_MAX - last) / before)) return SIZE_MAX;
    return before * extent + last;
}

/* Memory to drain a message into when no buffer could be had: a mapping
 * of its own (reserving no swap), unmapped as soon as the receive is
 * done. */
static void *scratch_map(size_t bytes) {
    if (bytes == SIZE_MAX) return NULL;
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

/* Gives back what the operation holds (every path but the value). */
static void drop_buffers(probe_op *o) {
    if (o->sink == SINK_SCRATCH) (void)munmap(o->scratch, o->scratch_size);
    if (o->sink == SINK_OWNED) ex_mpi_free(o->buf);
    o->buf = o->scratch = NULL;
    o->sink = SINK_NONE;
}

/* ------------------------------------------------------ on the agent */

/* The node ends with MPI's error rc from `call`. */
static bool mpi_failed(exi_mpi_pending *n, const char *call, int rc) {
    n->call = call;
    n->rc = rc;
    return rc != MPI_SUCCESS;
}

/* The datatype's sizes, once: sizing a buffer needs extent > 0 and a true
 * lower bound >= 0, counting elements a size > 0.  false: the node is
 * finished (rc or failed set). */
static bool check_datatype(probe_op *o) {
    exi_mpi_pending *n = &o->pend;
    MPI_Datatype t = o->args.datatype;
    MPI_Aint lb = 0;
    o->typed = true;
    if (mpi_failed(n, "MPI_Type_size", MPI_Type_size(t, &o->type_size))) return false;
    if (mpi_failed(n, "MPI_Type_get_extent", MPI_Type_get_extent(t, &lb, &o->extent))) return false;
    if (mpi_failed(n, "MPI_Type_get_true_extent", MPI_Type_get_true_extent(t, &o->true_lb, &o->true_extent)))
        return false;
    if (o->type_size > 0 && o->extent > 0 && o->true_lb >= 0 && o->true_extent >= 0) return true;
    o->failed = ex_err(EX_EINVAL, "ex_mpi_recv_any_size: a datatype of size 0, or with a negative extent or "
                                  "lower bound, cannot size a buffer");
    return false;
}

/* Elements to receive, from the probed size in bytes: the message's
 * count, rounded up when it is not a whole number of elements (the
 * completion reports that).  -1, with `failed` set, when MPI cannot say
 * or the count does not fit in an int. */
static int elements_of(probe_op *o, const MPI_Status *st) {
    MPI_Count bytes = 0;
    int rc = MPI_Get_elements_x(st, MPI_BYTE, &bytes);
    if (rc != MPI_SUCCESS || bytes == MPI_UNDEFINED || bytes < 0) {
        o->failed = rc != MPI_SUCCESS ? exi_mpi_error("MPI_Get_elements_x", rc)
                                      : ex_err(EX_EIO, "ex_mpi_recv_any_size: MPI gives no size for the message");
        return -1;
    }
    MPI_Count count = bytes / o->type_size + (bytes % o->type_size != 0);
    if (count <= INT_MAX) return (int)count;
    o->failed = ex_err(EX_EIO, "ex_mpi_recv_any_size: the message has more than INT_MAX elements");
    return -1;
}

/* Where the matched message goes: a buffer of the receiver's; without
 * one, scratch; without scratch, nowhere (zero elements: MPI truncates
 * it).  Returns the address and sets *count to what the receive takes. */
static void *choose_sink(probe_op *o, int *count) {
    if (*count == 0) return NULL;
    if (*count > 0) {
        size_t bytes = span_of(o, *count);
        o->buf = buffer_alloc(o->alloc, bytes);
        if (o->buf) {
            o->sink = SINK_OWNED;
            return o->buf;
        }
        o->failed = ex_err(EX_ENOMEM, "ex_mpi_recv_any_size: out of memory for the message (it was received and "
                                      "dropped)");
        o->scratch = scratch_map(bytes);
        if (o->scratch) {
            o->scratch_size = bytes;
            o->sink = SINK_SCRATCH;
            return o->scratch;
        }
    }
    o->sink = SINK_DISCARD;
    *count = 0;
    return NULL;
}

/* Receives the matched message: false once the receive is started (the
 * engine tests it), true if it could not be (rc set: finished). */
static bool receive_matched(probe_op *o, MPI_Message *msg, const MPI_Status *st) {
    exi_mpi_pending *n = &o->pend;
    int count = elements_of(o, st);
    void *into = choose_sink(o, &count);
    if (mpi_failed(n, "MPI_Imrecv", MPI_Imrecv(into, count, o->args.datatype, msg, &n->req))) {
        n->req = MPI_REQUEST_NULL;
        return true;
    }
    return false;
}

static bool probe_advance(exi_mpi_pending *n) {
    probe_op *o = op_of_pending(n);
    if (!o->typed && !check_datatype(o)) return true;
    if (exi_mpi_cancel_asked(n)) {
        o->stopped = true;
        return true;
    }
    int flag = 0;
    MPI_Message msg = MPI_MESSAGE_NULL;
    MPI_Status st;
    if (mpi_failed(n, "MPI_Improbe", MPI_Improbe(o->args.source, o->args.tag, o->args.comm, &flag, &msg, &st)))
        return true;
    return flag && receive_matched(o, &msg, &st);
}

/* ------------------------------------------------------- completing */

static void stop_deregister(probe_op *o) {
    if (!o->stop_registered) return;
    ex_stop_callback_deregister(&o->stop_cb);
    o->stop_registered = false;
}

/* The value: the buffer (the receiver's from here on), the count in the
 * datatype's units, the source and the tag. */
static void complete_value(probe_op *o) {
    int count = 0;
    int rc = MPI_Get_count(&o->pend.status, o->args.datatype, &count);
    if (rc != MPI_SUCCESS || count == MPI_UNDEFINED) {
        drop_buffers(o);
        if (rc != MPI_SUCCESS) ex_set_error(o->r, exi_mpi_error("MPI_Get_count", rc));
        else ex_set_error(o->r, ex_err(EX_EIO, "ex_mpi_recv_any_size: the message is not a whole number of "
                                               "elements of the datatype"));
        return;
    }
    ex_value v[4] = { ex_ptr(o->buf), ex_int(count), ex_int(o->pend.status.MPI_SOURCE),
                      ex_int(o->pend.status.MPI_TAG) };
    o->buf = NULL;
    o->sink = SINK_NONE;
    ex_set_value(o->r, v, 4);
}

/* In order: the engine's failure, a stop honoured, the operation's own
 * failure (whatever MPI said of draining the message), MPI's error, the
 * value. */
static void probe_finish(exi_mpi_pending *n) {
    probe_op *o = op_of_pending(n);
    stop_deregister(o);
    if (n->fail.code || o->stopped || o->failed.code || n->rc != MPI_SUCCESS) drop_buffers(o);
    if (n->fail.code || o->stopped) ex_error_release(o->failed);
    if (n->fail.code) ex_set_error(o->r, n->fail);
    else if (o->stopped) ex_set_stopped(o->r);
    else if (o->failed.code) ex_set_error(o->r, o->failed);
    else if (n->rc != MPI_SUCCESS) ex_set_error(o->r, exi_mpi_error(n->call, n->rc));
    else complete_value(o);
}

/* ------------------------------------------------------- the operation */

static void on_stop(ex_stop_callback *cb) {
    probe_op *o = (probe_op *)(void *)((char *)cb - offsetof(probe_op, stop_cb));
    exi_mpi_ask_cancel(o->args.engine, &o->pend);
}

static void probe_start(ex_operation *op) {
    probe_op *o = (probe_op *)op;
    ex_env env = ex_receiver_env(o->r);
    ex_stop_token t = ex_get_stop_token(env);
    if (ex_stop_token_stop_requested(t)) {
        ex_set_stopped(o->r);
        return;
    }
    o->alloc = ex_get_allocator(env);
    o->pend.cancel_asked = 0;
    /* Registered before the start: a stop that comes first only marks the
     * node, and advance honours it on the agent. */
    if (ex_stop_token_stop_possible(t)) {
        o->stop_registered = true;
        (void)ex_stop_callback_register(&o->stop_cb, t, on_stop);
    }
    exi_mpi_start(o->args.engine, &o->pend);
}

static const ex_operation_vtable probe_op_vt = { probe_start, NULL };

static ex_error probe_connect(const ex_sender *s, ex_receiver r, void *storage) {
    probe_op *o = storage;
    o->base.vt = &probe_op_vt;
    o->r = r;
    o->args = ((const probe_sender *)s)->args;
    o->alloc = NULL;
    o->pend.issue = NULL;  /* no request until a message matched */
    o->pend.advance = probe_advance;
    o->pend.finish = probe_finish;
    o->pend.call = "MPI_Improbe";
    /* Before the match advance honours a stop itself; after it the
     * message is this operation's and is received (no MPI_Cancel). */
    o->pend.cancellable = false;
    o->stop_registered = false;
    o->typed = false;
    o->stopped = false;
    o->failed = ex_ok();
    o->sink = SINK_NONE;
    o->buf = o->scratch = NULL;
    o->scratch_size = 0;
    return ex_ok();
}

static const ex_sender_vtable probe_vt = { "ex_mpi_recv_any_size", probe_connect, NULL, NULL, NULL };

ex_sender *ex_mpi_recv_any_size(ex_mpi_progress *p, MPI_Datatype datatype, int source, int tag, MPI_Comm comm) {
    if (!p) return ex_invalid_sender(EX_EINVAL, "ex_mpi_recv_any_size: NULL progress engine");
    if (datatype == MPI_DATATYPE_NULL) return ex_invalid_sender(EX_EINVAL, "ex_mpi_recv_any_size: MPI_DATATYPE_NULL");
    ex_sender *s = ex_sender_alloc(&probe_vt, sizeof(probe_sender));
    if (!s) return ex_invalid_sender(EX_ENOMEM, "ex_mpi_recv_any_size: out of memory");
    probe_args a = { p, datatype, source, tag, comm };
    ((probe_sender *)s)->args = a;
    s->op_size = sizeof(probe_op);
    s->op_align = alignof(probe_op);
    s->sigs = ex_sigs_none();
    (void)ex_sigs_add_value(&s->sigs, EX_SIG(EX_T_PTR, EX_T_INT, EX_T_INT, EX_T_INT));
    s->sigs.flags = EX_SIGS_ERROR | EX_SIGS_STOPPED;
    return s;
}
