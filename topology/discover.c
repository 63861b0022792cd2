/* Discovery: read the node through hwloc (this machine or an XML file) into
 * the plain structures of hwtopo.h. */
#include <hwloc.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <stdio.h>
#include "discover_io.h"
#include "log.h"
#include "settings.h"

/* Index of the only object of @p type whose cpuset meets @p set, or -1 when
 * none or several do (a device local to the whole machine). */
static int only_meeting(hwloc_topology_t h, hwloc_obj_type_t type, hwloc_const_cpuset_t set)
{
    int found = -1, n = hwloc_get_nbobjs_by_type(h, type);
    for (int i = 0; i < n; i++) {
        hwloc_obj_t o = hwloc_get_obj_by_type(h, type, (unsigned)i);
        if (!hwloc_bitmap_intersects(o->cpuset, set)) continue;
        if (found >= 0) return -1;
        found = i;
    }
    return found;
}

void fr_io_locality(hwloc_topology_t h, hwloc_obj_t io, int *numa, int *package)
{
    hwloc_obj_t a = hwloc_get_non_io_ancestor_obj(h, io);
    *numa = a && a->cpuset ? only_meeting(h, HWLOC_OBJ_NUMANODE, a->cpuset) : -1;
    *package = a && a->cpuset ? only_meeting(h, HWLOC_OBJ_PACKAGE, a->cpuset) : -1;
}

void fr_io_pci_place(hwloc_obj_t dev, fr_topo_pci_t *p)
{
    memset(p, 0, sizeof *p);
    p->host_bridge = p->sw = -1;
    if (!dev || dev->type != HWLOC_OBJ_PCI_DEVICE) return;
    const struct hwloc_pcidev_attr_s *a = &dev->attr->pcidev;
    snprintf(p->busid, sizeof p->busid, "%04x:%02x:%02x.%01x", (unsigned)a->domain, (unsigned)a->bus,
             (unsigned)a->dev, (unsigned)a->func);
    p->vendor = a->vendor_id;
    p->device = a->device_id;
    p->cls = a->class_id;
    for (hwloc_obj_t b = dev->parent; b && b->type == HWLOC_OBJ_BRIDGE; b = b->parent) {
        if (b->attr->bridge.upstream_type == HWLOC_OBJ_BRIDGE_HOST) {
            p->host_bridge = (long)b->gp_index;
            break;
        }
        p->sw = (long)b->gp_index;   /* ends as the topmost PCI bridge */
    }
}

int fr_io_osdev_is(hwloc_obj_t o, hwloc_obj_osdev_type_t type)
{
    return o->type == HWLOC_OBJ_OS_DEVICE && o->attr->osdev.type == type;
}

/* N of a CUDA OS device "cudaN" when it is a plain number a device could
 * have; -1 for anything else (a sign, junk, overflow), with a warning. */
static int cuda_index(const char *name)
{
    char *end;
    errno = 0;
    long n = strtol(name + 4, &end, 10);
    if (!errno && end != name + 4 && !*end && name[4] >= '0' && name[4] <= '9' && n < 65536) return (int)n;
    FR_WARN(FR_SUB_TOPO, "topology: GPU OS device '%s' has no usable CUDA index", name);
    return -1;
}

static fr_status_t add_gpu(fr_topo_t *t, hwloc_topology_t h, hwloc_obj_t dev)
{
    fr_topo_gpu_t *g = realloc(t->gpu, (size_t)(t->ngpus + 1) * sizeof *g);
    if (!g) return FR_ERROR(FR_ERR_NO_MEMORY, "topology: out of memory");
    t->gpu = g;
    g = &t->gpu[t->ngpus];
    memset(g, 0, sizeof *g);
    g->cuda = -1;
    fr_io_pci_place(dev, &g->pci);
    fr_io_locality(h, dev, &g->numa, &g->package);
    const char *model = hwloc_obj_get_info_by_name(dev, "PCIDevice");
    for (hwloc_obj_t o = dev->io_first_child; o; o = o->next_sibling) {
        const char *m = hwloc_obj_get_info_by_name(o, "GPUModel");
        if (m) model = m;
        if (fr_io_osdev_is(o, HWLOC_OBJ_OSDEV_COPROC) && o->name && !strncmp(o->name, "cuda", 4)) {
            snprintf(g->osdev, sizeof g->osdev, "%s", o->name);
            g->cuda = cuda_index(o->name);
        }
    }
    if (model) snprintf(g->name, sizeof g->name, "%s", model);
    else snprintf(g->name, sizeof g->name, "GPU %04x:%04x", g->pci.vendor, g->pci.device);
    t->ngpus++;
    return FR_SUCCESS;
}

