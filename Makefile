# libsanswitch — top-level build.
#
#   make                 build build/libsanswitch.so, build/sanstat (tools/) and the test tools in build/
#   make check           install test dependencies, build, run unit + end-to-end tests
#   make check SANITIZE=address      the same, everything built with AddressSanitizer into
#                        build-asan/ (SANITIZE=undefined: UBSan, build-ubsan/; address,undefined:
#                        both, build-asan-ubsan/); make, make e2e and make clean take it too
#   make demo            side-by-side demo: a program over kernel TCP, then under the switch
#   make bench           benchmarks (kernel TCP vs preload, ratios; not pass/fail), results and
#                        plots in bench/results/; BENCH_ONLY="sockperf iperf3 conn app idle ref"
#                        (the families to run), BENCH_QUICK=1 (1 round, short runs: minutes)
#   make install PREFIX=/usr/local DESTDIR=   /   make uninstall   (the library in
#                        $(LIBDIR)/sanswitch, sanswitch-run, sanstat and sanverify in $(BINDIR), man/*.N in
#                        $(MANDIR)/manN)
#   make rxe-check       build, then tests/rxe/run in a Soft-RoCE qemu guest (scripts/rxe-vm) and
#                        tests/rxe/pair/run in two guests on one link (scripts/rxe-vm --pair)
#   make rxe-bench       kernel TCP vs rsocket vs the switch over rxe, in that guest (ratios)
#
# Sources are discovered per directory: every preload/*.c, core/*.c and proto/*.c goes into the
# library; proto/ and core/ objects are also linked into the unit-test runner.

comma    := ,
space    := $(subst ,, )

CC       ?= cc
PREFIX   ?= /usr/local
LIBDIR   ?= $(PREFIX)/lib
BINDIR   ?= $(PREFIX)/bin
MANDIR   ?= $(PREFIX)/share/man
DESTDIR  ?=
# What sanswitch-run --version says: the commit the tree was built from.
VERSION  ?= $(shell git describe --tags --always 2>/dev/null || echo unknown)

# SANITIZE=address, undefined or address,undefined: the library, the unit runner and the tools
# are built with those sanitizers into a build directory of their own, never mixed with build/.
# A UBSan finding aborts (-fno-sanitize-recover=all), so it fails the test that hit it. The tests
# find the sanitizer from the library they are given (tests/sanitize.sh; docs/testing.md, "Sanitizers").
SANITIZE ?=
ifeq ($(SANITIZE),)
B        := build
SAN_FLAGS :=
SAN_WARN :=
else
SAN_KINDS := $(sort $(subst $(comma), ,$(SANITIZE)))
ifneq ($(filter-out address undefined,$(SAN_KINDS)),)
$(error SANITIZE=$(SANITIZE): want address, undefined or address,undefined)
endif
B        := build-$(subst $(space),-,$(strip $(patsubst address,asan,$(patsubst undefined,ubsan,$(SAN_KINDS)))))
SAN_FLAGS := -fsanitize=$(subst $(space),$(comma),$(SAN_KINDS)) -fno-omit-frame-pointer
ifneq ($(filter undefined,$(SAN_KINDS)),)
SAN_FLAGS += -fno-sanitize-recover=all
endif
# GCC's manual: sanitizers raise the rate of false -Wmaybe-uninitialized warnings (one in
# tests/tools/sanverify.c under UBSan); the plain build, which keeps it, is the one that checks.
SAN_WARN := -Wno-maybe-uninitialized
endif

WARN     := -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wmissing-prototypes \
            -Wno-unused-parameter
CFLAGS   ?= -O2 -g
ALL_CFLAGS = -std=gnu11 $(WARN) $(CFLAGS) $(SAN_FLAGS) $(SAN_WARN) -fPIC -D_GNU_SOURCE -I. -MMD -MP
# No -lev: core/san_ev.c dlopens libev.so.4 when the engine first starts (a process that never
# makes a TCP connection never maps it: docs/behaviour.md, "Start-up"; tests/e2e/t_symbols.sh).
LDLIBS_SO := -ldl -lpthread

CHECK_CFLAGS := $(shell pkg-config --cflags check 2>/dev/null)
CHECK_LIBS   := $(shell pkg-config --libs check 2>/dev/null || echo -lcheck -lsubunit -lrt -lm)

