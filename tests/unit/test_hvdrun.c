/*
 * test_hvdrun.c - the pure parts of hvdrun: the command line and the
 * line-by-line output forwarding (written into a pipe and read back).
 */
#include "config.h"

#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tools/hvdrun/hvdrun.h"
#include "tap.h"

static enum hvdrun_parse parse(const char *line, struct hvdrun_opts *o,
			       char *err, size_t errlen)
{
	static char buf[512];
	static char *argv[32];
	int argc = 0;
	char *tok;

	snprintf(buf, sizeof(buf), "%s", line);
	for (tok = strtok(buf, " "); tok && argc < 31; tok = strtok(NULL, " "))
		argv[argc++] = tok;
	argv[argc] = NULL;
	return hvdrun_parse_args(argc, argv, o, err, errlen);
}

static void test_opts(void)
{
	struct hvdrun_opts o;
	char err[256];

	is_int(parse("hvdrun -np 4 ./a.out x", &o, err, sizeof(err)),
	       HVDRUN_PARSE_OK, "-np 4 PROGRAM");
	is_int(o.np, 4, "np is 4");
	is_str(o.argv[0], "./a.out", "program");
	is_str(o.argv[1], "x", "its argument");
	is_int(o.grace, 5, "default grace 5 s");
	is_int(o.timeout, 0, "no timeout by default");

	parse("hvdrun --np=3 --tag-output --timeout 9 --grace=2 -vv prog", &o,
	      err, sizeof(err));
	ok(o.np == 3 && o.tag_output && o.timeout == 9 && o.grace == 2 &&
	       o.verbose == 2,
	   "long forms, = values, -vv");
	parse("hvdrun -n 2 -- -weird --tag-output", &o, err, sizeof(err));
	ok(o.np == 2 && !o.tag_output && !strcmp(o.argv[0], "-weird") &&
	       !strcmp(o.argv[1], "--tag-output"),
	   "-- ends our options");
	parse("hvdrun -np 2 prog --tag-output", &o, err, sizeof(err));
	ok(!o.tag_output, "options after the program are the program's");

	is_int(parse("hvdrun prog", &o, err, sizeof(err)), HVDRUN_PARSE_ERROR,
	       "missing -np");
	is_str(err,
	       "the number of ranks is missing: hvdrun -np N PROGRAM "
	       "[ARGS]",
	       "missing -np message");
	is_int(parse("hvdrun -np", &o, err, sizeof(err)), HVDRUN_PARSE_ERROR,
	       "-np without a value");
	is_int(parse("hvdrun -np 4097 p", &o, err, sizeof(err)),
	       HVDRUN_PARSE_ERROR, "-np too large");
	is_int(parse("hvdrun -np 2x p", &o, err, sizeof(err)),
	       HVDRUN_PARSE_ERROR, "-np not a number");
	is_int(parse("hvdrun -np -1 p", &o, err, sizeof(err)),
	       HVDRUN_PARSE_ERROR, "-np negative");
	is_int(parse("hvdrun -np 2 --timeout p", &o, err, sizeof(err)),
	       HVDRUN_PARSE_ERROR, "--timeout takes the next word: p");
	is_int(parse("hvdrun -np 2 --grace 3601 p", &o, err, sizeof(err)),
	       HVDRUN_PARSE_ERROR, "--grace over an hour");
	is_int(parse("hvdrun -np 2", &o, err, sizeof(err)), HVDRUN_PARSE_ERROR,
	       "missing program");
	is_int(parse("hvdrun -np 2 -x p", &o, err, sizeof(err)),
	       HVDRUN_PARSE_ERROR, "unknown option");
	ok(strstr(err, "unknown option -x") != NULL, "names the option: %s",
	   err);
	is_int(parse("hvdrun --help", &o, err, sizeof(err)), HVDRUN_PARSE_HELP,
	       "--help");
	is_int(parse("hvdrun --version", &o, err, sizeof(err)),
	       HVDRUN_PARSE_VERSION, "--version");
}

/* Feed chunks through a linebuf into a pipe; return what came out. */
static char *through(const char *const *chunks, const char *prefix, int flush)
{
	struct hvdrun_linebuf lb = {0};
	struct hvdrun_sink sink;
	static char out[1 << 16];
	int p[2];
	ssize_t n;

	if (pipe(p))
		return NULL;
	sink.fd = p[1];
	sink.broken = 0;
	for (; *chunks; chunks++)
		hvdrun_linebuf_feed(&lb, *chunks, strlen(*chunks), &sink,
				    prefix);
	if (flush)
		hvdrun_linebuf_flush(&lb, &sink, prefix);
	close(p[1]);
	n = read(p[0], out, sizeof(out) - 1);
	close(p[0]);
	out[n > 0 ? n : 0] = '\0';
	hvdrun_linebuf_free(&lb);
	return out;
}

