/*
 * Fuzz target for the checkpoint manifest parser (ckpt_manifest_parse):
 * the file restore and `hvd-ckpt` read from a directory, possibly as root
 * (an admin's `hvd-ckpt prune`), and which anyone who can write there can
 * forge (its checksum is XXH3, not a MAC).
 *
 * libFuzzer:  clang -fsanitize=fuzzer,address,undefined ... (make fuzz-ckpt)
 * Replay: built with -DHVD_FUZZ_MAIN and replay.c (replay.h), reads each
 * file named on the command line (or stdin) and prints TAP, one test per
 * input: this is the corpus replay that runs in make check.
 *
 * Each input is parsed as it is, and again with its last line's checksum
 * made right (as a forger would: XXH3 is public), so that the fuzzer gets
 * past the checksum to everything it guards.
 *
 * Beyond "no crash", it checks invariants: a refusal is HVD_ERR_CORRUPT
 * with a message starting with "HVD-4002 checkpoint manifest"; an
 * accepted manifest is canonical (formatting what was parsed gives back the
 * same bytes, since the parser takes exactly one spelling of every field)
 * and its file list is the one its sizes and world size call for.
 */
#include "config.h"

#include "ckpt/core/ckpt_manifest.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_accepted(const uint8_t *data, size_t size,
			   const struct ckpt_manifest *m)
{
	struct ckpt_manifest want = *m;
	char *text;
	size_t len;

	if (ckpt_manifest_format(m, &text, &len) != HVD_OK)
		abort();
	if (len != size || memcmp(text, data, size) != 0)
		abort();
	free(text);
	want.files = NULL;
	want.nfiles = 0;
	if (ckpt_manifest_layout(&want) != HVD_OK || want.nfiles != m->nfiles)
		abort();
	for (size_t i = 0; i < m->nfiles; i++)
		if (strcmp(want.files[i].name, m->files[i].name) != 0 ||
		    ckpt_manifest_file(m, m->files[i].name) == NULL)
			abort();
	free(want.files);
}

static void parse_one(const uint8_t *data, size_t size)
{
	struct ckpt_manifest m;
	hvd_status_t st;

	st = ckpt_manifest_parse((const char *)data, size, &m);
	if (st == HVD_OK) {
		check_accepted(data, size, &m);
		ckpt_manifest_free(&m);
	} else if (st != HVD_ERR_CORRUPT ||
		   strncmp(hvd_last_error(), "HVD-4002 checkpoint manifest",
			   28) != 0) {
		abort();
	}
}

/* "checksum " and 16 hex digits and a newline at the end: rewritten to
 * the checksum of what comes before it.  0 when there is no such line. */
static int forge(uint8_t *buf, size_t size)
{
	static const char hex[] = "0123456789abcdef";
	const size_t tail = 9 + 16 + 1;
	uint64_t sum;
	size_t at;

	if (size < tail || buf[size - 1] != '\n' ||
	    memcmp(buf + size - tail, "checksum ", 9) != 0 ||
	    (size > tail && buf[size - tail - 1] != '\n'))
		return 0;
	at = size - tail;
	sum = XXH3_64bits(buf, at);
	for (int i = 0; i < 16; i++)
		buf[at + 9 + i] = (uint8_t)hex[(sum >> (60 - 4 * i)) & 15];
	return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t *copy;

	parse_one(data, size);
	copy = malloc(size ? size : 1);
	if (!copy)
		return 0;
	memcpy(copy, data, size);
	if (forge(copy, size))
		parse_one(copy, size);
	free(copy);
	return 0;
}

#ifdef HVD_FUZZ_MAIN
#include "replay.h"

const struct fuzz_replay fuzz_replay = {0};
#endif
