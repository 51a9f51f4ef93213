#!/bin/sh
# The Python binding's pytest suite under hvdrun -np 3: every rank runs
# the same session (tests/python/conftest.py), one TAP result per test.
. "$(dirname "$0")/lib.sh"
py_require
[ -x "$HVDRUN" ] || skip_all "hvdrun not built ($HVDRUN)"
# shellcheck disable=SC2086 # the file list is words
py_pytest hvdrun-np3 3 "$HVDRUN" -np 3 -- $PY_CORE test_ddp.py
