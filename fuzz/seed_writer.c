/* SPDX-License-Identifier: MIT */
/* seed_writer.c - writes the seed corpus (make fuzz-seeds): every seed's
 * bytes into a file of its name, and the decoded graph to stderr. */
#include "graph.h"

#include <stdio.h>

/* Byte grammar (see README.md): 3 mode bytes, then the root node in
 * prefix order.  Kinds: 0 just, 1 just_error, 2 just_stopped, 3 then,
 * 4 upon_error, 5 upon_stopped, 6 let_value, 7 let_error, 8 let_stopped,
 * 9 when_all, 10 bulk, 11 split, 12 continues_on, 13 starts_on, 14 stop_env,
 * 15 task, 16 spawn_future, 17 algo, 18 variant, 19 read_env, 20 write_env,
 * 21 scope. */
#define JUST1(v) 0, 1, (v)
#define JUST2(a, b) 0, 2, (a), (b)
#define JUST0 0, 0
#define JERR(c) 1, (c)
#define JSTOP 2
#define THEN(fb, k) 3, (fb), (k)       /* fb: fn index (0 add, 1 mul, 2 err, 7 stopreq) + 8 * arity */
#define UPON_E(fb, k) 4, (fb), (k)
#define UPON_S(fb, k) 5, (fb), (k)
#define LET_V(fb, k) 6, (fb), (k)      /* fb: 0 just, 1 err, 2 stopped, 3 body, 4 null, 5 echo + 8 * arity */
#define LET_E(fb, k) 7, (fb), (k)
#define LET_S(fb, k) 8, (fb), (k)
#define WHEN2 9, 0
#define WHEN3 9, 1
#define BULK(shape, fb, k) 10, (shape), (fb), (k)  /* fb: fail_at + 16 * grain */
#define SPLIT_NEW 11, 0
#define SPLIT_REF 11, 1
#define CONT(s) 12, (s)                 /* 0 inline, 1 loop, 2 pool */
#define STARTS(s) 13, (s)
#define STOPENV(v) 14, (v)              /* 0 never, 1 fresh, 2 stopped */
#define TASK(f, s) 15, (f), (s)         /* f: TK_* flags (1 twice, 2/4 yield before/after, 8 change to s,
                                           16 inline, 32 sig) */
#define SPAWNF 16
#define TASKO(f, s, o) 15, (f) | 64, (s), (o)  /* o: TO_* options (stack 0-3: default, 32K, 48K, 256K; 4 * stack
                                                  allocator 1 counting, 2 fault; 16 alt allocator; 32 user env;
                                                  64 check ex_task_env); f: 128 two children */
#define ALGO(op, cfg, size, seed, k) 17, (op), (cfg), (size), (seed), (k)
/* ALGO op: 0-2 inclusive/exclusive scan, reduce i64; 3-5 the same f64; 6-8 generic; 9 for_each_index;
 * 10 transform; 11 transform_f64.  cfg: sched | 4 * (1 in place | 2 wide (f64) | 2/4 generic element
 * size 1024/4096 | 48 bad: a NULL array | 56 bad: overlapping arrays).  size: index in algo_sizes (8: 8,
 * 24: 40, 32: 100, 40: 256, 43: 300, 47: 1000, 52: 2048, 60: 16383, 61: 16385, 62: 40000, 63: 131073).  k: init;
 * for_each: (k & 31) < 16 fails at (k & 31) * n / 16, (k >> 5) & 3 the grain (0, 1, 2, 5). */
#define CFG(sched, flags) ((sched) | (flags) << 2)
#define VARIANT(v) 18, (v)              /* 0 into_variant, 1 stopped_as_optional, 2 stopped_as_error + 4 * code */
#define READENV(key) 19, (key)          /* 0 get_scheduler, 1 get_stop_token, 2 get_allocator, 3 user key */
#define WRITEENV(w) 20, (w)             /* w & 3: 0 user key = w >> 2, 2 get_scheduler = (w >> 2) % 3, 3 alt allocator */
#define SCOPE(flags, nchild) 21, (3 * (flags) + (nchild) - 1)  /* flags: SC_* (1 counting, 2/4 stop before/after,
                                                                   8 close before the last, 16 spawn_env) */
