/* SPDX-License-Identifier: MIT */
/* Size arguments that must not wrap (docs/RELIABILITY.md, "Size
 * arguments"): allocation requests no allocator can meet, task stack sizes,
 * bulk shapes near SIZE_MAX on the pool, value completions with more than
 * EX_MAX_ARITY values, and operation-state layouts built from senders or
 * schedulers of yours whose sizes are absurd.  Each case once wrapped to a
 * small number somewhere (a tiny block, a tiny stack, zero chunks) or wrote
 * past a fixed array; now it is refused with the documented error or runs
 * as asked. */
#include <pthread.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include <cexec/allocators.h>

#include "common/helpers.h"

TEST_SUITE(size_limits, 30);

/* ======================================================== allocators */

typedef struct request { size_t size, align; } request;

/* Requests every built-in allocator refuses (allocator.h). */
static const request impossible[] = {
    { SIZE_MAX, 16 },
    { SIZE_MAX - 8, 16 },              /* + a 16-byte header wrapped to a tiny block */
    { SIZE_MAX - 8, 64 },              /* + the alignment: a tiny block, header written past it */
    { EX_ALLOC_MAX_SIZE + 1, 16 },
    { 64, 3 },                         /* not powers of two: no block can promise them */
    { 64, 24 },
    { 64, 48 },
    { 4096, 96 },
    { 64, EX_ALLOC_MAX_ALIGN << 1 },
    { 64, (size_t)1 << 63 },
};
#define N_IMPOSSIBLE (sizeof impossible / sizeof impossible[0])

static uint64_t failures_of(const ex_allocator *a) {
    ex_alloc_stats st;
    if (ex_allocator_stats(a, &st).code) return 0;
    return st.failures;
}

/* Every impossible request is NULL and counted as a failure; sizes 0 and
 * alignments 0, 1, 16 and 64 still work. */
static void expect_sane_allocator(const ex_allocator *a) {
    uint64_t before = failures_of(a);
    for (size_t k = 0; k < N_IMPOSSIBLE; k++) {
        void *p = a->allocate(a->ctx, impossible[k].size, impossible[k].align);
        if (p) a->deallocate(a->ctx, p, impossible[k].size, impossible[k].align);  /* let the next case run */
        cr_expect_null(p, "%s: allocate(%zu, %zu) gave a block", a->name, impossible[k].size, impossible[k].align);
    }
    if (a->stats)
        cr_expect_eq(failures_of(a) - before, N_IMPOSSIBLE, "%s: %llu failures counted for %zu refusals", a->name,
                     (unsigned long long)(failures_of(a) - before), N_IMPOSSIBLE);
    static const request fine[] = { { 0, 0 }, { 0, 16 }, { 64, 0 }, { 64, 1 }, { 100, 64 }, { 5000, 64 } };
    for (size_t k = 0; k < sizeof fine / sizeof fine[0]; k++) {
        void *p = a->allocate(a->ctx, fine[k].size, fine[k].align);
        cr_assert_not_null(p, "%s: allocate(%zu, %zu) failed", a->name, fine[k].size, fine[k].align);
        size_t align = fine[k].align ? fine[k].align : 1;
        cr_expect_eq((uintptr_t)p % align, 0, "%s: allocate(%zu, %zu) is misaligned", a->name, fine[k].size, align);
        memset(p, 0xab, fine[k].size);
        a->deallocate(a->ctx, p, fine[k].size, fine[k].align);
    }
}

Test(size_limits, libc_allocator_refuses_impossible_requests) {
    expect_sane_allocator(ex_libc_allocator());
    expect_no_leaks();
}

Test(size_limits, builtin_default_allocator_refuses_impossible_requests) {
    expect_sane_allocator(ex_builtin_allocator());
    expect_no_leaks();
}

Test(size_limits, recycling_allocator_refuses_impossible_requests_inline_too) {
    ex_recycling_allocator *r = NULL;
    cr_assert_eq(ex_recycling_allocator_create(NULL, &r).code, EX_OK);
    expect_sane_allocator(ex_recycling_allocator_get(r));
    /* The header's inline entry points take the same decisions. */
    for (size_t k = 0; k < N_IMPOSSIBLE; k++) {
        void *p = ex_recycling_allocate(r, impossible[k].size, impossible[k].align);
        if (p) ex_recycling_deallocate(r, p, impossible[k].size, impossible[k].align);
        cr_expect_null(p, "inline: allocate(%zu, %zu) gave a block", impossible[k].size, impossible[k].align);
    }
    void *p = ex_recycling_allocate(r, 0, 0);
    cr_assert_not_null(p);
    ex_recycling_deallocate(r, p, 0, 0);
    ex_recycling_allocator_destroy(r);
    expect_no_leaks();
}

