#!/bin/sh
# Elastic training of an unchanged Horovod script under hvdrun --elastic
# (tests/python/test_elastic.py, one pytest process that launches the
# trainings): a rank SIGKILLed mid-training, and a second hvdrun joining.
. "$(dirname "$0")/lib.sh"
py_require
[ -x "$HVDRUN" ] || skip_all "hvdrun not built ($HVDRUN)"
HVD_TEST_HVDRUN=$HVDRUN
export HVD_TEST_HVDRUN
# three trainings of 3 epochs, one after the other
PY_LIMIT=${HVD_PY_TEST_TIMEOUT:-600}
# -s: the figures the tests print go to the log (and below)
py_pytest elastic 1 env -- test_elastic.py -- -s --basetemp "$OUT/pytest"
grep -o 'elastic: kill of.*' "$OUT/log.elastic" | sed 's/^/# /'
