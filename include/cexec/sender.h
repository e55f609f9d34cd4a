/* SPDX-License-Identifier: MIT */
/* cexec/sender.h - senders, connect, operation states ([exec.snd], [exec.connect]).
 *
 * A sender is an immutable, reference-counted recipe for asynchronous work.
 * Building one never starts work.  Every function that takes an
 * `ex_sender *` argument takes ownership of one reference, so nested calls
 * such as ex_then(ex_just(...), ...) leak nothing; retain a sender you want
 * to keep using.  A sender can be connected any number of times.
 *
 * Builders never return NULL.  Bad input (a NULL sender, a signature
 * mismatch) or a failed allocation yields an *invalid sender*: it completes
 * with set_error carrying EX_EINVAL or EX_ENOMEM and a message naming the
 * call, and ex_sender_status() reports the same error at build time.  An
 * input nested too deep gives EX_ETOODEEP the same way (see "Depth").
 *
 * This header is also the authoring interface for new senders (see
 * examples/retry.c): embed ex_sender at the start of your struct, fill a
 * vtable, compute sigs, op size and depth when building. */
#ifndef CEXEC_SENDER_H
#define CEXEC_SENDER_H

#include <cexec/types.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ex_sender_vtable {
    const char *name;  /* the public builder, e.g. "ex_then" */
    /* Constructs the operation state in `storage` (op_size bytes, aligned to
     * op_align).  The operation must not refer to the sender after connect
     * returns unless it retained it.  On error nothing is left to destroy. */
    ex_error (*connect)(const ex_sender *s, ex_receiver r, void *storage);
    /* Sender attributes (completion schedulers).  NULL: empty. */
    ex_env (*attrs)(const ex_sender *s);
    /* Releases what the sender holds (child senders).  NULL: nothing. */
    void (*destroy)(ex_sender *s);
    /* The algorithm, for domains (cexec/domain.h).  NULL: none; no domain
     * is offered the sender. */
    const struct ex_tag *tag;
} ex_sender_vtable;

struct ex_allocator;

/* Depth of sender chains ("Depth").  A sender's depth is 1 when it has no input
 * sender, else one more than its deepest input's.  Connecting, starting
 * and completing an operation recurse once per level (an adaptor connects
 * and starts its child, and the child's completion calls the adaptor's),
 * so the stack a chain needs grows with its depth: up to about 0.45 KiB a
 * level in optimised builds, 1.1 KiB under ASan (let_value, then,
 * when_all; docs/design.md, "Depth of sender chains").  Builders (and
 * ex_spawn) refuse an input as deep as EX_SENDER_MAX_DEPTH, through
 * ex_check_input: they return an invalid sender with EX_ETOODEEP.  So no
 * sender is deeper than the limit, and one at the limit needs at most
 * about 0.5 MiB of stack (1.1 MiB under ASan): a small part of a thread's
 * (glibc gives a thread the stack rlimit, usually 8 MiB).
 *
 * A task's stack is smaller (EX_TASK_STACK_DEFAULT, 64 KiB): a chain that
 * completes inline on it needs its depth times those figures on top of
 * what the body uses (a task with the default stack ran 800 levels of
 * ex_then optimised, 300 under ASan); give a task that awaits deeper
 * chains a stack_size of depth x 0.5 KiB (x 1.1 KiB under ASan) or more.
 * The limit bounds one sender: the sender a let_value's function returns
 * runs nested in the let when it completes inline, and a recursion that
 * starts each level inside the previous one (let_value whose senders all
 * complete inline) uses stack per level like a recursive function; a
 * schedule on a run loop or a pool in the recursion bounds it. */
#define EX_SENDER_MAX_DEPTH 1024u

/* The header every sender begins with.  Fields are set by the builder and
 * read-only afterwards (refs is managed by retain/release; memo by the
 * library).  A sender's attributes (vt->attrs) must answer the same for
 * its whole life: the library remembers what it learned from them. */
struct ex_sender {
    const ex_sender_vtable *vt;
    uint32_t refs;                      /* 0: static, never freed */
    uint32_t size;                      /* bytes allocated for this sender */
    const struct ex_allocator *alloc;   /* where it came from */
    size_t op_size;                     /* operation state size ... */
    size_t op_align;                    /* ... and alignment */
    uint32_t depth;                     /* 1 + the deepest input's; 1 without inputs */
    ex_sigs sigs;                       /* completion signatures */
    uint8_t memo;                       /* the library's (0 from ex_sender_alloc; never written when refs is 0) */
    ex_error status;                    /* EX_OK, or why the sender is invalid */
};

/* ------------------------------------------------------------- using senders */

/* Takes another reference to s (for a second consumer: every builder
 * takes one); returns s.  NULL-safe. */
ex_sender *ex_sender_retain(ex_sender *s);
/* Drops a reference; the last one frees s and releases its children.
 * NULL-safe. */
void ex_sender_release(ex_sender *s);

/* EX_OK for a well-formed sender; otherwise the error it will complete with. */
ex_error ex_sender_status(const ex_sender *s);
/* Nesting depth (see EX_SENDER_MAX_DEPTH); 0 for NULL. */
uint32_t ex_sender_depth(const ex_sender *s);
const ex_sigs *ex_sender_sigs(const ex_sender *s);
ex_env ex_sender_attrs(const ex_sender *s);
size_t ex_sender_op_size(const ex_sender *s);
size_t ex_sender_op_align(const ex_sender *s);

