/* libnccl-tuner-fastreduce.so: what NCCL loads as its tuner plugin. The
 * plugin itself is part of libfastreduce (nccl_tuner.c), because it must
 * read the per-thread hint of the copy of the library that issues the NCCL
 * call: this module gives NCCL the plugin of the copy the process already
 * uses (a program's own, or libfastreduce.so, found in the global scope),
 * else that of the libfastreduce.so it links. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include "fastreduce.h"
#include "nccl_tuner_abi.h"

/* The structures NCCL reads, filled when the module is loaded. They are
 * written through these local names: a program that exports the plugin's
 * names would otherwise take the module's own references to them. */
static frn_tuner_v5_t v5_here;
static frn_tuner_v4_t v4_here;
static frn_tuner_v3_t v3_here;
#define EXPORT(name, local) FR_API extern __typeof__(local) name __attribute__((alias(#local)))
EXPORT(ncclTunerPlugin_v5, v5_here);
EXPORT(ncclTunerPlugin_v4, v4_here);
EXPORT(ncclTunerPlugin_v3, v3_here);

/* @p name as the process already defines it outside this module, else as
 * the libfastreduce.so that defines fr_version for this module; NULL. */
static const void *real(const char *name, const void *here)
{
    const void *p = dlsym(RTLD_DEFAULT, name);
    if (p && p != here) return p;
    Dl_info di;
    void *lib;
    if (!dladdr((void *)fr_version, &di) || !di.dli_fname ||
        !(lib = dlopen(di.dli_fname, RTLD_LAZY | RTLD_NOLOAD)))
        return NULL;
    p = dlsym(lib, name);
    dlclose(lib);  /* (the module's own link keeps it loaded) */
    return p == here ? NULL : p;
}

/* (a constructor: NCCL reads the structures as soon as dlopen returns) */
__attribute__((constructor)) static void bind_plugin(void)
{
    const frn_tuner_v5_t *v5 = real("ncclTunerPlugin_v5", &v5_here);
    const frn_tuner_v4_t *v4 = real("ncclTunerPlugin_v4", &v4_here);
    const frn_tuner_v3_t *v3 = real("ncclTunerPlugin_v3", &v3_here);
    if (v5) v5_here = *v5;
    if (v4) v4_here = *v4;
    if (v3) v3_here = *v3;
}
