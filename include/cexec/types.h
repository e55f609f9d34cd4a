/* SPDX-License-Identifier: MIT */
/* cexec/types.h - the plain data types every cexec component shares.
 *
 * Values, errors, completion signatures, scheduler/receiver/environment
 * handles.  Everything here is a small POD passed by value; nothing here
 * allocates.  See docs/design.md for why the model looks the way it does. */
#ifndef CEXEC_TYPES_H
#define CEXEC_TYPES_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ errors */

/* Error codes are errno values so strerror() and existing habits apply.
 * Applications may use any other non-zero int for their own errors;
 * codes >= EX_EUSER are never produced by cexec. */
#define EX_OK        0
#define EX_ENOMEM    ENOMEM     /* an allocation failed */
#define EX_EINVAL    EINVAL     /* bad input: NULL sender, signature mismatch, ... */
#define EX_ESHUTDOWN ESHUTDOWN  /* the execution resource no longer accepts work */
#define EX_EBUSY     EBUSY      /* the object is still in use (e.g. a running run_loop) */
#define EX_EAGAIN    EAGAIN     /* a system resource (a thread) could not be created */
#define EX_ECANCELED ECANCELED  /* stopped_as_error's default error */
#define EX_ETOODEEP  ELOOP      /* a sender would nest deeper than EX_SENDER_MAX_DEPTH (sender.h) */
#define EX_EDEADLK   EDEADLK    /* the call would wait for work only the calling thread can run */
#define EX_ENOTSUP   ENOTSUP    /* the resource does not offer what was asked (a scheduler without a clock) */
#define EX_ETIMEDOUT ETIMEDOUT  /* ex_timeout: the operation did not complete in time */
#define EX_EIO       EIO        /* a communication failed: an MPI call reported an error (cexec/mpi.h) */
#define EX_EUSER     1000

/* An error is a value, never an exception: a code, a message that names
 * the failing call and why, and an optional payload.  code == EX_OK means
 * success.
 *
 * Most errors own nothing: ex_err() and ex_err_data() make an error whose
 * message is static and whose payload is borrowed, and every error cexec
 * itself makes is such an error.  An error made by ex_error_format() or
 * ex_error_with_payload() (cexec/error.h) owns its message and payload
 * through a counted box, and is passed like a sender: whoever is given one
 * owns it and passes it on or releases it (ex_error_release; cexec/error.h
 * states the rule in full).  Releasing an error that owns nothing does
 * nothing, so code that follows the rule works with every error. */
struct ex_error_box;
typedef struct ex_error {
    int code;
    const char *msg;           /* never NULL when code != EX_OK; static unless box owns it */
    const void *data;          /* optional payload; borrowed unless box owns it */
    struct ex_error_box *box;  /* NULL, or the counted owner of msg and data */
} ex_error;

/* ------------------------------------------------------------------ values */

/* Maximum number of datums in one value completion (P2300's set_value(r, a...)). */
#define EX_MAX_ARITY 8
/* Maximum number of distinct value signatures a sender may declare. */
#define EX_MAX_VALUE_SIGS 8

typedef enum ex_type {
    EX_T_ANY = 0,  /* in signatures only: any type */
    EX_T_NONE,     /* a disengaged optional (stopped_as_optional) */
    EX_T_BOOL,
    EX_T_INT,      /* int64_t */
    EX_T_UINT,     /* uint64_t */
    EX_T_DOUBLE,
    EX_T_PTR,      /* void *, shallow: the producer owns the pointee */
    EX_T_STR,      /* const char *, shallow */
    EX_T_SCHED,    /* ex_scheduler */
    EX_T_TOKEN,    /* ex_stop_token */
    EX_T_ALLOC,    /* const ex_allocator * */
    EX_T_TUPLE,    /* const ex_tuple *: into_variant, multi-value optionals */
    EX_T_COUNT_
} ex_type;

struct ex_scheduler_vtable;
struct ex_stop_source;
struct ex_allocator;

/* A type-erased, non-owning scheduler handle: {vtable, resource}.  Copy it
 * freely; it stays valid while the resource does. */
typedef struct ex_scheduler {
    const struct ex_scheduler_vtable *vt;
    void *self;
} ex_scheduler;

/* An in-place stop token: a pointer to its stop source.  NULL is the
 * never-stop token ([stoptoken.never]). */
typedef struct ex_stop_token {
    struct ex_stop_source *src;
} ex_stop_token;

struct ex_tuple;

typedef struct ex_value {
    ex_type type;
    union {
        bool b;
        int64_t i;
        uint64_t u;
        double d;
        void *p;
        const char *s;
        ex_scheduler sched;
        ex_stop_token token;
        const struct ex_allocator *alloc;
        const struct ex_tuple *tuple;
    } as;
} ex_value;

/* A tuple of values, used where P2300 has variant<tuple<...>...> or
 * optional<tuple<...>>.  `index` is the value signature the tuple came from
 * (into_variant); 0 elsewhere.  Tuples are deep-copied by whoever stores them. */
typedef struct ex_tuple {
    uint32_t index;
    uint32_t n;
    const ex_value *v;
} ex_tuple;

/* ------------------------------------------------------- completion signatures */

