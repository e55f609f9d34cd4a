/* SPDX-License-Identifier: MIT */
/* timer_heap.c - the intrusive binary min-heap of exi_timer_heap.h.
 *
 * The tree is complete: position p (1-based, in level order) has children
 * 2p and 2p + 1, so the path from the root to p is spelled by the bits of
 * p below its top bit (0: left, 1: right).  Insert hangs the node at
 * position count + 1 and moves it up; remove moves the node at the last
 * position into the hole and moves it up or down.  Moving swaps a node
 * with its parent by relinking, as nodes never move in memory. */
#include "resources/exi_timer_heap.h"

static bool earlier(const exi_timer *a, const exi_timer *b) {
    return a->deadline < b->deadline || (a->deadline == b->deadline && a->seq < b->seq);
}

/* The link that holds position pos (1 <= pos <= count + 1), and the node
 * that owns the link (NULL for the root). */
static exi_timer **link_at(exi_timer_heap *h, size_t pos, exi_timer **owner) {
    exi_timer **link = &h->root;
    *owner = NULL;
    int top = 63 - __builtin_clzll((unsigned long long)pos);
    for (int bit = top - 1; bit >= 0; bit--) {
        *owner = *link;
        link = (pos >> bit) & 1u ? &(*link)->right : &(*link)->left;
    }
    return link;
}

/* Swaps c with its parent p: c takes p's place and p becomes c's child on
 * the side c was on. */
static void swap_with_parent(exi_timer_heap *h, exi_timer *c) {
    exi_timer *p = c->parent, *gp = p->parent;
    exi_timer *cl = c->left, *cr = c->right;
    if (p->left == c) {
        c->left = p;
        c->right = p->right;
        if (c->right) c->right->parent = c;
    } else {
        c->right = p;
        c->left = p->left;
        if (c->left) c->left->parent = c;
    }
    p->left = cl;
    p->right = cr;
    if (cl) cl->parent = p;
    if (cr) cr->parent = p;
    p->parent = c;
    c->parent = gp;
    if (!gp) h->root = c;
    else if (gp->left == p) gp->left = c;
    else gp->right = c;
}

static void move_up(exi_timer_heap *h, exi_timer *t) {
    while (t->parent && earlier(t, t->parent)) swap_with_parent(h, t);
}

static void move_down(exi_timer_heap *h, exi_timer *t) {
    for (;;) {
        exi_timer *c = t->left;
        if (!c) return;
        if (t->right && earlier(t->right, c)) c = t->right;
        if (!earlier(c, t)) return;
        swap_with_parent(h, c);
    }
}

void exi_timer_heap_insert(exi_timer_heap *h, exi_timer *t) {
    t->left = t->right = NULL;
    t->seq = h->next_seq++;
    t->in_heap = true;
    exi_timer *owner;
    exi_timer **link = link_at(h, ++h->count, &owner);
    *link = t;
    t->parent = owner;
    move_up(h, t);
}

void exi_timer_heap_remove(exi_timer_heap *h, exi_timer *t) {
    exi_timer *owner;
    exi_timer **link = link_at(h, h->count--, &owner);
    exi_timer *last = *link;
    *link = NULL;  /* detach the last position (t itself when t is last) */
    t->in_heap = false;
    if (last == t) return;
    /* last fills t's place. */
    last->left = t->left;
    last->right = t->right;
    last->parent = t->parent;
    if (last->left) last->left->parent = last;
    if (last->right) last->right->parent = last;
    if (!t->parent) h->root = last;
    else if (t->parent->left == t) t->parent->left = last;
    else t->parent->right = last;
    move_up(h, last);
    move_down(h, last);
}
