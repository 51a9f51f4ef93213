/* The --horovod option parser: every key, path expansion and normalisation,
 * and a long list of malformed inputs that must each be refused with a
 * message naming the key, the value or the character at fault. */
#include "core/cfg.h"
#include "core/elastic.h"
#include "core/opt.h"
#include "core/path.h"
#include "tap.h"

#include <string.h>

static struct opt o;
static char err[ERR_LEN];

static int parse(const char *s)
{
	opt_init(&o);
	return opt_parse(s, &o, err, sizeof(err));
}

static void good_keys(void)
{
	ok(parse(NULL) == 0 && o.set == 0, "--horovod alone: all defaults");
	ok(parse("ckpt-every=100") == 0 && o.ckpt_every == 100 &&
	       o.set == 1u << OPT_CKPT_EVERY,
	   "ckpt-every=100");
	ok(parse("ckpt-every=0") == 0 && o.ckpt_every == 0, "ckpt-every=0");
	ok(parse("ckpt-dir=/scratch/%u/%j/%x") == 0 &&
		   strcmp(o.ckpt_dir, "/scratch/%u/%j/%x") == 0,
	   "ckpt-dir template kept: %s", o.ckpt_dir);
	ok(parse("ckpt-dir=/scratch/%u/%j.%s") == 0 &&
		   strcmp(o.ckpt_dir, "/scratch/%u/%j.%s") == 0,
	   "ckpt-dir with the step id: %s", o.ckpt_dir);
	ok(parse("ckpt-dir=/scratch//a/./b/") == 0 &&
		   strcmp(o.ckpt_dir, "/scratch/a/b") == 0,
	   "ckpt-dir normalised: %s", o.ckpt_dir);
	ok(parse("ckpt-keep=5") == 0 && o.ckpt_keep == 5, "ckpt-keep=5");
	ok(parse("fusion-mb=64") == 0 && o.fusion_mb == 64, "fusion-mb=64");
	ok(parse("fusion-mb=0") == 0 && o.fusion_mb == 0, "fusion-mb=0");
	ok(parse("cycle-ms=0.5") == 0 && strcmp(o.cycle_ms, "0.5") == 0,
	   "cycle-ms=0.5");
	ok(parse("cycle-ms=5") == 0 && strcmp(o.cycle_ms, "5") == 0,
	   "cycle-ms=5");
	ok(parse("cycle-ms=10000") == 0, "cycle-ms=10000");
	ok(parse("cache=1024") == 0 && o.cache == 1024, "cache=1024");
	ok(parse("timeline=/var/tmp/tl-%j.json") == 0 &&
		   strcmp(o.timeline, "/var/tmp/tl-%j.json") == 0,
	   "timeline");
	ok(parse("hierarchical=on") == 0 && o.hierarchical == 1,
	   "hierarchical=on");
	ok(parse("hierarchical=off") == 0 && o.hierarchical == 0 &&
	       (o.set & 1u << OPT_HIERARCHICAL),
	   "hierarchical=off");
	ok(parse("stall-s=120") == 0 && o.stall_s == 120, "stall-s=120");
	{
		const char *l[] = { "trace", "debug", "info", "warning",
				    "error" };
		for (int i = 0; i < 5; i++) {
			char s[32];

			snprintf(s, sizeof(s), "log=%s", l[i]);
			ok(parse(s) == 0 && (int)o.log == i, "%s", s);
		}
	}
	ok(parse("gpu-bind=none") == 0 && o.gpu_bind == OPT_GPU_NONE,
	   "gpu-bind=none");
	ok(parse("gpu-bind=closest") == 0 && o.gpu_bind == OPT_GPU_CLOSEST,
	   "gpu-bind=closest");
	ok(parse("cpu-bind=numa") == 0 && o.cpu_bind == OPT_CPU_NUMA,
	   "cpu-bind=numa");
	ok(parse("cpu-bind=none") == 0 && o.cpu_bind == OPT_CPU_NONE,
	   "cpu-bind=none");
	ok(parse("net=ib") == 0 && o.net == OPT_NET_IB, "net=ib");
	ok(parse("net=roce") == 0 && o.net == OPT_NET_ROCE, "net=roce");
	ok(parse("net=tcp") == 0 && o.net == OPT_NET_TCP, "net=tcp");
	ok(parse("net=auto") == 0 && o.net == OPT_NET_AUTO, "net=auto");
	ok(parse("verbose") == 0 && o.verbose, "verbose");
	ok(parse("ckpt-every=10,ckpt-dir=/a/b,ckpt-keep=2,fusion-mb=1,"
		 "cycle-ms=2.25,cache=0,timeline=/t/x,hierarchical=on,"
		 "stall-s=0,log=debug,gpu-bind=none,cpu-bind=numa,net=roce,"
		 "elastic,elastic-min=2,verbose") == 0 &&
	       o.set == (1u << OPT_NKEYS) - 1,
	   "all keys at once");
	{
		char buf[2048];
		struct opt o2;

		opt_format(&o, buf, sizeof(buf));
		opt_init(&o2);
		ok(opt_parse(buf, &o2, err, sizeof(err)) == 0 &&
		       memcmp(&o, &o2, sizeof(o)) == 0,
		   "format round-trips: %s", buf);
	}
	/* Defaults given first (the admin's) are replaced key by key. */
	opt_init(&o);
	opt_parse("ckpt-every=1000,fusion-mb=32", &o, err, sizeof(err));
	ok(opt_parse("fusion-mb=8", &o, err, sizeof(err)) == 0 &&
	       o.ckpt_every == 1000 && o.fusion_mb == 8,
	   "user value replaces a default, other defaults stay");
	is_int(opt_key_lookup("ckpt_every", 10), OPT_CKPT_EVERY,
	       "lookup with underscores (plugstack spelling)");
	is_int(opt_key_lookup("nope", 4), -1, "lookup unknown");
}

