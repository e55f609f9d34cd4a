/* SPDX-License-Identifier: MIT */
/* outcome.c - ex_test_outcome: the recording, counting receiver, running
 * a sender into it, and what it recorded (cexec/testing.h). */
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cexec/cexec.h>
#include <cexec/testing.h>

#include "adaptors/exi_stage_name.h"
#include "base/exi_atomic.h"
#include "base/exi_thread.h"
#include "compose/exi_bulk.h"
#include "core/exi_error_text.h"
#include "testing/exi_outcome.h"
#include "testing/exi_test_text.h"

/* Tuples nested deeper than this are not copied (the values are then
 * reported as not kept): a bound for the recursion. */
#define COPY_DEPTH_MAX 16

static const char default_name[] = "the operation";

/* ------------------------------------------------------------ environment */

/* The receiver's environment, rebuilt whenever the test changes it (before
 * the connect): the stop token and the allocator, then the scheduler. */
static void build_env(ex_test_outcome *o) {
    ex_value token = ex_token_value(o->token);
    if (o->alloc)
        ex_env_pair_init2(&o->pairs[0], &ex_key_get_stop_token, token, &ex_key_get_allocator, ex_alloc_value(o->alloc),
                          ex_env_empty());
    else
        ex_env_pair_init(&o->pairs[0], &ex_key_get_stop_token, token, ex_env_empty());
    o->env = ex_env_of_pair(&o->pairs[0]);
    if (!o->sch.vt) return;
    ex_value sch = ex_sched_value(o->sch);
    ex_env_pair_init2(&o->pairs[1], &ex_key_get_scheduler, sch, &ex_key_get_delegation_scheduler, sch, o->env);
    o->env = ex_env_of_pair(&o->pairs[1]);
}

void ex_test_outcome_init(ex_test_outcome *o) {
    memset(o, 0, sizeof *o);
    o->error = ex_ok();
    memcpy(o->name, default_name, sizeof default_name);
    ex_stop_source_init(&o->stop);
    o->token = ex_stop_source_token(&o->stop);
    build_env(o);
}

void ex_test_outcome_set_name(ex_test_outcome *o, const char *name) {
    exi_text t;
    exi_text_init(&t, o->name, sizeof o->name);
    exi_text_add(&t, "%s", name ? name : default_name);
    exi_text_end(&t);
}

void ex_test_outcome_set_scheduler(ex_test_outcome *o, ex_scheduler sch) {
    o->sch = sch;
    build_env(o);
}

void ex_test_outcome_set_allocator(ex_test_outcome *o, const ex_allocator *a) {
    o->alloc = a;
    build_env(o);
}

void ex_test_outcome_set_stop_token(ex_test_outcome *o, ex_stop_token t) {
    o->token = t;
    build_env(o);
}

bool ex_test_outcome_request_stop(ex_test_outcome *o) { return ex_stop_source_request_stop(&o->stop); }

/* ------------------------------------------------------- copying values */

/* A tuple's n (32 bits) times a value's size cannot wrap a size_t. */
_Static_assert(SIZE_MAX / sizeof(ex_value) > UINT32_MAX + (uint64_t)sizeof(ex_tuple), "tuple sizes fit size_t");

/* Bytes the deep copy of (v, n) needs: tuples and values (`structs`, kept
 * first for their alignment) and string text (`chars`).  False when the
 * tuples nest too deep or the sizes do not fit a size_t. */
static bool measure(const ex_value *v, size_t n, unsigned depth, size_t *structs, size_t *chars) {
    if (depth > COPY_DEPTH_MAX) return false;
    for (size_t i = 0; i < n; i++) {
        if (v[i].type == EX_T_STR && v[i].as.s) {
            *chars = ex_size_add(*chars, strlen(v[i].as.s) + 1);
        } else if (v[i].type == EX_T_TUPLE && v[i].as.tuple) {
            const ex_tuple *t = v[i].as.tuple;
            *structs = ex_size_add(*structs, sizeof(ex_tuple) + t->n * sizeof(ex_value));
            if (!measure(t->v, t->n, depth + 1, structs, chars)) return false;
        }
    }
    return *structs != SIZE_MAX && *chars != SIZE_MAX && ex_size_add(*structs, *chars) != SIZE_MAX;
}

