#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# valgrind memcheck over every example of `make run-examples` and a selection
# of Criterion suites.  Fails (exit 1) on any memcheck error, any definitely
# or indirectly lost byte, a log without its ERROR SUMMARY, a failing or
# crashing test, a suite that ran no test, or an example that failed.
#
#   scripts/valgrind.sh                          (or: make valgrind)
#   VG_SUITES="exec_pool exec_split" scripts/valgrind.sh    other suites; "all" for every suite
#   VG_JOBS=1 scripts/valgrind.sh                Criterion jobs (default 2)
#   VG_EXAMPLES="fib retry" scripts/valgrind.sh  other examples (default: RUN_EXAMPLES of the Makefile)
#
# Build: build-vg/, -O1 -g, with the jemalloc allocator routed to malloc/free
# (CEXEC_JEMALLOC=malloc): valgrind replaces malloc but cannot see the
# private jemalloc copy's mallocx.  Logs: build-vg/valgrind/<run>/<pid>.log,
# program output beside them in build-vg/valgrind/<run>.out.
#
# Criterion runs every test in its own process: BoxFort forks, and the child
# execs the test binary again (readlink of /proc/self/exe, argv[0]
# "boxfort-worker"; it finds its test through a bxfi_<pid> shared-memory
# map).  --trace-children=yes puts that child under valgrind too, and %p
# gives it its own log (the fork and the exec keep the pid, so the exec'd
# valgrind truncates the fork's log).  valgrind's errors in a test process
# do not change Criterion's exit status: the logs are what decides.  A child
# log names its test only through its stack traces (<suite>_<test>_impl).
#
# --fair-sched=yes: valgrind runs one thread at a time; with its default
# lock a thread that yields (the pool's spinning workers, sync_wait's
# sched_yield loop) can take the lock straight back and starve the thread
# it waits for.  exec_pool's ten_thousand_sync_waits_from_main and
# small_batches_from_main_are_never_stranded take 13-16 s that way, against
# a 20 s suite timeout (both timed out in a run on a loaded machine), and
# 2-4 s with the FIFO ticket lock of --fair-sched=yes.  The slowest test was
# then frame_allocators' zero_allocations_in_steady_state_on_a_pool
# (100,000 runs of a pipeline on a pool): 12-15 s against 30 s; it timed
# out once with the default lock on a machine with a load of 10, and once
# (2026-11-21) on an idle but slow host, so under valgrind it now runs a
# fifth of its runs (RUNNING_ON_VALGRIND).
# Criterion's --timeout cannot give more time: in 2.4.1 it only lowers a
# suite's timeout.
set -euo pipefail
cd "$(dirname "$0")/.."

now_ms() { date +%s%3N; }
START_MS=$(now_ms)

BUILD=build-vg
OUT=$BUILD/valgrind
TESTS_BIN=$BUILD/tests/cexec_tests
JOBS=${VG_JOBS:-2}
EXAMPLE_TIMEOUT=${VG_EXAMPLE_TIMEOUT:-600}   # seconds per example
SUITE_TIMEOUT=${VG_SUITE_TIMEOUT:-1800}      # seconds per suite (each test also has its suite's timeout)

# The default selection: every component (src/*.c) of the library runs
# under memcheck, with 98.7% of the lines that all the suites and examples
# reach (gcov, measured per suite), in about 5 minutes on 2 idle cores
# (about 620 CPU seconds of memcheck; every suite, about 1050).  A test
# costs about 1 CPU second of valgrind start-up and leak check on top of its
# run, so the suites left out add least for their cost: algo_scan and
# algo_loops (slow tile-boundary sweeps; the scan, for_each and transform
# paths run in the inclusive_scan and algorithms examples and share the
# tiled and kernel code with algo_reduce), exec_then, exec_env,
# exec_run_loop, exec_sync_wait and exec_just (single-threaded paths that
# the rest reaches too).  VG_SUITES=all runs every suite.
DEFAULT_SUITES="
    alloc_caches        frame_allocators    jemalloc_allocator  oom_sweep
    stop_forwarding     stoptoken_inplace   exec_sender         exec_into_variant
    exec_let            exec_transfer       exec_when_all       exec_split
    exec_scope          exec_bulk           exec_pool           exec_pool_lend
    exec_strand         exec_context        exec_task           exec_task_nesting
    exec_task_fork      algo_reduce         timers              virtual_clock
    sync_wait_timers    parallel_scheduler_exit"
