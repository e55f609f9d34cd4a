/* SPDX-License-Identifier: MIT */
/* mpi/senders.c - the point-to-point and collective calls as senders.
 *
 * One sender type for every call: the sender keeps the call's arguments,
 * the operation copies them and hands its pending node to the engine
 * (mpi/progress.c), which issues the call (issue_call) and calls
 * op_finish once the request completed. */
#include <stdalign.h>

#include <cexec/env.h>
#include <cexec/error.h>
#include <cexec/sender.h>
#include <cexec/stop_token.h>
#include <cexec/value.h>

#include "mpi/exi_mpi.h"

typedef enum call_kind {
    K_ISEND,
    K_IRECV,
    K_IBARRIER,
    K_IALLREDUCE,
    K_IBCAST,
    K_IREDUCE,
    K_ISCAN,
    K_IEXSCAN,
    K_IALLGATHER,
} call_kind;

typedef struct mpi_call {
    call_kind kind;
    ex_mpi_progress *engine;
    const void *sbuf;
    void *rbuf;
    int count;
    MPI_Datatype datatype;
    int rcount;               /* iallgather: the count received from each rank */
    MPI_Datatype rdatatype;   /* iallgather: its datatype */
    int peer;  /* dest, source or root */
    int tag;
    MPI_Op op;
    MPI_Comm comm;
} mpi_call;

typedef struct mpi_sender {
    ex_sender base;
    mpi_call call;
} mpi_sender;

typedef struct mpi_op {
    ex_operation base;
    ex_receiver r;
    mpi_call call;
    exi_mpi_pending pend;
    ex_stop_callback stop_cb;
    bool stop_registered;
} mpi_op;

static const char *const call_names[] = { "MPI_Isend", "MPI_Irecv",  "MPI_Ibarrier", "MPI_Iallreduce", "MPI_Ibcast",
                                          "MPI_Ireduce", "MPI_Iscan", "MPI_Iexscan",  "MPI_Iallgather" };

static mpi_op *op_of_pending(exi_mpi_pending *n) { return (mpi_op *)(void *)((char *)n - offsetof(mpi_op, pend)); }

static int issue_call(exi_mpi_pending *n) {
    mpi_op *o = op_of_pending(n);
    mpi_call *c = &o->call;
    MPI_Request *req = &n->req;
    switch (c->kind) {
    case K_ISEND: return MPI_Isend(c->sbuf, c->count, c->datatype, c->peer, c->tag, c->comm, req);
    case K_IRECV: return MPI_Irecv(c->rbuf, c->count, c->datatype, c->peer, c->tag, c->comm, req);
    case K_IBARRIER: return MPI_Ibarrier(c->comm, req);
    case K_IALLREDUCE: return MPI_Iallreduce(c->sbuf, c->rbuf, c->count, c->datatype, c->op, c->comm, req);
    case K_IBCAST: return MPI_Ibcast(c->rbuf, c->count, c->datatype, c->peer, c->comm, req);
    case K_IREDUCE: return MPI_Ireduce(c->sbuf, c->rbuf, c->count, c->datatype, c->op, c->peer, c->comm, req);
    case K_ISCAN: return MPI_Iscan(c->sbuf, c->rbuf, c->count, c->datatype, c->op, c->comm, req);
    case K_IEXSCAN: return MPI_Iexscan(c->sbuf, c->rbuf, c->count, c->datatype, c->op, c->comm, req);
    case K_IALLGATHER:
        return MPI_Iallgather(c->sbuf, c->count, c->datatype, c->rbuf, c->rcount, c->rdatatype, c->comm, req);
    }
    return MPI_ERR_OTHER;
}

static void on_stop(ex_stop_callback *cb) {
    mpi_op *o = (mpi_op *)(void *)((char *)cb - offsetof(mpi_op, stop_cb));
    exi_mpi_ask_cancel(o->call.engine, &o->pend);
}

