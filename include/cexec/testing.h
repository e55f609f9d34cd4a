/* SPDX-License-Identifier: MIT */
/* cexec/testing.h - testing code that uses cexec, with Criterion.
 *
 * Three helpers (docs/testing.md shows them at work):
 *   - ex_test_outcome: how an operation completed.  ex_test_start connects
 *     a sender to it and starts it without waiting; the test checks, then
 *     runs what it controls, then checks again.  ex_test_sync_wait waits
 *     instead.  Connected by hand (ex_test_outcome_receiver), it is a
 *     counting receiver that flags every completion after the first.
 *   - assertions on an outcome: EX_ASSERT_VALUE_INT(&o, 42),
 *     EX_ASSERT_ERROR(&o, EX_EINVAL), EX_ASSERT_STOPPED(&o),
 *     EX_ASSERT_NOT_COMPLETED(&o), ... whose failure messages name the
 *     sender (its builder and stage, "ex_then(parse)"), what it did and
 *     what was expected:
 *       ex_then(parse) completed with error EX_EINVAL "bad input",
 *       expected value int 42
 *   - an allocation check around a test body: EX_CHECK_ALLOCATIONS(...),
 *     or ex_test_allocations_begin / EX_ASSERT_NO_LEAKS, over the default
 *     allocator and the allocators a test hands to cexec.
 *
 * The library does not depend on Criterion: the functions below only
 * record and describe.  The EX_ASSERT_* and EX_EXPECT_* macros expand to
 * Criterion's cr_assert and cr_expect, so a file that uses them includes
 * <criterion/criterion.h> itself (before or after this header).  Every
 * EX_ASSERT_X ends the test when it fails; its EX_EXPECT_X twin marks the
 * test failed and carries on.  The check functions
 * (ex_test_check_*) give the same verdict and message for another
 * framework.
 *
 * Threads: a completion may come on any thread; what it records is
 * published before the completion returns.  The checks and accessors are
 * for one thread, the test's.  The manual scheduler
 * (cexec/manual_scheduler.h) and the virtual clock (cexec/virtual_clock.h)
 * are included below. */
#ifndef CEXEC_TESTING_H
#define CEXEC_TESTING_H

#include <cexec/types.h>
#include <cexec/allocator.h>
#include <cexec/stop_token.h>
#include <cexec/env.h>
#include <cexec/sync_wait.h>
#include <cexec/value.h>
/* With these, <cexec/testing.h> gives a test everything it needs: a
 * scheduler whose work runs when the test says, and time the test moves. */
#include <cexec/manual_scheduler.h>
#include <cexec/virtual_clock.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- outcomes */

/* Room for a sender's name in an outcome, with its NUL; a longer one is
 * cut ("..." at the end). */
#define EX_TEST_NAME_MAX 96
/* The size of the message buffer the assertion macros give the checks:
 * a longer message is cut ("..." at the end). */
#define EX_TEST_MESSAGE_MAX 1024

/* How many completions of each kind an outcome received. */
typedef struct ex_test_counts {
    unsigned values, errors, stopped;
} ex_test_counts;

/* How an operation completed, recorded by the receiver the outcome is:
 * the first completion in full (its values deep-copied: tuples and the
 * text of strings are copied, pointers are not; its error's reference,
 * released by ex_test_outcome_destroy), every completion counted, the
 * thread the first one ran on and whether it ran inside ex_test_start.
 * It lives in the test's storage, at a fixed address from
 * ex_test_outcome_init to ex_test_outcome_destroy (its environment and
 * stop source are inside it).  Its receiver's environment answers
 * get_stop_token with the outcome's own stop source
 * (ex_test_outcome_request_stop), or with the token the test set, and
 * get_scheduler, get_delegation_scheduler and get_allocator with what the
 * test set.  Fields are private: use the functions below. */
typedef struct ex_test_outcome {
    /* private */
    uint32_t completions;      /* every completion call (atomic) */
    uint32_t recorded;         /* 1 once the first is recorded (release) */
    uint32_t counts[3];        /* values, errors, stopped (atomic) */
    uint32_t in_start;         /* 1 while ex_test_start runs start (atomic) */
    uint32_t second;           /* the second completion's disposition (atomic) */
    ex_disposition first;
    size_t n;
    ex_value values[EX_MAX_ARITY];
    void *copies;              /* strings and tuples of values, from malloc */
    const char *values_lost;   /* why they could not be copied, or NULL */
    bool connect_failed;       /* error is the connect's */
    bool started, synced, inline_done;
    const char *misuse;        /* how the test misused it (static text) */
    ex_error error;
    const void *thread;        /* where the first completion ran */
    const void *starter;       /* the thread in ex_test_start */
    ex_operation *op;
    char name[EX_TEST_NAME_MAX];
    ex_stop_source stop;
    ex_stop_token token;
    ex_scheduler sch;
    const ex_allocator *alloc;
    ex_env_pair pairs[2];
    ex_env env;
} ex_test_outcome;

