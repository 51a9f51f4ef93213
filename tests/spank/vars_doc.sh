#!/bin/bash
# The variables the plugin may set (spank/core/vars.c, the names force=
# accepts) are the ones horovod(8) lists under force=, and each has its
# line in horovod-option.md.
top=${top_srcdir:-$(cd "$(dirname "$0")/../.." && pwd)}
echo "1..2"
code=$(sed -n '/known_vars\[\] = {/,/};/p' "$top/spank/core/vars.c" |
	grep -o '"[A-Z_]*"' | tr -d '"' | sort)
# The list runs from "Only variables the plugin sets are accepted:" to
# "May be given several times." in the force= paragraph.
man=$(awk '/^\.BI force=/ { f = 1 } f && /^May be given/ { exit }
	on { print } f && /plugin sets are accepted:$/ { on = 1 }' "$top/doc/horovod.8" |
	grep -o '[A-Z][A-Z_]*[A-Z]' | sort -u)
if [[ -n $code && $code == "$man" ]]; then
	echo "ok 1 - horovod(8) force= lists the variables of spank/core/vars.c"
else
	echo "not ok 1 - horovod(8) force= lists the variables of spank/core/vars.c"
	diff <(echo "$code") <(echo "$man") | sed 's/^/# /'
fi
missing=
for v in $code; do
	grep -q -- "$v" "$top/doc/horovod-option.md" || missing+=" $v"
done
if [[ -z $missing ]]; then
	echo "ok 2 - horovod-option.md names every variable"
else
	echo "not ok 2 - horovod-option.md names every variable (missing:$missing)"
fi
