/*
 * replay.h - the plain driver of the fuzz harnesses (fuzz/replay.c).
 *
 * Each harness is one LLVMFuzzerTestOneInput.  Under libFuzzer (make
 * fuzz-*), libFuzzer's own main drives it and this file is not used.
 * Built with -DHVD_FUZZ_MAIN and linked with replay.c, it is a program:
 *
 *	fuzz_NAME FILE...             one TAP result per file (the corpus
 *	                              replay of make check; a broken invariant
 *	                              aborts, and the driver reports the crash)
 *	fuzz_NAME                     one input read from stdin, no TAP
 *	fuzz_NAME --write-seeds DIR   the harness's seed corpus into DIR
 *	                              (for a harness that has seeds)
 *
 * The harness says how, in the one definition of fuzz_replay (under
 * #ifdef HVD_FUZZ_MAIN, beside its seeds).
 */
#ifndef HVD_FUZZ_REPLAY_H
#define HVD_FUZZ_REPLAY_H

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct fuzz_replay {
	/* Print "# PATH" before running each input, so that the output of a
	 * crash names it. */
	int name_inputs;
	/* What the last input gave, appended to its TAP line as
	 * "ok N - FILE: SUMMARY"; NULL for "ok N - FILE". */
	const char *(*summary)(void);
	/* --write-seeds DIR; NULL when the harness has no seeds. */
	int (*write_seeds)(const char *dir);
};

/* The harness's settings (defined once, by the harness). */
extern const struct fuzz_replay fuzz_replay;

/* For write_seeds: write HEAD then BODY (either may be empty) to DIR/NAME;
 * 0 on success, else 1 after perror. */
int fuzz_write_seed(const char *dir, const char *name, const void *head,
		    size_t nhead, const void *body, size_t nbody);

#endif