# alloc_caches        per-thread caches of the recycling / jemalloc allocators, cross-thread frees
# frame_allocators    libc, budget, monotonic, fault, recycling allocators; allocator lookup; OOM sweeps
# jemalloc_allocator  the jemalloc allocator (here on malloc), per-worker arenas of a pool
# oom_sweep           allocation k failing for every k, across the pipeline kinds
# stop_forwarding     operations and shared states freed inside their own stop request
# stoptoken_inplace   in-place stop source, tokens and callbacks, concurrent requests
# exec_sender         connect, operation states, sender lifetime, bad input
# exec_into_variant   into_variant, stopped_as_*, sync_wait_with_variant
# exec_let            let_value / let_error / let_stopped
# exec_transfer       starts_on, continues_on, schedule_from, on
# exec_when_all       when_all(_with_variant), stop racing with completion on a pool
# exec_split          split: one shared run, consumers on several threads
# exec_scope          counting scopes, spawn, spawn_future, join
# exec_bulk           bulk, bulk_chunked, the pool's parallel bulk and its helpers
# exec_pool           pool: deques, inbox, parking, post/dispatch, shutdown, stats, trace
# exec_pool_lend      lent callers: the quiet first item, the bound, hand-over, shutdown and destroy races
# exec_strand         strands: serialised execution on a pool
# exec_context        context switch, fibers and their stacks
# exec_task           coroutine tasks: awaits, affinity, stop, launch, stacks
# exec_task_nesting   tasks running on their parent's stack: suspending, migrating, stop inside, hops back
# exec_task_fork      a when_all of tasks awaited as a fork: order, errors, stops (lazily linked), stealing
# algo_reduce         reductions on every scheduler: tiled runs and kernels
# timers              the timer heap and service on the pool, run loop and context: cancel, shutdown, 100,000 timers
# virtual_clock       virtual clocks: advances, pools and run loops on one, allocation failure
# sync_wait_timers    the clock of sync_wait's own loop: cross-thread arms and cancels, the wait's end
# parallel_scheduler_exit  a program on the parallel scheduler ending idle, busy, by exit()
#                     from an item, after a shutdown, with a fork child: each child process
#                     under memcheck too (5 tests, ~12 s; a thread left running at exit
#                     shows as "possibly lost", which the check does not count)
# Left to the examples for CI's time (about 21 s each on 2 cores):
# exec_timeout (deadline_service runs timeouts that fire and that lose)
# and manual_scheduler (its example runs the queue, stops and timers);
# both run in full under ASan and their races under TSan.
# The examples add just, then, run_loop, single_thread_context, the scans,
# for_each_index and transform, fib on the pool, a user-written adaptor and
# the coroutine task (task_hello, task_pipeline).

# Tests left out, as "suite/test", each with its reason.  Empty: with
# --fair-sched=yes every test of every suite passes under memcheck.  Only a
# test that cannot pass under valgrind for a reason that is not a bug in
# cexec belongs here.
EXCLUDE=(
)

# shellcheck disable=SC2054  # the commas are inside one option
VG=(valgrind --tool=memcheck --error-exitcode=99 --leak-check=full
    --errors-for-leak-kinds=definite,indirect --track-origins=no
    --fair-sched=yes --num-callers=30)

# ------------------------------------------------------------------- build
if [ -n "${VG_EXAMPLES:-}" ]; then
    EXAMPLES=$VG_EXAMPLES
else
    EXAMPLES=$(sed -n 's/^RUN_EXAMPLES[[:space:]]*:=[[:space:]]*//p' Makefile)
fi
[ -n "$EXAMPLES" ] || { echo "valgrind.sh: no examples (RUN_EXAMPLES not found in the Makefile)" >&2; exit 1; }