/* Each must fail; `want` must appear in the message. */
static const struct {
	const char *in, *want;
} bad[] = {
	{ "", "empty value" },
	{ ",", "empty item" },
	{ ",,", "empty item" },
	{ "verbose,", "empty item" },
	{ ",verbose", "empty item" },
	{ "verbose,,log=info", "empty item" },
	{ "=", "unknown key" },
	{ "=5", "unknown key" },
	{ "foo", "unknown key 'foo'" },
	{ "foo=bar", "unknown key 'foo'" },
	{ "ckpt_every=5", "unknown key 'ckpt_every'" },
	{ "CKPT-EVERY=5", "unknown key" },
	{ "ckpt-every", "missing value" },
	{ "ckpt-every=", "missing value" },
	{ "ckpt-every=abc", "ckpt-every=abc" },
	{ "ckpt-every=-1", "ckpt-every=-1" },
	{ "ckpt-every=+1", "ckpt-every=+1" },
	{ "ckpt-every=1.5", "ckpt-every=1.5" },
	{ "ckpt-every=1e3", "ckpt-every=1e3" },
	{ "ckpt-every=0x10", "ckpt-every=0x10" },
	{ "ckpt-every=010", "ckpt-every=010" },
	{ "ckpt-every=1000000001", "0 to 1000000000" },
	{ "ckpt-every=99999999999999999999", "ckpt-every=" },
	{ "ckpt-every=18446744073709551617", "ckpt-every=" },
	{ "ckpt-every=5,ckpt-every=5", "more than once" },
	{ "ckpt-every=5,ckpt-every=6", "more than once" },
	{ "ckpt-every=1=2", "ckpt-every=1=2" },
	{ "ckpt-keep=0", "1 to 1000" },
	{ "ckpt-keep=1001", "1 to 1000" },
	{ "ckpt-keep=", "missing value" },
	{ "ckpt-keep=x", "ckpt-keep=x" },
	{ "ckpt-dir=", "missing value" },
	{ "ckpt-dir=relative/path", "ABSOLUTE" },
	{ "ckpt-dir=./x", "ABSOLUTE" },
	{ "ckpt-dir=/", "'/' itself" },
	{ "ckpt-dir=//", "'/' itself" },
	{ "ckpt-dir=/..", "'..'" },
	{ "ckpt-dir=/a/../b", "'..'" },
	{ "ckpt-dir=/a/..", "'..'" },
	{ "ckpt-dir=/a/b/../../etc", "'..'" },
	{ "ckpt-dir=/a/%n", "%u, %j, %s, %x" },
	{ "ckpt-dir=/a/%", "%u, %j, %s, %x" },
	{ "ckpt-dir=/a/%t", "%u, %j, %s, %x" },
	{ "ckpt-dir=/a:/b", "':'" },
	{ "ckpt-dir=/a=b", "'='" },
	{ "ckpt-dir=/a+b", "'+'" },
	{ "ckpt-dir=/a b", "character ' '" },
	{ "ckpt-dir=/a\tb", "\\x09" },
	{ "ckpt-dir=/a;rm", "character ';'" },
	{ "ckpt-dir=/a$(id)", "character '$'" },
	{ "ckpt-dir=/a`id`", "character '`'" },
	{ "ckpt-dir=/a|b", "character '|'" },
	{ "ckpt-dir=/a&b", "character '&'" },
	{ "ckpt-dir=/a>b", "character '>'" },
	{ "ckpt-dir=/a<b", "character '<'" },
	{ "ckpt-dir=/a*b", "character '*'" },
	{ "ckpt-dir=/a?b", "character '?'" },
	{ "ckpt-dir=/a[b]", "character '['" },
	{ "ckpt-dir=~/x", "character '~'" },
	{ "ckpt-dir=/a\\b", "character '\\'" },
	{ "ckpt-dir=/a\"b", "character '\"'" },
	{ "ckpt-dir=/a'b", "character '''" },
	{ "ckpt-dir=/x,ckpt-dir=/y", "more than once" },
	{ "ckpt-dir=/\xc3\xa9t\xc3\xa9", "\\xc3" },
	{ "ckpt-dir=/a\x01", "\\x01" },
	{ "ckpt-dir=/a\x7f", "\\x7f" },
	{ "ckpt-dir=/a\xff", "\\xff" },
	{ "fusion-mb=65537", "0 to 65536" },
	{ "fusion-mb=-5", "fusion-mb=-5" },
	{ "fusion-mb=64M", "fusion-mb=64M" },
	{ "fusion-mb= 64", "character ' '" },
	{ "cycle-ms=0", "above 0" },
	{ "cycle-ms=0.0", "above 0" },
	{ "cycle-ms=.5", "cycle-ms=.5" },
	{ "cycle-ms=5.", "cycle-ms=5." },
	{ "cycle-ms=1.2345", "cycle-ms=1.2345" },
	{ "cycle-ms=10000.1", "at most 10000" },
	{ "cycle-ms=20000", "at most 10000" },
	{ "cycle-ms=1e2", "cycle-ms=1e2" },
	{ "cycle-ms=-1", "cycle-ms=-1" },
	{ "cycle-ms=1..2", "cycle-ms=1..2" },
	{ "cycle-ms=1.2.3", "cycle-ms=1.2.3" },
	{ "cycle-ms=nan", "cycle-ms=nan" },
	{ "cycle-ms=inf", "cycle-ms=inf" },
	{ "cycle-ms=01", "cycle-ms=01" },
	{ "cycle-ms=9999999", "cycle-ms=9999999" },
	{ "cache=-1", "cache=-1" },
	{ "cache=1000001", "0 to 1000000" },
	{ "cache=big", "cache=big" },
	{ "timeline=", "missing value" },
	{ "timeline=tl.json", "ABSOLUTE" },
	{ "timeline=/../etc/shadow", "'..'" },
	{ "hierarchical=yes", "hierarchical=on|off" },
	{ "hierarchical=1", "hierarchical=on|off" },
	{ "hierarchical=ON", "hierarchical=on|off" },
	{ "hierarchical=true", "hierarchical=on|off" },
	{ "hierarchical", "missing value" },
	{ "stall-s=86401", "0 to 86400" },
	{ "stall-s=1m", "stall-s=1m" },
	{ "log=verbose", "log=trace|debug|info|warning|error" },
	{ "log=INFO", "log=trace" },
	{ "log=warn", "log=trace" },
	{ "log=", "missing value" },
	{ "log=info,log=debug", "more than once" },
	{ "gpu-bind=map_gpu:0", "gpu-bind=closest|none" },
	{ "gpu-bind=all", "gpu-bind=closest|none" },
	{ "cpu-bind=cores", "cpu-bind=numa|none" },
	{ "cpu-bind=socket", "cpu-bind=numa|none" },
	{ "net=eth", "net=auto|ib|roce|tcp" },
	{ "net=IB", "net=auto|ib|roce|tcp" },
	{ "net=", "missing value" },
	{ "verbose=1", "takes no value" },
	{ "elastic=1", "elastic=1: this key takes no value" },
	{ "elastic=on", "takes no value" },
	{ "elastic-min=2", "elastic-min=2 without elastic; expected "
			   "--horovod=elastic,elastic-min=N" },
	{ "elastic-min=4,ckpt-every=5", "without elastic" },
	{ "elastic,elastic-min=0", "elastic-min=0: expected elastic-min=N" },
	{ "elastic,elastic-min=-1", "elastic-min=-1" },
	{ "elastic,elastic-min=02", "elastic-min=02" },
	{ "elastic,elastic-min=1000001", "1 to 1000000" },
	{ "elastic,elastic-min=", "elastic-min: missing value" },
	{ "elastic,elastic", "key 'elastic' given more than once" },
	{ "Elastic", "unknown key 'Elastic'" },
	{ "elastic_min=2,elastic", "unknown key 'elastic_min'" },
	{ "verbose=true", "takes no value" },
	{ "verbose=", "takes no value" },
	{ "verbose,verbose", "more than once" },
	{ "ckpt-every=10;id", "character ';'" },
	{ "ckpt-every=10 log=info", "character ' '" },
	{ "ckpt-every=10\nlog=info", "\\x0a" },
	{ "ckpt-every=10\rlog=info", "\\x0d" },
	{ " verbose", "character ' '" },
	{ "verbose ", "character ' '" },
	{ "verbose#", "character '#'" },
	{ "verbose!", "character '!'" },
	{ "verbose@", "character '@'" },
	{ "verbose{}", "character '{'" },
	{ "\xef\xbb\xbfverbose", "\\xef" },
	{ "v\xc3\xa9rbose", "\\xc3" },
	{ "-", "unknown key '-'" },
	{ "--horovod", "unknown key '--horovod'" },
	{ "horovod", "unknown key 'horovod'" },
	{ "ckpt-every:5", "unknown key 'ckpt-every:5'" },
	{ "ckpt-every==5", "ckpt-every==5" },
	{ "log=info=debug", "log=info=debug" },
	{ "net=ib,net=tcp", "more than once" },
	{ "%u", "unknown key '%u'" },
	{ "/etc/passwd", "unknown key '/etc/passwd'" },
	{ "ckpt-dir=/a/%u/../b", "'..'" },
};

