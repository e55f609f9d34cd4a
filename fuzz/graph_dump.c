/* SPDX-License-Identifier: MIT */
/* graph_dump.c - a readable form of a decoded graph (GRAPH_VERBOSE=1, the
 * failure reports, the seed writer). */
#include "graph.h"

#include <stdio.h>

static const char *const kind_names[G_KIND_COUNT] = {
    "just", "just_error", "just_stopped", "then", "upon_error", "upon_stopped", "let_value", "let_error",
    "let_stopped", "when_all", "bulk", "split", "continues_on", "starts_on", "stop_env", "task", "spawn_future",
    "algo", "variant", "read_env", "write_env", "scope",
};
static const char *const algo_names[AO_COUNT] = {
    "inclusive_scan_i64", "exclusive_scan_i64", "reduce_i64", "inclusive_scan_f64", "exclusive_scan_f64", "reduce_f64",
    "inclusive_scan", "exclusive_scan", "reduce", "for_each_index", "transform", "transform_f64",
};
static const char *const variant_names[VK_COUNT] = { "into_variant", "stopped_as_optional", "stopped_as_error" };
static const char *const read_names[RK_COUNT] = { "get_scheduler", "get_stop_token", "get_allocator", "user" };
static const char *const then_names[TF_COUNT] = { "add", "mul", "err", "stopreq" };
static const char *const let_names[LF_COUNT] = { "just", "err", "stopped", "body", "null", "echo" };
static const char *const sched_names[GS_COUNT + 1] = { "inline", "loop", "pool", "none" };
static const char *const stop_env_names[SE_COUNT] = { "never", "fresh", "stopped" };

const char *g_kind_name(unsigned kind) { return kind < G_KIND_COUNT ? kind_names[kind] : "?"; }

