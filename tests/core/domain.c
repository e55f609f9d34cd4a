/* SPDX-License-Identifier: MIT */
/* Domains ([exec.domain.default], transform_sender, apply_sender;
 * cexec/domain.h): a test scheduler whose domain customises then,
 * let_value, bulk, when_all and sync_wait, early (when the sender is
 * built) and late (when it is connected), as the peers' "can be
 * customized early/late" tests do. */
#include <stdalign.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common/helpers.h"

/* ------------------------------------------------------- the test domain */

/* What the domain was offered, by tag and step. */
typedef struct offers {
    int early[8], late[8];
    bool wrap;        /* replace a then by a then around it (must not loop) */
    bool big;         /* replace late by a sender with a larger operation */
    bool keep;        /* replace nothing; only count */
    bool mismatched;  /* replace late by a sender of other values */
    bool only_then;   /* replace thens only */
    bool move_under;  /* replace by starts_on(the test scheduler, the sender itself) */
} offers;

static offers seen;

static const ex_tag *const customised[] = { &ex_tag_then, &ex_tag_let_value, &ex_tag_bulk, &ex_tag_when_all,
                                            &ex_tag_continues_on, &ex_tag_inclusive_scan, NULL };

static int tag_index(const ex_tag *t) {
    for (int i = 0; customised[i]; i++)
        if (customised[i] == t) return i;
    return 7;
}

/* The replacement's values say what it replaced: 100 + tag early, 200 +
 * tag late; a when_all of two values sends the code twice. */
static ex_sender *replacement(const ex_sender *s, int code) {
    if (ex_sender_tag(s) == &ex_tag_when_all && ex_sender_sigs(s)->nvalues == 1 &&
        ex_sender_sigs(s)->values[0].arity == 2)
        return ex_just(ex_int(code), ex_int(code));
    return ex_just(ex_int(code));
}

static ex_error times_ten(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)ctx, (void)n;
    out[0] = ex_int(in[0].as.i * 10);
    return ex_ok();
}

/* The late replacement of `big`: its value under three starts_on, which
 * this domain does not customise (its parts are offered to it too), in
 * more room than a then. */
static ex_sender *big_replacement(int code) {
    ex_sender *s = ex_just(ex_int(code));
    for (int i = 0; i < 3; i++) s = ex_starts_on(ex_inline_scheduler(), s);
    return s;
}

static ex_scheduler test_sched_of(void);
static ex_task_result await_a_then(ex_task *t, void *arg);

static ex_sender *test_transform(const ex_domain *d, ex_scheduler sch, ex_sender *s, const ex_env *env) {
    (void)d, (void)sch;
    int k = tag_index(ex_sender_tag(s));
    if (env) seen.late[k]++;
    else seen.early[k]++;
    if (seen.keep || (seen.only_then && ex_sender_tag(s) != &ex_tag_then)) return NULL;
    if (seen.move_under) {
        /* Under the scheduler whose domain this is, where s would be
         * offered again if anything under a replacement were. */
        if (!env || (ex_sender_tag(s) != &ex_tag_then && ex_sender_tag(s) != &ex_tag_continues_on)) return NULL;
        return ex_starts_on(test_sched_of(), ex_sender_retain(s));
    }
    if (seen.wrap) {
        if (ex_sender_tag(s) != &ex_tag_then) return NULL;
        /* A then around the sender: built while the domain transforms, so
         * not offered again, early or late. */
        return ex_then(ex_sender_retain(s), times_ten, NULL, EX_SIG(EX_T_INT), EX_SIG(EX_T_INT));
    }
    if (env && seen.mismatched) return ex_just(ex_str("not an int"));
    if (env && seen.big) return big_replacement(200 + k);
    return replacement(s, (env ? 200 : 100) + k);
}

