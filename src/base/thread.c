/* SPDX-License-Identifier: MIT */
/* thread.c - the calling thread's identity (exi_thread.h). */
#include "base/exi_macros.h"
#include "base/exi_thread.h"

static EXI_TLS char thread_marker;

const void *exi_thread_id(void) { return &thread_marker; }
