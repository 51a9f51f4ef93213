#!/bin/sh
# coll.sh - the collectives (coll_check) on 1, 2, 3, 4 and 8 ranks, the
# transport-only algorithms (no shared memory, forced ring with small
# segments, Bruck's allgather and the binomial broadcast that large jobs
# take), a /dev/shm without room for the shared-memory segment, a
# HOROVOD_RANK that disagrees with PMIx, and a rank that SIGKILLs itself
# inside an allreduce.  Ranks start through launch.sh
# (hvdrun when built, else mpirun).
set -u

: "${top_builddir:=$(cd "$(dirname "$0")/../.." && pwd)}"
: "${top_srcdir:=$(cd "$(dirname "$0")/../.." && pwd)}"
export top_builddir
LAUNCH=$top_srcdir/tests/runtime/launch.sh
CHECK=$top_builddir/tests/runtime/coll_check
LIMIT=${HVD_COLL_TEST_LIMIT:-150}

n=0
fail=0
ok() { # status description
	n=$((n + 1))
	if [ "$1" -eq 0 ]; then
		echo "ok $n - $2"
	else
		echo "not ok $n - $2"
		fail=$((fail + 1))
	fi
}

launcher=$("$LAUNCH" --which)
if [ "$launcher" = none ]; then
	echo "1..0 # SKIP no PMIx launcher (neither hvdrun nor mpirun)"
	exit 0
fi
if [ ! -x "$CHECK" ]; then
	echo "1..0 # SKIP $CHECK not built"
	exit 0
fi
T=$(mktemp -d "${TMPDIR:-/var/tmp}/coll-test.XXXXXX")
trap 'rm -rf "$T"' EXIT

sizes=${HVD_COLL_TEST_SIZES:-1 2 3 4 8}
set -- $sizes
echo "1..$(($# + 57))"
echo "# launcher: $launcher"

# run_check NAME NP [ENV...]: coll_check on NP ranks; passes when rank 0's
# TAP has no failure and ends with a complete plan.  $run_in, when set,
# is a command to run the launch under (small_shm SIZE).
run_in=
run_check() {
	name=$1
	np=$2
	shift 2
	start=$(date +%s)
	$run_in env "$@" timeout "$LIMIT" "$LAUNCH" -np "$np" "$CHECK" \
		>"$T/out" 2>"$T/err"
	rc=$?
	took=$(($(date +%s) - start))
	planned=$(sed -n 's/^1\.\.\([0-9]*\)$/\1/p' "$T/out")
	passed=$(grep -c '^ok ' "$T/out")
	bad=$(grep -c '^not ok' "$T/out")
	st=0
	[ "$rc" -eq 0 ] && [ -n "$planned" ] && [ "$bad" -eq 0 ] &&
		[ "$passed" -eq "$planned" ] || st=1
	ok $st "$name: $passed/${planned:-?} checks passed, exit $rc, ${took}s"
	if [ $st -ne 0 ]; then
		grep -v '^ok ' "$T/out" | head -n 20 | sed 's/^/#   /'
		head -n 20 "$T/err" | sed 's/^/#   stderr: /'
	fi
}

for np in $sizes; do
	run_check "coll_check on $np ranks" $np
done
run_check "4 ranks, UCX only (HVD_SHM=0)" 4 HVD_SHM=0
run_check "5 ranks, UCX only, Bruck allgather, binomial broadcast" 5 \
	HVD_SHM=0 HVD_ALLGATHER_ALGO=bruck HVD_BCAST_ALGO=binomial
# The pairwise alltoall and the direct allgather with their steps in
# flight together (as where the cores outnumber the ranks: on this
# machine they go step by step) and two at a time.
for w in 8 2; do
	run_check "5 ranks, UCX only, $w alltoall steps in flight" 5 \
		HVD_SHM=0 HVD_ALLTOALL_WINDOW=$w