/* The pools' default frame allocator: in plain builds real jemalloc, in
 * sanitizer builds routed to malloc (both must refuse). */
Test(size_limits, jemalloc_allocator_refuses_impossible_requests) {
    ex_jemalloc_allocator *j = NULL;
    cr_assert_eq(ex_jemalloc_allocator_create(2, &j).code, EX_OK);
    expect_sane_allocator(ex_jemalloc_allocator_get(j));
    ex_jemalloc_allocator_destroy(j);
    expect_no_leaks();
}

Test(size_limits, budget_allocator_refuses_impossible_requests) {
    ex_budget_allocator b;
    ex_budget_allocator_init(&b, ex_libc_allocator(), SIZE_MAX);
    expect_sane_allocator(ex_budget_allocator_get(&b));
    ex_alloc_stats st;
    cr_assert_eq(ex_allocator_stats(ex_budget_allocator_get(&b), &st).code, EX_OK);
    cr_expect_eq(st.bytes_in_use, 0, "a refused request left bytes reserved");
    expect_no_leaks();
}

Test(size_limits, monotonic_allocator_refuses_impossible_requests) {
    static alignas(64) unsigned char buf[16384];
    ex_monotonic_allocator m;
    ex_monotonic_allocator_init(&m, buf, sizeof buf, NULL);
    expect_sane_allocator(ex_monotonic_allocator_get(&m));
    /* Alignment 0 came from the buffer (it once wrapped to "exhausted"). */
    ex_monotonic_allocator_reset(&m);
    unsigned char *p = ex_monotonic_allocator_get(&m)->allocate(&m, 8, 0);
    cr_expect(p >= buf && p < buf + sizeof buf, "alignment 0 did not come from the buffer");
    expect_no_leaks();
}

Test(size_limits, fault_allocator_refuses_impossible_requests) {
    ex_fault_allocator f;
    ex_fault_allocator_init(&f, ex_libc_allocator());
    expect_sane_allocator(ex_fault_allocator_get(&f));
    expect_no_leaks();
}

/* ======================================================== task stacks */

static ex_task_result nothing(ex_task *t, void *arg) {
    (void)t, (void)arg;
    return ex_task_void();
}

/* Records the stack size asked for and refuses it. */
typedef struct asking_alloc {
    ex_allocator base;
    size_t asked;
} asking_alloc;

static void *asking_allocate(void *ctx, size_t size, size_t align) {
    (void)align;
    ((asking_alloc *)ctx)->asked = size;
    return NULL;
}
static void asking_deallocate(void *ctx, void *p, size_t size, size_t align) { (void)ctx, (void)p, (void)size, (void)align; }

Test(size_limits, task_stack_sizes_beyond_the_maximum_are_einval) {
    asking_alloc aa = { { asking_allocate, asking_deallocate, &aa, "asking", NULL }, 0 };
    static const size_t bad[] = { SIZE_MAX, SIZE_MAX - 15, ((size_t)1 << 62) + 8192, EX_TASK_STACK_MAX + 1 };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        for (int own = 0; own < 2; own++) {  /* the default stacks (4 x stack_size), a stack allocator of yours */
            ex_task_options o = { 0 };
            o.stack_size = bad[k];
            o.stack_allocator = own ? &aa.base : NULL;
            ex_sender *s = ex_task_create(nothing, NULL, &o);
            cr_expect_eq(ex_sender_status(s).code, EX_EINVAL, "stack_size %zu (own allocator %d) was accepted", bad[k], own);
            ex_result r = ex_sync_wait(s);
            cr_expect_eq(r.disposition, EX_DISP_ERROR);
            cr_expect_eq(r.error.code, EX_EINVAL);
            ex_result_destroy(&r);
        }
    }
    cr_expect_eq(aa.asked, 0, "a stack was asked for");
    expect_no_leaks();
}

