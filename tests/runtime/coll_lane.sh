#!/bin/sh
# coll_lane.sh - the TCP lane (net/lane.h) on one node: with
# HVD_TCP_LANE_LOCAL=1 and without shared memory (HVD_SHM=0) the large
# messages between the ranks of this node go on the lane's own TCP
# connections, so that the builds that only run one-node tests (ASan,
# UBSan, TSan) cover it: coll_check on 2, 3 and 4 ranks, with every message
# from 4 KiB on the lane read as it comes, the next message's header
# read with the end of the one before, one rank offering it and the
# other not, the receive buffer a connection starts with, counts across
# the threshold on either side, and a rank SIGKILLed inside an allreduce
# whose messages go by the lane.
# tests/slurm/coll_netns.sh runs the lane between nodes.
set -u

: "${top_builddir:=$(cd "$(dirname "$0")/../.." && pwd)}"
: "${top_srcdir:=$(cd "$(dirname "$0")/../.." && pwd)}"
export top_builddir
. "$top_srcdir/tests/tap.sh"
LAUNCH=$top_srcdir/tests/runtime/launch.sh
CHECK=$top_builddir/tests/runtime/coll_check
LIMIT=${HVD_COLL_TEST_LIMIT:-150}

[ "$("$LAUNCH" --which)" != none ] ||
	skip_all "no PMIx launcher (neither hvdrun nor mpirun)"
[ -x "$CHECK" ] || skip_all "$CHECK not built"
if [ -n "$(ls /sys/class/infiniband 2>/dev/null)" ]; then
	skip_all "RDMA devices here: the lane is off where UCX has them"
fi
T=$(mktemp -d "${TMPDIR:-/var/tmp}/coll-lane.XXXXXX")
trap 'rm -rf "$T"' EXIT
plan 11

# lane_counts FILE: "sent received" per rank, from hvd_finalize's debug
# line
lane_counts() {
	sed -n 's/.*TCP lane: \([0-9]*\) messages sent, \([0-9]*\) received.*/\1 \2/p' "$1"
}

# run_check NAME NP LANE_RANKS [ENV...]: coll_check on NP ranks; passes
# when rank 0's TAP is complete and clean and LANE_RANKS ranks both sent
# and received on the lane.
run_check() {
	name=$1 np=$2 want=$3
	shift 3
	start=$(date +%s)
	# shellcheck disable=SC2086 # $wrap: nothing or one path
	env HVD_SHM=0 HOROVOD_LOG_LEVEL=debug "$@" timeout "$LIMIT" \
		"$LAUNCH" -np "$np" $wrap "$CHECK" >"$T/out" 2>"$T/err"
	rc=$?
	took=$(($(date +%s) - start))
	planned=$(sed -n 's/^1\.\.\([0-9]*\)$/\1/p' "$T/out")
	passed=$(grep -c '^ok ' "$T/out")
	bad=$(grep -c '^not ok' "$T/out")
	used=$(lane_counts "$T/err" | awk '$1 > 0 && $2 > 0' | wc -l)
	st=0
	[ "$rc" -eq 0 ] && [ -n "$planned" ] && [ "$bad" -eq 0 ] &&
		[ "$passed" -eq "$planned" ] && [ "$used" -eq "$want" ] || st=1
	ok $st "$name: $passed/${planned:-?} checks passed, $used ranks on the lane, exit $rc, ${took}s"
	if [ $st -ne 0 ]; then
		grep -v '^ok ' "$T/out" | head -n 20 | sed 's/^/#   /'
		grep -v ' debug: ' "$T/err" | head -n 20 | sed 's/^/#   stderr: /'
		lane_counts "$T/err" | sed 's/^/#   lane: /'
	fi
}

wrap=
run_check "2 ranks on the lane" 2 2 HVD_TCP_LANE_LOCAL=1
# Both ends of the pair's connection grew its receive buffer at once, as
# for a 4 MiB message (the kernel allows half of tcp_rmem's maximum), from
# tcp_rmem's default (128K on Debian), which a run could keep.
want=$(awk '{h = int($3 / 2); print h < 4194304 ? h : 4194304}' \
	/proc/sys/net/ipv4/tcp_rmem)