done
# The direct reducescatter (2 ranks up to 64 KiB, 3 ranks above 32 KiB
# to 8 MiB by default: the 2-rank run below) and the direct allreduce (3
# and 4 ranks above 128 KiB to 8 MiB) forced at every size, with empty
# blocks (count < ranks) and on more ranks than they are chosen for.
run_check "5 ranks, UCX only, the direct reducescatter and allreduce at every size" 5 \
	HVD_SHM=0 HVD_REDUCESCATTER_ALGO=direct HVD_ALLREDUCE_ALGO=direct
# Recursive halving, and for the allreduce halving then doubling (a
# power of two of ranks: the 4-rank UCX run above takes them by default)
# in three rounds each, forced at every count, those below the ranks
# (empty blocks) too.
run_check "8 ranks, UCX only, recursive halving (and doubling) at every size" 8 \
	HVD_SHM=0 HVD_REDUCESCATTER_ALGO=halving HVD_ALLREDUCE_ALGO=halving
# The allreduce's halving on other numbers of ranks folds the first
# 2 x rem onto the power of two below (one, one and two pairs), forced
# at every size: large jobs of such sizes take it by default.
for np in 3 5 6; do
	run_check "$np ranks, UCX only, the allreduce's halving folded onto a power of two" \
		$np HVD_SHM=0 HVD_ALLREDUCE_ALGO=halving
done
run_check "3 ranks, UCX ring everywhere with 4 KiB segments" 3 HVD_SHM=0 \
	HVD_ALLREDUCE_ALGO=ring HVD_REDUCESCATTER_ALGO=ring \
	HVD_ALLGATHER_ALGO=ring HVD_BCAST_ALGO=chain HVD_RING_SEGMENT=4K \
	HVD_RING_WINDOW=2
# The ring's tightest pipeline: one receive posted ahead, one send out.
for np in 2 4; do
	run_check "$np ranks, UCX ring allreduce, 4 KiB segments, a window of 1" \
		$np HVD_SHM=0 HVD_ALLREDUCE_ALGO=ring HVD_RING_SEGMENT=4K \
		HVD_RING_WINDOW=1
done

# fail_fast PREFIX LIMIT WANT NAME: ok when WANT lines of $T/out that
# start with PREFIX report HVD_ERR_MISMATCH after less than LIMIT s
# (FAST in NAME: how many did); else the output as diagnostics.
fail_fast() {
	ff_fast=$(sed -n "s/^$1.*HVD_ERR_MISMATCH after \([0-9.]*\) s.*/\1/p" "$T/out" |
		awk -v limit="$2" '$1 < limit' | wc -l)
	ff_st=1
	[ "$ff_fast" -eq "$3" ] && ff_st=0
	ok $ff_st "$(printf '%s\n' "$4" | sed "s/FAST/$ff_fast/")"
	[ $ff_st -eq 0 ] || sed 's/^/#   /' "$T/out" | head -n 5
}

# Counts apart in a direct reducescatter (rank 0 16384 floats, the
# others 16386; forced, as three and four ranks take it by default only
# above 32 KiB): a rank receives only its own block from each peer, and
# with three ranks block 0 is 5462 floats either way, so rank 0 saw
# nothing wrong until each block came with the sender's count.  Every
# rank must fail with HVD_ERR_MISMATCH, at once.  "rs-big" (144001 and
# 144003 floats) has blocks too large to carry the count at their end:
# it comes in a message of its own.
for how in rs rs-big; do
	for np in 2 3 4; do
		[ $how = rs-big ] && [ $np = 2 ] && continue
		env HVD_SHM=0 HVD_REDUCESCATTER_ALGO=direct timeout 60 \
			"$LAUNCH" -np $np "$CHECK" straddle $how \
			>"$T/out" 2>"$T/err"
		fail_fast "rank [0-9]*: straddle $how, " 5 $np \
			"direct reducescatter ($how), counts apart on $np ranks: FAST of $np fail with HVD_ERR_MISMATCH within 5 s"
	done
done
# The same by recursive halving, four and eight ranks' choice: without
# the calls its messages carry, ranks 2 and 3 of 4 returned HVD_OK ("rs":
# every message they got had the size they expected).
for how in rs rs-big; do
	for np in 4 8; do
		env HVD_SHM=0 timeout 60 "$LAUNCH" -np $np "$CHECK" straddle $how \
			>"$T/out" 2>"$T/err"
		fail_fast "rank [0-9]*: straddle $how, " 5 $np \
			"reducescatter by recursive halving ($how), counts apart on $np ranks: FAST of $np fail with HVD_ERR_MISMATCH within 5 s"
	done
