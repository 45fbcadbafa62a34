# cpuonwfi-trace.sh: run the few-vCPU CPU_ON payload (cpuonwfi.bin, 2 vCPUs,
# BenchmarkCPUOnFew's) once per PSCI mode inside the lab with the
# scheduler's, system calls' and KVM's tracepoints on, and leave each run's
# trace and output in $LAB_OUT for lab/cpuonpath.py (docs/boot-phases.md,
# "CPU_ON in instruction time: where the instructions go"). In the
# instruction-time lab the trace clock counts instructions. MVM=/lab/mvm-base
# traces another build the same way.
#
#   go run ./lab -time insn -smp 18 -out out/lab/cpuonwfi-trace \
#     -add out/arm64/mvm=/lab/mvm -add out/guest/cpuonwfi.bin=/lab/cpuonwfi.bin \
#     -add lab/cpuonwfi-trace.sh=/lab/cpuonwfi-trace.sh -run 'sh /lab/cpuonwfi-trace.sh'
#   python3 lab/cpuonpath.py out/lab/cpuonwfi-trace/trace-*.txt
T=/sys/kernel/tracing
MVM=${MVM:-/lab/mvm}
TAG=${TAG:-}
echo 16384 > $T/buffer_size_kb
for mode in ${MODES:-user kernel}; do
  echo 0 > $T/tracing_on; echo > $T/trace
  for e in sched/sched_wakeup sched/sched_switch sched/sched_migrate_task raw_syscalls/sys_enter raw_syscalls/sys_exit \
           kvm/kvm_entry kvm/kvm_exit kvm/kvm_userspace_exit; do
    echo 1 > $T/events/$e/enable
  done
  echo 1 > $T/tracing_on
  $MVM run --kernel /lab/cpuonwfi.bin --cpus 2 --psci $mode > /tmp/out.txt 2>&1
  echo 0 > $T/tracing_on
  cp /tmp/out.txt $LAB_OUT/out-$mode$TAG.txt
  cat $T/trace > $LAB_OUT/trace-$mode$TAG.txt
  echo "TRACE $mode$TAG lines $(wc -l < $LAB_OUT/trace-$mode$TAG.txt) lost: $(grep -c LOST $LAB_OUT/trace-$mode$TAG.txt)"
done
for e in sched/sched_wakeup sched/sched_switch sched/sched_migrate_task raw_syscalls/sys_enter raw_syscalls/sys_exit \
         kvm/kvm_entry kvm/kvm_exit kvm/kvm_userspace_exit; do
  echo 0 > $T/events/$e/enable
done