static void malformed(void)
{
	char big[OPT_MAX_LEN + 64];
	char longpath[PATH_LEN + 32];
	size_t n = sizeof(bad) / sizeof(bad[0]);

	diag("%zu malformed inputs", n);
	for (size_t i = 0; i < n; i++) {
		int rc;

		opt_init(&o);
		o.ckpt_every = 77;
		rc = opt_parse(bad[i].in, &o, err, sizeof(err));
		ok(rc == -1 && strstr(err, bad[i].want) != NULL &&
			   strncmp(err, "--horovod", 9) == 0 &&
			   o.ckpt_every == 77,
		   "refused #%zu, message has \"%s\"", i, bad[i].want);
		if (rc != -1 || !strstr(err, bad[i].want))
			diag("  got rc=%d err=\"%s\"", rc, err);
	}
	memset(big, 'a', sizeof(big));
	big[OPT_MAX_LEN + 1] = '\0';
	ok(parse(big) == -1 && strstr(err, "longer than"), "overlong refused");
	memcpy(big, "ckpt-every=", 11);
	big[OPT_MAX_LEN] = '\0';
	ok(parse(big) == -1 && strstr(err, "ckpt-every="),
	   "long value at the limit refused as a bad number");
	strcpy(longpath, "ckpt-dir=/");
	memset(longpath + 10, 'p', PATH_LEN + 10);
	longpath[PATH_LEN + 20] = '\0';
	ok(parse(longpath) == -1 && strstr(err, "too long"),
	   "overlong path refused: %s", err);
	/* Message bounded even for a tiny buffer, never overflows. */
	{
		char small[8];

		opt_init(&o);
		ok(opt_parse("foo", &o, small, sizeof(small)) == -1 &&
		       strlen(small) == 7,
		   "message cut to fit a small buffer");
	}
}

