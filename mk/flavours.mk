# SPDX-License-Identifier: MIT
# mk/flavours.mk - sanitizer flavours of the library, installed beside it
# so that an application can run under ASan or TSan with cexec instrumented
# too (docs/debugging.md).
#
#   make flavours           build-flavours/asan/libcexec.a (address and
#                           undefined behaviour, built with $(CC)),
#                           build-flavours/tsan/libcexec.a (threads, built
#                           with clang: gcc's TSan does not support the
#                           library's fences) and build-flavours/valgrind/
#                           libcexec.a (-O1 -g, task stacks registered with
#                           valgrind; needs valgrind's header to build)
#   make install-flavours   lib/libcexec-{asan,tsan,valgrind}.a and
#                           lib/pkgconfig/cexec-{asan,tsan,valgrind}.pc
#
# All three route the jemalloc allocator to malloc (the tools cannot see
# jemalloc's own heap), and the TSan flavour's atomics are compiler
# builtins that TSan understands (src/base/exi_atomic.h).  Use the same
# compiler family for the application: gcc's and clang's sanitizer
# runtimes do not mix (FLAVOUR_CC_asan / FLAVOUR_CC_tsan choose).

FLAVOUR_SAN_asan := -fsanitize=address,undefined -fno-omit-frame-pointer
FLAVOUR_SAN_tsan := -fsanitize=thread
FLAVOUR_CC_asan ?= $(CC)
FLAVOUR_CC_tsan ?= clang
FLAVOURS := asan tsan valgrind

# Sets san, cc and extra for flavour $$f (in a recipe's shell).
flavour_vars = case $$f in \
    asan) san="$(FLAVOUR_SAN_asan)"; cc="$(FLAVOUR_CC_asan)"; extra="" ;; \
    tsan) san="$(FLAVOUR_SAN_tsan)"; cc="$(FLAVOUR_CC_tsan)"; extra="" ;; \
    valgrind) san=""; cc="$(CC)"; extra="CEXEC_JEMALLOC=malloc" ;; \
    esac

.PHONY: flavours install-flavours uninstall-flavours clean-flavours

flavours: | $(BUILD)/.deps-clang $(BUILD)/.deps-valgrind
	@for f in $(FLAVOURS); do \
	    $(flavour_vars); \
	    $(MAKE) --no-print-directory BUILD=build-flavours/$$f CC="$$cc" OPT="-O1 -g" SAN="$$san" $$extra \
	        build-flavours/$$f/libcexec.a || exit 1; \
	done

install-flavours: flavours
	install -d $(DESTDIR)$(PREFIX)/lib/pkgconfig
	@for f in $(FLAVOURS); do \
	    $(flavour_vars); \
	    install -m 644 build-flavours/$$f/libcexec.a $(DESTDIR)$(PREFIX)/lib/libcexec-$$f.a || exit 1; \
	    sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@VERSION@|$(VERSION)|' -e "s|@FLAVOUR@|$$f|g" -e "s|@SANFLAGS@|$$san|g" \
	        cexec-flavour.pc.in > $(DESTDIR)$(PREFIX)/lib/pkgconfig/cexec-$$f.pc || exit 1; \
	done

uninstall-flavours:
	rm -f $(foreach f,$(FLAVOURS),$(DESTDIR)$(PREFIX)/lib/libcexec-$(f).a $(DESTDIR)$(PREFIX)/lib/pkgconfig/cexec-$(f).pc)

uninstall: uninstall-flavours

clean-flavours:
	rm -rf build-flavours

clean: clean-flavours