/* At the bound the whole stack is asked for (the sums do not wrap there). */
Test(size_limits, task_stack_size_at_the_maximum_asks_for_all_of_it) {
    asking_alloc aa = { { asking_allocate, asking_deallocate, &aa, "asking", NULL }, 0 };
    ex_task_options o = { 0 };
    o.stack_size = EX_TASK_STACK_MAX;
    o.stack_allocator = &aa.base;
    ex_result r = ex_sync_wait(ex_task_create(nothing, NULL, &o));
    cr_expect_eq(r.disposition, EX_DISP_ERROR);
    cr_expect_eq(r.error.code, EX_ENOMEM);
    cr_expect_geq(aa.asked, EX_TASK_STACK_MAX);
    cr_expect_lt(aa.asked, EX_TASK_STACK_MAX + 16384, "asked for %zu", aa.asked);
    ex_result_destroy(&r);
    expect_no_leaks();
}

/* ======================================================== bulk shapes */

#define STOP_AT 5000u
#define BULK_ERR (EX_EUSER + 17)

typedef struct counted { atomic_size_t calls; } counted;

/* Fails from index STOP_AT on: the only way a SIZE_MAX loop ends. */
static ex_error count_until(void *ctx, size_t i, const ex_value *v, size_t n) {
    (void)v, (void)n;
    atomic_fetch_add(&((counted *)ctx)->calls, 1);
    return i >= STOP_AT ? ex_err(BULK_ERR, "stop here") : ex_ok();
}

/* The calls a bulk of chunks of `grain` indices (0: too large to matter)
 * shared by `participants` must have made before it ended with the error:
 * every index up to the failing one, less the chunks that the other
 * participants had claimed and then skipped because the error came first
 * (at most one each: a participant that skips stops).  At least the
 * failing call itself. */
static size_t least_calls(size_t grain, unsigned participants) {
    size_t all = (size_t)STOP_AT + 1;
    if (grain == 0 || grain >= all) return participants > 1 ? 1 : all;
    size_t skipped = (size_t)(participants - 1) * grain;
    return skipped < all ? all - skipped : 1;
}

static void expect_runs_until_the_error(ex_sender *s, counted *c, size_t least) {
    ex_result r = ex_sync_wait(s);
    cr_expect_eq(r.disposition, EX_DISP_ERROR, "a SIZE_MAX bulk completed without its error (%zu calls)",
                 atomic_load(&c->calls));
    cr_expect_eq(r.error.code, BULK_ERR);
    cr_expect_geq(atomic_load(&c->calls), least, "f ran %zu times, at least %zu expected", atomic_load(&c->calls),
                  least);
    ex_result_destroy(&r);
}

Test(size_limits, pool_bulk_with_shape_near_size_max_runs_until_the_first_error) {
    ex_pool *p = test_pool_new(2);
    static const size_t grains[] = { 2, 1, 0, 1000, SIZE_MAX / 2 - 1 };
    for (size_t k = 0; k < sizeof grains / sizeof grains[0]; k++) {
        size_t least = least_calls(grains[k], ex_pool_size(p));
        counted c = { 0 };
        expect_runs_until_the_error(ex_bulk_grain(ex_schedule(ex_pool_scheduler(p)), EX_PAR, SIZE_MAX, grains[k], count_until, &c), &c,
                                    least);
        counted c2 = { 0 };
        expect_runs_until_the_error(ex_bulk_grain(ex_schedule(ex_pool_scheduler(p)), EX_PAR, SIZE_MAX - 1, grains[k], count_until, &c2),
                                    &c2, least);
    }
    /* The same off the pool, sequentially: every index up to the failing one. */
    counted c = { 0 };
    expect_runs_until_the_error(ex_bulk_grain(ex_just(), EX_PAR, SIZE_MAX, 2, count_until, &c), &c, least_calls(2, 1));
    test_pool_free(p);
    expect_no_leaks();
}

/* Chunk ranges seen by a chunked body (it does not loop over them). */
typedef struct ranges {
    pthread_mutex_t mu;
    size_t n;
    size_t begin[8], end[8];
    bool fail_first;
} ranges;

static ex_error note_range(void *ctx, size_t b, size_t e, const ex_value *v, size_t n) {
    (void)v, (void)n;
    ranges *r = ctx;
    pthread_mutex_lock(&r->mu);
    if (r->n < 8) {
        r->begin[r->n] = b;
        r->end[r->n] = e;
    }
    r->n++;
    pthread_mutex_unlock(&r->mu);
    return r->fail_first ? ex_err(BULK_ERR, "seen one") : ex_ok();
}

