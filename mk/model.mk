# SPDX-License-Identifier: MIT
# mk/model.mk - `make model-check`: the Promela models of the pool and of
# the lazy stop sources
# (model/*.pml, see model/README.md) checked exhaustively with spin.
#
#   make model-check                  every check below, in $(BUILD)/model/<check>/
#   make model-check MODEL_ONLY="park-2w deque"   only those checks
#   make model-check MODEL_JOBS=1     one at a time (default: one per core)
#
# Each check (scripts/model-check-one.sh) runs `spin -a` on a copy of its
# model with its -D switches, compiles pan with gcc (-DSAFETY for safety; -DNP and `pan -l -f`, weak
# fairness, for non-progress cycles; -DCOLLAPSE state compression, still
# exhaustive; $(MODEL_OPT), or -O0 for the broken variants, which stop at
# their first error), runs it, and prints the states stored,
# the depth reached and pan's time.  A "pass" check must report errors: 0
# over a completed search; a "fail" check is a deliberately broken variant
# and must report an error (its trail is kept: replay it with the spin -t
# command printed).  The run ends with "N passed, N failed" and fails on any
# failure.  Needs spin (Debian package spin) and gcc.

SPIN          ?= spin
MODEL_CC      ?= gcc
MODEL_BUILD   ?= $(BUILD)/model
MODEL_MEMLIM  ?= 4096
MODEL_DEPTH   ?= 1000000
MODEL_ONLY    ?=
MODEL_OPT     ?= -O2
# Checks run at once: one per core (each may take up to MODEL_MEMLIM MB).
MODEL_JOBS    ?= $(shell nproc 2>/dev/null || echo 1)

