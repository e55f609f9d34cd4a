/* SPDX-License-Identifier: MIT */
/* ref_sigs.c - static completion signatures of the graph's nodes (mirrors
 * cexec's documented rules), and which subtrees fail to connect for want
 * of a scheduler. */
#include "ref_private.h"

#include <string.h>

static unsigned popcount16(uint16_t m) { return (unsigned)__builtin_popcount(m); }

/* ex_sigs_add_value: at most 8 distinct signatures, else dynamic. */
static void sig_add(ssig *s, unsigned arity) {
    if (s->mask & (1u << arity)) return;
    if (popcount16(s->mask) >= 8) {
        s->dyn = true;
        return;
    }
    s->mask = (uint16_t)(s->mask | (1u << arity));
}

static ssig sig_none(void) {
    ssig s;
    memset(&s, 0, sizeof s);
    s.cs_value = s.cs_error = s.cs_stopped = CS_NONE;
    return s;
}

static uint8_t sched_flags_stop(unsigned sch) { return sch == GS_LOOP || sch == GS_POOL; }
static uint8_t sched_flags_err(unsigned sch) { return sch == GS_POOL; }

static ssig sig_invalid(void) {
    ssig s = sig_none();
    s.err = true;
    s.invalid = true;
    return s;
}

/* into_variant / stopped_as_optional / stopped_as_error (into_variant.h)
 * of a child with signatures c, behind the harness's then that turns a
 * value completion into (n, hash): two ints. */
static ssig sig_variant(const g_node *nd, ssig c) {
    ssig v = sig_none();
    switch (nd->op) {
    case VK_INTO_VARIANT:
        if (c.mask || c.dyn) v.mask = 1u << 1;  /* one tuple */
        v.err = c.err;
        v.stop = c.stop;
        v.cs_value = c.cs_value, v.cs_error = c.cs_error, v.cs_stopped = c.cs_stopped;
        break;
    case VK_STOPPED_AS_OPTIONAL:
        /* exactly one value signature with at least one datum, else EX_EINVAL */
        if (!c.dyn && (popcount16(c.mask) != 1 || c.mask == 1u)) return sig_invalid();
        v.mask = 1u << 1;
        v.err = c.err || c.dyn;
        break;
    default:
        v.mask = c.mask;
        v.dyn = c.dyn;
        v.err = c.err || c.stop;
        break;
    }
    ssig s = sig_none();
    bool calls = v.mask || v.dyn;
    if (calls) s.mask = 1u << 2;
    s.err = v.err || calls;
    s.stop = v.stop;
    s.cs_value = v.cs_value, s.cs_error = v.cs_error, s.cs_stopped = v.cs_stopped;
    return s;
}

