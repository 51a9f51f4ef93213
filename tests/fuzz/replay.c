/*
 * replay.c - the plain driver of the fuzz harnesses: replays files (or
 * stdin) through the harness's LLVMFuzzerTestOneInput, one TAP result per
 * file, and writes its seeds.  See replay.h.
 */
#include "config.h"

#include "replay.h"

#include <stdio.h>
#include <string.h>

/* The most read of one input: far above the corpora's and libFuzzer's
 * -max_len, so that a reproducer from another fuzzer is replayed whole. */
#define REPLAY_MAX_INPUT ((size_t)1 << 20)

static void run_file(FILE *f)
{
	static uint8_t buf[REPLAY_MAX_INPUT];
	size_t n = fread(buf, 1, sizeof(buf), f);

	LLVMFuzzerTestOneInput(buf, n);
}

int fuzz_write_seed(const char *dir, const char *name, const void *head,
		    size_t nhead, const void *body, size_t nbody)
{
	char path[4096];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "wb");
	if (!f || (nhead && fwrite(head, 1, nhead, f) != nhead) ||
	    (nbody && fwrite(body, 1, nbody, f) != nbody)) {
		perror(path);
		if (f)
			fclose(f);
		return 1;
	}
	return fclose(f) != 0;
}

int main(int argc, char **argv)
{
	const struct fuzz_replay *r = &fuzz_replay;

	if (r->write_seeds && argc == 3 && !strcmp(argv[1], "--write-seeds"))
		return r->write_seeds(argv[2]);
	if (argc < 2) {
		run_file(stdin);
		return 0;
	}
	printf("1..%d\n", argc - 1);
	fflush(stdout);
	for (int i = 1; i < argc; i++) {
		FILE *f = fopen(argv[i], "rb");
		const char *base = strrchr(argv[i], '/');

		if (!f) {
			printf("not ok %d - cannot open %s\n", i, argv[i]);
			fflush(stdout);
			continue;
		}
		if (r->name_inputs) {
			printf("# %s\n", argv[i]);
			fflush(stdout);
		}
		/* A broken invariant aborts: the driver reports the crash. */
		run_file(f);
		fclose(f);
		printf("ok %d - %s", i, base ? base + 1 : argv[i]);
		if (r->summary)
			printf(": %s", r->summary());
		printf("\n");
		fflush(stdout);
	}
	return 0;
}
