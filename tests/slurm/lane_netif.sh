#!/bin/bash
# shellcheck disable=SC2154 # lib.sh sets oc_dir, oc_out
# lane_netif.sh - which network the TCP lane (net/lane.h, net/lane_if.h)
# takes where a node has two: a cluster of its own (minicluster --netns, 2
# nodes) whose nodes get a second network, fast0, on a bridge of its own
# and with the default route, beside eth0 (the cluster's own).  A 16 MiB
# allreduce between the nodes, and each node's bytes sent per interface:
# - unset, the lane takes fast0 (equal link speeds: the default route's
#   interface first), where it used to take the first interface the
#   kernel lists (eth0);
# - UCX_NET_DEVICES=eth0 (what the SPANK plugin sets) puts it on eth0 with
#   UCX, and HVD_TCP_LANE_IF=fast0 overrides that;
# - fast0 without a carrier on one node: that node offers eth0 alone and
#   the other dials it there;
# - HVD_TCP_LANE_IF naming no interface: no lane, a message saying why,
#   and the allreduce still right (UCX carries it);
# - HVD_TCP_LANE_PORTS, or UCX_TCP_PORT_RANGE, puts the lane's listeners
#   on those ports; where node1 cannot reach them on node2 (a route of
#   its own for them, unreachable: a firewall), every rank fails and
#   rank 0 says what the lane needs; a range that is none, or whose one
#   port another rank of the node holds, is a warning, and UCX carries;
# - IPv6: fast0 loses its IPv4 address and gets an IPv6 one (fd..::/64):
#   the lane offers eth0's IPv4 first, then fast0's IPv6; with an IPv6
#   default route by fast0, fast0 first, and the bytes go on it; named
#   alone (HVD_TCP_LANE_IF=fast0), rank 0 dials rank 1 at [fd..::2]; a
#   deprecated address, a tentative one and a failed duplicate are not
#   offered;
# - an address that gives no answer (node1's neighbour entry for node2's
#   fast0 address a MAC nobody has: the SYNs vanish, as behind a firewall
#   that drops them): rank 0 starts eth0's 250 ms later and gets through
#   at once, where it used to wait 5 s; with two ranks a node, each of
#   node1's ranks waits so for its first peer only, and dials fast0 last
#   after that; with every lane address silent (the lane's ports routed
#   so from node1), the error comes after 5 s in all, naming each
#   address, where it took 5 s for each.
hvdt_own_cluster=1
. "${top_srcdir:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/slurm/lib.sh"

own_cluster_require --netns slurmctld slurmd srun unshare
BENCH=$top_builddir/runtime/hvd-bench
[[ -x $BENCH ]] || skip_all "$BENCH not built"
own_cluster_visible
plan 50
T=$HVD_TEST_TIMEOUT

own_cluster_dir netif
job=
tag=$(own_cluster_netns_tag "$oc_dir")
br=hvf$tag
net=10.250.$((0x${tag:0:2}))
cleanup() {
	[[ -z $job ]] || scancel "$job" >/dev/null 2>&1
	for k in 1 2; do ip link del "hvf${tag}n$k" >/dev/null 2>&1; done
	ip link del "$br" >/dev/null 2>&1
	hvdt_at_exit
}
trap cleanup EXIT

if ! HVD_BUILD_DIR=$top_builddir own_cluster_start run_timeout 120 -- \
	--nodes 2 --netns --plugin none; then
	diag "$oc_out"
	bail_out "the --netns mini-cluster did not start"
fi
ns1=hvd-$tag-node1
ns2=hvd-$tag-node2
[[ -e /run/netns/$ns1 && -e /run/netns/$ns2 ]] ||
	bail_out "no namespaces $ns1, $ns2: $(ip netns list | tr '\n' ' ')"
eth1=$(ip -n "$ns1" -4 -o addr show eth0 | awk '{sub("/.*", "", $4); print $4}')
eth2=$(ip -n "$ns2" -4 -o addr show eth0 | awk '{sub("/.*", "", $4); print $4}')

