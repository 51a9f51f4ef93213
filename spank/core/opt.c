/*
 * opt.c - parser of the --horovod=KEY=VALUE,... option.
 *
 * The option string is user input that reaches slurmstepd, which runs as
 * root, so the grammar is deliberately narrow: a bounded length, a whitelist
 * of characters (no spaces, quotes, shell or glob characters, nothing
 * outside ASCII), comma-separated items, each key at most once, numbers in
 * plain decimal with explicit bounds, and paths that are absolute and
 * normalised with no "..".  Every refusal names the key, the value and the
 * accepted form, because the message is what the user sees from srun.
 */
#include "opt.h"
#include "err.h"
#include "path.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

enum kind { K_UINT, K_DEC, K_PATH, K_ENUM, K_FLAG };

struct keydef {
	const char *name;
	enum kind kind;
	unsigned long min, max; /* K_UINT */
	const char *const *words; /* K_ENUM, NULL-terminated */
	const char *form;
};

static const char *const onoff[] = { "off", "on", NULL };
static const char *const logs[] = { "trace", "debug", "info", "warning",
				    "error", NULL };
static const char *const gpub[] = { "closest", "none", NULL };
static const char *const cpub[] = { "none", "numa", NULL };
static const char *const nets[] = { "auto", "ib", "roce", "tcp", NULL };

/* Indexed by enum opt_key. */
static const struct keydef keys[OPT_NKEYS] = {
	{ "ckpt-every", K_UINT, 0, 1000000000UL, NULL,
	  "ckpt-every=N, N steps between checkpoints, 0 to 1000000000" },
	{ "ckpt-dir", K_PATH, 0, 0, NULL,
	  "ckpt-dir=/ABSOLUTE/PATH without '..' (%u user, %j job id, "
	  "%s step id, %x job name)" },
	{ "ckpt-keep", K_UINT, 1, 1000, NULL,
	  "ckpt-keep=K, checkpoints kept, 1 to 1000" },
	{ "fusion-mb", K_UINT, 0, 65536, NULL,
	  "fusion-mb=N, fusion buffer in MiB, 0 to 65536" },
	{ "cycle-ms", K_DEC, 0, 0, NULL,
	  "cycle-ms=X, milliseconds, a decimal number like 1 or 0.5, "
	  "above 0 and at most 10000" },
	{ "cache", K_UINT, 0, 1000000, NULL,
	  "cache=N, response cache entries, 0 to 1000000" },
	{ "timeline", K_PATH, 0, 0, NULL,
	  "timeline=/ABSOLUTE/FILE without '..' (%u, %j, %s, %x expanded)" },
	{ "hierarchical", K_ENUM, 0, 0, onoff, "hierarchical=on|off" },
	{ "stall-s", K_UINT, 0, 86400, NULL,
	  "stall-s=N, seconds before a stall warning, 0 to 86400" },
	{ "log", K_ENUM, 0, 0, logs,
	  "log=trace|debug|info|warning|error" },
	{ "gpu-bind", K_ENUM, 0, 0, gpub, "gpu-bind=closest|none" },
	{ "cpu-bind", K_ENUM, 0, 0, cpub, "cpu-bind=numa|none" },
	{ "net", K_ENUM, 0, 0, nets, "net=auto|ib|roce|tcp" },
	{ "elastic", K_FLAG, 0, 0, NULL,
	  "elastic (no value): training goes on when tasks or nodes are "
	  "lost; needs srun --no-kill" },
	{ "elastic-min", K_UINT, 1, 1000000, NULL,
	  "elastic-min=N with elastic, the fewest tasks training goes on "
	  "with, 1 to 1000000" },
	{ "verbose", K_FLAG, 0, 0, NULL, "verbose (no value)" },
};

const char *opt_key_name(enum opt_key k)
{
	return (unsigned)k < OPT_NKEYS ? keys[k].name : "?";
}

const char *opt_key_form(enum opt_key k)
{
	return (unsigned)k < OPT_NKEYS ? keys[k].form : "?";
}

const char *opt_log_name(enum opt_log l)
{
	return (unsigned)l <= OPT_LOG_ERROR ? logs[l] : "?";
}

const char *opt_net_name(enum opt_net n)
{
	return (unsigned)n <= OPT_NET_TCP ? nets[n] : "?";
}

