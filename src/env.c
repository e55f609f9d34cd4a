/* env.c - standard keys, queries and the one/two-key environment node. */
#include "exi_core.h"

const ex_key ex_key_get_scheduler = { "get_scheduler", true };
const ex_key ex_key_get_delegation_scheduler = { "get_delegation_scheduler", true };
const ex_key ex_key_get_stop_token = { "get_stop_token", true };
const ex_key ex_key_get_allocator = { "get_allocator", true };
const ex_key ex_key_completion_scheduler_value = { "get_completion_scheduler<set_value>", true };
const ex_key ex_key_completion_scheduler_error = { "get_completion_scheduler<set_error>", true };
const ex_key ex_key_completion_scheduler_stopped = { "get_completion_scheduler<set_stopped>", true };

bool ex_env_query(ex_env e, const ex_key *key, ex_value *out) {
    if (!e.node || !key) return false;
    if ((e.flags & EX_ENV_FORWARD_ONLY) && !key->forwarding) return false;
    return e.node->query(e.node, key, out);
}

static bool query_typed(ex_env e, const ex_key *key, ex_type type, ex_value *out) {
    return ex_env_query(e, key, out) && out->type == type;
}

bool ex_get_scheduler(ex_env e, ex_scheduler *out) {
    ex_value v;
    if (!query_typed(e, &ex_key_get_scheduler, EX_T_SCHED, &v)) return false;
    *out = v.as.sched;
    return true;
}

bool ex_get_delegation_scheduler(ex_env e, ex_scheduler *out) {
    ex_value v;
    if (!query_typed(e, &ex_key_get_delegation_scheduler, EX_T_SCHED, &v)) return false;
    *out = v.as.sched;
    return true;
}

ex_stop_token ex_get_stop_token(ex_env e) {
    ex_value v;
    if (!query_typed(e, &ex_key_get_stop_token, EX_T_TOKEN, &v)) return ex_never_stop_token();
    return v.as.token;
}

const ex_allocator *exi_allocator_under(ex_env e, const ex_scheduler *sch) {
    ex_value v;
    if (query_typed(e, &ex_key_get_allocator, EX_T_ALLOC, &v) && v.as.alloc) return v.as.alloc;
    ex_scheduler own;
    if (!sch && ex_get_scheduler(e, &own)) sch = &own;
    if (sch && sch->vt && sch->vt->allocator) {
        const ex_allocator *a = sch->vt->allocator(sch->self);
        if (a) return a;
    }
    return ex_default_allocator();
}

const ex_allocator *ex_get_allocator(ex_env e) { return exi_allocator_under(e, NULL); }

static bool pair_query(const ex_env_node *n, const ex_key *key, ex_value *out) {
    const ex_env_pair *p = (const ex_env_pair *)(const void *)n;
    if (key == p->key) { *out = p->value; return true; }
    if (p->key2 && key == p->key2) { *out = p->value2; return true; }
    return ex_env_query(p->parent, key, out);
}

void ex_env_pair_init(ex_env_pair *p, const ex_key *key, ex_value value, ex_env parent) {
    p->node.query = pair_query;
    p->key = key;
    p->value = value;
    p->key2 = NULL;
    p->value2 = ex_none();
    p->parent = parent;
}

static EXI_TLS char thread_marker;

const void *exi_thread_id(void) { return &thread_marker; }
