/* NICs from hwloc's OS devices. Every OpenFabrics and network OS device is
 * taken, grouped by the PCI function it hangs under whatever that
 * function's class (InfiniBand HCAs of class 0x0c06 included), so that an
 * HCA with its ports and interfaces is one NIC; an OS device without a PCI
 * parent is a NIC of its own. The kind is read from what hwloc says of the
 * devices, in the order of kind_of() below (docs/architecture.md). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "discover_io.h"
#include "log.h"

/* The kinds with the facts the plan and the binding read: a verbs device
 * that UCX and NCCL's IB transport drive, and a fabric to prefer over IP. */
static const struct { const char *name; int verbs, fabric; } nic_kinds[FR_NIC_NKINDS] = {
    [FR_NIC_IB] = {"ib", 1, 1},          [FR_NIC_ROCE] = {"roce", 1, 1},
    [FR_NIC_OPA] = {"opa", 1, 1},        [FR_NIC_RDMA] = {"rdma", 1, 1},
    [FR_NIC_SLINGSHOT] = {"slingshot", 0, 1}, [FR_NIC_BXI] = {"bxi", 0, 1},
    [FR_NIC_IPOIB] = {"ipoib", 0, 0},    [FR_NIC_ETH] = {"eth", 0, 0},
};

const char *fr_nic_kind_name(int kind)
{
    return kind >= 0 && kind < FR_NIC_NKINDS ? nic_kinds[kind].name : "?";
}

int fr_nic_kind_verbs(int kind)
{
    return kind >= 0 && kind < FR_NIC_NKINDS && nic_kinds[kind].verbs;
}

int fr_nic_kind_fabric(int kind)
{
    return kind >= 0 && kind < FR_NIC_NKINDS && nic_kinds[kind].fabric;
}

#define MAX_OSDEVS 16

/* One NIC's OS devices: the first OpenFabrics one and its network ones. */
typedef struct nic_devs {
    hwloc_obj_t pci;             /* NULL for an OS device without a PCI parent */
    hwloc_obj_t ofed;
    hwloc_obj_t net[MAX_OSDEVS];
    int nnet;
} nic_devs_t;

static void take(nic_devs_t *d, hwloc_obj_t o)
{
    if (fr_io_osdev_is(o, HWLOC_OBJ_OSDEV_OPENFABRICS) && o->name && !d->ofed) d->ofed = o;
    else if (fr_io_osdev_is(o, HWLOC_OBJ_OSDEV_NETWORK) && o->name && d->nnet < MAX_OSDEVS) d->net[d->nnet++] = o;
}

/* Bytes of a network device's hardware address ("xx:xx:..."): 6 for
 * Ethernet, 20 for IP over InfiniBand, 0 when hwloc gives none. */
static int address_bytes(hwloc_obj_t net)
{
    const char *a = hwloc_obj_get_info_by_name(net, "Address");
    return a && *a ? (int)(strlen(a) + 1) / 3 : 0;
}

static int any_subtype(const nic_devs_t *d, const char *what)
{
    if (d->ofed && d->ofed->subtype && !strcmp(d->ofed->subtype, what)) return 1;
    for (int i = 0; i < d->nnet; i++)
        if (d->net[i]->subtype && !strcmp(d->net[i]->subtype, what)) return 1;
    return 0;
}

static int any_address(const nic_devs_t *d, int bytes)
{
    for (int i = 0; i < d->nnet; i++)
        if (address_bytes(d->net[i]) == bytes) return 1;
    return 0;
}

/* A port of the OpenFabrics device with a LID: only InfiniBand assigns
 * them (a RoCE port's LID is 0). */
static int has_lid(hwloc_obj_t ofed)
{
    for (unsigned i = 0; i < ofed->infos_count; i++) {
        int p, n = 0;
        if (sscanf(ofed->infos[i].name, "Port%dLID%n", &p, &n) == 1 && !ofed->infos[i].name[n] &&
            strtoul(ofed->infos[i].value, NULL, 0) != 0)
            return 1;
    }
    return 0;
}

static int ib_class(hwloc_obj_t pci)
{
    return pci && (pci->attr->pcidev.class_id == 0x0207 || pci->attr->pcidev.class_id == 0x0c06);
}