targets=("$TESTS_BIN")
for e in $EXAMPLES; do targets+=("$BUILD/examples/$e"); done
echo "== build ($BUILD: OPT=\"-O1 -g\", CEXEC_JEMALLOC=malloc)"
make -j"${VG_MAKE_JOBS:-2}" BUILD="$BUILD" CEXEC_JEMALLOC=malloc OPT="-O1 -g" "${targets[@]}"

# The build runs scripts/deps.sh, which installs valgrind (as root).
if ! command -v valgrind >/dev/null 2>&1; then
    echo "valgrind.sh: valgrind not found (scripts/deps.sh installs it; as root, or:" >&2
    echo "    sudo apt-get update && sudo apt-get install -y valgrind)" >&2
    exit 1
fi

all_suites=$("$TESTS_BIN" --list 2>&1 | sed -n 's/^\([A-Za-z0-9_]*\): [0-9]* tests*$/\1/p')
case "${VG_SUITES:-}" in
    "") SUITES=$DEFAULT_SUITES ;;
    all) SUITES=$all_suites ;;
    *) SUITES=$VG_SUITES ;;
esac
for s in $SUITES; do
    if ! grep -qx "$s" <<<"$all_suites"; then
        echo "valgrind.sh: no suite named $s in $TESTS_BIN (--list shows: $(tr '\n' ' ' <<<"$all_suites"))" >&2
        exit 1
    fi
done

rm -rf "$OUT"
mkdir -p "$OUT"

# ------------------------------------------------------------ log checking
total_errors=0      # sum of ERROR SUMMARY counts
total_procs=0       # valgrind logs read
failures=0          # runs with any problem
run_errors=0
run_procs=0
run_problems=""

# Number in "<label>: 1,234 bytes" of a log (0 if the line is absent).
lost_bytes() {
    local n
    n=$(sed -n "s/.*$1: \([0-9,]*\) bytes.*/\1/p" "$2" | head -n 1 | tr -d ,)
    echo "${n:-0}"
}

# Reads every log of a run directory; counts processes and errors; prints
# each offending log.
check_logs() {
    local dir=$1 log n def ind bad what
    run_errors=0
    run_procs=0
    for log in "$dir"/*.log; do
        [ -e "$log" ] || continue
        run_procs=$((run_procs + 1))
        bad=""
        n=$(sed -n 's/^==[0-9]*== ERROR SUMMARY: \([0-9,]*\) errors.*/\1/p' "$log" | tail -n 1 | tr -d ,)
        if [ -z "$n" ]; then
            bad="no ERROR SUMMARY (the process was killed: timeout or crash)"
        else
            run_errors=$((run_errors + n))
            [ "$n" -eq 0 ] || bad="$n error(s)"
        fi
        def=$(lost_bytes "definitely lost" "$log")
        ind=$(lost_bytes "indirectly lost" "$log")
        if [ "$def" -gt 0 ] || [ "$ind" -gt 0 ]; then
            bad="${bad:+$bad, }definitely lost $def B, indirectly lost $ind B"
        fi
        if [ -n "$bad" ]; then
            # A test process names its test only through its stack traces.
            what=$(grep -o '[A-Za-z0-9_]*_impl\b' "$log" | head -n 1 || true)
            run_problems="${run_problems:+$run_problems; }$(basename "$log"): $bad"
            echo "---- $log${what:+ ($what)}: $bad"
            cat "$log"
            echo "---- end of $log"
        fi
    done
    total_errors=$((total_errors + run_errors))
    total_procs=$((total_procs + run_procs))
}

num() { sed -n "s/.*$1: \([0-9]*\).*/\1/p" <<<"$synth"; }   # a field of the Synthesis line

report() {   # report <name> <details> <ms>
    local status=ok
    if [ -n "$run_problems" ]; then
        status=FAIL
        failures=$((failures + 1))
    fi
    printf '%-4s %-28s %s; %d process(es), %d error(s); %d.%d s\n' "$status" "$1" "$2" \
        "$run_procs" "$run_errors" $(($3 / 1000)) $(($3 % 1000 / 100))
    [ -z "$run_problems" ] || echo "     $run_problems"
}