done

# Counts apart across an algorithm's boundary, where not every rank
# talks to the ones that find it: three ranks allreduce 32768 floats
# (rank 0: the ring) and 32769 (ranks 1 and 2: the direct one).  Rank 0
# never sends rank 2 the block it waits for; the mismatch notice of the
# rank that found the counts apart must end that wait (without it, rank
# 2 waited until rank 0 exited 2 s later, and blamed its death).
env HVD_SHM=0 timeout 60 "$LAUNCH" -np 3 "$CHECK" straddle ring-direct \
	>"$T/out" 2>"$T/err"
fail_fast "rank [0-9]*: straddle ring-direct, " 1.5 3 \
	"allreduce counts apart, the ring on one rank and direct on two: FAST of 3 fail with HVD_ERR_MISMATCH within 1.5 s"

# Counts apart in the folded halving (rank 0 131072 floats, the others
# 131073): rank 1 finds rank 0's input a float short; rank 0 waits for
# the sum, the others in the halving, until the notice.
for np in 3 5; do
	env HVD_SHM=0 HVD_ALLREDUCE_ALGO=halving timeout 60 "$LAUNCH" -np $np \
		"$CHECK" straddle pair >"$T/out" 2>"$T/err"
	fail_fast "rank [0-9]*: straddle pair, " 5 $np \
		"allreduce by the folded halving, counts apart on $np ranks: FAST of $np fail with HVD_ERR_MISMATCH within 5 s"
done

# Two ranks' reducescatter of 16384 floats against 16385: rank 1's
# block is 8192 floats either way, and it completed while rank 0 failed,
# until each block carried the sender's call.  Both must fail, and their
# next collective too, at once (the communicator is broken), where rank
# 1 once waited on rank 0 until the peer timeout.
env HVD_SHM=0 timeout 60 "$LAUNCH" -np 2 "$CHECK" blind >"$T/out" 2>"$T/err"
ok_st=1
[ "$(grep -c '^rank [01]: blind spot, reducescatter of [0-9]* floats: HVD_ERR_MISMATCH' "$T/out")" -eq 2 ] && ok_st=0
ok $ok_st "two ranks' reducescatter with counts apart (16384/16385 floats, block 1 alike): both fail with HVD_ERR_MISMATCH"
[ $ok_st -eq 0 ] || sed 's/^/#   /' "$T/out" | head -n 5
fail_fast "rank [01]: blind spot, next allreduce: " 1 2 \
	"the next collective after it fails with HVD_ERR_MISMATCH within 1 s on FAST of 2 ranks"
# The same by the ring: two ranks at 16384/16385 floats forced, and at
# 131072/131073 (512 KiB, past the exchange: two ranks' ring by
# default), where block 1 is 65536 floats either way; three and four
# ranks forced, with the counts of "rs" and "rs-big" above.
for spec in "2 rs-pair" "2 rs-pair-big" "3 rs" "3 rs-big" "4 rs" "4 rs-big"; do
	set -- $spec
	ring=HVD_REDUCESCATTER_ALGO=ring
	[ $2 = rs-pair-big ] && ring=
	env HVD_SHM=0 $ring timeout 60 "$LAUNCH" -np $1 "$CHECK" straddle $2 \
		>"$T/out" 2>"$T/err"
	fail_fast "rank [0-9]*: straddle $2, " 5 $1 \
		"ring reducescatter ($2), counts apart on $1 ranks: FAST of $1 fail with HVD_ERR_MISMATCH within 5 s"