/* One value signature: arity and the type of each datum (EX_T_ANY matches
 * anything). */
typedef struct ex_sig {
    uint8_t arity;
    uint8_t types[EX_MAX_ARITY];
} ex_sig;

/* A sender's completion signatures, computed when the sender is built.
 * EX_SIGS_DYNAMIC means the value signatures are not known until run time
 * (e.g. let_value, whose function chooses the next sender): adaptors then
 * check arity and types when the values arrive instead. */
enum {
    EX_SIGS_ERROR   = 1u << 0,  /* may complete with set_error */
    EX_SIGS_STOPPED = 1u << 1,  /* may complete with set_stopped */
    EX_SIGS_DYNAMIC = 1u << 2   /* value signatures known only at run time */
};

typedef struct ex_sigs {
    uint8_t nvalues;  /* number of entries used in values[] */
    uint8_t flags;    /* EX_SIGS_* */
    ex_sig values[EX_MAX_VALUE_SIGS];
} ex_sigs;

/* -------------------------------------------------------------- environments */

/* A query key.  Identity is the key's address; `forwarding` says whether
 * adaptors pass the query from a receiver's environment to their children
 * ([exec.fwd.env]).  Define user keys as `static const ex_key`. */
typedef struct ex_key {
    const char *name;
    bool forwarding;
} ex_key;

struct ex_env_node;

/* An environment handle: a chain of nodes plus a filter.  With
 * EX_ENV_FORWARD_ONLY set, non-forwarding keys are not answered (FWD-ENV).
 * node == NULL is the empty environment. */
enum { EX_ENV_FORWARD_ONLY = 1u };

typedef struct ex_env {
    const struct ex_env_node *node;
    unsigned flags;
} ex_env;

/* A node of an environment chain, usually embedded in an operation state or
 * a sender.  `query` answers `key` into *out and returns true, or returns
 * false when it does not know the key (typically after asking its parent). */
typedef struct ex_env_node {
    bool (*query)(const struct ex_env_node *self, const ex_key *key, ex_value *out);
} ex_env_node;

/* ----------------------------------------------------------------- receivers */

/* The three completion channels plus the environment ([exec.recv]).
 * Completions never fail.  Exactly one of them is called per started
 * operation.  Values and errors are borrowed for the duration of the call.
 * The operation state may be destroyed during the call: a sender never
 * touches its operation after it has invoked a completion. */
typedef struct ex_receiver_vtable {
    void (*set_value)(void *self, const ex_value *v, size_t n);
    void (*set_error)(void *self, ex_error e);
    void (*set_stopped)(void *self);
    ex_env (*env)(void *self);        /* NULL: the empty environment */
    const ex_sigs *accepts;           /* NULL: accepts every completion */
} ex_receiver_vtable;

typedef struct ex_receiver {
    const ex_receiver_vtable *vt;
    void *self;
} ex_receiver;

/* ---------------------------------------------------------- operation states */

struct ex_operation;

typedef struct ex_operation_vtable {
    void (*start)(struct ex_operation *op);
    /* Releases what the operation holds.  Valid before start or after the
     * operation completed, never while it runs. */
    void (*destroy)(struct ex_operation *op);
} ex_operation_vtable;

/* Every operation state begins with this header. */
typedef struct ex_operation {
    const ex_operation_vtable *vt;
} ex_operation;

/* A time source for a resource's timers (cexec/virtual_clock.h); NULL
 * everywhere one is taken means CLOCK_MONOTONIC (ex_now). */
typedef struct ex_clock ex_clock;

typedef struct ex_sender ex_sender;

/* An intrusive work item, embedded in an operation state: scheduling one
 * allocates nothing.  `execute` runs it.  `cancel`, when set, is called
 * instead of execute by a resource that drops queued work (a pool being
 * destroyed); with cancel NULL such a resource runs execute. */
typedef struct ex_work {
    struct ex_work *next;
    void (*execute)(struct ex_work *w);
    void (*cancel)(struct ex_work *w);
} ex_work;

/* ------------------------------------------------------- execution policies */

/* What a bulk function permits (C++'s std::execution::seq, par, par_unseq
 * and unseq, [execpol]; for bulk, P3481): how its calls may run relative
 * to each other.  A resource may use less of the freedom than the policy
 * gives, never more.
 *   EX_SEQ        one after another on one agent, in index order: for a
 *                 function that is not safe to call from two threads.
 *   EX_PAR        on several agents at once, each call sequenced on its
 *                 own agent: the function must be safe for that.
 *   EX_PAR_UNSEQ  as EX_PAR, and calls on one agent may also interleave.
 *   EX_UNSEQ      on one agent, calls may interleave (never on two).
 * C cannot vectorise or interleave calls through a function pointer, so
 * the unsequenced policies run as their sequenced peers: EX_PAR_UNSEQ as
 * EX_PAR, EX_UNSEQ as EX_SEQ (in index order).  Any other value is
 * refused with EX_EINVAL.  Zero is EX_SEQ, the policy that is always
 * safe. */
typedef enum ex_execution_policy { EX_SEQ, EX_PAR, EX_PAR_UNSEQ, EX_UNSEQ } ex_execution_policy;

#ifdef __cplusplus
}
#endif
#endif