/* Copies (src, n) to dst, tuples to *structs and strings to *chars. */
static void copy_into(ex_value *dst, const ex_value *src, size_t n, char **structs, char **chars) {
    for (size_t i = 0; i < n; i++) {
        dst[i] = src[i];
        if (src[i].type == EX_T_STR && src[i].as.s) {
            size_t len = strlen(src[i].as.s) + 1;
            memcpy(*chars, src[i].as.s, len);
            dst[i].as.s = *chars;
            *chars += len;
        } else if (src[i].type == EX_T_TUPLE && src[i].as.tuple) {
            const ex_tuple *t = src[i].as.tuple;
            ex_tuple *copy = (ex_tuple *)(void *)*structs;
            ex_value *elems = (ex_value *)(void *)(*structs + sizeof(ex_tuple));
            *structs += sizeof(ex_tuple) + t->n * sizeof(ex_value);
            copy_into(elems, t->v, t->n, structs, chars);
            copy->index = t->index;
            copy->n = t->n;
            copy->v = elems;
            dst[i].as.tuple = copy;
        }
    }
}

/* Keeps a deep copy of (v, n) in o; notes why when that fails. */
static void keep_values(ex_test_outcome *o, const ex_value *v, size_t n) {
    o->n = n;
    size_t structs = 0, chars = 0;
    if (n > EX_MAX_ARITY) {
        o->values_lost = "more than EX_MAX_ARITY";
        return;
    }
    if (!measure(v, n, 0, &structs, &chars)) {
        o->values_lost = "tuples nested too deep to copy";
        return;
    }
    char *block = NULL;
    if (structs + chars) {
        /* Test storage, not the code under test's: malloc, so that the
         * allocation checks and failing allocators never see it. */
        block = malloc(structs + chars);
        if (!block) {
            o->values_lost = "no memory to copy them";
            return;
        }
    }
    char *s = block, *c = block ? block + structs : NULL;
    copy_into(o->values, v, n, &s, &c);
    o->copies = block;
}

/* -------------------------------------------------------------- receiver */

enum { KIND_VALUE = 0, KIND_ERROR = 1, KIND_STOPPED = 2 };

/* Counts a completion of disposition d; true for the first, which the
 * caller records and publishes with publish(). */
static bool first_completion(ex_test_outcome *o, ex_disposition d) {
    (void)exi_faa_u32(&o->counts[d - EX_DISP_VALUE], 1);
    uint32_t before = exi_faa_u32(&o->completions, 1);
    if (before == 1) exi_store_rlx_u32(&o->second, (uint32_t)d);
    return before == 0;
}

/* The last write of the first completion: what it recorded is visible
 * to whoever sees `recorded`, and o is not touched after it (the test may
 * destroy it at once). */
static void publish(ex_test_outcome *o, ex_disposition d) {
    o->first = d;
    if (!o->synced) {  /* sync_wait does not say where its receiver ran */
        o->thread = exi_thread_id();
        o->inline_done = exi_load_rlx_u32(&o->in_start) && o->starter == o->thread;
    }
    exi_store_rel_u32(&o->recorded, 1);
}

static void r_set_value(void *self, const ex_value *v, size_t n) {
    ex_test_outcome *o = self;
    if (!first_completion(o, EX_DISP_VALUE)) return;
    keep_values(o, v, n);
    publish(o, EX_DISP_VALUE);
}

static void r_set_error(void *self, ex_error e) {
    ex_test_outcome *o = self;
    if (!first_completion(o, EX_DISP_ERROR)) {
        ex_error_release(e);  /* counted; the first completion is the one kept */
        return;
    }
    o->error = e;
    publish(o, EX_DISP_ERROR);
}

static void r_set_stopped(void *self) {
    ex_test_outcome *o = self;
    if (!first_completion(o, EX_DISP_STOPPED)) return;
    publish(o, EX_DISP_STOPPED);
}

static ex_env r_env(void *self) { return ((ex_test_outcome *)self)->env; }

