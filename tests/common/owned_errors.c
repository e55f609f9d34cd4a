/* SPDX-License-Identifier: MIT */
/* owned_errors.c - counted owned errors (owned_errors.h). */
#include <criterion/criterion.h>

#include "common/owned_errors.h"
#include "common/receivers.h"
#include "common/test_alloc.h"

atomic_int owned_made, owned_destroyed;
_Atomic(const void *) owned_destroyed_on;

void owned_errors_reset(void) {
    atomic_store(&owned_made, 0);
    atomic_store(&owned_destroyed, 0);
    atomic_store(&owned_destroyed_on, NULL);
}

void owned_payload_destroy(void *data) {
    owned_payload *p = data;
    atomic_fetch_add(&owned_destroyed, 1);
    atomic_store(&owned_destroyed_on, test_thread_id());
    ex_deallocate(&test_allocator, p, sizeof *p, _Alignof(owned_payload));
}

owned_payload *owned_payload_new(int id) {
    owned_payload *p = ex_allocate(&test_allocator, sizeof *p, _Alignof(owned_payload));
    cr_assert_not_null(p, "no memory for a test payload");
    p->id = id;
    atomic_fetch_add(&owned_made, 1);
    return p;
}

ex_error owned_error(int id) {
    return ex_error_with_payload(EX_EUSER + 1, owned_payload_new(id), owned_payload_destroy, "owned error %d", id);
}

int owned_error_id(ex_error e) {
    cr_assert(ex_error_is_owned(e), "the error (%d, %s) owns nothing", e.code, e.msg ? e.msg : "");
    cr_assert_not_null(e.data, "the owned error has no payload");
    return ((const owned_payload *)e.data)->id;
}

void expect_owned_all_released(int made) {
    cr_assert_eq(atomic_load(&owned_made), made, "%d payloads made, expected %d", atomic_load(&owned_made), made);
    cr_assert_eq(atomic_load(&owned_destroyed), made, "%d of %d payloads destroyed", atomic_load(&owned_destroyed),
                 made);
    expect_no_leaks();
}