int opt_key_lookup(const char *name, size_t len)
{
	for (int k = 0; k < OPT_NKEYS; k++) {
		const char *kn = keys[k].name;
		size_t i;

		if (strlen(kn) != len)
			continue;
		for (i = 0; i < len; i++) {
			char c = name[i] == '_' ? '-' : name[i];

			if (c != kn[i])
				break;
		}
		if (i == len)
			return k;
	}
	return -1;
}

void opt_init(struct opt *o)
{
	memset(o, 0, sizeof(*o));
	o->ckpt_keep = 3;
	o->log = OPT_LOG_WARNING;
	o->gpu_bind = OPT_GPU_CLOSEST;
	o->cpu_bind = OPT_CPU_NUMA;
	o->net = OPT_NET_AUTO;
}


/* Copy user text for a message: printable ASCII kept, the rest as \xNN,
 * cut at 48 input bytes so a message always fits. */
static void quote(const char *s, size_t len, char *out, size_t outlen)
{
	size_t o = 0;

	for (size_t i = 0; i < len && o + 5 < outlen; i++) {
		unsigned char c = (unsigned char)s[i];

		if (i == 48) {
			memcpy(out + o, "...", 3);
			o += 3;
			break;
		}
		if (c >= 0x20 && c < 0x7f)
			out[o++] = (char)c;
		else
			o += (size_t)snprintf(out + o, outlen - o, "\\x%02x", c);
	}
	out[o] = '\0';
}

/* The only characters an option string may contain. */
static int allowed_char(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	       (c >= '0' && c <= '9') || strchr("=,._/%:+-", c) != NULL;
}

static int parse_uint(const char *v, size_t len, unsigned long max,
		      unsigned long *out)
{
	unsigned long n = 0;

	if (len == 0 || len > 10)
		return -1;
	for (size_t i = 0; i < len; i++) {
		if (v[i] < '0' || v[i] > '9')
			return -1;
		n = n * 10 + (unsigned long)(v[i] - '0');
	}
	/* Leading zeros would hide octal confusion ("010"): refuse them. */
	if (len > 1 && v[0] == '0')
		return -1;
	if (n > max)
		return -1;
	*out = n;
	return 0;
}

/* Decimal "D+[.D+]" above 0 and at most 10000, at most 3 decimals. */
static int parse_dec(const char *v, size_t len, char *out, size_t outlen)
{
	size_t i = 0, intd = 0, frac = 0, nz = 0;
	unsigned long ip = 0;

	if (len == 0 || len >= outlen)
		return -1;
	for (; i < len && v[i] >= '0' && v[i] <= '9'; i++, intd++) {
		ip = ip * 10 + (unsigned long)(v[i] - '0');
		if (v[i] != '0')
			nz++;
		if (intd > 5)
			return -1;
	}
	if (intd == 0 || (intd > 1 && v[0] == '0'))
		return -1;
	if (i < len) {
		if (v[i++] != '.')
			return -1;
		for (; i < len && v[i] >= '0' && v[i] <= '9'; i++, frac++)
			if (v[i] != '0')
				nz++;
		if (frac == 0 || frac > 3 || i != len)
			return -1;
	}
	if (nz == 0 || ip > 10000 || (ip == 10000 && nz > 1))
		return -1;
	memcpy(out, v, len);
	out[len] = '\0';
	return 0;
}

/* A path template: absolute, normalisable, only %u %j %s %x %% escapes. */
static int parse_path(const char *v, size_t len, char *out, char *why,
		      size_t whylen)
{
	if (len == 0 || len >= PATH_LEN) {
		err_set(why, whylen, "%s", len ? "too long" : "empty");
		return -1;
	}
	for (size_t i = 0; i < len; i++) {
		if (v[i] == ':' || v[i] == '=' || v[i] == '+') {
			err_set(why, whylen, "'%c' is not allowed in a path",
				v[i]);
			return -1;
		}
		if (v[i] != '%')
			continue;
		if (i + 1 >= len || !strchr("ujsx%", v[i + 1])) {
			err_set(why, whylen,
				"only %%u, %%j, %%s, %%x and %%%% may follow "
				"'%%'");
			return -1;
		}
		i++;
	}
	memcpy(out, v, len);
	out[len] = '\0';
	return path_normalise(out, why, whylen);
}

