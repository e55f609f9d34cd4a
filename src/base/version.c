/* SPDX-License-Identifier: MIT */
/* version.c - the library's version, as built (cexec/version.h). */
#include <cexec/version.h>

const char *ex_version(void) { return CEXEC_VERSION_STRING; }
unsigned ex_version_number(void) { return CEXEC_VERSION_NUMBER; }
