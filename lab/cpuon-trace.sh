# cpuon-trace.sh: run the CPU_ON payload (cpuon.bin, 64 vCPUs) twice in each
# PSCI mode inside the lab with the scheduler's wakeup, switch and migrate
# tracepoints on, and leave each run's trace and console in $LAB_OUT, for
# lab/wakeups.py (docs/boot-phases.md, "Where serviced->woken goes"):
#
#   go run ./lab -out out/lab/cpuon-trace -add out/arm64/mvm=/lab/mvm \
#     -add out/guest/cpuon.bin=/lab/cpuon.bin -add lab/cpuon-trace.sh=/lab/cpuon-trace.sh \
#     -run 'sh /lab/cpuon-trace.sh'
#   python3 lab/wakeups.py out/lab/cpuon-trace/trace-*.txt
T=/sys/kernel/tracing
echo 8192 > $T/buffer_size_kb
for mode in user kernel user kernel; do
  echo 0 > $T/tracing_on; echo > $T/trace
  echo 1 > $T/events/sched/sched_wakeup/enable; echo 1 > $T/events/sched/sched_switch/enable; echo 1 > $T/events/sched/sched_migrate_task/enable
  echo 1 > $T/tracing_on
  /lab/mvm run --kernel /lab/cpuon.bin --cpus 64 --psci $mode --result-json $LAB_OUT/r-$mode-$(ls $LAB_OUT | grep -c trace-$mode).json > /tmp/out.txt 2>&1
  echo 0 > $T/tracing_on
  n=$(ls $LAB_OUT | grep -c trace-$mode)
  cp /tmp/out.txt $LAB_OUT/out-$mode-$n.txt
  cat $T/trace > $LAB_OUT/trace-$mode-$n.txt
  echo "TRACE $mode $n lines $(wc -l < $LAB_OUT/trace-$mode-$n.txt) lost: $(grep -c LOST $LAB_OUT/trace-$mode-$n.txt)"
done