# ---------------------------------------------------------------- examples
programs=0
echo "== examples under memcheck"
for e in $EXAMPLES; do
    dir=$OUT/examples/$e
    mkdir -p "$dir"
    t0=$(now_ms)
    rc=0
    timeout "$EXAMPLE_TIMEOUT" "${VG[@]}" --log-file="$dir/%p.log" "$BUILD/examples/$e" \
        >"$dir.out" 2>&1 || rc=$?
    t1=$(now_ms)
    programs=$((programs + 1))
    run_problems=""
    check_logs "$dir"
    case $rc in
        0) ;;
        99) [ -n "$run_problems" ] || run_problems="valgrind exit status 99 but no error in the log" ;;
        124) run_problems="${run_problems:+$run_problems; }timed out after $EXAMPLE_TIMEOUT s" ;;
        *) run_problems="${run_problems:+$run_problems; }exit status $rc"
           echo "---- output of $e ($dir.out)"; tail -n 40 "$dir.out" ;;
    esac
    [ "$run_procs" -gt 0 ] || run_problems="${run_problems:+$run_problems; }no valgrind log"
    report "examples/$e" "exit $rc" $((t1 - t0))
done

# ------------------------------------------------------------------ suites
tests_run=0
suites_run=0
echo "== Criterion suites under memcheck (--trace-children=yes, --jobs $JOBS)"
for s in $SUITES; do
    skip=()
    for x in ${EXCLUDE[@]+"${EXCLUDE[@]}"}; do
        [ "${x%%/*}" != "$s" ] || skip+=("${x#*/}")
    done
    if [ ${#skip[@]} -gt 0 ]; then
        filter="$s/!($(IFS='|'; echo "${skip[*]}"))"
    else
        filter="$s/*"
    fi
    dir=$OUT/tests/$s
    mkdir -p "$dir"
    t0=$(now_ms)
    rc=0
    timeout "$SUITE_TIMEOUT" "${VG[@]}" --trace-children=yes --log-file="$dir/%p.log" \
        "$TESTS_BIN" --filter "$filter" --jobs "$JOBS" --verbose >"$dir.out" 2>&1 || rc=$?
    t1=$(now_ms)
    suites_run=$((suites_run + 1))
    run_problems=""
    check_logs "$dir"
    synth=$(grep -o 'Synthesis: .*' "$dir.out" | tail -n 1 | sed 's/[[:space:]]*$//' || true)
    tested=$(num Tested); failing=$(num Failing); crashing=$(num Crashing)
    if [ -z "$synth" ] || [ -z "$tested" ]; then
        run_problems="${run_problems:+$run_problems; }no Synthesis line"
        tested=0
    elif [ "$tested" -eq 0 ]; then
        run_problems="${run_problems:+$run_problems; }no test ran (filter $filter)"
    fi
    [ "$rc" -ne 124 ] || run_problems="${run_problems:+$run_problems; }timed out after $SUITE_TIMEOUT s"
    if [ "${failing:-0}" -gt 0 ] || [ "${crashing:-0}" -gt 0 ] || [ "$rc" -ne 0 ]; then
        run_problems="${run_problems:+$run_problems; }Criterion exit status $rc, $failing failing, $crashing crashing"
        echo "---- failed tests of $s ($dir.out)"
        grep -E '^\[(FAIL|----)\]' "$dir.out" | grep -v 'running under valgrind' || true
    fi
    # One process per test plus the runner: fewer logs means a test ran
    # outside valgrind.
    if [ "$run_procs" -lt $((tested + 1)) ]; then
        run_problems="${run_problems:+$run_problems; }$run_procs logs for $tested tests"
    fi
    tests_run=$((tests_run + tested))
    report "tests/$s" "${synth#Synthesis: }" $((t1 - t0))
done

end=$(now_ms)
echo "== valgrind: $programs programs and $tests_run tests in $suites_run suites ($total_procs processes), $total_errors memcheck errors, $failures failed run(s); $(( (end - START_MS) / 1000 )) s; logs in $OUT/"
if [ "$failures" -ne 0 ]; then
    echo "valgrind: FAILED" >&2
    exit 1
fi
echo "valgrind: passed"