static void ranges_init(ranges *r, bool fail_first) {
    memset(r, 0, sizeof *r);
    pthread_mutex_init(&r->mu, NULL);
    r->fail_first = fail_first;
}

Test(size_limits, pool_bulk_chunks_end_at_shape_without_wrapping) {
    ex_pool *p = test_pool_new(2);
    /* Two chunks: [0, SIZE_MAX - 1) and [SIZE_MAX - 1, SIZE_MAX). */
    ranges rg;
    ranges_init(&rg, false);
    ex_result r = ex_sync_wait(ex_bulk_chunked(ex_schedule(ex_pool_scheduler(p)), EX_PAR, SIZE_MAX, SIZE_MAX - 1, note_range, &rg));
    cr_expect_eq(r.disposition, EX_DISP_VALUE);
    cr_assert_eq(rg.n, 2, "%zu chunks instead of 2", rg.n);
    size_t covered = 0;
    for (size_t k = 0; k < 2; k++) {
        cr_expect_lt(rg.begin[k], rg.end[k], "chunk [%zu, %zu)", rg.begin[k], rg.end[k]);
        cr_expect_leq(rg.end[k], SIZE_MAX);
        covered += rg.end[k] - rg.begin[k];
    }
    cr_expect_eq(covered, SIZE_MAX, "the chunks cover %zu indices", covered);
    ex_result_destroy(&r);
    /* A grain of SIZE_MAX: one chunk, the whole shape. */
    ranges_init(&rg, false);
    r = ex_sync_wait(ex_bulk_chunked(ex_schedule(ex_pool_scheduler(p)), EX_PAR, SIZE_MAX, SIZE_MAX, note_range, &rg));
    cr_expect_eq(r.disposition, EX_DISP_VALUE);
    cr_assert_eq(rg.n, 1);
    cr_expect_eq(rg.begin[0], 0);
    cr_expect_eq(rg.end[0], SIZE_MAX);
    ex_result_destroy(&r);
    test_pool_free(p);
    expect_no_leaks();
}

Test(size_limits, pool_bulk_default_grain_near_size_max_is_shape_over_chunks) {
    ex_pool *p = test_pool_new(2);
    ranges rg;
    ranges_init(&rg, true);
    ex_result r = ex_sync_wait(ex_bulk_chunked(ex_schedule(ex_pool_scheduler(p)), EX_PAR, SIZE_MAX, 0, note_range, &rg));
    cr_expect_eq(r.disposition, EX_DISP_ERROR);
    cr_assert_geq(rg.n, 1);
    size_t parts = 8 * 2, want = SIZE_MAX / parts + 1;  /* ceil(SIZE_MAX / 16) */
    size_t got = rg.end[0] - rg.begin[0];
    cr_expect(got == want || rg.end[0] == SIZE_MAX, "a default chunk of %zu indices, want %zu", got, want);
    ex_result_destroy(&r);
    test_pool_free(p);
    expect_no_leaks();
}

/* A resource whose bulk hands out a range whose end wrapped. */
static void wrapping_bulk(void *self, ex_bulk_job *job) {
    (void)self;
    size_t begin = job->shape - 1;
    if (ex_bulk_job_run(job, begin, begin + 10)) (void)ex_bulk_job_run(job, 0, begin);  /* begin + 10 wrapped */
    ex_bulk_job_done(job);
}

static const ex_bulk_domain wrapping_domain = EX_BULK_DOMAIN("wrapping_bulk", NULL, wrapping_bulk);

static const ex_scheduler_vtable wrapping_vt = {
    .name = "wrapping_bulk", .schedule_op_size = sizeof(test_schedule_op), .schedule_op_align = alignof(test_schedule_op),
    .connect_schedule = test_connect_schedule_inline, .progress = EX_PROGRESS_WEAKLY_PARALLEL,
    .domain = &wrapping_domain.domain,
};

Test(size_limits, bulk_job_run_never_hands_a_reversed_range_to_the_body) {
    ranges rg;
    ranges_init(&rg, false);
    ex_scheduler sch = { &wrapping_vt, NULL };
    ex_result r = ex_sync_wait(ex_bulk_chunked(ex_schedule(sch), EX_PAR, SIZE_MAX, 0, note_range, &rg));
    cr_expect_eq(r.disposition, EX_DISP_VALUE);
    for (size_t k = 0; k < rg.n && k < 8; k++)
        cr_expect_lt(rg.begin[k], rg.end[k], "the body got [%zu, %zu)", rg.begin[k], rg.end[k]);
    ex_result_destroy(&r);
    expect_no_leaks();
}

