/* sender_refs_race.c - reproducer (found by the soak test under TSan):
 * ex_sender_retain and ex_sender_release read `refs` with a plain load
 * (`if (s && s->refs)`, src/sender.c) while other threads change it with
 * atomic read-modify-writes.  Two threads that retain and release one
 * sender at the same time - which the API allows: senders are shared,
 * reference-counted recipes - make a data race in the C11 model, which
 * ThreadSanitizer reports.
 *
 *   make test-tsan          (once, for build-tsan/libcexec.a)
 *   clang -std=c17 -D_GNU_SOURCE -O1 -g -fsanitize=thread -pthread -Iinclude \
 *       tests/repro/sender_refs_race.c build-tsan/libcexec.a -lck -lm -ldl -o /tmp/sender_refs_race
 *   TSAN_OPTIONS=halt_on_error=1 /tmp/sender_refs_race
 *
 * Fails (exit 66, "data race ... in ex_sender_retain") until the reads go
 * through exi_load_rlx_u32; passes (exit 0) afterwards. */
#include <pthread.h>
#include <stdio.h>

#include <cexec/cexec.h>

enum { ROUNDS = 100000 };

static ex_sender *shared;

static void *churn(void *arg) {
    (void)arg;
    for (int i = 0; i < ROUNDS; i++) ex_sender_release(ex_sender_retain(shared));
    return NULL;
}

int main(void) {
    shared = ex_just(ex_int(1));
    pthread_t t[2];
    for (int i = 0; i < 2; i++) pthread_create(&t[i], NULL, churn, NULL);
    for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
    ex_sender_release(shared);
    puts("sender_refs_race: no race reported");
    return 0;
}