static void paths(void)
{
	char out[PATH_LEN], e[ERR_LEN];

	ok(path_expand("/scratch/%u/%j-%x", "alice", 42, "train", out,
		       sizeof(out), e, sizeof(e)) == 0 &&
	       strcmp(out, "/scratch/alice/42-train") == 0,
	   "expand %%u %%j %%x: %s", out);
	ok(path_expand_step("/scratch/%u/%j.%s", "alice", 42, 3, "train", out,
			    sizeof(out), e, sizeof(e)) == 0 &&
	       strcmp(out, "/scratch/alice/42.3") == 0,
	   "expand %%s, the step id: %s", out);
	ok(path_expand_step("/s/%j.%s", "u", 42, 0xfffffffbUL, "x", out,
			    sizeof(out), e, sizeof(e)) == 0 &&
	       strcmp(out, "/s/42.batch") == 0,
	   "the batch script's step is 'batch', as in Slurm's patterns: %s",
	   out);
	ok(path_expand_step("/s/%s", "u", 42, 0xfffffffcUL, "x", out,
			    sizeof(out), e, sizeof(e)) == 0 &&
	       strcmp(out, "/s/extern") == 0,
	   "the extern step is 'extern': %s", out);
	ok(path_expand("/s/%j.%s", "u", 42, "x", out, sizeof(out), e,
		       sizeof(e)) == 0 &&
	       strcmp(out, "/s/42.0") == 0,
	   "path_expand: step 0 where the step is not known yet: %s", out);
	ok(path_expand("/s/%x", "u", 1, "../../etc", out, sizeof(out), e,
		       sizeof(e)) == 0 &&
	       strcmp(out, "/s/.._.._etc") == 0,
	   "job name with / cannot climb: %s", out);
	ok(path_expand("/s/%x/y", "u", 1, "..", out, sizeof(out), e,
		       sizeof(e)) == 0 &&
	       strcmp(out, "/s/_/y") == 0,
	   "job name '..' becomes '_': %s", out);
	ok(path_expand("/s/%x", "u", 1, "a b$c", out, sizeof(out), e,
		       sizeof(e)) == 0 &&
	       strcmp(out, "/s/a_b_c") == 0,
	   "job name odd chars become '_': %s", out);
	ok(path_expand("/s/%%u", "u", 1, "x", out, sizeof(out), e, sizeof(e)) ==
		   0 &&
	       strcmp(out, "/s/%u") == 0,
	   "%%%% is a literal percent: %s", out);
	{
		char name[600];

		memset(name, 'n', sizeof(name) - 1);
		name[sizeof(name) - 1] = '\0';
		ok(path_expand("/s/%x", "u", 1, name, out, sizeof(out), e,
			       sizeof(e)) == -1 &&
		       strstr(e, "longer than"),
		   "expansion too long refused: %s", e);
	}
	ok(path_under("/scratch/a/b", "/home:/scratch"), "under root");
	ok(path_under("/scratch", "/scratch/"), "root itself");
	ok(!path_under("/scratch2/a", "/scratch"),
	   "/scratch2 is not under /scratch");
	ok(!path_under("/etc", "/home:/scratch"), "outside roots");
	ok(!path_under("/etc", ""), "empty roots match nothing");
	ok(path_under("/etc", "/"), "root / matches all");
}