# The second network: a bridge on this machine, a veth into each node,
# the node's default route through it.
out=$({
	ip link add "$br" type bridge &&
		ip addr add "$net.254/24" dev "$br" &&
		ip link set "$br" up &&
		for k in 1 2; do
			ns=hvd-$tag-node$k
			ip link add "hvf${tag}n$k" type veth peer name fast0 netns "$ns" &&
				ip link set "hvf${tag}n$k" master "$br" up &&
				ip -n "$ns" addr add "$net.$k/24" dev fast0 &&
				ip -n "$ns" link set fast0 up &&
				ip -n "$ns" route add default via "$net.254" dev fast0 ||
				exit 1
		done
} 2>&1)
ok $? "each node has fast0 ($net.0/24, the default route) beside eth0 ($eth1, $eth2)" ||
	bail_out "$out"

own_cluster_alloc -N2 --ntasks-per-node=2

# sent NS IF: the bytes IF of namespace NS has sent
sent() { ip netns exec "$1" cat "/sys/class/net/$2/statistics/tx_bytes"; }

# run ENV...: a 16 MiB allreduce 12 times between the nodes, with the
# lane's debug lines; sets out, and mb_fast and mb_eth: the MiB node1
# and node2 sent on fast0 and eth0 meanwhile (the smaller of the two).
run() {
	local f1 f2 e1 e2 a b c d
	f1=$(sent "$ns1" fast0) f2=$(sent "$ns2" fast0)
	e1=$(sent "$ns1" eth0) e2=$(sent "$ns2" eth0)
	out=$(run_timeout "$T" env HOROVOD_LOG_LEVEL=debug "$@" srun -Q \
		--overlap --jobid="$job" -N2 --ntasks-per-node=1 --mpi=pmix \
		"$BENCH" -o allreduce -b 16M -e 16M -n 10 -w 2 2>&1)
	a=$(($(sent "$ns1" fast0) - f1)) b=$(($(sent "$ns2" fast0) - f2))
	c=$(($(sent "$ns1" eth0) - e1)) d=$(($(sent "$ns2" eth0) - e2))
	mb_fast=$(((a < b ? a : b) >> 20))
	mb_eth=$(((c < d ? c : d) >> 20))
}
# right: the allreduce's row, every element checked and none wrong
right() { awk '$1 == 16777216 && $NF == "0" { n++ } END { exit n != 1 }' <<<"$out"; }
offers() { # RANK: what the rank's lane offers
	sed -n "s/.*TCP lane: rank $1 offers \\(.*\\)$/\\1/p" <<<"$out"
}
reached() { sed -n 's/.*TCP lane: rank 0 reached rank 1 at \([0-9.]*\|\[[0-9a-f:]*\]\):.*/\1/p' <<<"$out"; }

# on_fast LABEL OFFERS-RE WHAT ADDR: after a run, the allreduce right,
# the ranks' offers matching OFFERS-RE (WHAT says what that means), rank
# 1 reached at ADDR and the bytes on fast0, not eth0.
on_fast() {
	right
	ok $? "$1: the allreduce is right" || diag "$out"
	like "$(offers 0) / $(offers 1)" "$2" "$1: $3"
	is "$(reached)" "$4" "$1: rank 0 reached rank 1 at $4"
	ok $((mb_fast >= 150 && mb_eth < 16 ? 0 : 1)) \
		"$1: each node sent $mb_fast MiB on fast0, $mb_eth on eth0"
}

# 12 allreduces of 16 MiB: each rank sends 16 MiB a call, 192 MiB in all.
run
on_fast unset \
	"^$net\\.1 \\(fast0, [0-9]+ Mb/s, default route\\), $eth1 \\(eth0.* / $net\\.2 \\(fast0, [0-9]+ Mb/s, default route\\), $eth2 \\(eth0" \
	"each rank offers fast0 (the default route's) first, then eth0" "$net.2"

