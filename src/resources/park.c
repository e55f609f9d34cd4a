/* SPDX-License-Identifier: MIT */
/* park.c - event counts on futexes, and the asymmetric barrier. */
#include <linux/futex.h>
#include <linux/membarrier.h>
#include <limits.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cexec/cexec.h>

#include "base/exi_atomic.h"
#include "resources/exi_park.h"

static long futex(const uint32_t *addr, int op, uint32_t val, const struct timespec *ts, uint32_t mask) {
    return syscall(SYS_futex, addr, op, val, ts, NULL, mask);
}

#ifdef CEXEC_TSAN

void exi_event_init(exi_event *e) { e->value = 0; }
uint32_t exi_event_value(exi_event *e) { return exi_load_acq_u32(&e->value); }

void exi_event_wait(exi_event *e, uint32_t seen) {
    while (exi_load_acq_u32(&e->value) == seen) futex(&e->value, FUTEX_WAIT_PRIVATE, seen, NULL, 0);
}

static struct timespec timespec_of(int64_t ns) {
    struct timespec ts = { (time_t)(ns / 1000000000), (long)(ns % 1000000000) };
    return ts;
}

void exi_event_wait_until(exi_event *e, uint32_t seen, int64_t deadline_ns) {
    struct timespec ts = timespec_of(deadline_ns);
    /* Absolute CLOCK_MONOTONIC deadline (FUTEX_WAIT_BITSET). */
    if (exi_load_acq_u32(&e->value) == seen)
        futex(&e->value, FUTEX_WAIT_BITSET_PRIVATE, seen, &ts, FUTEX_BITSET_MATCH_ANY);
}

void exi_event_inc(exi_event *e) {
    exi_faa_u32(&e->value, 1);
    futex(&e->value, FUTEX_WAKE_PRIVATE, 1, NULL, 0);
}

#else

static int ec_gettime(const struct ck_ec_ops *ops, struct timespec *out) {
    (void)ops;
    return clock_gettime(CLOCK_MONOTONIC, out);
}

static void ec_wait32(const struct ck_ec_wait_state *st, const uint32_t *addr, uint32_t expected,
                      const struct timespec *deadline) {
    (void)st;
    /* Absolute CLOCK_MONOTONIC deadline, as ck_ec passes it. */
    futex(addr, FUTEX_WAIT_BITSET_PRIVATE, expected, deadline, FUTEX_BITSET_MATCH_ANY);
}

static void ec_wait64(const struct ck_ec_wait_state *st, const uint64_t *addr, uint64_t expected,
                      const struct timespec *deadline) {
    (void)st, (void)addr, (void)expected, (void)deadline;  /* the pool uses ck_ec32 only */
}

static void ec_wake32(const struct ck_ec_ops *ops, const uint32_t *addr) {
    (void)ops;
    futex(addr, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, 0);
}

static void ec_wake64(const struct ck_ec_ops *ops, const uint64_t *addr) {
    (void)ops, (void)addr;
}

static const struct ck_ec_ops ec_ops = {
    .gettime = ec_gettime,
    .wait32 = ec_wait32,
    .wait64 = ec_wait64,
    .wake32 = ec_wake32,
    .wake64 = ec_wake64,
};

static const struct ck_ec_mode ec_mode = { .ops = &ec_ops, .single_producer = false };

void exi_event_init(exi_event *e) { ck_ec32_init(&e->ec, 0); }
uint32_t exi_event_value(exi_event *e) { return ck_ec32_value(&e->ec); }
void exi_event_wait(exi_event *e, uint32_t seen) { (void)ck_ec32_wait(&e->ec, &ec_mode, seen, NULL); }
/* ck_ec's timed wait sleeps in backoff steps that overshoot a deadline by
 * up to its next step (5 ms became 16): the predicate clamps each step's
 * deadline to ours. */
static int clamp_to_deadline(const struct ck_ec_wait_state *st, struct timespec *iteration_deadline) {
    const struct timespec *ours = st->data;
    if (iteration_deadline->tv_sec > ours->tv_sec ||
        (iteration_deadline->tv_sec == ours->tv_sec && iteration_deadline->tv_nsec > ours->tv_nsec))
        *iteration_deadline = *ours;
    return 0;
}

void exi_event_wait_until(exi_event *e, uint32_t seen, int64_t deadline_ns) {
    struct timespec ts = { (time_t)(deadline_ns / 1000000000), (long)(deadline_ns % 1000000000) };
    /* An absolute CLOCK_MONOTONIC deadline (ec_gettime). */
    (void)ck_ec32_wait_pred(&e->ec, &ec_mode, seen, clamp_to_deadline, &ts, &ts);
}
void exi_event_inc(exi_event *e) { ck_ec32_inc(&e->ec, &ec_mode); }

#endif

/* --------------------------------------------------- asymmetric barrier */

int exi_barrier_cheap;
static pthread_once_t barrier_once = PTHREAD_ONCE_INIT;

static void barrier_setup(void) {
#ifndef CEXEC_TSAN
    long cmds = syscall(SYS_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);
    if (cmds > 0 && (cmds & MEMBARRIER_CMD_PRIVATE_EXPEDITED) &&
        syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0)
        exi_barrier_cheap = 1;  /* before any pool thread exists (pthread_once) */
#endif
}

void exi_barrier_init(void) { pthread_once(&barrier_once, barrier_setup); }

void exi_barrier_heavy(void) {
    exi_fence_full();
    if (exi_barrier_cheap) syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0);
}
