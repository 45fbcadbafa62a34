# bringup-trace.sh: one 8-vCPU Linux test-guest boot per side of
# BenchmarkBringUp (PSCI in mvm, in KVM, and with MVM_BIN_BASE PSCI in mvm
# by that build, in that order: -test.benchtime 1x) with the scheduler's
# switch and wake-up tracepoints on, the trace left in $LAB_OUT for
# lab/bringupthreads.py (docs/boot-phases.md, "Bring-up in instruction
# time: what else runs"). Needs the bench environment (MVM_BIN, MVM_LINUX,
# ...) exported.
T=/sys/kernel/tracing
echo 8192 > $T/buffer_size_kb
echo 0 > $T/tracing_on; echo > $T/trace
echo 1 > $T/events/sched/sched_wakeup/enable; echo 1 > $T/events/sched/sched_switch/enable
echo 1 > $T/tracing_on
/lab/integration.test -test.run '^$' -test.bench 'BringUp/cpus=8$' -test.benchtime 1x -test.timeout 30m > $LAB_OUT/bench.txt 2>&1
echo 0 > $T/tracing_on
cat $T/trace > $LAB_OUT/trace.txt
echo "TRACE lines $(wc -l < $LAB_OUT/trace.txt) lost: $(grep -c LOST $LAB_OUT/trace.txt)"
grep -E "bring-up|^Benchmark" $LAB_OUT/bench.txt