run UCX_NET_DEVICES=eth0
right
ok $? "UCX_NET_DEVICES=eth0: the allreduce is right" || diag "$out"
like "$(offers 0) / $(offers 1)" "^$eth1 \\(eth0[^)]*\\) / $eth2 \\(eth0[^)]*\\)$" \
	"UCX_NET_DEVICES=eth0: each rank offers eth0 alone"
ok $((mb_eth >= 150 && mb_fast < 16 ? 0 : 1)) \
	"UCX_NET_DEVICES=eth0: each node sent $mb_eth MiB on eth0, $mb_fast on fast0"

run UCX_NET_DEVICES=eth0 HVD_TCP_LANE_IF=fast0
right
ok $? "HVD_TCP_LANE_IF=fast0 over UCX_NET_DEVICES=eth0: the allreduce is right" || diag "$out"
like "$(offers 0) / $(offers 1)" "^$net\\.1 \\(fast0[^)]*\\) / $net\\.2 \\(fast0[^)]*\\)$" \
	"HVD_TCP_LANE_IF=fast0: each rank offers fast0 alone"
ok $((mb_fast >= 150 ? 0 : 1)) \
	"HVD_TCP_LANE_IF=fast0: each node sent $mb_fast MiB on fast0 (UCX, on eth0: $mb_eth)"

# node2's fast0 loses its carrier (the other end goes down): still up,
# not running.
ip link set "hvf${tag}n2" down
run
ip link set "hvf${tag}n2" up
right
ok $? "fast0 without carrier on node2: the allreduce is right" || diag "$out"
like "$(offers 1)" "^$eth2 \\(eth0[^)]*\\)$" \
	"fast0 without carrier on node2: rank 1 offers eth0 alone ($(offers 1))"
is "$(reached)" "$eth2" "fast0 without carrier on node2: rank 0 reached rank 1 on eth0"

run HVD_TCP_LANE_IF=nosuch0
right
ok $? "HVD_TCP_LANE_IF=nosuch0: the allreduce is right (UCX)" || diag "$out"
n=$(grep -c 'no TCP lane: no interface named by HVD_TCP_LANE_IF=nosuch0 is up with a carrier' <<<"$out")
is "$n" 2 "HVD_TCP_LANE_IF=nosuch0: both ranks say why there is no lane" ||
	diag "$(grep 'TCP lane' <<<"$out" | head -n 6)"
is "$(grep -c 'TCP lane: rank [01] offers' <<<"$out")" 0 \
	"HVD_TCP_LANE_IF=nosuch0: no rank offers a lane"

# ports: the listeners' ports (rank 0's, rank 1's)
ports() {
	sed -n 's/.*TCP lane: rank \([01]\) listens on [0-9.]*:\([0-9]*\) .*/\1 \2/p' <<<"$out" |
		sort | awk '{print $2}' | tr '\n' ' '
}
inside() { # PORTS LO HI: every one of PORTS within LO-HI, and two of them
	awk -v lo="$2" -v hi="$3" '{ for (i = 1; i <= NF; i++) if ($i < lo || $i > hi) exit 1; exit NF != 2 }' <<<"$1"
}
for var in HVD_TCP_LANE_PORTS UCX_TCP_PORT_RANGE; do
	run "$var=23040-23295"
	right
	ok $? "$var=23040-23295: the allreduce is right" || diag "$out"
	p=$(ports)
	inside "$p" 23040 23295
	ok $? "$var=23040-23295: the lanes listen on ports $p" ||
		diag "$(grep 'listens on' <<<"$out")"
done

# node1 cannot reach 23296-23551 anywhere (TCP to them is unreachable):
# the lane's connection to rank 1 fails at once, every rank fails, and
# rank 0 says what to do.
out=$({
	ip -n "$ns1" rule add ipproto tcp dport 23296-23551 table 147 &&
		ip -n "$ns1" route add unreachable default table 147
} 2>&1)
ok $? "node1: TCP to ports 23296-23551 unreachable (policy routing)" || diag "$out"
start=$(date +%s)
run HVD_TCP_LANE_PORTS=23296-23551
took=$(($(date +%s) - start))
ip -n "$ns1" rule del ipproto tcp dport 23296-23551 table 147 >/dev/null 2>&1
ip -n "$ns1" route del unreachable default table 147 >/dev/null 2>&1
n=$(grep -c -E 'rank 1 failed: its TCP lane connection could not be made in [0-9.]+ s \(([0-9.]+:23[0-9]{3} No route to host; )+a firewall between the nodes\? HVD_TCP_LANE_PORTS, or HVD_TCP_LANE=0\)' <<<"$out")
ok $((n > 0 ? 0 : 1)) "ports out of reach: rank 0 says the lane's connection could not be made, where, and what to do ($n lines)" ||
	diag "$out"
