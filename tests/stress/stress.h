/* SPDX-License-Identifier: MIT */
/* stress.h - tiny harness for the standalone stress programs (run under
 * ThreadSanitizer by `make test-tsan`; Criterion cannot run under TSan).
 * Definitions in stress_util.c, which every stress program links. */
#ifndef CEXEC_STRESS_H
#define CEXEC_STRESS_H

#include <stdio.h>
#include <stdlib.h>

/* Failed checks of the program (every file of it). */
extern int stress_failures;

#define CHECK(cond, ...)                                              \
    do {                                                              \
        if (!(cond)) {                                                \
            fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                             \
            fprintf(stderr, "\n");                                    \
            stress_failures++;                                        \
        }                                                             \
    } while (0)

/* Prints the plain closing line and returns the exit status. */
int stress_finish(const char *name, int checks);

#endif
