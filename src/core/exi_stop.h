/* SPDX-License-Identifier: MIT */
/* exi_stop.h - linked stop sources for operations that hold themselves
 * alive across a request.  Internal. */
#ifndef EXI_STOP_H
#define EXI_STOP_H

#include <stdbool.h>
#include <stdint.h>

#include <cexec/stop_token.h>

/* ex_linked_stop_source_init whose links, when a parent's request reaches
 * them, call fire(l) instead of requesting stop on l: for an operation
 * that must hold itself alive across that request (a child completing
 * inside it could otherwise complete the operation and let its owner free
 * l while the request still walks l's list).  fire requests stop on
 * &l->source itself. */
ex_error exi_linked_stop_source_init_fire(ex_linked_stop_source *l, const ex_stop_token *parents, size_t n,
                                          void (*fire)(ex_linked_stop_source *l));

#endif
