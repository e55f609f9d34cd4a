/* runloop_stress.c - the run loop and the single-thread context at their
 * ends (issue 17), under ThreadSanitizer.
 *
 * 1. ex_run_loop_destroy racing run() on its way out: the loop is finished
 *    by its last item (on the running thread) or from outside, and freed
 *    as soon as destroy returns EX_OK.  destroy used to succeed once the
 *    state said finishing, while run() still executed the item and then
 *    locked the mutex of the freed loop. */
#include <pthread.h>
#include <sched.h>

#include <cexec/cexec.h>
#include "../../src/exi_core.h"
#include "stress.h"
#include "stress_util.h"

enum { LOOP_ROUNDS = 3000 };

/* ------------------------------------------------- 1. run loop destroy */

typedef struct loop_item {
    ex_work work;
    ex_run_loop *loop;
    uint32_t spin;     /* busy wait after finishing */
    uint32_t ran;
} loop_item;

static void finish_then_spin(ex_work *w) {
    loop_item *it = EXI_CONTAINER_OF(w, loop_item, work);
    ex_run_loop_finish(it->loop);
    spin_delay(it->spin);
    __atomic_store_n(&it->ran, 1, __ATOMIC_RELAXED);
}

static void count_run(ex_work *w) { __atomic_fetch_add(&EXI_CONTAINER_OF(w, loop_item, work)->ran, 1, __ATOMIC_RELAXED); }

static void *run_loop_main(void *arg) {
    ex_error e = ex_run_loop_run(arg);
    return (void *)(uintptr_t)(e.code != 0);
}

/* Returns the number of failed checks of one round. */
static int loop_round(uint32_t round) {
    ex_run_loop *loop = malloc(sizeof *loop);
    if (!loop || ex_run_loop_init(loop).code) return 1;
    loop_item plain = { .work.execute = count_run, .loop = loop };
    loop_item last = { .work.execute = finish_then_spin, .loop = loop, .spin = rnd(2000) };
    bool finish_outside = round % 3 == 0;
    pthread_t th;
    pthread_create(&th, NULL, run_loop_main, loop);
    ex_run_loop_push(loop, &plain.work);
    if (finish_outside) ex_run_loop_finish(loop);
    else ex_run_loop_push(loop, &last.work);
    while (ex_run_loop_destroy(loop).code == EX_EBUSY) sched_yield();
    free(loop);  /* run() must be done with it: TSan/ASan see any later touch */
    void *failed = NULL;
    pthread_join(th, &failed);
    int bad = failed != NULL;
    if (__atomic_load_n(&plain.ran, __ATOMIC_RELAXED) != 1) bad++;
    if (!finish_outside && __atomic_load_n(&last.ran, __ATOMIC_RELAXED) != 1) bad++;
    return bad;
}

static int loop_rounds(void) {
    int bad = 0;
    for (uint32_t r = 0; r < LOOP_ROUNDS; r++) bad += loop_round(r);
    CHECK(bad == 0, "run loop destroy: %d failed checks in %d rounds", bad, LOOP_ROUNDS);
    return 1;
}

int main(void) {
    int checks = 0;
    checks += loop_rounds();
    return stress_finish("runloop_stress", checks);
}
