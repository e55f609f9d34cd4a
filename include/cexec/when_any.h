/* SPDX-License-Identifier: MIT */
/* cexec/when_any.h - races: when_any (the first completion wins) and
 * stop_when (a sender stopped when a trigger completes).
 *
 * Both start every child with a stop token of the operation's own
 * in-place stop source, linked to the receiver's token (a stop request
 * from outside reaches every child), and complete only once every child
 * has completed: nothing they started outlives them.  The result is kept
 * in the operation until then: values are copied (tuples with the
 * environment's allocator: EX_ENOMEM on failure), the winner's error is
 * kept and passed on, the losers' and the trigger's are released
 * (cexec/error.h).  The
 * race completes on the agent of the last child to complete (or of a
 * stop request that child completed inside).  Nothing allocates unless a
 * kept value holds tuples.  No completion scheduler. */
#ifndef CEXEC_WHEN_ANY_H
#define CEXEC_WHEN_ANY_H

#include <cexec/types.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Starts the n children (n >= 1) and completes with the first completion
 * of any of them, value, error or stopped (the winner); stop is then
 * requested on the others and the operation waits for them, discarding
 * their results.  If stop was requested on the receiver's token before
 * start, no child is started and the result is set_stopped; a request
 * during the race is forwarded to every child, and the result is still
 * the first completion (a child that ignores the request may win with a
 * value).  Signatures: the union of the children's value signatures
 * (duplicates once; more than EX_MAX_VALUE_SIGS make them dynamic),
 * set_error if any child may fail or keeping the values may (tuples, or
 * signatures known only at run time), set_stopped always.  Takes
 * ownership of the children; n == 0, a NULL array or a NULL child: an
 * invalid sender (EX_EINVAL), every child given released. */
ex_sender *ex_when_any_n(ex_sender *const *children, size_t n);

/* ex_when_any(a, b, ...) */
#ifndef __cplusplus
#define ex_when_any(...) \
    ex_when_any_n((ex_sender *const[]){ __VA_ARGS__ }, sizeof((ex_sender *[]){ __VA_ARGS__ }) / sizeof(ex_sender *))
#else  /* no compound literals in C++ */
#define ex_when_any(...) exi_cxx_when_any({ __VA_ARGS__ })
#endif

/* Runs sender and trigger together: when trigger completes, in any way,
 * stop is requested on sender; when sender completes, stop is requested
 * on trigger.  Completes with sender's completion once both have
 * completed; trigger's values and error are discarded.  A stop request on
 * the receiver's token reaches both (one made before start too: both
 * start, with their token stopped).  Signatures: sender's, plus set_error
 * when keeping its values may fail (as ex_when_any).  A trigger that
 * never completes holds the operation until sender completes and the
 * stop request that follows ends it; a trigger that ignores stop
 * requests holds it for good.  Takes both; a NULL one: an invalid sender
 * (EX_EINVAL), the other released. */
ex_sender *ex_stop_when(ex_sender *sender, ex_sender *trigger);

#ifdef __cplusplus
}
#endif

#ifdef __cplusplus
#include <initializer_list>
static inline ex_sender *exi_cxx_when_any(std::initializer_list<ex_sender *> c) { return ex_when_any_n(c.begin(), c.size()); }
#endif
#endif
