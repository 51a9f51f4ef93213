#!/bin/sh
# Replay the fuzz corpus of the --horovod / plugstack parsers (TAP).
# A new crash found by `make fuzz-spank` goes into corpus/spank_opt/.
exec ./fuzz/fuzz_spank_opt "${top_srcdir:-../..}"/tests/fuzz/corpus/spank_opt/*