PRELOAD_SRC := $(sort $(wildcard preload/*.c))
# The verbs transport and provider are the only files that need the rdma-core headers: they go
# into libsanswitch.so (and build/sanverbs) when those are there; the unit runner never links
# them (core/san_prov.c refers to the provider weakly). Nothing links libibverbs or librdmacm:
# core/san_rdma_syms.c dlopens them when the verbs provider is first needed and a device can be
# there, so a process that never uses verbs does not load them (tests/e2e/t_symbols.sh).
VERBS_SRC   := core/san_verbs.c core/san_prov_verbs.c core/san_rdma_syms.c
CORE_SRC    := $(filter-out $(VERBS_SRC),$(sort $(wildcard core/*.c)))
PROTO_SRC   := $(sort $(wildcard proto/*.c))
UNIT_SRC    := $(sort $(wildcard tests/unit/*.c))
TOOL_SRC    := $(sort $(wildcard tests/tools/*.c))

obj = $(patsubst %.c,$(B)/obj/%.o,$(1))

LIB_OBJ  := $(call obj,$(PRELOAD_SRC) $(CORE_SRC) $(PROTO_SRC))
LIB_LIBS := $(LDLIBS_SO)
# The unit runner links the pure layers, never preload/ (which would interpose the runner itself).
UNIT_LIB_OBJ := $(call obj,$(CORE_SRC) $(PROTO_SRC))
UNIT_OBJ := $(call obj,$(UNIT_SRC))
TOOLS    := $(patsubst tests/tools/%.c,$(B)/%,$(TOOL_SRC))
# Without the rdma-core headers (libibverbs-dev, librdmacm-dev: scripts/install-deps) the verbs
# tool is skipped, so `make` still builds everything else.
HAVE_VERBS := $(shell printf '\043include <rdma/rdma_cma.h>\n' | $(CC) -E -x c - >/dev/null 2>&1 && echo 1)
ifneq ($(HAVE_VERBS),1)
TOOLS    := $(filter-out $(B)/sanverbs,$(TOOLS))
else
LIB_OBJ  += $(call obj,$(VERBS_SRC))
endif
SO       := $(B)/libsanswitch.so
MAP      := preload/libsanswitch.map
UNIT     := $(B)/check_unit
# sanswitch-run: a shell script; the build tree's copy finds the library beside it.
RUN      := $(B)/sanswitch-run
MAN_PAGES := $(sort $(wildcard man/*.[1-8]))
# sanswitch-run from its template, with where the installed library lives: $(call run_script,OUT)
run_script = sed -e 's|@LIBDIR@|$(LIBDIR)|g' -e 's|@VERSION@|$(VERSION)|g' tools/sanswitch-run.in \
	     >$(1).tmp && chmod 0755 $(1).tmp && mv $(1).tmp $(1)

.PHONY: all check unit e2e demo bench install uninstall clean deps format rxe-check rxe-bench
all: $(SO) $(TOOLS) $(B)/sanstat $(RUN)

$(RUN): tools/sanswitch-run.in Makefile
	@mkdir -p $(B)
	$(call run_script,$@)

$(B)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -c -o $@ $<

$(SO): $(LIB_OBJ) $(MAP)
	$(CC) $(SAN_FLAGS) -shared -o $@ $(LIB_OBJ) -Wl,--version-script=$(MAP) -Wl,-z,defs \
	      -Wl,-soname,libsanswitch.so $(LIB_LIBS)

$(B)/%: tests/tools/%.c
	@mkdir -p $(B)
	$(CC) $(ALL_CFLAGS) -o $@ $< -lpthread

# sanseccomp confines itself to read, write, close, futex and exit, and the ASan runtime linked
# into a program makes other system calls of its own: built with it, the tool died of SIGSYS
# with or without the library. What t_edge_seccomp checks is the library, which still runs
# sanitized in it (preloaded with the ASan runtime first, which this plain tool survives).
ifneq ($(filter address,$(SAN_KINDS)),)
$(B)/sanseccomp: SAN_FLAGS :=
endif

# The verbs transport test tool: the transport, rdma-core's loader, its pure helpers, logging.
SANVERBS_OBJ := $(call obj,core/san_verbs.c core/san_rdma_syms.c core/san_vpool.c core/san_log.c \
                core/san_logfile.c core/san_ratelimit.c \
                core/san_fdtable.c core/san_linkrate.c core/san_sig.c \
                proto/san_credit.c)
$(B)/sanverbs: tests/tools/sanverbs.c $(SANVERBS_OBJ)
	@mkdir -p $(B)
	$(CC) $(ALL_CFLAGS) -o $@ $< $(SANVERBS_OBJ) -ldl -lpthread

# sanstat reads the stats files: the reader's side of core/san_stats.h, nothing else of core/.
SANSTAT_OBJ := $(call obj,core/san_stats_file.c)
$(B)/sanstat: tools/sanstat.c $(SANSTAT_OBJ)
	@mkdir -p $(B)
	$(CC) $(ALL_CFLAGS) -o $@ $< $(SANSTAT_OBJ)

# The squatter of the two-user test speaks the side-channel protocol: the engine's own code.
$(B)/sansquat: tests/tools/sansquat.c $(UNIT_LIB_OBJ)
	@mkdir -p $(B)
	$(CC) $(ALL_CFLAGS) -o $@ $< $(UNIT_LIB_OBJ) -ldl -lpthread

$(UNIT_OBJ): ALL_CFLAGS += $(CHECK_CFLAGS)
$(UNIT): $(UNIT_OBJ) $(UNIT_LIB_OBJ)
	$(CC) $(SAN_FLAGS) -o $@ $^ $(CHECK_LIBS) -ldl -lpthread

deps:
	@./scripts/install-deps

unit: $(UNIT)
check: deps
	@$(MAKE) --no-print-directory all $(UNIT)
	@SANSWITCH_BUILD=$(CURDIR)/$(B) ./tests/run

e2e: all
	@SANSWITCH_BUILD=$(CURDIR)/$(B) ./tests/e2e/run

# Needs scripts/rxe-vm's packages and cache (scripts/rxe-vm --install, once, as root).
rxe-check: all
	@./tests/rxe/check

# The side-by-side benchmark over rxe: kernel TCP, rsocket's preload, the switch (ratios only).
rxe-bench: all
	@./scripts/rxe-vm -- ./scripts/rxe-bench

demo: deps
	@$(MAKE) --no-print-directory all
	@./scripts/demo

bench:
	@./scripts/install-deps bench
	@$(MAKE) --no-print-directory all
	@./scripts/bench

# sanswitch-run is made again here: it names the library's place under this LIBDIR, which need
# not be the one `make` was run with. Each man page goes to the section its suffix names.
install: all
	install -d $(DESTDIR)$(LIBDIR)/sanswitch $(DESTDIR)$(BINDIR)
	install -m 0755 $(SO) $(DESTDIR)$(LIBDIR)/sanswitch/libsanswitch.so
	install -m 0755 $(B)/sanverify $(B)/sanstat $(DESTDIR)$(BINDIR)/
	$(call run_script,$(DESTDIR)$(BINDIR)/sanswitch-run)
	for p in $(MAN_PAGES); do \
		d=$(DESTDIR)$(MANDIR)/man$${p##*.}; \
		install -d "$$d" && install -m 0644 "$$p" "$$d/" || exit 1; \
	done

uninstall:
	rm -f $(DESTDIR)$(LIBDIR)/sanswitch/libsanswitch.so
	-rmdir $(DESTDIR)$(LIBDIR)/sanswitch 2>/dev/null
	rm -f $(DESTDIR)$(BINDIR)/sanverify $(DESTDIR)$(BINDIR)/sanstat $(DESTDIR)$(BINDIR)/sanswitch-run
	for p in $(notdir $(MAN_PAGES)); do rm -f "$(DESTDIR)$(MANDIR)/man$${p##*.}/$$p"; done

format:
	clang-format -i $(PRELOAD_SRC) $(CORE_SRC) $(VERBS_SRC) $(PROTO_SRC) $(UNIT_SRC) $(TOOL_SRC) \
	    tools/sanstat.c \
	    $(wildcard preload/*.h core/*.h proto/*.h tests/unit/*.h)

clean:
	rm -rf $(B)

-include $(shell find $(B)/obj -name '*.d' 2>/dev/null)