done
# Finalize after a mismatch: the failed collective left messages nobody
# received (a peer's block, the mismatch notice), and destroying the
# worker warned once for each ("UCX WARN unexpected tag-receive
# descriptor ... was not matched", 2 to 6 lines a run) after the error
# had been given.  Finalize takes them in; every rank must finalize.
: >"$T/errs"
fin=0
for spec in "3 rs direct" "4 rs-big direct" "2 rs-pair-big auto" "3 ring-direct auto"; do
	set -- $spec
	env HVD_SHM=0 HVD_REDUCESCATTER_ALGO=$3 HVD_TEST_FINALIZE=1 \
		timeout 60 "$LAUNCH" -np $1 "$CHECK" straddle $2 \
		>"$T/out" 2>>"$T/errs"
	fin=$((fin + $(grep -c "^rank [0-9]*: hvd_finalize after the mismatch: HVD_OK" "$T/out")))
done
unmatched=$(grep -c 'was not matched' "$T/errs")
ok_st=1
[ "$unmatched" -eq 0 ] && [ "$fin" -eq 12 ] && ok_st=0
ok $ok_st "finalize after a mismatch (4 runs, $fin of 12 ranks finalized): no UCX warning of messages left unmatched ($unmatched)"
[ $ok_st -eq 0 ] || grep 'was not matched' "$T/errs" | head -n 3 | sed 's/^/#   /'

# A call refused on some ranks only (net/refusal.h): rank R passes a NULL
# buffer (a bad root for the broadcast) where the others make the call,
# and then every rank makes an allreduce.  The refusing rank returned at
# once, and its next call paired with the others' refused one: an
# allreduce returned HVD_OK with the data of the next call.  Now every
# rank's refused call fails (HVD_ERR_INVALID_ARG where refused,
# HVD_ERR_MISMATCH where made, within 5 s; a broadcast's ranks that need
# nothing from it may complete it: the chain's and binomial tree's
# differ), no rank's next call succeeds, and every rank finalizes.
# Where every rank refuses, nothing is apart: the next call is right.
# refuse_run NP R CALL LATE [ENV...]
refuse_run() {
	rr_np=$1
	rr_who=$2
	rr_call=$3
	rr_late=$4
	shift 4
	env "$@" timeout 60 "$LAUNCH" -np "$rr_np" "$CHECK" refuse "$rr_who" \
		"$rr_call" $rr_late >"$T/out" 2>"$T/err"
	rr_refused=$(grep -c "^rank [0-9]*: call 1 ($rr_call, refused here) HVD_ERR_INVALID_ARG after" "$T/out")
	# the ranks that made the call name the one that skipped it, however
	# they heard (its word, or another maker's answer to it)
	rr_by='[0-9]*'
	case $rr_who in *,*) ;; [0-9]*) rr_by=$rr_who ;; esac
	rr_made=$(awk '/^rank [0-9]*: call 1 \('"$rr_call"'\) HVD_ERR_MISMATCH after [0-9.]* s: .*rank '"$rr_by"' (refused|made) call [0-9]+ of the blocking collectives, .*(which this rank made|where this rank.s count was not 0)/ && $8 < 5' "$T/out" | wc -l)
	rr_empty=$(grep -c "^rank [0-9]*: call 1 ($rr_call, empty here) HVD_ERR_MISMATCH after [0-9.]* s: .*rank [0-9]* made call [0-9]* of the blocking collectives, which this rank made with a count of 0" "$T/out")
	rr_empty_ok=$(grep -c "^rank [0-9]*: call 1 ($rr_call, empty here) HVD_OK" "$T/out")
	rr_ok1=$(grep -c "^rank [0-9]*: call 1 ($rr_call) HVD_OK" "$T/out")
	rr_next=$(grep -c "^rank [0-9]*: call 2 (allreduce) HVD_ERR_MISMATCH after [0-9.]* s, sum none: .*rank [0-9]* \(refused\|made\) call" "$T/out")
	rr_right=$(grep -c "^rank [0-9]*: call 2 (allreduce) HVD_OK after [0-9.]* s, sum right" "$T/out")
	rr_wrong=$(grep -c "sum WRONG" "$T/out")
	rr_fin=$(grep -c "^rank [0-9]*: finalize HVD_OK" "$T/out")
	rr_took=$(sed -n "s/^rank [0-9]*: call 1 ($rr_call, refused here) [A-Z_]* after \([0-9.]*\) s.*/\1/p" "$T/out" | head -n 1)
}
refuse_show() {
	[ "$1" -eq 0 ] || { sed 's/^/#   /' "$T/out" | cut -c1-200 | head -n 8; head -n 4 "$T/err" | sed 's/^/#   stderr: /'; }
}
# A count of 0 on one rank only (allreduce0, broadcast0): the empty
# call, which the collective skips, paired the same way (the others' call
# returned HVD_OK with the empty rank's next call's data).  Now it fails
# on every rank, as a refused one.
for spec in "2 0 allreduce shm" "3 2 allreduce ucx" "3 0 allgather shm" \
	"3 1 broadcast ucx" "2 0 allreduce0 shm" "3 1 allreduce0 ucx" \
	"3 2 broadcast0 ucx"; do
	set -- $spec
	env=
	[ $4 = ucx ] && env=HVD_SHM=0
	refuse_run $1 $2 $3 "" $env
	skipped=$rr_refused how="$3 refused by rank $2 of $1 ($4): refused there"
	case $3 in *0)
		skipped=$rr_empty
		how="${3%0} of 0 elements on rank $2 of $1 only ($4): it fails there"
	esac
	st=1
	[ "$skipped" -eq 1 ] && [ $((rr_made + rr_ok1)) -eq $(($1 - 1)) ] &&
		{ [ "$rr_made" -ge 1 ] || [ "${3%0}" = broadcast ]; } &&
		[ "$rr_next" -eq "$1" ] &&
		[ "$rr_wrong" -eq 0 ] && [ "$rr_fin" -eq "$1" ] && st=0
	ok $st "$how, $rr_made ranks fail it within 5 s, naming it ($rr_ok1 complete it), the next call fails on $rr_next of $1, $rr_fin finalize"
	refuse_show $st