/* The deepest level of data (or unified) caches that hwloc reports with a
 * size: its level, how many caches and their bytes in all. */
static void last_level_cache(fr_topo_t *t, hwloc_topology_t h)
{
    static const hwloc_obj_type_t level[] = { HWLOC_OBJ_L1CACHE, HWLOC_OBJ_L2CACHE, HWLOC_OBJ_L3CACHE,
                                              HWLOC_OBJ_L4CACHE, HWLOC_OBJ_L5CACHE };
    for (int l = (int)(sizeof level / sizeof level[0]) - 1; l >= 0; l--) {
        int n = hwloc_get_nbobjs_by_type(h, level[l]);
        unsigned long long bytes = 0;
        for (int i = 0; i < n; i++) {
            hwloc_obj_t o = hwloc_get_obj_by_type(h, level[l], (unsigned)i);
            if (o->attr) bytes += o->attr->cache.size;
        }
        if (bytes) {
            t->llc_level = l + 1;
            t->nllc = n;
            t->llc_bytes = bytes;
            return;
        }
    }
}

static fr_status_t read_cpus(fr_topo_t *t, hwloc_topology_t h)
{
    t->npackages = hwloc_get_nbobjs_by_type(h, HWLOC_OBJ_PACKAGE);
    t->nnuma = hwloc_get_nbobjs_by_type(h, HWLOC_OBJ_NUMANODE);
    t->npus = hwloc_get_nbobjs_by_type(h, HWLOC_OBJ_PU);
    hwloc_obj_type_t ct = hwloc_get_nbobjs_by_type(h, HWLOC_OBJ_CORE) > 0 ? HWLOC_OBJ_CORE : HWLOC_OBJ_PU;
    t->ncores = hwloc_get_nbobjs_by_type(h, ct);
    if (t->nnuma < 1 || t->ncores < 1) return FR_ERROR(FR_ERR_SYSTEM, "topology: no NUMA node or no core");
    last_level_cache(t, h);
    t->numa = calloc((size_t)t->nnuma, sizeof *t->numa);
    t->core = calloc((size_t)t->ncores, sizeof *t->core);
    t->numa_dist = calloc((size_t)t->nnuma * (size_t)t->nnuma, sizeof *t->numa_dist);
    if (!t->numa || !t->core || !t->numa_dist) return FR_ERROR(FR_ERR_NO_MEMORY, "topology: out of memory");
    for (int i = 0; i < t->nnuma; i++) {
        hwloc_obj_t o = hwloc_get_obj_by_type(h, HWLOC_OBJ_NUMANODE, (unsigned)i);
        t->numa[i].os_index = (int)o->os_index;
        t->numa[i].mem = (unsigned long long)o->attr->numanode.local_memory;
        t->numa[i].package = only_meeting(h, HWLOC_OBJ_PACKAGE, o->cpuset);
        t->numa[i].cores = calloc((size_t)t->ncores, sizeof(int));
        if (!t->numa[i].cores) return FR_ERROR(FR_ERR_NO_MEMORY, "topology: out of memory");
    }
    for (int c = 0; c < t->ncores; c++) {
        hwloc_obj_t o = hwloc_get_obj_by_type(h, ct, (unsigned)c);
        fr_topo_core_t *k = &t->core[c];
        k->numa = -1;
        for (int i = 0; i < t->nnuma && k->numa < 0; i++)
            if (hwloc_bitmap_isincluded(o->cpuset, hwloc_get_obj_by_type(h, HWLOC_OBJ_NUMANODE, (unsigned)i)->cpuset))
                k->numa = i;
        if (k->numa < 0) k->numa = 0;   /* a core outside every NUMA node: count it in the first */
        k->package = only_meeting(h, HWLOC_OBJ_PACKAGE, o->cpuset);
        fr_topo_numa_t *nu = &t->numa[k->numa];
        nu->cores[nu->ncores++] = c;
        k->npus = hwloc_bitmap_weight(o->cpuset);
        k->pus = calloc(k->npus > 0 ? (size_t)k->npus : 1, sizeof(int));
        if (!k->pus) return FR_ERROR(FR_ERR_NO_MEMORY, "topology: out of memory");
        int j = 0;
        int pu;
        hwloc_bitmap_foreach_begin(pu, o->cpuset) { if (j < k->npus) k->pus[j++] = pu; }
        hwloc_bitmap_foreach_end();
    }
    return FR_SUCCESS;
}

