/* What the discovery files share about hwloc's I/O objects: a device's
 * place in the PCIe tree and its locality. Internal to topology/, the only
 * code that includes hwloc. */
#ifndef FR_DISCOVER_IO_H
#define FR_DISCOVER_IO_H

#include <hwloc.h>
#include "hwtopo.h"

/* The NUMA node and package an I/O object is local to, -1 where its
 * locality spans several (or it has none). */
void fr_io_locality(hwloc_topology_t h, hwloc_obj_t io, int *numa, int *package);
/* @p dev's bus id, ids and class, host bridge and PCIe switch; an object
 * that is not a PCI device (NULL included) leaves an empty place. */
void fr_io_pci_place(hwloc_obj_t dev, fr_topo_pci_t *p);
int fr_io_osdev_is(hwloc_obj_t o, hwloc_obj_osdev_type_t type);
/* Append the node's NICs to @p t (nic.c). */
fr_status_t fr_io_read_nics(fr_topo_t *t, hwloc_topology_t h);

#endif
