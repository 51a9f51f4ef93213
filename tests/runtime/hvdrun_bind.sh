#!/bin/bash
# hvdrun --bind-to: each rank on a CPU of its own when there are enough,
# never bound when oversubscribed, never with --bind-to none.
. "$(dirname "$0")/hvdrun_lib.sh"

plan 5
allowed() { # the CPU lists of each rank, sorted, one line
	timeout -k 10 "$LIMIT" "$HVDRUN" "$@" -- \
		sh -c 'sed -n "s/^Cpus_allowed_list:[[:space:]]*//p" /proc/self/status' |
		sort | tr '\n' ' '
}
ncpu=$(nproc)
mine=$(sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' /proc/self/status)

out=$(allowed -np "$ncpu")
singles=$(echo "$out" | tr ' ' '\n' | grep -cE '^[0-9]+$')
distinct=$(echo "$out" | tr ' ' '\n' | grep -E '^[0-9]+$' | sort -u | wc -l)
is "$singles/$distinct" "$ncpu/$ncpu" "-np $ncpu ($ncpu CPUs): each rank bound to one CPU, all different"
echo "# $out"

out=$(allowed -np $((ncpu + 1)))
is "$out" "$(for _ in $(seq $((ncpu + 1))); do printf '%s ' "$mine"; done)" \
	"-np $((ncpu + 1)) (oversubscribed): no rank bound"

out=$(allowed --bind-to none -np "$ncpu")
is "$out" "$(for _ in $(seq "$ncpu"); do printf '%s ' "$mine"; done)" "--bind-to none: no rank bound"

err=$(timeout -k 10 "$LIMIT" "$HVDRUN" --bind-to socket -np 1 true 2>&1)
rc=$?
is "$rc" 2 "--bind-to socket is refused (exit 2)"
echo "$err" | grep -q -- "--bind-to socket: expected core or none"
ok $? "the message names the value and the accepted ones"
done_testing