static void read_distances(fr_topo_t *t, hwloc_topology_t h)
{
    for (int i = 0; i < t->nnuma; i++)
        for (int j = 0; j < t->nnuma; j++) t->numa_dist[i * t->nnuma + j] = i == j ? 10 : 20;
    struct hwloc_distances_s *d[4];
    unsigned nr = 4;
    if (hwloc_distances_get_by_type(h, HWLOC_OBJ_NUMANODE, &nr, d, HWLOC_DISTANCES_KIND_MEANS_LATENCY, 0) != 0)
        return;
    if (nr > 4) nr = 4;
    for (unsigned k = 0; k < nr; k++) {
        if (k == 0 && d[k]->nbobjs == (unsigned)t->nnuma)
            for (unsigned i = 0; i < d[k]->nbobjs; i++)
                for (unsigned j = 0; j < d[k]->nbobjs; j++)
                    t->numa_dist[d[k]->objs[i]->logical_index * (unsigned)t->nnuma + d[k]->objs[j]->logical_index] =
                        (int)d[k]->values[i * d[k]->nbobjs + j];
        hwloc_distances_release(h, d[k]);
    }
}

static int cmp_gpu(const void *a, const void *b)
{
    int x = ((const fr_topo_gpu_t *)a)->index, y = ((const fr_topo_gpu_t *)b)->index;
    return (x > y) - (x < y);   /* (a difference can overflow) */
}

/* PCI bus order: domain, bus, device, function (a longer bus id has a wider domain). */
static int cmp_busid(const void *a, const void *b)
{
    const char *x = ((const fr_topo_gpu_t *)a)->pci.busid, *y = ((const fr_topo_gpu_t *)b)->pci.busid;
    size_t lx = strlen(x), ly = strlen(y);
    return lx != ly ? (lx > ly) - (lx < ly) : strcmp(x, y);
}

/* Every GPU's index, unique on the node: its CUDA index where hwloc shows
 * one (hwloc's CUDA devices are the ones this process's CUDA runtime
 * enumerates, CUDA_VISIBLE_DEVICES applied), else its place in PCI bus
 * order counted on from past the highest CUDA index, so that no such GPU
 * can be taken for a CUDA device. A CUDA index seen twice keeps the first. */
static void gpu_indices(fr_topo_t *t)
{
    int top = -1;
    if (t->ngpus > 1) qsort(t->gpu, (size_t)t->ngpus, sizeof *t->gpu, cmp_busid);
    for (int g = 0; g < t->ngpus; g++) {
        fr_topo_gpu_t *x = &t->gpu[g];
        x->pci_order = g;
        for (int k = 0; k < g && x->cuda >= 0; k++)
            if (t->gpu[k].cuda == x->cuda) {
                FR_WARN(FR_SUB_TOPO, "topology: two GPUs have CUDA index %d; %s is not taken as a CUDA device",
                        x->cuda, x->pci.busid);
                x->cuda = -1;
            }
        if (x->cuda > top) top = x->cuda;
        t->ncuda += x->cuda >= 0;
    }
    for (int g = 0; g < t->ngpus; g++) {
        fr_topo_gpu_t *x = &t->gpu[g];
        x->index = x->cuda >= 0 ? x->cuda : ++top;
    }
    if (t->ngpus > 1) qsort(t->gpu, (size_t)t->ngpus, sizeof *t->gpu, cmp_gpu);
}

