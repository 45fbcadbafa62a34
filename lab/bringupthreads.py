"""bringupthreads.py TRACE: from the ftrace text of lab/bringup-trace.sh,
what mvm's threads other than its vCPUs (the Go runtime's: sysmon, idle
Ms) ran during each boot's secondary bring-up (docs/boot-phases.md, "One
wake-up fewer").

A boot is one mvm process, known by its vCPU threads (mvm-vcpu-N) and its
other threads (comm mvm, or mvm-base for the build MVM_BIN_BASE names).
Its bring-up window runs from 0.1 ms before the first secondary's thread
(mvm-vcpu-1 and up) is switched in for its CPU_ON (the first switch-in
after a sleep of 2 ms or more that follows one of vCPU 0's HVC exits by
at most 150 us: its PSCI CPU_ON, in either PSCI mode) to the last such
switch-in. Within it: how often the runtime's threads were switched in
and how long they ran (the trace clock counts instructions of the whole
lab machine in the instruction-time lab: 1 us = 1000), and vCPU 0's
CPU_ON calls (its HVC exits).
The side is base when the process is mvm-base, user when it made
hypercall exits, else kernel."""
import re, sys, collections

line_re = re.compile(r'^\s*(.+?)-(\d+)\s+\[(\d+)\]\s+\S+\s+([\d.]+): (\w+): (.*)$')
switch_re = re.compile(r'prev_comm=(.+?) prev_pid=(\d+) .* next_comm=(.+?) next_pid=(\d+)')


def main(path):
    # The runtime's threads are known by comm only (mvm, mvm-base), so a
    # boot's are those that ran between its vCPU 0's first event and the
    # next boot's (the benchmark's boots run one at a time).
    ev = []
    for l in open(path, errors='replace'):
        m = line_re.match(l)
        if m:
            ev.append((float(m.group(4)) * 1e6, m.group(1), int(m.group(2)), m.group(5), m.group(6)))
    # Split into boots: a boot starts at the first event of a mvm-vcpu-0
    # thread id not seen before.
    boots = []
    cur = None
    for t, comm, tid, name, rest in ev:
        if comm == 'mvm-vcpu-0' and (cur is None or tid != cur['v0']):
            cur = {'v0': tid, 'ev': []}
            boots.append(cur)
        if cur is not None:
            cur['ev'].append((t, comm, tid, name, rest))
    for i, b in enumerate(boots):
        off = {}      # tid -> when it was switched out
        wake_in = {}  # secondary comm -> its switch-in after a long sleep
        hcalls = []
        runtime_comm = None
        last_hvc = -1e18
        hvcs = []
        cands = []  # (secondary, switch-in, index of the HVC before it)
        for t, comm, tid, name, rest in b['ev']:
            if name == 'kvm_exit' and comm == 'mvm-vcpu-0':
                last_hvc = t
                hvcs.append(t)
            elif name == 'sched_switch':
                m = switch_re.search(rest)
                if not m:
                    continue
                pc, pp, nc, np = m.group(1), int(m.group(2)), m.group(3), int(m.group(4))
                off[pp] = t
                if nc.startswith('mvm-vcpu-') and nc != 'mvm-vcpu-0':
                    if np in off and t - off[np] >= 2000 and t - last_hvc <= 150:
                        cands.append((nc, t, len(hvcs)))
                if nc in ('mvm', 'mvm-base'):
                    runtime_comm = runtime_comm or nc
            elif name == 'kvm_userspace_exit' and comm == 'mvm-vcpu-0' and 'HYPERCALL' in rest:
                hcalls.append(t)
        # A secondary's first such switch-in is its CPU_ON's (a later one
        # is an IPI's); an HVC followed by three or more was something
        # else (a kick of every vCPU, as at SMP set-up with PSCI in KVM).
        per_hvc = collections.Counter(h for _, _, h in cands)
        for nc, t, h in cands:
            if per_hvc[h] < 3:
                wake_in.setdefault(nc, t)
        if not wake_in:
            continue
        t0, t1 = min(wake_in.values()) - 100, max(wake_in.values())
        n = len([h for h in hvcs if t0 <= h <= t1])
        side = 'base' if runtime_comm == 'mvm-base' else ('user' if [h for h in hcalls if t0 <= h <= t1] else 'kernel')
        ins, run = 0, 0.0
        tids = set()
        on = {}  # tid -> switch-in time
        for t, comm, tid, name, rest in b['ev']:
            if name != 'sched_switch':
                continue
            if t > t1:
                break
            m = switch_re.search(rest)
            if not m:
                continue
            pc, pp, nc, np = m.group(1), int(m.group(2)), m.group(3), int(m.group(4))
            if pp in on:
                run += max(0, t - max(on.pop(pp), t0))
            if nc in ('mvm', 'mvm-base'):
                on[np] = t
                if t >= t0:
                    ins += 1
                    tids.add(np)
        for tid, t in on.items():
            run += t1 - max(t, t0)
        print(f"boot {i + 1} {side:6s} window {(t1 - t0) / 1000:6.2f} ms ({len(wake_in)} secondaries), vCPU 0's HVC exits in it {n}, "
              f"runtime threads ({len(tids)}) switched in {ins:3d} times, ran {run / 1000:6.3f} ms")


if __name__ == '__main__':
    for p in sys.argv[1:]:
        main(p)
