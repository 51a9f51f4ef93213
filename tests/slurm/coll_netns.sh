#!/bin/bash
# shellcheck disable=SC2034,SC2154 # lib.sh reads and sets these
# coll_netns.sh - every collective across nodes that are network namespaces
# (a cluster of its own: minicluster --netns, 3 nodes, an address each on a
# bridge, so that everything between nodes goes over TCP): coll_check under
# srun on 2 and 3 nodes with 1 and 2 ranks each, the endpoints between
# nodes on TCP alone, the TCP lane (net/lane.h) carrying the large
# messages, forged and silent connections to its port refused while the
# job's own still comes through, and its counterpart HVD_TCP_LANE=0,
# counts that put a message on the lane at one end and on UCX at the
# other (HVD_ERR_MISMATCH in seconds), hvd-bench -R against OpenMPI with
# the settings hvd-bench(1) gives for such nodes, and a rank killed inside
# an allreduce: every survivor on every node fails naming it, within 60 s,
# with the default HOROVOD_PEER_TIMEOUT (60 s), so without waiting for it;
# and nodes that lose each other (no reset: the packets vanish), where
# every rank fails once HOROVOD_PEER_TIMEOUT has passed, unless they find
# each other again before: then the job goes on.
hvdt_own_cluster=1
. "${top_srcdir:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/slurm/lib.sh"

own_cluster_require --netns slurmctld slurmd srun unshare
CHECK=$top_builddir/tests/runtime/coll_check
BENCH=$top_builddir/runtime/hvd-bench
[[ -x $CHECK ]] || skip_all "$CHECK not built"
own_cluster_visible
plan 39
T=$HVD_TEST_TIMEOUT

own_cluster_dir netns
dir=$oc_dir
job=
trap '[[ -z $job ]] || scancel "$job" >/dev/null 2>&1; hvdt_at_exit' EXIT

if ! HVD_BUILD_DIR=$top_builddir own_cluster_start run_timeout 120 -- \
	--nodes 3 --netns --plugin none; then
	diag "$oc_out"
	bail_out "the --netns mini-cluster did not start"
fi
own_cluster_alloc -N3 --ntasks-per-node=2
# --overlap: a step does not wait for the resources of the one before it
# to be released (under load a step was once not launched until the run's
# timeout, two minutes after the previous one had ended).
step() { run_timeout "$T" srun -Q --overlap --jobid="$job" --mpi=pmix "$@"; }

err=$dir/stderr
out=$(UCX_LOG_LEVEL=debug HOROVOD_LOG_LEVEL=debug step -N2 --ntasks-per-node=1 "$CHECK" 2>"$err.lane")
check_run "2 nodes x 1 rank" "$out"
# Between nodes libhvd asks for peer failure handling, which UCX's
# shared-memory transports lack: its endpoints to the other node must be
# TCP alone, or "cross-node" would quietly go through memory that the
# namespaces share (/dev/shm, one kernel).
# (UCX logs to stdout.)
lanes=$(grep -E 'lane\[[0-9]+\]:.*keepalive' <<<"$out" | grep -c tcp/eth0)
other=$(grep -E 'lane\[[0-9]+\]:' <<<"$out" | grep -E -c 'sysv|posix|cma')
ok $(( lanes >= 2 && other == 0 ? 0 : 1 )) \
	"endpoints between the nodes: TCP on eth0 ($lanes), no shared-memory lane ($other)"

# lane_counts FILE: "sent received" per rank, from hvd_finalize's debug
# line
lane_counts() {
	sed -n 's/.*TCP lane: \([0-9]*\) messages sent, \([0-9]*\) received.*/\1 \2/p' "$1"
}

# Both ranks sent and received on the TCP lane.
sent=$(lane_counts "$err.lane")
ok $(( $(wc -l <<<"$sent") == 2 && $(awk '$1 > 0 && $2 > 0' <<<"$sent" | wc -l) == 2 ? 0 : 1 )) \
	"the large messages went by the TCP lane on both ranks: $(tr '\n' ';' <<<"$sent")" ||
	diag "$(grep -i lane "$err.lane" | head -n 5)"