/* Prepares o: nothing recorded, named "the operation", its environment
 * answering get_stop_token with o's own stop source (stop not requested)
 * and nothing else. */
void ex_test_outcome_init(ex_test_outcome *o);

/* What the failure messages call the operation, for a receiver connected
 * by hand (copied; NULL: "the operation").  ex_test_start and
 * ex_test_sync_wait name it after the sender. */
void ex_test_outcome_set_name(ex_test_outcome *o, const char *name);

/* The environment of o's receiver, set before it is connected: the
 * scheduler get_scheduler and get_delegation_scheduler answer (a manual
 * scheduler, a run loop's: where the operation runs its work); the
 * allocator get_allocator answers (also what ex_test_start allocates the
 * operation state with); the stop token get_stop_token answers instead of
 * o's own (ex_never_stop_token() for none). */
void ex_test_outcome_set_scheduler(ex_test_outcome *o, ex_scheduler sch);
void ex_test_outcome_set_allocator(ex_test_outcome *o, const ex_allocator *a);
void ex_test_outcome_set_stop_token(ex_test_outcome *o, ex_stop_token t);

/* Requests stop on o's own stop source (what its environment answers
 * unless a token was set); the stop callbacks run on the calling thread.
 * True for the first request. */
bool ex_test_outcome_request_stop(ex_test_outcome *o);

/* o as a receiver, for a test that connects a sender itself (its own
 * sender's connect, a second connect of one sender): a counting receiver
 * that records the first completion and counts and flags every other.
 * It accepts every completion.  Valid while o is. */
ex_receiver ex_test_outcome_receiver(ex_test_outcome *o);

/* Connects s to o with operation state from o's allocator (the default:
 * ex_connect_alloc), releases s (the operation must not need it: a sender
 * that does is caught here), and starts the operation, without waiting:
 * a completion inside start is recorded before this returns, any other
 * when it comes.  Takes s's reference; names o after s ("ex_then(parse)",
 * "ex_just").  A connect that fails is recorded as the error completion
 * (as ex_sync_wait reports it) and nothing is started: false.  Once per
 * outcome: a second call is refused (s released, false) and every check
 * of o then fails, saying so.  A NULL o: s released, false. */
bool ex_test_start(ex_test_outcome *o, ex_sender *s);

/* Runs s with ex_sync_wait (takes s; the calling thread waits, running
 * the work sync_wait runs) and records its result in o, named after s.
 * The environment is sync_wait's, not o's, and where the completion ran
 * is not known (ex_test_outcome_thread: NULL).  Once per outcome, as
 * ex_test_start. */
void ex_test_sync_wait(ex_test_outcome *o, ex_sender *s);

/* Waits until o recorded a completion or limit_s seconds passed (a bound
 * for a lost completion, not a timing check); true if it completed.  It
 * only waits: work the calling thread must run (a run loop's, a manual
 * scheduler's) never completes during it. */
bool ex_test_outcome_wait(const ex_test_outcome *o, double limit_s);

/* Frees what o holds: the operation, the copies of values, the error's
 * reference.  EX_EBUSY, with nothing freed, while an operation started by
 * ex_test_start has not completed (finish it first: stop it, run its
 * scheduler); then call again.  EX_OK otherwise, also for an outcome
 * never started and a second time; EX_EINVAL for NULL. */
ex_error ex_test_outcome_destroy(ex_test_outcome *o);

/* What o recorded: the disposition of the first completion (0 while none
 * came); the number of completions; how many of each kind. */
ex_disposition ex_test_outcome_disposition(const ex_test_outcome *o);
unsigned ex_test_outcome_completions(const ex_test_outcome *o);
ex_test_counts ex_test_outcome_counts(const ex_test_outcome *o);

/* The first completion's values (*n of them; NULL and 0 when it was not
 * a value completion or they could not be copied), valid while o is.
 * Strings point to o's copies of their text. */
const ex_value *ex_test_outcome_values(const ex_test_outcome *o, size_t *n);

/* The first completion's error, borrowed from o (ex_error_retain it to
 * keep it past ex_test_outcome_destroy); ex_ok() if it was not an error. */
ex_error ex_test_outcome_error(const ex_test_outcome *o);