fails=$(grep -c 'srun: error: node[12]: task [01]: Exited with exit code [1-9]' <<<"$out")
ok $((fails == 2 && took < 60 ? 0 : 1)) \
	"ports out of reach: both ranks fail ($fails), in ${took}s" || diag "$out"

# A range of one port and two ranks a node: one listener a node gets it,
# the other rank says so and has no lane; the allreduce is right.
out=$(run_timeout "$T" env HOROVOD_LOG_LEVEL=debug HVD_TCP_LANE_PORTS=23600-23600 \
	srun -Q --overlap --jobid="$job" -N2 --ntasks-per-node=2 --mpi=pmix \
	"$BENCH" -o allreduce -b 4M -e 4M -n 4 -w 1 2>&1)
got=$(grep -c 'TCP lane: rank [0-3] listens on [0-9.]*:23600 ' <<<"$out")
taken=$(grep -c 'every port of HVD_TCP_LANE_PORTS=23600-23600 is taken on this node' <<<"$out")
right4=$(awk '$1 == 4194304 && $NF == "0"' <<<"$out" | wc -l)
ok $((got == 2 && taken == 2 && right4 == 1 ? 0 : 1)) \
	"a range of one port, two ranks a node: $got listen on it, $taken say it is taken, the allreduce right ($right4)" ||
	diag "$out"

run HVD_TCP_LANE_PORTS=9-x
right
ok $? "HVD_TCP_LANE_PORTS=9-x: the allreduce is right (UCX)" || diag "$out"
n=$(grep -c 'HVD_TCP_LANE_PORTS=9-x is not a port range (expected MIN-MAX within 1-65535, or 0 for any): no TCP lane' <<<"$out")
is "$n" 2 "HVD_TCP_LANE_PORTS=9-x: a warning on both ranks"

# IPv6: fast0 keeps no IPv4 address (the default route goes with it) and
# gets fd$tag::K/64 (nodad: usable at once), the bridge fd$tag::254.
v6=fd${tag:0:2}:1${tag:2:2}0
out=$({
	ip addr add "$v6::254/64" dev "$br" nodad &&
		for k in 1 2; do
			ns=hvd-$tag-node$k
			ip -n "$ns" addr del "$net.$k/24" dev fast0 &&
				ip -n "$ns" addr add "$v6::$k/64" dev fast0 nodad || exit 1
		done
} 2>&1)
ok $? "fast0 IPv6 alone: $v6::1, $v6::2" || diag "$out"
# Beside them, addresses nobody can use yet or any more: node1's ::11
# deprecated, node2's ::12 tentative (duplicate address detection that
# takes 2 minutes) and ::1 a failed duplicate (node1 has it).
out=$({
	ip -n "$ns1" addr add "$v6::11/64" dev fast0 preferred_lft 0 &&
		ip netns exec "$ns2" sysctl -qw net.ipv6.conf.fast0.dad_transmits=120 &&
		ip -n "$ns2" addr add "$v6::12/64" dev fast0 &&
		ip -n "$ns2" addr add "$v6::1/64" dev fast0 &&
		for _ in 1 2 3 4 5 6 7 8 9 10; do
			ip -n "$ns2" -6 addr show dev fast0 | grep -q "$v6::1/64 .*dadfailed" && break
			sleep 0.5
		done
	ip -n "$ns1" -6 addr show dev fast0 | grep -q "$v6::11/64 .*deprecated" &&
		ip -n "$ns2" -6 addr show dev fast0 | grep -q "$v6::12/64 .*tentative" &&
		ip -n "$ns2" -6 addr show dev fast0 | grep -q "$v6::1/64 .*dadfailed"
} 2>&1)
ok $? "node1 $v6::11 deprecated, node2 $v6::12 tentative, node2 $v6::1 a failed duplicate" ||
	diag "$out" "$(ip -n "$ns1" -6 addr show dev fast0)" "$(ip -n "$ns2" -6 addr show dev fast0)"