/* Reads a completion scheduler attribute (key is one of
 * ex_key_completion_scheduler_{value,error,stopped}). */
bool ex_get_completion_scheduler(const ex_sender *s, const ex_key *key, ex_scheduler *out);

/* Connects s to r, constructing the operation state in storage (at least
 * ex_sender_op_size(s) bytes, aligned to ex_sender_op_align(s)); *op is the
 * operation on success.  Does not consume s.  Errors: EX_EINVAL for a NULL
 * sender or receiver, small or misaligned storage, a sender whose op_align
 * is not a power of two (0 is taken as 1), or signatures r does not accept
 * (r.vt->accepts); errors of the sender's own connect. */
ex_error ex_connect(const ex_sender *s, ex_receiver r, void *storage, size_t size, ex_operation **op);

/* Like ex_connect, with storage from the receiver environment's allocator.
 * Free with ex_operation_free once the operation completed or if it was
 * never started.  Adds EX_ENOMEM, also (as malloc does) for an operation
 * state that no allocation can hold: above EX_ALLOC_MAX_SIZE with its
 * header, or aligned beyond EX_ALLOC_MAX_ALIGN. */
ex_error ex_connect_alloc(const ex_sender *s, ex_receiver r, ex_operation **op);

/* Starts op.  Call at most once.  The completion may run inside this call. */
static inline void ex_start(ex_operation *op) { op->vt->start(op); }

/* Destroys an operation made by ex_connect (before start or after it
 * completed). */
static inline void ex_operation_destroy(ex_operation *op) { if (op->vt->destroy) op->vt->destroy(op); }

/* Destroys and frees an operation made by ex_connect_alloc.  NULL-safe. */
void ex_operation_free(ex_operation *op);

/* ------------------------------------------------------- authoring senders */

/* Allocates a sender of `size` bytes (sizeof(ex_sender) .. UINT32_MAX, else
 * NULL: its size is kept in 32 bits) from the default allocator with
 * refs = 1, no signatures, op size = sizeof(ex_operation), depth 1 and
 * status EX_OK.  An adaptor sets depth to one more than its deepest
 * input's, once ex_check_input accepted the inputs.  Returns NULL on
 * allocation failure; the caller then releases
 * its inputs and returns ex_invalid_sender(EX_ENOMEM, ...). */
ex_sender *ex_sender_alloc(const ex_sender_vtable *vt, size_t size);

/* A sender that completes with set_error(code, msg) and whose status is
 * that error.  Never fails (falls back to a static out-of-memory sender).
 * msg must have static storage. */
ex_sender *ex_invalid_sender(int code, const char *msg);

/* Releases `n` senders (NULL entries ignored), then returns an invalid
 * sender: the common tail of a builder that rejects its input. */
ex_sender *ex_reject(int code, const char *msg, size_t n, ex_sender *const *inputs);

/* If s is NULL or invalid, returns the error a builder should fail with
 * (a NULL input becomes EX_EINVAL with `null_msg`); EX_ETOODEEP if s is
 * EX_SENDER_MAX_DEPTH deep (nesting it would go deeper); otherwise EX_OK. */
ex_error ex_check_input(const ex_sender *s, const char *null_msg);

/* Layout helpers: offset of a child operation placed after `base` bytes,
 * and the resulting total size; alignment is the larger of the two.
 * They saturate at SIZE_MAX instead of wrapping (an alignment of 0 is
 * taken as 1), so a layout built from a child whose op_size is absurd
 * stays absurd: ex_connect refuses storage for it and ex_connect_alloc
 * fails with EX_ENOMEM, where a wrapped size would pass for a small one.
 * Combine sizes with ex_size_add, never with a plain +. */
static inline size_t ex_align_up(size_t n, size_t a) {
    size_t m = a ? a - 1 : 0;
    return n > SIZE_MAX - m ? SIZE_MAX : (n + m) & ~m;
}
static inline size_t ex_size_add(size_t a, size_t b) { return a > SIZE_MAX - b ? SIZE_MAX : a + b; }
static inline size_t ex_max_size(size_t a, size_t b) { return a > b ? a : b; }

/* Connects a child sender without ex_connect's argument checks (the parent
 * already validated it); storage must be sized and aligned for it.  For a
 * child whose environment has the parent's scheduler and domain; an
 * adaptor that gives its child another get_scheduler or get_domain uses
 * ex_connect_child_in_env (cexec/domain.h). */
static inline ex_error ex_connect_child(const ex_sender *child, ex_receiver r, void *storage) {
    return child->vt->connect(child, r, storage);
}

/* Completion helpers.  ex_set_error hands e's reference to the receiver
 * (cexec/error.h): a receiver that keeps or drops an error it was given
 * releases it then. */
static inline void ex_set_value(ex_receiver r, const ex_value *v, size_t n) { r.vt->set_value(r.self, v, n); }
static inline void ex_set_error(ex_receiver r, ex_error e) { r.vt->set_error(r.self, e); }
static inline void ex_set_stopped(ex_receiver r) { r.vt->set_stopped(r.self); }

#ifdef __cplusplus
}
#endif
#endif