/* hwloc's subtypes first (Slingshot, BXI); Omni-Path by its driver's
 * device name; then the link layer: a LID or a 20-byte interface address
 * is InfiniBand, an InfiniBand PCI class too, a 6-byte address or an
 * Ethernet class under a verbs device is RoCE. */
static int kind_of(const nic_devs_t *d)
{
    if (any_subtype(d, "Slingshot")) return FR_NIC_SLINGSHOT;
    if (any_subtype(d, "BXI")) return FR_NIC_BXI;
    unsigned cls = d->pci ? d->pci->attr->pcidev.class_id : 0;
    if (!d->ofed) return any_address(d, 20) || ib_class(d->pci) ? FR_NIC_IPOIB : FR_NIC_ETH;
    if (!strncmp(d->ofed->name, "hfi1_", 5)) return FR_NIC_OPA;
    if (has_lid(d->ofed) || any_address(d, 20) || ib_class(d->pci)) return FR_NIC_IB;
    if (any_address(d, 6) || cls == 0x0200) return FR_NIC_ROCE;
    return FR_NIC_RDMA;
}

/* The OpenFabrics device's ports: how many, and the first active one
 * (state 4), else the first; without one, a network device's "Port".
 * @p down: ports were seen and none is active (a network interface alone
 * has no state in hwloc, so it is never taken for down). */
static void ports(const nic_devs_t *d, int *port, int *nports, int *down)
{
    int first = 0, active = 0;
    *nports = 0;
    for (unsigned i = 0; d->ofed && i < d->ofed->infos_count; i++) {
        int p, n = 0;
        if (sscanf(d->ofed->infos[i].name, "Port%dState%n", &p, &n) != 1 || d->ofed->infos[i].name[n] || p < 1)
            continue;
        (*nports)++;
        if (!first || p < first) first = p;
        if (!strcmp(d->ofed->infos[i].value, "4") && (!active || p < active)) active = p;
    }
    for (int i = 0; !first && i < d->nnet; i++) {
        const char *v = hwloc_obj_get_info_by_name(d->net[i], "Port");
        if (v) first = atoi(v);
    }
    *port = active ? active : first > 0 ? first : 1;
    *down = *nports > 0 && !active;
}

static fr_status_t add_nic(fr_topo_t *t, hwloc_topology_t h, const nic_devs_t *d)
{
    if (!d->ofed && !d->nnet) return FR_SUCCESS;   /* no driver bound */
    fr_topo_nic_t *n = realloc(t->nic, (size_t)(t->nnics + 1) * sizeof *n);
    if (!n) return FR_ERROR(FR_ERR_NO_MEMORY, "topology: out of memory");
    t->nic = n;
    n = &t->nic[t->nnics++];
    memset(n, 0, sizeof *n);
    snprintf(n->name, sizeof n->name, "%s", d->ofed ? d->ofed->name : d->net[0]->name);
    size_t o = 0;
    for (int i = 0; i < d->nnet && o < sizeof n->netdev; i++)
        o += (size_t)snprintf(n->netdev + o, sizeof n->netdev - o, "%s%s", i ? "," : "", d->net[i]->name);
    n->kind = kind_of(d);
    ports(d, &n->port, &n->nports, &n->down);
    fr_io_pci_place(d->pci, &n->pci);
    fr_io_locality(h, d->pci ? d->pci : d->ofed ? d->ofed : d->net[0], &n->numa, &n->package);
    return FR_SUCCESS;
}

fr_status_t fr_io_read_nics(fr_topo_t *t, hwloc_topology_t h)
{
    for (hwloc_obj_t p = hwloc_get_next_pcidev(h, NULL); p; p = hwloc_get_next_pcidev(h, p)) {
        nic_devs_t d = {.pci = p};
        for (hwloc_obj_t o = p->io_first_child; o; o = o->next_sibling) take(&d, o);
        FR_CHECK(add_nic(t, h, &d));
    }
    for (hwloc_obj_t o = hwloc_get_next_osdev(h, NULL); o; o = hwloc_get_next_osdev(h, o)) {
        if (o->parent && o->parent->type == HWLOC_OBJ_PCI_DEVICE) continue;
        nic_devs_t d = {0};
        take(&d, o);
        FR_CHECK(add_nic(t, h, &d));
    }
    return FR_SUCCESS;
}
