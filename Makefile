# gopmi — see README.md. Every target works on a fresh Debian 12 with Go.
GO       ?= go
PREFIX   ?= /usr/local
BIN      := bin
VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS  := -s -w -X main.version=$(VERSION)
CMDS     := ./hostrm/cmd/gopmi ./shim/cmd/gopmi-shim ./hostrm/local/cmd/gopmi-rm-local ./hostrm/slurm/cmd/gopmi-rm-slurm ./hostrm/slurm/cmd/gopmi-slurm
# systemd's units for the node daemon (gopmi.socket, gopmi.service); the
# local unit directory, which systemd searches.
SYSTEMD_UNITDIR ?= $(PREFIX)/lib/systemd/system
# The man pages (docs/man).
MANDIR   ?= $(PREFIX)/share/man
# The Slurm the plugin is built for: Debian's by default, or a site's
# configured source tree (SLURM_SRC=) or its install, whose configured
# source is $(SLURM_PREFIX)/src (SLURM_PREFIX=); see docs/admin/slurm.md.
SLURM_SRC    ?=
SLURM_PREFIX ?=
# Where that Slurm loads plugins from; make install-slurm-plugin installs
# mpi_gopmi.so there.
ifneq ($(SLURM_PREFIX),)
SLURM_PLUGINDIR ?= $(SLURM_PREFIX)/lib/slurm
else
SLURM_PLUGINDIR ?= $(firstword $(wildcard /usr/lib/*/slurm-wlm) /usr/lib/x86_64-linux-gnu/slurm-wlm)
endif
FUZZTIME ?= 30s
# Packages with native fuzz targets, and their targets.
FUZZ     := ./bridge/pmi1:FuzzParse ./bridge/pmi1:FuzzSplit ./bridge/pmi1:FuzzRoundTrip \
            ./bridge/pmi2:FuzzParse ./bridge/pmi2:FuzzSplit ./bridge/pmi2:FuzzRoundTrip \
            ./bridge/kvs:FuzzDecode ./shim:FuzzDecodeFast ./shim:FuzzBootstrap ./bridge:FuzzSessions ./shim/pmix/engine:FuzzFrames
DEMO_N   ?= 4
APT      := DEBIAN_FRONTEND=noninteractive apt-get install -y -q

.PHONY: all build install install-mpiexec flux flux-plugin install-flux-plugin slurm-plugin install-slurm-plugin slurm-release test-slurm-release test-slurm-versions bench-slurm-release demo deps deps-test test test-unit integration bench fuzz proto check-proto c-rules generate lint clean

all: build

build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/ $(CMDS)
	@# gopmi-pmix, the shim with the PMIx face, links libpmix: built where it is.
	@if pkg-config --exists pmix 2>/dev/null; then \
		echo "CGO_ENABLED=1 $(GO) build -tags pmix ... ./shim/cmd/gopmi-pmix"; \
		CGO_ENABLED=1 $(GO) build -trimpath -tags pmix -ldflags '$(LDFLAGS)' -o $(BIN)/ ./shim/cmd/gopmi-pmix && \
		echo "CGO_ENABLED=1 $(GO) build -tags pmix -o $(BIN)/gopmi-slurm-pmix ./hostrm/slurm/cmd/gopmi-slurm" && \
		CGO_ENABLED=1 $(GO) build -trimpath -tags pmix -ldflags '$(LDFLAGS)' -o $(BIN)/gopmi-slurm-pmix ./hostrm/slurm/cmd/gopmi-slurm && \
		echo "CGO_ENABLED=1 $(GO) build -tags pmix ... ./hostrm/cmd/gopmi-pmix-tools" && \
		CGO_ENABLED=1 $(GO) build -trimpath -tags pmix -ldflags '$(LDFLAGS)' -o $(BIN)/ ./hostrm/cmd/gopmi-pmix-tools; \
	else echo "libpmix not found (apt-get install libpmix-dev): gopmi-pmix, gopmi-slurm-pmix and gopmi-pmix-tools not built, PMIx jobs unavailable"; rm -f $(BIN)/gopmi-pmix $(BIN)/gopmi-slurm-pmix $(BIN)/gopmi-pmix-tools; fi

install: build
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(SYSTEMD_UNITDIR)
	install -m 0755 $(BIN)/gopmi $(BIN)/gopmi-shim $(BIN)/gopmi-rm-local $(BIN)/gopmi-rm-slurm $(BIN)/gopmi-slurm $(DESTDIR)$(PREFIX)/bin/
	if test -e $(BIN)/gopmi-pmix; then install -m 0755 $(BIN)/gopmi-pmix $(BIN)/gopmi-slurm-pmix $(BIN)/gopmi-pmix-tools $(DESTDIR)$(PREFIX)/bin/; fi
	install -m 0644 contrib/systemd/gopmi.socket $(DESTDIR)$(SYSTEMD_UNITDIR)/
	sed 's|@BINDIR@|$(PREFIX)/bin|' contrib/systemd/gopmi.service > $(DESTDIR)$(SYSTEMD_UNITDIR)/gopmi.service
	chmod 0644 $(DESTDIR)$(SYSTEMD_UNITDIR)/gopmi.service
	install -d $(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(MANDIR)/man5 $(DESTDIR)$(MANDIR)/man8
	install -m 0644 docs/man/gopmi.1 docs/man/gopmi-run.1 $(DESTDIR)$(MANDIR)/man1/
	install -m 0644 docs/man/gopmi-mpi.conf.5 $(DESTDIR)$(MANDIR)/man5/
	install -m 0644 docs/man/gopmi-daemon.8 $(DESTDIR)$(MANDIR)/man8/

# gopmi as MPICH's mpiexec, in $(PREFIX)/bin (before /usr/bin in PATH):
# a singleton MPICH program, started with no process manager, runs
# "mpiexec -pmi_args ..." and gopmi serves it (docs/admin/shared-node.md: MPICH programs started without a launcher). It
# shadows Debian's mpiexec (Hydra), which does not know -pmi_args; other
# arguments run a job as gopmi run does.
install-mpiexec: install
	ln -sf gopmi $(DESTDIR)$(PREFIX)/bin/mpiexec

# Slurm's MPI plugin (srun --mpi=gopmi), built against the Slurm's own
# configured source: Debian's source package of the installed slurm-wlm,
# or SLURM_SRC / SLURM_PREFIX (contrib/slurm/build.sh, 22.05 to 25.11).
# It finds the gopmi binaries in $(PREFIX)/bin unless mpi.conf says
# GopmiBinDir.
slurm-plugin:
	BINDIR='$(PREFIX)/bin' SLURM_SRC='$(SLURM_SRC)' SLURM_PREFIX='$(SLURM_PREFIX)' GOPMI_VERSION='$(VERSION)' contrib/slurm/build.sh '$(BIN)/mpi_gopmi.so'

# Restart every slurmd afterwards: slurmd loads the MPI plugins at start.
install-slurm-plugin: slurm-plugin
	install -m 0755 $(BIN)/mpi_gopmi.so $(DESTDIR)$(SLURM_PLUGINDIR)/mpi_gopmi.so

# Flux's job-shell plugin (flux run -o pmi=gopmi), built against the Flux
# that pkg-config finds (FLUX_PREFIX/lib/pkgconfig first; /opt/flux is
# where ../shared/vendor/flux/build.sh installs it). It finds the gopmi
# binaries in $(PREFIX)/bin unless the job says GOPMI_BINDIR or
# -o gopmi.bindir. docs/admin/flux.md.
FLUX_PREFIX ?= $(firstword $(patsubst %/bin/flux,%,$(shell command -v flux 2>/dev/null)) /opt/flux)
FLUX_PKG    := PKG_CONFIG_PATH=$(FLUX_PREFIX)/lib/pkgconfig$${PKG_CONFIG_PATH:+:$$PKG_CONFIG_PATH} pkg-config
FLUX_PLUGINDIR ?= $(FLUX_PREFIX)/lib/flux/shell/plugins

flux-plugin:
	@$(FLUX_PKG) --exists flux-core flux-idset || { echo "flux-plugin: no Flux found (pkg-config flux-core in $(FLUX_PREFIX)/lib/pkgconfig or on PKG_CONFIG_PATH); set FLUX_PREFIX"; exit 1; }
	@mkdir -p $(BIN)
	$(CC) -O2 -Wall -Wextra -Wno-unused-parameter -Werror -shared -fPIC -o $(BIN)/gopmi_flux.so \
		-DGOPMI_BINDIR='"$(PREFIX)/bin"' -Icontrib/slurm -Icontrib/flux $$($(FLUX_PKG) --cflags flux-core flux-idset) \
		contrib/flux/gopmi_flux.c contrib/flux/launch.c contrib/flux/server.c contrib/flux/bootstrap.c $$($(FLUX_PKG) --libs flux-core flux-idset)

# Every job shell loads it; it stays inert unless a job asks for it.
install-flux-plugin: flux-plugin
	install -d $(DESTDIR)$(FLUX_PLUGINDIR)
	install -m 0644 $(BIN)/gopmi_flux.so $(DESTDIR)$(FLUX_PLUGINDIR)/gopmi.so

# The README's first command: install what the demo needs, build and
# install gopmi, then run an MPI program on $(DEMO_N) ranks with it, built
# with MPICH, then with Open MPI.
demo: deps install
	mkdir -p $(BIN)/demo
	mpicc.mpich -O2 -o $(BIN)/demo/mpi_hello integration/testdata/src/mpi_hello.c
	$(PREFIX)/bin/gopmi run -n $(DEMO_N) $(BIN)/demo/mpi_hello
	@# The same program built with Open MPI, which speaks PMIx: gopmi run
	@# sees it links Open MPI and serves it through gopmi-pmix.
	mpicc.openmpi -O2 -o $(BIN)/demo/mpi_hello_openmpi integration/testdata/src/mpi_hello.c
	$(PREFIX)/bin/gopmi run -n $(DEMO_N) $(BIN)/demo/mpi_hello_openmpi

# What the tests and the demo need from Debian (MPICH 4.0.2, Slurm's
# libpmi2, protoc; Open MPI 4.1.4 and OpenPMIx 4.2.2 with its tools).
# Needs root; a no-op when everything is there. It leaves plain mpicc and
# mpiexec meaning what they did (contrib/tools/apt-keep-mpi.sh).
deps:
	@if ! command -v mpicc.mpich >/dev/null || ! command -v mpiexec.hydra >/dev/null || \
	    ! test -e /usr/include/slurm/pmi2.h || ! command -v protoc >/dev/null || \
	    ! command -v mpicc.openmpi >/dev/null || ! test -e /usr/lib/x86_64-linux-gnu/pmix2/include/pmix_server.h || \
	    ! command -v pps >/dev/null; then \
		apt-get update -q && contrib/tools/apt-keep-mpi.sh mpich libmpich-dev libpmi2-0-dev protobuf-compiler \
			openmpi-bin libopenmpi-dev libpmix-dev libpmix-bin; \
	fi

# The tests also run a real Slurm cluster (slurm-wlm, munge), build
# Slurm's MPI plugin from Debian's source package (dpkg-dev, a compiler)
# and capture loopback traffic to check that gopmi's links are private
# (tcpdump); Debian's mpi4py (Open MPI, loaded at run time) is a PMIx
# client whose program does not show it.
deps-test: deps
	@if ! command -v slurmd >/dev/null || ! command -v munged >/dev/null || \
	    ! command -v dpkg-source >/dev/null || ! command -v gcc >/dev/null || \
	    ! command -v systemd-socket-activate >/dev/null || ! command -v useradd >/dev/null || \
	    ! command -v tcpdump >/dev/null || ! test -e /usr/lib/python3/dist-packages/mpi4py/__init__.py || \
	    ! command -v jq >/dev/null; then \
		apt-get update -q && contrib/tools/apt-keep-mpi.sh slurm-wlm munge build-essential dpkg-dev systemd passwd tcpdump python3-mpi4py jq; \
	fi
	@$(MAKE) --no-print-directory flux

# Flux for the Flux tests (Debian packages none): the flux on PATH, else
# /opt/flux, else a build of the pinned releases kept in FLUX_VENDOR
# (../shared/vendor/flux: flux-core 0.88.0, flux-pmix 0.7.0) into
# /opt/flux, as root, about 5 minutes once. Without any, the Flux tests
# skip and say so.
FLUX_VENDOR ?= $(firstword $(wildcard ../shared/vendor/flux /work/shared/vendor/flux))
flux:
	@if command -v flux >/dev/null || test -x /opt/flux/bin/flux; then :; \
	elif test -z "$(FLUX_VENDOR)" || ! test -x $(FLUX_VENDOR)/build.sh; then echo "Flux: none on PATH or in /opt/flux, and no sources to build it (FLUX_VENDOR=$(FLUX_VENDOR)): the Flux tests will skip"; \
	elif test "$$(id -u)" != 0; then echo "Flux: none on PATH or in /opt/flux; building it needs root: the Flux tests will skip"; \
	else PREFIX=/opt/flux $(FLUX_VENDOR)/build.sh || echo "Flux: the build failed: the Flux tests will skip"; fi

# Slurm releases besides Debian's 22.05, built from SchedMD's sources kept
# in SLURM_VENDOR (../shared/vendor/slurm: 24.11.7, 25.11.7) into
# /opt/slurm-<series> by its build.sh (as root, 5-8 minutes each, once).
SLURM_VENDOR  ?= $(firstword $(wildcard ../shared/vendor/slurm /work/shared/vendor/slurm))
SLURM_TESTED  ?= 25.11.7
SLURM_VERSIONS ?= 24.11.7 25.11.7
# The integration tests that run on a Slurm cluster: the Slurm cases, on
# each release.
SLURM_TESTS   := ^(TestSlurm|TestSrun|TestOpenMPIUnderSrun|TestOpenMPIDynamicWithinJob|TestMpi4py|TestLateRead)

# Slurm release $(1) is installed in $(call slurm_prefix,$(1)) (as
# ../shared/vendor/slurm/build.sh leaves it); slurm_built is a shell test
# that it is built there, its configured source kept.
slurm_prefix = /opt/slurm-$(basename $(1))
slurm_built = test -x $(call slurm_prefix,$(1))/sbin/slurmd && test -f $(call slurm_prefix,$(1))/src/config.h && \
	$(call slurm_prefix,$(1))/sbin/slurmd -V | grep -q "slurm $(1)\$$"

# slurm-release builds Slurm $(V) from SLURM_VENDOR unless it is built
# already; without root or the sources, or when the build fails, it says
# so (test-slurm-release then says its cases are skipped).
slurm-release:
	@if $(call slurm_built,$(V)); then :; \
	elif test -z "$(SLURM_VENDOR)" || ! test -f $(SLURM_VENDOR)/slurm-$(V).tar.gz; then echo "Slurm $(V): not in $(call slurm_prefix,$(V)), and no sources to build it (SLURM_VENDOR=$(SLURM_VENDOR))"; \
	elif test "$$(id -u)" != 0; then echo "Slurm $(V): not in $(call slurm_prefix,$(V)); building it needs root"; \
	else $(SLURM_VENDOR)/build.sh $(V) || echo "Slurm $(V): the build failed (its log: $(call slurm_prefix,$(V))/build.log); its cases cannot run"; fi

# test-slurm-release runs the Slurm cases on Slurm $(V), loading the
# plugin make slurm-plugin builds for it (its gopmi release "dev", as the
# tests' binaries are), or says why they are skipped.
test-slurm-release: slurm-release
	@if $(call slurm_built,$(V)); then \
		$(MAKE) --no-print-directory slurm-plugin SLURM_PREFIX=$(call slurm_prefix,$(V)) SLURM_SRC= BIN=$(BIN)/slurm-$(V) VERSION=dev && \
		cmd="GOPMI_IT_SLURM_PREFIX=$(call slurm_prefix,$(V)) GOPMI_IT_SLURM_PLUGIN=$(abspath $(BIN))/slurm-$(V)/mpi_gopmi.so $(GO) test -race -timeout 20m -run '$(SLURM_TESTS)' ./integration/" && \
		echo "$$cmd" && eval "$$cmd"; \
	else echo "the Slurm cases on Slurm $(V) skipped: no Slurm $(V) built in $(call slurm_prefix,$(V)) (see above)"; fi

# bench-slurm-release measures srun on Slurm $(V) against its own
# mpi/pmi2 and mpi/pmix (make bench runs it for each of SLURM_VERSIONS).
bench-slurm-release:
	@if [ "$$(id -u)" = 0 ] && $(call slurm_built,$(V)); then \
		$(GO) run ./integration/bench -gopmi $(BIN)/gopmi -slurm -slurm-prefix $(call slurm_prefix,$(V)) $(BENCHFLAGS) && \
		if test -x $(BIN)/gopmi-slurm-pmix && command -v mpicc.openmpi >/dev/null; then \
			$(GO) run ./integration/bench -gopmi $(BIN)/gopmi -slurm -slurm-prefix $(call slurm_prefix,$(V)) -openmpi $(BENCHFLAGS); fi; \
	else echo "bench: srun on Slurm $(V) not measured: not built in $(call slurm_prefix,$(V)) (make slurm-release V=$(V), as root)"; fi

# The Slurm cases on every release of SLURM_VERSIONS.
test-slurm-versions:
	@for v in $(SLURM_VERSIONS); do $(MAKE) --no-print-directory test-slurm-release V=$$v || exit 1; done

# Unit, transcript, fuzz-seed and integration tests, all under -race; the
# integration tests run twice, with jobs on one node served by gopmi run
# itself and by gopmi-shim processes, and the Slurm cases a third time on
# Slurm $(SLURM_TESTED) (built from SLURM_VENDOR when it is not installed).
# What they need from Debian comes first (deps).
test: deps-test
	@test -z "$$(gofmt -l $$(git ls-files '*.go' | grep -v '\.pb\.go$$'))" || { gofmt -l $$(git ls-files '*.go' | grep -v '\.pb\.go$$'); echo 'gofmt needed'; exit 1; }
	$(GO) vet ./...
	$(GO) vet -tags pmix ./...
	$(GO) test -race -timeout 20m ./...
	$(GO) test -race -tags pmix ./shim/pmix/
	GOPMI_IT_SERVE=shim $(GO) test -race -timeout 20m ./integration/
	$(MAKE) --no-print-directory test-slurm-release V=$(SLURM_TESTED)

test-unit:
	$(GO) test -race -short ./...

integration:
	$(GO) test -race -timeout 20m ./integration/...
	GOPMI_IT_SERVE=shim $(GO) test -race -timeout 20m ./integration/

# gopmi run against mpiexec.hydra; then, where a Slurm cluster can run
# (root, slurm-wlm, munge), srun --mpi=gopmi against srun --mpi=pmi2 on a
# two-node cluster the bench starts, and at -N 8 on an eight-node one whose
# fence tree has width 2 (three levels). With Open MPI: its hello and a PMIx
# job (pmix_bench) against mpirun.openmpi, and under srun against
# srun --mpi=pmix.
bench: build
	$(GO) run ./integration/bench -gopmi $(BIN)/gopmi $(BENCHFLAGS)
	@# The Slurm backend's own code at 16 to 4,096 simulated nodes.
	$(GO) run ./integration/bench -scale 16,128,1024,4096 -scale-width 16,4
	@if test -x $(BIN)/gopmi-pmix && command -v mpirun.openmpi >/dev/null && command -v mpicc.openmpi >/dev/null; then \
		$(GO) run ./integration/bench -gopmi $(BIN)/gopmi -openmpi $(BENCHFLAGS); \
	else echo "bench: Open MPI not measured: needs openmpi-bin, libopenmpi-dev and libpmix-dev (make deps)"; fi
	@if [ "$$(id -u)" = 0 ] && command -v slurmd >/dev/null && command -v munged >/dev/null; then \
		$(GO) run ./integration/bench -gopmi $(BIN)/gopmi -slurm $(BENCHFLAGS); \
		$(GO) run ./integration/bench -gopmi $(BIN)/gopmi -slurm -nodes 8 -tree-width 2 -hello 16 -pmi2 64,128 $(BENCHFLAGS); \
		if test -x $(BIN)/gopmi-slurm-pmix && command -v mpicc.openmpi >/dev/null; then \
			$(GO) run ./integration/bench -gopmi $(BIN)/gopmi -slurm -openmpi $(BENCHFLAGS); \
		else echo "bench: Open MPI under srun not measured: needs openmpi-bin, libopenmpi-dev and libpmix-dev (make deps)"; fi; \
	else echo "bench: srun not measured: needs root, slurm-wlm and munge (make deps-test)"; fi
	@# flux run -o pmi=gopmi against Flux's own PMI, in instances of 2
	@# and 4 brokers (contrib/tools/bench-flux.sh).
	@if (command -v flux >/dev/null || test -x /opt/flux/bin/flux) && command -v jq >/dev/null && \
	    $(MAKE) --no-print-directory flux-plugin >/dev/null; then \
		contrib/tools/bench-flux.sh $(BIN) $(BIN)/gopmi_flux.so; \
	else echo "bench: Flux not measured: needs Flux (make flux) and jq"; fi
	@# srun on each other Slurm release built in /opt/slurm-<series>
	@# (make slurm-release V=...), against that release's own plugins.
	@for v in $(SLURM_VERSIONS); do $(MAKE) --no-print-directory bench-slurm-release V=$$v || exit 1; done

fuzz:
	@set -e; for t in $(FUZZ); do pkg=$${t%%:*}; fn=$${t##*:}; \
		echo "== $$pkg $$fn"; $(GO) test -run='^$$' -fuzz="^$$fn$$" -fuzztime=$(FUZZTIME) $$pkg; done

proto:
	$(GO) -C contrib/tools build -o $(CURDIR)/.tools/ google.golang.org/protobuf/cmd/protoc-gen-go google.golang.org/grpc/cmd/protoc-gen-go-grpc
	PATH=$(CURDIR)/.tools:$$PATH protoc -I proto \
		--go_out=. --go_opt=module=github.com/gopmi/gopmi \
		--go-grpc_out=. --go-grpc_opt=module=github.com/gopmi/gopmi \
		$(shell find proto -name '*.proto' | sort)

# The header of the rules Slurm's mpi/gopmi shares with Go (fence modes,
# Open MPI's soname), contrib/slurm/gopmi_rules.h, from shim/serve.CRules;
# the same check runs in `make test` (TestCRulesHeader).
c-rules:
	$(GO) test -count=1 -run TestCRulesHeader ./shim/serve/ -args -update-c-rules

# The committed generated code must match what `make proto` makes; the
# same check runs in `make test` (proto/proto_test.go).
check-proto:
	$(GO) test -run TestGeneratedCodeIsCurrent ./proto/

# The contract's method-by-method forwarders (Deferred, Complete,
# Unimplemented, plugintest.Fake, the local link, the gRPC service's
# adapters on both sides) are generated from plugin/backend.go;
# plugin/internal/forwardgen's test checks them. So are the bootstrap's
# plain-form codecs (the shim's fast decoder's tables, gopmi run's writer,
# mpi/gopmi's JSON names), from bootstrap.proto's descriptor.
generate:
	$(GO) run ./plugin/internal/forwardgen

lint:
	@test -z "$$(gofmt -l $$(git ls-files '*.go' | grep -v '\.pb\.go$$'))"
	$(GO) vet ./...
	$(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...

clean:
	rm -rf $(BIN) .tools
