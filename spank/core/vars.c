/* vars.c - see vars.h. */
#include "vars.h"

#include <stddef.h>
#include <string.h>

static const char *const known_vars[] = {
	"HOROVOD_RANK", "HOROVOD_SIZE", "HOROVOD_LOCAL_RANK",
	"HOROVOD_LOCAL_SIZE", "HOROVOD_CROSS_RANK", "HOROVOD_CROSS_SIZE",
	"HOROVOD_HOSTNAME", "RANK", "WORLD_SIZE", "LOCAL_RANK",
	"LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
	"CUDA_DEVICE_ORDER", "CUDA_VISIBLE_DEVICES", "NCCL_IB_HCA",
	"NCCL_IB_GID_INDEX", "NCCL_IB_DISABLE", "NCCL_SOCKET_IFNAME",
	"GLOO_SOCKET_IFNAME", "UCX_NET_DEVICES", "UCX_TLS", "HOROVOD_CPU_LIST",
	"HOROVOD_CHECKPOINT_DIR", "HOROVOD_CHECKPOINT_EVERY",
	"HOROVOD_CHECKPOINT_KEEP", "HOROVOD_FUSION_THRESHOLD",
	"HOROVOD_CYCLE_TIME", "HOROVOD_CACHE_CAPACITY", "HOROVOD_TIMELINE",
	"HOROVOD_HIERARCHICAL_ALLREDUCE",
	"HOROVOD_STALL_CHECK_TIME_SECONDS", "HOROVOD_LOG_LEVEL",
	"HOROVOD_ELASTIC", "HOROVOD_ELASTIC_MIN_SIZE", NULL
};

int vars_known(const char *name)
{
	for (int i = 0; known_vars[i]; i++)
		if (strcmp(known_vars[i], name) == 0)
			return 1;
	return 0;
}

const char *vars_name(int i)
{
	if (i < 0 || i >= (int)(sizeof(known_vars) / sizeof(known_vars[0])))
		return NULL;
	return known_vars[i];
}

const char *vars_getenv(char *const *env, const char *name)
{
	size_t n = strlen(name);

	for (; env && *env; env++)
		if (strncmp(*env, name, n) == 0 && (*env)[n] == '=')
			return *env + n + 1;
	return NULL;
}
