/* SPDX-License-Identifier: MIT */
/* [exec.run.loop]: the run-loop scheduler and its schedule sender, and many
 * producers feeding one loop (suite exec_run_loop, declared in run_loop.c). */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "resources/run_loop_fixtures.h"

/* ------------------------------------------------------------ scheduler */

Test(exec_run_loop, scheduler_equality) {
    rl_env a;
    rl_env_open(&a, 0);
    ex_run_loop b;
    test_loop_init(&b);
    ex_scheduler sa1 = ex_run_loop_scheduler(&a.loop), sa2 = ex_run_loop_scheduler(&a.loop);
    ex_scheduler sb = ex_run_loop_scheduler(&b);
    cr_assert(ex_scheduler_valid(sa1));
    cr_assert(ex_scheduler_equal(sa1, sa2), "schedulers from the same loop compare equal");
    cr_assert(ex_scheduler_equal(sa1, sa1));
    cr_assert_not(ex_scheduler_equal(sa1, sb), "schedulers from different loops are not equal");
    cr_assert_not(ex_scheduler_equal(sb, sa2));
    cr_assert_not(ex_scheduler_equal(sa1, ex_inline_scheduler()));
    test_loop_destroy(&b);
    rl_env_close(&a);
}

Test(exec_run_loop, forward_progress_guarantee) {
    /* run-loop-scheduler defines no get_forward_progress_guarantee query, so
     * [exec.get.forward.progress.guarantee] gives the default. */
    rl_env e;
    rl_env_open(&e, 0);
    cr_assert_eq(ex_get_forward_progress_guarantee(ex_run_loop_scheduler(&e.loop)), EX_PROGRESS_WEAKLY_PARALLEL);
    rl_env_close(&e);
}

Test(exec_run_loop, schedule_sender_attributes_and_signatures) {
    rl_env e;
    rl_env_open(&e, 0);
    ex_run_loop other;
    test_loop_init(&other);
    ex_scheduler sch = ex_run_loop_scheduler(&e.loop);
    ex_sender *s = e.sched;
    cr_assert_eq(ex_sender_status(s).code, 0);
    ex_scheduler got;
    memset(&got, 0, sizeof got);
    cr_assert(ex_get_completion_scheduler(s, &ex_key_completion_scheduler_value, &got));
    cr_assert(ex_scheduler_equal(got, sch), "value completion scheduler is the loop's");
    cr_assert_not(ex_scheduler_equal(got, ex_run_loop_scheduler(&other)));
    memset(&got, 0, sizeof got);
    cr_assert(ex_get_completion_scheduler(s, &ex_key_completion_scheduler_stopped, &got));
    cr_assert(ex_scheduler_equal(got, sch), "stopped completion scheduler is the loop's");
    cr_assert_not(ex_get_completion_scheduler(s, &ex_key_completion_scheduler_error, &got),
                  "no error completion scheduler");
    const ex_sigs *sg = ex_sender_sigs(s);
    cr_assert_eq(sg->nvalues, 1);
    cr_assert_eq(sg->values[0].arity, 0, "set_value()");
    cr_assert(sg->flags & EX_SIGS_STOPPED, "set_stopped() is a completion of the run-loop sender");
    test_loop_destroy(&other);
    rl_env_close(&e);
}

Test(exec_run_loop, schedule_completes_on_the_thread_running_run) {
    rl_env e;
    rl_env_open(&e, 0);
    ex_sender *s = e.sched;
    rl_sched_op o;
    rl_sched_ops_start(&o, 1, s);
    cr_assert_eq(rec_total(&o.r), 0, "start only queues the operation");
    cr_assert_eq(ex_run_loop_count(&e.loop), 1);
    rl_runner rn;
    pthread_t th;
    rl_runner_start(&rn, &e.loop, &th);
    while (ex_run_loop_count(&e.loop) != 0) sched_yield();
    ex_run_loop_finish(&e.loop);
    pthread_join(th, NULL);
    cr_assert_eq(o.r.n, 0);
    cr_assert_neq(rn.thread, test_thread_id());
    rl_sched_ops_expect_values(&o, 1, rn.thread); /* on the thread running run() */
    rl_env_close(&e);
}