#define BOXED1(v) 0, 4 + 1, (v)         /* just of tuple-boxed values */
#define BOXED2(a, b) 0, 4 + 2, (a), (b)
/* mode byte 0: stop (0 none, 1 before, 2 async) | 4 sync_wait | 8 loop thread
 * | 32 fault default / 48 fault env | 64 no taps | 128 spawn the root; byte 1: env sched (0 none,
 * 1 loop, 2 pool) | 4 * stop delay; byte 2: fault parameter. */

typedef struct seed {
    const char *name;
    const uint8_t *bytes;
    size_t size;
} seed;

#define SEED(name, ...) { name, (const uint8_t[]){ __VA_ARGS__ }, sizeof((const uint8_t[]){ __VA_ARGS__ }) }

static const seed seeds[] = {
    SEED("just", 0, 0, 0, JUST2(3, 4)),
    SEED("just_error", 0, 0, 0, JERR(5)),
    SEED("just_stopped", 0, 0, 0, JSTOP),
    SEED("then_chain", 0, 0, 0, THEN(8 + 0, 5), THEN(16 + 1, 2), JUST2(1, 2)),
    SEED("upon_error", 0, 0, 0, UPON_E(8, 1), THEN(8 + 2, 3), JUST1(7)),
    SEED("upon_stopped", 0, 0, 0, UPON_S(16, 4), JSTOP),
    SEED("let_value_body", 0, 0, 0, LET_V(3, 0), JUST1(1), WHEN2, JUST1(2), THEN(8, 1), JUST1(3)),
    SEED("let_error_stopped", 0, 0, 0, LET_S(8, 9), LET_E(2, 0), JERR(1)),
    SEED("when_all_error", 0, 0, 0, WHEN3, JUST1(1), CONT(1), JUST1(2), JERR(3)),
    SEED("bulk_pool", 0, 2, 0, BULK(6, 0x0b, 0), CONT(2), JUST2(1, 2)),
    SEED("bulk_fail_seq", 0, 0, 0, BULK(5, 0x12, 3), JUST1(4)),
    SEED("split_twice", 0, 0, 0, WHEN2, SPLIT_NEW, CONT(2), JUST1(9), SPLIT_REF),
    SEED("split_three", 0, 0, 0, WHEN3, SPLIT_NEW, STARTS(1), JUST1(1), THEN(8, 1), SPLIT_REF, SPLIT_REF),
    SEED("starts_on_loop_stop_before", 1, 0, 0, STARTS(1), JUST1(1)),
    SEED("continues_on_async_stop", 2 | 8, 4, 0, CONT(1), CONT(2), CONT(1), JUST1(1)),
    SEED("stopreq_then_hop", 0, 0, 0, CONT(1), THEN(8 + 7, 0), JUST1(1)),
    SEED("stop_env_stopped", 0, 0, 0, UPON_S(8, 0), STOPENV(2), STARTS(2), JUST1(1)),
    SEED("stop_env_never", 1, 0, 0, STOPENV(0), CONT(1), JUST1(1)),
    SEED("sync_wait_pool", 4, 0, 0, LET_V(3, 0), CONT(2), JUST1(1), BULK(4, 0x0f, 0), JUST1(2)),
    SEED("fault_default", 32, 0, 3, LET_V(3, 0), JUST1(1), WHEN2, JUST1(2), SPLIT_NEW, JUST1(3)),
    SEED("fault_env", 48, 0, 2, LET_V(3, 0), JUST1(1), LET_E(0 + 8, 1), JERR(4)),
    SEED("no_taps", 64, 1, 0, WHEN2, STARTS(2), JUST1(1), LET_V(8, 1), CONT(1), JUST1(2)),
    SEED("let_null", 0, 0, 0, UPON_E(8, 0), LET_V(4, 0), JUST0),
    SEED("when_all_too_many", 0, 0, 0, UPON_E(8, 0), WHEN3, 0, 3, 1, 2, 3, 0, 3, 4, 5, 6, 0, 3, 7, 8, 9),
    SEED("task_no_sched", 0, 0, 0, THEN(8, 1), TASK(0, 0), JUST1(1)),
    SEED("task_inline_no_sched", 0, 0, 0, TASK(16, 0), JUST1(1)),
    SEED("task_sync_wait", 4, 0, 0, TASK(0, 0), JUST1(5)),
    SEED("task_twice", 4, 0, 0, TASK(1 | 32, 0), JUST2(3, 4)),
    SEED("task_yield_change", 0, 2, 0, TASK(2 | 4 | 8, 1), THEN(8, 1), JUST1(2)),
    SEED("task_nested", 4, 0, 0, TASK(0, 0), TASK(8, 2), JUST2(1, 2)),
    SEED("task_error", 0, 1, 0, UPON_E(8, 0), TASK(4, 0), JERR(3)),
    SEED("task_stopped", 0, 2, 0, TASK(1, 0), JSTOP),
    SEED("task_stop_async", 2 | 8, 1 | 4 * 3, 0, TASK(2, 1), STARTS(1), JUST1(1)),
    SEED("task_stop_before", 1, 1, 0, TASK(0, 0), CONT(0), JUST1(1)),
    SEED("when_all_tasks", 4, 0, 0, WHEN2, TASK(0, 0), CONT(2), JUST1(1), TASK(32, 0), JUST1(2)),
    SEED("task_in_split", 4, 0, 0, WHEN2, SPLIT_NEW, TASK(0, 0), JUST1(1), SPLIT_REF),
    SEED("task_in_let_body", 0, 2, 0, LET_V(3, 0), CONT(1), JUST1(1), TASK(8, 0), JUST1(2)),
    SEED("task_fault", 32, 1, 5, TASK(2 | 4 | 8, 2), CONT(2), BOXED2(1, 2)),
    SEED("spawn_future", 0, 0, 0, SPAWNF, CONT(2), JUST1(4)),
    SEED("spawn_future_task", 4, 0, 0, SPAWNF, TASK(0, 0), JUST1(1)),
    SEED("spawn_future_task_inline", 4, 0, 0, WHEN2, SPAWNF, TASK(16, 0), JUST1(1), SPAWNF, JERR(2)),
    SEED("spawn_future_dropped", 0, 1, 0, LET_V(1, 0), JUST0, SPAWNF, STARTS(1), JUST1(1)),
    SEED("spawn_root", 128, 0, 0, THEN(8, 1), JUST1(1)),
    SEED("spawn_root_error", 128, 1, 0, CONT(1), JERR(2)),
    SEED("spawn_root_stop_before", 128 | 1, 1, 0, STARTS(1), JUST1(1)),
    SEED("launch_task", 128, 2, 0, TASK(4, 1), JUST1(1)),
    SEED("launch_task_error", 128 | 8, 1, 0, TASK(0, 0), CONT(2), JERR(4)),
    SEED("tuple_just", 4, 0, 0, BOXED2(5, 6)),
    SEED("tuple_when_all", 4, 0, 0, WHEN2, CONT(2), BOXED1(7), TASK(0, 0), BOXED2(1, 2)),
    SEED("tuple_split", 0, 2, 0, WHEN2, SPLIT_NEW, CONT(2), BOXED1(9), SPLIT_REF),
    SEED("tuple_let_echo", 0, 0, 0, LET_V(5, 0), CONT(0), BOXED2(1, 2)),
    /* Inputs that once failed (kind bytes of the current grammar). */
    SEED("regress_change_fails_oom", 0x21, 0x02, 0x00, 0x0f, 0x28, 0xa8, 0x0f, 0x28, 0xa8, 0x0f, 0x1a, 0x0f, 0x00, 0x52,
         0x52, 0x50, 0x50, 0x50, 0x50, 0x50, 0x50, 0x01),
    SEED("regress_change_fails_oom_2", 0x7d, 0x85, 0x7d, 0x04, 0x7e, 0x00, 0x10, 0x0f, 0x3f, 0xff, 0x00, 0xff, 0xff, 0xff,
         0xff, 0x00, 0xf9, 0xf7, 0x40, 0x24),
    /* Parallel algorithms. */
    SEED("algo_iscan_i64_pool", 0, 2, 0, ALGO(0, CFG(2, 0), 24, 7, 0)),
    SEED("algo_escan_i64_inplace_loop", 0, 1, 0, ALGO(1, CFG(1, 1), 32, 9, 5)),
    SEED("algo_reduce_i64_parallel", 4, 0, 0, ALGO(2, CFG(2, 0), 63, 3, -4)),
    SEED("algo_iscan_f64_exact_tiles", 0, 0, 0, ALGO(3, CFG(0, 0), 61, 1, 0)),
    SEED("algo_escan_f64_wide_pool", 0, 2, 0, ALGO(4, CFG(2, 2), 62, 5, 3)),
    SEED("algo_reduce_f64_wide_parallel", 0, 0, 0, ALGO(5, CFG(2, 2), 63, 8, 1)),
    SEED("algo_iscan_generic_parallel", 0, 2, 0, ALGO(6, CFG(2, 4), 43, 4, 0)),
    SEED("algo_escan_generic_inplace", 0, 1, 0, ALGO(7, CFG(1, 3), 40, 2, 3)),
    SEED("algo_reduce_generic", 4, 0, 0, ALGO(8, CFG(2, 4), 41, 6, 0)),
    SEED("algo_for_each_fail", 0, 2, 0, ALGO(9, CFG(2, 0), 24, 11, 5)),
    SEED("algo_for_each_grain", 0, 0, 0, ALGO(9, CFG(1, 0), 32, 12, 0x40 | 20)),
    SEED("algo_transform_inplace", 0, 2, 0, ALGO(10, CFG(2, 1), 47, 3, 0)),
    SEED("algo_transform_f64_parallel", 0, 0, 0, ALGO(11, CFG(2, 2), 52, 4, 0)),
    SEED("algo_bad_null", 0, 0, 0, UPON_E(8, 0), ALGO(0, CFG(0, 48), 5, 1, 0)),
    SEED("algo_bad_overlap", 0, 0, 0, ALGO(10, CFG(2, 56), 5, 1, 0)),
    SEED("algo_stop_async", 2 | 8, 4 * 2, 0, WHEN2, ALGO(6, CFG(2, 4), 43, 4, 0), ALGO(9, CFG(2, 0), 52, 1, 20)),
    SEED("algo_stop_before", 1, 0, 0, ALGO(9, CFG(0, 0), 0, 1, 31)),
    SEED("algo_in_task", 4, 0, 0, TASK(0, 0), ALGO(1, CFG(2, 0), 62, 2, 7)),
    SEED("algo_fault", 32, 0, 1, ALGO(7, CFG(2, 4), 43, 3, 1)),
    /* into_variant, stopped_as_optional, stopped_as_error. */
    SEED("variant_into", 0, 0, 0, VARIANT(0), WHEN2, JUST1(1), JUST2(2, 3)),
    SEED("variant_into_dynamic", 0, 0, 0, VARIANT(0), LET_V(5, 0), JUST2(1, 2)),
    SEED("variant_into_upon", 0, 0, 0, VARIANT(0), UPON_E(16, 1), JUST1(1)),
    SEED("variant_into_second_sig", 0, 0, 0, VARIANT(0), UPON_E(16, 0), THEN(8 + 2, 0), JUST1(1)),
    SEED("variant_optional_stopped", 1, 0, 0, VARIANT(1), STARTS(1), JUST1(1)),
    SEED("variant_optional_tuple", 0, 0, 0, VARIANT(1), JUST2(1, 2)),
    SEED("variant_optional_invalid", 0, 0, 0, VARIANT(1), JUST0),
    SEED("variant_as_error", 0, 0, 0, VARIANT(2 + 4 * 3), JSTOP),
    /* read_env and write_env. */
    SEED("read_env_sched", 0, 1, 0, READENV(0)),
    SEED("read_env_sched_none", 0, 0, 0, READENV(0)),
    SEED("read_env_starts_on", 0, 0, 0, STARTS(2), READENV(0)),
    SEED("read_env_token_stop_env", 0, 0, 0, STOPENV(1), READENV(1)),
    SEED("read_env_token_when_all", 4, 0, 0, WHEN2, READENV(1), READENV(1)),
    SEED("read_env_alloc_fault_env", 48, 0, 94, READENV(2)),
    SEED("read_env_alloc_pool", 0, 2, 0, READENV(2)),
    SEED("read_env_user", 0, 0, 0, WRITEENV(0 + 4 * 7), CONT(2), READENV(3)),
    SEED("read_env_user_missing", 0, 0, 0, READENV(3)),
    SEED("read_env_in_split", 0, 0, 0, WHEN2, SPLIT_NEW, READENV(1), SPLIT_REF),
    SEED("read_env_in_future", 0, 0, 0, SPAWNF, READENV(2)),
    SEED("write_env_sched_task", 0, 0, 0, WRITEENV(2 + 4 * 1), TASK(0, 0), READENV(0)),
    SEED("write_env_alloc", 0, 0, 0, WRITEENV(3), WHEN2, READENV(2), STARTS(2), READENV(2)),
    /* Scopes. */
    SEED("scope_simple_env", 0, 2, 0, SCOPE(16, 3), JUST1(1), JERR(2), CONT(2), JUST1(3)),
    SEED("scope_counting_stop_before", 0, 0, 0, SCOPE(1 | 2, 2), STARTS(1), JUST1(1), CONT(2), JERR(4)),
    SEED("scope_counting_stop_after", 0, 1, 0, SCOPE(1 | 4 | 16, 2), CONT(1), JUST1(1), STARTS(2), READENV(1)),
    SEED("scope_close", 0, 0, 0, SCOPE(8 | 16, 2), JUST1(1), JERR(2)),
    SEED("scope_task_no_env", 0, 2, 0, SCOPE(0, 1), TASK(0, 0), JUST1(1)),
    SEED("scope_task_env", 0, 2, 0, SCOPE(16, 2), TASK(0, 0), READENV(0), ALGO(0, CFG(2, 0), 24, 7, 0)),
    /* Task options, tasks awaiting two children. */
    SEED("task_opts_small_stack", 4, 0, 0, TASKO(0, 0, 1), THEN(8, 1), JUST1(1)),
    SEED("task_opts_env_alloc", 0, 2, 0, TASKO(0, 0, 1 << 2 | 16 | 32 | 64), WHEN2, READENV(2), READENV(3)),
    SEED("task_opts_user_env", 4, 0, 0, TASKO(8, 2, 2 | 32 | 64), READENV(3)),
    SEED("task_opts_fault_stack", 32, 1, 1, TASKO(0, 0, 2 << 2), JUST1(1)),
    SEED("task_two", 4, 0, 0, TASK(128, 0), JUST1(1), THEN(8, 1), JUST1(2)),
    SEED("task_two_first_error", 4, 0, 0, TASK(128, 0), JERR(3), JUST1(1)),
    SEED("task_two_opts", 0, 2, 0, TASKO(128 | 2, 2, 3 | 64), CONT(1), JUST1(1), READENV(0)),
    SEED("task_opts_guarded_stack", 0, 2, 0, TASKO(0, 0, 1 | 1 << 2), LET_E(0, 1), CONT(0), JERR(0)),
    /* The allocator shortcut of starts_on and when_all (README, findings). */
    SEED("regress_alloc_shortcut", 0, 0, 0, STARTS(2), STARTS(0), READENV(2)),
    SEED("regress_alloc_shortcut_when_all", 0, 0, 0, WHEN2, STARTS(2), READENV(2), JUST1(0)),
    /* The same shortcut in a let body run on its child's completion scheduler. */
    SEED("regress_alloc_shortcut_let", 4, 0, 0, LET_V(3, 0), CONT(2), JUST0, STARTS(0), READENV(2)),
    /* A bulk under starts_on(inline) inside pool work runs inline (the pool's domain
     * in force does not move it): its stopped environment does not stop it. */
    SEED("regress_bulk_under_inline_in_pool", 0, 4, 0, STARTS(2), STARTS(0), STOPENV(2), BULK(4, 8 | 16 * 2, 4), JUST0),
    /* Every bulk of a bulk of a bulk runs on the pool (a replacement's parts are offered
     * to the domain): stopped before start, none fails. */
    SEED("regress_nested_bulk_on_pool", 1 | 128, 2 | 4 * 2, 10, BULK(2, 10, 10), BULK(2, 10, 10), BULK(1, 0, 13),
         UPON_S(2, 2), JUST1(8)),
};

int main(int argc, char **argv) {
    const char *dir = argc > 1 ? argv[1] : "fuzz/corpus";
    for (size_t i = 0; i < sizeof seeds / sizeof seeds[0]; i++) {
        char path[512];
        snprintf(path, sizeof path, "%s/%s", dir, seeds[i].name);
        FILE *f = fopen(path, "wb");
        if (!f || fwrite(seeds[i].bytes, 1, seeds[i].size, f) != seeds[i].size) {
            fprintf(stderr, "cannot write %s\n", path);
            return 1;
        }
        fclose(f);
        g_graph g;
        g_decode(&g, seeds[i].bytes, seeds[i].size);
        fprintf(stderr, "== %s (%zu bytes)\n", seeds[i].name, seeds[i].size);
        g_dump(&g);
    }
    return 0;
}