/* ======================================================== arities */

/* A sender of yours that breaks the model: nine values (EX_MAX_ARITY is 8). */
#define DYNAMIC_NO_VALUES { 0, EX_SIGS_DYNAMIC, { { 0, { 0 } } } }
static void nine_start(test_op *op) {
    ex_value v[EX_MAX_ARITY + 1];
    for (int i = 0; i <= EX_MAX_ARITY; i++) v[i] = ex_int(i);
    ex_set_value(op->r, v, EX_MAX_ARITY + 1);
}
static test_sender nine = TEST_SENDER_STATIC(nine_start, NULL, DYNAMIC_NO_VALUES, sizeof(test_op), alignof(test_op));
#define nine_sender (nine.base)

static ex_sender *let_again(void *ctx, const ex_value *in, size_t n) {
    (void)ctx, (void)in, (void)n;
    return ex_just();
}

/* Runs s with a recording receiver (which never copies more than it holds). */
static void expect_einval_not_nine_values(ex_sender *s, const char *what) {
    rec rc;
    rec_init(&rc);
    ex_operation *op = NULL;
    ex_error e = ex_connect_alloc(s, rec_receiver(&rc), &op);
    cr_assert_eq(e.code, EX_OK, "%s: connect: %s", what, e.msg ? e.msg : "");
    ex_start(op);
    cr_expect_eq(rc.values, 0, "%s: completed with %zu values", what, rc.n);
    cr_expect_eq(rc.errors, 1, "%s: no error", what);
    cr_expect_eq(rc.err.code, EX_EINVAL, "%s: error %d", what, rc.err.code);
    ex_operation_free(op);
    ex_sender_release(s);
}

Test(size_limits, more_than_max_arity_values_are_einval_not_an_overflow) {
    ex_scheduler inl = ex_inline_scheduler();
    expect_einval_not_nine_values(ex_continues_on(&nine_sender, inl), "continues_on");
    expect_einval_not_nine_values(ex_let_value(&nine_sender, let_again, NULL, EX_SIG_VARIADIC), "let_value");
    expect_einval_not_nine_values(ex_split(&nine_sender), "split");
    expect_einval_not_nine_values(ex_when_all(&nine_sender), "when_all");
    ex_pool *p = test_pool_new(2);
    counted c = { 0 };
    /* The pool's bulk (found through the environment) stores the values. */
    ex_result r = ex_sync_wait(ex_write_env(ex_bulk(&nine_sender, EX_PAR, 4, count_until, &c), &ex_key_get_scheduler,
                                            ex_sched_value(ex_pool_scheduler(p))));
    cr_expect_eq(r.disposition, EX_DISP_ERROR, "bulk on the pool");
    cr_expect_eq(r.error.code, EX_EINVAL);
    cr_expect_eq(atomic_load(&c.calls), 0);
    ex_result_destroy(&r);
    test_pool_free(p);
    ex_counting_scope scope;
    cr_assert_eq(ex_counting_scope_init(&scope).code, EX_OK);
    expect_einval_not_nine_values(ex_spawn_future(&nine_sender, ex_counting_scope_token(&scope)), "spawn_future");
    r = ex_sync_wait(ex_counting_scope_join(&scope));
    ex_result_destroy(&r);
    cr_assert_eq(ex_counting_scope_destroy(&scope).code, EX_OK);
    expect_no_leaks();
}

/* What a task saw when it awaited `s`. */
typedef struct await_seen { ex_sender *s; ex_await_status status; int code; uint8_t n; } await_seen;

static ex_task_result await_and_note(ex_task *t, void *arg) {
    await_seen *seen = arg;
    ex_await_result r = ex_await(t, seen->s);
    seen->status = r.status;
    seen->n = r.n;
    seen->code = r.status == EX_AWAIT_ERROR ? r.error.code : 0;
    return ex_task_void();
}

Test(size_limits, a_task_awaiting_more_than_max_arity_values_gets_einval) {
    await_seen seen = { &nine_sender, EX_AWAIT_VALUE, 0, 0 };
    ex_result r = ex_sync_wait(ex_task_create(await_and_note, &seen, NULL));
    cr_expect_eq(r.disposition, EX_DISP_VALUE);
    cr_expect_eq(seen.status, EX_AWAIT_ERROR, "the await gave status %d with %u values", (int)seen.status, seen.n);
    cr_expect_eq(seen.code, EX_EINVAL);
    ex_result_destroy(&r);
    expect_no_leaks();
}

