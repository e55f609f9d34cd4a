/* SPDX-License-Identifier: MIT */
/* parallel_exit.c - a program that uses the parallel scheduler and ends,
 * for the tests of what happens at exit (tests/resources/parallel_exit.c
 * runs it in a child process; so can valgrind).  Exit status 0 when what
 * the mode checks inside the process held; what only the parent can see
 * (the pool's trace, written by its shutdown; that the process ended at
 * all; leak reports at exit) the parent checks.
 *
 *   parallel_exit idle       work ran and is done: the exit handler shuts the pool down
 *   parallel_exit busy       a worker is inside an item that never returns at exit
 *   parallel_exit exit_in_item   an item of the pool calls exit()
 *   parallel_exit shutdown   ex_parallel_scheduler_shutdown, then exit
 *   parallel_exit fork       a fork() child uses the parent's parallel scheduler, then exits */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cexec/cexec.h>

static int fail(const char *what) {
    fprintf(stderr, "parallel_exit: %s\n", what);
    return 1;
}

static ex_error add_index(void *ctx, size_t i, const ex_value *v, size_t n) {
    (void)v, (void)n;
    atomic_fetch_add_explicit((atomic_ullong *)ctx, (unsigned long long)i, memory_order_relaxed);
    return ex_ok();
}

/* A schedule and a bulk on the parallel scheduler, both checked. */
static int use_it(void) {
    atomic_ullong sum = 0;
    ex_result r = ex_sync_wait(ex_bulk(ex_schedule(ex_parallel_scheduler()), EX_PAR, 1000, add_index, &sum));
    bool ok = r.disposition == EX_DISP_VALUE && sum == 999 * 1000 / 2;
    ex_result_destroy(&r);
    return ok ? 0 : fail("the bulk did not run every index once");
}

/* An item that never returns: it waits for a pipe nobody writes to. */
static int never_fd[2];
static atomic_int entered;

static void block_for_ever(ex_work *w) {
    (void)w;
    atomic_store(&entered, 1);
    char c;
    while (read(never_fd[0], &c, 1) != 0) {}
}

static int busy(void) {
    if (use_it()) return 1;
    if (pipe(never_fd)) return fail("pipe");
    static ex_work w = { NULL, block_for_ever, block_for_ever };
    if (ex_post(ex_parallel_scheduler(), &w).code) return fail("post");
    while (!atomic_load(&entered)) usleep(100);
    return 0;  /* exit with a worker inside the item */
}

static void exit_now(ex_work *w) {
    (void)w;
    exit(0);
}

static int exit_in_item(void) {
    if (use_it()) return 1;
    static ex_work w = { NULL, exit_now, exit_now };
    if (ex_post(ex_parallel_scheduler(), &w).code) return fail("post");
    for (;;) pause();  /* the item ends the process */
}

static int shutdown_then_exit(void) {
    if (use_it()) return 1;
    if (ex_parallel_scheduler_shutdown().code) return fail("shutdown");
    ex_result r = ex_sync_wait(ex_schedule(ex_parallel_scheduler()));
    bool refused = r.disposition == EX_DISP_ERROR && r.error.code == EX_ESHUTDOWN;
    ex_result_destroy(&r);
    return refused ? 0 : fail("work was not refused after shutdown");
}

/* Holds every worker of the parallel scheduler's pool inside an item that
 * waits on a pipe, so that none is inside the allocator when the process
 * forks: a lock held there at the fork stays held in the child for ever
 * (glibc's malloc and jemalloc take theirs around a fork; the sanitizers'
 * allocator of GCC 12 does not, and the child's leak check at exit then
 * waits on it).  What the child sees of the pool is the same: threads that
 * do not exist there. */
static int hold_fd[2];
static atomic_uint held;
static ex_work *hold_items;  /* one per worker */

static void hold_worker(ex_work *w) {
    (void)w;
    atomic_fetch_add(&held, 1);
    char c;
    while (read(hold_fd[0], &c, 1) < 0) {}
    atomic_fetch_sub(&held, 1);  /* done: the item may be freed */
}

static void not_held(ex_work *w) { (void)w; }

static int hold_workers(unsigned n) {
    if (!(hold_items = calloc(n, sizeof *hold_items))) return fail("out of memory");
    if (pipe(hold_fd)) return fail("pipe");
    for (unsigned i = 0; i < n; i++) {
        hold_items[i] = (ex_work){ NULL, hold_worker, not_held };
        if (ex_post(ex_parallel_scheduler(), &hold_items[i]).code) return fail("post");
    }
    while (atomic_load(&held) < n) usleep(100);
    return 0;
}

static void release_workers(unsigned n) {
    for (unsigned i = 0; i < n; i++) (void)!write(hold_fd[1], "x", 1);
    while (atomic_load(&held)) usleep(100);
    free(hold_items);
}

static int fork_child(void) {
    if (use_it()) return 1;
    unsigned n = ex_pool_size(ex_parallel_scheduler_pool());
    if (hold_workers(n)) return 1;
    pid_t pid = fork();
    if (pid != 0) release_workers(n);  /* (a failed fork too) */
    if (pid < 0) return fail("fork");
    if (pid == 0) {
        /* The parent's pool has no workers here: refused, not lost. */
        ex_result r = ex_sync_wait(ex_schedule(ex_parallel_scheduler()));
        bool refused = r.disposition == EX_DISP_ERROR && r.error.code == EX_ESHUTDOWN;
        ex_result_destroy(&r);
        exit(refused ? 0 : 3);  /* through the exit handler, which must leave the parent's pool alone */
    }
    int status;
    if (waitpid(pid, &status, 0) != pid) return fail("waitpid");
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return fail("the fork child failed");
    return use_it();
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "idle";
    if (!strcmp(mode, "idle")) return use_it();
    if (!strcmp(mode, "busy")) return busy();
    if (!strcmp(mode, "exit_in_item")) return exit_in_item();
    if (!strcmp(mode, "shutdown")) return shutdown_then_exit();
    if (!strcmp(mode, "fork")) return fork_child();
    return fail("unknown mode");
}
