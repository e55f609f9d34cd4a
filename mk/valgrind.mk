# SPDX-License-Identifier: MIT
# mk/valgrind.mk - valgrind memcheck over the examples and a selection of tests.
#
#   make valgrind   scripts/valgrind.sh: builds build-vg/ (-O1 -g, jemalloc
#                   allocator routed to malloc), runs every example of
#                   run-examples and the script's Criterion suites under
#                   memcheck, and fails on any error or definite/indirect
#                   leak found in the logs (build-vg/valgrind/)
#
# VG_SUITES="suite ..." (or "all"), VG_JOBS and VG_EXAMPLES are read by the
# script from the environment or the make command line.

.PHONY: valgrind clean-valgrind

valgrind: | $(BUILD)/.deps-valgrind $(BUILD)/.deps-test
	VG_SUITES="$(VG_SUITES)" VG_JOBS="$(VG_JOBS)" VG_EXAMPLES="$(VG_EXAMPLES)" scripts/valgrind.sh

clean-valgrind:
	rm -rf build-vg

clean: clean-valgrind