static const ex_receiver_vtable outcome_receiver_vt = { r_set_value, r_set_error, r_set_stopped, r_env, NULL };

ex_receiver ex_test_outcome_receiver(ex_test_outcome *o) { return (ex_receiver){ &outcome_receiver_vt, o }; }

/* ---------------------------------------------------------------- running */

/* Names o after s: its builder and, for a stage, the stage's name. */
static void name_after(ex_test_outcome *o, const ex_sender *s) {
    if (!s) {
        ex_test_outcome_set_name(o, "a NULL sender");
        return;
    }
    const char *builder = s->vt && s->vt->name ? s->vt->name : "a sender";
    const char *stage = exi_then_stage_name(s);
    if (!stage) stage = exi_let_stage_name(s);
    if (!stage) (void)exi_bulk_stage(s, &builder, &stage);
    exi_stage_label(o->name, sizeof o->name, builder, stage);
}

/* Whether o may still be run; if not, releases s and notes the misuse. */
static bool first_run(ex_test_outcome *o, ex_sender *s, const char *misuse) {
    if (!o->started && !exi_load_acq_u32(&o->completions)) return true;
    ex_sender_release(s);
    if (!o->misuse) o->misuse = misuse;
    return false;
}

/* A connect that failed, recorded as sync_wait reports it: the error
 * completion. */
static void record_connect_error(ex_test_outcome *o, ex_error e) {
    (void)first_completion(o, EX_DISP_ERROR);
    o->connect_failed = true;
    o->error = e;
    publish(o, EX_DISP_ERROR);
}

bool ex_test_start(ex_test_outcome *o, ex_sender *s) {
    if (!o) {
        ex_sender_release(s);
        return false;
    }
    if (!first_run(o, s, "ex_test_start: the outcome was already run (one run per outcome)")) return false;
    name_after(o, s);
    o->started = true;
    o->starter = exi_thread_id();
    ex_operation *op = NULL;
    ex_error e = ex_connect_alloc(s, ex_test_outcome_receiver(o), &op);
    /* The operation must not need its sender from here on: a sender whose
     * operation still does is caught (a use after free) by this test. */
    ex_sender_release(s);
    if (e.code) {
        record_connect_error(o, e);
        return false;
    }
    o->op = op;
    exi_store_rlx_u32(&o->in_start, 1);
    ex_start(op);
    exi_store_rlx_u32(&o->in_start, 0);
    return true;
}