Test(exec_run_loop, schedule_sender_is_multi_shot_and_fifo) {
    rl_env e;
    rl_env_open(&e, 0);
    ex_sender *s = e.sched;
    rl_sched_op o[3];
    rl_sched_ops_start(o, 3, s);
    e.it[0].finish = true; /* a marker behind them */
    ex_run_loop_push(&e.loop, &e.it[0].work);
    /* run_one: completes the first operation only */
    cr_assert(ex_run_loop_run_one(&e.loop));
    cr_assert_eq(o[0].r.values, 1);
    cr_assert_eq(rec_total(&o[1].r), 0);
    cr_assert_eq(rec_total(&o[2].r), 0);
    cr_assert_eq(ex_run_loop_run(&e.loop).code, 0);
    rl_sched_ops_expect_values(o, 3, NULL);
    cr_assert_eq(e.log.n, 1);
    rl_env_close(&e);
}

Test(exec_run_loop, stop_requested_before_the_item_runs_gives_set_stopped) {
    rl_env e;
    rl_env_open(&e, 0);
    ex_sender *s = e.sched;
    enum { BEFORE_START, AFTER_START, NOT_STOPPED };
    rl_sched_op o[3];
    for (int i = 0; i < 3; i++) {
        rec_init(&o[i].r);
        rec_with_stop(&o[i].r);
        rl_connect_schedule(&o[i], s);
    }
    cr_assert(ex_stop_source_request_stop(&o[BEFORE_START].r.stop));
    for (int i = 0; i < 3; i++) ex_start(o[i].op);
    cr_assert(ex_stop_source_request_stop(&o[AFTER_START].r.stop));
    cr_assert_eq(rec_total(&o[BEFORE_START].r) + rec_total(&o[AFTER_START].r), 0,
                 "stop does not complete a queued run-loop operation early");
    ex_run_loop_finish(&e.loop);
    cr_assert_eq(ex_run_loop_run(&e.loop).code, 0);

    for (int i = BEFORE_START; i <= AFTER_START; i++) {
        cr_assert_eq(o[i].r.stops, 1, "op %d stopped", i);
        cr_assert_eq(rec_total(&o[i].r), 1);
        ex_operation_destroy(o[i].op);
    }
    cr_assert_eq(o[BEFORE_START].r.thread, test_thread_id());
    rl_sched_ops_expect_values(&o[NOT_STOPPED], 1, NULL);
    rl_env_close(&e);
}

Test(exec_run_loop, schedule_through_sync_wait_from_another_thread) {
    /* A loop run by another thread: sync_wait on its schedule sender. */
    rl_env e;
    rl_env_open(&e, 0);
    rl_runner rn;
    pthread_t th;
    rl_runner_start(&rn, &e.loop, &th);
    for (int i = 0; i < 20; i++) {
        ex_result r = ex_sync_wait(ex_schedule(ex_run_loop_scheduler(&e.loop)));
        cr_assert_eq(r.disposition, EX_DISP_VALUE);
        cr_assert_eq(r.n, 0);
        ex_result_destroy(&r);
    }
    ex_run_loop_finish(&e.loop);
    pthread_join(th, NULL);
    cr_assert_eq(rn.result.code, 0);
    rl_env_close(&e);
}

/* ------------------------------------------------------- many producers */

enum { RL_PRODUCERS = 4, RL_PER_PRODUCER = 2000 };

typedef struct rl_pitem {
    ex_work work;   /* first member */
    int producer, seq;
    int runs;
    struct rl_consumer *consumer;
} rl_pitem;

typedef struct rl_consumer {
    int last_seq[RL_PRODUCERS];
    int order_errors;
    long executed;
} rl_consumer;

static void rl_pitem_execute(ex_work *w) {
    rl_pitem *it = (rl_pitem *)(void *)w;
    it->runs++;
    rl_consumer *c = it->consumer;
    if (it->seq != c->last_seq[it->producer] + 1) c->order_errors++;
    c->last_seq[it->producer] = it->seq;
    c->executed++;
}

typedef struct rl_producer {
    ex_run_loop *loop;
    int id;
    rl_pitem *items;       /* raw work items (even producers) */
    rl_sched_op *ops;      /* schedule operations (odd producers) */
    ex_sender *sched;
} rl_producer;