/* plugstack.conf arguments: the admin's policy. */
static void policy(void)
{
	static const struct {
		const char *words[4];
		int n;
		const char *want; /* NULL: accepted */
	} cases[] = {
		{ { "default_ckpt_every=1000", "ckpt_roots=/scratch:/home" }, 2,
		  NULL },
		{ { "default_fusion_mb=64", "default_net=ib",
		    "force=NCCL_IB_HCA,UCX_TLS", "force=HOROVOD_LOG_LEVEL" },
		  4, NULL },
		{ { "nccl_socket_ifname=^docker,lo", "ib_hca==mlx5_0:1" }, 2,
		  NULL },
		{ { "default_ckpt_dir=/scratch/%u/%j" }, 1, NULL },
		{ { "bogus=1" }, 1, "unknown key" },
		{ { "ckpt_roots" }, 1, "expected key=value" },
		{ { "=x" }, 1, "expected key=value" },
		{ { "default_verbose=1" }, 1, "unknown key" },
		{ { "default_elastic=1" }, 1, "not a site default" },
		{ { "default_elastic_min=2" }, 1,
		  "elastic training is each step's own choice" },
		{ { "default_nope=1" }, 1, "unknown key" },
		{ { "default_ckpt_every=abc" }, 1, "ckpt-every=abc" },
		{ { "default_ckpt_every=1", "default_ckpt_every=2" }, 2,
		  "given twice" },
		{ { "ckpt_roots=relative" }, 1, "ckpt_roots=relative" },
		{ { "ckpt_roots=/a/../b" }, 1, "without '..'" },
		{ { "ckpt_roots=/a::/b" }, 1, "ckpt_roots=" },
		{ { "ckpt_roots=/a:" }, 1, "ckpt_roots=" },
		{ { "ckpt_roots=/a", "ckpt_roots=/b" }, 2, "given twice" },
		{ { "force=NOT_OURS" }, 1, "not a variable the plugin sets" },
		{ { "force=" }, 1, "force=" },
		{ { "force=A,,B" }, 1, "force=" },
		{ { "force=LD_PRELOAD" }, 1, "not a variable" },
		{ { "nccl_socket_ifname=eth0;rm" }, 1, "nccl_socket_ifname" },
		{ { "nccl_socket_ifname=" }, 1, "nccl_socket_ifname" },
		{ { "ib_hca=mlx5 0" }, 1, "ib_hca" },
		{ { "ib_hca=$(x)" }, 1, "ib_hca" },
	};
	struct cfg c;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int rc;

		cfg_init(&c);
		rc = cfg_parse(cases[i].n, (char *const *)cases[i].words, &c,
			       err, sizeof(err));
		if (!cases[i].want)
			ok(rc == 0, "policy #%zu accepted (%s)", i,
			   rc ? err : cases[i].words[0]);
		else
			ok(rc == -1 && strstr(err, cases[i].want),
			   "policy #%zu refused: %s", i, err);
	}
	cfg_init(&c);
	{
		char *w[] = { "default_ckpt_every=1000", "force=UCX_TLS" };

		cfg_parse(2, w, &c, err, sizeof(err));
	}
	ok(c.defaults.ckpt_every == 1000 &&
	       (c.defaults.set & 1u << OPT_CKPT_EVERY) &&
	       c.defaults.given == 0 && cfg_forced(&c, "UCX_TLS") &&
	       !cfg_forced(&c, "NCCL_IB_HCA"),
	   "policy values stored; defaults are not 'given' by the user");
}