static bool test_apply(const ex_domain *d, ex_scheduler sch, const ex_tag *tag, ex_sender *s, void *result) {
    (void)d, (void)sch, (void)s;
    if (tag != &ex_tag_sync_wait) return false;
    ex_result *r = result;
    r->disposition = EX_DISP_VALUE;
    r->n = 1;
    r->values[0] = ex_int(42);
    return true;
}

static const ex_domain test_domain = { "test", customised, test_transform, test_apply, NULL };

static const ex_scheduler_vtable test_vt = {
    .name = "test_domain_scheduler",
    .schedule_op_size = sizeof(test_schedule_op),
    .schedule_op_align = alignof(test_schedule_op),
    .connect_schedule = test_connect_schedule_inline,
    .progress = EX_PROGRESS_WEAKLY_PARALLEL,
    .domain = &test_domain,
};

static ex_scheduler test_sched(void) {
    ex_scheduler s = { &test_vt, NULL };
    return s;
}

static ex_scheduler test_sched_of(void) { return test_sched(); }

static ex_sender *let_just10(void *ctx, const ex_value *in, size_t n) {
    (void)ctx, (void)in, (void)n;
    return ex_just(ex_int(10));
}

static ex_error bulk_noop(void *ctx, size_t i, const ex_value *v, size_t n) {
    (void)ctx, (void)i, (void)v, (void)n;
    return ex_ok();
}

/* ------------------------------------------------------------ the queries */

Test(domain, tags_name_the_algorithm_that_built_a_sender) {
    ex_sender *t = ex_then(ex_just(ex_int(1)), add_one, NULL, EX_SIG(EX_T_INT), EX_SIG(EX_T_INT));
    cr_expect_eq(ex_sender_tag(t), &ex_tag_then);
    ex_sender *b = ex_bulk(ex_just(), EX_PAR, 2, bulk_noop, NULL);
    cr_expect_eq(ex_sender_tag(b), &ex_tag_bulk);
    ex_sender *j = ex_just();
    cr_expect_null(ex_sender_tag(j), "just has no tag");
    cr_expect_null(ex_sender_tag(NULL));
    cr_expect_str_eq(ex_tag_then.name, "then");
    ex_sender_release(t);
    ex_sender_release(b);
    ex_sender_release(j);
    expect_no_leaks();
}

Test(domain, a_domain_is_found_through_a_scheduler_an_environment_or_a_completion_scheduler) {
    cr_expect_eq(ex_scheduler_domain(test_sched()), &test_domain);
    cr_expect_null(ex_scheduler_domain(ex_inline_scheduler()));
    ex_env_pair by_sched, by_key;
    ex_env_pair_init(&by_sched, &ex_key_get_scheduler, ex_sched_value(test_sched()), ex_env_empty());
    ex_scheduler sch;
    cr_expect_eq(ex_get_domain(ex_env_of_pair(&by_sched), &sch), &test_domain);
    cr_expect_eq(sch.vt, &test_vt);
    ex_env_pair_init(&by_key, &ex_key_get_domain, ex_domain_value(&test_domain), ex_env_empty());
    cr_expect_eq(ex_get_domain(ex_env_of_pair(&by_key), &sch), &test_domain);
    cr_expect_null(sch.vt, "named by get_domain: no scheduler");
    cr_expect_null(ex_get_domain(ex_env_empty(), NULL));
    ex_sender *s = ex_schedule(test_sched());
    cr_expect_eq(ex_sender_domain(s, &sch), &test_domain);
    cr_expect_eq(sch.vt, &test_vt);
    ex_sender_release(s);
    expect_no_leaks();
}

/* ---------------------------------------------------------------- early */

Test(domain, then_can_be_customised_early) {
    ex_sender *s = ex_then(ex_schedule(test_sched()), add_one, NULL, EX_SIG0, EX_SIG(EX_T_INT));
    cr_expect_null(ex_sender_tag(s), "replaced when built: a just");
    expect_sync_int(s, 100);
    cr_expect_eq(seen.early[0], 1);
    cr_expect_eq(seen.late[0], 0);
    expect_no_leaks();
}

