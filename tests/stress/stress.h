/* stress.h - tiny harness for the standalone stress programs (run under
 * ThreadSanitizer by `make test-tsan`; Criterion cannot run under TSan). */
#ifndef CEXEC_STRESS_H
#define CEXEC_STRESS_H

#include <stdio.h>
#include <stdlib.h>

static int stress_failures;

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
static inline int stress_finish(const char *name, int checks) {
    printf("%s: %d passed, %d failed\n", name, checks - stress_failures, stress_failures);
    return stress_failures ? 1 : 0;
}

#endif
