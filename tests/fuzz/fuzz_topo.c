/* libFuzzer target: an hwloc XML topology through fr_topo_load (the XML goes
 * to a memfd and is loaded through its /proc path), then the binding plan of
 * a few rank counts in every mode, printed to /dev/null, and everything freed.
 *
 * hwloc trusts its XML more than a fuzzer deserves: some inputs crash or hang
 * inside hwloc_topology_load itself. Those are hwloc's bugs, not ours, so a
 * forked child first loads each input with hwloc alone; inputs it does not
 * survive are skipped. (hwloc's own leaks on rejected XML are suppressed in
 * tests/fuzz/lsan.supp.) */
#define _GNU_SOURCE
#include <fcntl.h>
#include <hwloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>
#include "hwtopo.h"
#include "fuzz_common.h"

/* Does plain hwloc load @p path without dying? (as fr_topo_load sets it up) */
static int hwloc_survives(const char *path)
{
    pid_t pid = fork();
    FZ_ASSERT(pid >= 0);
    if (pid == 0) {
        int nul = open("/dev/null", O_WRONLY);
        if (nul >= 0) dup2(nul, 2);   /* the sanitizer's report of hwloc's crash */
        alarm(20);
        hwloc_topology_t h;
        if (hwloc_topology_init(&h) == 0) {
            hwloc_topology_set_io_types_filter(h, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
            if (hwloc_topology_set_xml(h, path) == 0) hwloc_topology_load(h);
            hwloc_topology_destroy(h);
        }
        _exit(0);   /* (no leak check in the child) */
    }
    int status;
    while (waitpid(pid, &status, 0) < 0)
        ;
    return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

static FILE *devnull;
static hwloc_topology_t keep;   /* holds hwloc's plugins loaded between runs */

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc; (void)argv;
    setenv("HWLOC_HIDE_ERRORS", "2", 1);   /* hwloc's complaints about bad XML */
    unsetenv("HWLOC_XMLFILE");
    unsetenv("FASTREDUCE_TOPO_XML");
    devnull = fopen("/dev/null", "w");
    /* hwloc loads its plugins with the first topology and unloads them with
     * the last: one topology kept for the whole run spares a dlopen and
     * dlclose of each per input (and leak reports naming no module). */
    FZ_ASSERT(hwloc_topology_init(&keep) == 0);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fz_as_file("fuzz_topo", data, size);

    if (!hwloc_survives(path)) return 0;
    fr_topo_t *t = NULL;
    if (fr_topo_load(path, &t) != FR_SUCCESS) {
        FZ_ASSERT(!t);   /* a failed load hands nothing back */
        return 0;
    }
    FZ_ASSERT(t->nnuma >= 1 && t->ncores >= 1 && t->ngpus >= 0 && t->nnics >= 0);
    fr_topo_print(devnull, t);
    /* GPU indices are unique, and a CUDA index is the GPU's own */
    for (int g = 0; g < t->ngpus; g++) {
        FZ_ASSERT(t->gpu[g].cuda < 0 || t->gpu[g].cuda == t->gpu[g].index);
        for (int k = 0; k < g; k++) FZ_ASSERT(t->gpu[k].index != t->gpu[g].index);
    }
    for (int n = 0; n < t->nnics; n++) FZ_ASSERT(t->nic[n].kind >= 0 && t->nic[n].kind < FR_NIC_NKINDS);
    for (int g = 0; g < t->ngpus; g++)
        for (int n = 0; n < t->nnics; n++) fr_topo_gpu_nic_distance(t, g, n);

    /* A rank count from the input's last byte, plus one rank per core and
     * one more than the cores (some must share). */
    int counts[3] = {1 + (size ? data[size - 1] % 16 : 0), t->ncores, t->ncores + 1};
    for (int c = 0; c < 3; c++)
        for (int mode = FR_BIND_AUTO; mode <= FR_BIND_GPU; mode++) {
            fr_plan_t p;
            if (counts[c] > 4096 || fr_plan_make(t, counts[c], mode, NULL, &p) != FR_SUCCESS) continue;
            char buf[256];
            for (int i = 0; i < p.nranks; i++) {
                const fr_plan_rank_t *r = &p.rank[i];
                FZ_ASSERT(r->gpu < t->ngpus && r->nic < t->nnics && r->numa < t->nnuma);
                FZ_ASSERT(r->gpu < 0 || fr_topo_gpu_usable(t, r->gpu));
                /* a bound rank gets a core at least (the node has one) */
                FZ_ASSERT(p.mode == FR_BIND_NONE || r->ncores >= 1);
                for (int k = 0; k < r->ncores; k++)
                    FZ_ASSERT(r->cores[k] >= 0 && r->cores[k] < t->ncores);
                fr_plan_cpulist(t, r, buf, sizeof buf);
            }
            fr_plan_print(devnull, t, &p, NULL);
            fr_topo_print_json(devnull, t, &p);
            fr_plan_free(&p);
        }
    fr_topo_free(t);
    return 0;
}
