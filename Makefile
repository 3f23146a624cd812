# SPDX-License-Identifier: BSD-3-Clause
# hilock -- make | make test | make test-servers | make demo | make bench | make install PREFIX=...
# `make test` and `make demo` install missing Debian packages first (scripts/deps.sh: the
# demo only what building and running the command needs, the tests also their own tools).
# Flags: EXTRA_CFLAGS and EXTRA_LDFLAGS reach every compile and link, the library's and the
# programs' (the command, tests, benches), except the position flags (-fPIE, -pie, ...), which
# reach the programs only: the library is always -fPIC and linked -shared (PIC objects also
# suit a PIE program), so `make EXTRA_CFLAGS=-fPIE EXTRA_LDFLAGS=-pie` builds PIE programs.
# LIB_CFLAGS and LIB_LDFLAGS reach the library alone. PLATFORM=linux|posix picks the platform
# layer (src/platform/: linux on Linux, else posix).

PREFIX    ?= /usr/local
LIBDIR    ?= $(PREFIX)/lib
INCDIR    ?= $(PREFIX)/include
BINDIR    ?= $(PREFIX)/bin
MANDIR    ?= $(PREFIX)/share/man
# The guides (README.md, docs/*.md) and LICENSE, which man 3 hilock points to.
DOCDIR    ?= $(PREFIX)/share/doc/hilock
# One source of truth: include/hilock.h (HILOCK_VERSION_MAJOR/MINOR/PATCH); the soname is
# libhilock.so.MAJOR (README.md, "Versions and ABI").
hl_version = $(shell sed -n 's/^.define HILOCK_VERSION_$(1) *\([0-9][0-9]*\).*/\1/p' include/hilock.h)
SOVERSION := $(call hl_version,MAJOR)
VERSION   := $(SOVERSION).$(call hl_version,MINOR).$(call hl_version,PATCH)

