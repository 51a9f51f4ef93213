#!/bin/sh
# hvdrun serves PMIx to 1..8 ranks: job/placement keys and a Put/Commit/
# Fence(collect)/Get exchange of every peer's values are checked by each
# rank (tests/runtime/pmix_client.c); plus command-line errors.
. "$(dirname "$0")/hvdrun_lib.sh"

plan 18

for np in 1 2 3 4 8; do
	timeout -k 10 "$LIMIT" "$HVDRUN" -np $np "$CLIENT" >"$OUT/o" 2>"$OUT/e"
	rc=$?
	good=$(grep -c "^rank [0-9]*/$np: ok$" "$OUT/o")
	ranks=$(sed -n "s|^rank \([0-9]*\)/$np: ok$|\1|p" "$OUT/o" | sort -n |
		uniq | tr '\n' ' ')
	want=$(seq 0 $((np - 1)) | tr '\n' ' ')
	if [ $rc -eq 0 ] && [ "$good" -eq $np ] && [ "$ranks" = "$want" ]; then
		ok 0 "$np ranks exchange data and see the right job info"
	else
		ok 1 "$np ranks exchange data and see the right job info (rc $rc)"
		diag_file "$OUT/o"
		diag_file "$OUT/e"
	fi
done

# With PMIx's local-only fence shortcut off, fences go through hvdrun's
# fence_nb upcall.
PMIX_MCA_pmix_server_fence_localonly_opt=0 timeout -k 10 "$LIMIT" "$HVDRUN" -vv \
	-np 4 "$CLIENT" >"$OUT/o" 2>"$OUT/e"
rc=$?
is "$rc:$(grep -c ': ok$' "$OUT/o")" "0:4" \
	"4 ranks exchange data through the fence_nb upcall"
n=$(grep -c '^hvdrun: fence of' "$OUT/e")
ok $([ "$n" -ge 2 ] && echo 0 || echo 1) "fence_nb upcall served ($n calls)"

# PMIx_Publish/Lookup/Unpublish (MPI_Publish_name) within the job.
timeout -k 10 "$LIMIT" "$HVDRUN" -np 3 "$CLIENT" --pubsub >"$OUT/o" 2>"$OUT/e"
rc=$?
is "$rc:$(grep -c ': ok$' "$OUT/o")" "0:3" "publish, lookup, unpublish"
[ "$rc" -eq 0 ] || diag_file "$OUT/o"

# A program that does not use PMIx runs too.
out=$(timeout -k 10 "$LIMIT" "$HVDRUN" -np 3 sh -c 'echo "rank $PMIX_RANK"' |
	sort | tr '\n' ,)
is "$out" "rank 0,rank 1,rank 2," "non-PMIx program: 3 ranks, exit 0"

# hvdrun inside hvdrun: the inner one must not inherit the outer job.
timeout -k 10 "$LIMIT" "$HVDRUN" -np 1 "$HVDRUN" -np 2 --tag-output "$CLIENT" \
	>"$OUT/o" 2>"$OUT/e"
is "$?:$(sort "$OUT/o" | tr '\n' ,)" "0:[0] rank 0/2: ok,[1] rank 1/2: ok," \
	"hvdrun inside hvdrun serves its own job"

# Arguments after the program belong to the program.
out=$(timeout -k 10 "$LIMIT" "$HVDRUN" -n 1 -- echo -np 5 --tag-output)
is "$out" "-np 5 --tag-output" "arguments after the program are its own"

out=$(timeout -k 10 "$LIMIT" "$HVDRUN" echo hi 2>&1)
is "$?:$out" "2:hvdrun: the number of ranks is missing: hvdrun -np N PROGRAM [ARGS]" \
	"missing -np is an error (exit 2)"
out=$(timeout -k 10 "$LIMIT" "$HVDRUN" -np 0 echo hi 2>&1)
is "$?:$out" "2:hvdrun: -np 0: expected a number of ranks from 1 to 4096" \
	"-np 0 is an error"
out=$(timeout -k 10 "$LIMIT" "$HVDRUN" -np 2 --frobnicate echo 2>&1)
is "$?" "2" "unknown option is an error ($out)"
out=$(timeout -k 10 "$LIMIT" "$HVDRUN" -np 2 no-such-program-hvd 2>&1)
is "$?:$out" "127:hvdrun: no-such-program-hvd: command not found in PATH" \
	"missing program: exit 127"
out=$(timeout -k 10 "$LIMIT" "$HVDRUN" -np 2 2>&1)
is "$?" "2" "missing program after -np is an error ($out)"
timeout -k 10 "$LIMIT" "$HVDRUN" --help | grep -q '^usage: hvdrun -np N'
ok $? "--help prints the usage"

is "$(leftovers)" "0" "no server directory left in TMPDIR"
done_testing
