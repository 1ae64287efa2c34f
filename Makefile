# A thin convenience over Meson: `make run` and `make check` work on a fresh
# Debian 12 machine as root (missing packages are installed first).
BUILD ?= build
MESON_OPTS ?= --buildtype=release -Dwerror=true -Dstatic_ward=true

.PHONY: all deps build run check check-asan clean install bench

all: build

deps:
	@scripts/install-deps.sh

$(BUILD)/build.ninja:
	meson setup $(BUILD) $(MESON_OPTS)

build: deps $(BUILD)/build.ninja
	ninja -C $(BUILD)
	@# the kernels' bytecode: the runners are read-only inside sandboxes
	@/usr/bin/python3 -m compileall -q runners

# The main job: an untrusted script (examples/untrusted.py) run through
# `ward run`, first with its output, then as a JSON verdict.
run: build
	@echo '$$ ward run --ro examples/untrusted.py:/untrusted.py -- python3 /untrusted.py'
	@$(BUILD)/src/ward run --ro $(CURDIR)/examples/untrusted.py:/untrusted.py -- python3 /untrusted.py; \
	  echo "(exit status $$?)"
	@echo
	@echo '$$ ward run --json --memory 64M --timeout 2 -- python3 -c "..."'
	@$(BUILD)/src/ward run --json --memory 64M --timeout 2 -- python3 -c 'import os; print("hello from", os.uname().nodename)' \
	  | python3 -m json.tool
	@echo
	@echo '$$ ward exec --lang python -c "data = [3, 1, 4, 1, 5]" -c "sorted(data)" -c "1 / 0"'
	@$(BUILD)/src/ward exec --lang python -c 'data = [3, 1, 4, 1, 5]' -c 'sorted(data)' -c '1 / 0'; \
	  echo "(exit status $$?)"

check: build
	@tests/npm/install.sh
	@tests/run.sh $(BUILD)

bench: build
	@WARD=$(CURDIR)/$(BUILD)/src/ward bench/run.sh

install: build
	meson install -C $(BUILD)

clean:
	rm -rf $(BUILD) build-asan build-fuzz
