/*
 * horovod_config.h - the admin's policy: plugstack.conf arguments.
 *
 *   required horovod.so default_ckpt_every=1000 ckpt_roots=/scratch:/home \
 *            nccl_socket_ifname=ib0 ib_hca==mlx5_0:1 force=NCCL_SOCKET_IFNAME
 *
 * Strict key=value words: an unknown key, a malformed value or a repeated
 * key is an error (the plugin is meant to be `required`, so a typo stops
 * jobs instead of silently dropping the policy).
 */
#ifndef HOROVOD_CONFIG_H
#define HOROVOD_CONFIG_H

#include <stddef.h>

#include "horovod_opt.h"

#define HVDCFG_MAX_FORCE 32
#define HVDCFG_VAR_LEN 40

struct hvdcfg {
	struct hvdopt defaults; /* default_<key>=...: `set` has them */
	char ckpt_roots[1024];	/* ':'-separated; "" means anywhere */
	char nccl_socket_ifname[64];
	char ib_hca[256];
	int nforce;
	char force[HVDCFG_MAX_FORCE][HVDCFG_VAR_LEN];
};

void hvdcfg_init(struct hvdcfg *c);

/* Parse plugstack arguments; 0, or -1 with a message naming the word. */
int hvdcfg_parse(int ac, char *const *av, struct hvdcfg *c, char *err,
		 size_t errlen);

/* Is `var` in the admin's force= list? */
int hvdcfg_forced(const struct hvdcfg *c, const char *var);

#endif /* HOROVOD_CONFIG_H */