Test(domain, let_value_can_be_customised_early) {
    expect_sync_int(ex_let_value(ex_schedule(test_sched()), let_just10, NULL, EX_SIG0), 101);
    expect_no_leaks();
}

Test(domain, bulk_can_be_customised_early) {
    expect_sync_int(ex_bulk(ex_continues_on(ex_just(ex_int(5)), test_sched()), EX_PAR, 4, bulk_noop, NULL), 102);
    expect_no_leaks();
}

Test(domain, when_all_can_be_customised_early_when_its_children_agree) {
    ex_sender *s = ex_when_all(ex_continues_on(ex_just(ex_int(1)), test_sched()),
                               ex_continues_on(ex_just(ex_int(2)), test_sched()));
    ex_result r = ex_sync_wait(s);
    expect_value_arity(&r, 2);
    cr_expect_eq(r.values[0].as.i, 103);
    ex_result_destroy(&r);
    /* A child without a completion scheduler has no say. */
    r = ex_sync_wait(ex_when_all(ex_continues_on(ex_just(ex_int(1)), test_sched()), ex_just(ex_int(2))));
    expect_value_arity(&r, 2);
    cr_expect_eq(r.values[0].as.i, 103);
    ex_result_destroy(&r);
    expect_no_leaks();
}

Test(domain, when_all_of_children_in_two_domains_is_not_customised) {
    static const ex_domain other = { "other", NULL, test_transform, NULL, NULL };
    static const ex_scheduler_vtable other_vt = {
        .name = "other", .schedule_op_size = sizeof(test_schedule_op), .schedule_op_align = alignof(test_schedule_op),
        .connect_schedule = test_connect_schedule_inline, .domain = &other,
    };
    ex_scheduler o = { &other_vt, NULL };
    seen.keep = true;  /* the hops themselves stay */
    ex_result r = ex_sync_wait(ex_when_all(ex_continues_on(ex_just(ex_int(1)), test_sched()),
                                           ex_continues_on(ex_just(ex_int(2)), o)));
    expect_value_arity(&r, 2);
    cr_expect_eq(r.values[0].as.i, 1);
    cr_expect_eq(r.values[1].as.i, 2);
    cr_expect_eq(seen.early[3], 0, "neither domain was offered the when_all");
    ex_result_destroy(&r);
    expect_no_leaks();
}

Test(domain, an_algorithm_is_offered_to_its_schedulers_domain) {
    int64_t in[4] = { 1, 2, 3, 4 }, out[4] = { 0 };
    expect_sync_int(ex_inclusive_scan_i64(test_sched(), in, out, 4), 105);
    cr_expect_eq(out[3], 0, "replaced: the scan did not run");
    expect_no_leaks();
}

/* ----------------------------------------------------------------- late */

Test(domain, then_can_be_customised_late) {
    ex_sender *t = ex_then(ex_just(ex_int(1)), add_one, NULL, EX_SIG(EX_T_INT), EX_SIG(EX_T_INT));
    cr_expect_eq(ex_sender_tag(t), &ex_tag_then, "no domain when built");
    expect_sync_int(ex_starts_on(test_sched(), t), 200);
    cr_expect_eq(seen.early[0], 0);
    cr_expect_eq(seen.late[0], 1);
    expect_no_leaks();
}

Test(domain, let_value_can_be_customised_late) {
    expect_sync_int(ex_starts_on(test_sched(), ex_let_value(ex_just(), let_just10, NULL, EX_SIG0)), 201);
    expect_no_leaks();
}

Test(domain, bulk_can_be_customised_late) {
    expect_sync_int(ex_starts_on(test_sched(), ex_bulk(ex_just(ex_int(5)), EX_SEQ, 4, bulk_noop, NULL)), 202);
    expect_no_leaks();
}

