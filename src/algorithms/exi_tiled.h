/* SPDX-License-Identifier: MIT */
/* exi_tiled.h - the engine under the parallel algorithms. Internal.
 *
 * A tiled sender runs a per-tile function over ceil(n / tile) tiles on a
 * scheduler.  Its operation schedules onto the scheduler; with more than
 * one participant it runs a bulk of shape `parts` there (each bulk index is
 * one participant), else the schedule's completion runs every tile.
 * In a chained kind, participants claim tiles in increasing order from one
 * counter, so a claimed tile's predecessors are all claimed by participants
 * that are running: waiting for a predecessor (exi_tiled_chain_wait) always
 * ends.  A participant claims its next tile before processing the current
 * one (so the tile can prefetch it); it still processes its claims in
 * increasing order, which keeps the argument intact.
 * An unchained kind waits for nothing, so its tiles are cut into one block
 * a participant: participant p claims from block p's counter (a line of
 * its own: no counter shared by every claim), then from the others'.  With
 * the same participant on the same agent from run to run, a block stays in
 * that core's cache, as OpenMP's static schedule keeps it.
 * A stop request or a failed tile ends the claiming; the tiles already
 * claimed finish. */
#ifndef EXI_TILED_H
#define EXI_TILED_H

#include <stdalign.h>
#include <stddef.h>

#include <cexec/cexec.h>

#include "base/exi_atomic.h"

/* Tiles each participant must get for one more to take part: a run of
 * ntiles tiles has min(workers, ntiles / tiles_per_part) participants (at
 * least 1); one participant runs every tile in the schedule's completion,
 * with no bulk and no wake-up.  A participant has to arrive before its
 * share is worth anything: a worker looking for work steals the bulk's
 * helper from the starting agent's deque in about a microsecond, a parked
 * one needs a wake-up (a futex call on the starter's path, several
 * microseconds before it runs).  A 128 KB tile takes about 1.3 us to
 * reduce, 4.5 us to scan.  The reductions and scans take 2 tiles a
 * participant (1e5 doubles, 7 tiles, gets two, as OpenMP's does: one
 * core's cache bandwidth is the limit there); the loops keep 4.  The scan
 * used 4 while a participant's arrival cost a wake-up or a queue round
 * trip; once the waiting caller runs its own share and the second joins
 * from a lent slot, two participants scan 7 tiles faster (docs/
 * algorithms.md, "How a run proceeds"). */
#define EXI_TILES_PER_PART 4
#define EXI_REDUCE_TILES_PER_PART 2
/* Typed reductions of at most this many tiles (8 MiB of input) keep one
 * carry per tile in their operation (512 bytes) instead of a chain
 * (reduce.c). */
#define EXI_REDUCE_INLINE_TILES 64
#define EXI_SCAN_TILES_PER_PART 2

typedef struct exi_tiled_sender exi_tiled_sender;
typedef struct exi_tiled_op exi_tiled_op;

typedef struct exi_tiled_kind {
    /* Tiles wait for their predecessors (a chain): every claimed tile must
     * be processed, and the tile function must not fail. */
    bool chained;
    /* Processes tile k = [begin, end) as participant `part` (< parts).
     * [next_begin, next_end) is the tile this participant processes next
     * (empty if none), for prefetching. */
    ex_error (*tile)(exi_tiled_op *o, unsigned part, size_t k, size_t begin, size_t end, size_t next_begin,
                     size_t next_end);
    /* After every tile: writes the value completion into out; returns how
     * many values (0 or 1). */
    size_t (*finish)(exi_tiled_op *o, ex_value *out);
    /* Tiles a participant must get (EXI_TILES_PER_PART, ...). */
    unsigned tiles_per_part;
} exi_tiled_kind;

/* The common head of every algorithm sender; the algorithm's own fields
 * follow it. */
