"""wakeups.py TRACE...: from ftrace text of lab/cpuon-trace.sh, how long each
CPU_ON target's thread waited between its wake-up and running.

For every secondary k the first sched_wakeup of a thread named mvm-vcpu-k
issued by vCPU 0's thread (the CPU_ON caller, in both PSCI modes: mvm's
futex wake or KVM's own) is paired with the next sched_switch onto that
thread; wake-ups issued by other threads (Go threads inherit the name of
the thread that made them) are left out, so not every secondary counts.
It prints the quantiles, split by whether the target was placed on the
waker's CPU, and what ran on the other CPU at the wake-up."""
import re, sys, collections, statistics
line_re = re.compile(r'^\s*(.+?)-(\d+)\s+\[(\d+)\]\s+\S+\s+([\d.]+): (\w+): (.*)$')
def q(v, p):
    v = sorted(v); 
    if not v: return float('nan')
    i = p*(len(v)-1); lo = int(i); hi = min(lo+1, len(v)-1)
    return v[lo] + (i-lo)*(v[hi]-v[lo])
for f in sys.argv[1:]:
    ev = []
    for l in open(f, errors='replace'):
        m = line_re.match(l)
        if m: ev.append((float(m.group(4)), m.group(1), int(m.group(2)), int(m.group(3)), m.group(5), m.group(6)))
    wakers = collections.Counter((c, p) for t, c, p, cpu, e, a in ev if e == 'sched_wakeup' and c == 'mvm-vcpu-0')
    if not wakers: print(f, 'no wakeups by mvm-vcpu-0'); continue
    (_, w0), _ = wakers.most_common(1)[0]
    first = {}
    for i, (t, c, p, cpu, e, a) in enumerate(ev):
        if e == 'sched_wakeup' and p == w0:
            m = re.search(r'comm=(mvm-vcpu-(\d+)) pid=(\d+) prio=\d+ target_cpu=(\d+)', a)
            if m and int(m.group(2)) >= 1 and m.group(1) not in first:
                first[m.group(1)] = (i, t, int(m.group(3)), cpu, int(m.group(4)))
    lat, same, lat_same, lat_other = [], 0, [], []
    for name, (i, t, pid, wcpu, tcpu) in first.items():
        for t2, c, p, cpu, e, a in ev[i+1:]:
            if e == 'sched_switch' and re.search(r'next_pid=%d ' % pid, a + ' '):
                d = (t2 - t)*1e6; lat.append(d)
                (lat_same if tcpu == wcpu else lat_other).append(d)
                if tcpu == wcpu: same += 1
                break
    print('%s: %d targets, wakeup->running us: p10 %.0f median %.0f p90 %.0f; on the waker\'s CPU %d (median %.0f), other CPU %d (median %.0f)' % (
        f.split('/')[-1], len(lat), q(lat, .1), q(lat, .5), q(lat, .9), len(lat_same), q(lat_same, .5), len(lat_other), q(lat_other, .5)))

# What ran on the other CPU when a target was woken onto it.
for f in sys.argv[1:]:
    ev = []
    for l in open(f, errors='replace'):
        m = line_re.match(l)
        if m: ev.append((float(m.group(4)), m.group(1), int(m.group(2)), int(m.group(3)), m.group(5), m.group(6)))
    wakers = collections.Counter(p for t, c, p, cpu, e, a in ev if e == 'sched_wakeup' and c == 'mvm-vcpu-0')
    w0 = wakers.most_common(1)[0][0]
    running = {}
    seen = set(); cnt = collections.Counter()
    for t, c, p, cpu, e, a in ev:
        if e == 'sched_switch':
            m = re.search(r'next_comm=(\S+) next_pid=(\d+)', a)
            running[cpu] = m.group(1) if m else '?'
        if e == 'sched_wakeup' and p == w0:
            m = re.search(r'comm=(mvm-vcpu-(\d+)) pid=(\d+) prio=\d+ target_cpu=(\d+)', a)
            if m and int(m.group(2)) >= 1 and m.group(1) not in seen:
                seen.add(m.group(1))
                tc = int(m.group(4))
                if tc != cpu:
                    r = running.get(tc, '?')
                    cnt['idle' if r.startswith('swapper') else ('vcpu' if r.startswith('mvm-vcpu') else r)] += 1
    print(f.split('/')[-1], 'other CPU was running:', dict(cnt))