/* The thread the first completion ran on (compare with ex_test_thread_id
 * called on a thread), NULL while none came or after ex_test_sync_wait;
 * and whether it ran inside ex_test_start on the starting thread. */
const void *ex_test_outcome_thread(const ex_test_outcome *o);
bool ex_test_outcome_completed_inline(const ex_test_outcome *o);

/* The calling thread's identity, as ex_test_outcome_thread gives it. */
const void *ex_test_thread_id(void);

/* What the messages call o's operation ("ex_then(parse)"). */
const char *ex_test_outcome_name(const ex_test_outcome *o);

/* What o recorded, as the messages say it ("completed with value int 42",
 * "has not completed", "completed 2 times (value int 42, then stopped)")
 * into buf (always terminated when size > 0); returns the length wanted. */
size_t ex_test_outcome_describe(const ex_test_outcome *o, char *buf, size_t size);

/* ------------------------------------------------------------------ checks
 * Each check returns whether o shows what is expected, and writes the
 * message an assertion prints into msg (size bytes, always terminated;
 * EX_TEST_MESSAGE_MAX is enough): on failure, "<name> <what it did>,
 * expected <what was expected>".  Every check of a completion fails when
 * o completed more than once or not yet, and every check fails for an
 * outcome the test misused (run twice) and for a NULL o. */

/* One value completion whose datums equal want[0..n): same types, equal
 * contents (strings by their text, pointers by address, doubles exactly,
 * NaN equal to NaN, tuples element by element, schedulers by
 * ex_scheduler_equal).  ex_test_check_value: one datum. */
bool ex_test_check_values(char *msg, size_t size, const ex_test_outcome *o, const ex_value *want, size_t n);
bool ex_test_check_value(char *msg, size_t size, const ex_test_outcome *o, ex_value want);

/* One value completion of one double within tolerance of want (0:
 * exactly; NaN matches NaN). */
bool ex_test_check_value_double(char *msg, size_t size, const ex_test_outcome *o, double want, double tolerance);

/* One value completion of n datums, whatever they are. */
bool ex_test_check_value_count(char *msg, size_t size, const ex_test_outcome *o, size_t n);

/* One error completion with this code; ex_test_check_error_message: and
 * a message that contains text. */
bool ex_test_check_error(char *msg, size_t size, const ex_test_outcome *o, int code);
bool ex_test_check_error_message(char *msg, size_t size, const ex_test_outcome *o, int code, const char *text);

/* One stopped completion. */
bool ex_test_check_stopped(char *msg, size_t size, const ex_test_outcome *o);

/* Exactly one completion, of any kind. */
bool ex_test_check_completed_once(char *msg, size_t size, const ex_test_outcome *o);

/* Exactly one completion, which ran inside ex_test_start (on_thread: on
 * that thread). */
bool ex_test_check_completed_inline(char *msg, size_t size, const ex_test_outcome *o);
bool ex_test_check_completed_on(char *msg, size_t size, const ex_test_outcome *o, const void *thread);

/* No completion yet: the operation waits for something the test has not
 * done (run a manual scheduler, advance a virtual clock, request stop). */
bool ex_test_check_not_completed(char *msg, size_t size, const ex_test_outcome *o);

/* ------------------------------------------------------------- allocations */

/* The most allocators one check watches. */
#define EX_TEST_WATCH_MAX 8

/* One watched allocator and its counters when the watch began. */
typedef struct ex_test_watched {
    const ex_allocator *a;
    ex_alloc_stats begin;
} ex_test_watched;

/* A leak check over allocators' counters (ex_allocator_stats): the blocks
 * and bytes each watched allocator has given out and not yet taken back
 * are compared with what they were when the watch began.  It counts
 * blocks, so a block from before the check freed during it hides a block
 * leaked during it; LeakSanitizer and valgrind see the rest.  settle_ms
 * (public, set by begin to 2000) is how long a check that finds blocks
 * missing waits for frees still on their way (an operation state another
 * thread frees just after the completion) before it reports them. */
typedef struct ex_test_allocations {
    unsigned settle_ms;
    /* private */
    unsigned n;
    ex_test_watched watched[EX_TEST_WATCH_MAX];
    const char *problem;       /* why the check cannot be trusted */
    const char *problem_name;  /* the allocator it concerns */
} ex_test_allocations;

/* Begins a check that watches ex_default_allocator() (the one senders and
 * most operations use).  An allocator that keeps no statistics (stats
 * NULL) cannot be watched: the check then fails and says so (wrap it in
 * an ex_budget_allocator with no limit, which counts, to check it). */
void ex_test_allocations_begin(ex_test_allocations *c);

