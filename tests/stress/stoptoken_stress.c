/* stoptoken_stress.c - in-place stop source: callbacks registered and
 * deregistered on several threads race one request_stop.  Each callback
 * runs at most once, never after its deregistration returned, and every
 * callback still registered when stop is requested runs exactly once. */
#include <pthread.h>
#include <sched.h>

#include <cexec/cexec.h>
#include "../../src/exi_core.h"
#include "stress.h"

enum { THREADS = 4, ROUNDS = 400, PER_THREAD = 64 };

typedef struct slot {
    ex_stop_callback cb;
    uint32_t calls;
    uint32_t deregistered;  /* deregistration returned */
    uint32_t late;          /* called after deregistration returned */
} slot;

static ex_stop_source src;
static slot slots[THREADS][PER_THREAD];
static uint32_t go;

static void on_stop(ex_stop_callback *cb) {
    slot *s = EXI_CONTAINER_OF(cb, slot, cb);
    if (__atomic_load_n(&s->deregistered, __ATOMIC_ACQUIRE)) __atomic_store_n(&s->late, 1, __ATOMIC_RELAXED);
    __atomic_fetch_add(&s->calls, 1, __ATOMIC_RELAXED);
}

static void *worker(void *arg) {
    slot *mine = slots[(uintptr_t)arg];
    while (!__atomic_load_n(&go, __ATOMIC_ACQUIRE)) sched_yield();
    for (int i = 0; i < PER_THREAD; i++) {
        ex_stop_callback_register(&mine[i].cb, ex_stop_source_token(&src), on_stop);
        if (i % 2) {
            ex_stop_callback_deregister(&mine[i].cb);
            __atomic_store_n(&mine[i].deregistered, 1, __ATOMIC_RELEASE);
        }
    }
    return NULL;
}

int main(void) {
    int checks = 0;
    for (int r = 0; r < ROUNDS; r++) {
        ex_stop_source_init(&src);
        memset(slots, 0, sizeof slots);
        go = 0;
        pthread_t t[THREADS];
        for (uintptr_t i = 0; i < THREADS; i++) pthread_create(&t[i], NULL, worker, (void *)i);
        __atomic_store_n(&go, 1, __ATOMIC_RELEASE);
        for (int k = 0; k < r % 50; k++) sched_yield();
        bool first = ex_stop_source_request_stop(&src);
        bool second = ex_stop_source_request_stop(&src);
        for (int i = 0; i < THREADS; i++) pthread_join(t[i], NULL);
        CHECK(first && !second, "round %d: request_stop returned %d then %d", r, first, second);
        uint32_t bad = 0;
        for (int i = 0; i < THREADS; i++)
            for (int j = 0; j < PER_THREAD; j++) {
                slot *s = &slots[i][j];
                if (s->calls > 1 || s->late) bad++;
                if (!(j % 2) && s->calls != 1) bad++;  /* never deregistered: must have run */
                if (!(j % 2)) ex_stop_callback_deregister(&s->cb);
            }
        CHECK(bad == 0, "round %d: %u callbacks misbehaved", r, bad);
        checks += 2;
    }
    return stress_finish("stoptoken_stress", checks);
}