# The lane's thresholds (net/lane.c): 16 KiB, and 1 KiB for a
# broadcast's messages, unless the job's ranks outnumber the machine's
# CPUs (3 x 1 below on 2 of them): 16 KiB for both there.
cpus=$(getconf _NPROCESSORS_ONLN)
want="16 KiB, a broadcast's from 1 KiB"
((cpus < 2)) && want="16 KiB, a broadcast's from 16 KiB"
from=$(grep -c "TCP lane: messages from $want " "$err.lane")
ok $(( from == 2 ? 0 : 1 )) "2 x 1 on $cpus CPUs: both ranks take the lane from $want ($from)" ||
	diag "$(grep 'TCP lane: messages from' "$err.lane")"

# The lane's congestion control (HVD_TCP_LANE_CC, net/lane.c): by
# default the node's own, but reno where that is bbr (whose pacing
# doubled a 512 KiB exchange here), as the kernel reports it for the
# connection at both of its ends; a name the kernel refuses is a warning
# naming it, and the lane keeps the node's own.
sys_cc=$(step -N1 --ntasks=1 cat /proc/sys/net/ipv4/tcp_congestion_control 2>/dev/null)
want_cc=$sys_cc
[[ $sys_cc != bbr* ]] || want_cc=reno
# cc_ends FILE: the congestion control of each end of each lane connection
cc_ends() {
	sed -n 's/.*TCP lane: \(connected to\|accepted\) rank [0-9]* (congestion control \([a-z0-9_]*\), receive buffer [0-9]* bytes)$/\2/p' "$1" | sort | uniq -c | tr -s ' \n' ' '
}
got=$(cc_ends "$err.lane")
ends=$(grep -c "TCP lane: \(connected to\|accepted\) rank [0-9]* (congestion control ${want_cc:-?}, receive buffer [0-9]* bytes)$" "$err.lane")
ok $(( ends == 2 ? 0 : 1 )) \
	"the lane's connection uses $want_cc at both ends (the node's: ${sys_cc:-?}; logged:$got)"
bogus_out=$(HVD_TCP_LANE_CC=no-such-cc HOROVOD_LOG_LEVEL=debug step -N2 --ntasks-per-node=1 \
	"$BENCH" -o allgather -b 1M -e 1M -n 5 -w 1 -c 1 2>"$err.cc")
brc=$?
warned=$(grep -c "warning: HVD_TCP_LANE_CC=no-such-cc: the kernel refuses it (.*); the TCP lane keeps the system's $sys_cc\." "$err.cc")
kept=$(grep -c "TCP lane: \(connected to\|accepted\) rank [0-9]* (congestion control $sys_cc, receive buffer [0-9]* bytes)$" "$err.cc")
ok $(( brc == 0 && warned == 2 && kept == 2 && $(grep -c '^ *1048576 .* 0 *$' <<<"$bogus_out") == 1 ? 0 : 1 )) \
	"HVD_TCP_LANE_CC=no-such-cc: a warning on both ranks ($warned), the lane on $sys_cc ($kept ends), the allgather right (srun $brc)" ||
	diag "$(grep -i 'congestion\|LANE_CC' "$err.cc" | head -n 6)$bogus_out"

# Anyone who can reach a rank's lane port can connect to it
# (tests/slurm/lane_forge.py): rank 1, waiting before its first
# collective, gets 81 connections that say nothing (the rank keeps 64
# waiting) and 7 that say something false (noise, hellos with made-up
# MACs or ranks); then the job runs, its own lane connection arriving
# behind them.
go=$dir/lane-go
rm -f "$go"
HOROVOD_LOG_LEVEL=debug step -N2 --ntasks-per-node=1 -l "$CHECK" after "$go" \
	>"$dir/forge.out" 2>"$dir/forge.err" &