run
right
ok $? "fast0 IPv6 alone: the allreduce is right" || diag "$out"
like "$(offers 0) / $(offers 1)" \
	"^$eth1 \\(eth0[^)]*\\), $v6::1 \\(fast0[^)]*\\) / $eth2 \\(eth0[^)]*\\), $v6::2 \\(fast0[^)]*\\)$" \
	"fast0 IPv6 alone, no default route: eth0's IPv4 first, then fast0's IPv6, and not the addresses that are not settled"
ip -n "$ns1" addr del "$v6::11/64" dev fast0 >/dev/null 2>&1
ip -n "$ns2" addr del "$v6::12/64" dev fast0 >/dev/null 2>&1
ip -n "$ns2" addr del "$v6::1/64" dev fast0 >/dev/null 2>&1

out=$(for k in 1 2; do
	ip -n "hvd-$tag-node$k" -6 route add default via "$v6::254" dev fast0 || exit 1
done 2>&1)
ok $? "an IPv6 default route by fast0 on both nodes" || diag "$out"
run
on_fast "IPv6 default route" \
	"^$v6::1 \\(fast0[^)]*default route\\), $eth1 \\(eth0[^)]*\\) / $v6::2 \\(fast0[^)]*default route\\), $eth2 \\(eth0" \
	"fast0's IPv6 first" "[$v6::2]"

run HVD_TCP_LANE_IF=fast0 UCX_NET_DEVICES=eth0
right
ok $? "HVD_TCP_LANE_IF=fast0 (IPv6 alone): the allreduce is right" || diag "$out"
like "$(grep 'listens on' <<<"$out" | head -n 1)" "listens on \\[$v6::[12]\\]:[0-9]+ \\(1 address\\)" \
	"HVD_TCP_LANE_IF=fast0 (IPv6 alone): the lane listens on an IPv6 address"

# node2's fast0 address silent for node1.
out=$(ip -n "$ns1" -6 neigh replace "$v6::2" lladdr 02:00:00:00:00:99 dev fast0 nud permanent 2>&1)
ok $? "node1: $v6::2 silent (a neighbour entry nobody answers to)" || diag "$out"
run HVD_TCP_LANE_IF=fast0,eth0 UCX_NET_DEVICES=eth0
right
ok $? "fast0 silent: the allreduce is right" || diag "$out"
like "$(offers 1)" "^$v6::2 \\(fast0[^)]*\\), $eth2 \\(eth0" "fast0 silent: rank 1 offers fast0 first"
is "$(reached)" "$eth2" "fast0 silent: rank 0 reached rank 1 on eth0"
ms=$(sed -n 's/.*TCP lane: rank 0 reached rank 1 at .* in \([0-9]*\) ms$/\1/p' <<<"$out")
ok $((${ms:-99999} < 2500 ? 0 : 1)) \
	"fast0 silent: in ${ms:-?} ms (the next address after 250 ms, not after the 5 s an attempt waits)"

# Two ranks a node, an alltoall: ranks 0 and 1 each dial ranks 2 and 3
# (the lower rank dials), fast0 first for the first of them, then eth0
# first: fast0's network was silent once, so it waits for none of them.
out=$(run_timeout "$T" env HOROVOD_LOG_LEVEL=debug HVD_TCP_LANE_IF=fast0,eth0 \
	UCX_NET_DEVICES=eth0 srun -Q --overlap --jobid="$job" -N2 \
	--ntasks-per-node=2 --mpi=pmix "$BENCH" -o alltoall -b 16M -e 16M \
	-n 4 -w 1 2>&1)
