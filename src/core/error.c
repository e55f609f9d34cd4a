/* SPDX-License-Identifier: MIT */
/* error.c - errors that own their message and payload (cexec/error.h): a
 * counted box holding both, released by whoever holds the last reference. */
#include <stdalign.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cexec/cexec.h>
#include <cexec/error.h>

#include "base/exi_atomic.h"
#include "core/exi_debug.h"

/* refs of a box released for good and kept by debug mode. */
#define BOX_DEAD 0xDEADE440u

struct ex_error_box {
    uint32_t refs;
    uint32_t size;                  /* bytes allocated, this header included */
    const ex_allocator *alloc;
    void *data;
    void (*destroy)(void *data);
    char msg[];
};

static const char lost_text[] = "(cexec: this error's message was lost: no memory to keep it)";
static const char lost_payload[] = "(cexec: this error's payload was dropped: no memory to keep it)";
static const char ok_code[] = "ex_error_format: an error's code must not be EX_OK";
static const char no_text[] = "(no message)";
static const char bad_format[] = "(cexec: this error's message could not be formatted)";

/* Formats into a new box of the default allocator; NULL when there is no
 * memory.  The text is cut at EX_ERROR_MSG_MAX (with "..."). */
static struct ex_error_box *box_new(const char *fmt, va_list ap) {
    const char *fixed = fmt ? NULL : no_text;  /* a text to copy instead of formatting */
    int want = 0;
    if (fmt) {
        va_list measure;
        va_copy(measure, ap);
        want = vsnprintf(NULL, 0, fmt, measure);
        va_end(measure);
        if (want < 0) fixed = bad_format;  /* an encoding error: keep the fact, not a partial text */
    }
    if (fixed) want = (int)strlen(fixed);
    size_t len = (size_t)want + 1 < EX_ERROR_MSG_MAX ? (size_t)want + 1 : EX_ERROR_MSG_MAX;
    size_t size = sizeof(struct ex_error_box) + len;  /* len <= EX_ERROR_MSG_MAX: no overflow */
    const ex_allocator *a = ex_default_allocator();
    struct ex_error_box *b = ex_allocate(a, size, alignof(struct ex_error_box));
    if (!b) return NULL;
    b->refs = 1;
    b->size = (uint32_t)size;
    b->alloc = a;
    b->data = NULL;
    b->destroy = NULL;
    if (fixed) {
        memcpy(b->msg, fixed, len);
    } else {
        vsnprintf(b->msg, len, fmt, ap);
        if ((size_t)want + 1 > len) memcpy(b->msg + len - 4, "...", 4);
    }
    return b;
}

static ex_error boxed(int code, struct ex_error_box *b) {
    ex_error e = { code, b->msg, b->data, b };
    return e;
}

ex_error ex_error_vformat(int code, const char *fmt, va_list ap) {
    if (code == EX_OK) return ex_err(EX_EINVAL, ok_code);
    struct ex_error_box *b = box_new(fmt, ap);
    return b ? boxed(code, b) : ex_err(code, lost_text);
}

ex_error ex_error_format(int code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    ex_error e = ex_error_vformat(code, fmt, ap);
    va_end(ap);
    return e;
}

ex_error ex_error_with_payload(int code, void *data, void (*destroy)(void *data), const char *fmt, ...) {
    if (code == EX_OK) {
        if (destroy) destroy(data);
        return ex_err(EX_EINVAL, "ex_error_with_payload: an error's code must not be EX_OK");
    }
    va_list ap;
    va_start(ap, fmt);
    struct ex_error_box *b = box_new(fmt, ap);
    va_end(ap);
    if (!b) {
        if (destroy) destroy(data);
        return ex_err(code, lost_payload);
    }
    b->data = data;
    b->destroy = destroy;
    return boxed(code, b);
}

static __attribute__((noreturn, cold)) void dead_box(const struct ex_error_box *b, const char *call) {
    fprintf(stderr,
            "cexec debug: %s: the error \"%.200s\" (box %p) was already released for good: released more often "
            "than retained (an error you pass on is no longer yours to release)\n",
            call, b->msg, (const void *)b);
    abort();
}

ex_error ex_error_retain(ex_error e) {
    if (!e.box) return e;
    uint32_t before = exi_faa_u32(&e.box->refs, 1);
    if (__builtin_expect(before == BOX_DEAD, 0)) dead_box(e.box, "ex_error_retain");
    return e;
}

static void box_free(void *p) {
    struct ex_error_box *b = p;
    ex_deallocate(b->alloc, b, b->size, alignof(struct ex_error_box));
}

void ex_error_release(ex_error e) {
    struct ex_error_box *b = e.box;
    if (!b) return;
    uint32_t before = exi_faa_u32(&b->refs, (uint32_t)-1);
    if (__builtin_expect(before == BOX_DEAD, 0)) dead_box(b, "ex_error_release");
    if (before != 1) return;
    /* The last reference: every other holder's use happened before its own
     * release (the read-modify-write orders them before this point). */
    if (b->destroy) b->destroy(b->data);
    if (exi_debug()) {
        b->data = NULL;
        exi_store_rlx_u32(&b->refs, BOX_DEAD);
        exi_debug_keep(b, box_free);
        return;
    }
    box_free(b);
}