bufs=$(sed -n 's/.*TCP lane: .* rank [0-9]* (.*receive buffer \([0-9]*\) bytes)$/\1/p' "$T/err")
big=$(echo "$bufs" | awk -v w="$want" '$1 >= w' | wc -l)
is "$big" 2 "both ends of the lane's connection start with a receive buffer of at least $want bytes (got: $(echo $bufs))"
run_check "3 ranks on the lane" 3 3 HVD_TCP_LANE_LOCAL=1
# Four ranks take recursive halving and doubling from 64 KiB to 1 MiB:
# each message with the sender's call behind it, the allreduce's sums
# made in its output and sent from there.
run_check "4 ranks on the lane (recursive halving)" 4 4 HVD_TCP_LANE_LOCAL=1
# The ring's segments follow each other on a connection: the read that
# ends one also took the next one's header, and coll_check's results
# above were right with it.
ahead=$(sed -n 's/.*TCP lane: .*, \([0-9]*\) headers read with the end of the message before$/\1/p' "$T/err" |
	awk '{ n += $1 } END { print n + 0 }')
ok "$([ "$ahead" -gt 0 ]; echo $?)" "the read that ends a message took the next one's header ($ahead times on 3 ranks)"
run_check "3 ranks, the lane from 4 KiB, read as the bytes come" 3 3 \
	HVD_TCP_LANE_LOCAL=1 HVD_TCP_LANE_MIN=4K HVD_TCP_LANE_WHOLE=0
# A pair takes the lane only when both ends offer it: rank 0 alone does,
# so nobody uses it and nothing straddles.
cat >"$T/rank0" <<'EOF'
#!/bin/sh
[ "${PMIX_RANK:-}" != 0 ] || export HVD_TCP_LANE_LOCAL=1
exec "$@"
EOF
chmod +x "$T/rank0"
wrap=$T/rank0
run_check "only rank 0 offers the lane" 2 0
wrap=
is "$(grep -c 'TCP lane: rank [0-9]* listens' "$T/err")" 1 \
	"only rank 0 offered the lane"

# A broadcast whose root sends 512 KiB (the lane) where the other rank
# expects 512 B (UCX), and the other way round: HVD_ERR_MISMATCH.
for how in big small; do
	env HVD_SHM=0 HVD_TCP_LANE_LOCAL=1 timeout 60 "$LAUNCH" -np 2 \
		"$CHECK" straddle "$how" >"$T/out" 2>"$T/err"
	line=$(grep '^rank 1: straddle' "$T/out")
	secs=$(echo "$line" | sed -n 's/.*HVD_ERR_MISMATCH after \([0-9.]*\) s.*/\1/p')
	st=1
	[ -n "$secs" ] && awk -v s="$secs" 'BEGIN {exit !(s < 10)}' && st=0
	ok $st "counts apart across the lane's threshold ($how at the root): rank 1 fails with HVD_ERR_MISMATCH in ${secs:-?} s"
	[ $st -eq 0 ] || sed 's/^/#   /' "$T/out" | head -n 5
done

# Rank 2 of 3 SIGKILLs itself inside an allreduce of 256 KiB, whose
# ring segments (85 KiB) go by the lane from 4 KiB: both survivors name
# it, well within HOROVOD_PEER_TIMEOUT, and finalize (their lane counts
# show it carried the allreduces before).
env HVD_SHM=0 HVD_TCP_LANE_LOCAL=1 HVD_TCP_LANE_MIN=4K \
	HOROVOD_PEER_TIMEOUT=20 HVD_TEST_FINALIZE=1 HOROVOD_LOG_LEVEL=debug \
	timeout 90 "$LAUNCH" -np 3 --grace 15 "$CHECK" kill 2 \
	>"$T/out" 2>"$T/err"
named=$(grep -c 'HVD_ERR_PEER_FAILED after [0-9.]* s: .*rank 2 failed' "$T/out")
used=$(lane_counts "$T/err" | awk '$1 > 0 && $2 > 0' | wc -l)
is "$named:$used" 2:2 "rank 2 killed inside an allreduce on the lane: both survivors name it, and had used the lane"
[ "$named:$used" = 2:2 ] || sed 's/^/#   /' "$T/out" | head -n 5
done_testing
