/* SPDX-License-Identifier: MIT */
/* mpi/exi_mpi.h - the progress engine's side of an MPI operation.
 *
 * An operation embeds an exi_mpi_pending, fills in `issue` and `finish`
 * (and `advance` for a request that is not started at once: a probe) and
 * hands it to exi_mpi_start.  From then until the engine calls `finish`
 * exactly once, the node is the engine's; the operation may be destroyed
 * inside finish.  Only the engine's agent touches the request after start
 * (a stop callback only marks the node), so no two threads use a request
 * at once. */
#ifndef EXI_MPI_H
#define EXI_MPI_H

#include <cexec/mpi.h>

typedef struct exi_mpi_pending {
    struct exi_mpi_pending *next, *prev;  /* the engine's lists */
    MPI_Request req;
    /* Set (atomically) by a stop callback on any thread; the agent then
     * calls MPI_Cancel (or `advance` gives up) on its own thread. */
    uint32_t cancel_asked;
    bool cancel_issued;                   /* the agent's own */
    bool cancellable;                     /* MPI_Cancel may be called on req (receives) */
    int rc;                               /* MPI_SUCCESS, or the call's / request's error */
    const char *call;                     /* the MPI function rc came from, for the message */
    ex_error fail;                        /* a failure of the engine (not MPI's): finish reports it first */
    MPI_Status status;
    /* Starts the nonblocking call, setting req; returns its MPI code (on
     * error finish follows with rc set).  Called once: by exi_mpi_start
     * on the starting thread at MPI_THREAD_MULTIPLE, on the engine's
     * agent at a lower level.  NULL: the node starts with `advance`. */
    int (*issue)(struct exi_mpi_pending *n);
    /* Polled on the agent while req is MPI_REQUEST_NULL (a probe waiting
     * for its message): returns true when the node is finished (rc or
     * status set, or a stop honoured: the finish says which); false
     * while it waits or once it started a request in req, which is then
     * tested like any other.  NULL for ordinary operations. */
    bool (*advance)(struct exi_mpi_pending *n);
    /* Called once, on an agent of the engine (or inside exi_mpi_start for
     * an error of the call itself), when the node is done. */
    void (*finish)(struct exi_mpi_pending *n);
} exi_mpi_pending;

/* Starts n on p: issues its call (or queues it for the agent), and makes
 * sure finish is called exactly once.  n's issue/advance/finish/call/
 * cancellable must be set; the rest is initialised here. */
void exi_mpi_start(ex_mpi_progress *p, exi_mpi_pending *n);

/* Asks for n's cancellation (from a stop callback, any thread). */
void exi_mpi_ask_cancel(ex_mpi_progress *p, exi_mpi_pending *n);

/* Whether a cancellation was asked for n (the agent's `advance` reads it). */
bool exi_mpi_cancel_asked(const exi_mpi_pending *n);

/* The EX_EIO error for `call` failing with MPI error code rc. */
ex_error exi_mpi_error(const char *call, int rc);

#endif
