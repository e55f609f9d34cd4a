/* SPDX-License-Identifier: MIT */
/* receivers.c - see receivers.h. */
#include <stdio.h>
#include <string.h>

#include "common/receivers.h"

static _Thread_local char thread_marker;
const void *test_thread_id(void) { return &thread_marker; }

/* Adds (key, value) to an env pair that may already hold one entry. */
static void pair_add(ex_env_pair *pair, bool used, const ex_key *key, ex_value value) {
    if (used) {
        pair->key2 = key;
        pair->value2 = value;
    } else {
        ex_env_pair_init(pair, key, value, ex_env_empty());
    }
}

static void pair_with_stop(ex_env_pair *pair, ex_stop_source *stop) {
    ex_env_pair_init(pair, &ex_key_get_stop_token, ex_token_value(ex_stop_source_token(stop)), ex_env_empty());
}

static void copy_values(ex_value *dst, size_t *dst_n, const ex_value *v, size_t n) {
    *dst_n = n;
    for (size_t i = 0; i < n && i < EX_MAX_ARITY; i++) dst[i] = v[i];
}

/* ------------------------------------------------------ recording receiver */

/* Formats the datums while they are alive (tuples are borrowed for the
 * duration of the completion). */
void test_format_values(char *text, size_t size, const ex_value *v, size_t n) {
    size_t len = 0;
    text[0] = '\0';
    for (size_t i = 0; i < n && len < size; i++) {
        if (i) len += (size_t)snprintf(text + len, size - len, "; ");
        if (len < size) len += ex_value_format(&v[i], text + len, size - len);
    }
}

static void rec_set_value(void *self, const ex_value *v, size_t n) {
    rec *r = self;
    r->values++;
    copy_values(r->v, &r->n, v, n);
    test_format_values(r->text, sizeof r->text, v, n);
    r->thread = test_thread_id();
    if (r->after) r->after(r);
}

static void rec_set_error(void *self, ex_error e) {
    rec *r = self;
    r->errors++;
    r->err = e;
    r->thread = test_thread_id();
    if (r->after) r->after(r);
}

static void rec_set_stopped(void *self) {
    rec *r = self;
    r->stops++;
    r->thread = test_thread_id();
    if (r->after) r->after(r);
}

static ex_env rec_env(void *self) { return ((rec *)self)->env; }

void rec_init(rec *r) {
    memset(r, 0, sizeof *r);
    r->vt.set_value = rec_set_value;
    r->vt.set_error = rec_set_error;
    r->vt.set_stopped = rec_set_stopped;
    r->vt.env = rec_env;
    r->env = ex_env_empty();
    ex_stop_source_init(&r->stop);
}

ex_receiver rec_receiver(rec *r) {
    ex_receiver x = { &r->vt, r };
    return x;
}

int rec_total(const rec *r) { return r->values + r->errors + r->stops; }

void rec_with_stop(rec *r) {
    pair_with_stop(&r->pair, &r->stop);
    r->env = ex_env_of_pair(&r->pair);
}

void rec_init_stop_requested(rec *r) {
    rec_init(r);
    rec_with_stop(r);
    ex_stop_source_request_stop(&r->stop);
}

void rec_with_scheduler(rec *r, ex_scheduler sch) {
    pair_add(&r->pair, r->pair.node.query != NULL, &ex_key_get_scheduler, ex_sched_value(sch));
    r->env = ex_env_of_pair(&r->pair);
}

/* ---------------------------------------------- completes on any thread */

/* trec and frees_op_rec start with their rec: the rec's vtable serves
 * them, its `after` hook does the rest. */
static void trec_publish(rec *r) { atomic_store(&((trec *)(void *)r)->done, 1); }

void trec_init(trec *a) {
    rec_init(&a->r);
    a->r.after = trec_publish;
    a->vt = a->r.vt;
    atomic_init(&a->done, 0);
}

ex_receiver trec_receiver(trec *a) {
    ex_receiver x = { &a->vt, a };
    return x;
}

/* ------------------------------------------------------ atomic counters */

static void arec_note(arec *r, atomic_int *kind) {
    r->worker = r->pool ? ex_pool_current_worker(r->pool) : -1;
    r->thread = test_thread_id();
    atomic_fetch_add(kind, 1);
    atomic_fetch_add(&r->total, 1);
}

static void arec_value(void *self, const ex_value *v, size_t n) {
    arec *r = self;
    copy_values(r->v, &r->n, v, n);
    arec_note(r, &r->values);
}

static void arec_error(void *self, ex_error e) {
    arec *r = self;
    r->err = e;
    arec_note(r, &r->errors);
}

static void arec_stopped(void *self) {
    arec *r = self;
    arec_note(r, &r->stops);
}

static ex_env arec_env(void *self) {
    arec *r = self;
    return r->has_env ? ex_env_of_pair(&r->pair) : ex_env_empty();
}

const ex_receiver_vtable arec_vt = { arec_value, arec_error, arec_stopped, arec_env, NULL };

void arec_init(arec *r, ex_pool *p) {
    memset(r, 0, sizeof *r);
    r->pool = p;
    r->worker = -2;
    ex_stop_source_init(&r->stop);
}

ex_receiver arec_receiver(arec *r) {
    ex_receiver x = { &arec_vt, r };
    return x;
}

void arec_with_stop(arec *r) {
    pair_with_stop(&r->pair, &r->stop);
    r->has_env = true;
}

void arec_with_scheduler(arec *r, ex_scheduler sch) {
    pair_add(&r->pair, r->has_env, &ex_key_get_scheduler, ex_sched_value(sch));
    r->has_env = true;
}

/* ------------------------------------------- frees its own operation */

static void frees_op_free(rec *r) { ex_operation_free(((frees_op_rec *)(void *)r)->op); }

void frees_op_rec_init(frees_op_rec *f) {
    rec_init(&f->r);
    f->r.after = frees_op_free;
    f->op = NULL;
}

/* f is also its rec (the first member): the rec's callbacks serve it. */
ex_receiver frees_op_rec_receiver(frees_op_rec *f) { return rec_receiver(&f->r); }