/* Also watches a, from now on (a pool's, a chain's, a task's allocator).
 * Watching one twice, or more than EX_TEST_WATCH_MAX, makes no
 * difference / fails the check with a message. */
void ex_test_allocations_watch(ex_test_allocations *c, const ex_allocator *a);

/* Whether every watched allocator has as many blocks and bytes out as
 * when its watch began (after waiting up to settle_ms for the last frees);
 * on failure msg says which allocator leaked how many blocks and bytes:
 *   "recycling" leaked 2 blocks (96 bytes) during the check (5
 *   allocations, 3 frees) */
bool ex_test_check_no_leaks(char *msg, size_t size, const ex_test_allocations *c);

#ifdef __cplusplus
}
#endif

/* ------------------------------------------------------------- assertions
 * o is a pointer to an ex_test_outcome; c to an ex_test_allocations. */

/* Runs a check with a message buffer and reports it with `report`
 * (cr_assert or cr_expect).  Not an interface. */
#define EXI_TEST_REPORT(report, check, ...)                                          \
    do {                                                                             \
        char exi_test_msg_[EX_TEST_MESSAGE_MAX];                                     \
        bool exi_test_ok_ = check(exi_test_msg_, sizeof exi_test_msg_, __VA_ARGS__); \
        report(exi_test_ok_, "%s", exi_test_msg_);                                   \
    } while (0)

#ifndef __cplusplus
#define EXI_TEST_VALUES(report, o, ...)                                                   \
    EXI_TEST_REPORT(report, ex_test_check_values, (o), (const ex_value[]){ __VA_ARGS__ }, \
                    sizeof((ex_value[]){ __VA_ARGS__ }) / sizeof(ex_value))
#else  /* no compound literals in C++: a list that lives for the check */
#define EXI_TEST_VALUES(report, o, ...) EXI_TEST_REPORT(report, exi_cxx_test_check_values, (o), { __VA_ARGS__ })
#endif

/* The first completion was set_value with exactly these datums (one
 * datum of that type for the typed forms; EX_ASSERT_VALUES takes
 * ex_value expressions, EX_ASSERT_VALUE_VOID is set_value() with none). */
#define EX_ASSERT_VALUE_INT(o, v) EXI_TEST_REPORT(cr_assert, ex_test_check_value, (o), ex_int((int64_t)(v)))
#define EX_ASSERT_VALUE_UINT(o, v) EXI_TEST_REPORT(cr_assert, ex_test_check_value, (o), ex_uint((uint64_t)(v)))
#define EX_ASSERT_VALUE_BOOL(o, v) EXI_TEST_REPORT(cr_assert, ex_test_check_value, (o), ex_bool((v) ? true : false))
#define EX_ASSERT_VALUE_PTR(o, p) EXI_TEST_REPORT(cr_assert, ex_test_check_value, (o), ex_ptr((void *)(p)))
#define EX_ASSERT_VALUE_STR(o, s) EXI_TEST_REPORT(cr_assert, ex_test_check_value, (o), ex_str(s))
#define EX_ASSERT_VALUE_DOUBLE(o, v, tolerance) \
    EXI_TEST_REPORT(cr_assert, ex_test_check_value_double, (o), (double)(v), (double)(tolerance))
#define EX_ASSERT_VALUE(o, value) EXI_TEST_REPORT(cr_assert, ex_test_check_value, (o), (value))
#define EX_ASSERT_VALUES(o, ...) EXI_TEST_VALUES(cr_assert, o, __VA_ARGS__)
#define EX_ASSERT_VALUE_VOID(o) EXI_TEST_REPORT(cr_assert, ex_test_check_value_count, (o), (size_t)0)
/* set_value with n datums, whatever they are. */
#define EX_ASSERT_VALUE_COUNT(o, n) EXI_TEST_REPORT(cr_assert, ex_test_check_value_count, (o), (size_t)(n))
/* set_error with this code (and a message containing text). */
#define EX_ASSERT_ERROR(o, code) EXI_TEST_REPORT(cr_assert, ex_test_check_error, (o), (code))
#define EX_ASSERT_ERROR_MESSAGE(o, code, text) \
    EXI_TEST_REPORT(cr_assert, ex_test_check_error_message, (o), (code), (text))