struct exi_tiled_sender {
    ex_sender base;
    const exi_tiled_kind *kind;
    ex_scheduler sch;
    ex_sender *inner;      /* schedule (parts == 1) or bulk over participants */
    size_t n, tile, ntiles;
    unsigned parts;
    size_t scratch_size;   /* bytes allocated per run from the environment's allocator */
    size_t op_extra;       /* bytes for the kind in the operation itself (exi_tiled_extra) */
    size_t inner_off;      /* where the inner operation starts in the tiled operation */
};

typedef union exi_carry { double d; uint64_t u; } exi_carry;

/* Participant p's own line.  An unchained kind's block of tiles: claimed
 * from `next` up to `end` (by p first, then by the others).  `done` counts
 * the tiles p processed (written by p alone, read at completion).  A
 * chained kind may keep the sum of p's next tile (tile `sum_tile`, or
 * UINT64_MAX: none), p's alone. */
typedef struct exi_tiled_block {
    _Alignas(64) uint64_t next;
    uint64_t end;
    uint64_t done;
    uint64_t sum_tile;
    exi_carry sum;
} exi_tiled_block;

struct exi_tiled_op {
    ex_operation base;
    ex_receiver r;
    const exi_tiled_sender *s;
    ex_env_pair env;            /* the run key and get_scheduler, for the inner operation */
    ex_stop_token token;
    const ex_allocator *alloc;
    void *scratch;              /* scratch_size bytes, max_align_t aligned */
    ex_error err;
    uint32_t failed, stopped;
    exi_carry total;            /* typed results */
    _Alignas(64) uint64_t next_tile;  /* a chained kind's claims */
    _Alignas(64) uint64_t chain;  /* tiles whose prefix has been folded into `prefix` */
    exi_carry prefix;             /* typed chain value; generic forms keep theirs in scratch */
    exi_tiled_block blocks[];     /* one a participant (exi_tiled_sender.parts) */
};

/* Allocates a tiled sender of `size` bytes and fills the head.  Returns
 * NULL when out of memory.  `tile` > 0 elements per tile. */
exi_tiled_sender *exi_tiled_alloc(const ex_sender_vtable *vt, size_t size, const exi_tiled_kind *kind, ex_scheduler sch,
                                  size_t n, size_t tile, ex_sig value_sig);

/* Builds the inner sender once the algorithm's fields are set (parts may
 * be lowered first); returns the sender, or an invalid one (releasing s). */
ex_sender *exi_tiled_finish(exi_tiled_sender *s);

/* Participants the scheduler runs at once: the pool's worker count, 1 for
 * schedulers without a bulk customisation. */
unsigned exi_scheduler_concurrency(ex_scheduler sch);

/* The tiled senders' vtable pieces (connect, attributes, destroy). */
ex_error exi_tiled_connect(const ex_sender *s, ex_receiver r, void *storage);
ex_env exi_tiled_attrs(const ex_sender *s);
void exi_tiled_destroy(ex_sender *s);

/* Bytes of s's operation before its op_extra: the head and one block a
 * participant, max_align_t aligned. */
static inline size_t exi_tiled_head_size(const exi_tiled_sender *s) {
    return ex_align_up(sizeof(exi_tiled_op) + s->parts * sizeof(exi_tiled_block), alignof(max_align_t));
}

/* The op_extra bytes of o's operation, max_align_t aligned. */
static inline void *exi_tiled_extra(exi_tiled_op *o) { return (char *)o + exi_tiled_head_size(o->s); }

/* Waits until tiles [0, k) have been folded into the chain (acquire). */
void exi_tiled_chain_wait(exi_tiled_op *o, size_t k);

/* Marks tile k folded (release): tile k + 1 may proceed. */
static inline void exi_tiled_chain_publish(exi_tiled_op *o, size_t k) { exi_store_rel_u64(&o->chain, (uint64_t)k + 1); }

/* First element of tile k. */
static inline size_t exi_tile_begin(const exi_tiled_sender *s, size_t k) { return k * s->tile; }

#endif
