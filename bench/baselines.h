/* SPDX-License-Identifier: MIT */
/* baselines.h - the same benchmarks written with oneTBB (C++), OpenMP and
 * plain serial C, measured in the same run as cexec. */
#ifndef CEXEC_BENCH_BASELINES_H
#define CEXEC_BENCH_BASELINES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* An empty body the compiler cannot remove: called through this pointer by
 * every implementation of the bulk benchmark, as cexec calls its bulk
 * function through a pointer. */
extern void (*volatile bench_empty_body)(size_t i);

int64_t serial_fib(int64_t n);

/* oneTBB: task_group fork-join, parallel_for, parallel_scan.  tbb_init
 * fixes the thread count (a global_control kept until tbb_fini). */
void tbb_init(int threads);
void tbb_fini(void);
int64_t tbb_fib(int64_t n, int64_t cutoff);
void tbb_bulk(size_t n);
void tbb_inclusive_scan(const double *in, double *out, size_t n);
double tbb_reduce(const double *in, size_t n);

/* oneTBB side of the pool group (bench/pool.c): a task_arena of `threads`
 * (task_arena(threads): one of its slots is for a thread that enters it
 * with execute) and task_group::run + wait, as issue 19 defines the
 * baseline.  Every call makes its own task_group. */
void tbb_pool_init(int threads);
void tbb_pool_fini(void);
/* `outside` std::threads; each enters the arena (execute) `batches` times,
 * runs k empty lambdas in a task_group and waits for them. */
void tbb_pool_batches(int outside, size_t batches, size_t k);
/* The same batches from inside the arena: one task run from the caller's
 * execute loops over them. */
void tbb_pool_nested_batches(size_t batches, size_t k);
/* One empty task: arena.execute([&]{ tg.run([]{}); tg.wait(); }).  The
 * caller joins the arena and its wait may run the task itself. */
void tbb_pool_round_trip(void);
/* One empty task through arena.enqueue, run by an arena worker while the
 * caller blocks on a condition variable (never runs it itself). */
void tbb_pool_round_trip_enqueue(void);
/* `handoffs` tasks in a row in the arena, each run by tg.run from the one
 * before, which spins until it has started (so another thread runs it). */
void tbb_pool_ping_pong(size_t handoffs);
/* Kernel thread ids of the threads that have entered the arena (a
 * task_scheduler_observer records them), at most max; returns the count. */
size_t tbb_pool_thread_ids(int *out, size_t max);

/* OpenMP: tasks, parallel for, the inscan reduction. */
void omp_init(int threads);
int64_t omp_fib(int64_t n, int64_t cutoff);
void omp_bulk(size_t n);
void omp_inclusive_scan(const double *in, double *out, size_t n);
double omp_reduce(const double *in, size_t n);

/* OpenMP side of the pool group (bench/pool.c).  A team is the pool: work
 * is given to it by a parallel region whose single thread creates tasks.
 * nested_batches: batches of k empty tasks + taskwait inside one region;
 * round_trip: a whole region whose single thread runs one empty task;
 * ping_pong: `handoffs` tasks in a row, each created by the one before,
 * which spins until it has started; thread_ids: the team's kernel thread
 * ids (a region records them). */
void omp_pool_nested_batches(size_t batches, size_t k);
void omp_pool_round_trip(void);
void omp_pool_ping_pong(size_t handoffs);
size_t omp_pool_thread_ids(int *out, size_t max);

/* Boost (C++): boost::context::fiber switched into and back n times;
 * two Boost.Fiber fibers yielding to each other n times each. */
void boost_context_switch_pairs(size_t n);
void boost_fiber_yield_pairs(size_t n);

/* libuv (bench/baselines_uv.c), the timer group's baseline: each call has
 * a uv_loop_t of its own, run on the calling thread (libuv_idle_start's on
 * a thread of its own).  Timeouts are whole milliseconds of loop time. */
/* n uv_timer_start(1000 ms) + uv_timer_stop of one handle, on a loop where
 * k other timers are armed with the timeouts others_ms[0..k) (the loop is
 * never run: they stay armed); returns the seconds the n pairs took.  With
 * update_time, uv_update_time before each start (the loop's time read from
 * the clock, as cexec reads it for each ex_schedule_after). */
double libuv_arm_cancel(size_t n, const uint64_t *others_ms, size_t k, bool update_time);
/* Starts n timers with the timeouts ms[0..n) from one loop time and runs
 * the loop until every one has fired; returns the seconds from the first
 * start to the last callback, and in *arming those to the last start. */
double libuv_throughput(const uint64_t *ms, size_t n, double *arming);
/* `samples` 1 ms timers in a row, each started from the previous one's
 * callback after uv_update_time.  lateness[i]: the callback's
 * CLOCK_MONOTONIC minus (CLOCK_MONOTONIC at the start + 1 ms); own_due[i]:
 * minus libuv's own deadline (loop time in ms + 1 ms), in seconds. */
void libuv_lateness(size_t samples, double *lateness, double *own_due);
/* A thread running a loop with one timer: period_ms 0 an hour ahead, else
 * repeating every period_ms.  Stop returns how often it fired. */
typedef struct libuv_idle libuv_idle;
libuv_idle *libuv_idle_start(uint64_t period_ms);
uint64_t libuv_idle_stop(libuv_idle *s);

void serial_inclusive_scan(const double *in, double *out, size_t n);
double serial_reduce(const double *in, size_t n);

#ifdef __cplusplus
}
#endif
#endif