static void stop_deregister(mpi_op *o) {
    if (!o->stop_registered) return;
    ex_stop_callback_deregister(&o->stop_cb);
    o->stop_registered = false;
}

/* A receive's value: the count in the datatype's units, source, tag. */
static void complete_recv(mpi_op *o) {
    int cancelled = 0, n = 0;
    /* Only a request the engine cancelled can have been (one call less). */
    if (o->pend.cancel_issued && MPI_Test_cancelled(&o->pend.status, &cancelled) == MPI_SUCCESS && cancelled) {
        ex_set_stopped(o->r);
        return;
    }
    int rc = MPI_Get_count(&o->pend.status, o->call.datatype, &n);
    if (rc != MPI_SUCCESS) {
        ex_set_error(o->r, exi_mpi_error("MPI_Get_count", rc));
        return;
    }
    ex_value v[3] = { ex_int(n), ex_int(o->pend.status.MPI_SOURCE), ex_int(o->pend.status.MPI_TAG) };
    ex_set_value(o->r, v, 3);
}

static void op_finish(exi_mpi_pending *n) {
    mpi_op *o = op_of_pending(n);
    stop_deregister(o);
    if (n->fail.code) ex_set_error(o->r, n->fail);
    else if (n->rc != MPI_SUCCESS) ex_set_error(o->r, exi_mpi_error(n->call, n->rc));
    else if (o->call.kind == K_IRECV) complete_recv(o);
    else ex_set_value(o->r, NULL, 0);
}

static void op_start(ex_operation *op) {
    mpi_op *o = (mpi_op *)op;
    ex_stop_token t = ex_never_stop_token();
    if (o->call.kind == K_IRECV) {
        t = ex_get_stop_token(ex_receiver_env(o->r));
        if (ex_stop_token_stop_requested(t)) {
            ex_set_stopped(o->r);
            return;
        }
    }
    o->pend.cancel_asked = 0;
    /* Registered before the start: a stop that comes first only marks the
     * node, and the engine cancels the request on its own thread. */
    if (ex_stop_token_stop_possible(t)) {
        o->stop_registered = true;
        (void)ex_stop_callback_register(&o->stop_cb, t, on_stop);
    }
    exi_mpi_start(o->call.engine, &o->pend);
}

static const ex_operation_vtable mpi_op_vt = { op_start, NULL };

static ex_error mpi_connect(const ex_sender *s, ex_receiver r, void *storage) {
    mpi_op *o = storage;
    o->base.vt = &mpi_op_vt;
    o->r = r;
    o->call = ((const mpi_sender *)s)->call;
    o->pend.issue = issue_call;
    o->pend.advance = NULL;
    o->pend.finish = op_finish;
    o->pend.call = call_names[o->call.kind];
    o->pend.cancellable = o->call.kind == K_IRECV;
    o->stop_registered = false;
    return ex_ok();
}

static const ex_sender_vtable isend_vt = { "ex_mpi_isend", mpi_connect, NULL, NULL, NULL };
static const ex_sender_vtable irecv_vt = { "ex_mpi_irecv", mpi_connect, NULL, NULL, NULL };
static const ex_sender_vtable ibarrier_vt = { "ex_mpi_ibarrier", mpi_connect, NULL, NULL, NULL };
static const ex_sender_vtable iallreduce_vt = { "ex_mpi_iallreduce", mpi_connect, NULL, NULL, NULL };
static const ex_sender_vtable ibcast_vt = { "ex_mpi_ibcast", mpi_connect, NULL, NULL, NULL };
static const ex_sender_vtable ireduce_vt = { "ex_mpi_ireduce", mpi_connect, NULL, NULL, NULL };
static const ex_sender_vtable iscan_vt = { "ex_mpi_iscan", mpi_connect, NULL, NULL, NULL };
static const ex_sender_vtable iexscan_vt = { "ex_mpi_iexscan", mpi_connect, NULL, NULL, NULL };
static const ex_sender_vtable iallgather_vt = { "ex_mpi_iallgather", mpi_connect, NULL, NULL, NULL };