Test(domain, when_all_can_be_customised_late) {
    ex_result r = ex_sync_wait(ex_starts_on(test_sched(), ex_when_all(ex_just(ex_int(1)), ex_just(ex_int(2)))));
    expect_value_arity(&r, 2);
    cr_expect_eq(r.values[0].as.i, 203);
    cr_expect_eq(r.values[1].as.i, 203);
    ex_result_destroy(&r);
    expect_no_leaks();
}

Test(domain, a_hops_late_domain_is_its_schedulers) {
    /* continues_on(just) has no early domain (just completes nowhere in
     * particular); connected, it is offered to the scheduler it moves to. */
    /* (Connected here: sync_wait would apply the domain's own sync_wait.) */
    rec rc;
    rec_init(&rc);
    run_in_place(ex_continues_on(ex_just(ex_int(1)), test_sched()), &rc);
    rec_expect_value_int(&rc, 204);
    expect_no_leaks();
}

Test(domain, an_environment_names_the_late_domain_by_scheduler_or_by_get_domain) {
    ex_sender *t = ex_then(ex_just(ex_int(1)), add_one, NULL, EX_SIG(EX_T_INT), EX_SIG(EX_T_INT));
    expect_sync_int(ex_write_env(t, &ex_key_get_scheduler, ex_sched_value(test_sched())), 200);
    t = ex_then(ex_just(ex_int(1)), add_one, NULL, EX_SIG(EX_T_INT), EX_SIG(EX_T_INT));
    expect_sync_int(ex_write_env(t, &ex_key_get_domain, ex_domain_value(&test_domain)), 200);
    /* Outside them, nothing is offered. */
    expect_sync_int(ex_then(ex_just(ex_int(1)), add_one, NULL, EX_SIG(EX_T_INT), EX_SIG(EX_T_INT)), 2);
    cr_expect_eq(seen.late[0], 2);
    expect_no_leaks();
}

Test(domain, senders_below_the_first_are_offered_too) {
    seen.keep = true;
    ex_sender *inner = ex_then(ex_just(ex_int(1)), add_one, NULL, EX_SIG(EX_T_INT), EX_SIG(EX_T_INT));
    ex_sender *outer = ex_then(inner, add_one, NULL, EX_SIG(EX_T_INT), EX_SIG(EX_T_INT));
    expect_sync_int(ex_starts_on(test_sched(), ex_let_value(ex_just(), let_just10, NULL, EX_SIG0)), 10);
    expect_sync_int(ex_starts_on(test_sched(), outer), 3);
    cr_expect_eq(seen.late[0], 2, "both thens, the inner one connected by the outer");
    cr_expect_eq(seen.late[1], 1);
    expect_no_leaks();
}

static ex_sender *let_then(void *ctx, const ex_value *in, size_t n) {
    (void)ctx, (void)in, (void)n;
    return ex_then(ex_just(ex_int(1)), add_one, NULL, EX_SIG(EX_T_INT), EX_SIG(EX_T_INT));
}

Test(domain, a_let_body_is_offered_to_the_domain_of_its_environment) {
    /* The body runs under the child's completion scheduler (the let's
     * environment names it), whose domain gets the body's then. */
    seen.only_then = true;
    expect_sync_int(ex_let_value(ex_schedule(test_sched()), let_then, NULL, EX_SIG0), 200);
    cr_expect_eq(seen.early[1], 1, "the let itself, when built");
    cr_expect_eq(seen.late[0], 1, "the body's then, when connected");
    expect_no_leaks();
}

/* -------------------------------------------------------- replacements */

Test(domain, what_a_domain_builds_is_not_offered_again) {
    seen.wrap = true;
    ex_sender *t = ex_then(ex_just(ex_int(1)), add_one, NULL, EX_SIG(EX_T_INT), EX_SIG(EX_T_INT));
    expect_sync_int(ex_starts_on(test_sched(), t), 20);
    cr_expect_eq(seen.late[0], 1, "the wrapping then was not offered");
    expect_no_leaks();
}

