/* SPDX-License-Identifier: MIT */
/* cexec/mpi.h - MPI nonblocking operations as senders, progressed by a
 * scheduler's agents (the optional component libcexec_mpi: `make mpi`,
 * `pkg-config --cflags --libs cexec-mpi`; docs/mpi.md).
 *
 * Each sender starts its nonblocking MPI call (MPI_Isend, MPI_Irecv, the
 * nonblocking collectives) when its operation starts and hands the
 * request to a progress engine (ex_mpi_progress), bound to one scheduler.
 *
 * On a pool's scheduler the engine is a poller of the pool
 * (cexec/poller.h): while requests are pending, the pool's workers test
 * them in batches with MPI_Testsome between items, instead of idling and
 * before they park, one agent at a time; a worker parks with a timeout
 * (50 us doubling to 1 ms while nothing completes) and a thread waiting
 * in ex_sync_wait on an MPI operation tests them itself while it waits.
 * With nothing pending, nothing polls.  Completions run on the agent
 * whose test found them complete: a worker, or that waiting thread.
 * On any other scheduler (a run loop, a single-thread context) one
 * progress item runs on it while requests are pending, queues itself
 * again behind other work (yield), and after 16 rounds without a
 * completion waits on the scheduler's clock (50 us doubling to 1 ms).
 * No thread ever blocks inside MPI.
 *
 * Threads: at MPI_THREAD_MULTIPLE operations issue their call on the
 * thread that starts them.  At MPI_THREAD_SERIALIZED every MPI call of
 * the engine (the issue too) is made by the agent that polls, one at a
 * time; the application must not call MPI concurrently itself.  At
 * MPI_THREAD_FUNNELED the same, and the engine's scheduler must run on
 * MPI's main thread (a run loop that thread drives: a pool is refused).
 * MPI_THREAD_SINGLE is refused (EX_ENOTSUP).
 *
 * Errors: an MPI call that fails completes the operation with set_error,
 * code EX_EIO and an owned message (cexec/error.h) with the call's name,
 * MPI_Error_string's text and the MPI error class.  MPI returns errors
 * only where the communicator's error handler is MPI_ERRORS_RETURN: cexec
 * never changes the handler of a communicator it is given, except that
 * ex_mpi_init sets MPI_ERRORS_RETURN on MPI_COMM_WORLD.  Under MPI's
 * default handler (MPI_ERRORS_ARE_FATAL) an error aborts the job.
 *
 * Stop: a pending receive whose environment's stop token is stopped is
 * cancelled (MPI_Cancel, called by the progress item) and completes with
 * set_stopped once MPI_Test_cancelled says it was; a message that arrived
 * first completes it with set_value.  A probe-then-receive gives up the
 * same way until it has matched a message (ex_mpi_recv_any_size).  Sends
 * and collectives ignore stop requests and complete normally (MPI cannot
 * cancel them portably).
 *
 * Buffers are borrowed: they must stay valid, and a send buffer unchanged,
 * until the operation completes (except ex_mpi_recv_any_size's, which the
 * operation makes and gives to its receiver). */
#ifndef CEXEC_MPI_H
#define CEXEC_MPI_H

#include <mpi.h>

#include <cexec/types.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A progress engine: the pending requests of the operations it was given
 * and the one item that tests them on its scheduler. */
typedef struct ex_mpi_progress ex_mpi_progress;

/* Counters of an engine, for tests and tuning (approximate while
 * requests are pending). */
typedef struct ex_mpi_progress_stats {
    uint64_t submitted;   /* requests handed to the engine */
    uint64_t completed;   /* operations it completed */
    uint64_t rounds;      /* rounds of testing (polls, or runs of the progress item) */
    uint64_t testsome;    /* MPI_Testsome calls */
    uint64_t backoffs;    /* item mode: rounds that ended in a timed wait (a pool's waits are its own) */
} ex_mpi_progress_stats;

/* Initialises MPI with MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE)
 * and sets MPI_ERRORS_RETURN on MPI_COMM_WORLD.  A lower level granted
 * (SERIALIZED, FUNNELED) is accepted: see "Threads" above.  Errors:
 * EX_EBUSY if MPI is already initialised (use ex_mpi_attach); EX_EIO if
 * MPI_Init_thread fails; EX_ENOTSUP if MPI grants only
 * MPI_THREAD_SINGLE (MPI then stays initialised: call ex_mpi_finalize). */
ex_error ex_mpi_init(int *argc, char ***argv);

/* Finalises MPI (MPI_Finalize) if it is initialised and not finalised.
 * Every engine must have been destroyed first.  Errors: EX_EIO. */
