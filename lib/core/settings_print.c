/* The settings as fastreduce-info and docs/environment.md show them. */
#include <stdlib.h>
#include <string.h>
#include "settings.h"

const char *fr_setting_src_name(int src)
{
    static const char *const n[] = {"default", "environment", "fr_config_t", "default (malformed variable)"};
    return src >= 0 && src <= FR_FROM_BAD_ENV ? n[src] : "?";
}

const char *fr_setting_when_name(int when)
{
    static const char *const n[] = {"fr_comm_create", "logger start", "first FR_Allreduce or FR_Bcast", "NCCL set-up",
                                    "each fr_mem_alloc", "first fr_comm_create"};
    return when >= 0 && when < FR_WHEN_COUNT ? n[when] : "?";
}

/* A byte count with the largest K/M/G suffix that divides it. */
static const char *size_text(uint64_t v, char *buf, size_t len)
{
    static const char sfx[] = "GMK";
    for (int i = 0; i < 3; i++) {
        uint64_t unit = (uint64_t)1 << (10 * (3 - i));
        if (v && v % unit == 0) {
            snprintf(buf, len, "%llu%c", (unsigned long long)(v / unit), sfx[i]);
            return buf;
        }
    }
    snprintf(buf, len, "%llu", (unsigned long long)v);
    return buf;
}

const char *fr_setting_text(const fr_settings_t *s, fr_setting_id_t id, char *buf, size_t len)
{
    const fr_setting_t *r = &fr_settings[id];
    const void *p = (const char *)s + r->off;
    switch (r->type) {
    case FR_SET_STRING: {
        const char *v = *(char *const *)p;
        snprintf(buf, len, "%s", !v ? "(unset)" : *v ? v : "(empty)");
        break;
    }
    case FR_SET_INT: snprintf(buf, len, "%ld", *(const long *)p); break;
    case FR_SET_SECONDS: snprintf(buf, len, "%.15g", *(const double *)p); break;
    case FR_SET_SIZE: size_text(*(const uint64_t *)p, buf, len); break;
    case FR_SET_ENUM: snprintf(buf, len, "%s", r->words[*(const int *)p]); break;
    case FR_SET_STREAM:
        if (s->shm_stream != FR_STREAM_AUTO) snprintf(buf, len, "%d", s->shm_stream == FR_STREAM_STREAMING);
        else if (s->shm_slow != FR_SHM_SLOW) snprintf(buf, len, "auto:%.15g", s->shm_slow);
        else snprintf(buf, len, "auto");
        break;
    default: snprintf(buf, len, "?");
    }
    return buf;
}

void fr_settings_print(FILE *f)
{
    for (int i = 0; i < fr_nsettings; i++) {
        const char *v = getenv(fr_settings[i].name);
        fprintf(f, "  %-24s = %-12s (default %s)\n      %s\n", fr_settings[i].name,
                v ? v : "(unset)", *fr_settings[i].def ? fr_settings[i].def : "none", fr_settings[i].doc);
    }
}

void fr_settings_print_values(const fr_settings_t *s, FILE *f)
{
    fprintf(f, "  %-26s %-16s %-28s %s\n", "variable", "value", "from", "read at");
    for (int id = 0; id < fr_nsettings; id++) {
        char buf[4096];
        const char *src = s->loaded & FR_S_BIT(id) ? fr_setting_src_name(s->src[id]) : "(not loaded)";
        fprintf(f, "  %-26s %-16s %-28s %s\n", fr_settings[id].name, fr_setting_text(s, id, buf, sizeof buf), src,
                fr_setting_when_name(fr_settings[id].when));
    }
}

void fr_settings_print_markdown(FILE *f)
{
    fprintf(f, "| variable | default | read at | meaning |\n| --- | --- | --- | --- |\n");
    for (int id = 0; id < fr_nsettings; id++) {
        const fr_setting_t *r = &fr_settings[id];
        fprintf(f, "| `%s` | %s%s%s | %s | %s |\n", r->name, *r->def ? "`" : "", *r->def ? r->def : "unset",
                *r->def ? "`" : "", fr_setting_when_name(r->when), r->doc);
    }
}

void fr_foreign_print(FILE *f)
{
    for (int id = 0; id < FR_F_COUNT; id++) {
        const char *v = fr_foreign_get((fr_foreign_id_t)id);
        fprintf(f, "  %-26s %-16s %s\n", fr_foreign[id].name, !v ? "(unset)" : *v ? v : "(empty)", fr_foreign[id].use);
    }
    fprintf(f, "  %-26s %-16s %s\n", FR_UCX_ENV_PREFIX "_UCX_*", "", "read by UCX for fastreduce's own UCX context, "
            "before the UCX_* of the same name");
}