Test(domain, a_late_replacement_larger_than_the_sender_gets_its_own_block) {
    seen.big = true;
    ex_sender *t = ex_then(ex_just(ex_int(1)), add_one, NULL, EX_SIG(EX_T_INT), EX_SIG(EX_T_INT));
    ex_sender *big = big_replacement(0);
    cr_assert_gt(ex_sender_op_size(big), ex_sender_op_size(t), "the replacement does not fit where the then was");
    ex_sender_release(big);
    expect_sync_int(ex_starts_on(test_sched(), t), 200);
    expect_no_leaks();
}

Test(domain, a_late_replacement_out_of_memory_fails_the_connect) {
    seen.big = true;
    ex_sender *t = ex_then(ex_just(ex_int(1)), add_one, NULL, EX_SIG(EX_T_INT), EX_SIG(EX_T_INT));
    ex_sender *s = ex_starts_on(test_sched(), t);
    bool connected = false;
    for (long nth = 1; nth <= 16 && !connected; nth++) {
        /* Each allocation in turn: the replacement's senders, its block. */
        rec rc;
        rec_init(&rc);
        _Alignas(max_align_t) unsigned char buf[1024];
        ex_operation *op = NULL;
        test_alloc_fail_at(nth);
        ex_error e = ex_connect(s, rec_receiver(&rc), buf, sizeof buf, &op);
        test_alloc_fail_at(0);
        if (!e.code) {
            ex_start(op);
            rec_expect_value_int(&rc, 200);
            ex_operation_destroy(op);
            connected = true;  /* past the last allocation */
            continue;
        }
        cr_expect_eq(e.code, EX_ENOMEM, "allocation %ld: %s", nth, e.msg ? e.msg : "");
        cr_expect_eq(rec_total(&rc), 0);
        ex_error_release(e);
    }
    cr_expect(connected, "every allocation failed in turn, then the connect succeeded");
    ex_sender_release(s);
    expect_no_leaks();
}

Test(domain, a_replacement_that_moves_the_sender_under_the_domains_scheduler_is_not_offered_it_again) {
    /* Without that, then and continues_on would be offered again under
     * the starts_on for ever. */
    seen.move_under = true;
    ex_sender *t = ex_then(ex_just(ex_int(1)), add_one, NULL, EX_SIG(EX_T_INT), EX_SIG(EX_T_INT));
    expect_sync_int(ex_starts_on(test_sched(), t), 2);
    cr_expect_eq(seen.late[0], 1);
    rec rc;
    rec_init(&rc);
    run_in_place(ex_continues_on(ex_just(ex_int(1)), test_sched()), &rc);
    rec_expect_value_int(&rc, 1);
    cr_expect_eq(seen.late[4], 1);
    expect_no_leaks();
}

/* Two domains on the stack in turn, at the same address (the same
 * frame), offering different algorithms: the second is asked for its
 * own. */
static int64_t run_under_domain(const ex_tag *const *tags, ex_sender *s) {
    ex_domain d = { "on the stack", tags, test_transform, NULL, NULL };
    ex_result r = ex_sync_wait(ex_write_env(s, &ex_key_get_domain, ex_domain_value(&d)));
    int64_t v = r.disposition == EX_DISP_VALUE ? r.values[0].as.i : -1;
    ex_result_destroy(&r);
    return v;
}

Test(domain, a_domain_at_the_address_of_another_is_asked_for_its_own_algorithms) {
    static const ex_tag *const thens[] = { &ex_tag_then, NULL };
    static const ex_tag *const bulks[] = { &ex_tag_bulk, NULL };
    cr_expect_eq(run_under_domain(thens, ex_then(ex_just(ex_int(1)), add_one, NULL, EX_SIG(EX_T_INT), EX_SIG(EX_T_INT))),
                 200);
    cr_expect_eq(run_under_domain(bulks, ex_bulk(ex_just(ex_int(5)), EX_SEQ, 4, bulk_noop, NULL)), 202);
    expect_no_leaks();
}

