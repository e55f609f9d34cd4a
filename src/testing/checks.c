/* SPDX-License-Identifier: MIT */
/* checks.c - the checks of an ex_test_outcome and their messages
 * (cexec/testing.h): "<name> <what it did>, expected <what was expected>". */
#include <string.h>

#include <cexec/cexec.h>
#include <cexec/testing.h>

#include "base/exi_atomic.h"
#include "base/exi_thread.h"
#include "testing/exi_outcome.h"
#include "testing/exi_test_text.h"

/* Tuples nested deeper are not equal (a bound for the recursion). */
#define COMPARE_DEPTH_MAX 16

/* Equality as a test means it: strings by their text, doubles exactly but
 * NaN equal to NaN, tuples element by element; the rest as
 * ex_value_equal. */
static bool same_value(const ex_value *a, const ex_value *b, unsigned depth) {
    if (a->type != b->type) return false;
    switch (a->type) {
    case EX_T_DOUBLE: return a->as.d == b->as.d || (a->as.d != a->as.d && b->as.d != b->as.d);
    case EX_T_STR: return a->as.s == b->as.s || (a->as.s && b->as.s && strcmp(a->as.s, b->as.s) == 0);
    case EX_T_TUPLE: {
        const ex_tuple *x = a->as.tuple, *y = b->as.tuple;
        if (x == y) return true;
        if (!x || !y || x->index != y->index || x->n != y->n || depth >= COMPARE_DEPTH_MAX) return false;
        for (uint32_t i = 0; i < x->n; i++)
            if (!same_value(&x->v[i], &y->v[i], depth + 1)) return false;
        return true;
    }
    default: return ex_value_equal(a, b);
    }
}

/* The verdict on a NULL outcome: a failure that says so. */
static bool no_outcome(char *msg, size_t size) {
    exi_text t;
    exi_text_init(&t, msg, size);
    exi_text_add(&t, "the check was given a NULL outcome");
    exi_text_end(&t);
    return false;
}

/* Begins a message with o's name and what it recorded. */
static void begin(exi_text *t, char *msg, size_t size, const ex_test_outcome *o) {
    exi_text_init(t, msg, size);
    exi_text_add(t, "%s ", o->name);
    exi_test_describe(t, o);
}

/* Ends the message; the verdict passes through. */
static bool verdict(exi_text *t, bool ok) {
    exi_text_end(t);
    return ok;
}

/* The values o kept, if its one completion was a value it could keep. */
static bool kept_values(const ex_test_outcome *o) {
    return exi_test_completed_once(o) && o->first == EX_DISP_VALUE && !o->values_lost;
}

bool ex_test_check_values(char *msg, size_t size, const ex_test_outcome *o, const ex_value *want, size_t n) {
    if (!o) return no_outcome(msg, size);
    exi_text t;
    begin(&t, msg, size, o);
    if (!want && n) {  /* nothing to compare with: say so, fail */
        exi_text_add(&t, ", expected %zu values given as NULL", n);
        return verdict(&t, false);
    }
    bool ok = kept_values(o) && o->n == n;
    for (size_t i = 0; ok && i < n; i++) ok = same_value(&o->values[i], &want[i], 0);
    exi_text_add(&t, ", expected ");
    exi_text_values(&t, want, n);
    return verdict(&t, ok);
}

bool ex_test_check_value(char *msg, size_t size, const ex_test_outcome *o, ex_value want) {
    return ex_test_check_values(msg, size, o, &want, 1);
}

/* |got - want| <= tolerance, NaN matching NaN. */
static bool close_enough(double got, double want, double tolerance) {
    if (got != got || want != want) return got != got && want != want;
    double d = got > want ? got - want : want - got;
    return got == want || d <= tolerance;
}

bool ex_test_check_value_double(char *msg, size_t size, const ex_test_outcome *o, double want, double tolerance) {
    if (!o) return no_outcome(msg, size);
    exi_text t;
    begin(&t, msg, size, o);
    bool ok = kept_values(o) && o->n == 1 && o->values[0].type == EX_T_DOUBLE &&
              close_enough(o->values[0].as.d, want, tolerance);
    ex_value w = ex_double(want);
    exi_text_add(&t, ", expected ");
    exi_text_values(&t, &w, 1);
    if (tolerance > 0) {
        exi_text_add(&t, " (within ");
        exi_text_double(&t, tolerance);
        exi_text_add(&t, ")");
    }
    return verdict(&t, ok);
}

