/* SPDX-License-Identifier: MIT */
/* exi_bulk.h - what other compose/ files may know of a bulk sender.
 * Internal. */
#ifndef EXI_BULK_H
#define EXI_BULK_H

#include <cexec/cexec.h>

/* Whether s is a bulk, bulk_grain, bulk_chunked or bulk_unchunked sender;
 * if so *builder is which ("ex_bulk_grain") and *name its stage name (the
 * _named forms, the C macros) or NULL: for messages of adaptors that wrap
 * it (ex_timeout). */
bool exi_bulk_stage(const ex_sender *s, const char **builder, const char **name);

#endif