static int parse_item(const char *item, size_t len, struct opt *o,
		      unsigned *seen, char *err, size_t errlen)
{
	const char *eq = memchr(item, '=', len);
	size_t klen = eq ? (size_t)(eq - item) : len;
	const char *v = eq ? eq + 1 : NULL;
	size_t vlen = eq ? len - klen - 1 : 0;
	char qk[64], qv[64], why[96] = "";
	const struct keydef *d;
	int k;

	quote(item, klen, qk, sizeof(qk));
	quote(v ? v : "", vlen, qv, sizeof(qv));
	if (len == 0) {
		err_set(err, errlen,
			"--horovod: empty item (two commas, or a comma at an "
			"end); expected KEY=VALUE,KEY=VALUE");
		return -1;
	}
	k = klen ? opt_key_lookup(item, klen) : -1;
	/* Option keys are spelt with '-'; '_' is only for plugstack. */
	if (k >= 0 && memchr(item, '_', klen))
		k = -1;
	if (k < 0) {
		err_set(err, errlen,
			"--horovod: unknown key '%s'; known keys: ckpt-every, "
			"ckpt-dir, ckpt-keep, fusion-mb, cycle-ms, cache, "
			"timeline, hierarchical, stall-s, log, gpu-bind, "
			"cpu-bind, net, elastic, elastic-min, verbose",
			qk);
		return -1;
	}
	d = &keys[k];
	if (*seen & (1u << k)) {
		err_set(err, errlen,
			"--horovod: key '%s' given more than once; expected %s",
			d->name, d->form);
		return -1;
	}
	*seen |= 1u << k;
	if (d->kind == K_FLAG) {
		if (v) {
			err_set(err, errlen,
				"--horovod: %s=%s: this key takes no value; "
				"expected %s",
				d->name, qv, d->form);
			return -1;
		}
	} else if (!v || vlen == 0) {
		err_set(err, errlen,
			"--horovod: %s: missing value; expected %s", d->name,
			d->form);
		return -1;
	}

	switch (d->kind) {
	case K_UINT: {
		unsigned long n;

		if (parse_uint(v, vlen, d->max, &n) || n < d->min)
			goto bad;
		if (k == OPT_CKPT_EVERY)
			o->ckpt_every = n;
		else if (k == OPT_CKPT_KEEP)
			o->ckpt_keep = n;
		else if (k == OPT_FUSION_MB)
			o->fusion_mb = n;
		else if (k == OPT_CACHE)
			o->cache = n;
		else if (k == OPT_ELASTIC_MIN)
			o->elastic_min = n;
		else
			o->stall_s = n;
		break;
	}
	case K_DEC:
		if (parse_dec(v, vlen, o->cycle_ms, sizeof(o->cycle_ms)))
			goto bad;
		break;
	case K_PATH: {
		char tmp[PATH_LEN];

		if (parse_path(v, vlen, tmp, why, sizeof(why)))
			goto bad;
		strcpy(k == OPT_CKPT_DIR ? o->ckpt_dir : o->timeline, tmp);
		break;
	}
	case K_ENUM: {
		int w;

		for (w = 0; d->words[w]; w++)
			if (strlen(d->words[w]) == vlen &&
			    memcmp(d->words[w], v, vlen) == 0)
				break;
		if (!d->words[w])
			goto bad;
		if (k == OPT_HIERARCHICAL)
			o->hierarchical = w;
		else if (k == OPT_LOG)
			o->log = (enum opt_log)w;
		else if (k == OPT_GPU_BIND)
			o->gpu_bind = (enum opt_gpu_bind)w;
		else if (k == OPT_CPU_BIND)
			o->cpu_bind = (enum opt_cpu_bind)w;
		else
			o->net = (enum opt_net)w;
		break;
	}
	case K_FLAG:
		if (k == OPT_ELASTIC)
			o->elastic = 1;
		else
			o->verbose = 1;
		break;
	}
	o->set |= 1u << k;
	o->given |= 1u << k;
	return 0;
bad:
	err_set(err, errlen, "--horovod: %s=%s: %s%sexpected %s", d->name, qv,
		why, why[0] ? "; " : "", d->form);
	return -1;
}

