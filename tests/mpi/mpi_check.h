/* SPDX-License-Identifier: MIT */
/* mpi_check.h - what the MPI test programs share (make mpi-test): the
 * counted checks, each rank's pool and engine, a receiver that records
 * its completions.  Not Criterion: Criterion forks each test, which MPI
 * does not survive.  Definitions in mpi_check.c. */
#ifndef CEXEC_MPI_CHECK_H
#define CEXEC_MPI_CHECK_H

#include <stdio.h>

#include <cexec/cexec.h>
#include <cexec/mpi.h>

/* This rank, the number of ranks, and the checks so far. */
extern int rank, nranks, passed, failed;
/* The program's name, for messages ("mpi_senders"). */
extern const char *check_program;
/* Each rank's one-worker pool and the engine on it. */
extern ex_pool *pool;
extern ex_mpi_progress *engine;

#define CHECK(cond, ...)                                                                              \
    do {                                                                                              \
        if (cond) passed++;                                                                           \
        else {                                                                                        \
            failed++;                                                                                 \
            fprintf(stderr, "%s rank %d: %s:%d: %s: ", check_program, rank, __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                                             \
            fputc('\n', stderr);                                                                      \
        }                                                                                             \
    } while (0)

/* Initialises MPI (ex_mpi_init), the pool and the engine; aborts the job
 * if it cannot. */
void check_setup(int *argc, char ***argv, const char *program);
/* A final barrier, then the engine, the pool and MPI go; prints
 * "<program> rank R: N passed, F failed" and returns the exit status. */
int check_finish(void);

/* Neighbours in the ring of ranks (with one rank: itself). */
int left(void);
int right(void);
/* A short sleep, while waiting for another thread. */
void nap(void);

/* The disposition of a result, and its error's message, for messages. */
const char *result_text(const ex_result *r);

/* A receiver that records its completions. */
typedef struct record {
    uint32_t hits;      /* completions: must end at 1 */
    uint32_t done;      /* set last, with release */
    ex_disposition disp;
    ex_value v[4];
    size_t n;
    int code;
} record;

/* Connects s (taken) to r and starts it; NULL if it could not connect. */
ex_operation *start_recorded(ex_sender *s, record *r);
/* Waits until r's operation completed (aborts the job after 20 s). */
void wait_recorded(const record *r);
/* Whether r completed (so far). */
bool recorded(const record *r);

#endif
