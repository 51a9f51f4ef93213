#!/bin/sh
# Replay the fuzz corpus of the checkpoint manifest parser (TAP).
# A new crash found by `make fuzz-ckpt` goes into corpus/ckpt_manifest/.
exec ./fuzz/fuzz_ckpt_manifest "${top_srcdir:-../..}"/tests/fuzz/corpus/ckpt_manifest/*
