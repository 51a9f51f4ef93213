/*
 * coll_host_only.c - the collectives front door's memory functions as a
 * host-only libhvd has them (coll/dispatch.c without the GPU path), for
 * unit tests that compile the checkpointer without the rest of libhvd.
 */
#include "config.h"

#include "coll/coll.h"

#include <stdlib.h>

int coll_is_device(const void *p)
{
	(void)p;
	return 0;
}

int coll_has_device(void)
{
	return 0;
}

static hvd_status_t unsupported(void)
{
	return hvd_error(HVD_ERR_UNSUPPORTED,
			 "hvd: device memory needs the GPU path");
}

hvd_status_t coll_to_host(void *dst, const void *src, size_t bytes)
{
	(void)dst;
	(void)src;
	(void)bytes;
	return unsupported();
}

hvd_status_t coll_to_device(void *dst, const void *src, size_t bytes)
{
	(void)dst;
	(void)src;
	(void)bytes;
	return unsupported();
}

hvd_status_t coll_host_alloc(void **p, size_t bytes)
{
	(void)p;
	(void)bytes;
	return unsupported();
}

void coll_host_free(void *p)
{
	free(p);
}
