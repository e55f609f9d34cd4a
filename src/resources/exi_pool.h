/* exi_pool.h - what the rest of the library needs from the pool. Internal. */
#ifndef EXI_POOL_H
#define EXI_POOL_H

#include <stdbool.h>

#include <cexec/types.h>

/* On a pool worker: takes the newest item of its own deque when
 * accept(item, ctx) says so, for the caller to run (counted as executed);
 * otherwise leaves the deque as it was and returns NULL.  NULL elsewhere.
 * Used by a task about to suspend to run its own children nested. */
ex_work *exi_pool_take_own_if(bool (*accept)(ex_work *w, void *ctx), void *ctx);

/* On a worker of the pool behind sch: queues w on its own deque, as
 * ex_post would, and returns true.  False, with nothing done, anywhere
 * else or once the pool is shutting down (ex_post then gives the error). */
bool exi_pool_post_here(ex_scheduler sch, ex_work *w);

/* On a worker of the pool behind sch: about how many items its own deque
 * holds (thieves may be taking some).  0 anywhere else. */
uint64_t exi_pool_backlog_here(ex_scheduler sch);

/* The worker count of the pool behind sch, or 0 when sch is not a pool's. */
unsigned exi_pool_size_of(ex_scheduler sch);

#endif
