/* SPDX-License-Identifier: MIT */
/* mpi/exi_mpi.h - the progress engine's side of an MPI operation.
 *
 * An operation embeds an exi_mpi_pending: its request, and what the engine
 * calls once MPI_Testsome finds the request complete.  The engine owns the
 * node from exi_mpi_submit until it calls `finish` (on an agent of its
 * scheduler); the operation may be destroyed inside finish. */
#ifndef EXI_MPI_H
#define EXI_MPI_H

#include <cexec/mpi.h>

typedef struct exi_mpi_pending {
    struct exi_mpi_pending *next, *prev;  /* the engine's lists */
    MPI_Request req;
    /* Set (atomically) by a stop callback on any thread; the progress item
     * then calls MPI_Cancel on its own thread, so no two threads ever use
     * the request at once. */
    uint32_t cancel_asked;
    bool cancel_issued;                   /* the item's own */
    int rc;                               /* MPI_SUCCESS, or the request's error */
    MPI_Status status;
    void (*finish)(struct exi_mpi_pending *n);
} exi_mpi_pending;

/* Hands n (with a started request) to p.  On error (p's scheduler refused
 * the progress item: EX_ESHUTDOWN) n was not taken. */
ex_error exi_mpi_submit(ex_mpi_progress *p, exi_mpi_pending *n);

/* Asks for n's cancellation (from a stop callback, any thread). */
void exi_mpi_ask_cancel(ex_mpi_progress *p, exi_mpi_pending *n);

/* The EX_EIO error for `call` failing with MPI error code rc. */
ex_error exi_mpi_error(const char *call, int rc);

#endif