bool ex_test_check_value_count(char *msg, size_t size, const ex_test_outcome *o, size_t n) {
    if (!o) return no_outcome(msg, size);
    exi_text t;
    begin(&t, msg, size, o);
    bool ok = exi_test_completed_once(o) && o->first == EX_DISP_VALUE && o->n == n && n <= EX_MAX_ARITY;
    if (n == 0) exi_text_add(&t, ", expected value () (set_value with no datums)");
    else exi_text_add(&t, ", expected a value of %zu datum%s", n, n == 1 ? "" : "s");
    return verdict(&t, ok);
}

bool ex_test_check_error(char *msg, size_t size, const ex_test_outcome *o, int code) {
    if (!o) return no_outcome(msg, size);
    exi_text t;
    begin(&t, msg, size, o);
    bool ok = exi_test_completed_once(o) && o->first == EX_DISP_ERROR && o->error.code == code;
    exi_text_add(&t, ", expected error ");
    exi_text_code(&t, code);
    return verdict(&t, ok);
}

bool ex_test_check_error_message(char *msg, size_t size, const ex_test_outcome *o, int code, const char *text) {
    if (!o) return no_outcome(msg, size);
    exi_text t;
    begin(&t, msg, size, o);
    bool ok = exi_test_completed_once(o) && o->first == EX_DISP_ERROR && o->error.code == code &&
              strstr(o->error.msg ? o->error.msg : "", text ? text : "") != NULL;
    exi_text_add(&t, ", expected error ");
    exi_text_code(&t, code);
    exi_text_add(&t, " with a message containing ");
    exi_text_string(&t, text ? text : "", EX_TEST_MESSAGE_MAX);
    return verdict(&t, ok);
}

bool ex_test_check_stopped(char *msg, size_t size, const ex_test_outcome *o) {
    if (!o) return no_outcome(msg, size);
    exi_text t;
    begin(&t, msg, size, o);
    bool ok = exi_test_completed_once(o) && o->first == EX_DISP_STOPPED;
    exi_text_add(&t, ", expected set_stopped");
    return verdict(&t, ok);
}

bool ex_test_check_completed_once(char *msg, size_t size, const ex_test_outcome *o) {
    if (!o) return no_outcome(msg, size);
    exi_text t;
    begin(&t, msg, size, o);
    exi_text_add(&t, ", expected exactly one completion");
    return verdict(&t, exi_test_completed_once(o));
}

/* Where o's one completion ran, for the thread checks' messages. */
static void add_where(exi_text *t, const ex_test_outcome *o) {
    if (!exi_test_completed_once(o)) return;
    if (o->synced) exi_text_add(t, " (in ex_test_sync_wait, on a thread it does not say)");
    else if (o->inline_done) exi_text_add(t, " inside ex_test_start");
    else if (o->thread == exi_thread_id()) exi_text_add(t, " on the calling thread, after ex_test_start returned");
    else exi_text_add(t, " on another thread (%p)", o->thread);
}

bool ex_test_check_completed_inline(char *msg, size_t size, const ex_test_outcome *o) {
    if (!o) return no_outcome(msg, size);
    exi_text t;
    begin(&t, msg, size, o);
    add_where(&t, o);
    exi_text_add(&t, ", expected a completion inside ex_test_start");
    return verdict(&t, exi_test_completed_once(o) && o->inline_done);
}

bool ex_test_check_completed_on(char *msg, size_t size, const ex_test_outcome *o, const void *thread) {
    if (!o) return no_outcome(msg, size);
    exi_text t;
    begin(&t, msg, size, o);
    add_where(&t, o);
    if (thread == exi_thread_id()) exi_text_add(&t, ", expected a completion on the calling thread");
    else exi_text_add(&t, ", expected a completion on thread %p", thread);
    return verdict(&t, exi_test_completed_once(o) && !o->synced && o->thread == thread);
}

bool ex_test_check_not_completed(char *msg, size_t size, const ex_test_outcome *o) {
    if (!o) return no_outcome(msg, size);
    exi_text t;
    begin(&t, msg, size, o);
    exi_text_add(&t, ", expected no completion yet");
    return verdict(&t, !o->misuse && exi_load_acq_u32(&o->completions) == 0);
}