CC        ?= cc
B         ?= build
WARN      := -std=c99 -Wall -Wextra -Wstrict-prototypes -Wwrite-strings -Werror
OPT       ?= -O2 -g
# PKG_CONFIG: the target's pkg-config in a cross build (debian/rules: dpkg's buildtools.mk)
PKG_CONFIG ?= pkg-config
HIREDIS_LIBS := $(shell $(PKG_CONFIG) --libs hiredis 2>/dev/null || echo -lhiredis)
# OpenSSL (src/transport/session.c): the library's own TLS; its symbols stay hidden like ours
OPENSSL_CFLAGS := $(shell $(PKG_CONFIG) --cflags openssl 2>/dev/null)
OPENSSL_LIBS := $(shell $(PKG_CONFIG) --libs openssl 2>/dev/null || echo -lssl -lcrypto)
# 64-bit time_t (and off_t, which glibc requires with it) on 32-bit glibc targets (>= 2.34;
# nothing changes on 64-bit, musl has it always): wall-clock stamps past 2038. The library and
# the command only: the public headers hold no time_t, and a program (a suite) keeps the time_t
# of the libraries it passes a struct timeval to (libevent's adapter). docs/portability.md.
TIME64    := -D_FILE_OFFSET_BITS=64 -D_TIME_BITS=64
# the library's flags: EXTRA_* less the position flags, then LIB_* (see the header)
POSITION_FLAGS := -fPIE -fpie -fPIC -fpic -fno-PIE -fno-pie -pie -no-pie -static-pie
LIB_CFLAGS  ?=
LIB_LDFLAGS ?=
LIB_XCFLAGS  = $(filter-out $(POSITION_FLAGS),$(EXTRA_CFLAGS)) $(LIB_CFLAGS)
LIB_XLDFLAGS = $(filter-out $(POSITION_FLAGS),$(EXTRA_LDFLAGS)) $(LIB_LDFLAGS)
# src/ is one folder per layer (docs/layout.md): each folder's headers are included by name (one
# -I per folder; legacy/ too), or as "folder/name.h" under -Isrc
SRC_DIRS  := $(sort $(patsubst %/,%,$(dir $(wildcard src/*/*.c src/*/*.h))))
SRC_INC   := $(addprefix -I,$(SRC_DIRS)) -Ilegacy
SRC_H     := $(wildcard src/*/*.h)
CFLAGS_LIB = $(WARN) $(OPT) $(TIME64) -fvisibility=hidden -DHILOCK_BUILDING -Iinclude -Isrc $(SRC_INC) -I$(B) $(OPENSSL_CFLAGS) $(LIB_XCFLAGS) -fPIC
LDLIBS_LIB = $(HIREDIS_LIBS) $(OPENSSL_LIBS) -lpthread

# The platform layer (src/platform/platform.h): one implementation, and what all share.
PLATFORM  ?= $(if $(filter Linux,$(shell uname -s)),linux,posix)
PLATFORM_SRC := src/platform/common.c src/platform/$(PLATFORM).c
LIB_SRC   := $(sort $(filter-out src/platform/%,$(wildcard src/*/*.c)) $(PLATFORM_SRC)) $(wildcard legacy/*.c)
LUA       := $(sort $(wildcard src/lua/*.lua) $(wildcard legacy/lua/*.lua))
LIB_OBJ   := $(patsubst %.c,$(B)/%.o,$(LIB_SRC)) $(B)/gen/scripts.o
HEADERS   := include/hilock.h include/hilock_legacy.h include/hilock_inspect.h include/hilock_async.h include/hilock_observe.h
# the event-loop adapters: header-only (the library does not link libuv or libevent)
HEADERS   += include/hilock_libuv.h include/hilock_libevent.h
HEADERS   += include/hilock.hpp

# tests/unit/: the suites that start no server (make test-unit runs them alone, in seconds)
UNIT_SRC  := $(sort $(wildcard tests/unit/test_*.c))
UNIT_BIN  := $(patsubst tests/%.c,$(B)/tests/%,$(UNIT_SRC))
TEST_SRC  := $(sort $(wildcard tests/test_*.c)) $(UNIT_SRC)
TEST_BIN  := $(patsubst tests/%.c,$(B)/tests/%,$(TEST_SRC))
TEST_SUPPORT := $(filter-out $(TEST_SRC),$(wildcard tests/*.c))
TEST_SUPPORT_OBJ := $(patsubst tests/%.c,$(B)/tests/support/%.o,$(TEST_SUPPORT))
# $(SRC_INC): unit tests of internals (tests/unit/test_url.c) include the layers' headers
CFLAGS_TEST = $(WARN) -O1 -g -D_GNU_SOURCE -Iinclude $(SRC_INC) -Itests $(OPENSSL_CFLAGS) $(EXTRA_CFLAGS)

# The hilock command (cli/): part of `all`; built for `test` (tests/test_cli.c runs it) and
# `demo`; installed with its man page.
CLI_BIN   := $(B)/hilock
EXTRA_ALL += $(CLI_BIN)
EXTRA_DEMO += $(CLI_BIN)
EXTRA_TEST_BINS += $(CLI_BIN)
INSTALL_EXTRA += install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(MANDIR)/man1 && \
  install -m 755 $(CLI_BIN) $(DESTDIR)$(BINDIR)/hilock && \
  install -m 644 $(B)/man/hilock.1 $(DESTDIR)$(MANDIR)/man1/hilock.1 || exit 1;

# The C++ wrapper (include/hilock.hpp) exercised by tests/test_cxx.c, built with g++ -std=c++20
# (lock(std::stop_token) too; tests/abi/headers.sh compiles the headers as C++14 and C++17).
CXX       ?= g++
CXX_TEST  := $(B)/tests/cxx_lock
EXTRA_TEST_BINS += $(CXX_TEST)

.PHONY: all lib test test-asan test-valgrind demo bench install uninstall deps clean check-install

all: lib $(EXTRA_ALL)
lib: $(B)/libhilock.a $(B)/libhilock.so

$(B)/gen/scripts.c: $(LUA) scripts/embed-lua.sh
	@mkdir -p $(@D)
	sh scripts/embed-lua.sh $@ $(LUA)

$(B)/gen/scripts.o: $(B)/gen/scripts.c $(SRC_H) include/hilock.h
	$(CC) $(CFLAGS_LIB) -c $< -o $@

$(B)/%.o: %.c $(SRC_H) $(HEADERS) $(wildcard legacy/*.h)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_LIB) -c $< -o $@

$(B)/src/transport/session.o: src/transport/session.h

$(B)/libhilock.a: $(LIB_OBJ)
	rm -f $@
	$(AR) rcs $@ $^

$(B)/libhilock.so: $(LIB_OBJ)
	$(CC) -shared -Wl,-soname,libhilock.so.$(SOVERSION) -Wl,--no-undefined $(LIB_XLDFLAGS) \
	    -o $(B)/libhilock.so.$(VERSION) $^ $(LDLIBS_LIB)
	ln -sf libhilock.so.$(VERSION) $(B)/libhilock.so.$(SOVERSION)
	ln -sf libhilock.so.$(SOVERSION) $@

# Cflags: only hilock's own include directory. hiredis and OpenSSL are not named in
# Requires.private, as pkg-config adds a private requirement's Cflags (hiredis's
# -I/usr/include/hiredis -D_FILE_OFFSET_BITS=64) to every user program, though no public header
# includes them; static linking needs only their libraries (Libs.private).
$(B)/hilock.pc: Makefile
	@mkdir -p $(@D)
	printf '%s\n' 'prefix=$(PREFIX)' 'libdir=$(LIBDIR)' 'includedir=$(INCDIR)' '' \
	  'Name: hilock' 'Description: Locks on Redis: single master, Sentinel, Redlock, legacy SETNX fleets' \
	  'Version: $(VERSION)' 'License: BSD-3-Clause' 'Cflags: -I$${includedir}' \
	  'Libs: -L$${libdir} -lhilock' 'Libs.private: $(strip $(HIREDIS_LIBS) $(OPENSSL_LIBS)) -lpthread' > $@

# find_package(hilock) for CMake users: the templates in cmake/ with the install paths filled in.
CMAKE_CFG := $(B)/cmake/hilockConfig.cmake $(B)/cmake/hilockConfigVersion.cmake
$(B)/cmake/%.cmake: cmake/%.cmake.in Makefile include/hilock.h
	@mkdir -p $(@D)
	sed -e 's|@LIBDIR@|$(LIBDIR)|g' -e 's|@INCDIR@|$(INCDIR)|g' -e 's|@VERSION@|$(VERSION)|g' \
	  -e 's|@SOVERSION@|$(SOVERSION)|g' \
	  -e "s|@SIZEOF_VOID_P@|$$(echo __SIZEOF_POINTER__ | $(CC) -E -P -x c - | tail -n 1)|g" $< > $@

# The man pages as installed: cli/hilock.1 and docs/hilock.3 with the version (include/hilock.h)
# and DOCDIR filled in for @VERSION@ and @DOCDIR@.
$(B)/man/%.1: cli/%.1 Makefile include/hilock.h
	@mkdir -p $(@D)
	sed -e 's|@VERSION@|$(VERSION)|g' -e 's|@DOCDIR@|$(DOCDIR)|g' $< > $@
$(B)/man/%.3: docs/%.3 Makefile include/hilock.h
	@mkdir -p $(@D)
	sed -e 's|@VERSION@|$(VERSION)|g' -e 's|@DOCDIR@|$(DOCDIR)|g' $< > $@

# ---- tests ----
$(B)/tests/test_tls_layer: src/transport/session.h
# The test support (fixtures, checks, peers, recorders) is compiled once and linked into every
# suite as objects, not an archive: lsan_runner.o's hook is referenced by no suite.
.SECONDARY: $(TEST_SUPPORT_OBJ)
$(B)/tests/support/%.o: tests/%.c $(wildcard tests/*.h) $(HEADERS)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_TEST) -c $< -o $@
# The scenario runner (tests/scenario.c) drives clients on a libuv loop: every suite links -luv.
TEST_SUPPORT_LIBS := -luv
$(B)/tests/%: tests/%.c $(TEST_SUPPORT_OBJ) $(wildcard tests/*.h) $(B)/libhilock.a
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_TEST) -o $@ $< $(TEST_SUPPORT_OBJ) $(B)/libhilock.a $(LDLIBS_LIB) -lcriterion $(TEST_LIBS) $(TEST_SUPPORT_LIBS) $(EXTRA_LDFLAGS)

# The event-loop suite drives clients from libuv and libevent (the header-only adapters).
$(B)/tests/test_async: TEST_LIBS = -luv -levent
$(B)/tests/test_observe: TEST_LIBS = -luv   # (events on a libuv loop)
$(B)/tests/test_observe: include/hilock_libuv.h
$(B)/tests/test_servers: TEST_LIBS = -luv   # (one event-loop test of its own)
$(B)/tests/test_messages: TEST_LIBS = -luv   # (the event loop's NOAUTH)
$(B)/tests/test_reentry: TEST_LIBS = -luv
$(B)/tests/test_resolve: TEST_LIBS = -luv   # (a hung lookup on an event loop)
$(B)/tests/test_async_cluster: TEST_LIBS = -luv
$(B)/tests/test_cancel: TEST_LIBS = -luv   # (a loop's client cancelled)
$(B)/tests/test_tls_cluster: TEST_LIBS = -luv   # (the loop on a TLS cluster)
$(B)/tests/test_async: include/hilock_libuv.h include/hilock_libevent.h

# The ABI test (tests/test_abi.c, docs/versioning.md): v0_app is an application built against
# 0.1.0's frozen header (tests/abi/v0/, never include/) and linked to this build's shared
# library (rpath $ORIGIN/../..); cxx_app uses today's header from C++.
ABI_BINS := $(B)/tests/abi/v0_app $(B)/tests/abi/cxx_app
EXTRA_TEST_BINS += $(ABI_BINS)
$(B)/tests/abi/v0_app: tests/abi/v0_app.c tests/abi/v0/hilock.h tests/abi/v0/hilock_legacy.h $(B)/libhilock.so
	@mkdir -p $(@D)
	$(CC) $(WARN) -O1 -g -Itests/abi/v0 $(EXTRA_CFLAGS) -o $@ $< -L$(B) -lhilock \
	  -Wl,-rpath,'$$ORIGIN/../..' $(HIREDIS_LIBS) $(EXTRA_LDFLAGS)

$(B)/tests/abi/cxx_app: tests/abi/cxx_app.cpp $(HEADERS) $(B)/libhilock.a
	@mkdir -p $(@D)
	$(CXX) -Wall -Wextra -Werror -O1 -g -Iinclude $(EXTRA_CFLAGS) -o $@ $< $(B)/libhilock.a $(LDLIBS_LIB) \
	  $(EXTRA_LDFLAGS)

# The public headers as programs compile them (tests/abi/headers.sh): all of them as C++17 with
# g++ and clang++ (-Werror -Wold-style-cast, g++'s -Wuseless-cast), the event-loop adapters
# included and unused in C with cc and clang, hilock.hpp under C++14 stopping at its #error, and
# README.md's C++ example.
# Compiling is the test: `make test` builds the stamp.
HEADER_CHECK := $(B)/tests/abi/headers.ok
EXTRA_TEST_BINS += $(HEADER_CHECK)
$(HEADER_CHECK): tests/abi/headers.sh tests/abi/headers.cpp tests/abi/adapters.c tests/abi/cxx14.cpp README.md \
  $(HEADERS)
	@mkdir -p $(@D)
	sh tests/abi/headers.sh $@

# The fiber switch alone in each of its builds (tests/fiber/check.sh: the CET note under
# -fcf-protection, x32, ucontext, no switch; each runs tests/fiber/fiber_check.c): `make test`
# builds the stamp.
FIBER_CHECK := $(B)/tests/fiber/check.ok
EXTRA_TEST_BINS += $(FIBER_CHECK)
$(FIBER_CHECK): tests/fiber/check.sh tests/fiber/fiber_check.c src/async/fiber.c src/async/fiber.h \
    src/platform/platform.h src/platform/linux.c src/platform/common.c
	@mkdir -p $(@D)
	CC="$(CC)" CFLAGS="$(EXTRA_CFLAGS)" LDFLAGS="$(EXTRA_LDFLAGS)" sh tests/fiber/check.sh $(@D)
	@touch $@

# README.md's example, compiled as it stands (the first ```c block) and run by tests/test_readme.c.
EXTRA_TEST_BINS += $(B)/tests/readme_example
$(B)/tests/readme_example.c: README.md
	@mkdir -p $(@D)
	awk '/^```c$$/ && !done { p = 1; next } p && /^```$$/ { p = 0; done = 1 } p' README.md > $@

$(B)/tests/readme_example: $(B)/tests/readme_example.c $(HEADERS) $(B)/libhilock.a
	$(CC) $(WARN) -O1 -g -Iinclude $(EXTRA_CFLAGS) -o $@ $< $(B)/libhilock.a $(LDLIBS_LIB) $(EXTRA_LDFLAGS)

# docs/event-loop.md's example (the first ```c block after "## A whole program"), compiled
# as it stands with libuv and run by tests/test_async.c.
EXTRA_TEST_BINS += $(B)/tests/readme_async
$(B)/tests/readme_async.c: docs/event-loop.md
	@mkdir -p $(@D)
	awk '/^## A whole program/ { s = 1 } s && /^```c$$/ && !done { p = 1; next } p && /^```$$/ { p = 0; done = 1 } p' docs/event-loop.md > $@

$(B)/tests/readme_async: $(B)/tests/readme_async.c $(HEADERS) include/hilock_libuv.h $(B)/libhilock.a
	$(CC) $(WARN) -D_POSIX_C_SOURCE=200809L -O1 -g -Iinclude $(EXTRA_CFLAGS) -o $@ $< $(B)/libhilock.a \
	  $(LDLIBS_LIB) -luv $(EXTRA_LDFLAGS)

$(CXX_TEST): tests/cxx_lock.cpp $(HEADERS) $(B)/libhilock.a
	@mkdir -p $(@D)
	$(CXX) -std=c++20 -Wall -Wextra -Werror -O1 -g -Iinclude $(EXTRA_CFLAGS) -o $@ $< $(B)/libhilock.a \
	  $(LDLIBS_LIB) $(EXTRA_LDFLAGS)

deps:
	@sh scripts/deps.sh

# The layering: each folder's header states its layer and what it may call ("Layer:", "May
# call:"); scripts/layers.sh checks every include and every call (from the built objects)
# against that, no import circles, and the engine's seams (no topology, no hiredis).
.PHONY: layers
layers: lib
	@$(MAKE) --no-print-directory $(BENCH_OBJ) $(TORTURE_OBJ) $(CLI_SRC:%.c=$(B)/%.o)
	@sh scripts/layers.sh $(B)
	@sh scripts/layers.sh --circles $(B)/bench
	@sh scripts/layers.sh --circles $(B)/torture
	@sh scripts/check-platform.sh

# The platform layer beyond the default build (docs/portability.md, "The platform layer"), on
# Linux: the seam (scripts/check-platform.sh); posix.c built, with the CLOCK_REALTIME condition
# variable of systems without clock selection, and the core suites run on it (build-posix); the
# programs built as PIE (EXTRA_* reach the library without -fPIE/-pie) with linux.c's
# close_range fallback alone, and the platform suite run there (build-pie).
PLATFORM_SUITES := unit/test_platform test_lock test_keepalive test_async test_transport test_resolve \
  test_legacy test_fork test_threads
.PHONY: test-platform
test-platform: deps
	@sh scripts/check-platform.sh
	@$(MAKE) --no-print-directory B=build-posix PLATFORM=posix EXTRA_CFLAGS=-DHL_PLAT_WALL_CONDVAR \
	  lib build-posix/hilock build-posix/tests/readme_async $(PLATFORM_SUITES:%=build-posix/tests/%)
	@sh scripts/run-tests.sh build-posix $(PLATFORM_SUITES:%=build-posix/tests/%)
	@$(MAKE) --no-print-directory B=build-pie EXTRA_CFLAGS="-fPIE -DHL_PLAT_NO_CLOSE_RANGE" \
	  EXTRA_LDFLAGS=-pie all build-pie/tests/unit/test_platform
	@readelf -h build-pie/hilock | grep -q 'Type: *DYN' || { echo "test-platform: build-pie/hilock is no PIE"; exit 1; }
	@sh scripts/run-tests.sh build-pie build-pie/tests/unit/test_platform

# The suites that need no server (tests/unit/): seconds, no redis-server.
.PHONY: test-unit
test-unit: deps
	@$(MAKE) --no-print-directory lib $(UNIT_BIN)
	@sh scripts/run-tests.sh $(B) $(UNIT_BIN)

# Each suite is its own binary; every test starts (and stops) its own redis-server. Two suites
# run at a time (SUITES_AT_ONCE, scripts/run-tests.sh): they wait far more than they compute.
SUITES_AT_ONCE ?= 2
# the longest suites (~25-50 s each on the development machine), started first
SLOW_FIRST ?= test_cli test_keepalive test_wake test_sentinel test_cluster_scale test_slow_link
# the build before them: two compilers at a time (the machine's two CPUs; BUILD_JOBS=1: one)
BUILD_JOBS ?= 2
test: deps
	@sh scripts/check-licence.sh
	@sh scripts/check-testing-doc.sh
	@$(MAKE) --no-print-directory -j$(BUILD_JOBS) lib $(TEST_BIN) $(EXTRA_TEST_BINS) $(B)/hilock.pc $(CMAKE_CFG) \
	  $(B)/man/hilock.1 $(B)/man/hilock.3
	@sh scripts/check-version.sh $(B)
	@SUITES_AT_ONCE=$(SUITES_AT_ONCE) SLOW_FIRST="$(SLOW_FIRST)" sh scripts/run-tests.sh $(B) $(TEST_BIN)

# The suites against every Redis/Valkey server built from the source tarballs in SERVERS_SRC
# (default ../shared/servers; binaries cached in $${XDG_CACHE_HOME:-~/.cache}/hilock/servers by
# scripts/servers.sh): a matrix of suite x server in $(B)/servers-matrix.txt (docs/servers.md).
# SERVERS=redis-2.8.24,valkey-8.0.1 SUITES=lock,legacy: a subset; see scripts/test-servers.sh.
.PHONY: test-servers
test-servers: deps
	@$(MAKE) --no-print-directory lib $(TEST_BIN) $(EXTRA_TEST_BINS)
	@sh scripts/test-servers.sh $(B)

# The same suites built with AddressSanitizer + UndefinedBehaviorSanitizer.
test-asan: deps
	@$(MAKE) --no-print-directory B=build-asan OPT="-O1 -g" \
	  EXTRA_CFLAGS="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all" \
	  EXTRA_LDFLAGS="-fsanitize=address,undefined" test

# make test-cross ARCH=arm64|i386 [SUITES=lock,legacy]: the suites cross-built with Debian's
# cross compiler against a private sysroot of the target's libraries and run under qemu-user
# against the native redis-server, in build-cross-ARCH (scripts/test-cross.sh; SUITES: a subset).
ARCH ?= arm64
.PHONY: test-cross
test-cross:
	@sh scripts/test-cross.sh $(ARCH) build-cross-$(ARCH)

# The keepalive and handoff races under ThreadSanitizer (tests/tsan/*.c: plain programs, as
# Criterion cannot run under TSan, Snaipe/Criterion#274).
TSAN_SRC := $(sort $(wildcard tests/tsan/*.c))
.PHONY: test-tsan
test-tsan: deps
	@$(MAKE) --no-print-directory B=build-tsan OPT="-O1 -g" EXTRA_CFLAGS="-fsanitize=thread" \
	  EXTRA_LDFLAGS="-fsanitize=thread" $(patsubst tests/tsan/%.c,build-tsan/tsan/%,$(TSAN_SRC))
	@for t in $(patsubst tests/tsan/%.c,build-tsan/tsan/%,$(TSAN_SRC)); do \
	  TSAN_OPTIONS="halt_on_error=1 $$TSAN_OPTIONS" $$t || exit 1; done

$(B)/tsan/%: tests/tsan/%.c tests/fixture.c tests/fixture.h $(B)/libhilock.a $(HEADERS)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_TEST) -o $@ $< tests/fixture.c $(B)/libhilock.a $(LDLIBS_LIB) $(EXTRA_LDFLAGS)

# hilock built with musl (musl-gcc from musl-tools) and used by a static musl program against
# the native redis-server: blocking calls and the event-loop API (scripts/test-musl.sh; hiredis
# built from SERVERS_SRC's redis-6.0.20 once, into $${XDG_CACHE_HOME:-~/.cache}/hilock/musl).
.PHONY: test-musl
test-musl:
	@bash scripts/test-musl.sh build-musl

# The same suites under valgrind (leaks are errors).
test-valgrind: deps
	@$(MAKE) --no-print-directory lib $(TEST_BIN) $(EXTRA_TEST_BINS)
	@VALGRIND=1 sh scripts/run-tests.sh $(B) $(TEST_BIN)

# Only the build set and what demo.sh runs (scripts/deps.sh demo): no test tools, no npm.
demo:
	@sh scripts/deps.sh demo
	@$(MAKE) --no-print-directory lib $(EXTRA_DEMO)
	@sh scripts/demo.sh $(B)

bench: deps lib
	@$(MAKE) --no-print-directory $(B)/bench/bench
	@$(B)/bench/bench

# bench/tls.c times the library's own transports (src/transport/: transport.h, session.h): $(SRC_INC).
# Built from objects, so `make layers` can check that bench/'s files call each other one way.
BENCH_SRC := $(sort $(wildcard bench/*.c))
BENCH_OBJ := $(patsubst %.c,$(B)/%.o,$(BENCH_SRC))
BENCH_FIXTURES := tests/fixture.c tests/tls_fixture.c tests/cluster_fixture.c
$(B)/bench/%.o: bench/%.c $(wildcard bench/*.h) tests/fixture.h tests/tls_fixture.h tests/cluster_fixture.h \
    include/hilock_libuv.h $(HEADERS)
	@mkdir -p $(@D)
	$(CC) $(WARN) -O2 -g -D_GNU_SOURCE -Iinclude -Itests $(SRC_INC) $(OPENSSL_CFLAGS) -c $< -o $@
$(B)/bench/bench: $(BENCH_OBJ) $(BENCH_FIXTURES) $(B)/libhilock.a
	$(CC) $(WARN) -O2 -g -D_GNU_SOURCE -Iinclude -Itests $(OPENSSL_CFLAGS) -o $@ $(BENCH_OBJ) $(BENCH_FIXTURES) \
	  $(B)/libhilock.a $(LDLIBS_LIB) -luv

# -Isrc/platform, -Isrc/base: the command's process control (platform.h) and the library's rules
# for what messages show (base.h), the two layers cli/cli.h's Layer line lets it call
CLI_SRC := $(sort $(wildcard cli/*.c))
CLI_CFLAGS = $(WARN) $(OPT) $(TIME64) -Iinclude -Isrc/platform -Isrc/base $(EXTRA_CFLAGS)
# (objects only for make layers, which checks what they call: the command links its sources)
$(B)/cli/%.o: cli/%.c $(wildcard cli/*.h) $(HEADERS) src/platform/platform.h src/base/base.h
	@mkdir -p $(@D)
	$(CC) $(CLI_CFLAGS) -c $< -o $@
$(CLI_BIN): $(CLI_SRC) $(wildcard cli/*.h) $(HEADERS) src/platform/platform.h src/base/base.h $(B)/libhilock.a
	@mkdir -p $(@D)
	$(CC) $(CLI_CFLAGS) -o $@ $(CLI_SRC) $(B)/libhilock.a $(LDLIBS_LIB) $(EXTRA_LDFLAGS)
install: $(CLI_BIN) $(B)/man/hilock.1

# ---- proof under faults (torture/README.md) ----
# make torture [DURATION=s per mode] [SEED=n, 0 = new] [WORKERS=8] [MODES=single,redlock,...]
# make torture-violation [VIOLATIONS=...]: each checker path fed a violation on purpose (the
# delayed-restart rule broken; an async holding, a COMMAND tree that claim to outlive their
# lock; a fence logged going backwards; permits over the limit; a writer beside readers and a
# starved writer); passes if the checker reports each. The modes cli and
# cli-violation run $(CLI_BIN). Logs and reports: $(B)/torture/<mode>/.
DURATION ?= 20
SEED     ?= 0
WORKERS  ?= 8
MODES    ?=
TORTURE_SRC := $(sort $(wildcard torture/*.c))
TORTURE_DEF := $(if $(wildcard include/hilock_legacy.h),-DHL_TORTURE_LEGACY)
# (objects only for make layers, which checks that torture/'s files call each other one way:
# the binary links its sources)
TORTURE_OBJ := $(patsubst %.c,$(B)/%.o,$(TORTURE_SRC))
$(B)/torture/%.o: torture/%.c torture/torture.h tests/fixture.h $(HEADERS)
	@mkdir -p $(@D)
	$(CC) $(WARN) -O2 -g -D_GNU_SOURCE $(TORTURE_DEF) -Iinclude -Itests -Itorture -c $< -o $@

.PHONY: torture torture-violation fuzz
VIOLATIONS ?= redlock-violation,async-violation,cli-violation,fence-violation,sem-violation,rw-violation
torture: deps lib
	@$(MAKE) --no-print-directory $(B)/torture/torture $(CLI_BIN)
	$(B)/torture/torture --dir=$(B)/torture --duration=$(DURATION) --seed=$(SEED) --workers=$(WORKERS) \
	  $(if $(MODES),--modes=$(MODES))

# make torture-servers: torture's single and legacy modes against the oldest and the newest
# server of SERVERS_SRC (as make test-servers; TORTURE_SERVERS=a,b picks others, TORTURE_MODES
# other modes); DURATION, SEED, WORKERS as above. Logs: $(B)/torture/servers/<server>/<mode>/.
.PHONY: torture-servers
torture-servers: deps lib
	@$(MAKE) --no-print-directory $(B)/torture/torture $(CLI_BIN)
	@DURATION=$(DURATION) SEED=$(SEED) WORKERS=$(WORKERS) sh scripts/test-servers.sh --torture $(B)

torture-violation: deps lib
	@$(MAKE) --no-print-directory $(B)/torture/torture $(CLI_BIN)
	$(B)/torture/torture --dir=$(B)/torture --duration=$(DURATION) --seed=$(SEED) --modes=$(VIOLATIONS)

$(B)/torture/torture: $(TORTURE_SRC) torture/torture.h tests/fixture.c tests/fixture.h tests/sentinel_fixture.c \
    tests/sentinel_fixture.h tests/tls_fixture.c tests/tls_fixture.h tests/cluster_fixture.c \
    tests/cluster_fixture.h $(B)/libhilock.a $(HEADERS)
	@mkdir -p $(@D)
	$(CC) $(WARN) -O2 -g -D_GNU_SOURCE $(TORTURE_DEF) -Iinclude -Itests -Itorture -o $@ $(TORTURE_SRC) \
	  tests/fixture.c tests/sentinel_fixture.c tests/tls_fixture.c tests/cluster_fixture.c $(B)/libhilock.a \
	  $(LDLIBS_LIB) $(EXTRA_LDFLAGS)

# libFuzzer targets (fuzz/fuzz_*.c), built with clang, ASan and UBSan against the library
# compiled the same way in $(FUZZ_B); each runs FUZZ_SECONDS on a scratch copy of its seed
# corpus (fuzz/corpus/<target>/, never written to). Crashes: $(FUZZ_B)/artifacts/.
# FUZZ_SEED=N: libFuzzer's -seed (CI's short run: the same inputs every run, so a landing is not
# decided by chance; a crash found there is a seed input kept in the corpus). Unset: random.
FUZZ_SECONDS ?= 10
FUZZ_SEED    ?=
FUZZ_B       ?= build-fuzz
FUZZ_SAN     := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
FUZZ_TARGETS := $(patsubst fuzz/%.c,%,$(sort $(wildcard fuzz/fuzz_*.c)))
fuzz:
	@sh scripts/deps.sh clang libclang-rt-14-dev
	@$(MAKE) --no-print-directory B=$(FUZZ_B) CC=clang OPT="-O1 -g" \
	  EXTRA_CFLAGS="$(FUZZ_SAN) -fsanitize=fuzzer-no-link" \
	  $(FUZZ_B)/libhilock.a $(patsubst %,$(FUZZ_B)/fuzz/%,$(FUZZ_TARGETS))
	@FUZZ_SEED="$(FUZZ_SEED)" sh fuzz/run.sh $(FUZZ_B) $(FUZZ_SECONDS) $(FUZZ_TARGETS)

$(B)/fuzz/%: fuzz/%.c $(B)/libhilock.a $(HEADERS) $(SRC_H) $(wildcard legacy/*.h)
	@mkdir -p $(@D)
	clang $(WARN) -O1 -g -D_GNU_SOURCE $(FUZZ_SAN) -fsanitize=fuzzer -Iinclude $(SRC_INC) -I$(B) -o $@ $< \
	  $(B)/libhilock.a $(LDLIBS_LIB)

# The guides keep their layout under DOCDIR (README.md's links to docs/ work there).
DOCS := $(sort $(wildcard docs/*.md))
install: lib $(B)/hilock.pc $(CMAKE_CFG) $(B)/man/hilock.3
	install -d $(DESTDIR)$(LIBDIR)/pkgconfig $(DESTDIR)$(INCDIR) $(DESTDIR)$(LIBDIR)/cmake/hilock
	install -m 644 $(HEADERS) $(DESTDIR)$(INCDIR)/
	install -m 644 $(B)/libhilock.a $(DESTDIR)$(LIBDIR)/
	install -m 755 $(B)/libhilock.so.$(VERSION) $(DESTDIR)$(LIBDIR)/
	ln -sf libhilock.so.$(VERSION) $(DESTDIR)$(LIBDIR)/libhilock.so.$(SOVERSION)
	ln -sf libhilock.so.$(SOVERSION) $(DESTDIR)$(LIBDIR)/libhilock.so
	install -m 644 $(B)/hilock.pc $(DESTDIR)$(LIBDIR)/pkgconfig/
	install -d $(DESTDIR)$(MANDIR)/man3
	install -m 644 $(B)/man/hilock.3 $(DESTDIR)$(MANDIR)/man3/hilock.3
	install -m 644 $(CMAKE_CFG) $(DESTDIR)$(LIBDIR)/cmake/hilock/
	install -d $(DESTDIR)$(DOCDIR)/docs
	install -m 644 README.md LICENSE $(DESTDIR)$(DOCDIR)/
	install -m 644 $(DOCS) $(DESTDIR)$(DOCDIR)/docs/
	$(INSTALL_EXTRA)

uninstall:
	rm -f $(DESTDIR)$(INCDIR)/hilock.h $(DESTDIR)$(INCDIR)/hilock_legacy.h $(DESTDIR)$(INCDIR)/hilock_inspect.h \
	  $(DESTDIR)$(LIBDIR)/libhilock.* $(DESTDIR)$(LIBDIR)/pkgconfig/hilock.pc \
	  $(DESTDIR)$(BINDIR)/hilock $(DESTDIR)$(MANDIR)/man1/hilock.1 $(DESTDIR)$(MANDIR)/man3/hilock.3
	rm -f $(DESTDIR)$(INCDIR)/hilock.hpp $(addprefix $(DESTDIR)$(LIBDIR)/cmake/hilock/,$(notdir $(CMAKE_CFG)))
	rm -f $(DESTDIR)$(INCDIR)/hilock_async.h $(DESTDIR)$(INCDIR)/hilock_observe.h $(DESTDIR)$(INCDIR)/hilock_libuv.h $(DESTDIR)$(INCDIR)/hilock_libevent.h
	rm -f $(DESTDIR)$(DOCDIR)/README.md $(DESTDIR)$(DOCDIR)/LICENSE $(addprefix $(DESTDIR)$(DOCDIR)/,$(DOCS))
	-rmdir $(DESTDIR)$(LIBDIR)/cmake/hilock $(DESTDIR)$(DOCDIR)/docs $(DESTDIR)$(DOCDIR) 2>/dev/null

# Debian packages (debian/): libhilock0, libhilock-dev, hilock-tools in $(B)/deb/, built by
# dpkg-buildpackage from a copy of the tree in $(B)/deb/src (it writes to the parent
# directory), then checked by lintian. `make deb-check` also installs them, builds a program
# against them and removes them again (tests/deb-check.sh; root).
.PHONY: deb deb-check
deb:
	@sh scripts/deps.sh dpkg-dev debhelper lintian fakeroot
	@test "$$(dpkg-parsechangelog -S Version)" = "$(VERSION)" || \
	  { echo "debian/changelog's version is not $(VERSION) (include/hilock.h)"; exit 1; }
	rm -rf $(B)/deb && mkdir -p $(B)/deb/src
	tar -cf - --exclude=./.git --exclude='./build*' --exclude=./$(B) --exclude=node_modules . | \
	  tar -xf - -C $(B)/deb/src
	cd $(B)/deb/src && dpkg-buildpackage -us -uc -b
	lintian --fail-on error -I $(B)/deb/*.changes

deb-check:
	@sh tests/deb-check.sh $(B)

clean:
	rm -rf build build-asan build-tsan build-fuzz build-posix build-pie
