/* SPDX-License-Identifier: MIT */
/* cexec/transfer.h - the former name of <cexec/on.h> (named after P2300's
 * removed `transfer`); kept so that existing includes still build. */
#include <cexec/on.h>