void ex_test_sync_wait(ex_test_outcome *o, ex_sender *s) {
    if (!o) {
        ex_sender_release(s);
        return;
    }
    if (!first_run(o, s, "ex_test_sync_wait: the outcome was already run (one run per outcome)")) return;
    name_after(o, s);
    o->started = o->synced = true;
    ex_result r = ex_sync_wait(s);
    ex_disposition d = r.disposition;
    (void)first_completion(o, d);
    if (d == EX_DISP_VALUE) keep_values(o, r.values, r.n);
    if (d == EX_DISP_ERROR) o->error = ex_error_retain(r.error);  /* the result releases its own */
    ex_result_destroy(&r);
    publish(o, d);
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

bool ex_test_outcome_wait(const ex_test_outcome *o, double limit_s) {
    double deadline = now_s() + limit_s;
    /* Yields first, then naps: the completion may need this core. */
    for (unsigned round = 0; !exi_load_acq_u32(&o->recorded); round++) {
        if (now_s() >= deadline) return false;
        if (round < 64) {
            sched_yield();
        } else {
            struct timespec nap = { 0, 200 * 1000 };
            nanosleep(&nap, NULL);
        }
    }
    return true;
}

ex_error ex_test_outcome_destroy(ex_test_outcome *o) {
    if (!o) return ex_err(EX_EINVAL, "ex_test_outcome_destroy: NULL outcome");
    if (o->op) {
        if (!exi_load_acq_u32(&o->recorded))
            return ex_err(EX_EBUSY, "ex_test_outcome_destroy: the operation has not completed (stop it or run its "
                                    "scheduler first)");
        ex_operation_free(o->op);
        o->op = NULL;
    }
    free(o->copies);
    o->copies = NULL;
    o->n = 0;
    ex_error_release(o->error);
    o->error = ex_ok();
    return ex_ok();
}

/* ----------------------------------------------------------- what it saw */

ex_disposition ex_test_outcome_disposition(const ex_test_outcome *o) {
    return exi_load_acq_u32(&o->recorded) ? o->first : (ex_disposition)0;
}

unsigned ex_test_outcome_completions(const ex_test_outcome *o) { return exi_load_acq_u32(&o->completions); }

ex_test_counts ex_test_outcome_counts(const ex_test_outcome *o) {
    ex_test_counts c = { exi_load_acq_u32(&o->counts[KIND_VALUE]), exi_load_acq_u32(&o->counts[KIND_ERROR]),
                         exi_load_acq_u32(&o->counts[KIND_STOPPED]) };
    return c;
}

const ex_value *ex_test_outcome_values(const ex_test_outcome *o, size_t *n) {
    if (ex_test_outcome_disposition(o) != EX_DISP_VALUE || o->values_lost) {
        *n = 0;
        return NULL;
    }
    *n = o->n;
    return o->values;
}

ex_error ex_test_outcome_error(const ex_test_outcome *o) {
    return ex_test_outcome_disposition(o) == EX_DISP_ERROR ? o->error : ex_ok();
}

const void *ex_test_outcome_thread(const ex_test_outcome *o) {
    return exi_load_acq_u32(&o->recorded) ? o->thread : NULL;
}

bool ex_test_outcome_completed_inline(const ex_test_outcome *o) {
    return exi_load_acq_u32(&o->recorded) && o->inline_done;
}

const void *ex_test_thread_id(void) { return exi_thread_id(); }

const char *ex_test_outcome_name(const ex_test_outcome *o) { return o->name; }

static const char *kind_text(uint32_t d) {
    switch (d) {
    case EX_DISP_VALUE: return "a value";
    case EX_DISP_ERROR: return "an error";
    case EX_DISP_STOPPED: return "set_stopped";
    default: return "another completion";
    }
}

/* The first completion: "value int 42", "error EX_EINVAL \"...\"",
 * "set_stopped". */
static void add_first(exi_text *t, const ex_test_outcome *o) {
    switch (o->first) {
    case EX_DISP_VALUE:
        if (o->values_lost)
            exi_text_add(t, "a value of %zu datum%s (not kept: %s)", o->n, o->n == 1 ? "" : "s", o->values_lost);
        else
            exi_text_values(t, o->values, o->n);
        return;
    case EX_DISP_ERROR: exi_text_error(t, o->error); return;
    case EX_DISP_STOPPED: exi_text_add(t, "set_stopped"); return;
    default: exi_text_add(t, "an unknown completion"); return;
    }
}

bool exi_test_completed_once(const ex_test_outcome *o) {
    return !o->misuse && exi_load_acq_u32(&o->recorded) && exi_load_acq_u32(&o->completions) == 1;
}

void exi_test_describe(exi_text *t, const ex_test_outcome *o) {
    uint32_t n = exi_load_acq_u32(&o->completions);
    if (o->misuse) {
        exi_text_add(t, "was misused (%s)", o->misuse);
    } else if (!exi_load_acq_u32(&o->recorded)) {
        exi_text_add(t, n ? "is completing on another thread" : "has not completed");
    } else if (o->connect_failed) {
        exi_text_add(t, "failed to connect: ");
        add_first(t, o);
    } else if (n == 1) {
        exi_text_add(t, "completed with ");
        add_first(t, o);
    } else {
        exi_text_add(t, "completed %u times (", n);
        add_first(t, o);
        exi_text_add(t, ", then %s%s)", kind_text(exi_load_rlx_u32(&o->second)), n > 2 ? ", ..." : "");
    }
}

size_t ex_test_outcome_describe(const ex_test_outcome *o, char *buf, size_t size) {
    exi_text t;
    exi_text_init(&t, buf, size);
    exi_test_describe(&t, o);
    return exi_text_end(&t);
}
