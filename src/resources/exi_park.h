/* SPDX-License-Identifier: MIT */
/* exi_park.h - one event count per worker for parking and wake-one.
 *
 * Normal builds use Concurrency Kit's ck_ec with futex operations supplied
 * here (libck ships none); the ThreadSanitizer build uses an equivalent
 * futex word on the project's atomics, which TSan can see.  Internal. */
#ifndef EXI_PARK_H
#define EXI_PARK_H

#include <stdint.h>

#include "base/exi_atomic.h"

#ifdef CEXEC_TSAN
typedef struct exi_event { uint32_t value; } exi_event;
#else
#include <ck_ec.h>
typedef struct exi_event { struct ck_ec32 ec; } exi_event;
#endif

void exi_event_init(exi_event *e);
/* The current value (acquire). */
uint32_t exi_event_value(exi_event *e);
/* Blocks while the value is still `seen` (may return early). */
void exi_event_wait(exi_event *e, uint32_t seen);
/* Blocks while the value is still `seen`, at most until CLOCK_MONOTONIC
 * reaches deadline_ns (may return early). */
void exi_event_wait_until(exi_event *e, uint32_t seen, int64_t deadline_ns);
/* Increments the value and wakes the waiter (release). */
void exi_event_inc(exi_event *e);

/* Asymmetric store-load barrier.  The sleeper side (rare, about to park)
 * calls exi_barrier_heavy; publishers call exi_barrier_light, which is only
 * a compiler barrier when the kernel's membarrier() is available, and a
 * full fence otherwise.  Together they order a publisher's store before its
 * later load against the sleeper's store and load. */
void exi_barrier_init(void);
void exi_barrier_heavy(void);
extern int exi_barrier_cheap;
static inline void exi_barrier_light(void) {
#ifdef CEXEC_TSAN
    exi_fence_full();
#else
    if (exi_barrier_cheap) __asm__ __volatile__("" ::: "memory");
    else exi_fence_full();
#endif
}

#endif
