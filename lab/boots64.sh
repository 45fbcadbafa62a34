# boots64.sh ROUNDS TIMEOUT COND...: boot the 64-vCPU Linux test guest
# under mvm again and again inside the lab and print one EXP line per boot.
# COND is MODE:APPEND (MODE user or kernel: mvm's --psci; APPEND: extra
# kernel command line, '+' for a space). Each round boots every COND once,
# in reverse order every other round, so that drift in the shared lab
# spreads over all conditions. A boot that has not powered off after
# TIMEOUT seconds is stopped (SIGTERM, SIGKILL 20 s later) and counts as
# hung; its console is kept in $LAB_OUT/hung-N-MODE.txt. Used for the
# 64-vCPU hang in docs/boot-phases.md:
#
#   go run ./lab/testinitrd .cache/lab/busybox out/lab/initrd.gz
#   make out/arm64/mvm
#   go run ./lab -out out/lab/boots64 -add out/arm64/mvm=/lab/mvm \
#     -add .cache/lab/vmlinuz=/lab/vmlinuz -add out/lab/initrd.gz=/lab/initrd.gz \
#     -add lab/boots64.sh=/lab/boots64.sh -run 'sh /lab/boots64.sh 3 100 user: kernel:'
#
# Not the guest's console lines on the lab console: a nested guest's
# "hard LOCKUP" report there reads as the lab kernel's own (lab/main.go).
rounds=$1; to=$2; shift 2
i=0
r=1
while [ $r -le $rounds ]; do
	conds="$*"
	if [ $((r % 2)) -eq 0 ]; then rev=""; for c in $conds; do rev="$c $rev"; done; conds=$rev; fi
	for c in $conds; do
		mode=${c%%:*}; app=$(echo "${c#*:}" | tr '+' ' ')
		i=$((i + 1))
		t0=$(date +%s)
		/lab/mvm run --kernel /lab/vmlinuz --initrd /lab/initrd.gz --cpus 64 --memory 2G --psci $mode \
			--append "quiet $app" --result-json /tmp/r$i.json >/tmp/o$i.txt 2>&1 &
		pid=$!
		n=0; while kill -0 $pid 2>/dev/null && [ $n -lt $to ]; do sleep 1; n=$((n + 1)); done
		if kill -0 $pid 2>/dev/null; then
			kill -TERM $pid
			n=0; while kill -0 $pid 2>/dev/null && [ $n -lt 20 ]; do sleep 1; n=$((n + 1)); done
			kill -KILL $pid 2>/dev/null
		fi
		wait $pid
		rc=$?
		t1=$(date +%s)
		ok=no; grep -q 'mvm-guest: poweroff' /tmp/o$i.txt && ok=yes
		ss=$(sed -n 's/^mvm-guest: smp start //p' /tmp/o$i.txt | tr -d '\r')
		sd=$(sed -n 's/^mvm-guest: smp done //p' /tmp/o$i.txt | tr -d '\r')
		sl=$(grep -c 'soft lockup' /tmp/o$i.txt)
		echo "EXP boot=$i round=$r mode=$mode append='$app' rc=$rc ok=$ok secs=$((t1 - t0)) smp=$ss..$sd softlockups=$sl"
		if [ $ok = no ] && [ -n "$LAB_OUT" ]; then cp /tmp/o$i.txt $LAB_OUT/hung-$i-$mode.txt; fi
	done
	r=$((r + 1))
done
