/* SPDX-License-Identifier: MIT */
/* exi_stop.h - a stop request that can be counted.  Internal. */
#ifndef EXI_STOP_H
#define EXI_STOP_H

#include <stdbool.h>
#include <stdint.h>

#include <cexec/stop_token.h>

/* ex_stop_source_request_stop that counts requests: *begun (if not NULL)
 * is incremented before the stop flag can be set, *done once it is set (or
 * found set) and before any callback runs.  begun == done means no request
 * counted here is half way; anyone who saw the flag of a counted request
 * reads a begun that includes it, and anyone who reads a done that
 * includes it sees its flag.  (The fork's start check, task/.)
 * Tests widen the window with exi_stop_counted_hook (base/exi_test_hooks.h). */
bool exi_stop_source_request_stop_counted(ex_stop_source *s, uint64_t *begun, uint64_t *done);

/* ex_linked_stop_source_init whose links, when a parent's request reaches
 * them, call fire(l) instead of requesting stop on l: for an operation
 * that must hold itself alive across that request (a child completing
 * inside it could otherwise complete the operation and let its owner free
 * l while the request still walks l's list).  fire requests stop on
 * &l->source itself. */
ex_error exi_linked_stop_source_init_fire(ex_linked_stop_source *l, const ex_stop_token *parents, size_t n,
                                          void (*fire)(ex_linked_stop_source *l));

#endif