# name:model:expect:mode:switches (switches comma-separated)
MODEL_CHECKS := \
    park-2w:park:pass:safety:-DNO_SUB \
    park-2w-spin:park:pass:safety:-DNO_SUB,-DNO_CHILD2,-DSPIN \
    park-2w-race:park:pass:safety:-DNO_PARENT \
    park-2w-fences:park:pass:safety:-DNO_SUB,-DFENCES \
    park-2w-spurious:park:pass:safety:-DNO_SUB,-DNO_CHILD2,-DSPURIOUS \
    park-2w-np:park:pass:np:-DNO_SUB,-DNO_CHILD2 \
    park-2w-race-np:park:pass:np:-DNO_PARENT \
    park-3w:park:pass:safety:-DNW=3,-DSTART_PARKED,-DWAIT_ONLY,-DNO_SUB,-DNO_CHILD2 \
    park-3w-np:park:pass:np:-DNW=3,-DSTART_PARKED,-DWAIT_ONLY,-DNO_SUB,-DNO_CHILD2 \
    park-3w-coarse:park:pass:safety:-DNW=3,-DSTART_PARKED,-DWAIT_ONLY,-DNO_SUB,-DNO_CHILD2,-DNO_FALLBACK,-DCOARSE,-DPLAIN_ITEM \
    park-1w-lend:park:pass:safety:-DNW=1,-DLEND,-DNO_SUB,-DNO_PARENT \
    park-1w-lend-shutdown:park:pass:safety:-DNW=1,-DLEND,-DNO_PARENT,-DNO_WAIT \
    park-1w-lend-linger:park:pass:safety:-DNW=1,-DLEND,-DNO_SUB,-DNO_PARENT,-DLINGER=2 \
    park-1w-lend-np:park:pass:np:-DNW=1,-DLEND,-DNO_SUB,-DNO_PARENT \
    park-2w-lend:park:pass:safety:-DLEND,-DNO_SUB,-DNO_PARENT,-DSTART_PARKED \
    park-2w-lend-linger:park:pass:safety:-DLEND,-DNO_SUB,-DNO_PARENT,-DSTART_PARKED,-DLEND_NO_FALLBACK,-DWAIT_ONLY,-DLINGER=2 \
    park-2w-lend-np:park:pass:np:-DLEND,-DNO_SUB,-DNO_PARENT,-DSTART_PARKED,-DLEND_NO_FALLBACK,-DWAIT_ONLY \
    park-1w-lend-nested:park:pass:safety:-DNW=1,-DLEND,-DLEND_NESTED,-DNO_SUB,-DNO_PARENT,-DWAIT_ONLY \
    park-1w-lend-nested-np:park:pass:np:-DNW=1,-DLEND,-DLEND_NESTED,-DNO_SUB,-DNO_PARENT,-DWAIT_ONLY \
    park-2w-lend-nested:park:pass:safety:-DLEND,-DLEND_NESTED,-DNO_SUB,-DNO_PARENT,-DSTART_PARKED,-DWAIT_ONLY \
    timer-2w:timer:pass:safety: \
    timer-2w-waker:timer:pass:safety:-DWAKER \
    timer-2w-end:timer:pass:safety:-DWAKER,-DNO_CLAIM \
    timer-1t:timer:pass:safety:-DONE_TIMER,-DWAKER \
    timer-2w-worker:timer:pass:safety:-DARM_ON_WORKER,-DWAKER \
    timer-2w-worker-end:timer:pass:safety:-DARM_ON_WORKER,-DWAKER,-DNO_CLAIM \
    syncloop:syncloop:pass:safety: \
    syncloop-timer:syncloop:pass:safety:-DTIMER \
    deque:deque:pass:safety: \
    inbox:inbox:pass:safety: \
    inbox-np:inbox:pass:np: \
    poll:poll:pass:safety: \
    lazystop:lazystop:pass:safety: \
    broken-park-no-recheck:park:fail:safety:-DNO_SUB,-DBROKEN_NO_RECHECK \
    broken-park-3w-no-recheck:park:fail:safety:-DNW=3,-DSTART_PARKED,-DWAIT_ONLY,-DNO_SUB,-DNO_CHILD2,-DNO_FALLBACK,-DCOARSE,-DPLAIN_ITEM,-DBROKEN_NO_RECHECK \
    broken-park-no-membarrier:park:fail:safety:-DNO_SUB,-DBROKEN_NO_MEMBARRIER \
    broken-park-late-seen:park:fail:safety:-DNO_SUB,-DBROKEN_LATE_SEEN \
    broken-park-np-spurious:park:fail:np:-DNO_SUB,-DNO_CHILD2,-DSPURIOUS \
    broken-lend-close-drops:park:fail:safety:-DLEND,-DNO_SUB,-DNO_PARENT,-DSTART_PARKED,-DBROKEN_CLOSE_DROPS \
    broken-lend-block-first:park:fail:safety:-DLEND,-DNO_SUB,-DNO_PARENT,-DSTART_PARKED,-DBROKEN_LEND_BLOCK_FIRST \
    broken-lend-late-gate:park:fail:safety:-DNW=1,-DLEND,-DNO_SUB,-DNO_PARENT,-DBROKEN_LATE_LENT_GATE \
    broken-lend-pushing-ignored:park:fail:safety:-DNW=1,-DLEND,-DNO_SUB,-DNO_PARENT,-DBROKEN_PUSHING_IGNORED \
    broken-lend-no-stopping:park:fail:safety:-DNW=1,-DLEND,-DNO_SUB,-DNO_PARENT,-DBROKEN_LEND_NO_STOPPING \
    broken-lend-visible-workers:park:fail:safety:-DNW=1,-DLEND,-DNO_SUB,-DNO_PARENT,-DBROKEN_VISIBLE_WORKERS \
    broken-lend-next-undrained:park:fail:safety:-DNW=1,-DLEND,-DNO_PARENT,-DNO_WAIT,-DBROKEN_NEXT_UNDRAINED \
    broken-lend-next-never-stolen:park:fail:np:-DNW=1,-DLEND,-DLEND_NESTED,-DNO_SUB,-DNO_PARENT,-DWAIT_ONLY,-DBROKEN_NEXT_NEVER_STOLEN \
    broken-lend-next-invisible:park:fail:safety:-DNW=1,-DLEND,-DLEND_NESTED,-DNO_SUB,-DNO_PARENT,-DWAIT_ONLY,-DBROKEN_NEXT_INVISIBLE \
    broken-timer-no-idle-wake:timer:fail:safety:-DBROKEN_NO_IDLE_WAKE \
    broken-timer-keeper-stale:timer:fail:safety:-DBROKEN_KEEPER_STALE \
    broken-timer-no-kick:timer:fail:safety:-DBROKEN_NO_KICK \
    broken-timer-until-nonzero:timer:fail:safety:-DBROKEN_UNTIL_NONZERO \
    broken-timer-claiming-handoff:timer:fail:safety:-DWAKER,-DBROKEN_CLAIMING_HANDOFF \
    broken-timer-defer-no-kick:timer:fail:safety:-DARM_ON_WORKER,-DBROKEN_DEFER_NO_KICK \
    broken-syncloop-pin-aba:syncloop:fail:safety:-DBROKEN_PIN_ABA \
    broken-syncloop-arm-no-posted:syncloop:fail:safety:-DTIMER,-DBROKEN_ARM_NO_POSTED \
    broken-syncloop-earliest-early:syncloop:fail:safety:-DTIMER,-DBROKEN_EARLIEST_BEFORE_CLEAR \
    broken-deque-take-store:deque:fail:safety:-DBROKEN_TAKE_STORE \
    broken-deque-grow-order:deque:fail:safety:-DBROKEN_GROW_ORDER \
    broken-inbox-tail-only:inbox:fail:safety:-DBROKEN_TAIL_ONLY \
    broken-poll-plain-idle:poll:fail:safety:-DBROKEN_PLAIN_IDLE \
    broken-poll-no-hand-over:poll:fail:safety:-DBROKEN_NO_HAND_OVER \
    broken-poll-mask-no-recheck:poll:fail:safety:-DBROKEN_MASK_NO_RECHECK \
    broken-lazystop-walk-stops-at-linked:lazystop:fail:safety:-DBROKEN_WALK_STOPS_AT_LINKED \
    broken-lazystop-epoch-from-begun:lazystop:fail:safety:-DBROKEN_EPOCH_FROM_BEGUN \
    broken-lazystop-done-after-walk:lazystop:fail:safety:-DBROKEN_DONE_AFTER_WALK \
    broken-lazystop-flag-before-epoch:lazystop:fail:safety:-DBROKEN_FLAG_BEFORE_EPOCH \
    broken-lazystop-no-begun:lazystop:fail:safety:-DBROKEN_NO_BEGUN

