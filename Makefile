# mvm — build, test and demo targets. `make test` is what CI runs (.ci/run).
#
# On an x86_64 (or any non-arm64) host the arm64 parts run in "the lab": an
# emulated arm64 machine (QEMU with EL2) whose Linux has a real /dev/kvm.
# On an arm64 host with /dev/kvm the same integration tests run directly.

GO        ?= go
CACHE     ?= .cache/lab
OUT       ?= out
LAB_TIMEOUT ?= 25m
# LAB_RUN=REGEX runs only the matching integration tests (go test -run syntax);
# LAB_SKIP=REGEX leaves the matching ones out (go test -skip).
LAB_RUN   ?= .
LAB_SKIP  ?=
# The integration tests make test runs in the instruction-time lab instead of
# the wall-clock one: the A/B benches, whose boots repeat to ~1% there and
# whose guest sleeps cost no host time, so they need fewer and shorter boots
# (integration/bench_test.go, abPlan), and, to share make test's time
# between the two labs, some functional tests that boot Linux several times
# and time nothing (a guest's sleep or mvm's --timeout costs no host time
# there either). That lab runs on one host thread, beside the wall-clock lab.
INSN_TESTS := ^(TestBenchAB|TestBenchCPUs|TestLinuxBoot|TestKernelFormats|TestCommandModeEnds|TestCommandModeCompressedModules|TestCommandModeBench|TestProfileLight)$$
# LAB_CPU=MODEL: the lab machine's QEMU CPU model (lab -cpu; default max),
# e.g. neoverse-n1 for a host without FEAT_S2FWB.
LAB_CPU   ?=
LAB_FLAGS = $(if $(LAB_CPU),-cpu $(LAB_CPU)) -time $(LAB_TIME) -smp $(LAB_SMP)
# LAB_TIME=wall|insn: the lab's clock (lab -time). wall: multi-threaded TCG,
# the host's wall clock seen through two levels of emulation (end-to-end
# figures, ±10-20% between runs on a shared 2-core host). insn: QEMU's
# instruction counting (-icount shift=0,align=off,sleep=off): one ns per
# executed guest instruction, so a path's cost is its instruction count and
# repeats to ~1% whatever the host does. README, "The lab's two clocks".
LAB_TIME  ?= wall
# LAB_SMP=N: the lab machine's CPUs (lab -smp). 2 by default: the host has
# two cores and the wall-clock lab runs one host thread per lab CPU. In
# instruction time every lab CPU runs on one host thread and idle ones cost
# nothing, so bench-insn gives the lab a CPU per vCPU of the bring-up
# benchmarks it judges (8 and 16 vCPUs, and mvm's other threads): with 2,
# an 8-vCPU guest's threads queue behind each other on the lab's run queues
# and the measured bring-up doubles and scatters (docs/boot-phases.md,
# "Bring-up in instruction time").
LAB_SMP   ?= 2
# LAB_ENV_EXTRA: more VAR=value for the integration tests (lab-test-nofwb).
LAB_ENV_EXTRA ?=
# BENCH_RUN=REGEX picks the lab benchmarks make bench runs.
BENCH_RUN ?= CPUOn|CPUOnFew|LinuxBoot|ProfileOverhead|ProfileBreakdown|Virtio|QEMUProfile|BringUp|Hotplug|Boot64|Footprint
GOFLAGS_ARM64 = CGO_ENABLED=0 GOOS=linux GOARCH=arm64
CROSS     ?= aarch64-linux-gnu-