/* Under a scheduler without a domain inside one with a domain, the outer
 * domain decides, whether a sender is connected there directly or
 * awaited by a task that runs there. */
Test(domain, a_scheduler_without_a_domain_leaves_the_enclosing_one_in_force) {
    seen.only_then = true;
    ex_sender *t = ex_then(ex_just(ex_int(1)), add_one, NULL, EX_SIG(EX_T_INT), EX_SIG(EX_T_INT));
    expect_sync_int(ex_starts_on(test_sched(), ex_starts_on(ex_inline_scheduler(), t)), 200);
    ex_result r = ex_sync_wait(
        ex_starts_on(test_sched(), ex_starts_on(ex_inline_scheduler(), ex_task_create(await_a_then, NULL, NULL))));
    expect_value_int(&r, 200);
    ex_result_destroy(&r);
    cr_expect_eq(seen.late[0], 2);
    /* And the environment says so. */
    ex_env_pair outer, inner;
    ex_env_pair_init(&outer, &ex_key_get_scheduler, ex_sched_value(test_sched()), ex_env_empty());
    ex_env_pair_init(&inner, &ex_key_get_scheduler, ex_sched_value(ex_inline_scheduler()), ex_env_of_pair(&outer));
    cr_expect_eq(ex_get_domain(ex_env_of_pair(&inner), NULL), &test_domain);
    expect_no_leaks();
}

Test(domain, a_late_replacement_that_sends_other_values_is_refused) {
    seen.mismatched = true;
    ex_sender *t = ex_then(ex_just(ex_int(1)), add_one, NULL, EX_SIG(EX_T_INT), EX_SIG(EX_T_INT));
    expect_sync_error_msg(ex_starts_on(test_sched(), t), EX_EINVAL,
                          "cexec: a domain's replacement sends what the sender it replaces does not");
    expect_no_leaks();
}

/* ------------------------------------------------------------ sync_wait */

Test(domain, sync_wait_can_be_customised) {
    ex_result r = ex_sync_wait(ex_schedule(test_sched()));
    expect_value_int(&r, 42);
    ex_result_destroy(&r);
    /* Not a sender that completes there. */
    expect_sync_int(ex_just(ex_int(7)), 7);
    expect_no_leaks();
}

/* ex_sync_wait remembers, in the sender, that its completion domain has no
 * apply_sender; only that answer is remembered: a sender whose domain
 * applies is applied on every wait. */
Test(domain, sync_wait_applies_on_every_wait_of_one_sender) {
    ex_sender *s = ex_schedule(test_sched());
    for (int k = 0; k < 3; k++) {
        ex_result r = ex_sync_wait(ex_sender_retain(s));
        expect_value_int(&r, 42);
        ex_result_destroy(&r);
    }
    ex_sender_release(s);
    ex_pool *p = test_pool_new(1);
    ex_sender *own = ex_bulk(ex_continues_on(ex_just(ex_int(5)), ex_pool_scheduler(p)), EX_PAR, 2, bulk_noop, NULL);
    cr_expect_eq(own->memo, 0);
    for (int k = 0; k < 3; k++) expect_sync_int(ex_sender_retain(own), 5);
    cr_expect(own->memo != 0, "the pool's domain has no apply_sender: remembered after the first wait");
    ex_sender_release(own);
    test_pool_free(p);
    expect_no_leaks();
}

/* A static sender (refs 0) may sit in read-only memory: the library
 * remembers nothing in it.  One with attributes (a completion scheduler
 * without apply_sender) in a read-only page, waited for twice. */
static ex_env_pair ro_attrs;
static ex_env ro_attrs_of(const ex_sender *s) {
    (void)s;
    return ex_env_of_pair(&ro_attrs);
}
static void ro_start(test_op *op) { ex_set_value(op->r, NULL, 0); }

