/*
 * machine.h - a node's topology from hwloc and sysfs, into a struct topo.
 */
#ifndef SPANK_CORE_MACHINE_H
#define SPANK_CORE_MACHINE_H

#include <stddef.h>

#include "topo.h"

/*
 * Load the topology of this machine (xml NULL) or of an hwloc XML file.
 * sysfs_root (NULL: env HVD_SYSFS_ROOT, else "/sys") supplies port state,
 * link layer, GIDs and network interfaces; for an XML file, the port state
 * from the XML is kept unless the sysfs tree knows the device.  Returns 0,
 * or -1 with a message.  `t` is large: allocate it, do not put it on a
 * small stack.
 */
int machine_load(struct topo *t, const char *xml, const char *sysfs_root,
		 char *err, size_t errlen);

#endif /* SPANK_CORE_MACHINE_H */