PAYLOADS  := $(patsubst guest/payloads/%.s,$(OUT)/guest/%.bin,$(wildcard guest/payloads/*.s))
GO_SRC    := $(shell find . -name '*.go' -not -path './.cache/*' -not -path './out/*') go.mod go.sum
HOST_ARCH := $(shell uname -m)
NATIVE    := $(if $(and $(filter aarch64 arm64,$(HOST_ARCH)),$(wildcard /dev/kvm)),yes,)

# Kernel modules from the lab kernel's package (lab/fetch.sh keeps them
# decompressed): the guests' virtio drivers, overlay for command mode's
# --overlay, and tun for the lab machine.
MODULES   := virtio_mmio virtio_blk failover net_failover virtio_net virtio-rng tun overlay
# virtio_mmio also as the package ships it, xz-compressed, for command
# mode's compressed-module test (MVM_MODULES_XZ).
MODULE_FILES := $(patsubst %,$(CACHE)/modules/%.ko,$(MODULES)) $(CACHE)/modules-xz/virtio_mmio.ko.xz
# Each module file into the lab under its cache directory's name:
# /lab/modules/X.ko, /lab/modules-xz/X.ko.xz.
MODULES_ADD := $(foreach f,$(MODULE_FILES),-add $(f)=/lab/$(notdir $(patsubst %/,%,$(dir $(f))))/$(notdir $(f)))
# The ext4 root image of the virtio tests, made on this host with mkfs.ext4 -d.
ROOTFS    := $(OUT)/lab/root.ext4

# Files the integration tests find through MVM_* environment variables.
# The lab kernel's symbol files (lab/fetch-symbols.sh, from its -dbg package):
# the --guest-symbols tests read a vmlinux ELF and a System.map.
SYMBOL_FILES := $(CACHE)/vmlinux.sym $(CACHE)/System.map
# The lab kernel gzip'd, as `make Image.gz` builds one, for the --kernel
# format tests (TestKernelFormats, which also wraps it as an EFI zboot image).
KERNEL_GZ := $(OUT)/lab/vmlinuz.gz
LAB_FILES := $(OUT)/arm64/mvm $(OUT)/arm64/mvm-testhooks $(OUT)/arm64/integration.test $(PAYLOADS) $(CACHE)/vmlinuz $(CACHE)/busybox $(ROOTFS) \
	$(SYMBOL_FILES) $(KERNEL_GZ)
LAB_ADD   := $(foreach f,$(LAB_FILES),-add $(f)=/lab/$(notdir $(f))) \
	$(MODULES_ADD)
LAB_ENV   := MVM_BIN=/lab/mvm MVM_TESTHOOKS_BIN=/lab/mvm-testhooks MVM_GUEST_DIR=/lab MVM_LINUX=/lab/vmlinuz MVM_LINUX_GZ=/lab/vmlinuz.gz MVM_BUSYBOX=/lab/busybox \
	MVM_MODULES=/lab/modules MVM_MODULES_XZ=/lab/modules-xz MVM_ROOTFS=/lab/root.ext4 MVM_VIRTIOFSD=/usr/libexec/virtiofsd MVM_LINUX_VMLINUX=/lab/vmlinux.sym MVM_LINUX_SYSTEM_MAP=/lab/System.map
# QEMU for arm64 (qemu-system-aarch64 with its libraries, 70 MB, lab/fetch-qemu.sh),
# the VMM that mvm profile's tests profile. It goes into the lab only when the
# tests run need it (all of them, or a LAB_RUN that names QEMU): LAB_QEMU=yes|no
# overrides. Natively the host's qemu-system-aarch64 is used.
LAB_QEMU  ?= $(if $(or $(filter .,$(LAB_RUN)),$(findstring QEMU,$(LAB_RUN))),yes,no)
QEMU_CPIO := $(CACHE)/qemu.cpio
# Debian's arm64 virtiofsd with its libraries (lab/fetch-virtiofsd.sh), for
# the --share and command-mode tests (all of them, or a LAB_RUN that names
# VirtioFS or CommandMode).
LAB_VIRTIOFSD ?= $(if $(or $(filter .,$(LAB_RUN)),$(findstring VirtioFS,$(LAB_RUN)),$(findstring CommandMode,$(LAB_RUN))),yes,no)
VIRTIOFSD_CPIO := $(CACHE)/virtiofsd.cpio
LAB_CPIO  := $(if $(filter yes,$(LAB_QEMU)),$(QEMU_CPIO)) $(if $(filter yes,$(LAB_VIRTIOFSD)),$(VIRTIOFSD_CPIO))

# The performance gate's output and the files it takes into its lab.
GATE_OUT := $(OUT)/perf-gate.txt
GATE_FILES := $(OUT)/arm64/vmm.test $(OUT)/arm64/integration.test $(OUT)/arm64/mvm $(OUT)/guest/mmio.bin $(OUT)/guest/cpuonwfi.bin
.PHONY: all build test test-wall test-insn lab-test-insn lab-files perf-gate unit vet lab-test lab-test-nofwb report-test report-shots demo bench bench-insn lab-deps lab-fetch guest clean help

all: build

help:
	@echo "make demo    boot the bundled payload in the arm64 lab and show what happened"
	@echo "make test    unit tests (-race) on this host, then the arm64 integration tests"
	@echo "make bench   benchmarks (host and lab; LAB_TIME=insn: in instruction time)"
	@echo "make bench-insn  the same in the instruction-time lab"
	@echo "make build   bin/mvm for this host; out/arm64/mvm for arm64"

build: bin/mvm $(OUT)/arm64/mvm

bin/mvm: $(GO_SRC)
	$(GO) build -o $@ ./cmd/mvm

$(OUT)/arm64/mvm: $(GO_SRC)
	$(GOFLAGS_ARM64) $(GO) build -o $@ ./cmd/mvm

# mvm with test hooks (a vCPU thread making forbidden calls once the seccomp
# filter is on, vmm/testhook_on_arm64.go): for the integration tests only.
$(OUT)/arm64/mvm-testhooks: $(GO_SRC)
	$(GOFLAGS_ARM64) $(GO) build -tags mvmtesthooks -o $@ ./cmd/mvm

$(OUT)/arm64/integration.test: $(GO_SRC)
	$(GOFLAGS_ARM64) $(GO) test -c -o $@ ./integration

# Bare-metal payloads: assembled with Debian's binutils-aarch64-linux-gnu,
# linked at the base of guest RAM, flattened to raw binaries.
guest: $(PAYLOADS)
$(OUT)/guest/%.bin: guest/payloads/%.s $(wildcard guest/payloads/*.inc) | lab-deps
	@mkdir -p $(dir $@)
	$(CROSS)as -I guest/payloads -o $(OUT)/guest/$*.o $<
	$(CROSS)ld -Ttext=0x40000000 -e _start -o $(OUT)/guest/$*.elf $(OUT)/guest/$*.o
	$(CROSS)objcopy -O binary $(OUT)/guest/$*.elf $@

# Host packages the lab needs, installed only when missing.
lab-deps:
	@bash lab/host-deps.sh

# Debian trixie's arm64 kernel and busybox, downloaded once into $(CACHE).
lab-fetch: $(CACHE)/vmlinuz $(MODULE_FILES) $(QEMU_CPIO) $(VIRTIOFSD_CPIO) $(SYMBOL_FILES)
$(CACHE)/vmlinuz $(CACHE)/busybox $(MODULE_FILES): | lab-deps
	bash lab/fetch.sh $(CACHE)
$(SYMBOL_FILES): | $(CACHE)/vmlinuz lab-deps
	bash lab/fetch-symbols.sh $(CACHE)
$(QEMU_CPIO): | lab-deps
	bash lab/fetch-qemu.sh $(CACHE)
$(VIRTIOFSD_CPIO): | lab-deps
	bash lab/fetch-virtiofsd.sh $(CACHE)

$(KERNEL_GZ): $(CACHE)/vmlinuz
	mkdir -p $(@D) && gzip -9 -n -c $< > $@.tmp && mv $@.tmp $@

$(ROOTFS): guest/rootfs/sbin/init $(CACHE)/busybox | lab-deps
	rm -rf $(OUT)/lab/rootfs && mkdir -p $(OUT)/lab/rootfs/bin $(OUT)/lab/rootfs/dev \
	  $(OUT)/lab/rootfs/proc $(OUT)/lab/rootfs/sys $(OUT)/lab/rootfs/tmp
	cp -r guest/rootfs/sbin $(OUT)/lab/rootfs/
	cp $(CACHE)/busybox $(OUT)/lab/rootfs/bin/busybox
	rm -f $@ && mkfs.ext4 -q -F -L mvmroot -d $(OUT)/lab/rootfs $@ 16M

vet:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo "gofmt needed"; exit 1; }
	$(GO) vet ./...
	GOARCH=arm64 $(GO) vet ./...
	GOARCH=arm64 $(GO) vet -tags mvmtesthooks ./vmm

unit: vet | lab-deps
	$(GO) test -race -count=1 ./...

# The integration tests, in the lab or natively. Results some of them leave
# in MVM_LAB_OUT (a run and a bench JSON) come back into $(LAB_OUT) for
# report-test.
LAB_OUT := $(OUT)/lab-out
ifeq ($(NATIVE),yes)
lab-test: $(LAB_FILES) $(MODULE_FILES)
	rm -rf $(LAB_OUT) && mkdir -p $(LAB_OUT)
	MVM_LAB_OUT=$(abspath $(LAB_OUT)) MVM_QEMU=$$(command -v qemu-system-aarch64) MVM_BIN=$(abspath $(OUT)/arm64/mvm) MVM_GUEST_DIR=$(abspath $(OUT)/guest) \
	MVM_TESTHOOKS_BIN=$(abspath $(OUT)/arm64/mvm-testhooks) MVM_LINUX=$(abspath $(CACHE)/vmlinuz) MVM_LINUX_GZ=$(abspath $(KERNEL_GZ)) MVM_BUSYBOX=$(abspath $(CACHE)/busybox) \
	MVM_MODULES=$(abspath $(CACHE)/modules) MVM_MODULES_XZ=$(abspath $(CACHE)/modules-xz) MVM_ROOTFS=$(abspath $(ROOTFS)) MVM_VIRTIOFSD=/usr/libexec/virtiofsd \
	MVM_LINUX_VMLINUX=$(abspath $(CACHE)/vmlinux.sym) MVM_LINUX_SYSTEM_MAP=$(abspath $(CACHE)/System.map) \
	$(LAB_ENV_EXTRA) $(OUT)/arm64/integration.test -test.v -test.run '$(value LAB_RUN)' -test.skip '$(value LAB_SKIP)' -test.timeout $(LAB_TIMEOUT)
else
lab-test: $(LAB_FILES) $(MODULE_FILES) $(LAB_CPIO) | lab-deps
	rm -rf $(LAB_OUT)
	$(GO) run ./lab $(LAB_FLAGS) -kernel $(CACHE)/vmlinuz -busybox $(CACHE)/busybox -timeout $(LAB_TIMEOUT) -out $(LAB_OUT) \
	  $(LAB_ADD) $(foreach f,$(LAB_CPIO),-cpio $(f)) \
	  -run '$(if $(filter yes,$(LAB_QEMU)),MVM_QEMU=/usr/bin/qemu-system-aarch64 )MVM_LAB_OUT=$$LAB_OUT $(LAB_ENV) $(LAB_ENV_EXTRA) /lab/integration.test -test.v -test.run "$(value LAB_RUN)" -test.skip "$(value LAB_SKIP)" -test.timeout $(LAB_TIMEOUT)'
endif

# The tests whose failure only a host without FEAT_S2FWB can show, in a lab
# with such a CPU (its own output directory: lab-test's is report-test's
# input).
# On an arm64 host there is no such lab: the test ran with the others.
ifeq ($(NATIVE),yes)
lab-test-nofwb:
	@echo "lab-test-nofwb: native arm64 host; TestCPUOffKeepsGuestMapped ran in lab-test"
else
lab-test-nofwb:
	@$(MAKE) --no-print-directory lab-test LAB_CPU=neoverse-n1 LAB_OUT=$(OUT)/lab-out-nofwb \
	  LAB_RUN='^TestCPUOffKeepsGuestMapped$$' LAB_ENV_EXTRA=MVM_LAB_NO_FWB=1
endif

# The HTML reports of the lab's runs, rendered by a real browser (Debian's
# chromium, installed by lab-deps), and the lab's live metrics scrape linted
# by promtool (Debian's prometheus, likewise); report-shots also refreshes the
# screenshots in docs/.
# MVM_REPORT_FIXTURES is a list of directories (lab-test's first, then the
# instruction-time lab's), searched in order for each result.
FIXTURES = $(abspath $(LAB_OUT)):$(abspath $(INSN_OUT))
report-test: | lab-deps
	MVM_REPORT_FIXTURES=$(FIXTURES) $(GO) test -count=1 -v -run '^TestBrowser$$' ./report/
	MVM_REPORT_FIXTURES=$(FIXTURES) $(GO) test -count=1 -v -run '^TestPromtoolLiveScrape$$' ./exits/metrics/

report-shots: | lab-deps
	MVM_REPORT_FIXTURES=$(FIXTURES) MVM_REPORT_SHOTS=$(abspath docs) $(GO) test -count=1 -v -run '^TestBrowser$$' ./report/

# make test: everything is built first; then two chains run side by side,
# the unit tests followed by the wall-clock lab, and the performance gate
# followed by the instruction-time lab's tests (INSN_TESTS). Instruction
# counts cannot be moved by the other chain's load, and that lab takes one
# host thread. Then the browser and promtool checks of both labs' results.
ifeq ($(NATIVE),yes)
test:
	@$(MAKE) --no-print-directory lab-files
	@$(MAKE) --no-print-directory unit
	@$(MAKE) --no-print-directory lab-test perf-gate
	@$(MAKE) --no-print-directory report-test
else
test:
	@$(MAKE) --no-print-directory lab-files
	@$(MAKE) --no-print-directory -j2 --output-sync=target test-wall test-insn
	@$(MAKE) --no-print-directory report-test
endif

test-wall:
	@$(MAKE) --no-print-directory unit
	@$(MAKE) --no-print-directory lab-test LAB_SKIP='$(INSN_TESTS)'

test-insn:
	@$(MAKE) --no-print-directory perf-gate
	@$(MAKE) --no-print-directory lab-test-insn

# The instruction-time lab's share of make test (INSN_TESTS), with its own
# output directory, which report-test reads beside lab-test's. Its CPU is a
# neoverse-n1, which has no FEAT_S2FWB, so TestCPUOffKeepsGuestMapped runs
# there too, with MVM_LAB_NO_FWB=1 (what lab-test-nofwb does in a lab of its
# own; the A/B benches do not depend on the CPU model).
INSN_OUT := $(OUT)/lab-out-insn
lab-test-insn:
	@$(MAKE) --no-print-directory lab-test LAB_TIME=insn LAB_CPU=neoverse-n1 LAB_OUT=$(INSN_OUT) \
	  LAB_RUN='$(INSN_TESTS)|^TestCPUOffKeepsGuestMapped$$' LAB_ENV_EXTRA=MVM_LAB_NO_FWB=1

# Everything the lab targets boot or copy in, built once before make test's
# two chains start (so that they never build the same file at once).
lab-files: $(LAB_FILES) $(MODULE_FILES) $(if $(NATIVE),,$(QEMU_CPIO) $(VIRTIOFSD_CPIO) $(GATE_FILES))

# The performance gate (lab/perfgate): MMIO exit cost against a bare
# KVM_RUN loop and CPU_ON latency with PSCI in mvm against PSCI in KVM, in
# the instruction-time lab, judged against bounds measured there (ratios
# within one run; lab/perfgate/main.go says where each comes from). About
# two minutes. On an arm64 host there is no instruction-time lab: not judged.
ifeq ($(NATIVE),yes)
perf-gate:
	@echo "perf-gate: native arm64 host: the gate's bounds are instruction-time lab figures, not judged here"
else
perf-gate: $(GATE_FILES) $(CACHE)/vmlinuz | lab-deps
	@mkdir -p $(OUT)
	@$(GO) run ./lab -time insn -kernel $(CACHE)/vmlinuz -busybox $(CACHE)/busybox -timeout 15m \
	  $(foreach f,$(GATE_FILES),-add $(f)=/lab/$(notdir $(f))) \
	  -run 'export MVM_BIN=/lab/mvm MVM_GUEST_DIR=/lab; /lab/vmm.test -test.run "^$$" -test.bench MMIOExit -test.benchtime 3x -test.count 3 && \
	    /lab/integration.test -test.run "^$$" -test.bench "CPUOnFew/cpus=2$$" -test.benchtime 1x' > $(GATE_OUT) 2>&1; \
	  rc=$$?; grep -E '^(Benchmark|lab-clock|lab:|--- FAIL)' $(GATE_OUT); [ $$rc -eq 0 ] || { tail -20 $(GATE_OUT); exit $$rc; }
	$(GO) run ./lab/perfgate $(GATE_OUT)
endif

# The demo: mvm's view of arm64 KVM, then the bundled SMP payload on 4 vCPUs
# with PSCI serviced by mvm, and its exit profile.
DEMO_RUN = mvm caps; echo; echo "$$ mvm run --kernel smp.bin --cpus 4 --profile"; \
	mvm run --kernel /lab/smp.bin --cpus 4 --profile; echo "(exit status $$?)"
ifeq ($(NATIVE),yes)
demo: $(OUT)/arm64/mvm $(PAYLOADS)
	$(OUT)/arm64/mvm caps && $(OUT)/arm64/mvm run --kernel $(OUT)/guest/smp.bin --cpus 4 --profile
else
demo: $(OUT)/arm64/mvm $(PAYLOADS) $(CACHE)/vmlinuz | lab-deps
	$(GO) run ./lab $(LAB_FLAGS) -kernel $(CACHE)/vmlinuz -busybox $(CACHE)/busybox -timeout 5m \
	  -add $(OUT)/arm64/mvm=/lab/mvm $(foreach f,$(PAYLOADS),-add $(f)=/lab/$(notdir $(f))) \
	  -run '$(DEMO_RUN)'
endif

# Benchmarks: host microbenchmarks, then the lab's (MMIO exit cost vs a bare
# KVM_RUN loop, the vCPU operations on PSCI in mvm's CPU_ON path, CPU_ON latency user vs kernel PSCI with its steps, Linux boot
# to init for 1 and 8 vCPUs with mvm's memory overhead, --profile overhead,
# mvm profile's overhead on a QEMU boot, guest-timed secondary bring-up at
# 8-64 vCPUs in both PSCI modes, guest-timed Linux CPU hotplug (offline and
# online again) in both PSCI modes, mvm's resident footprint after a 1-vCPU
# 128 MiB boot, docs/footprint.md). Each lab benchmark reports ratios against
# a baseline measured in the same run, or a median with its range. Not in
# the default BENCH_RUN: ProfileFloor and ExitFloor (what the BPF path's
# tracepoints cost with empty programs, docs/profile.md "The floor"), and
# mvm against QEMU -accel kvm on the same guest, three rounds an iteration
# (run them with BENCHTIME=1x): virtio-blk reads and exits per MiB
# (BlkQEMU, ~4 min a round in instruction time, ~8 in the wall lab) and
# boot to power-off at 1 and 4 vCPUs (BootQEMU, ~4-6 min a round in
# instruction time, far more in the wall lab).
# CommandMode (mvm run -- /bin/true and a 256 MiB read through virtio-fs
# against QEMU + the same virtiofsd, mvm's memory with a share;
# docs/devices.md).
BENCHTIME ?= 2x
LAB_BENCH := $(OUT)/arm64/vmm.test $(OUT)/arm64/integration.test $(OUT)/arm64/mvm $(PAYLOADS) $(CACHE)/vmlinuz $(CACHE)/busybox
$(OUT)/arm64/vmm.test: $(GO_SRC)
	$(GOFLAGS_ARM64) $(GO) test -c -o $@ ./vmm

# QEMU goes into the lab when BENCH_RUN names a QEMU benchmark or
# CommandMode (mvm's command mode and virtio-fs against QEMU + virtiofsd),
# virtiofsd when it names CommandMode.
BENCH_QEMU := $(or $(findstring QEMU,$(BENCH_RUN)),$(findstring CommandMode,$(BENCH_RUN)))
BENCH_CPIO := $(if $(BENCH_QEMU),$(QEMU_CPIO)) $(if $(findstring CommandMode,$(BENCH_RUN)),$(VIRTIOFSD_CPIO))
# BENCH_BASE=PATH: another arm64 mvm build (e.g. main's), which the
# ProfileFloor and ExitFloor benchmarks also run as their bpf-base variant,
# BlkQEMU as mvm-base, and CPUOnFew and BringUp as a third side, base (PSCI
# in mvm by that build): an A/B of two builds in one run.
BENCH_BASE ?=
# HALT_POLL_NS=N: BlkQEMU sets KVM's halt_poll_ns to N for its run (every
# VMM alike; 0 takes the adaptive polling spin, which the instruction clock
# counts as guest time, out of its guest-timed figures; docs/devices.md).
HALT_POLL_NS ?=
# PIN_CPU=N: BlkQEMU runs every VMM pinned to CPU N (each boot then has the
# same thread placement; docs/devices.md).
PIN_CPU ?=
# The benchmarks' knobs, in the lab and natively alike.
BENCH_KNOB_ENV := $(if $(HALT_POLL_NS),MVM_BENCH_HALT_POLL_NS=$(HALT_POLL_NS) )$(if $(PIN_CPU),MVM_BENCH_PIN_CPU=$(PIN_CPU) )
BENCH_BASE_ENV := $(if $(BENCH_BASE),MVM_BIN_BASE=/lab/mvm-base )$(BENCH_KNOB_ENV)
BENCH_BASE_ADD := $(if $(BENCH_BASE),-add $(BENCH_BASE)=/lab/mvm-base)
bench: $(LAB_BENCH) $(MODULE_FILES) $(BENCH_CPIO) | lab-deps
	$(GO) test -run '^$$' -bench . -benchmem ./exits/ ./psci/ ./devices/
ifeq ($(NATIVE),yes)
	MVM_GUEST_DIR=$(abspath $(OUT)/guest) $(OUT)/arm64/vmm.test -test.run '^$$' -test.bench MMIOExit -test.benchtime 3x -test.count 3
	MVM_GUEST_DIR=$(abspath $(OUT)/guest) $(OUT)/arm64/vmm.test -test.run '^$$' -test.bench VCPUOps -test.benchtime 3000x -test.count 3
	$(if $(BENCH_BASE),MVM_BIN_BASE=$(abspath $(BENCH_BASE)) )$(BENCH_KNOB_ENV)MVM_QEMU=$$(command -v qemu-system-aarch64) MVM_BIN=$(abspath $(OUT)/arm64/mvm) MVM_GUEST_DIR=$(abspath $(OUT)/guest) MVM_LINUX=$(abspath $(CACHE)/vmlinuz) MVM_BUSYBOX=$(abspath $(CACHE)/busybox) \
	  MVM_MODULES=$(abspath $(CACHE)/modules) MVM_VIRTIOFSD=/usr/libexec/virtiofsd $(OUT)/arm64/integration.test -test.run '^$$' -test.bench '$(value BENCH_RUN)' -test.benchtime $(BENCHTIME) -test.timeout 60m
else
	$(GO) run ./lab $(LAB_FLAGS) -kernel $(CACHE)/vmlinuz -busybox $(CACHE)/busybox -timeout 60m \
	  $(foreach f,$(LAB_BENCH),-add $(f)=/lab/$(notdir $(f))) $(MODULES_ADD) $(foreach f,$(BENCH_CPIO),-cpio $(f)) $(BENCH_BASE_ADD) \
	  -run 'export $(if $(BENCH_QEMU),MVM_QEMU=/usr/bin/qemu-system-aarch64 )$(BENCH_BASE_ENV)MVM_BIN=/lab/mvm MVM_GUEST_DIR=/lab MVM_LINUX=/lab/vmlinuz MVM_BUSYBOX=/lab/busybox MVM_MODULES=/lab/modules MVM_VIRTIOFSD=/usr/libexec/virtiofsd; \
	    /lab/vmm.test -test.run "^$$" -test.bench MMIOExit -test.benchtime 3x -test.count 3 && \
	    /lab/vmm.test -test.run "^$$" -test.bench VCPUOps -test.benchtime 3000x -test.count 3 && \
	    /lab/integration.test -test.run "^$$" -test.bench "$(value BENCH_RUN)" -test.benchtime $(BENCHTIME) -test.timeout 60m'
endif

# The lab benchmarks in instruction time (LAB_TIME=insn): path lengths and
# contention-free costs that repeat to ~1% under any host load.
bench-insn:
	@$(MAKE) --no-print-directory bench LAB_TIME=insn LAB_SMP=$(if $(filter command line,$(origin LAB_SMP)),$(LAB_SMP),18)

clean:
	rm -rf bin $(OUT)
