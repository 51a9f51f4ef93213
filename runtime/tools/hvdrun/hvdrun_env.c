/*
 * hvdrun_env.c - the variables torch.distributed's env:// rendezvous reads,
 * for every rank (pure: environment arrays in, environment arrays out).
 *
 * torchrun sets RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR
 * and MASTER_PORT; hvdrun sets the same, so that a DDP script with
 * init_process_group(init_method="env://") runs under `hvdrun -np N`
 * without torchrun.  The rank variables are always hvdrun's (an inherited
 * RANK belongs to some outer job); MASTER_ADDR and MASTER_PORT stay the
 * user's when hvdrun's own environment has them.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/hvdrun/hvdrun.h"

static int env_index(char **env, const char *name, size_t len)
{
	for (int i = 0; env[i]; i++)
		if (!strncmp(env[i], name, len) && env[i][len] == '=')
			return i;
	return -1;
}

int hvdrun_env_put(char ***envp, const char *name, const char *value,
		   int replace)
{
	char **env = *envp, **nenv, *s;
	size_t len = strlen(name);
	int i = env_index(env, name, len), n = 0;

	if (i >= 0 && !replace)
		return 0;
	s = malloc(len + strlen(value) + 2);
	if (!s)
		return -1;
	sprintf(s, "%s=%s", name, value);
	if (i >= 0) {
		free(env[i]);
		env[i] = s;
		return 0;
	}
	while (env[n])
		n++;
	nenv = realloc(env, (size_t)(n + 2) * sizeof(*env));
	if (!nenv) {
		free(s);
		return -1;
	}
	nenv[n] = s;
	nenv[n + 1] = NULL;
	*envp = nenv;
	return 0;
}

int hvdrun_torch_env(char ***envp, int rank, int np, int master_port)
{
	char r[16], n[16], port[16];

	snprintf(r, sizeof(r), "%d", rank);
	snprintf(n, sizeof(n), "%d", np);
	snprintf(port, sizeof(port), "%d", master_port);
	if (hvdrun_env_put(envp, "RANK", r, 1) ||
	    hvdrun_env_put(envp, "WORLD_SIZE", n, 1) ||
	    hvdrun_env_put(envp, "LOCAL_RANK", r, 1) ||
	    hvdrun_env_put(envp, "LOCAL_WORLD_SIZE", n, 1) ||
	    hvdrun_env_put(envp, "MASTER_ADDR", "127.0.0.1", 0))
		return -1;
	if (master_port > 0 &&
	    hvdrun_env_put(envp, "MASTER_PORT", port, 0))
		return -1;
	return 0;
}
