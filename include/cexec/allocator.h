/* cexec/allocator.h - the pluggable frame allocator interface.
 *
 * Every allocation cexec makes goes through an ex_allocator: senders use the
 * process default (ex_default_allocator), running operations use the one
 * their environment answers for ex_key_get_allocator (falling back to the
 * default).  A failed allocation becomes EX_ENOMEM on the error channel. */
#ifndef CEXEC_ALLOCATOR_H
#define CEXEC_ALLOCATOR_H

#include <cexec/types.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ex_allocator {
    /* Returns size bytes aligned to align (a power of two), or NULL. */
    void *(*allocate)(void *ctx, size_t size, size_t align);
    /* Frees a block from allocate with the same size and align. p != NULL. */
    void (*deallocate)(void *ctx, void *p, size_t size, size_t align);
    void *ctx;
    const char *name;
} ex_allocator;

/* The libc allocator (malloc / aligned_alloc).  Thread-safe. */
const ex_allocator *ex_libc_allocator(void);

/* The allocator used for senders and for operations whose environment has
 * none.  Initially ex_libc_allocator().  ex_set_default_allocator(NULL)
 * restores libc.  Set it before building senders: a sender remembers the
 * allocator that made it and frees itself through that one. */
const ex_allocator *ex_default_allocator(void);
void ex_set_default_allocator(const ex_allocator *a);

/* Convenience wrappers; ex_allocate returns NULL on failure. */
void *ex_allocate(const ex_allocator *a, size_t size, size_t align);
void ex_deallocate(const ex_allocator *a, void *p, size_t size, size_t align);

#ifdef __cplusplus
}
#endif
#endif
