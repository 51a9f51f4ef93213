#!/bin/sh
# Replay the fuzz corpus of the sysfs reader (TAP); its scratch trees go
# under the build directory.  A new crash found by `make fuzz-spank` goes
# into corpus/spank_sysfs/ once fixed.
TMPDIR=. exec ./fuzz/fuzz_spank_sysfs "${top_srcdir:-../..}"/tests/fuzz/corpus/spank_sysfs/*