/* set_stopped. */
#define EX_ASSERT_STOPPED(o) EXI_TEST_REPORT(cr_assert, ex_test_check_stopped, (o))
/* No completion yet. */
#define EX_ASSERT_NOT_COMPLETED(o) EXI_TEST_REPORT(cr_assert, ex_test_check_not_completed, (o))
/* Exactly one completion (inline: inside ex_test_start; on: on thread). */
#define EX_ASSERT_COMPLETED_ONCE(o) EXI_TEST_REPORT(cr_assert, ex_test_check_completed_once, (o))
#define EX_ASSERT_COMPLETED_INLINE(o) EXI_TEST_REPORT(cr_assert, ex_test_check_completed_inline, (o))
#define EX_ASSERT_COMPLETED_ON(o, thread) EXI_TEST_REPORT(cr_assert, ex_test_check_completed_on, (o), (thread))
/* Nothing leaked through the allocators c watches. */
#define EX_ASSERT_NO_LEAKS(c) EXI_TEST_REPORT(cr_assert, ex_test_check_no_leaks, (c))

/* The same checks, with cr_expect: the test goes on after a failure. */
#define EX_EXPECT_VALUE_INT(o, v) EXI_TEST_REPORT(cr_expect, ex_test_check_value, (o), ex_int((int64_t)(v)))
#define EX_EXPECT_VALUE_UINT(o, v) EXI_TEST_REPORT(cr_expect, ex_test_check_value, (o), ex_uint((uint64_t)(v)))
#define EX_EXPECT_VALUE_BOOL(o, v) EXI_TEST_REPORT(cr_expect, ex_test_check_value, (o), ex_bool((v) ? true : false))
#define EX_EXPECT_VALUE_PTR(o, p) EXI_TEST_REPORT(cr_expect, ex_test_check_value, (o), ex_ptr((void *)(p)))
#define EX_EXPECT_VALUE_STR(o, s) EXI_TEST_REPORT(cr_expect, ex_test_check_value, (o), ex_str(s))
#define EX_EXPECT_VALUE_DOUBLE(o, v, tolerance) \
    EXI_TEST_REPORT(cr_expect, ex_test_check_value_double, (o), (double)(v), (double)(tolerance))
#define EX_EXPECT_VALUE(o, value) EXI_TEST_REPORT(cr_expect, ex_test_check_value, (o), (value))
#define EX_EXPECT_VALUES(o, ...) EXI_TEST_VALUES(cr_expect, o, __VA_ARGS__)
#define EX_EXPECT_VALUE_VOID(o) EXI_TEST_REPORT(cr_expect, ex_test_check_value_count, (o), (size_t)0)
#define EX_EXPECT_VALUE_COUNT(o, n) EXI_TEST_REPORT(cr_expect, ex_test_check_value_count, (o), (size_t)(n))
#define EX_EXPECT_ERROR(o, code) EXI_TEST_REPORT(cr_expect, ex_test_check_error, (o), (code))
#define EX_EXPECT_ERROR_MESSAGE(o, code, text) \
    EXI_TEST_REPORT(cr_expect, ex_test_check_error_message, (o), (code), (text))
#define EX_EXPECT_STOPPED(o) EXI_TEST_REPORT(cr_expect, ex_test_check_stopped, (o))
#define EX_EXPECT_NOT_COMPLETED(o) EXI_TEST_REPORT(cr_expect, ex_test_check_not_completed, (o))
#define EX_EXPECT_COMPLETED_ONCE(o) EXI_TEST_REPORT(cr_expect, ex_test_check_completed_once, (o))
#define EX_EXPECT_COMPLETED_INLINE(o) EXI_TEST_REPORT(cr_expect, ex_test_check_completed_inline, (o))
#define EX_EXPECT_COMPLETED_ON(o, thread) EXI_TEST_REPORT(cr_expect, ex_test_check_completed_on, (o), (thread))
#define EX_EXPECT_NO_LEAKS(c) EXI_TEST_REPORT(cr_expect, ex_test_check_no_leaks, (c))

/* Runs the statements given as arguments (commas allowed) and asserts
 * that nothing they allocated through the default allocator is still
 * out at the end (EX_ASSERT_NO_LEAKS).  To watch other allocators too,
 * use ex_test_allocations_begin and _watch with EX_ASSERT_NO_LEAKS. */
#define EX_CHECK_ALLOCATIONS(...)                       \
    do {                                                \
        ex_test_allocations exi_test_allocs_;           \
        ex_test_allocations_begin(&exi_test_allocs_);   \
        { __VA_ARGS__ }                                 \
        EX_ASSERT_NO_LEAKS(&exi_test_allocs_);          \
    } while (0)

#ifdef __cplusplus
#include <initializer_list>
/* EX_ASSERT_VALUES in C++.  Not an interface. */
static inline bool exi_cxx_test_check_values(char *msg, size_t size, const ex_test_outcome *o,
                                             std::initializer_list<ex_value> want) {
    return ex_test_check_values(msg, size, o, want.begin(), want.size());
}
#endif
#endif
