# dimoc: model compiler, CPU/GPU fitters, tractography.
#   make            build bin/dimoc
#   make demo       simulate a phantom, fit ball_2_sticks, print estimates against truth
#   make test       every CPU test, one per core at once (prints "N passed, N failed")
#   make tests      build the C unit tests only (build/tests/NAME; tests/run.sh PATTERN runs some)
#   make test-asan  every CPU test again with the program built under ASan and UBSan
#   make test-peers the long comparisons with peers (tests/peers/)
#   make test-gpu   the GPU tests (needs an NVIDIA GPU and driver)
#   make fuzz       libFuzzer over lexer, parser and checker, and the NIfTI, text and .tck
#                   file code (FUZZ_SECONDS each, default 60)
#   make generated  regenerate generated/ from models/
#   make lib        build the shared library build/libdimoc.so (the C API, include/dimoc.h)
#   make install PREFIX=/usr/local

CC      ?= cc
CFLAGS  ?= -O2 -g
WARN    := -Wall -Wextra
CUDA_HOME ?= /usr/local/cuda
PREFIX  ?= /usr/local
BUILD   := build
FUZZ_SECONDS ?= 60

CPPFLAGS += -Iinclude -Icompiler -Iruntime -Itemplates -I$(BUILD) -I/usr/include/nifti -I/usr/include/gifti \
            -DDIMOC_VERSION=\"$(shell cat VERSION)\"
# niftilib, znzlib, libpng, giftiio, expat and jansson (JSON) are linked statically so that the
# binary runs where only libz exists (the GPU machine has no niftilib, no giftiio); libzip (TRX
# archives) and ISA-L (the .nii.gz writer's deflate), of which Debian ships no static
# libraries, are the other shared ones.  giftiio needs only
# nifti_datatype_to_string from a niftilib, which libnifti2 provides.
# On x86-64, glibc's libmvec gives runtime/vecmath its vector log, exp, sin and cos.
MVEC    := $(if $(filter x86_64,$(shell uname -m)),-lmvec)
LDLIBS  += -Wl,-Bstatic -lgiftiio -lexpat -lnifti2 -lznz -lpng -ldeflate -ljansson -Wl,-Bdynamic -lisal -lzip -lz $(MVEC) -lm -ldl -lpthread
OMPFLAGS := -fopenmp

