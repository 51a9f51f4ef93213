/*
 * sysfs.h - what hwloc does not say about HCA ports and network interfaces,
 * read from a sysfs tree (see sysfs.c).
 */
#ifndef SPANK_CORE_SYSFS_H
#define SPANK_CORE_SYSFS_H

#include "topo.h"

/*
 * Fill ports' link layer, GID index and netdev, and the network interfaces,
 * from a sysfs tree (class/infiniband, class/net).  Ports sysfs knows but
 * hwloc did not are added without a tree position.  Used by machine_load.
 */
void sysfs_read(struct topo *t, const char *root, int live);

#endif /* SPANK_CORE_SYSFS_H */