ssig r_sig_of(const g_graph *g, unsigned i) {
    const g_node *nd = &g->nodes[i];
    ssig s = sig_none();
    ssig c = sig_none();
    bool calls;
    if (nd->kind == G_SPLIT) {
        /* ex_split connects the shared work when it is built, in an
         * environment without a scheduler: a task there that needs one
         * makes ex_split return an invalid sender. */
        c = r_sig_of(g, g->splits[nd->split_id].child);
        if (c.invalid || r_conn_fails(g, g->splits[nd->split_id].child, GS_COUNT)) return sig_invalid();
    } else if (nd->kind == G_TASK || nd->kind == G_SPAWN_FUTURE || nd->kind == G_SCOPE) {
        /* The children reach them at run time (an await, a spawn): an invalid
         * one is an EX_EINVAL completion, not an invalid builder input.  A
         * task returns its last child's values. */
        c = r_sig_of(g, nd->child[nd->kind == G_TASK ? nd->nchild - 1 : 0]);
    } else if (nd->kind != G_WHEN_ALL && nd->nchild) {
        c = r_sig_of(g, nd->child[0]);
        if (c.invalid) return sig_invalid();
    } else if (nd->kind == G_WHEN_ALL) {
        for (unsigned j = 0; j < nd->nchild; j++)
            if (r_sig_of(g, nd->child[j]).invalid) return sig_invalid();
    }
    switch (nd->kind) {
    case G_JUST: s.mask = (uint16_t)(1u << nd->arity); break;
    case G_JUST_ERROR: s.err = true; break;
    case G_JUST_STOPPED: s.stop = true; break;
    case G_THEN:
        c = r_sig_of(g, nd->child[0]);
        calls = c.mask || c.dyn;
        s.err = c.err || calls;
        s.stop = c.stop;
        if (calls) sig_add(&s, nd->arity);
        s.cs_value = c.cs_value, s.cs_error = c.cs_error, s.cs_stopped = c.cs_stopped;
        break;
    case G_UPON_ERROR:
        c = r_sig_of(g, nd->child[0]);
        s = c;
        s.invalid = false;
        calls = c.err;
        s.err = false;
        if (calls) {
            s.err = true;
            sig_add(&s, nd->arity);
        }
        break;
    case G_UPON_STOPPED:
        c = r_sig_of(g, nd->child[0]);
        s = c;
        s.invalid = false;
        calls = c.stop;
        s.stop = false;
        if (calls) {
            s.err = true;
            sig_add(&s, nd->arity);
        }
        break;
    case G_LET_VALUE:
        c = r_sig_of(g, nd->child[0]);
        calls = c.mask || c.dyn;
        s.err = c.err;
        s.stop = c.stop;
        if (calls) s.dyn = s.err = s.stop = true;
        break;
    case G_LET_ERROR:
        c = r_sig_of(g, nd->child[0]);
        s.mask = c.mask;
        s.dyn = c.dyn;
        s.stop = c.stop;
        if (c.err) s.dyn = s.err = s.stop = true;
        break;
    case G_LET_STOPPED:
        c = r_sig_of(g, nd->child[0]);
        s.mask = c.mask;
        s.dyn = c.dyn;
        s.err = c.err;
        if (c.stop) s.dyn = s.err = s.stop = true;
        break;
    case G_WHEN_ALL: {
        unsigned sum = 0;
        bool dynamic = false, can_value = true;
        s.stop = true;
        for (unsigned j = 0; j < nd->nchild; j++) {
            c = r_sig_of(g, nd->child[j]);
            if (popcount16(c.mask) > 1) goto invalid;
            s.err = s.err || c.err;
            if (c.dyn) {
                dynamic = true;
                s.err = true;
            } else if (c.mask) {
                unsigned a = (unsigned)__builtin_ctz(c.mask);
                if (sum + a > G_MAX_VALUES) goto invalid;
                sum += a;
            }
            if (!c.mask && !c.dyn) can_value = false;
        }
        if (can_value) {
            if (dynamic) s.dyn = true;
            else s.mask = (uint16_t)(1u << sum);
        }
        break;
    invalid:
        s = sig_invalid();
        break;
    }
    case G_BULK:
        c = r_sig_of(g, nd->child[0]);
        s = c;
        s.invalid = false;
        if (c.mask || c.dyn) s.err = s.stop = true;
        break;
    case G_SPLIT:
        c = r_sig_of(g, g->splits[nd->split_id].child);
        s.mask = c.mask;
        s.dyn = c.dyn;
        s.err = s.stop = true;
        break;
    case G_CONTINUES_ON:
        c = r_sig_of(g, nd->child[0]);
        s.mask = c.mask;
        s.dyn = c.dyn;
        /* An error only when keeping the values can fail: a dynamic child
         * (ints otherwise, copied flat); boxed values are tuples, which
         * the arity-only signatures here cannot tell apart. */
        s.err = c.err || sched_flags_err(nd->sched) || c.dyn || (G_BOXING && c.mask);
        s.stop = c.stop || sched_flags_stop(nd->sched);
        s.cs_value = s.cs_stopped = nd->sched;
        s.cs_error = c.cs_error;
        break;
    case G_STARTS_ON:
        c = r_sig_of(g, nd->child[0]);
        s = c;
        s.invalid = false;
        s.err = c.err || sched_flags_err(nd->sched);
        s.stop = c.stop || sched_flags_stop(nd->sched);
        break;
    case G_STOP_ENV:
        s = r_sig_of(g, nd->child[0]);
        s.invalid = false;
        break;
    case G_TASK:
        /* error and stopped always; the declared value signature, else dynamic */
        s.err = s.stop = true;
        if ((nd->task & TK_SIG) && popcount16(c.mask) == 1 && !c.dyn && !c.invalid) s.mask = c.mask;
        else s.dyn = true;
        break;
    case G_SPAWN_FUTURE:
        /* A child that cannot be started (invalid, or its connect fails in
         * the spawn's environment, which has no scheduler) makes
         * ex_spawn_future return an invalid sender; else the child's
         * signatures plus error and stopped. */
        if (c.invalid || r_conn_fails(g, nd->child[0], GS_COUNT)) return sig_invalid();
        s.err = s.stop = true;
        s.mask = c.mask;
        s.dyn = c.dyn;
        break;
    case G_ALGO:
        /* The algorithm (value, error, stopped) behind a then that turns its
         * result into one int; its attributes are hidden (see the harness). */
        if (g_algo_invalid(nd)) return sig_invalid();
        s.mask = 1u << 1;
        s.err = s.stop = true;
        break;
    case G_READ_ENV:
        /* read_env (no completion scheduler) behind a then: an int id */
        s.mask = 1u << 1;
        s.err = true;
        break;
    case G_WRITE_ENV:
        s = c;
        break;
    case G_VARIANT: s = sig_variant(nd, c); break;
    case G_SCOPE:
        /* the harness's scope sender: value(count) or the first error */
        s.mask = 1u << 1;
        s.err = true;
        break;
    default: break;
    }
    return s;
}

bool ref_single_value_sig(const g_graph *g, unsigned node) { return popcount16(r_sig_of(g, node).mask) <= 1; }

int ref_value_arity(const g_graph *g, unsigned node) {
    ssig s = r_sig_of(g, node);
    if (s.invalid || s.dyn || popcount16(s.mask) != 1) return -1;
    return __builtin_ctz(s.mask);
}

unsigned ref_launch_sched(const g_graph *g) { return g->mode.env_sched != GS_COUNT ? g->mode.env_sched : GS_LOOP; }

/* Whether connecting the node fails (EX_EINVAL) in an environment whose
 * scheduler is env (GS_COUNT: none): a task needs one unless it is
 * EX_TASK_INLINE (task.h).  Connect recurses into the children an adaptor
 * connects with itself; a let body, a task's child (awaited), a split's
 * shared work and a future's work are connected elsewhere. */
bool r_conn_fails(const g_graph *g, unsigned i, unsigned env) {
    const g_node *nd = &g->nodes[i];
    if (r_sig_of(g, i).invalid) return false;  /* an invalid sender connects, and fails at start */
    switch (nd->kind) {
    case G_TASK: return env == GS_COUNT && !(nd->task & TK_INLINE);
    case G_SPLIT: case G_SPAWN_FUTURE: case G_SCOPE: return false;
    case G_WRITE_ENV: return r_conn_fails(g, nd->child[0], nd->op == WK_SCHED ? nd->sched : env);
    case G_STARTS_ON: return r_conn_fails(g, nd->child[0], nd->sched);
    case G_WHEN_ALL:
        for (unsigned j = 0; j < nd->nchild; j++)
            if (r_conn_fails(g, nd->child[j], env)) return true;
        return false;
    default: return nd->nchild && r_conn_fails(g, nd->child[0], env);
    }
}
