#!/bin/bash
# A network interface that UCX found at hvd_init goes away (a container's
# or a mini-cluster's veth, removed by someone else), then a rank is
# SIGKILLed: the survivors must still re-form.  UCX 1.13 cannot make a
# worker on a context whose device is gone (UCS_ERR_NO_DEVICE, for good);
# the survivors re-formed again and again until killed (make distcheck,
# where slurm/smoke_minicluster.sh removes its --netns bridge and veths
# while the elastic tests run).  Run in a network namespace of its own
# (unshare --net), so that the interface it adds and removes is nobody
# else's; with a /sys of its own, where UCX looks for interfaces.
. "$(dirname "$0")/engine_lib.sh"

[ -x "$top_builddir/runtime/hvdrun" ] ||
	skip_all "hvdrun is not built (elastic needs its --elastic)"
command -v ip >/dev/null 2>&1 || skip_all "no ip(8) (Debian: iproute2)"
command -v unshare >/dev/null 2>&1 || skip_all "no unshare(1) (util-linux)"
unshare --net --mount true 2>/dev/null ||
	skip_all "cannot make a network namespace (unshare --net needs root)"
PROG=$TESTS_BIN/elastic_train
HVDRUN=$top_builddir/runtime/hvdrun
plan 6

# Inside the namespace: lo, and a veth pair with an address, up, before
# the job starts; removed at step 20; rank 1 killed right after.
unshare --net --mount bash -s "$HVDRUN" "$PROG" "$TMP" "$LIMIT" <<'EOF'
hvdrun=$1 prog=$2 d=$3 limit=$4
# UCX finds interfaces in /sys/class/net: this namespace's, not the host's
mount --make-rprivate /
mount -t sysfs sysfs /sys || exit 91
ip link set lo up
ip link add hvdnetif0 type veth peer name hvdnetif1 || exit 90
ip addr add 10.231.0.1/24 dev hvdnetif0
ip link set hvdnetif0 up
ip link set hvdnetif1 up
HOROVOD_LOG_LEVEL=info ELASTIC_STEP_MS=15 timeout "$limit" \
	"$hvdrun" --elastic -np 3 "$prog" 3 >"$d/out" 2>"$d/err" &
bg=$!
for _ in $(seq 1200); do
	grep -q '^step 20 ' "$d/out" 2>/dev/null && break
	kill -0 "$bg" 2>/dev/null || break
	sleep 0.05
done
ip link del hvdnetif0
echo gone >"$d/netif"
kill -9 "$(awk '$1 == "start" && $3 == 1 { print $7 }' "$d/out")"
wait "$bg"
echo $? >"$d/rc"
EOF
[ -f "$TMP/netif" ]
ok $? "the interface UCX found at hvd_init was removed mid-training"
is "$(cat "$TMP/rc" 2>/dev/null)" 0 "... rank 1 killed after it: hvdrun exits 0"
is "$(awk '$1 == "done" { print $3 }' "$TMP/out" | sort -u)" 2 \
	"... the survivors finish at size 2"
awk '$1 == "epoch" && $3 == "seen-once" { n++; if ($4 != $6) bad++ }
     END { exit !(n == 3 && !bad) }' "$TMP/out"
ok $? "... every sample of every epoch seen once"
grep -q "making the next world's worker on a new UCX context" "$TMP/err"
ok $? "... on a new UCX context, and the log says why"
# The old context gets one try, not 2 s of them: no "trying again" before
# a rank's move to the new context (the fresh one's own tries come after).
late=$(awk '/making the next world.s worker on a new UCX context/ { moved[$2] = 1 }
	    /ucp_worker_create: No such device; trying again/ && !moved[$2] { n++ }
	    END { print n + 0 }' "$TMP/err")
took=$(sed -n 's/.*elastic: re-formed in \([0-9.]*\) s.*/\1/p' "$TMP/err" | head -n 1)
is "$late" 0 "... at once, the old context tried once (re-formed in ${took:-?} s)"
[ "$tap_fail" = 0 ] ||
	grep -E "elastic|ucp_|error" "$TMP/err" | tail -n 20 | sed 's/^/# err: /'
done_testing
