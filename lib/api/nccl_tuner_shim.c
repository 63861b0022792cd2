/* libnccl-tuner-fastreduce.so: what NCCL loads as its tuner plugin. The
 * plugin itself is part of libfastreduce (nccl_tuner.c), because it must
 * read the per-thread hint of the copy of the library that issues the NCCL
 * call: this module gives NCCL the plugin of the copy the process already
 * uses (a program's own, or libfastreduce.so, found in the global scope),
 * else loads libfastreduce.so from its own folder (a program that uses
 * NCCL alone). It does not link the library, so that a program with its
 * own copy does not get a second one. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
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

/* libfastreduce.so: the one beside this module, else the loader's. */
static void *load_library(void)
{
    Dl_info di;
    char path[4096];
    if (dladdr((void *)&v5_here, &di) && di.dli_fname && strrchr(di.dli_fname, '/')) {
        int dir = (int)(strrchr(di.dli_fname, '/') - di.dli_fname);
        if (snprintf(path, sizeof path, "%.*s/%s", dir, di.dli_fname, FR_LIB_SONAME) < (int)sizeof path) {
            void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
            if (lib) return lib;
        }
    }
    return dlopen(FR_LIB_SONAME, RTLD_NOW | RTLD_LOCAL);
}

/* @p name as the process already defines it outside this module, else as
 * @p lib defines it; NULL. */
static const void *real(const char *name, const void *here, void **lib)
{
    const void *p = dlsym(RTLD_DEFAULT, name);
    if (p && p != here) return p;
    if (!*lib) *lib = load_library();  /* (kept loaded: NCCL calls into it) */
    p = *lib ? dlsym(*lib, name) : NULL;
    return p == here ? NULL : p;
}

/* (a constructor: NCCL reads the structures as soon as dlopen returns) */
__attribute__((constructor)) static void bind_plugin(void)
{
    void *lib = NULL;
    const frn_tuner_v5_t *v5 = real("ncclTunerPlugin_v5", &v5_here, &lib);
    const frn_tuner_v4_t *v4 = real("ncclTunerPlugin_v4", &v4_here, &lib);
    const frn_tuner_v3_t *v3 = real("ncclTunerPlugin_v3", &v3_here, &lib);
    if (v5) v5_here = *v5;
    if (v4) v4_here = *v4;
    if (v3) v3_here = *v3;
}
