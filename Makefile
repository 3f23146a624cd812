# hilock -- make | make test | make demo | make bench | make install PREFIX=...
# `make test` and `make demo` install missing Debian packages first (scripts/deps.sh).

PREFIX    ?= /usr/local
LIBDIR    ?= $(PREFIX)/lib
INCDIR    ?= $(PREFIX)/include
BINDIR    ?= $(PREFIX)/bin
MANDIR    ?= $(PREFIX)/share/man
SOVERSION := 0
VERSION   := 0.1.0

CC        ?= cc
B         ?= build
WARN      := -std=c99 -Wall -Wextra -Wstrict-prototypes -Wwrite-strings -Werror
OPT       ?= -O2 -g
HIREDIS_LIBS := $(shell pkg-config --libs hiredis 2>/dev/null || echo -lhiredis)
CFLAGS_LIB = $(WARN) $(OPT) -fPIC -fvisibility=hidden -DHILOCK_BUILDING -Iinclude -Isrc -I$(B) $(EXTRA_CFLAGS)
LDLIBS_LIB = $(HIREDIS_LIBS) -lpthread

LIB_SRC   := $(wildcard src/*.c) $(wildcard legacy/*.c)
LUA       := $(sort $(wildcard src/lua/*.lua) $(wildcard legacy/lua/*.lua))
LIB_OBJ   := $(patsubst %.c,$(B)/%.o,$(LIB_SRC)) $(B)/gen/scripts.o
HEADERS   := include/hilock.h $(wildcard include/hilock_legacy.h)

TEST_SRC  := $(sort $(wildcard tests/test_*.c))
TEST_BIN  := $(patsubst tests/%.c,$(B)/tests/%,$(TEST_SRC))
TEST_SUPPORT := $(filter-out $(TEST_SRC),$(wildcard tests/*.c))
CFLAGS_TEST = $(WARN) -O1 -g -D_GNU_SOURCE -Iinclude -Itests $(EXTRA_CFLAGS)

.PHONY: all lib test test-asan test-valgrind demo bench install uninstall deps clean check-install

all: lib $(EXTRA_ALL)
lib: $(B)/libhilock.a $(B)/libhilock.so

$(B)/gen/scripts.c: $(LUA) scripts/embed-lua.sh
	@mkdir -p $(@D)
	sh scripts/embed-lua.sh $@ $(LUA)

$(B)/gen/scripts.o: $(B)/gen/scripts.c src/internal.h include/hilock.h
	$(CC) $(CFLAGS_LIB) -c $< -o $@

$(B)/%.o: %.c src/internal.h $(HEADERS) $(wildcard legacy/*.h)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_LIB) -c $< -o $@

$(B)/libhilock.a: $(LIB_OBJ)
	rm -f $@
	ar rcs $@ $^

$(B)/libhilock.so: $(LIB_OBJ)
	$(CC) -shared -Wl,-soname,libhilock.so.$(SOVERSION) -Wl,--no-undefined $(EXTRA_LDFLAGS) \
	    -o $(B)/libhilock.so.$(VERSION) $^ $(LDLIBS_LIB)
	ln -sf libhilock.so.$(VERSION) $(B)/libhilock.so.$(SOVERSION)
	ln -sf libhilock.so.$(SOVERSION) $@

$(B)/hilock.pc: Makefile
	@mkdir -p $(@D)
	printf '%s\n' 'prefix=$(PREFIX)' 'libdir=$(LIBDIR)' 'includedir=$(INCDIR)' '' \
	  'Name: hilock' 'Description: Locks on Redis: single master, Sentinel, Redlock, legacy SETNX fleets' \
	  'Version: $(VERSION)' 'Requires.private: hiredis' 'Cflags: -I$${includedir}' \
	  'Libs: -L$${libdir} -lhilock' 'Libs.private: -lpthread' > $@

# ---- tests ----
$(B)/tests/%: tests/%.c $(TEST_SUPPORT) $(wildcard tests/*.h) $(B)/libhilock.a
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_TEST) -o $@ $< $(TEST_SUPPORT) $(B)/libhilock.a $(LDLIBS_LIB) -lcriterion $(EXTRA_LDFLAGS)

deps:
	@sh scripts/deps.sh

# Each suite is its own binary; every test starts (and stops) its own redis-server.
test: deps
	@$(MAKE) --no-print-directory lib $(TEST_BIN) $(EXTRA_TEST_BINS)
	@sh scripts/run-tests.sh $(B) $(TEST_BIN)

# The same suites built with AddressSanitizer + UndefinedBehaviorSanitizer.
test-asan: deps
	@$(MAKE) --no-print-directory B=build-asan OPT="-O1 -g" \
	  EXTRA_CFLAGS="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all" \
	  EXTRA_LDFLAGS="-fsanitize=address,undefined" test

# The same suites under valgrind (leaks are errors).
test-valgrind: deps
	@$(MAKE) --no-print-directory lib $(TEST_BIN)
	@VALGRIND=1 sh scripts/run-tests.sh $(B) $(TEST_BIN)

demo: deps lib $(EXTRA_DEMO)
	@sh scripts/demo.sh $(B)

bench: deps lib
	@$(MAKE) --no-print-directory $(B)/bench/bench
	@$(B)/bench/bench

$(B)/bench/bench: bench/bench.c tests/fixture.c tests/fixture.h $(B)/libhilock.a
	@mkdir -p $(@D)
	$(CC) $(WARN) -O2 -g -D_GNU_SOURCE -Iinclude -Itests -o $@ bench/bench.c tests/fixture.c $(B)/libhilock.a $(LDLIBS_LIB)

install: lib $(B)/hilock.pc
	install -d $(DESTDIR)$(LIBDIR)/pkgconfig $(DESTDIR)$(INCDIR)
	install -m 644 $(HEADERS) $(DESTDIR)$(INCDIR)/
	install -m 644 $(B)/libhilock.a $(DESTDIR)$(LIBDIR)/
	install -m 755 $(B)/libhilock.so.$(VERSION) $(DESTDIR)$(LIBDIR)/
	ln -sf libhilock.so.$(VERSION) $(DESTDIR)$(LIBDIR)/libhilock.so.$(SOVERSION)
	ln -sf libhilock.so.$(SOVERSION) $(DESTDIR)$(LIBDIR)/libhilock.so
	install -m 644 $(B)/hilock.pc $(DESTDIR)$(LIBDIR)/pkgconfig/
	$(INSTALL_EXTRA)

uninstall:
	rm -f $(DESTDIR)$(INCDIR)/hilock.h $(DESTDIR)$(INCDIR)/hilock_legacy.h \
	  $(DESTDIR)$(LIBDIR)/libhilock.* $(DESTDIR)$(LIBDIR)/pkgconfig/hilock.pc

clean:
	rm -rf build build-asan
