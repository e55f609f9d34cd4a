/* SPDX-License-Identifier: MIT */
/* The timer heap (resources/exi_timer_heap.h): random inserts and removals
 * checked against a reference after every step (shape, order, links, the
 * earliest), and first-armed-first for equal deadlines. */
#include <stdlib.h>

#include "common/helpers.h"
#include "resources/exi_timer_heap.h"

TEST_SUITE(timer_heap, 30);

enum { N = 600 };

static uint64_t rng = 88172645463325252ull;
static uint64_t next_rand(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

/* Checks every node below t: parent links and heap order; counts them. */
static size_t check_subtree(const exi_timer *t) {
    if (!t) return 0;
    size_t n = 1;
    const exi_timer *kids[2] = { t->left, t->right };
    for (int i = 0; i < 2; i++) {
        const exi_timer *c = kids[i];
        if (!c) continue;
        cr_assert_eq(c->parent, t, "a child's parent link is wrong");
        cr_assert(c->deadline > t->deadline || (c->deadline == t->deadline && c->seq > t->seq),
                  "heap order broken: %lld/%llu under %lld/%llu", (long long)c->deadline,
                  (unsigned long long)c->seq, (long long)t->deadline, (unsigned long long)t->seq);
        cr_assert(c->in_heap);
        n += check_subtree(c);
    }
    return n;
}

/* Completeness: the tree's height and node count agree with a complete
 * binary tree (every level full but the last, filled from the left). */
static void check_shape(const exi_timer_heap *h) {
    size_t count = h->count;
    for (size_t pos = 1; pos <= count; pos++) {
        const exi_timer *t = h->root;
        int top = 63 - __builtin_clzll((unsigned long long)pos);
        for (int bit = top - 1; bit >= 0 && t; bit--) t = (pos >> bit) & 1u ? t->right : t->left;
        cr_assert_not_null(t, "position %zu of %zu is empty", pos, count);
    }
}

static void check_heap(const exi_timer_heap *h, size_t want) {
    cr_assert_eq(h->count, want);
    if (h->root) cr_assert_null(h->root->parent);
    cr_assert_eq(check_subtree(h->root), want, "the tree holds another number of nodes than count");
    check_shape(h);
}

Test(timer_heap, random_inserts_and_removals_keep_it_a_heap) {
    static exi_timer nodes[N];
    exi_timer_heap h;
    exi_timer_heap_init(&h);
    size_t live = 0;
    for (int step = 0; step < 20000; step++) {
        exi_timer *t = &nodes[next_rand() % N];
        if (t->in_heap) {
            exi_timer_heap_remove(&h, t);
            cr_assert_not(t->in_heap);
            live--;
        } else {
            t->deadline = (int64_t)(next_rand() % 50);  /* many equal deadlines */
            exi_timer_heap_insert(&h, t);
            live++;
        }
        if (step % 7 == 0 || live < 8) check_heap(&h, live);
    }
    /* Draining by the minimum gives (deadline, arming order) order. */
    int64_t last_d = -1;
    uint64_t last_seq = 0;
    while (h.root) {
        exi_timer *m = exi_timer_heap_min(&h);
        cr_assert(m->deadline > last_d || (m->deadline == last_d && m->seq > last_seq));
        last_d = m->deadline;
        last_seq = m->seq;
        exi_timer_heap_remove(&h, m);
        check_heap(&h, --live);
    }
    cr_assert_eq(live, 0);
}

Test(timer_heap, equal_deadlines_come_out_first_armed_first) {
    static exi_timer nodes[100];
    exi_timer_heap h;
    exi_timer_heap_init(&h);
    for (int i = 0; i < 100; i++) {
        nodes[i].deadline = 5;
        exi_timer_heap_insert(&h, &nodes[i]);
    }
    for (int i = 0; i < 100; i++) {
        cr_assert_eq(exi_timer_heap_min(&h), &nodes[i], "timer %d out of arming order", i);
        exi_timer_heap_remove(&h, &nodes[i]);
    }
    cr_assert_null(h.root);
}

Test(timer_heap, removing_the_last_and_the_only_node) {
    exi_timer a = { .deadline = 1 }, b = { .deadline = 2 };
    exi_timer_heap h;
    exi_timer_heap_init(&h);
    exi_timer_heap_insert(&h, &a);
    exi_timer_heap_remove(&h, &a);
    cr_assert_null(h.root);
    exi_timer_heap_insert(&h, &a);
    exi_timer_heap_insert(&h, &b);
    exi_timer_heap_remove(&h, &b);  /* the last position */
    check_heap(&h, 1);
    cr_assert_eq(h.root, &a);
    exi_timer_heap_remove(&h, &a);
    check_heap(&h, 0);
}
