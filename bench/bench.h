/* SPDX-License-Identifier: MIT */
/* bench.h - what the benchmark groups share: the pool under test and the
 * run count. */
#ifndef CEXEC_BENCH_BENCH_H
#define CEXEC_BENCH_BENCH_H

#include <stdbool.h>

#include <cexec/cexec.h>

extern ex_pool *pool;
extern ex_scheduler sched;
extern unsigned workers;
extern int runs;

/* Exits with a message when !ok. */
void must(bool ok, const char *what);

/* The algorithm groups (algos.c).  sizes: 1e3 .. max_size in decades. */
void bench_scan(double max_size);
void bench_reduce(double max_size);
/* Memory-copy bandwidth of this machine (GB/s counted as bytes read plus
 * bytes written), measured on `workers` threads; also recorded as rows of
 * group "memory".  Cached after the first call. */
double bench_copy_bandwidth(void);
/* `make demo`: copy bandwidth and the scan at n elements, then a short
 * table. */
void bench_demo(double n);
/* The task group (tasks.c): switch cost, awaits, task creation, fib via tasks. */
void bench_task_group(bool quick);
/* The pool group (pool.c): schedule throughput from outside threads and
 * from a worker, round-trip latency after idle gaps, idle CPU, hand-off
 * between two workers, against oneTBB and OpenMP. */
void bench_pool_group(bool quick);
/* The timer group (timers.c): arm+cancel, 100,000 concurrent timeouts,
 * lateness of 1 ms timers, idle CPU with timers armed, on a run loop and a
 * pool of 2 workers, against libuv.  bench_time_targets prints the issue's
 * targets from the rows (after the table). */
void bench_time_group(bool quick);
void bench_time_targets(void);

#endif
