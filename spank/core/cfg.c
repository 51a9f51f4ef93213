/*
 * cfg.c - plugstack.conf arguments (see cfg.h).
 *
 * The option defaults reuse the --horovod parser itself: default_fusion_mb=64
 * is parsed as "fusion-mb=64", so an admin default obeys exactly the rules
 * of a user value.
 */
#include "cfg.h"
#include "err.h"
#include "opt.h"
#include "path.h"
#include "vars.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

void cfg_init(struct cfg *c)
{
	memset(c, 0, sizeof(*c));
	opt_init(&c->defaults);
}

static int only_chars(const char *v, const char *extra)
{
	for (; *v; v++) {
		char ch = *v;

		if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
		      (ch >= '0' && ch <= '9') || strchr(extra, ch)))
			return 0;
	}
	return 1;
}

static int parse_roots(const char *v, char *out, size_t outlen, char *err,
		       size_t errlen)
{
	size_t o = 0;
	const char *p = v;

	if (!*v || strlen(v) >= outlen)
		goto bad;
	while (*p) {
		const char *c = strchr(p, ':');
		size_t l = c ? (size_t)(c - p) : strlen(p);
		char root[PATH_LEN], why[128];

		if (l == 0 || l >= sizeof(root))
			goto bad;
		memcpy(root, p, l);
		root[l] = '\0';
		if (!only_chars(root, "/._-+") ||
		    path_normalise(root, why, sizeof(why))) {
			if (strcmp(root, "/") != 0)
				goto bad;
		}
		o += (size_t)snprintf(out + o, outlen - o, "%s%s", o ? ":" : "",
				      root);
		if (!c)
			break;
		p = c + 1;
		if (!*p)
			goto bad;
	}
	return 0;
bad:
	err_set(err, errlen,
		"ckpt_roots=%s: expected absolute directories separated by "
		"':' (ckpt_roots=/scratch:/home), without '..'",
		v);
	return -1;
}

static int add_force(struct cfg *c, const char *v, char *err, size_t errlen)
{
	const char *p = v;

	if (!*v)
		goto bad;
	while (*p) {
		const char *e = strchr(p, ',');
		size_t l = e ? (size_t)(e - p) : strlen(p);
		char name[VARS_NAME_LEN];

		if (l == 0 || l >= sizeof(name))
			goto bad;
		memcpy(name, p, l);
		name[l] = '\0';
		if (!vars_known(name)) {
			err_set(err, errlen,
				"force=%s: '%s' is not a variable the plugin "
				"sets (see horovod(8) for the list)",
				v, name);
			return -1;
		}
		if (!cfg_forced(c, name)) {
			if (c->nforce >= CFG_MAX_FORCE)
				goto bad;
			strcpy(c->force[c->nforce++], name);
		}
		if (!e)
			break;
		p = e + 1;
		if (!*p)
			goto bad;
	}
	return 0;
bad:
	err_set(err, errlen,
		"force=%s: expected variable names separated by ',' "
		"(force=NCCL_SOCKET_IFNAME,NCCL_IB_HCA)",
		v);
	return -1;
}

int cfg_parse(int ac, char *const *av, struct cfg *c, char *err, size_t errlen)
{
	unsigned seen = 0;
	const char *w = "";

	for (int i = 0; i < ac; i++) {
		const char *eq, *v;
		size_t kl;

		w = av[i];
		eq = strchr(w, '=');

		if (!eq || eq == w) {
			err_set(err, errlen,
				"plugstack argument '%s': expected key=value",
				w);
			return -1;
		}
		kl = (size_t)(eq - w);
		v = eq + 1;
		if (kl > 8 && strncmp(w, "default_", 8) == 0) {
			char opt[OPT_MAX_LEN + 64], why[ERR_LEN];
			int k = opt_key_lookup(w + 8, kl - 8);

			if (k < 0 || k == OPT_VERBOSE)
				goto unknown;
			if (k == OPT_ELASTIC || k == OPT_ELASTIC_MIN) {
				err_set(err, errlen,
					"plugstack argument '%s': elastic "
					"training is each step's own choice "
					"(it needs srun --no-kill), not a site "
					"default; remove it",
					w);
				return -1;
			}
			if (c->defaults.set & (1u << k))
				goto twice;
			snprintf(opt, sizeof(opt), "%s=%s",
				 opt_key_name((enum opt_key)k), v);
			if (opt_parse(opt, &c->defaults, why, sizeof(why))) {
				err_set(err, errlen,
					"plugstack argument '%s': %s", w, why);
				return -1;
			}
			continue;
		}
#define KEY(s) (kl == strlen(s) && strncmp(w, s, kl) == 0)
		if (KEY("ckpt_roots")) {
			if (seen & 1)
				goto twice;
			seen |= 1;
			if (parse_roots(v, c->ckpt_roots, sizeof(c->ckpt_roots),
					err, errlen))
				return -1;
		} else if (KEY("nccl_socket_ifname")) {
			if (seen & 2)
				goto twice;
			seen |= 2;
			if (!*v || strlen(v) >= sizeof(c->nccl_socket_ifname) ||
			    !only_chars(v, "^=,._-:")) {
				err_set(err, errlen,
					"nccl_socket_ifname=%s: expected "
					"NCCL_SOCKET_IFNAME syntax, e.g. ib0 "
					"or =eth0 or ^docker",
					v);
				return -1;
			}
			strcpy(c->nccl_socket_ifname, v);
		} else if (KEY("ib_hca")) {
			if (seen & 4)
				goto twice;
			seen |= 4;
			if (!*v || strlen(v) >= sizeof(c->ib_hca) ||
			    !only_chars(v, "^=,_:")) {
				err_set(err, errlen,
					"ib_hca=%s: expected NCCL_IB_HCA "
					"syntax, e.g. =mlx5_0:1,mlx5_1:1",
					v);
				return -1;
			}
			strcpy(c->ib_hca, v);
		} else if (KEY("force")) {
			if (add_force(c, v, err, errlen))
				return -1;
		} else {
			goto unknown;
		}
#undef KEY
	}
	c->defaults.given = 0;
	return 0;
unknown:
	err_set(err, errlen,
		"plugstack argument '%s': unknown key; expected "
		"default_<option>=VALUE (e.g. default_ckpt_every=1000), "
		"ckpt_roots=, nccl_socket_ifname=, ib_hca= or force=",
		w);
	return -1;
twice:
	err_set(err, errlen,
		"plugstack argument '%s': this key is given twice; give it "
		"once",
		w);
	return -1;
}

int cfg_forced(const struct cfg *c, const char *var)
{
	for (int i = 0; i < c->nforce; i++)
		if (strcmp(c->force[i], var) == 0)
			return 1;
	return 0;
}
