# bringup-trace.sh: run BenchmarkBringUp (8 vCPUs, -benchtime 1x: one boot
# per side, with MVM_BIN_BASE three sides) inside the instruction-time lab
# with the scheduler's wakeup and switch tracepoints, KVM's userspace exits
# and its HVC64 exits on, and leave the trace in $LAB_OUT for
# lab/bringupthreads.py, which counts what mvm's own threads other than the
# vCPUs (the Go runtime's) ran during each boot's secondary bring-up
# (docs/boot-phases.md, "One wake-up fewer"):
#
#   make lab-files
#   go run ./lab -time insn -smp 18 -out out/lab/bringup-trace \
#     -add out/arm64/mvm=/lab/mvm -add out/arm64/integration.test=/lab/integration.test \
#     -add .cache/lab/vmlinuz=/lab/vmlinuz -add .cache/lab/busybox=/lab/busybox \
#     [-add OTHER_BUILD=/lab/mvm-base] -add lab/bringup-trace.sh=/lab/bringup-trace.sh \
#     -run 'sh /lab/bringup-trace.sh'
#   python3 lab/bringupthreads.py out/lab/bringup-trace/trace.txt
T=/sys/kernel/tracing
export MVM_BIN=/lab/mvm MVM_LINUX=/lab/vmlinuz MVM_BUSYBOX=/lab/busybox MVM_GUEST_DIR=/lab
[ -x /lab/mvm-base ] && export MVM_BIN_BASE=/lab/mvm-base
echo 2048 > $T/buffer_size_kb
echo 0 > $T/tracing_on; echo > $T/trace
for e in sched/sched_wakeup sched/sched_switch kvm/kvm_userspace_exit; do
  echo 1 > $T/events/$e/enable
done
# kvm_exit for HVC64 (ESR_ELx.EC 0x16) only: the PSCI calls in both modes.
echo 'esr_ec == 22' > $T/events/kvm/kvm_exit/filter
echo 1 > $T/events/kvm/kvm_exit/enable
echo 1 > $T/tracing_on
/lab/integration.test -test.run '^$' -test.bench 'BringUp/cpus=8$' -test.benchtime 1x -test.timeout 30m
echo 0 > $T/tracing_on
echo 0 > $T/events/kvm/kvm_exit/enable; echo 0 > $T/events/kvm/kvm_exit/filter
cat $T/trace > $LAB_OUT/trace.txt
echo "TRACE lines $(wc -l < $LAB_OUT/trace.txt) lost: $(grep -c LOST $LAB_OUT/trace.txt)"