done
# The others come a second late: the refusing rank waits for their word.
refuse_run 3 0 allreduce late
st=1
[ "$rr_refused" -eq 1 ] && [ "$rr_made" -eq 2 ] && [ "$rr_next" -eq 3 ] &&
	[ "$rr_fin" -eq 3 ] && [ "${rr_took%%.*}" -ge 1 ] && st=0
ok $st "allreduce refused by rank 0 of 3, the others a second late: rank 0 waits for them (${rr_took:-?} s), every rank fails both calls"
refuse_show $st
refuse_run 3 all allreduce0 ""
st=1
[ "$rr_empty_ok" -eq 3 ] && [ "$rr_right" -eq 3 ] && st=0
ok $st "allreduce of 0 elements on all 3 ranks: HVD_OK on $rr_empty_ok, the next call right on $rr_right"
refuse_show $st
for mode in shm ucx; do
	env=
	[ $mode = ucx ] && env=HVD_SHM=0
	refuse_run 3 all allreduce "" $env
	st=1
	[ "$rr_refused" -eq 3 ] && [ "$rr_right" -eq 3 ] && [ "$rr_fin" -eq 3 ] &&
		st=0
	ok $st "allreduce refused by all 3 ranks ($mode): refused on $rr_refused, the next call right on $rr_right"
	refuse_show $st
done
# The refused call is the program's last, and the ranks that made it
# need nothing from the refusing one (a broadcast's leaf, over UCX):
# they complete it and finalize.  The refusing rank waited for their
# word until the finalize's fence gave up, 30 s later; now they answer
# while they wait for every rank to reach hvd_finalize(), and warn.
refuse_run 3 2 broadcast last HVD_SHM=0
warned=$(grep -c "warning: hvd_finalize(): rank 2 refused call [0-9]* of the blocking collectives, hvd_broadcast() (HVD_ERR_INVALID_ARG), which this rank made (this rank's call returned before it heard)" "$T/err")
slow=$(awk '/finalize HVD_OK after/ && $6 > 5' "$T/out" | wc -l)
st=1
[ "$rr_refused" -eq 1 ] && [ "${rr_took%%.*}" -lt 5 ] && [ "$rr_fin" -eq 3 ] &&
	[ "$slow" -eq 0 ] && [ $((warned + rr_made)) -eq 2 ] && st=0