int fr_topo_gpu_usable(const fr_topo_t *t, int g)
{
    return g >= 0 && g < t->ngpus && (!t->ncuda || t->gpu[g].cuda >= 0);
}

static fr_status_t read_io(fr_topo_t *t, hwloc_topology_t h)
{
    for (hwloc_obj_t d = hwloc_get_next_pcidev(h, NULL); d; d = hwloc_get_next_pcidev(h, d))
        if (d->attr->pcidev.vendor_id == 0x10de && d->attr->pcidev.class_id >> 8 == 0x03)
            FR_CHECK(add_gpu(t, h, d));
    gpu_indices(t);
    return fr_io_read_nics(t, h);
}

/* A short stable name of the node's shape, e.g. "2s2n16c32t-8x10de:2330-4ib1eth". */
static void fingerprint(fr_topo_t *t)
{
    char *f = t->fingerprint;
    size_t len = sizeof t->fingerprint, o;
    o = (size_t)snprintf(f, len, "%ds%dn%dc%dt-", t->npackages, t->nnuma, t->ncores, t->npus);
    if (!t->ngpus && o < len) o += (size_t)snprintf(f + o, len - o, "0gpu");
    for (int i = 0; i < t->ngpus && o < len; i++) {
        int seen = 0, n = 0;
        for (int j = 0; j < t->ngpus; j++) {
            int same = t->gpu[j].pci.vendor == t->gpu[i].pci.vendor && t->gpu[j].pci.device == t->gpu[i].pci.device;
            if (same && j < i) seen = 1;
            n += same;
        }
        if (!seen)
            o += (size_t)snprintf(f + o, len - o, "%s%dx%04x:%04x", i ? "+" : "", n, t->gpu[i].pci.vendor,
                                  t->gpu[i].pci.device);
    }
    int k[FR_NIC_NKINDS] = {0};
    for (int i = 0; i < t->nnics; i++) k[t->nic[i].kind]++;
    if (o < len) o += (size_t)snprintf(f + o, len - o, "-");
    if (!t->nnics && o < len) o += (size_t)snprintf(f + o, len - o, "0nic");
    for (int i = 0; i < FR_NIC_NKINDS && o < len; i++)
        if (k[i]) o += (size_t)snprintf(f + o, len - o, "%d%s", k[i], fr_nic_kind_name(i));
}

const char *fr_topo_xml_of(const fr_settings_t *set)
{
    const char *env = fr_foreign_get(FR_F_HWLOC_XMLFILE);
    return set->topo_xml ? set->topo_xml : env && *env ? env : NULL;
}

