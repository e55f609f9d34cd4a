/* SPDX-License-Identifier: MIT */
/* ref_interp.h - a small reference interpreter of the fuzzer's sender
 * graphs: for the whole graph and for every node, the SET of outcomes
 * P2300 (and cexec's documented C choices) allow, given what the harness
 * did (stop requests, allocation failures). */
#ifndef FUZZ_REF_INTERP_H
#define FUZZ_REF_INTERP_H

#include "graph.h"

enum { R_VALUE = 1, R_ERROR, R_STOPPED };

typedef struct r_out {
    uint8_t disp;      /* R_VALUE / R_ERROR / R_STOPPED */
    uint8_t n;         /* values */
    uint8_t top_req;   /* the run definitely requested stop on the top source before this completion */
    int32_t code;      /* R_ERROR */
    int64_t v[G_MAX_VALUES];
} r_out;

#define R_SET_MAX 40

typedef struct r_set {
    uint16_t n;
    bool any;          /* too many outcomes to list: anything goes */
    bool sync;         /* every completion happens inside start, on the starting thread */
    r_out o[R_SET_MAX];
} r_set;

/* Stop state of the token a node sees, over the node's lifetime. */
typedef enum r_stop { RS_NEVER, RS_ALWAYS, RS_RACE } r_stop;

typedef struct r_result {
    r_set top;                       /* outcome of the whole run */
    r_set node[G_MAX_NODES];         /* outcomes each node may complete with */
    bool reached[G_MAX_NODES];       /* the node may be started at all */
} r_result;

/* What the run was like. */
typedef struct r_params {
    bool oom;   /* some allocation failed: EX_ENOMEM may appear at any node */
} r_params;

/* Computes the allowed outcomes.  res is large: allocate it. */
void ref_run(const g_graph *g, const r_params *p, r_result *res);

bool r_set_contains(const r_set *s, const r_out *o);
void r_out_format(const r_out *o, char *buf, size_t size);
void r_set_dump(const char *label, const r_set *s);

/* Static completion signatures of a node (mirrors cexec's documented
 * rules): whether ex_sync_wait would accept it (at most one value
 * signature). */
bool ref_single_value_sig(const g_graph *g, unsigned node);

/* The arity of the node's only static value signature, or -1 (none,
 * several, dynamic, or an invalid sender). */
int ref_value_arity(const g_graph *g, unsigned node);

/* The scheduler a task root is launched on in spawn mode (g_sched). */
unsigned ref_launch_sched(const g_graph *g);

#endif
