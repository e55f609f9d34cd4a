/* SPDX-License-Identifier: MIT */
/* exi_outcome.h - what an ex_test_outcome recorded, as the checks' messages
 * say it.  Internal. */
#ifndef EXI_OUTCOME_H
#define EXI_OUTCOME_H

#include <cexec/testing.h>

#include "testing/exi_test_text.h"

/* "has not completed", "completed with value int 42", "failed to connect:
 * error ...", "completed 2 times (value int 42, then set_stopped)", "was
 * misused (...)": what o recorded, without its name. */
void exi_test_describe(exi_text *t, const ex_test_outcome *o);

/* Whether o completed exactly once, was recorded and not misused: the
 * condition every check of a completion starts from. */
bool exi_test_completed_once(const ex_test_outcome *o);

#endif
