/*
 * Fuzz target for the --horovod option parser and the plugstack policy
 * parser (the strings slurmstepd parses as root).
 *
 * libFuzzer:  clang -fsanitize=fuzzer,address,undefined ... (make fuzz-spank)
 * AFL++ / replay: built with -DHVD_FUZZ_MAIN and replay.c (replay.h), reads
 * each file named on the command line (or stdin) and prints TAP, one test
 * per input: this is the corpus replay that runs in make check.
 *
 * Beyond "no crash", it checks invariants: a refusal has a message starting
 * with "--horovod"; an accepted string formats back to a string that parses
 * to the same settings; accepted paths are absolute with no ".." component.
 */
#include "core/cfg.h"
#include "core/opt.h"
#include "core/path.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_path(const char *p)
{
	if (!p[0])
		return;
	if (p[0] != '/' || strstr(p, "/../") || strstr(p, "//") ||
	    (strlen(p) >= 3 && strcmp(p + strlen(p) - 3, "/..") == 0))
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *s = malloc(size + 1), err[ERR_LEN];
	char fmt[OPT_MAX_LEN * 2], out[PATH_LEN];
	struct opt o, o2;
	struct cfg cfg;
	char *av[16];
	int ac = 0;

	if (!s)
		return 0;
	memcpy(s, data, size);
	s[size] = '\0';
	opt_init(&o);
	if (opt_parse(s, &o, err, sizeof(err)) == 0) {
		check_path(o.ckpt_dir);
		check_path(o.timeline);
		opt_format(&o, fmt, sizeof(fmt));
		opt_init(&o2);
		if (opt_parse(fmt[0] ? fmt : NULL, &o2, err, sizeof(err)) ||
		    memcmp(&o, &o2, sizeof(o)) != 0)
			abort();
		if (o.ckpt_dir[0] &&
		    path_expand(o.ckpt_dir, "u", 7, s, out, sizeof(out), err,
				sizeof(err)) == 0)
			check_path(out);
	} else if (strncmp(err, "--horovod", 9) != 0) {
		abort();
	}
	/* The same bytes as plugstack words (split on spaces). */
	for (char *w = strtok(s, " "); w && ac < 16; w = strtok(NULL, " "))
		av[ac++] = w;
	cfg_init(&cfg);
	if (cfg_parse(ac, av, &cfg, err, sizeof(err)) == 0) {
		check_path(cfg.defaults.ckpt_dir);
		if (cfg.ckpt_roots[0] && cfg.ckpt_roots[0] != '/')
			abort();
	} else if (!err[0]) {
		abort();
	}
	free(s);
	return 0;
}

#ifdef HVD_FUZZ_MAIN
#include "replay.h"

const struct fuzz_replay fuzz_replay = {
    .name_inputs = 1,
};
#endif