.PHONY: model-check

model-check: | $(BUILD)/.deps-model
	@command -v $(SPIN) >/dev/null 2>&1 || { echo "model-check: $(SPIN) not found (Debian package spin: apt-get install spin)" >&2; exit 1; }
	@command -v $(MODEL_CC) >/dev/null 2>&1 || { echo "model-check: $(MODEL_CC) not found" >&2; exit 1; }
	@mkdir -p $(MODEL_BUILD)
	@t0=$$(date +%s); summary=$(MODEL_BUILD)/summary.txt; list=$(MODEL_BUILD)/checks.txt; : > $$list; \
	for c in $(MODEL_CHECKS); do \
	    name=$${c%%:*}; \
	    if [ -n "$(MODEL_ONLY)" ]; then case " $(MODEL_ONLY) " in *" $$name "*) ;; *) continue ;; esac; fi; \
	    echo "$$c" >> $$list; \
	done; \
	SPIN="$(SPIN)" MODEL_CC="$(MODEL_CC)" MODEL_OPT="$(MODEL_OPT)" MODEL_MEMLIM=$(MODEL_MEMLIM) MODEL_DEPTH=$(MODEL_DEPTH) \
	    xargs -P $(MODEL_JOBS) -n 1 sh scripts/model-check-one.sh $(MODEL_BUILD) < $$list; \
	pass=0; fail=0; : > $$summary; \
	while read -r c; do \
	    v=$(MODEL_BUILD)/$${c%%:*}/verdict; \
	    if [ -s $$v ]; then cat $$v >> $$summary; else echo "$${c%%:*} FAILED no verdict" >> $$summary; fi; \
	    if [ -s $$v ] && [ "$$(awk '{ print $$2; exit }' $$v)" = ok ]; then pass=$$((pass + 1)); else fail=$$((fail + 1)); fi; \
	done < $$list; \
	echo "model-check: $$(( $$(date +%s) - t0 )) s in all, $(MODEL_JOBS) at a time; summary in $$summary"; \
	grep -v '^[^ ]* *ok ' $$summary | sed 's/^/model-check: FAILED: /' || true; \
	echo "model-check: $$pass passed, $$fail failed"; \
	[ $$fail -eq 0 ] && [ $$pass -gt 0 ]