ok $st "broadcast refused by rank 2 of 3 as the last call (ucx): refused there in ${rr_took:-?} s, $rr_fin finalize ($slow took over 5 s), the 2 others warn or fail ($warned, $rr_made)"
refuse_show $st
# Two of five ranks refuse the same call (ucx).  A rank that made it
# answers each refusing rank alone (it answered every rank before: n - 1
# answers to every word, n^2 messages in a job and an endpoint from every
# rank to every rank, however few refused), also once the first word has
# set it apart, since the second refusing rank waits for its word.  Each
# rank's count of what it sent is its debug line in hvd_finalize().
refuse_run 5 1,3 allreduce "" HVD_SHM=0 HOROVOD_LOG_LEVEL=debug
sent_by() {
	sed -n "s/^hvd: \[$1\] debug: hvd_finalize(): \([0-9]*\) words about refused calls sent to \([0-9]*\) ranks.*/\1:\2/p" "$T/err"
}
answers=$(for r in 0 2 4; do sent_by $r; done | tr '\n' ' ')
told=$(for r in 1 3; do sent_by $r; done | tr '\n' ' ')
slow=$(awk '/refused here/ && $10 >= 5' "$T/out" | wc -l)
st=1
[ "$rr_refused" -eq 2 ] && [ "$rr_made" -eq 3 ] && [ "$rr_next" -eq 5 ] &&
	[ "$rr_fin" -eq 5 ] && [ "$slow" -eq 0 ] &&
	[ "$answers" = "2:2 2:2 2:2 " ] && [ "$told" = "4:4 4:4 " ] && st=0
ok $st "allreduce refused by ranks 1 and 3 of 5 (ucx): refused on $rr_refused ($slow took 5 s or more), $rr_made fail it, $rr_fin finalize; words:ranks sent by those that made it: ${answers:-none}(2:2 each), by the refusing ones: ${told:-none}(4:4 each)"
refuse_show $st

# small_shm SIZE CMD...: CMD in a mount namespace of its own whose
# /dev/shm is a tmpfs of SIZE.
small_shm() {
	unshare --mount sh -c 'mount -t tmpfs -o "size=$0,mode=1777" \
		hvd-test /dev/shm && exec "$@"' "$@"
}

# A /dev/shm without room for the node's segment (a container's, or one
# that other jobs filled): local rank 0 cannot allocate it, both ranks
# warn, and the collectives go through UCX.  A segment that was merely
# sized mapped fine, and the first rank to touch a page past the room
# died of SIGBUS.  A tmpfs of 12 MiB of its own (unshare --mount, which
# needs root) holds UCX's shared memory (under 10 MiB for 2 ranks) but
# not a segment of 4 MiB chunks (about 34 MiB).
if unshare --mount true 2>/dev/null; then
	run_in="small_shm 12m"
	run_check "/dev/shm of 12 MiB" 2 HOROVOD_SHM_CHUNK=4M
	r0=$(grep -c '\[0\] warning: shared memory unavailable (.*no room for .* bytes: No space left on device' "$T/err")
	r1=$(grep -c '\[1\] warning: shared memory unavailable (.*local rank 0 could not make the segment' "$T/err")
	st=1
	[ "$r0" -ge 1 ] && [ "$r1" -ge 1 ] && st=0
	ok $st "... rank 0 says there is no room ($r0 times), rank 1 that rank 0 could not make it ($r1)"
	# A /dev/shm of 1 MiB has no room for UCX's own shared memory
	# either: hvd_init fails on both ranks, saying how much room there
	# is and what to do, and what it says to do works.
	small_shm 1m timeout 60 "$LAUNCH" -np 2 "$CHECK" initfail \
		>"$T/out" 2>&1
	said=$(grep -c 'HVD_ERR_TRANSPORT: .*ucp_worker_create failed (.*); /dev/shm has [0-9]* KiB free.*UCX_TLS=^posix' "$T/out")
	st=1
	[ "$said" -eq 2 ] && st=0
	ok $st "/dev/shm of 1 MiB: hvd_init fails on both ranks ($said), naming /dev/shm and UCX_TLS"
	[ $st -eq 0 ] || head -n 5 "$T/out" | sed 's/^/#   /'
	run_in="small_shm 1m"
	run_check "... with UCX_TLS=^posix as it says" 2 UCX_TLS=^posix
	run_in=
