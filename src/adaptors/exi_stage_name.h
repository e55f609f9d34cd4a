/* SPDX-License-Identifier: MIT */
/* exi_stage_name.h - the name a stage of this layer was given (ex_then_named,
 * ex_let_value_named, the C macros that name a stage after its function),
 * for messages of adaptors that wrap it (ex_timeout).  Internal. */
#ifndef EXI_STAGE_NAME_H
#define EXI_STAGE_NAME_H

#include <cexec/cexec.h>

/* s's stage name if s is a then / upon_error / upon_stopped sender with
 * one, else NULL.  (Its builder is s->vt->name.) */
const char *exi_then_stage_name(const ex_sender *s);

/* s's stage name if s is a let_value / let_error / let_stopped sender
 * (borrowed or not) with one, else NULL.  (Its builder is s->vt->name.) */
const char *exi_let_stage_name(const ex_sender *s);

#endif