COMPILER_SRC := $(filter-out compiler/front/fuzz_front.c,$(wildcard compiler/*/*.c))
RUNTIME_SRC  := $(wildcard runtime/*/*.c)
CLI_SRC      := $(wildcard cli/*.c)
GEN_SRC      := $(BUILD)/parser.c $(BUILD)/lexer.c

TEST_SRC     := $(wildcard tests/unit/*.c)

COMPILER_OBJ := $(COMPILER_SRC:%.c=$(BUILD)/%.o) $(BUILD)/parser.o $(BUILD)/lexer.o
RUNTIME_OBJ  := $(RUNTIME_SRC:%.c=$(BUILD)/%.o)
CLI_OBJ      := $(CLI_SRC:%.c=$(BUILD)/%.o)

TEST_BIN     := $(TEST_SRC:tests/unit/%.c=$(BUILD)/tests/%)
LIBS         := $(BUILD)/libdimoc-runtime.a $(BUILD)/libdimoc-compiler.a
LINK_LIBS    := -L$(BUILD) -ldimoc-runtime -ldimoc-compiler $(LDLIBS)

# The shared library (make lib): the same sources compiled position-independent into $(PIC),
# its own archives, and libdimoc.so.MAJOR linked from the API's objects and what they call.
PIC          := $(BUILD)/pic
API_MAJOR    := $(shell sed -n 's/^\#define DIMOC_API_VERSION_MAJOR \([0-9]*\).*/\1/p' include/dimoc.h)
API_MINOR    := $(shell sed -n 's/^\#define DIMOC_API_VERSION_MINOR \([0-9]*\).*/\1/p' include/dimoc.h)
LIB_SONAME   := libdimoc.so.$(API_MAJOR)
LIB_FILE     := $(LIB_SONAME).$(API_MINOR)
API_SRC      := $(wildcard runtime/api/*.c)
PIC_COMPILER_OBJ := $(COMPILER_SRC:%.c=$(PIC)/%.o) $(PIC)/parser.o $(PIC)/lexer.o
PIC_RUNTIME_OBJ  := $(RUNTIME_SRC:%.c=$(PIC)/%.o)
# expat and libdeflate are linked statically as into the program; Debian's archives of niftilib,
# znzlib, giftiio, libpng and jansson are not position-independent (text relocations against
# stdout/stderr), so the library takes their shared ones, and only those that it calls
# (--as-needed): the model compiler alone needs none.
LIB_LDLIBS   := -Wl,--as-needed -lgiftiio -lnifti2 -lznz -lpng -ljansson \
                -Wl,-Bstatic -lexpat -ldeflate -Wl,-Bdynamic -lisal -lzip -lz $(MVEC) -lm -ldl -lpthread

.PHONY: all deps demo test tests test-gpu test-asan test-peers fuzz generated install clean lib \
        install-lib
all: bin/dimoc

# Installs the Debian packages the build and the tests need, once (see scripts/install-deps.sh).
.deps-ok: scripts/install-deps.sh
	bash scripts/install-deps.sh
	touch $@
deps: .deps-ok

# One bison run makes both files (a grouped target: make -j must not run it twice at once).
$(BUILD)/parser.c $(BUILD)/parser.h &: compiler/front/parser.y | $(BUILD)/.dir
	bison -Wall --defines=$(BUILD)/parser.h -o $(BUILD)/parser.c $<
$(BUILD)/lexer.c: compiler/front/lexer.l $(BUILD)/parser.h | $(BUILD)/.dir
	flex -o $@ $<

$(BUILD)/parser.o $(BUILD)/lexer.o $(PIC)/parser.o $(PIC)/lexer.o: CFLAGS += -Wno-unused-function \
    -Wno-sign-compare
# The CSD solver's loops: -O3 vectorises its rank-one updates and four-way dot products (1.6x
# faster, bit-identical results: no reassociation, no contraction into FMAs).
$(BUILD)/runtime/csd/csd_cpu.o $(PIC)/runtime/csd/csd_cpu.o: CFLAGS += -O3
# The tensor fit (dimoc dti, the models' tensor starts): -O3 vectorises its row-product sums,
# 7.2 -> 5.1 us a voxel at 105 measurements, bit-identical results (no reassociation).
$(BUILD)/runtime/dti/dti_fit.o $(PIC)/runtime/dti/dti_fit.o: CFLAGS += -O3
# tckmap's sampled TDI rounds single-precision sums as MRtrix's build does (no FMA): keep any
# -march from contracting them.
$(BUILD)/runtime/fodtrack/tdi.o $(PIC)/runtime/fodtrack/tdi.o: CFLAGS += -ffp-contract=off
# dicelib's clusters need its single-precision sums exactly: no fused multiply-adds either.
$(BUILD)/runtime/streamline/cluster.o $(PIC)/runtime/streamline/cluster.o: CFLAGS += -O3 \
    -ffp-contract=off
$(BUILD)/%.o: $(BUILD)/%.c
	$(CC) $(CPPFLAGS) $(CFLAGS) $(WARN) -MMD -MP -c -o $@ $<
$(BUILD)/%.o: %.c $(BUILD)/parser.h
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(WARN) $(OMPFLAGS) -MMD -MP -c -o $@ $<

$(PIC)/%.o: $(BUILD)/%.c
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -fPIC $(WARN) -MMD -MP -c -o $@ $<
$(PIC)/%.o: %.c $(BUILD)/parser.h
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -fPIC $(WARN) $(OMPFLAGS) -MMD -MP -c -o $@ $<
$(PIC)/libdimoc-compiler.a: $(PIC_COMPILER_OBJ)
	rm -f $@ && ar rcs $@ $^
$(PIC)/libdimoc-runtime.a: $(PIC_RUNTIME_OBJ)
	rm -f $@ && ar rcs $@ $^
# Only the dimoc_* functions are exported (runtime/api/dimoc.map); the API's objects are linked
# whole, the rest taken from the archives as they are called.
$(BUILD)/$(LIB_FILE): $(API_SRC:%.c=$(PIC)/%.o) $(PIC)/libdimoc-runtime.a \
                      $(PIC)/libdimoc-compiler.a runtime/api/dimoc.map
	$(CC) -shared $(CFLAGS) $(OMPFLAGS) -Wl,-soname,$(LIB_SONAME) \
	    -Wl,--version-script=runtime/api/dimoc.map -Wl,--no-undefined -o $@ \
	    $(API_SRC:%.c=$(PIC)/%.o) -L$(PIC) -ldimoc-runtime -ldimoc-compiler $(LIB_LDLIBS)
$(BUILD)/$(LIB_SONAME): $(BUILD)/$(LIB_FILE)
	ln -sf $(LIB_FILE) $@
$(BUILD)/libdimoc.so: $(BUILD)/$(LIB_SONAME)
	ln -sf $(LIB_SONAME) $@
lib: $(BUILD)/libdimoc.so

$(BUILD)/libdimoc-compiler.a: $(COMPILER_OBJ)
	rm -f $@ && ar rcs $@ $^
$(BUILD)/libdimoc-runtime.a: $(RUNTIME_OBJ)
	rm -f $@ && ar rcs $@ $^

bin/dimoc: $(CLI_OBJ) $(LIBS)
	@mkdir -p bin
	$(CC) $(CFLAGS) $(OMPFLAGS) -o $@ $(CLI_OBJ) $(LINK_LIBS)

# The C unit tests: one program each, linked like the program (tests/run.sh runs them).
$(BUILD)/tests/%: tests/unit/%.c $(LIBS)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) -Itests/unit $(CFLAGS) $(WARN) $(OMPFLAGS) -MMD -MP -o $@ $< $(LINK_LIBS)
tests: $(TEST_BIN)

$(BUILD)/.dir:
	mkdir -p $(BUILD) && touch $@

MODELS := $(basename $(notdir $(wildcard models/*.model)))
generated: bin/dimoc
	for m in $(MODELS); do bin/dimoc compile models/$$m.model -o generated/$$m || exit 1; done

demo: .deps-ok bin/dimoc
	bash examples/demo.sh

test: .deps-ok bin/dimoc $(TEST_BIN)
	bash tests/run.sh
# the tests of the C API and the Python package build on the shared library
test: lib

test-gpu: bin/dimoc
	bash tests/run.sh --gpu

test-peers: .deps-ok bin/dimoc
	bash tests/run.sh --peers

# The whole CPU test suite under AddressSanitizer and UndefinedBehaviorSanitizer: the program,
# its libraries and the C unit tests are built with both (the fitters that the program compiles
# at run time are not).
SAN_FLAGS := -O2 -g -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
test-asan: .deps-ok
	$(MAKE) BUILD=build-asan CFLAGS="$(SAN_FLAGS)" bin/dimoc-asan tests
	DIMOC_BIN=bin/dimoc-asan TEST_BINDIR=build-asan/tests \
	    ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
	    LSAN_OPTIONS=suppressions=$(CURDIR)/tests/lsan.supp bash tests/run.sh

bin/dimoc-asan: $(CLI_OBJ) $(LIBS)
	@mkdir -p bin
	$(CC) $(CFLAGS) $(OMPFLAGS) -o $@ $(CLI_OBJ) $(LINK_LIBS)

FUZZ_CFLAGS := -O1 -g -fsanitize=fuzzer,address,undefined
bin/fuzz-front: compiler/front/fuzz_front.c $(COMPILER_SRC) $(GEN_SRC)
	@mkdir -p bin
	clang $(CPPFLAGS) $(FUZZ_CFLAGS) -Wno-unused-function -o $@ compiler/front/fuzz_front.c \
	    $(COMPILER_SRC) $(GEN_SRC) -lm
# The file readers: NIfTI (io/volume.c), text matrices and bvals/bvecs (io/textio.c), and the
# .tck writer and readers (tractogram/tck.c); seeds in tests/fuzz/corpus/NAME, crashes kept in
# tests/fuzz/regressions/NAME (replayed by tests/unit/test_io.c).
FUZZ_IO_SRC := runtime/io/volume.c runtime/io/mif.c runtime/io/formats.c runtime/io/bigalloc.c runtime/io/gz_blocks.c runtime/io/textio.c runtime/tractogram/tck.c $(wildcard runtime/util/*.c)
FUZZ_IO := nifti text tck tckread
bin/fuzz-%: tests/fuzz/fuzz_%.c tests/fuzz/fuzz_io.h $(FUZZ_IO_SRC)
	@mkdir -p bin
	clang $(CPPFLAGS) $(FUZZ_CFLAGS) -o $@ $< $(FUZZ_IO_SRC) \
	    -Wl,-Bstatic -lnifti2 -lznz -ldeflate -Wl,-Bdynamic -lisal -lz -lm -lpthread
fuzz: bin/fuzz-front $(FUZZ_IO:%=bin/fuzz-%)
	mkdir -p fuzz-corpus && cp -n models/*.model tests/compiler/bad/*.model fuzz-corpus/ 2>/dev/null; \
	bin/fuzz-front -max_total_time=$(FUZZ_SECONDS) -timeout=5 fuzz-corpus tests/compiler/fuzz-regressions
	for t in $(FUZZ_IO); do mkdir -p fuzz-corpus-$$t && \
	    bin/fuzz-$$t -max_total_time=$(FUZZ_SECONDS) -timeout=5 -rss_limit_mb=4096 \
	        fuzz-corpus-$$t tests/fuzz/corpus/$$t tests/fuzz/regressions/$$t || exit 1; done

# The templates, one folder per engine (fit, track, csd, fodtrack, commit) and the maths they
# share: each folder installed whole, as the program compiles them at run time.
TEMPLATE_DIRS := $(patsubst %/,%,$(sort $(dir $(wildcard templates/*/*.h))))