/* --horovod=elastic: the option, and what the launch must not do. */
static void elastic(void)
{
	struct elastic_launch l;
	char fmt[OPT_MAX_LEN];

	ok(parse("elastic") == 0 && o.elastic && !o.elastic_min &&
		   o.set == 1u << OPT_ELASTIC,
	   "elastic alone");
	ok(parse("elastic-min=3,elastic") == 0 && o.elastic &&
		   o.elastic_min == 3,
	   "elastic-min=3 with elastic, in any order");
	opt_format(&o, fmt, sizeof(fmt));
	is_str(fmt, "elastic,elastic-min=3", "formats back");
	ok(parse("elastic,elastic-min=1000000") == 0, "elastic-min=1000000");

	parse("elastic,elastic-min=4");
	elastic_launch_init(&l, "srun");
	ok(elastic_check(&o, &l, err, sizeof(err)) == 0,
	   "nothing known about the launch: nothing refused");
	l.no_kill = 1;
	l.kill_bad_exit = 1;
	ok(elastic_check(&o, &l, err, sizeof(err)) == -1 &&
		   strstr(err, "--kill-on-bad-exit, -K or SLURM_KILL_BAD_EXIT") &&
		   strstr(err, "--kill-on-bad-exit=0"),
	   "srun -K refused, naming the option and the way out: %s", err);
	l.kill_bad_exit = 0;
	l.kill_bad_exit_conf = 1;
	ok(elastic_check(&o, &l, err, sizeof(err)) == 0,
	   "--kill-on-bad-exit=0 beats slurm.conf's KillOnBadExit=1");
	l.kill_bad_exit = -1;
	ok(elastic_check(&o, &l, err, sizeof(err)) == -1 &&
		   strstr(err, "KillOnBadExit=1 in slurm.conf") &&
		   strstr(err, "srun --kill-on-bad-exit=0"),
	   "slurm.conf's KillOnBadExit=1 refused when srun gives none: %s",
	   err);
	l.kill_bad_exit_conf = 0;
	l.no_kill = 0;
	ok(elastic_check(&o, &l, err, sizeof(err)) == -1 &&
		   strstr(err, "without --no-kill Slurm ends the step") &&
		   strstr(err, "give srun --no-kill (-k)"),
	   "srun without --no-kill refused: %s", err);
	l.no_kill = 1;
	l.ntasks = 3;
	ok(elastic_check(&o, &l, err, sizeof(err)) == -1 &&
		   strstr(err, "elastic-min=4: the step has 3 tasks; expected "
			       "elastic-min at most 3"),
	   "elastic-min above srun's task count refused: %s", err);
	l.ntasks = 4;
	ok(elastic_check(&o, &l, err, sizeof(err)) == 0,
	   "elastic-min equal to the task count, -k, no -K: accepted");
	elastic_launch_init(&l, "sbatch");
	l.kill_bad_exit_conf = 1;
	l.no_kill = 0;
	ok(elastic_check(&o, &l, err, sizeof(err)) == -1 &&
		   strstr(err, "ends the job") && strstr(err, "give sbatch "
							   "--no-kill"),
	   "sbatch without --no-kill refused (KillOnBadExit is srun's): %s",
	   err);
	l.no_kill = 1;
	ok(elastic_check(&o, &l, err, sizeof(err)) == 0,
	   "sbatch --no-kill accepted");
	parse("ckpt-every=5");
	elastic_launch_init(&l, "srun");
	l.kill_bad_exit = 1;
	l.no_kill = 0;
	ok(elastic_check(&o, &l, err, sizeof(err)) == 0,
	   "not elastic: srun -K and no -k are fine");
}

int main(void)
{
	good_keys();
	elastic();
	policy();
	malformed();
	paths();
	return done_testing();
}
