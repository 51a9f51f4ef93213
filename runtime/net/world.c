/*
 * world.c - the storage behind hvd_world().  Written only by the thread
 * in hvd_init/hvd_finalize (under init.c's lock) while no collective can
 * run, so readers need no lock: they start after world_publish().
 */
#include "config.h"

#include "net/world.h"

#include <stdlib.h>
#include <string.h>

static struct hvd_world world;
static int world_ready;

const struct hvd_world *hvd_world(void)
{
	return world_ready ? &world : NULL;
}

struct hvd_world *world_begin(void)
{
	world_clear();
	return &world;
}

void world_publish(void)
{
	world_ready = 1;
}

void world_clear(void)
{
	world_ready = 0;
	free(world.node_of);
	free(world.local_rank_of);
	memset(&world, 0, sizeof(world));
}