/* ======================================================== signatures */

/* Signatures of yours that claim more than their arrays hold: the bytes
 * past them (here all EX_T_ANY, or a matching extra entry) are never read. */
Test(size_limits, signatures_past_max_arity_or_max_sigs_match_nothing) {
    struct { ex_sig sig; uint8_t more[16]; } a, b;
    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    a.sig.arity = b.sig.arity = EX_MAX_ARITY + 4;  /* types all EX_T_ANY, and so are the bytes after them */
    ex_value v[EX_MAX_ARITY + 4];
    for (size_t i = 0; i < EX_MAX_ARITY + 4; i++) v[i] = ex_int((int64_t)i);
    cr_expect_not(ex_sig_matches(&a.sig, v, EX_MAX_ARITY + 4), "a 12-value signature matched");
    cr_expect_not(ex_sig_compatible(&a.sig, &b.sig), "two 12-value signatures were compatible");
    cr_expect(ex_sig_matches(&EX_SIG_VARIADIC, v, EX_MAX_ARITY + 4), "variadic still matches");

    struct { ex_sigs s; ex_sig extra; } set;
    memset(&set, 0, sizeof set);
    set.s.nvalues = EX_MAX_VALUE_SIGS + 1;
    for (size_t i = 0; i < EX_MAX_VALUE_SIGS; i++) set.s.values[i] = EX_SIG(EX_T_STR);
    set.extra = EX_SIG(EX_T_INT);
    ex_value one = ex_int(1);
    cr_expect_eq(ex_sigs_find(&set.s, &one, 1), -1, "found signature %d of %d", ex_sigs_find(&set.s, &one, 1),
                 EX_MAX_VALUE_SIGS);
    ex_sigs accepts = ex_sigs_none();
    cr_assert(ex_sigs_add_value(&accepts, EX_SIG(EX_T_STR)));
    const char *why = NULL;
    cr_expect(ex_sigs_subset(&set.s, &accepts, &why), "the entry past the array was checked: %s", why ? why : "");
}

/* ======================================================== operation layouts */

#define ONE_VOID_SIG { 1, 0, { { 0, { 0 } } } }

/* Senders of yours with an absurd operation layout.  connect writes only
 * its header (it is never given SIZE_MAX bytes, and must not be connected
 * into a block that wrapped). */
static void small_start(test_op *op) { ex_set_value(op->r, NULL, 0); }

#define LAYOUT_SENDER(size, align) TEST_SENDER_STATIC(small_start, NULL, ONE_VOID_SIG, size, align)

static test_sender huge16_s = LAYOUT_SENDER(SIZE_MAX - 8, 16);
static test_sender huge64_s = LAYOUT_SENDER(SIZE_MAX - 8, 64);
static test_sender align0_s = LAYOUT_SENDER(sizeof(test_op), 0);
static test_sender align24_s = LAYOUT_SENDER(sizeof(test_op), 24);
#define huge16 (huge16_s.base)
#define huge64 (huge64_s.base)
#define align0 (align0_s.base)
#define align24 (align24_s.base)

static ex_sender *identity(void *ctx, ex_sender *s) { (void)ctx; return s; }
static ex_error no_values(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)ctx, (void)in, (void)n, (void)out;
    return ex_ok();
}
static ex_error none_on_stop(void *ctx, ex_value *out) {
    (void)ctx, (void)out;
    return ex_ok();
}

/* Every adaptor's operation holds its child's: its size never drops below
 * the child's (a sum that wrapped did). */
