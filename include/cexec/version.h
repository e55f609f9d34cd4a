/* SPDX-License-Identifier: MIT */
/* cexec/version.h - the version of these headers and of the library.
 *
 * The macros give the version a program was compiled against; ex_version
 * and ex_version_number the version of the library it runs with (a shared
 * library may be newer).  docs/abi.md has the ABI and soname policy. */
#ifndef CEXEC_VERSION_H
#define CEXEC_VERSION_H

#define CEXEC_VERSION_MAJOR 0
#define CEXEC_VERSION_MINOR 1
#define CEXEC_VERSION_PATCH 0
/* "MAJOR.MINOR.PATCH" */
#define CEXEC_VERSION_STRING "0.1.0"
/* MAJOR * 10000 + MINOR * 100 + PATCH: compare with < and >=. */
#define CEXEC_VERSION_NUMBER (CEXEC_VERSION_MAJOR * 10000 + CEXEC_VERSION_MINOR * 100 + CEXEC_VERSION_PATCH)

#ifdef __cplusplus
extern "C" {
#endif

/* The running library's version, as CEXEC_VERSION_STRING (static storage). */
const char *ex_version(void);
/* The running library's version, as CEXEC_VERSION_NUMBER. */
unsigned ex_version_number(void);

#ifdef __cplusplus
}
#endif

#endif
