/* SPDX-License-Identifier: MIT */
/* cexec/error.h - errors that own a formatted message or a payload.
 *
 * ex_err("static text") is enough for most errors.  When the message must
 * say which request, which shard, which file, or the error must carry data
 * to whoever handles it, make the error with ex_error_format or
 * ex_error_with_payload: it owns its message and payload through a counted
 * box, freed (and the payload's destroy function run) when the last
 * reference goes.
 *
 * The rule: an ex_error is passed like a sender.
 *   - Whoever is given an error owns one reference to it, and either passes
 *     it on or releases it with ex_error_release.  "Given" means: a
 *     receiver's set_error, the error argument of an upon_error or
 *     let_error function or of ex_task_handlers.on_error, the error of an
 *     ex_await_result, of an ex_result (ex_result_destroy releases it) and
 *     the error an ex_error_* maker returns.
 *   - A function or callback that returns an error hands its reference
 *     over: a then function that returns ex_error_format(...) leaks
 *     nothing, an upon_error function may return the error it was given.
 *   - Functions that take an error take the reference: ex_just_error,
 *     ex_stopped_as_error, ex_task_with_error, ex_set_error.  To keep an
 *     error you were given and also pass it on, take another reference with
 *     ex_error_retain first.
 * cexec follows the rule inside: when_all keeps the first error and
 * releases the others, split and the scopes take one reference per
 * consumer, and so on; no error is lost or freed twice.
 *
 * Errors made by ex_ok, ex_err and ex_err_data own nothing: retaining and
 * releasing them does nothing, so code that follows the rule works with
 * every error, and code that never makes an owned error need not call
 * either function.  Breaking the rule the safe way (not releasing) leaks
 * the box, which LeakSanitizer and valgrind report at the ex_error_format
 * call; releasing twice is a use after free, which debug mode
 * (cexec/debug.h) catches and reports.
 *
 * The box comes from the process default allocator (ex_default_allocator)
 * and may be released on any thread.  Retain and release are one atomic
 * operation each. */
#ifndef CEXEC_ERROR_H
#define CEXEC_ERROR_H

#include <stdarg.h>
#include <cexec/types.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__) || defined(__clang__)
#define EXI_PRINTF_LIKE(f, a) __attribute__((format(printf, f, a)))
#else
#define EXI_PRINTF_LIKE(f, a)
#endif

/* The longest message an owned error keeps, in bytes with its NUL; a
 * longer one is cut and ends in "...". */
#define EX_ERROR_MSG_MAX 4096

/* An error with code `code` that owns its message, formatted from fmt like
 * printf (NULL fmt: the message "(no message)").  The caller owns the
 * returned error.  code must not be EX_OK: the result is then an EX_EINVAL
 * error that says so.  If the box cannot be allocated, the error keeps
 * `code` and gets a static message saying the text was lost for want of
 * memory, so the code a program tests is never replaced. */
ex_error ex_error_format(int code, const char *fmt, ...) EXI_PRINTF_LIKE(2, 3);

/* ex_error_format with a va_list. */
ex_error ex_error_vformat(int code, const char *fmt, va_list ap) EXI_PRINTF_LIKE(2, 0);

/* An error that owns `data` as its payload (e.data) and a formatted
 * message (as ex_error_format).  destroy(data) runs once, on the thread
 * that releases the last reference; destroy may be NULL (data is then
 * only carried, e.g. a pointer into static storage).  On failure (no
 * memory, or code EX_OK) destroy(data) runs at once and the error has no
 * payload (e.data NULL) and a static message saying why, so the payload
 * never leaks. */
ex_error ex_error_with_payload(int code, void *data, void (*destroy)(void *data), const char *fmt, ...)
    EXI_PRINTF_LIKE(4, 5);

/* Takes another reference to e's box and returns e.  Does nothing for an
 * error that owns nothing. */
ex_error ex_error_retain(ex_error e);

/* Drops a reference; the last one runs the payload's destroy and frees the
 * box.  Does nothing for an error that owns nothing. */
void ex_error_release(ex_error e);

/* Whether e owns a box (made by ex_error_format or ex_error_with_payload). */
static inline bool ex_error_is_owned(ex_error e) { return e.box != 0; }

#ifdef __cplusplus
}
#endif
#endif
