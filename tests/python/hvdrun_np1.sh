#!/bin/sh
# The Python binding's pytest suite under hvdrun -np 1, through ctypes
# alone: every rank runs the same session (tests/python/conftest.py), one
# TAP result per test.
. "$(dirname "$0")/lib.sh"
py_require
# One rank through ctypes alone (the fallback when hvd._fast is not built);
# the other launches take the C fast path.
HVD_FAST=0
[ -x "$HVDRUN" ] || skip_all "hvdrun not built ($HVDRUN)"
# shellcheck disable=SC2086 # the file list is words
py_pytest hvdrun-np1 1 "$HVDRUN" -np 1 -- $PY_CORE test_ddp.py