int opt_parse(const char *str, struct opt *o, char *err, size_t errlen)
{
	struct opt tmp = *o;
	unsigned seen = 0;
	size_t len;
	const char *p, *end;

	if (err && errlen)
		err[0] = '\0';
	if (!str)
		return 0;
	len = strnlen(str, OPT_MAX_LEN + 1);
	if (len == 0) {
		err_set(err, errlen,
			"--horovod=: empty value; give --horovod alone for the "
			"defaults, or --horovod=KEY=VALUE,...");
		return -1;
	}
	if (len > OPT_MAX_LEN) {
		err_set(err, errlen,
			"--horovod: option longer than %d characters; expected "
			"KEY=VALUE,... of at most %d characters",
			OPT_MAX_LEN, OPT_MAX_LEN);
		return -1;
	}
	for (size_t i = 0; i < len; i++) {
		if (!allowed_char((unsigned char)str[i])) {
			char q[64];

			quote(str + i, 1, q, sizeof(q));
			err_set(err, errlen,
				"--horovod: character '%s' at position %zu is "
				"not allowed; expected KEY=VALUE,... made of "
				"letters, digits and . _ / %% : + - =",
				q, i + 1);
			return -1;
		}
	}
	p = str;
	end = str + len;
	for (;;) {
		const char *c = memchr(p, ',', (size_t)(end - p));
		size_t il = c ? (size_t)(c - p) : (size_t)(end - p);

		if (parse_item(p, il, &tmp, &seen, err, errlen))
			return -1;
		if (!c)
			break;
		p = c + 1;
	}
	/* A minimum size means nothing without elastic, in the same string
	 * (a string replaces an #SBATCH one as a whole). */
	if ((seen & (1u << OPT_ELASTIC_MIN)) && !(seen & (1u << OPT_ELASTIC))) {
		err_set(err, errlen,
			"--horovod: elastic-min=%lu without elastic; expected "
			"--horovod=elastic,elastic-min=N",
			tmp.elastic_min);
		return -1;
	}
	*o = tmp;
	return 0;
}

void opt_format(const struct opt *o, char *buf, size_t len)
{
	size_t n = 0;

	buf[0] = '\0';
	for (int k = 0; k < OPT_NKEYS && n < len; k++) {
		char v[PATH_LEN + 16] = "";

		if (!(o->set & (1u << k)))
			continue;
		switch (k) {
		case OPT_CKPT_EVERY:
			snprintf(v, sizeof(v), "=%lu", o->ckpt_every);
			break;
		case OPT_CKPT_DIR:
			snprintf(v, sizeof(v), "=%s", o->ckpt_dir);
			break;
		case OPT_CKPT_KEEP:
			snprintf(v, sizeof(v), "=%lu", o->ckpt_keep);
			break;
		case OPT_FUSION_MB:
			snprintf(v, sizeof(v), "=%lu", o->fusion_mb);
			break;
		case OPT_CYCLE_MS:
			snprintf(v, sizeof(v), "=%s", o->cycle_ms);
			break;
		case OPT_CACHE:
			snprintf(v, sizeof(v), "=%lu", o->cache);
			break;
		case OPT_TIMELINE:
			snprintf(v, sizeof(v), "=%s", o->timeline);
			break;
		case OPT_HIERARCHICAL:
			snprintf(v, sizeof(v), "=%s", onoff[o->hierarchical]);
			break;
		case OPT_STALL_S:
			snprintf(v, sizeof(v), "=%lu", o->stall_s);
			break;
		case OPT_LOG:
			snprintf(v, sizeof(v), "=%s", logs[o->log]);
			break;
		case OPT_GPU_BIND:
			snprintf(v, sizeof(v), "=%s", gpub[o->gpu_bind]);
			break;
		case OPT_CPU_BIND:
			snprintf(v, sizeof(v), "=%s", cpub[o->cpu_bind]);
			break;
		case OPT_NET:
			snprintf(v, sizeof(v), "=%s", nets[o->net]);
			break;
		case OPT_ELASTIC_MIN:
			snprintf(v, sizeof(v), "=%lu", o->elastic_min);
			break;
		default:
			break;
		}
		n += (size_t)snprintf(buf + n, len - n, "%s%s%s",
				      n ? "," : "", keys[k].name, v);
	}
	if (n >= len && len > 0)
		buf[len - 1] = '\0';
}