static void dump_node(const g_graph *g, unsigned i, unsigned indent, const char *label) {
    const g_node *nd = &g->nodes[i];
    fprintf(stderr, "%*s%s#%u %s", (int)indent * 2, "", label, i, g_kind_name(nd->kind));
    switch (nd->kind) {
    case G_JUST:
        fprintf(stderr, "(");
        for (unsigned j = 0; j < nd->arity; j++) fprintf(stderr, "%s%lld", j ? "," : "", (long long)nd->vals[j]);
        fprintf(stderr, ")%s", nd->boxed ? " boxed" : "");
        break;
    case G_TASK:
        fprintf(stderr, "%s%s%s%s%s%s", nd->task & TK_TWICE ? " twice" : "", nd->task & TK_YIELD_BEFORE ? " yield-before" : "",
                nd->task & TK_YIELD_AFTER ? " yield-after" : "", nd->task & TK_INLINE ? " inline" : "",
                nd->task & TK_SIG ? " sig" : "", nd->task & TK_CHANGE ? " change:" : "");
        if (nd->task & TK_CHANGE) fprintf(stderr, "%s", sched_names[nd->sched]);
        if (nd->task & TK_OPTS) {
            static const unsigned stacks[4] = { 0, 32, 48, 256 };
            static const char *const sallocs[4] = { "pooled", "counting", "fault", "pooled" };
            fprintf(stderr, " stack=%uK/%s%s%s%s", stacks[nd->topt & TO_STACK_MASK], sallocs[(nd->topt >> TO_SALLOC_SHIFT) & 3],
                    nd->topt & TO_ALLOC ? " alloc=alt" : "", nd->topt & TO_ENV ? " env" : "", nd->topt & TO_CHECK ? " check-env" : "");
        }
        break;
    case G_ALGO:
        fprintf(stderr, " %s on %s n=%u%s%s%s k=%lld seed=%u", algo_names[nd->op], sched_names[nd->sched], nd->n,
                nd->aflags & AF_INPLACE ? " in-place" : "", nd->aflags & (AF_BAD_NULL | AF_BAD_OVERLAP) ? " bad-arg" : "",
                g_algo_wide(nd) ? " wide" : "", (long long)nd->k, nd->seed);
        if (nd->op >= AO_ISCAN_GEN && nd->op <= AO_REDUCE_GEN) fprintf(stderr, " size=%zu", g_algo_gsize(nd));
        if (nd->op == AO_FOR_EACH) fprintf(stderr, " grain=%u fail_at=%u", nd->agrain, nd->fail_idx);
        break;
    case G_VARIANT:
        fprintf(stderr, " %s", variant_names[nd->op]);
        if (nd->op == VK_STOPPED_AS_ERROR) fprintf(stderr, "(%d)", G_EUSER + (int)(nd->k & 15));
        break;
    case G_READ_ENV: fprintf(stderr, " %s", read_names[nd->op]); break;
    case G_WRITE_ENV:
        if (nd->op == WK_USER) fprintf(stderr, " user=%lld", (long long)nd->k);
        else if (nd->op == WK_SCHED) fprintf(stderr, " get_scheduler=%s", sched_names[nd->sched]);
        else fprintf(stderr, " get_allocator=alt");
        break;
    case G_SCOPE: {
        static const char *const stops[4] = { "", " stop-before", " stop-after", "" };
        fprintf(stderr, " %s%s%s%s", nd->op & SC_COUNTING ? "counting" : "simple",
                nd->op & SC_COUNTING ? stops[(nd->op >> SC_STOP_SHIFT) & 3] : "", nd->op & SC_CLOSE ? " close-last" : "",
                nd->op & SC_ENV ? " spawn_env" : " spawn");
        break;
    }
    case G_JUST_ERROR: fprintf(stderr, "(%d)", nd->code); break;
    case G_THEN: case G_UPON_ERROR: case G_UPON_STOPPED:
        fprintf(stderr, " fn=%s k=%lld arity=%u", then_names[nd->fn], (long long)nd->k, nd->arity);
        break;
    case G_LET_VALUE: case G_LET_ERROR: case G_LET_STOPPED:
        fprintf(stderr, " fn=%s k=%lld arity=%u", let_names[nd->fn], (long long)nd->k, nd->arity);
        break;
    case G_BULK:
        fprintf(stderr, " shape=%u fail_at=%u grain=%u code=%d", nd->shape, nd->fail_at, nd->grain,
                G_EUSER + (int)(nd->k & 15));
        break;
    case G_SPLIT: fprintf(stderr, " id=%u", nd->split_id); break;
    case G_CONTINUES_ON: case G_STARTS_ON: fprintf(stderr, " %s", sched_names[nd->sched]); break;
    case G_STOP_ENV: fprintf(stderr, " %s", stop_env_names[nd->stop_env]); break;
    default: break;
    }
    fprintf(stderr, "\n");
    if (nd->kind == G_SPLIT) {
        const g_split *s = &g->splits[nd->split_id];
        /* Print the shared child under its defining (first) consumer only. */
        unsigned first = G_MAX_NODES;
        for (unsigned j = 0; j < g->nnodes; j++)
            if (g->nodes[j].kind == G_SPLIT && g->nodes[j].split_id == nd->split_id) {
                first = j;
                break;
            }
        if (first == i) dump_node(g, s->child, indent + 1, "shared: ");
        return;
    }
    for (unsigned j = 0; j < nd->nchild; j++)
        dump_node(g, nd->child[j], indent + 1, (j == 1 && nd->kind >= G_LET_VALUE && nd->kind <= G_LET_STOPPED) ? "body: " : "");
}

void g_dump(const g_graph *g) {
    static const char *const stop_names[3] = { "none", "before", "async" };
    static const char *const fault_names[3] = { "none", "default", "env" };
    fprintf(stderr, "mode: stop=%s delay=%u runner=%s%s loop=%s fault=%s(param %u) taps=%d env_sched=%s stopreq=%d\n",
            stop_names[g->mode.stop], g->mode.stop_delay, g->mode.use_sync_wait ? "sync_wait" : "receiver", g->mode.spawn ? "(spawn)" : "",
            g->mode.loop_thread ? "thread" : "harness", fault_names[g->mode.fault], g->mode.fault_param,
            g->mode.taps, sched_names[g->mode.env_sched], g->has_stopreq);
    dump_node(g, g->root, 0, "");
}