# examples/demo.sh runs from the build tree only, so it is not installed.
# WARM=1: also compile every shipped model's fitters into the installing user's cache
# (`dimoc warm`: the host compiler's, and NVRTC's where a GPU is usable).
install: bin/dimoc
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/share/dimoc/models \
	    $(DESTDIR)$(PREFIX)/share/dimoc/templates $(DESTDIR)$(PREFIX)/share/dimoc/pipelines \
	    $(DESTDIR)$(PREFIX)/share/doc/dimoc
	install -m 755 bin/dimoc $(DESTDIR)$(PREFIX)/bin/
	install -m 755 pipelines/*.sh $(DESTDIR)$(PREFIX)/share/dimoc/pipelines/
	install -d $(DESTDIR)$(PREFIX)/share/dimoc/pipelines/lib
	install -m 644 pipelines/lib/*.bash $(DESTDIR)$(PREFIX)/share/dimoc/pipelines/lib/
	install -m 644 models/*.model $(DESTDIR)$(PREFIX)/share/dimoc/models/
	install -d $(DESTDIR)$(PREFIX)/share/dimoc/models/lib
	install -m 644 models/lib/*.model $(DESTDIR)$(PREFIX)/share/dimoc/models/lib/
	install -d $(DESTDIR)$(PREFIX)/share/dimoc/data/directions
	install -m 644 data/directions/*.txt $(DESTDIR)$(PREFIX)/share/dimoc/data/directions/
	$(foreach d,$(TEMPLATE_DIRS),install -d $(DESTDIR)$(PREFIX)/share/dimoc/$(d) && \
	    install -m 644 $(wildcard $(d)/*.h $(d)/*.c $(d)/*.cu) \
	        $(DESTDIR)$(PREFIX)/share/dimoc/$(d)/ &&) true
	install -m 644 README.md docs/*.md $(DESTDIR)$(PREFIX)/share/doc/dimoc/
	$(if $(WARM),$(DESTDIR)$(PREFIX)/bin/dimoc warm --quiet)

# The C API: the shared library (libdimoc.so.MAJOR.MINOR, its SONAME and development links),
# its header and a pkg-config file; the library finds the data installed above by its own place
# (PREFIX/lib/../share/dimoc).
install: install-lib
install-lib: lib
	install -d $(DESTDIR)$(PREFIX)/lib/pkgconfig $(DESTDIR)$(PREFIX)/include
	install -m 755 $(BUILD)/$(LIB_FILE) $(DESTDIR)$(PREFIX)/lib/
	ln -sf $(LIB_FILE) $(DESTDIR)$(PREFIX)/lib/$(LIB_SONAME)
	ln -sf $(LIB_SONAME) $(DESTDIR)$(PREFIX)/lib/libdimoc.so
	install -m 644 include/dimoc.h $(DESTDIR)$(PREFIX)/include/
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@VERSION@|$(shell cat VERSION)|' runtime/api/dimoc.pc.in \
	    >$(DESTDIR)$(PREFIX)/lib/pkgconfig/dimoc.pc

clean:
	rm -rf build build-asan bin

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