Test(size_limits, adaptor_layouts_saturate_instead_of_wrapping) {
    ex_scheduler inl = ex_inline_scheduler();
    ex_sender *parents[] = {
        ex_then(&huge64, no_values, NULL, EX_SIG0, EX_SIG0),
        ex_upon_stopped(&huge64, none_on_stop, NULL, EX_SIG0),
        ex_let_value(&huge64, let_again, NULL, EX_SIG_VARIADIC),
        ex_when_all(ex_just(), &huge64),
        ex_continues_on(&huge64, inl),
        ex_starts_on(inl, &huge64),
        ex_write_env(&huge64, &ex_key_get_scheduler, ex_sched_value(inl)),
        ex_into_variant(&huge64),
        ex_bulk(&huge64, EX_PAR, 4, count_until, NULL),
        ex_on_closure(&huge64, inl, identity, NULL),
    };
    for (size_t k = 0; k < sizeof parents / sizeof parents[0]; k++) {
        ex_sender *s = parents[k];
        if (ex_sender_status(s).code == EX_OK) {
            cr_expect_geq(ex_sender_op_size(s), ex_sender_op_size(&huge64), "%s: op_size %zu wrapped", s->vt->name,
                          ex_sender_op_size(s));
            rec rc;
            rec_init(&rc);
            ex_operation *op = NULL;
            long before = test_alloc_count();
            cr_expect_eq(ex_connect_alloc(s, rec_receiver(&rc), &op).code, EX_ENOMEM, "%s: connect_alloc", s->vt->name);
            cr_expect_eq(test_alloc_count(), before, "%s: an allocation was tried", s->vt->name);
            if (op) ex_operation_free(op);
        }
        ex_sender_release(s);
    }
    expect_no_leaks();
}

Test(size_limits, connect_alloc_of_a_huge_operation_is_enomem_without_allocating) {
    ex_sender *senders[] = { &huge16, &huge64 };
    for (size_t k = 0; k < 2; k++) {
        rec rc;
        rec_init(&rc);
        ex_operation *op = NULL;
        long before = test_alloc_count();
        ex_error e = ex_connect_alloc(senders[k], rec_receiver(&rc), &op);
        cr_expect_eq(e.code, EX_ENOMEM, "op_size %zu: %d", senders[k]->op_size, e.code);
        cr_expect_eq(test_alloc_count(), before, "an allocation was tried");
        if (op) ex_operation_free(op);
    }
    expect_no_leaks();
}

Test(size_limits, op_align_zero_means_none_and_other_non_powers_of_two_are_einval) {
    rec rc;
    rec_init(&rc);
    alignas(64) unsigned char storage[256];
    ex_operation *op = NULL;
    cr_assert_eq(ex_connect(&align0, rec_receiver(&rc), storage + 8, sizeof storage - 8, &op).code, EX_OK);
    ex_start(op);
    cr_expect_eq(rc.values, 1);
    /* An adaptor places its child after its own part, not over it. */
    ex_sender *t = ex_write_env(&align0, &ex_key_get_scheduler, ex_sched_value(ex_inline_scheduler()));
    cr_expect_gt(ex_sender_op_size(t), ex_sender_op_size(&align0), "the child was laid over the parent");
    ex_result r = ex_sync_wait(t);
    cr_expect_eq(r.disposition, EX_DISP_VALUE);
    ex_result_destroy(&r);
    cr_expect_eq(ex_connect(&align24, rec_receiver(&rc), storage, sizeof storage, &op).code, EX_EINVAL);
    cr_expect_eq(ex_connect_alloc(&align24, rec_receiver(&rc), &op).code, EX_EINVAL);
    expect_no_leaks();
}

Test(size_limits, spawn_split_and_futures_of_a_huge_operation_are_enomem) {
    ex_counting_scope scope;
    cr_assert_eq(ex_counting_scope_init(&scope).code, EX_OK);
    cr_expect_eq(ex_spawn(&huge64, ex_counting_scope_token(&scope)).code, EX_ENOMEM);
    ex_sender *f = ex_spawn_future(&huge64, ex_counting_scope_token(&scope));
    cr_expect_eq(ex_sender_status(f).code, EX_ENOMEM);
    ex_sender_release(f);
    ex_sender *sp = ex_split(&huge64);
    cr_expect_eq(ex_sender_status(sp).code, EX_ENOMEM);
    ex_sender_release(sp);
    ex_result r = ex_sync_wait(ex_counting_scope_join(&scope));
    cr_expect_eq(r.disposition, EX_DISP_VALUE);
    ex_result_destroy(&r);
    cr_assert_eq(ex_counting_scope_destroy(&scope).code, EX_OK);
    r = ex_sync_wait(&huge64);
    cr_expect_eq(r.error.code, EX_ENOMEM);
    ex_result_destroy(&r);
    expect_no_leaks();
}

Test(size_limits, a_task_awaiting_a_huge_operation_gets_enomem) {
    await_seen seen = { &huge64, EX_AWAIT_VALUE, 0, 0 };
    ex_result r = ex_sync_wait(ex_task_create(await_and_note, &seen, NULL));
    cr_expect_eq(r.disposition, EX_DISP_VALUE);
    cr_expect_eq(seen.status, EX_AWAIT_ERROR, "the await gave status %d", (int)seen.status);
    cr_expect_eq(seen.code, EX_ENOMEM);
    ex_result_destroy(&r);
    expect_no_leaks();
}