Test(domain, sync_wait_writes_nothing_into_a_static_sender) {
    ex_env_pair_init(&ro_attrs, &ex_key_completion_scheduler_value, ex_sched_value(ex_inline_scheduler()), ex_env_empty());
    static ex_sender_vtable ro_vt;
    ro_vt = test_sender_vt;
    ro_vt.attrs = ro_attrs_of;
    long page = sysconf(_SC_PAGESIZE);
    cr_assert_gt(page, 0);
    void *mem = mmap(NULL, (size_t)page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    cr_assert_neq(mem, MAP_FAILED);
    test_sender *ts = mem;
    memset(ts, 0, sizeof *ts);
    ts->base.vt = &ro_vt;
    ts->base.refs = 0;
    ts->base.op_size = sizeof(test_op);
    ts->base.op_align = alignof(test_op);
    ex_sigs_add_value(&ts->base.sigs, EX_SIG0);
    ts->start = ro_start;
    cr_assert_eq(mprotect(mem, (size_t)page, PROT_READ), 0);
    for (int k = 0; k < 2; k++) expect_sync_values(&ts->base, 0);
    cr_expect_eq(ts->base.memo, 0);
    cr_assert_eq(munmap(mem, (size_t)page), 0);
    expect_no_leaks();
}

/* ------------------------------------------------- the pool's own domain */

static ex_error count_chunks(void *ctx, size_t begin, size_t end, const ex_value *v, size_t n) {
    (void)begin, (void)end, (void)v, (void)n;
    atomic_fetch_add((atomic_int *)ctx, 1);
    return ex_ok();
}

/* A bulk the pool's domain took is another sender than the one built. */
Test(domain, the_pools_domain_takes_bulk_early_and_late) {
    ex_pool *p = test_pool_new(2);
    ex_scheduler ps = ex_pool_scheduler(p);
    const ex_domain *d = ex_scheduler_domain(ps);
    cr_assert_not_null(d);
    ex_sender *b = ex_bulk(ex_just(), EX_PAR, 2, bulk_noop, NULL);
    ex_sender *t = d->transform_sender(d, ps, b, NULL);
    cr_assert_not_null(t, "the pool's domain replaces bulk");
    cr_expect_eq(ex_sender_tag(t), &ex_tag_bulk);
    cr_expect_null(d->transform_sender(d, ex_inline_scheduler(), b, NULL), "not the pool's scheduler: kept");
    ex_sender_release(t);
    ex_sender_release(b);
    /* The sequential loop calls a chunked body once with [0, shape); the
     * pool cuts the shape into chunks (bulk.h), even for EX_SEQ. */
    atomic_int calls = 0;
    expect_sync_values(ex_bulk_chunked(ex_schedule(ps), EX_SEQ, 64, 0, count_chunks, &calls), 0);
    cr_expect_gt(atomic_load(&calls), 1, "early: the pool ran it (%d chunks)", atomic_load(&calls));
    atomic_store(&calls, 0);
    expect_sync_values(ex_starts_on(ps, ex_bulk_chunked(ex_just(), EX_SEQ, 64, 0, count_chunks, &calls)), 0);
    cr_expect_gt(atomic_load(&calls), 1, "late: the pool ran it (%d chunks)", atomic_load(&calls));
    atomic_store(&calls, 0);
    expect_sync_values(ex_bulk_chunked(ex_just(), EX_SEQ, 64, 0, count_chunks, &calls), 0);
    cr_expect_eq(atomic_load(&calls), 1, "no pool: the sequential loop");
    /* Put under the inline scheduler inside pool work, it stays there:
     * the pool's domain is in force, but the bulk does not run on the pool
     * (found by the fuzzer: a stop token the pool's run saw made it
     * complete stopped where the inline loop sends its values). */
    atomic_store(&calls, 0);
    ex_sender *inl = ex_bulk_chunked(ex_just(), EX_SEQ, 64, 0, count_chunks, &calls);
    expect_sync_values(ex_starts_on(ps, ex_starts_on(ex_inline_scheduler(), inl)), 0);
    cr_expect_eq(atomic_load(&calls), 1, "under inline in pool work: the sequential loop");
    test_pool_free(p);
    expect_no_leaks();
}

/* A replacement's parts are offered too: each bulk of a bulk of a bulk
 * runs on the pool (found by the fuzzer: under a replacement nothing was
 * offered, and the inner bulks ran the sequential loop, which does not
 * see a stop request). */
Test(domain, a_bulk_inside_a_bulk_on_a_pool_runs_on_the_pool_too) {
    ex_pool *p = test_pool_new(2);
    atomic_int inner = 0, outer = 0;
    ex_sender *s = ex_bulk_chunked(ex_bulk_chunked(ex_just(), EX_SEQ, 64, 0, count_chunks, &inner), EX_SEQ, 64, 0,
                                   count_chunks, &outer);
    expect_sync_values(ex_starts_on(ex_pool_scheduler(p), s), 0);
    cr_expect_gt(atomic_load(&outer), 1, "the outer bulk ran on the pool");
    cr_expect_gt(atomic_load(&inner), 1, "the inner bulk ran on the pool (%d chunks)", atomic_load(&inner));
    test_pool_free(p);
    expect_no_leaks();
}

/* ------------------------------------------------- an algorithm of yours */

static const ex_tag my_tag = { "my_algorithm" };

typedef struct my_op {
    ex_operation base;
    ex_receiver r;
} my_op;

static void my_start(ex_operation *op) {
    ex_value v = ex_int(1);
    ex_set_value(((my_op *)op)->r, &v, 1);
}
static const ex_operation_vtable my_op_vt = { my_start, NULL };

static ex_error my_connect(const ex_sender *s, ex_receiver r, void *storage) {
    ex_error e;
    if (ex_transform_late(s, r, storage, &e)) return e;
    my_op *o = storage;
    o->base.vt = &my_op_vt;
    o->r = r;
    return ex_ok();
}

static const ex_sender_vtable my_vt = { "my_algorithm", my_connect, NULL, NULL, &my_tag };

static ex_sender *my_algorithm(void) {
    ex_sender *s = ex_sender_alloc(&my_vt, sizeof(ex_sender));
    if (!s) return ex_invalid_sender(EX_ENOMEM, NULL);
    s->op_size = sizeof(my_op);
    s->op_align = alignof(my_op);
    static const ex_sig one_int = EX_SIG(EX_T_INT);
    ex_sigs_add_value(&s->sigs, one_int);
    return s;
}

Test(domain, an_algorithm_of_yours_with_its_own_tag_can_be_customised_late) {
    static const ex_domain all = { "all", NULL, test_transform, NULL, NULL };
    expect_sync_int(ex_write_env(my_algorithm(), &ex_key_get_domain, ex_domain_value(&all)), 207);
    expect_sync_int(my_algorithm(), 1);
    expect_no_leaks();
}

/* ------------------------------------------------------------ in a task */

static ex_task_result await_a_then(ex_task *t, void *arg) {
    (void)arg;
    ex_await_result r = ex_await(t, ex_then(ex_just(ex_int(1)), add_one, NULL, EX_SIG(EX_T_INT), EX_SIG(EX_T_INT)));
    if (r.status != EX_AWAIT_VALUE) return ex_task_with_error(r.error);
    return ex_task_value(r.v[0]);
}

Test(domain, a_task_on_a_scheduler_with_a_domain_awaits_in_that_domain) {
    seen.only_then = true;
    ex_result r = ex_sync_wait(ex_starts_on(test_sched(), ex_task_create(await_a_then, NULL, NULL)));
    expect_value_int(&r, 200);
    ex_result_destroy(&r);
    cr_expect_eq(seen.late[0], 1);
    /* On a scheduler without one, the then runs. */
    r = ex_sync_wait(ex_task_create(await_a_then, NULL, NULL));
    expect_value_int(&r, 2);
    ex_result_destroy(&r);
    expect_no_leaks();
}
