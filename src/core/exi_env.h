/* exi_env.h - environment queries for nodes that change scheduler.
 * Internal. */
#ifndef EXI_ENV_H
#define EXI_ENV_H

#include <cexec/cexec.h>

/* The allocator an environment gives work that runs on `sch` (NULL: the
 * environment's own scheduler): its allocator key, else sch's default, else
 * the process default.  For nodes that cache the answer for a child whose
 * scheduler they change. */
const ex_allocator *exi_allocator_under(ex_env e, const ex_scheduler *sch);

#endif
