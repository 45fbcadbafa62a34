"""cpuonpath.py TRACE...: from ftrace text of lab/cpuonwfi-trace.sh, where
the lab machine's instructions go between a CPU_ON's hypercall and the
target's first guest entry (docs/boot-phases.md, "CPU_ON in instruction
time: where the instructions go").

For every round: t0 is the caller's (vCPU 0's) kvm_exit just before it
wakes the target's thread (mvm's FUTEX_WAKE with PSCI in mvm, KVM's own
wake with PSCI in KVM), t1 the target's next kvm_entry. In the
instruction-time lab the trace clock counts instructions of the whole lab
machine, so t1 - t0 is what BenchmarkCPUOnFew measures, less the guest's
few instructions before the HVC and after the entry. Each round is cut at
marks (the caller's way out to mvm, the wake, the caller back in its guest,
the target running, the target's KVM_RUN) and every event in the window is
counted by thread: what else ran meanwhile (Go runtime threads, other
processes) shows there. -v prints the median round's events."""
import re, sys, collections

line_re = re.compile(r'^\s*(.+?)-(\d+)\s+\[(\d+)\]\s+\S+\s+([\d.]+): (\w+): (.*)$')


def q(v, p):
    v = sorted(v)
    if not v:
        return float('nan')
    i = p * (len(v) - 1)
    lo = int(i)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (i - lo) * (v[hi] - v[lo])


def load(f):
    ev = []
    for l in open(f, errors='replace'):
        m = line_re.match(l)
        if m:
            ev.append((float(m.group(4)) * 1e6, m.group(1), int(m.group(2)), int(m.group(3)), m.group(5), m.group(6)))
    return ev


def vcpu_pid(ev, k):
    """The pid of vCPU k's thread: the one named mvm-vcpu-k with kvm_entry events."""
    c = collections.Counter(p for t, comm, p, cpu, e, a in ev if e == 'kvm_entry' and comm == 'mvm-vcpu-%d' % k)
    return c.most_common(1)[0][0] if c else None


def rounds(ev, caller, target):
    """(t0, wake, t1) event indexes per round: the target's wake-up (in
    either mode it may be taken on the target's lab CPU, by an IPI, so the
    waker shown is not always the caller), the caller's last HVC exit
    before it, and the target's next guest entry."""
    out = []
    last_hvc = None
    i = 0
    n = len(ev)
    while i < n:
        t, comm, p, cpu, e, a = ev[i]
        if p == caller and e == 'kvm_exit' and 'HVC64' in a:
            last_hvc = i
        if e == 'sched_wakeup' and ('pid=%d ' % target) in a + ' ' and last_hvc is not None:
            j = i + 1
            while j < n and not (ev[j][4] == 'kvm_entry' and ev[j][2] == target):
                j += 1
            if j < n:
                out.append((last_hvc, i, j))
                i = j
                last_hvc = None
        i += 1
    return out


def marks(ev, r, caller, target):
    """Offsets (µs of the trace clock from t0) of the path's steps."""
    s, w, e = r
    t0 = ev[s][0]
    m = collections.OrderedDict()

    def mark(key, t):
        if key not in m:
            m[key] = t - t0
    for t, comm, p, cpu, name, a in ev[s:e + 1]:
        if p == caller and name == 'kvm_userspace_exit':
            mark('caller out', t)
        elif p == caller and name == 'sys_enter' and a.startswith('NR 98 '):
            mark('caller futex', t)
        elif p == caller and name == 'kvm_entry':
            mark('caller in', t)
        elif p == caller and name == 'kvm_exit' and 'WFx' in a:
            mark('caller WFI', t)
        elif name == 'sched_wakeup' and ('pid=%d ' % target) in a + ' ':
            mark('target woken', t)
        elif name == 'sched_switch' and ('next_pid=%d ' % target) in a + ' ':
            mark('target on', t)
        elif p == target and name == 'sys_enter' and a.startswith('NR 29 ') and ', ae80,' in a:
            mark('target KVM_RUN', t)
    m['entry'] = ev[e][0] - t0
    return m


def main():
    verbose = '-v' in sys.argv
    for f in [a for a in sys.argv[1:] if a != '-v']:
        ev = load(f)
        caller, target = vcpu_pid(ev, 0), vcpu_pid(ev, 1)
        if caller is None or target is None:
            print(f, ': no vCPU threads with kvm_entry')
            continue
        rs = rounds(ev, caller, target)
        tot = [ev[e][0] - ev[s][0] for s, w, e in rs]
        print('%s: %d rounds, t0->entry µs: min %.1f p10 %.1f p50 %.1f p90 %.1f max %.1f' % (
            f.split('/')[-1], len(rs), min(tot), q(tot, .1), q(tot, .5), q(tot, .9), max(tot)))
        steps = collections.defaultdict(list)
        for r in rs:
            for k, v in marks(ev, r, caller, target).items():
                steps[k].append(v)
        print('  step offsets from t0, µs p10/p50/p90 (n):', ', '.join(
            '%s %.1f/%.1f/%.1f (%d)' % (k, q(v, .1), q(v, .5), q(v, .9), len(v)) for k, v in steps.items()))
        # Events per thread in the windows, and how often a thread that is
        # neither the caller nor the target shows up at all.
        per = collections.Counter()
        present = collections.Counter()
        oncpu = collections.Counter()
        same = 0
        for s, w, e in rs:
            seen = set()
            for t, comm, p, cpu, name, a in ev[s:e + 1]:
                who = 'caller' if p == caller else 'target' if p == target else '%s' % comm
                per[(who, name)] += 1
                seen.add(who)
            for x in seen:
                present[x] += 1
            tc = re.search(r'target_cpu=(\d+)', ev[w][5])
            ccpu = [x[3] for x in ev[s:e + 1] if x[2] == caller]
            if tc and ccpu and int(tc.group(1)) == ccpu[0]:
                same += 1
        print('  target woken on the caller\'s lab CPU in %d of %d rounds' % (same, len(rs)))
        # Rounds in which another thread of the process (the Go runtime's:
        # sysmon, idle Ms) ran, against the rest.
        busy, quiet = [], []
        for (s, w, e), d in zip(rs, tot):
            other = any(p not in (caller, target) and c.startswith('mvm') for t, c, p, cpu, name, a in ev[s:e + 1])
            (busy if other else quiet).append(d)
        print('  rounds with another mvm thread in the window: %d, t0->entry p50 %.1f µs; without: %d, p50 %.1f µs' % (
            len(busy), q(busy, .5), len(quiet), q(quiet, .5)))
        print('  threads in the windows (rounds present):', ', '.join('%s %d' % kv for kv in present.most_common()))
        print('  events per round by thread:', ', '.join('%s:%s %.2f' % (k[0], k[1], v / len(rs)) for k, v in per.most_common(25)))
        if verbose and rs:
            order = sorted(range(len(rs)), key=lambda i: tot[i])
            s, w, e = rs[order[len(order) // 2]]
            t0 = ev[s][0]
            print('  median round:')
            for t, comm, p, cpu, name, a in ev[s:e + 1]:
                print('    %+9.2f [%02d] %-16s %-7d %-20s %s' % (t - t0, cpu, comm, p, name, a[:110]))


main()
