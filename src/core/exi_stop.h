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

#endif
