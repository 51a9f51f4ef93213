#!/bin/sh
# Adasum on 4 ranks under hvdrun (two levels of libhvd's vector-halving,
# distance-doubling algorithm; the other launches have 1, 2 or 3 ranks),
# against a reference written from the algorithm's definition, and
# DistributedOptimizer(op=Adasum).
. "$(dirname "$0")/lib.sh"
py_require
[ -x "$HVDRUN" ] || skip_all "hvdrun not built ($HVDRUN)"
py_pytest hvdrun-np4-adasum 4 "$HVDRUN" -np 4 -- test_adasum.py \
	test_optimizer.py -- -k 'adasum or Adasum'