static ex_sender *make(const ex_sender_vtable *vt, const mpi_call *c, const char *oom) {
    ex_sender *s = ex_sender_alloc(vt, sizeof(mpi_sender));
    if (!s) return ex_invalid_sender(EX_ENOMEM, oom);
    ((mpi_sender *)s)->call = *c;
    s->op_size = sizeof(mpi_op);
    s->op_align = alignof(mpi_op);
    /* One value signature: only the used part is written (a sender per
     * message: building it is on every round trip's path). */
    static const ex_sig recv_sig = { 3, { EX_T_INT, EX_T_INT, EX_T_INT } }, done_sig = { 0, { 0 } };
    bool recv = c->kind == K_IRECV;
    s->sigs.nvalues = 1;
    s->sigs.values[0] = recv ? recv_sig : done_sig;
    s->sigs.flags = recv ? EX_SIGS_ERROR | EX_SIGS_STOPPED : EX_SIGS_ERROR;
    return s;
}

static bool bad_buffer(const void *buf, int count) { return count < 0 || (count > 0 && !buf); }

ex_sender *ex_mpi_isend(ex_mpi_progress *p, const void *buf, int count, MPI_Datatype datatype, int dest, int tag,
                        MPI_Comm comm) {
    if (!p) return ex_invalid_sender(EX_EINVAL, "ex_mpi_isend: NULL progress engine");
    if (bad_buffer(buf, count)) return ex_invalid_sender(EX_EINVAL, "ex_mpi_isend: negative count or NULL buffer");
    mpi_call c = { K_ISEND, p, buf, NULL, count, datatype, 0, MPI_DATATYPE_NULL, dest, tag, MPI_OP_NULL, comm };
    return make(&isend_vt, &c, "ex_mpi_isend: out of memory");
}

ex_sender *ex_mpi_irecv(ex_mpi_progress *p, void *buf, int count, MPI_Datatype datatype, int source, int tag,
                        MPI_Comm comm) {
    if (!p) return ex_invalid_sender(EX_EINVAL, "ex_mpi_irecv: NULL progress engine");
    if (bad_buffer(buf, count)) return ex_invalid_sender(EX_EINVAL, "ex_mpi_irecv: negative count or NULL buffer");
    mpi_call c = { K_IRECV, p, NULL, buf, count, datatype, 0, MPI_DATATYPE_NULL, source, tag, MPI_OP_NULL, comm };
    return make(&irecv_vt, &c, "ex_mpi_irecv: out of memory");
}

ex_sender *ex_mpi_ibarrier(ex_mpi_progress *p, MPI_Comm comm) {
    if (!p) return ex_invalid_sender(EX_EINVAL, "ex_mpi_ibarrier: NULL progress engine");
    mpi_call c = { K_IBARRIER, p, NULL, NULL, 0, MPI_DATATYPE_NULL, 0, MPI_DATATYPE_NULL, 0, 0, MPI_OP_NULL, comm };
    return make(&ibarrier_vt, &c, "ex_mpi_ibarrier: out of memory");
}

ex_sender *ex_mpi_ibcast(ex_mpi_progress *p, void *buf, int count, MPI_Datatype datatype, int root, MPI_Comm comm) {
    if (!p) return ex_invalid_sender(EX_EINVAL, "ex_mpi_ibcast: NULL progress engine");
    if (bad_buffer(buf, count)) return ex_invalid_sender(EX_EINVAL, "ex_mpi_ibcast: negative count or NULL buffer");
    mpi_call c = { K_IBCAST, p, NULL, buf, count, datatype, 0, MPI_DATATYPE_NULL, root, 0, MPI_OP_NULL, comm };
    return make(&ibcast_vt, &c, "ex_mpi_ibcast: out of memory");
}

