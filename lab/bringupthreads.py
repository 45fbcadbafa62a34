"""bringupthreads.py TRACE: from the ftrace text of lab/bringup-trace.sh
(sched_switch and sched_wakeup during BenchmarkBringUp's boots, one per
side), what ran on the lab machine's CPUs during each boot's secondary
bring-up (docs/boot-phases.md, "Bring-up in instruction time: what else
runs").

Boots are told apart by their vCPU 0 thread (a new pid per mvm process).
A secondary's CPU_ON is the end of its longest sleep (parked in mvm, or
powered off inside KVM_RUN with PSCI in KVM); the window runs from the
first such wake-up to the last secondary's first switch-in after it. In
the window it counts, per kind of thread, the switch-ins and the summed
time switched in (on all lab CPUs; in the instruction-time lab the CPUs
run in turn on one counter, so a thread's switched-in time also holds the
other CPUs' instructions of that time: compare kinds and modes, not the
window's length)."""
import re, sys, collections

line_re = re.compile(r'^\s*(.+?)-(\d+)\s+\[(\d+)\]\s+\S+\s+([\d.]+): (\w+): (.*)$')
sw_re = re.compile(r'prev_comm=(.+?) prev_pid=(\d+) .*prev_state=(\S+) ==> next_comm=(.+?) next_pid=(\d+)')
wk_re = re.compile(r'comm=(.+?) pid=(\d+) ')


def main(f):
    ev = []
    for l in open(f, errors='replace'):
        m = line_re.match(l)
        if m:
            ev.append((float(m.group(4)) * 1e6, int(m.group(3)), m.group(5), m.group(6)))
    comm = {}
    for t, cpu, e, a in ev:
        if e == 'sched_switch':
            m = sw_re.search(a)
            if m:
                comm[int(m.group(2))] = m.group(1)
                comm[int(m.group(5))] = m.group(4)
        elif e == 'sched_wakeup':
            m = wk_re.search(a)
            if m:
                comm[int(m.group(2))] = m.group(1)
    # vCPU threads: pids named mvm-vcpu-K, grouped into boots by pid order
    # (a boot's threads are created together; the next boot's pids are
    # higher).
    vcpus = sorted((p, int(c.split('-')[-1])) for p, c in comm.items() if re.fullmatch(r'mvm-vcpu-\d+', c))
    boots, cur = [], {}
    for p, k in vcpus:
        if k in cur:
            boots.append(cur)
            cur = {}
        cur[k] = p
    if cur:
        boots.append(cur)
    boots = [b for b in boots if len(b) >= 8]
    # Per thread: intervals switched in, wake-ups, sleeps.
    for n, b in enumerate(boots):
        pids = set(b.values())
        lo, hi = min(pids), max(pids)
        # The boot's other mvm threads: pids named mvm* near the vCPUs'.
        mine = {p for p, c in comm.items() if c.startswith('mvm') and lo - 40 <= p <= hi + 40}
        last_out, cpuon, first_in = {}, {}, {}
        for t, cpu, e, a in ev:
            if e == 'sched_switch':
                m = sw_re.search(a)
                pp, np_ = int(m.group(2)), int(m.group(5))
                if pp in pids:
                    last_out[pp] = t
                if np_ in pids and np_ in cpuon and np_ not in first_in:
                    first_in[np_] = t
            elif e == 'sched_wakeup':
                m = wk_re.search(a)
                p = int(m.group(2))
                if p in pids and p != b[0] and p in last_out:
                    gap = t - last_out[p]
                    if gap > cpuon.get(p, (0, 0))[1] and p not in first_in:
                        cpuon[p] = (t, gap)
        if len(cpuon) < len(b) - 1:
            print('boot %d: only %d secondaries found' % (n, len(cpuon)))
            continue
        # The CPU_ON is the longest sleep's end; first_in was recorded
        # for earlier, shorter wake-ups too, so recompute it.
        first_in = {}
        for t, cpu, e, a in ev:
            if e == 'sched_switch':
                np_ = int(sw_re.search(a).group(5))
                if np_ in cpuon and np_ not in first_in and t >= cpuon[np_][0]:
                    first_in[np_] = t
        w0 = min(v[0] for v in cpuon.values())
        w1 = max(first_in.values())
        on = {}
        runtime = collections.Counter()
        switches = collections.Counter()
        for t, cpu, e, a in ev:
            if e != 'sched_switch':
                continue
            m = sw_re.search(a)
            pp, np_ = int(m.group(2)), int(m.group(5))
            if cpu in on:
                s, who = on.pop(cpu)
                a0, a1 = max(s, w0), min(t, w1)
                if a1 > a0:
                    runtime[who] += a1 - a0
            kind = ('vcpu' if np_ in pids else 'mvm other' if np_ in mine else 'idle' if np_ == 0 else 'other:' + comm.get(np_, '?'))
            on[cpu] = (t, kind)
            if w0 <= t <= w1:
                switches[kind] += 1
        print('boot %d (vCPU 0 pid %d): window %.0f µs (first CPU_ON wake-up to last secondary running)' % (n, b[0], w1 - w0))
        for kind in sorted(set(runtime) | set(switches), key=lambda k: -runtime[k]):
            if kind == 'idle':
                continue
            print('   %-24s switch-ins %4d, switched-in µs %8.0f' % (kind, switches[kind], runtime[kind]))


for f in sys.argv[1:]:
    main(f)