fjob=$!
at=
for ((i = 0; i < 600 && ${#at} == 0; i++)); do
	at=$(sed -n 's/^1: .*TCP lane: rank 1 listens on \([0-9.]*:[0-9]*\) .*/\1/p' "$dir/forge.err")
	[[ -n $at ]] || sleep 0.1
done
if [[ -n $at ]]; then
	attack=$(python3 "$top_srcdir/tests/slurm/lane_forge.py" "${at%:*}" "${at#*:}" "$go" 60 2>&1)
	arc=$?
else
	attack="rank 1 logged no lane port"
	arc=1
	touch "$go"
fi
wait $fjob
frc=$?
refused=$(grep -c '^1: .*TCP lane: refused a connection (not a hello of a rank of this job)' "$dir/forge.err")
evicted=$(sed -n 's/^idle: \([0-9]*\) of .*/\1/p' <<<"$attack")
ok $(( arc == 0 && refused >= 7 && ${evicted:-0} >= 17 ? 0 : 1 )) \
	"forged connections to rank 1's lane ($at): all 7 closed unanswered ($refused refused), ${evicted:-?} of 81 silent ones let go" ||
	diag "$attack"
out=$(sed -n 's/^0: //p' "$dir/forge.out")
sent=$(lane_counts "$dir/forge.err")
if (( frc == 0 && $(awk '$1 > 0 && $2 > 0' <<<"$sent" | wc -l) == 2 )); then
	check_run "2 nodes x 1 rank after the forged connections, on the lane" "$out"
else
	ok 1 "2 nodes x 1 rank after the forged connections (srun $frc, lane: $(tr '\n' ';' <<<"$sent"))"
	diag "$(tail -n 20 "$dir/forge.err")"
fi

out=$(HVD_TCP_LANE=0 HOROVOD_LOG_LEVEL=trace step -N2 --ntasks-per-node=1 "$CHECK" 2>"$err")
check_run "2 nodes x 1 rank, HVD_TCP_LANE=0 (UCX only)" "$out"
# Two ranks: recursive doubling (one exchange of the whole buffer) up to
# HVD_ALLREDUCE_PAIR_MAX (512K), the ring above: 65537 float32 (256 KiB
# + 4) by rd, 65537 float64 (512 KiB + 8) and 3 MiB + 5 float32 by the
# ring.
algo_of() { # COUNT TYPE: the algorithms rank 0 logged for such calls
	sed -n "s/^hvd: \\[0\\] trace: allreduce ctx 1: $1 x $2: \\([a-z]*\\)$/\\1/p" "$err" |
		sort -u | tr '\n' ' '
}
got="$(algo_of 65537 float32)/$(algo_of 65537 float64)/$(algo_of 786437 float32)"
ok "$([[ $got == "rd /ring /ring " ]] && echo 0 || echo 1)" \
	"2 x 1 allreduce: 256 KiB by rd, 512 KiB + 8 and 3 MiB by the ring ($got)" ||
	diag "$(grep 'allreduce ctx 1: \(65537\|786437\) ' "$err" | head -n 4)"
# Counts on either side of that threshold (512 KiB by rd on rank 0,
# 512 KiB + 4 by the ring on rank 1): both ranks fail with
# HVD_ERR_MISMATCH in seconds.
out=$(step -N2 --ntasks-per-node=1 "$CHECK" straddle pair 2>&1)
fast=$(sed -n 's/^rank [01]: straddle pair, .*HVD_ERR_MISMATCH after \([0-9.]*\) s.*/\1/p' <<<"$out" |
	awk '$1 < 10' | wc -l)
ok $(( fast == 2 ? 0 : 1 )) \
	"2 x 1 allreduce, 512 KiB against 512 KiB + 4 (rd against the ring): both ranks fail with HVD_ERR_MISMATCH in seconds ($fast)" ||
	diag "$out"
# A broadcast whose root sends 512 KiB (the lane) where the other rank
# expects 512 B (UCX), and the other way round.
for how in big small; do
	start=$(date +%s)
	out=$(step -N2 --ntasks-per-node=1 "$CHECK" straddle "$how" 2>&1)
	took=$(($(date +%s) - start))
	line=$(grep '^rank 1: straddle' <<<"$out")
	secs=$(sed -n 's/.*HVD_ERR_MISMATCH after \([0-9.]*\) s.*/\1/p' <<<"$line")
	ok "$([[ -n $secs ]] && awk -v s="$secs" 'BEGIN {exit !(s < 10)}' && echo 0 || echo 1)" \
		"counts apart across the lane's threshold ($how at the root): rank 1 fails with HVD_ERR_MISMATCH in ${secs:-?} s; step ${took}s" ||
		diag "$out"
done
out=$(HOROVOD_LOG_LEVEL=trace step -N2 --ntasks-per-node=2 "$CHECK" 2>"$err")
check_run "2 nodes x 2 ranks (hierarchical)" "$out"
hier=$(grep -c 'allreduce ctx 1: .*: hier$' "$err")
ok $(( hier > 0 ? 0 : 1 )) "2 x 2: the allreduce ran hierarchical ($hier calls)"
# 65537 and 1M+3 elements: above the leaders' limit, by local index
rs=$(grep -c -E 'reducescatter ctx 1: (65537|1048579) x .*: hier$' "$err")
ok $(( rs > 0 ? 0 : 1 )) "2 x 2: large reducescatters ran by local index ($rs calls)"
a2a=$(grep -c 'alltoall ctx 1: 4 x [0-9]* B: hier$' "$err")
ok $(( a2a > 0 ? 0 : 1 )) "2 x 2: small alltoalls went through the node leaders ($a2a calls)"
# An alltoall whose counts disagree within a node, and between the
# nodes: HVD_ERR_MISMATCH on all four ranks, in seconds.
for how in rank node; do
	out=$(step -N2 --ntasks-per-node=2 "$CHECK" a2a_mismatch "$how" 2>&1)
	fast=$(awk '/alltoall mismatch .*HVD_ERR_MISMATCH after/ {
		for (i = 1; i <= NF; i++) if ($i == "after" && $(i + 1) + 0 < 10) n++ }
		END {print n + 0}' <<<"$out")
	# A node-mate passes on its leader's reason without its code.
	twice=$(grep -c 'HVD-[0-9]\{4\} .*HVD-[0-9]\{4\} ' <<<"$out")
	ok $(( fast == 4 && twice == 0 ? 0 : 1 )) \
		"alltoall counts apart ($how): $fast of 4 ranks fail with HVD_ERR_MISMATCH within 10 s, $twice with a code twice" ||
		diag "$out"
done
# An allreduce refused on one rank only (a NULL buffer), a node-mate of
# the leader and a leader: every rank fails it within 10 s, the refusing
# one with HVD_ERR_INVALID_ARG, the others naming it (also where another
# rank's answer to it came first), and every rank's next call fails
# (net/refusal.h).  Before, the others' call returned HVD_OK with the
# refusing rank's next call's data.
for who in 1 2; do
	out=$(step -N2 --ntasks-per-node=2 "$CHECK" refuse $who allreduce 2>&1)
	refused=$(grep -c "^rank $who: call 1 (allreduce, refused here) HVD_ERR_INVALID_ARG" <<<"$out")
	made=$(awk '/^rank [0-9]*: call 1 \(allreduce\) HVD_ERR_MISMATCH after .* rank '$who' refused call [0-9]+ of the blocking collectives, hvd_allreduce\(\) \(HVD_ERR_INVALID_ARG\), which this rank made/ && $8 < 10' <<<"$out" | wc -l)
	next=$(grep -c "^rank [0-9]*: call 2 (allreduce) HVD_ERR_MISMATCH after [0-9.]* s, sum none" <<<"$out")
	fin=$(grep -c "^rank [0-9]*: finalize HVD_OK" <<<"$out")
	ok $(( refused == 1 && made == 3 && next == 4 && fin == 4 ? 0 : 1 )) \
		"2 x 2, rank $who refuses an allreduce: $made of 3 others fail it within 10 s, naming it, the next call fails on $next of 4, $fin finalize" ||
		diag "$out"
done
out=$(HOROVOD_LOG_LEVEL=trace step -N3 --ntasks-per-node=1 "$CHECK" 2>"$err")
check_run "3 nodes x 1 rank" "$out"
# The small broadcast's algorithm depends on whether the machine is
# crowded (its 3 ranks over its cores), agreed: the same on every rank.
want=binomial
((cpus < 3)) && want=chain
ranks=$(sed -n "s/^hvd: \[\([0-9]*\)\] trace: broadcast ctx 1: [0-9]* B from [0-9]*: $want\$/\1/p" "$err" | sort -u | tr "\n" " " | sed "s/ $//")
other=$(grep -c -E "trace: broadcast ctx 1: ([0-9]|[1-9][0-9]{1,3}) B from [0-9]*: " "$err")
mine=$(grep -c -E "trace: broadcast ctx 1: ([0-9]|[1-9][0-9]{1,3}) B from [0-9]*: $want\$" "$err")
ok "$([[ $ranks == "0 1 2" && $other == "$mine" ]] && echo 0 || echo 1)" \
	"3 x 1 on $cpus CPUs: every small broadcast is a $want on ranks ${ranks:-none} ($mine of $other)" ||
	diag "$(grep 'trace: broadcast' "$err" | sort | uniq -c | head -n 20)"
# The lane's thresholds on 3 x 1: 16 KiB for every message where the 3
# ranks outnumber the machine's CPUs, 16 KiB and a broadcast's 1 KiB
# otherwise (lane_crowded, net/lane.c).
want="16 KiB, a broadcast's from 1 KiB"
((cpus < 3)) && want="16 KiB, a broadcast's from 16 KiB"
from=$(grep -c "TCP lane: messages from $want " "$err")
ok $(( from == 3 ? 0 : 1 )) "3 x 1 on $cpus CPUs: every rank takes the lane from $want ($from of 3)" ||
	diag "$(grep 'TCP lane: messages from' "$err")"
# 3 x 1 allreduce of 128 KiB (rank 0: the ring) against 128 KiB + 4
# (ranks 1 and 2: the direct one): rank 0 never sends rank 2 the block it
# waits for, and the mismatch notice of the rank that found the counts
# apart must end rank 2's wait, before rank 0 exits 2 s later.
out=$(step -N3 --ntasks-per-node=1 "$CHECK" straddle ring-direct 2>&1)
fast=$(sed -n 's/^rank [0-2]: straddle ring-direct, .*HVD_ERR_MISMATCH after \([0-9.]*\) s.*/\1/p' <<<"$out" |
	awk '$1 < 1.5' | wc -l)
ok $(( fast == 3 ? 0 : 1 )) \
	"3 x 1 allreduce, 128 KiB against 128 KiB + 4 (the ring against direct): $fast of 3 ranks fail with HVD_ERR_MISMATCH within 1.5 s" ||
	diag "$out"
out=$(step -N3 --ntasks-per-node=2 "$CHECK" 2>&1)
check_run "3 nodes x 2 ranks" "$out"

# hvd-bench against OpenMPI across the namespaces, as hvd-bench(1) says
# (vader's segment in the node's own /tmp: with /dev/shm shared, two nodes'
# local rank 0 crashed on one file): every result checked, the ratios
# printed.
# (config.h says whether OpenMPI is in: asking hvd-bench would MPI_Init a
# singleton, whose orted was seen to die and leave it waiting for good.)
if ! grep -q '^#define HVD_HAVE_MPI 1' "$top_builddir/config.h"; then
	skip "hvd-bench was built without OpenMPI"
else
	out=$(OMPI_MCA_pml=ob1 OMPI_MCA_btl=self,vader,tcp \
		OMPI_MCA_btl_vader_backing_directory=/tmp \
		step -N2 --ntasks-per-node=2 "$BENCH" -b 4K -e 1M -f 256 -R 2 \
		--compare mpi 2>&1)
	rows=$(grep -c -E '^ +[0-9]+ .* 0 +[0-9.]+ +[0-9.]+ +[0-9.]+-[0-9.]+$' <<<"$out")
	is "$rows" 2 "hvd-bench -R 2 --compare mpi (ob1, vader in /tmp) on 2 x 2: 2 rows, none wrong" ||
		diag "$out"
fi

# A rank dies inside an allreduce: every survivor, on every node, fails
# naming it, long before HOROVOD_PEER_TIMEOUT (default 60 s) would.
kill_run() { # name victim survivors "[COUNT [allgather]]" srun-args...
	local name=$1 victim=$2 n=$3 call=$4 start took named want late
	shift 4
	start=$(date +%s)
	# shellcheck disable=SC2086 # call: coll_check's words after K
	out=$(step "$@" "$CHECK" kill "$victim" $call 2>/dev/null)
	took=$(($(date +%s) - start))
	want=$(grep -c '^rank ' <<<"$out")
	named=$(grep -c "HVD_ERR_PEER_FAILED after [0-9.]* s: .*rank $victim failed" <<<"$out")
	late=$(awk '/HVD_ERR_PEER_FAILED after/ {
		for (i = 1; i <= NF; i++) if ($i == "after" && $(i + 1) + 0 >= 60) n++ }
		END {print n + 0}' <<<"$out")
	ok $(( named == want && want == n && late == 0 && took < 90 ? 0 : 1 )) \
		"$name: $named of $n survivors name rank $victim, none after 60 s; step ended in ${took}s" ||
		diag "$out"
}
kill_run "2 x 2, rank 1 (node 1) killed" 1 3 "" -N2 --ntasks-per-node=2
# 8 bytes go through the node leaders (HVD_HIER_LEADER_MAX): a dead
# leader, and a dead node-mate of the other node's leader
kill_run "2 x 2, 8 B, rank 2 (node 2's leader) killed" 2 3 2 -N2 --ntasks-per-node=2
kill_run "2 x 2, 8 B, rank 1 (node 1) killed" 1 3 2 -N2 --ntasks-per-node=2
# 256 KiB allgathers: a ring per local index, then shared memory
kill_run "2 x 2, 256 KiB allgather, rank 3 (node 2) killed" 3 3 "65536 allgather" -N2 --ntasks-per-node=2
# 4 KiB alltoalls through the leaders: a dead leader, and a dead
# node-mate of the other node's leader
kill_run "2 x 2, 4 KiB alltoall, rank 2 (node 2's leader) killed" 2 3 "1024 alltoall" -N2 --ntasks-per-node=2
kill_run "2 x 2, 4 KiB alltoall, rank 1 (node 1) killed" 1 3 "1024 alltoall" -N2 --ntasks-per-node=2
# 1 MiB reducescatters: shared memory, then a ring per local index
kill_run "2 x 2, 1 MiB reducescatter, rank 3 (node 2) killed" 3 3 "262144 reducescatter" -N2 --ntasks-per-node=2
kill_run "3 x 1, rank 2 (node 3) killed" 2 2 "" -N3 --ntasks-per-node=1

# The nodes lose each other mid-allreduce (each node's neighbour entries
# for the others' addresses point at a MAC nobody has: the packets vanish,
# no reset comes, as when a switch port or a node's kernel dies): with
# HOROVOD_PEER_TIMEOUT=10 every rank, on both nodes, fails naming a peer
# 10 s after the cut (whole seconds: 9 or more), not later than 30 s,
# and the step ends.  The first rank whose collective times out tells
# every rank (a failure notice): each rank names the peer it timed out
# on, or the one a notice named ("rank 2 reports no progress from it").
# 16 MiB: the TCP lane and shared memory; 8 B: UCX through the leaders.
# Then 3 x 1 with only node1 and node2 apart.
TIMED_OUT='no progress from it for 10 s \(HOROVOD_PEER_TIMEOUT\)|rank [0-9] reports no progress from it \(HOROVOD_PEER_TIMEOUT\)'
# sever add|del [PAIRS]: lib.sh's netns_sever on this cluster
sever() { netns_sever "$dir" "$@"; }
# cut_run NAME SIZE NODES RANKS-PER-NODE [PAIRS [WHY]]: WHY (an ERE) is
# the reason each rank gives for the peer it names, by default the
# timeout
cut_run() {
	local start took named fails n=$(($3 * $4))
	local why=${6:-"$TIMED_OUT"}
	start=$(date +%s)
	(sleep 4 && sever add "${5:-}") &
	out=$(HOROVOD_PEER_TIMEOUT=10 step -N"$3" --ntasks-per-node="$4" "$BENCH" \
		-o allreduce -b "$2" -e "$2" -n 100000000 -w 1 2>&1)
	wait
	took=$(($(date +%s) - start - 4))
	sever del
	named=$(grep -c -E "^hvd-bench: allreduce of [0-9]+ elements: HVD_ERR_PEER_FAILED: .*rank [0-9] failed: ($why)" <<<"$out")
	# srun's lines name tasks as "task 1", "tasks 0-1" or "tasks 1,3"
	fails=$(sed -n 's/^srun: error: node[1-3]: tasks* \([0-9,-]*\): Exited with exit code 1$/\1/p' <<<"$out" |
		tr ',' '\n' | awk -F- '{ n += NF == 2 ? $2 - $1 + 1 : 1 } END { print n + 0 }')
	ok $((named == n && fails == n && took >= 9 && took < 30 ? 0 : 1)) \
		"$1: $named of $n ranks fail naming a peer ($why), all $n exit 1; the step ended ${took}s after the cut" ||
		diag "$out"
}
# Which reason a rank gives is a race: a rank whose timeout comes first
# exits, and the others may then see its connection fail before their
# own timeout (CI: rank 2 timed out on rank 1, ranks 0 and 1 then named
# rank 2 "Endpoint timeout"; the same on 2 x 2, 8 B, under make
# distcheck, ranks 0 and 1 naming rank 3), or before its notice (rank 2
# named rank 1 "transfer failed (Connection reset by remote peer)", 1
# run in 7 here).
CUT_WHY="$TIMED_OUT"'|UCX reported its connection failed \([A-Za-z ]+\)|transfer failed \(Connection reset by remote peer\)'
cut_run "2 x 2, 16 MiB, the nodes cut apart" 16M 2 2 "" "$CUT_WHY"
cut_run "2 x 2, 8 B, the nodes cut apart" 8 2 2 "" "$CUT_WHY"
# node1 and node2 lose each other, node3 still reaches both: every rank
# fails.
cut_run "3 x 1, 1 MiB, node1 and node2 cut apart, node3 not" 1M 3 1 1-2 \
	"$CUT_WHY"

# A network outage shorter than HOROVOD_PEER_TIMEOUT (60 s by default):
# the nodes cut apart for 20 s, then joined again.  The allreduces stall
# and go on, every result right.  UCX's TCP keepalive (3 probes 2 s
# apart) used to fail every rank 6-16 s into the outage ("Endpoint
# timeout", a rank naming one it sends nothing); libhvd spreads the
# probes over HOROVOD_PEER_TIMEOUT.
start=$(date +%s)
(sleep 4 && sever add && sleep 20 && sever del && date +%s >"$dir/healed") &
out=$(step -N2 --ntasks-per-node=2 "$BENCH" -o allreduce -b 16M -e 16M \
	-n 1500 -w 1 2>&1)
wait
sever del
ended=$(date +%s)
healed=$(cat "$dir/healed" 2>/dev/null)
right=$(awk '$1 == 16777216 && $NF == "0"' <<<"$out" | wc -l)
ok $((right == 1 && ${healed:-ended + 1} < ended ? 0 : 1)) \
	"2 x 2, 16 MiB, the nodes cut apart for 20 s: the allreduces go on, right ($right row), and end $((ended - ${healed:-0})) s after the network is back" ||
	diag "$out"