ip -n "$ns1" -6 neigh del "$v6::2" dev fast0 >/dev/null 2>&1
ok $(($(awk '$1 == 16777216 && $NF == "0"' <<<"$out" | wc -l) == 1 ? 0 : 1)) \
	"fast0 silent, 2 x 2: the alltoall is right" || diag "$out"
dials=$(sed -n 's/.*TCP lane: rank \([01]\) reached rank \([23]\) at \([0-9.]*\):[0-9]* in \([0-9]*\) ms$/\1 \2 \3 \4/p' <<<"$out" | sort)
slow=$(awk -v e="$eth2" '$3 == e && $4 >= 200 { n++ } END { print n + 0 }' <<<"$dials")
fast=$(awk -v e="$eth2" '$3 == e && $4 < 200 { n++ } END { print n + 0 }' <<<"$dials")
ok $((slow == 2 && fast == 2 ? 0 : 1)) \
	"fast0 silent, 2 x 2: each of ranks 0, 1 waits once (250 ms), then reaches the other at once, on eth0 ($slow slow, $fast at once)" ||
	diag "$dials" "$(grep 'gave no answer' <<<"$out")"
n=$(grep -c "TCP lane: \\[$v6::2\\]:[0-9]* gave no answer in [0-9]* ms where $eth2:[0-9]* did: rank [01] dials addresses on its network last from now on" <<<"$out")
is "$n" 2 "fast0 silent, 2 x 2: ranks 0 and 1 each say once that fast0's network goes last"

# Every lane address of node2 silent for node1 on ports 23800-23899.
fake4=${eth1%.*}.98
out=$({
	ip -n "$ns1" neigh replace "$fake4" lladdr 02:00:00:00:00:98 dev eth0 nud permanent &&
		ip -n "$ns1" route add default via "$fake4" dev eth0 table 149 &&
		ip -n "$ns1" rule add ipproto tcp dport 23800-23899 table 149 &&
		ip -n "$ns1" -6 neigh replace "$v6::98" lladdr 02:00:00:00:00:98 dev fast0 nud permanent &&
		ip -n "$ns1" -6 route add default via "$v6::98" dev fast0 table 149 &&
		ip -n "$ns1" -6 rule add ipproto tcp dport 23800-23899 table 149
} 2>&1)
ok $? "node1: TCP to ports 23800-23899 silent (by neighbours nobody answers to)" || diag "$out"
start=$(date +%s)
run HVD_TCP_LANE_PORTS=23800-23899 HVD_TCP_LANE_IF=fast0,eth0 UCX_NET_DEVICES=eth0
took=$(($(date +%s) - start))
ip -n "$ns1" rule del ipproto tcp dport 23800-23899 table 149 >/dev/null 2>&1
ip -n "$ns1" -6 rule del ipproto tcp dport 23800-23899 table 149 >/dev/null 2>&1
line=$(grep -o -E 'rank 1 failed: its TCP lane connection could not be made in [0-9.]+ s \(\[[0-9a-f:]+\]:238[0-9]{2} gave no answer in 5 s; [0-9.]+:238[0-9]{2} gave no answer in 5 s; a firewall between the nodes\?' <<<"$out" | head -n 1)
ok $(($(grep -c . <<<"$line") == 1 ? 0 : 1)) \
	"every address silent: rank 0 names each, and that it gave no answer" || diag "$out"
secs=$(sed -n 's/.*made in \([0-9]*\)\.[0-9] s.*/\1/p' <<<"$line")
ok $((${secs:-99} >= 5 && ${secs:-99} < 8 ? 0 : 1)) \
	"every address silent: the error after ${secs:-?} s (5 s in all, not 5 s an address)"
fails=$(grep -c 'srun: error: node[12]: task [01]: Exited with exit code [1-9]' <<<"$out")
ok $((fails == 2 && took < 60 ? 0 : 1)) \
	"every address silent: both ranks fail ($fails), in ${took}s" || diag "$out"
exit 0