ex_error ex_mpi_finalize(void);

/* Accepts an MPI the application initialised itself: EX_OK if MPI is
 * initialised at MPI_THREAD_FUNNELED or above; EX_EINVAL if it is not
 * initialised (or already finalised); EX_ENOTSUP at MPI_THREAD_SINGLE.
 * Leaves every error handler as it is. */
ex_error ex_mpi_attach(void);

/* Makes an engine progressed on sch: on a pool's scheduler, as one of
 * the pool's pollers; on another scheduler, by a progress item (see
 * above; sch needs post, and uses yield and the clock when it has them:
 * without a clock the item never waits and keeps yielding while requests
 * are pending).  sch's resource must outlive the engine and accept work
 * while requests are pending.  Errors: EX_EINVAL (NULL out, invalid sch,
 * a scheduler without post, MPI not initialised, a pool at
 * MPI_THREAD_FUNNELED), EX_ENOTSUP (MPI_THREAD_SINGLE), EX_EBUSY (the
 * pool holds EX_POOL_POLLERS_MAX pollers), EX_ENOMEM. */
ex_error ex_mpi_progress_create(ex_scheduler sch, ex_mpi_progress **out);

/* Destroys an engine with no pending operation.  Errors: EX_EBUSY (and
 * nothing is destroyed) while an operation is pending.  NULL-safe. */
ex_error ex_mpi_progress_destroy(ex_mpi_progress *p);

/* The engine's counters (zero for NULL). */
ex_mpi_progress_stats ex_mpi_progress_get_stats(const ex_mpi_progress *p);

/* A sender of MPI_Isend(buf, count, datatype, dest, tag, comm), progressed
 * by p: set_value() once the request completes, set_error (EX_EIO) when
 * MPI reports an error.  Invalid sender (EX_EINVAL): NULL p, a negative
 * count, or a NULL buf with count > 0; EX_ENOMEM if it cannot be
 * allocated. */
ex_sender *ex_mpi_isend(ex_mpi_progress *p, const void *buf, int count, MPI_Datatype datatype, int dest, int tag,
                        MPI_Comm comm);

/* A sender of MPI_Irecv(buf, count, datatype, source, tag, comm): set_value
 * with three EX_T_INT values, the received count (MPI_Get_count in
 * datatype's units), the source and the tag of the message (what
 * MPI_ANY_SOURCE and MPI_ANY_TAG matched).  set_error (EX_EIO) for an MPI
 * error, a message longer than the buffer among them (MPI_ERR_TRUNCATE);
 * set_stopped when a stop request cancelled it (see "Stop" above; a
 * token already stopped at start completes it stopped without a call to
 * MPI).  Invalid sender as for ex_mpi_isend. */
ex_sender *ex_mpi_irecv(ex_mpi_progress *p, void *buf, int count, MPI_Datatype datatype, int source, int tag,
                        MPI_Comm comm);

/* A sender of MPI_Ibarrier(comm): set_value() once every rank of comm has
 * entered the barrier.  Invalid sender (EX_EINVAL) for a NULL p. */
ex_sender *ex_mpi_ibarrier(ex_mpi_progress *p, MPI_Comm comm);

/* A sender of MPI_Iallreduce(sendbuf, recvbuf, count, datatype, op, comm):
 * set_value() once recvbuf holds the reduction (sendbuf may be
 * MPI_IN_PLACE).  Invalid sender as for ex_mpi_isend, for recvbuf (and a
 * NULL sendbuf) with count > 0. */
ex_sender *ex_mpi_iallreduce(ex_mpi_progress *p, const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype,
                             MPI_Op op, MPI_Comm comm);

/* A sender of MPI_Ibcast(buf, count, datatype, root, comm): set_value()
 * once buf holds the root's data (on the root: once it may be reused).
 * Invalid sender as for ex_mpi_isend. */
ex_sender *ex_mpi_ibcast(ex_mpi_progress *p, void *buf, int count, MPI_Datatype datatype, int root, MPI_Comm comm);

/* A sender of MPI_Ireduce(sendbuf, recvbuf, count, datatype, op, root,
 * comm): set_value() once the root's recvbuf holds the reduction (on the
 * other ranks: once sendbuf may be reused; their recvbuf is unused and
 * may be NULL).  Invalid sender as for ex_mpi_isend, for sendbuf. */
ex_sender *ex_mpi_ireduce(ex_mpi_progress *p, const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype,
                          MPI_Op op, int root, MPI_Comm comm);