static void test_lines(void)
{
	const char *a[] = {"one\ntwo\n", NULL};
	const char *b[] = {"par", "tial", " line\nnext", NULL};
	const char *c[] = {"x\n\ny", NULL};
	const char *d[] = {"", "\n", NULL};

	is_str(through(a, "[0] ", 0), "[0] one\n[0] two\n",
	       "whole lines are prefixed");
	is_str(through(b, "[3] ", 0), "[3] partial line\n",
	       "pieces are held until the newline");
	is_str(through(b, "[3] ", 1), "[3] partial line\n[3] next\n",
	       "flush writes the last piece with a newline when tagged");
	is_str(through(b, "", 1), "partial line\nnext",
	       "untagged flush writes the bytes as they are");
	is_str(through(c, "[1] ", 1), "[1] x\n[1] \n[1] y\n",
	       "empty lines are lines");
	is_str(through(d, "[1] ", 1), "[1] \n", "empty chunks are harmless");
}

static void test_long_line(void)
{
	struct hvdrun_linebuf lb = {0};
	struct hvdrun_sink sink = {-1, 0};
	size_t big = HVDRUN_LINE_MAX + 100, got = 0, lines = 0;
	char *data = malloc(big), buf[65536];
	int p[2];
	ssize_t n;

	memset(data, 'a', big);
	if (pipe(p) || !data) {
		ok(0, "pipe");
		return;
	}
	/* The writer blocks on a full pipe: write from a child. */
	if (fork() == 0) {
		close(p[0]);
		sink.fd = p[1];
		/* In read()-sized chunks, as hvdrun feeds it. */
		for (size_t off = 0; off < big; off += 65536)
			hvdrun_linebuf_feed(&lb, data + off,
					    big - off < 65536 ? big - off
							      : 65536,
					    &sink, "[0] ");
		hvdrun_linebuf_flush(&lb, &sink, "[0] ");
		_exit(0);
	}
	close(p[1]);
	while ((n = read(p[0], buf, sizeof(buf))) > 0) {
		got += (size_t)n;
		for (ssize_t i = 0; i < n; i++)
			lines += buf[i] == '\n';
	}
	close(p[0]);
	is_int((long)lines, 2, "a line over HVDRUN_LINE_MAX is split in two");
	is_int((long)got, (long)(big + 2 * 4 + 2), "no byte lost");
	free(data);
}

static void test_broken_sink(void)
{
	struct hvdrun_linebuf lb = {0};
	struct hvdrun_sink sink;
	int p[2];

	if (pipe(p)) {
		ok(0, "pipe");
		return;
	}
	close(p[0]);
	sink.fd = p[1];
	sink.broken = 0;
	signal(SIGPIPE, SIG_IGN);
	hvdrun_linebuf_feed(&lb, "x\n", 2, &sink, "");
	ok(sink.broken, "a closed reader marks the sink broken");
	is_int(hvdrun_linebuf_feed(&lb, "y\n", 2, &sink, ""), 0,
	       "and later output is dropped without error");
	close(p[1]);
	hvdrun_linebuf_free(&lb);
}

static const char *env_get(char **env, const char *name)
{
	size_t len = strlen(name);

	for (int i = 0; env[i]; i++)
		if (!strncmp(env[i], name, len) && env[i][len] == '=')
			return env[i] + len + 1;
	return NULL;
}

/* torch.distributed's env:// variables: the rank ones always hvdrun's, the
 * master address and port the user's when set. */
static void test_torch_env(void)
{
	char **env = calloc(4, sizeof(*env));
	int n = 0;

	env[0] = strdup("RANK=7");
	env[1] = strdup("MASTER_PORT=1234");
	env[2] = strdup("PATH=/bin");
	is_int(hvdrun_torch_env(&env, 2, 3, 40000), 0, "torch env: built");
	is_str(env_get(env, "RANK"), "2", "RANK replaced by the rank");
	is_str(env_get(env, "WORLD_SIZE"), "3", "WORLD_SIZE");
	is_str(env_get(env, "LOCAL_RANK"), "2", "LOCAL_RANK");
	is_str(env_get(env, "LOCAL_WORLD_SIZE"), "3", "LOCAL_WORLD_SIZE");
	is_str(env_get(env, "MASTER_ADDR"), "127.0.0.1", "MASTER_ADDR");
	is_str(env_get(env, "MASTER_PORT"), "1234",
	       "a MASTER_PORT of the user's is kept");
	is_str(env_get(env, "PATH"), "/bin", "other variables kept");
	while (env[n])
		n++;
	is_int(n, 7, "each variable once");
	for (int i = 0; env[i]; i++)
		free(env[i]);
	free(env);
}

int main(void)
{
	plan(41);
	test_opts();
	test_lines();
	test_long_line();
	test_broken_sink();
	test_torch_env();
	return done_testing();
}
