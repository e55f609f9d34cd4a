/* SPDX-License-Identifier: MIT */
/* exi_test_hooks.h - the points where tests may widen a race window.
 * Internal; every hook is NULL in production and costs one load.
 *
 * Only tests and stress programs set these; the library never does. */
#ifndef EXI_TEST_HOOKS_H
#define EXI_TEST_HOOKS_H

/* Called by a request on a lazy stop source (core/exi_lazy_stop.h)
 * between setting the flag and counting the request done. */
extern void (*exi_stop_counted_hook)(void);

/* Called by a request on a lazy stop source after counting it begun and
 * before setting its flag. */
extern void (*exi_stop_begun_hook)(void);

/* Called by the linking of a lazy stop source after its link was
 * registered on its parent and before it is published linked. */
extern void (*exi_stop_link_hook)(void);

/* Called by ex_sync_wait's waiter (adaptors/sync_wait.c) after it found
 * its loop empty and before it sleeps. */
extern void (*exi_sync_sleep_hook)(void);

/* Called by a cancel of a timer on ex_sync_wait's loop (sloop_cancel)
 * between taking the timer out and releasing the heap's lock: the wait
 * may see no timer left from there on. */
extern void (*exi_sync_cancel_hook)(void);

/* Called by the pool's timer arm (resources/pool_timers.c) after it armed
 * the timer and released the timers' lock: from there on the timer may
 * fire, its operation go away and the pool be destroyed. */
extern void (*exi_pool_timer_armed_hook)(void);

#endif