static ex_error range_until(void *ctx, size_t b, size_t e);

/* A scheduler of yours whose schedule operation is absurdly big. */
static const ex_scheduler_vtable huge_sched_vt = {
    .name = "huge_schedule_op", .schedule_op_size = SIZE_MAX - 8, .schedule_op_align = 16,
    .connect_schedule = test_connect_schedule_inline, .progress = EX_PROGRESS_WEAKLY_PARALLEL,
};

Test(size_limits, a_huge_schedule_operation_saturates_or_is_refused) {
    ex_scheduler sch = { &huge_sched_vt, NULL };
    ex_sender *s = ex_starts_on(sch, ex_just());
    cr_expect_geq(ex_sender_op_size(s), SIZE_MAX - 8, "starts_on: op_size %zu wrapped", ex_sender_op_size(s));
    ex_sender_release(s);
    ex_strand *st = NULL;
    cr_expect_eq(ex_strand_create(sch, NULL, &st).code, EX_ENOMEM, "a strand's drain operation wrapped");
    if (st) ex_strand_destroy(st);
    /* An algorithm run by one agent of sch holds sch's schedule operation. */
    counted c = { 0 };
    s = ex_for_each_index(sch, 10, 1, range_until, &c);
    cr_expect_geq(ex_sender_op_size(s), SIZE_MAX - 8, "for_each_index: op_size %zu wrapped", ex_sender_op_size(s));
    rec rc;
    rec_init(&rc);
    ex_operation *op = NULL;
    cr_expect_eq(ex_connect_alloc(s, rec_receiver(&rc), &op).code, EX_ENOMEM);
    if (op) ex_operation_free(op);
    ex_sender_release(s);
    expect_no_leaks();
}

Test(size_limits, launching_a_huge_operation_is_enomem) {
    ex_counting_scope scope;
    cr_assert_eq(ex_counting_scope_init(&scope).code, EX_OK);
    ex_error e = ex_task_launch(ex_counting_scope_token(&scope), ex_inline_scheduler(), &huge64, NULL);
    cr_expect_eq(e.code, EX_ENOMEM, "ex_task_launch: %d", e.code);
    ex_result r = ex_sync_wait(ex_counting_scope_join(&scope));
    ex_result_destroy(&r);
    cr_assert_eq(ex_counting_scope_destroy(&scope).code, EX_OK);
    expect_no_leaks();
}

/* ======================================================== algorithms */

#define LOOP_ERR (EX_EUSER + 23)

static ex_error range_until(void *ctx, size_t b, size_t e) {
    atomic_fetch_add(&((counted *)ctx)->calls, 1);
    return b >= STOP_AT || e < b ? ex_err(LOOP_ERR, "stop here") : ex_ok();
}

static void copy_double(void *ctx, const void *x, void *y) {
    (void)ctx;
    memcpy(y, x, sizeof(double));
}

/* Already right (tiles are counted as n / tile + (n % tile != 0), a
 * tile's end as min(n, begin + tile) without the sum): kept as the
 * algorithms' row of the table. */
Test(size_limits, for_each_index_over_size_max_indices_runs_until_the_first_error) {
    ex_pool *p = test_pool_new(2);
    static const size_t grains[] = { 2, 0, SIZE_MAX - 1 };
    for (size_t k = 0; k < sizeof grains / sizeof grains[0]; k++) {
        counted c = { 0 };
        ex_result r = ex_sync_wait(ex_for_each_index(ex_pool_scheduler(p), SIZE_MAX, grains[k], range_until, &c));
        cr_expect_eq(r.disposition, EX_DISP_ERROR, "grain %zu", grains[k]);
        cr_expect_eq(r.error.code, LOOP_ERR);
        cr_expect_geq(atomic_load(&c.calls), 1);
        ex_result_destroy(&r);
    }
    test_pool_free(p);
    double x[4] = { 0 };
    ex_sender *s = ex_transform(ex_inline_scheduler(), x, 8, x, 8, SIZE_MAX / 4, copy_double, NULL);
    cr_expect_eq(ex_sender_status(s).code, EX_EINVAL, "n * element size overflowing is refused");
    ex_sender_release(s);
    expect_no_leaks();
}