/* A sender of MPI_Iscan (inclusive prefix reduction over the ranks of
 * comm, in rank order): set_value() once recvbuf holds ranks 0..me
 * reduced.  Invalid sender as for ex_mpi_iallreduce. */
ex_sender *ex_mpi_iscan(ex_mpi_progress *p, const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype,
                        MPI_Op op, MPI_Comm comm);

/* A sender of MPI_Iexscan (exclusive prefix reduction): set_value() once
 * recvbuf holds ranks 0..me-1 reduced; rank 0's recvbuf is left as MPI
 * leaves it (undefined).  Invalid sender as for ex_mpi_iallreduce. */
ex_sender *ex_mpi_iexscan(ex_mpi_progress *p, const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype,
                          MPI_Op op, MPI_Comm comm);

/* A sender of MPI_Iallgather(sendbuf, sendcount, sendtype, recvbuf,
 * recvcount, recvtype, comm): set_value() once recvbuf holds every rank's
 * block in rank order (recvcount elements of recvtype each).  Invalid
 * sender (EX_EINVAL) for a NULL p, a negative count or a NULL buffer with
 * its count > 0; EX_ENOMEM if it cannot be allocated. */
ex_sender *ex_mpi_iallgather(ex_mpi_progress *p, const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                             void *recvbuf, int recvcount, MPI_Datatype recvtype, MPI_Comm comm);

/* Probe-then-receive, for a message of unknown size: a sender that waits
 * for a message matching (source, tag, comm) (MPI_ANY_SOURCE and
 * MPI_ANY_TAG allowed), receives all of it into a buffer made for it, and
 * completes with set_value of four values:
 *   EX_T_PTR  the buffer: NULL for an empty message, else `count`
 *             elements of datatype laid out as MPI_Recv would (aligned
 *             for any C type);
 *   EX_T_INT  count, the elements received, in datatype's units;
 *   EX_T_INT  the message's source and
 *   EX_T_INT  its tag.
 *
 * Ownership: the buffer is the receiver's from set_value on (an exception
 * to the shallow EX_T_PTR rule of cexec/types.h: the operation keeps
 * nothing).  Free it with ex_mpi_free(buf), never with free(); it comes
 * from the allocator the receiver's environment answers for
 * ex_key_get_allocator (cexec/env.h: else its scheduler's, else the
 * process default), which must outlive it.  Whoever receives the value
 * must keep or free the buffer: an adaptor that drops values (a when_all
 * whose sibling fails, a function that ignores its argument) loses it, so
 * consume it next to the sender (ex_then into the structure that frees
 * it, ex_await in a task).
 *
 * How: the engine's agent probes with MPI_Improbe (a matched probe: the
 * message it finds is this operation's alone, no other receive can take
 * it) until a message matches, then starts MPI_Imrecv into the buffer and
 * tests it like any other request.  A probe still waiting is polled with
 * the engine's rounds, so on an idle pool a message is seen up to one
 * backoff period (1 ms) after it arrives.
 *
 * Errors: EX_EIO for an MPI error (a source that is not a rank of comm:
 * MPI_ERR_RANK from MPI_Improbe), or a message that is not a whole number
 * of elements of datatype (the buffer is freed); EX_EINVAL for a datatype
 * that cannot size a buffer (size 0, a negative extent or true lower
 * bound); EX_ENOMEM when the buffer cannot be allocated.  A matched
 * message is never left in MPI: without a buffer it is received into
 * scratch memory mapped for it (mmap) and dropped, or, if even that
 * fails, by a receive of zero elements that MPI reports truncated (which
 * aborts the job where comm's error handler is MPI_ERRORS_ARE_FATAL);
 * either way the operation completes with EX_ENOMEM and nothing stays
 * allocated.
 *
 * Stop: a probe still waiting honours a stop request of its environment's
 * token (set_stopped; a token already stopped at start completes it
 * stopped without a call to MPI); once a message matched, it is received
 * and the operation completes with its value.
 *
 * Invalid sender (EX_EINVAL): NULL p, MPI_DATATYPE_NULL; EX_ENOMEM if it
 * cannot be allocated.  The datatype is checked by the engine's agent at
 * start, not here: building a sender calls no MPI function. */
ex_sender *ex_mpi_recv_any_size(ex_mpi_progress *p, MPI_Datatype datatype, int source, int tag, MPI_Comm comm);

/* Frees a buffer ex_mpi_recv_any_size completed with, through the
 * allocator it came from.  NULL-safe. */
void ex_mpi_free(void *buf);

#ifdef __cplusplus
}
#endif
#endif