else
	for what in "a /dev/shm of 12 MiB" "its warnings" \
		"a /dev/shm of 1 MiB" "UCX_TLS=^posix there"; do
		n=$((n + 1))
		echo "ok $n # SKIP $what: cannot mount a small /dev/shm (unshare --mount needs root)"
	done
fi

# HOROVOD_RANK set for another launch: hvd_init fails, saying so.
HOROVOD_RANK=7 HOROVOD_SIZE=9 timeout 60 "$LAUNCH" -np 2 "$CHECK" initfail \
	>"$T/out" 2>"$T/err"
rc=$?
said=$(grep -c 'HVD_ERR_BOOTSTRAP.*HOROVOD_RANK=7' "$T/out")
st=1
[ $rc -eq 0 ] && [ "$said" -eq 2 ] && st=0
ok $st "HOROVOD_RANK=7 under a 2-rank launch: hvd_init fails on both ranks"
sed -n '1p' "$T/out" | sed 's/^/#   /'

# No launcher at all: one rank on its own (as Horovod without
# horovodrun), unless the environment says several tasks were started.
env -u SLURM_NTASKS -u SLURM_STEP_NUM_TASKS -u HOROVOD_SIZE \
	-u OMPI_COMM_WORLD_SIZE -u PMI_SIZE -u WORLD_SIZE -u PMIX_NAMESPACE \
	timeout 60 "$CHECK" >"$T/out" 2>"$T/err"
rc=$?
planned=$(sed -n 's/^1\.\.\([0-9]*\)$/\1/p' "$T/out")
passed=$(grep -c '^ok ' "$T/out")
st=1
[ $rc -eq 0 ] && [ -n "$planned" ] && [ "$passed" -eq "$planned" ] && st=0
ok $st "no launcher: a single rank, $passed/${planned:-?} checks passed"
env -u PMIX_NAMESPACE SLURM_NTASKS=4 timeout 60 "$CHECK" initfail \
	>"$T/out" 2>&1
st=1
grep -q 'HVD_ERR_BOOTSTRAP.*SLURM_NTASKS=4' "$T/out" && st=0
ok $st "no PMIx server but SLURM_NTASKS=4: hvd_init refuses to run alone"
sed -n '1p' "$T/out" | sed 's/^/#   /'

# Rank 2 of 4 SIGKILLs itself inside an allreduce: the others return
# HVD_ERR_PEER_FAILED naming rank 2 well within HOROVOD_PEER_TIMEOUT, and
# the launcher exits non-zero.
for mode in shm ucx; do
	# (ucx: the survivors also finalize, outliving the launcher's
	# SIGTERM: that must not hang on the dead rank.)
	if [ $mode = ucx ]; then set -- HVD_SHM=0 HVD_TEST_FINALIZE=1; else set --; fi
	start=$(date +%s)
	env "$@" HOROVOD_PEER_TIMEOUT=10 timeout 90 "$LAUNCH" -np 4 --grace 15 \
		"$CHECK" kill 2 >"$T/out" 2>"$T/err"
	rc=$?
	took=$(($(date +%s) - start))
	named=$(grep -c 'HVD_ERR_PEER_FAILED after .*rank 2 failed' "$T/out")
	st=1
	[ "$named" -eq 3 ] && st=0
	ok $st "killed rank ($mode): 3 survivors name rank 2 ($named did)"
	sed 's/^/#   /' "$T/out" | head -n 3
	if [ $mode = ucx ]; then
		fin=$(grep -c 'hvd_finalize after the failure: HVD_OK in [0-9]\.' "$T/out")
		st=1
		[ "$fin" -eq 3 ] && st=0
		ok $st "killed rank: the 3 survivors finalize within 10 s ($fin did)"
	fi
	if [ $mode = shm ]; then
		st=1
		[ $rc -ne 0 ] && [ $rc -ne 124 ] && [ $took -lt 60 ] && st=0
		ok $st "killed rank: the launcher exits non-zero ($rc) in ${took}s"
	fi
done
exit $((fail > 0))