fr_status_t fr_topo_load(const char *xml, fr_topo_t **out)
{
    *out = NULL;
    fr_topo_t *t = calloc(1, sizeof *t);
    if (!t) return FR_ERROR(FR_ERR_NO_MEMORY, "topology: out of memory");
    hwloc_topology_t h;
    if (hwloc_topology_init(&h) != 0) {
        free(t);
        return FR_ERROR(FR_ERR_SYSTEM, "topology: hwloc_topology_init failed");
    }
    hwloc_topology_set_io_types_filter(h, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
    fr_status_t st = FR_SUCCESS;
    if (xml && hwloc_topology_set_xml(h, xml) != 0) {
        st = FR_ERROR(FR_ERR_CONFIG, "topology: cannot use XML file '%s'", xml);
        goto done;
    }
    if (hwloc_topology_load(h) != 0) {
        st = FR_ERROR(FR_ERR_CONFIG, "topology: hwloc cannot load %s%s", xml ? "XML file " : "this machine",
                      xml ? xml : "");
        goto done;
    }
    const char *base = xml ? strrchr(xml, '/') : NULL;
    snprintf(t->source, sizeof t->source, "%s", xml ? (base ? base + 1 : xml) : "this machine");
    /* An XML file describes some machine, maybe not this one: its plan is
     * never applied, even where HWLOC_THISSYSTEM=1 makes hwloc trust it. */
    t->this_system = !xml && hwloc_topology_is_thissystem(h);
    FR_CHECK_GOTO(read_cpus(t, h), st, done);
    read_distances(t, h);
    FR_CHECK_GOTO(read_io(t, h), st, done);
    fingerprint(t);
done:
    hwloc_topology_destroy(h);
    if (st != FR_SUCCESS) fr_topo_free(t);
    else *out = t;
    return st;
}

void fr_topo_free(fr_topo_t *t)
{
    if (!t) return;
    for (int i = 0; t->numa && i < t->nnuma; i++) free(t->numa[i].cores);
    for (int i = 0; t->core && i < t->ncores; i++) free(t->core[i].pus);
    free(t->numa);
    free(t->core);
    free(t->gpu);
    free(t->nic);
    free(t->numa_dist);
    free(t);
}

/* A copy of @p n elements of @p size bytes (NULL for none); 0 when out of memory. */
static int dup_array(void **to, const void *from, int n, size_t size)
{
    *to = NULL;
    if (!from || n <= 0) return 1;
    if (!(*to = malloc((size_t)n * size))) return 0;
    memcpy(*to, from, (size_t)n * size);
    return 1;
}

fr_status_t fr_topo_restrict(const fr_topo_t *t, const unsigned char *keep, int nkeep, fr_topo_t **out)
{
    *out = NULL;
    fr_topo_t *r = malloc(sizeof *r);
    if (!r) return FR_ERROR(FR_ERR_NO_MEMORY, "topology: out of memory");
    *r = *t;
    r->ncores = r->npus = 0;
    r->core = calloc((size_t)t->ncores, sizeof *r->core);
    r->numa = calloc((size_t)t->nnuma, sizeof *r->numa);
    int ok = r->core && r->numa;
    ok &= dup_array((void **)&r->gpu, t->gpu, t->ngpus, sizeof *t->gpu);
    ok &= dup_array((void **)&r->nic, t->nic, t->nnics, sizeof *t->nic);
    ok &= dup_array((void **)&r->numa_dist, t->numa_dist, t->nnuma * t->nnuma, sizeof *t->numa_dist);
    for (int n = 0; ok && n < t->nnuma; n++) {
        r->numa[n] = t->numa[n];
        r->numa[n].ncores = 0;
        ok = (r->numa[n].cores = calloc((size_t)t->numa[n].ncores + 1, sizeof(int))) != NULL;
    }
    for (int c = 0; ok && c < t->ncores; c++) {
        const fr_topo_core_t *k = &t->core[c];
        fr_topo_core_t *x = &r->core[r->ncores];
        *x = *k;
        x->npus = 0;
        if (!(x->pus = calloc((size_t)k->npus + 1, sizeof(int)))) { ok = 0; break; }
        for (int j = 0; j < k->npus; j++)
            if (k->pus[j] >= 0 && k->pus[j] < nkeep && keep[k->pus[j]]) x->pus[x->npus++] = k->pus[j];
        if (!x->npus) { free(x->pus); continue; }
        r->npus += x->npus;
        fr_topo_numa_t *nu = &r->numa[k->numa];
        nu->cores[nu->ncores++] = r->ncores++;
    }
    if (!ok) { fr_topo_free(r); return FR_ERROR(FR_ERR_NO_MEMORY, "topology: out of memory"); }
    if (!r->ncores) { fr_topo_free(r); return FR_ERROR(FR_ERR_CONFIG, "topology: none of its cores is in the CPUs given"); }
    *out = r;
    return FR_SUCCESS;
}

int fr_topo_gpu_nic_distance(const fr_topo_t *t, int g, int n)
{
    const fr_topo_gpu_t *a = &t->gpu[g];
    const fr_topo_nic_t *b = &t->nic[n];
    if (a->pci.sw >= 0 && a->pci.sw == b->pci.sw) return 0;
    if (a->pci.host_bridge >= 0 && a->pci.host_bridge == b->pci.host_bridge) return 1;
    if (a->numa >= 0 && a->numa == b->numa) return 2;
    if (a->package >= 0 && a->package == b->package) return 3;
    return 4;
}