static void *rl_producer_main(void *arg) {
    rl_producer *p = arg;
    for (int i = 0; i < RL_PER_PRODUCER; i++) {
        if (p->items) ex_run_loop_push(p->loop, &p->items[i].work);
        else ex_start(p->ops[i].op);
        if (i % 256 == 0) sched_yield();
    }
    return NULL;
}

Test(exec_run_loop, many_producers_each_item_exactly_once) {
    rl_env e;
    rl_env_open(&e, 0);
    ex_run_loop *loop = &e.loop;
    rl_consumer cons;
    memset(&cons, 0, sizeof cons);
    for (int p = 0; p < RL_PRODUCERS; p++) cons.last_seq[p] = -1;
    ex_sender *sched = e.sched;

    rl_producer prod[RL_PRODUCERS];
    for (int p = 0; p < RL_PRODUCERS; p++) {
        prod[p].loop = loop;
        prod[p].id = p;
        prod[p].items = NULL;
        prod[p].ops = NULL;
        prod[p].sched = sched;
        if (p % 2 == 0) {
            prod[p].items = calloc(RL_PER_PRODUCER, sizeof(rl_pitem));
            cr_assert_not_null(prod[p].items);
            for (int i = 0; i < RL_PER_PRODUCER; i++) {
                rl_pitem *it = &prod[p].items[i];
                it->work.execute = rl_pitem_execute;
                it->producer = p;
                it->seq = i;
                it->consumer = &cons;
            }
        } else {
            prod[p].ops = aligned_alloc(alignof(rl_sched_op), RL_PER_PRODUCER * sizeof(rl_sched_op));
            cr_assert_not_null(prod[p].ops);
            for (int i = 0; i < RL_PER_PRODUCER; i++) {
                rec_init(&prod[p].ops[i].r);
                rl_connect_schedule(&prod[p].ops[i], sched);
            }
        }
    }

    rl_runner rn;
    pthread_t consumer;
    rl_runner_start(&rn, loop, &consumer);
    pthread_t th[RL_PRODUCERS];
    for (int p = 0; p < RL_PRODUCERS; p++) cr_assert_eq(pthread_create(&th[p], NULL, rl_producer_main, &prod[p]), 0);
    for (int p = 0; p < RL_PRODUCERS; p++) pthread_join(th[p], NULL);
    ex_run_loop_finish(loop);
    pthread_join(consumer, NULL);

    char why[200] = "";
    long completions = 0;
    for (int p = 0; p < RL_PRODUCERS && !why[0]; p++) {
        for (int i = 0; i < RL_PER_PRODUCER && !why[0]; i++) {
            if (prod[p].items) {
                if (prod[p].items[i].runs != 1)
                    snprintf(why, sizeof why, "producer %d item %d ran %d times", p, i, prod[p].items[i].runs);
            } else {
                rec *r = &prod[p].ops[i].r;
                if (r->values != 1 || rec_total(r) != 1)
                    snprintf(why, sizeof why, "producer %d op %d: %d values, %d total", p, i, r->values, rec_total(r));
                else if (r->thread != rn.thread)
                    snprintf(why, sizeof why, "producer %d op %d completed off the loop thread", p, i);
                completions++;
            }
        }
    }
    for (int p = 0; p < RL_PRODUCERS; p++) {
        if (prod[p].ops)
            for (int i = 0; i < RL_PER_PRODUCER; i++) ex_operation_destroy(prod[p].ops[i].op);
        free(prod[p].items);
        free(prod[p].ops);
    }
    cr_assert_str_empty(why, "%s", why);
    cr_assert_eq(rn.result.code, 0);
    cr_assert_eq(cons.order_errors, 0, "items of one producer ran out of order");
    cr_assert_eq(cons.executed, (long)(RL_PRODUCERS / 2) * RL_PER_PRODUCER);
    cr_assert_eq(completions, (long)(RL_PRODUCERS / 2) * RL_PER_PRODUCER);
    cr_assert_eq(ex_run_loop_count(loop), 0);
    rl_env_close(&e);
}

