#!/bin/sh
# hvdrun forwards the ranks' stdout and stderr line by line: --tag-output
# prefixes, no interleaved partial lines, nothing lost under volume.
. "$(dirname "$0")/hvdrun_lib.sh"

plan 10

timeout -k 10 "$LIMIT" "$HVDRUN" -np 4 --tag-output "$CLIENT" >"$OUT/o" 2>"$OUT/e"
rc=$?
bad=$(grep -vc '^\[\([0-3]\)\] rank \1/4: ok$' "$OUT/o")
is "$rc:$(wc -l <"$OUT/o"):$bad" "0:4:0" "--tag-output prefixes [rank]"

# stdout and stderr stay apart, both tagged.
timeout -k 10 "$LIMIT" "$HVDRUN" -np 2 --tag-output \
	sh -c 'echo "out $PMIX_RANK"; echo "err $PMIX_RANK" >&2' \
	>"$OUT/o" 2>"$OUT/e"
is "$(sort "$OUT/o" | tr '\n' ,)|$(sort "$OUT/e" | tr '\n' ,)" \
	"[0] out 0,[1] out 1,|[0] err 0,[1] err 1," \
	"stdout and stderr forwarded separately"

# A line written in pieces, while the other ranks write, arrives whole.
timeout -k 10 "$LIMIT" "$HVDRUN" -np 3 --tag-output sh -c \
	'printf "begin-$PMIX_RANK"; sleep 0.3; printf " end-$PMIX_RANK\n"
	 printf "no newline $PMIX_RANK"' >"$OUT/o" 2>"$OUT/e"
bad=$(grep -vc -e '^\[\([0-2]\)\] begin-\1 end-\1$' \
	-e '^\[\([0-2]\)\] no newline \1$' "$OUT/o")
is "$(wc -l <"$OUT/o"):$bad" "6:0" \
	"partial lines are held until complete; the last one gets a newline"

# Without --tag-output the bytes pass unchanged.
timeout -k 10 "$LIMIT" "$HVDRUN" -np 1 sh -c 'printf "a\nb"' >"$OUT/o"
is "$(od -An -c "$OUT/o" | tr -d ' \n')" 'a\nb' "untagged output is verbatim"

# Rank 0 reads hvdrun's stdin (not a terminal here); the others /dev/null.
printf 'line1\nline2\n' | timeout -k 10 "$LIMIT" "$HVDRUN" -np 2 --tag-output \
	sh -c 'cat; echo "eof $PMIX_RANK"' >"$OUT/o" 2>"$OUT/e"
is "$(sort "$OUT/o" | tr '\n' ,)" "[0] eof 0,[0] line1,[0] line2,[1] eof 1," \
	"stdin goes to rank 0 only"

# Volume: 4 ranks x 20000 lines of 80 bytes (6.4 MB) through pipes.
timeout -k 10 "$LIMIT" "$HVDRUN" -np 4 --tag-output "$CLIENT" --lines 20000 \
	>"$OUT/o" 2>"$OUT/e"
rc=$?
is "$rc" "0" "large output: exit 0"
is "$(grep -c '^\[\([0-3]\)\] rank \1 line [0-9]* of 20000: the quick brown fox jumps over the lazy dog$' "$OUT/o")" \
	"80000" "large output: all 80000 lines arrive intact"
for r in 0 3; do
	n=$(grep "^\[$r\] rank $r line" "$OUT/o" |
	    sed 's/.* line \([0-9]*\) of.*/\1/' | sort -n | uniq | wc -l)
	is "$n" "20000" "large output: rank $r's lines all distinct and present"
done

# A reader that goes away does not hang or kill the job.
timeout -k 10 "$LIMIT" "$HVDRUN" -np 2 "$CLIENT" --lines 100000 2>"$OUT/e" |
	head -n 1 >/dev/null
rc=$?
grep -q 'rank' "$OUT/e" && diag_file "$OUT/e"
is "$(leftovers)" "0" "closed stdout: hvdrun finishes and cleans up"

done_testing
