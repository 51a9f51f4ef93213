/*
 * cfg.h - the admin's policy: plugstack.conf arguments.
 *
 *   required horovod.so default_ckpt_every=1000 ckpt_roots=/scratch:/home \
 *            nccl_socket_ifname=ib0 ib_hca==mlx5_0:1 force=NCCL_SOCKET_IFNAME
 *
 * Strict key=value words: an unknown key, a malformed value or a repeated
 * key is an error (the plugin is meant to be `required`, so a typo stops
 * jobs instead of silently dropping the policy).
 */
#ifndef SPANK_CORE_CFG_H
#define SPANK_CORE_CFG_H

#include <stddef.h>

#include "opt.h"
#include "vars.h"

#define CFG_MAX_FORCE 32
#define VARS_NAME_LEN 40

struct cfg {
	struct opt defaults;	/* default_<key>=...: `set` has them */
	char ckpt_roots[1024];	/* ':'-separated; "" means anywhere */
	char nccl_socket_ifname[64];
	char ib_hca[256];
	int nforce;
	char force[CFG_MAX_FORCE][VARS_NAME_LEN];
};

void cfg_init(struct cfg *c);

/* Parse plugstack arguments; 0, or -1 with a message naming the word. */
int cfg_parse(int ac, char *const *av, struct cfg *c, char *err, size_t errlen);

/* Is `var` in the admin's force= list? */
int cfg_forced(const struct cfg *c, const char *var);

#endif /* SPANK_CORE_CFG_H */