/* ireduce's receive buffer matters only at the root: NULL is valid
 * elsewhere, and MPI checks the root's. */
ex_sender *ex_mpi_ireduce(ex_mpi_progress *p, const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype,
                          MPI_Op op, int root, MPI_Comm comm) {
    if (!p) return ex_invalid_sender(EX_EINVAL, "ex_mpi_ireduce: NULL progress engine");
    if (bad_buffer(sendbuf, count))
        return ex_invalid_sender(EX_EINVAL, "ex_mpi_ireduce: negative count or NULL buffer");
    mpi_call c = { K_IREDUCE, p, sendbuf, recvbuf, count, datatype, 0, MPI_DATATYPE_NULL, root, 0, op, comm };
    return make(&ireduce_vt, &c, "ex_mpi_ireduce: out of memory");
}

/* iallreduce, iscan and iexscan take the same arguments. */
typedef struct reduce_texts {
    const char *no_engine, *bad_buffer, *oom;
} reduce_texts;

static ex_sender *reduce_like(call_kind kind, const ex_sender_vtable *vt, const reduce_texts *t, ex_mpi_progress *p,
                              const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                              MPI_Comm comm) {
    if (!p) return ex_invalid_sender(EX_EINVAL, t->no_engine);
    if (bad_buffer(recvbuf, count) || bad_buffer(sendbuf, count)) return ex_invalid_sender(EX_EINVAL, t->bad_buffer);
    mpi_call c = { kind, p, sendbuf, recvbuf, count, datatype, 0, MPI_DATATYPE_NULL, 0, 0, op, comm };
    return make(vt, &c, t->oom);
}

ex_sender *ex_mpi_iallreduce(ex_mpi_progress *p, const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype,
                             MPI_Op op, MPI_Comm comm) {
    static const reduce_texts t = { "ex_mpi_iallreduce: NULL progress engine",
                                    "ex_mpi_iallreduce: negative count or NULL buffer",
                                    "ex_mpi_iallreduce: out of memory" };
    return reduce_like(K_IALLREDUCE, &iallreduce_vt, &t, p, sendbuf, recvbuf, count, datatype, op, comm);
}

ex_sender *ex_mpi_iscan(ex_mpi_progress *p, const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype,
                        MPI_Op op, MPI_Comm comm) {
    static const reduce_texts t = { "ex_mpi_iscan: NULL progress engine", "ex_mpi_iscan: negative count or NULL buffer",
                                    "ex_mpi_iscan: out of memory" };
    return reduce_like(K_ISCAN, &iscan_vt, &t, p, sendbuf, recvbuf, count, datatype, op, comm);
}

ex_sender *ex_mpi_iexscan(ex_mpi_progress *p, const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype,
                          MPI_Op op, MPI_Comm comm) {
    static const reduce_texts t = { "ex_mpi_iexscan: NULL progress engine",
                                    "ex_mpi_iexscan: negative count or NULL buffer", "ex_mpi_iexscan: out of memory" };
    return reduce_like(K_IEXSCAN, &iexscan_vt, &t, p, sendbuf, recvbuf, count, datatype, op, comm);
}

ex_sender *ex_mpi_iallgather(ex_mpi_progress *p, const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                             void *recvbuf, int recvcount, MPI_Datatype recvtype, MPI_Comm comm) {
    if (!p) return ex_invalid_sender(EX_EINVAL, "ex_mpi_iallgather: NULL progress engine");
    if (bad_buffer(sendbuf, sendcount) || bad_buffer(recvbuf, recvcount))
        return ex_invalid_sender(EX_EINVAL, "ex_mpi_iallgather: negative count or NULL buffer");
    mpi_call c = { K_IALLGATHER, p, sendbuf, recvbuf, sendcount, sendtype, recvcount, recvtype, 0, 0, MPI_OP_NULL,
                   comm };
    return make(&iallgather_vt, &c, "ex_mpi_iallgather: out of memory");
}
