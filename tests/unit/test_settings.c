/* Unit tests of the settings module (lib/settings.c): every parser type,
 * every enum's words, malformed values (a warning naming the variable, the
 * value, what is allowed and the default; then the default), where each
 * value came from, and the table's shape. Criterion runs each test in a
 * process of its own, so variables set here do not leak into the next.
 * (A NUL cannot be inside an environment variable's value, so it needs no
 * case.) */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "fastreduce.h"
#include "log.h"
#include "settings.h"

/* The log goes to a file of this test's own, read back by logged(). */
static char log_path[64];

static void log_to_file(void)
{
    snprintf(log_path, sizeof log_path, "/tmp/test_settings_%ld.log", (long)getpid());
    unlink(log_path);
    setenv("FASTREDUCE_DEBUG_FILE", log_path, 1);
    fr_log_init();
}

static void log_done(void)
{
    unlink(log_path);
}

TestSuite(settings, .init = log_to_file, .fini = log_done);

/* Whether the log holds @p text. */
static int logged(const char *text)
{
    char buf[16384];
    FILE *f = fopen(log_path, "r");
    if (!f) return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    return strstr(buf, text) != NULL;
}

/* Row @p id loaded with its variable set to @p value (NULL: unset). */
static fr_settings_t load_with(fr_setting_id_t id, const char *value)
{
    fr_settings_t s = {0};
    if (value) setenv(fr_settings[id].name, value, 1);
    else unsetenv(fr_settings[id].name);
    fr_settings_load(&s, NULL, -1, FR_S_BIT(id));
    unsetenv(fr_settings[id].name);
    return s;
}

/* @p value is malformed for row @p id: the default, FR_FROM_BAD_ENV and a
 * warning naming the variable, the value and the default. */
static void assert_bad(fr_setting_id_t id, const char *value)
{
    fr_settings_t s = load_with(id, value), d = load_with(id, NULL);
    char got[256], def[256], want[512];
    cr_assert_str_eq(fr_setting_text(&s, id, got, sizeof got), fr_setting_text(&d, id, def, sizeof def),
                     "%s='%s' was taken", fr_settings[id].name, value);
    cr_assert_eq(s.src[id], FR_FROM_BAD_ENV, "%s='%s': from %s", fr_settings[id].name, value,
                 fr_setting_src_name(s.src[id]));
    snprintf(want, sizeof want, "%s=%s is not ", fr_settings[id].name, value);
    cr_assert(logged(want), "no warning '%s...'", want);
    snprintf(want, sizeof want, "; using the default %s", fr_settings[id].def);
    cr_assert(logged(want), "%s='%s': the warning does not name the default", fr_settings[id].name, value);
    fr_settings_free(&s);
    fr_settings_free(&d);
}

Test(settings, integer_forms)
{
    static const struct { const char *in; long want; } ok[] = {
        { "0", 0 }, { "7", 7 }, { "42", 42 }, { "007", 7 }, { "1000000000", 1000000000L },
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        fr_settings_t s = load_with(FR_S_SPIN, ok[i].in);
        cr_assert_eq(s.spin, ok[i].want, "'%s'", ok[i].in);
        cr_assert_eq(s.src[FR_S_SPIN], FR_FROM_ENV);
    }
    static const char *const bad[] = { " 4", "\t4", "4 ", "+4", "-1", "-0", "0x10", "0X10", "1e3", "4.0", "4x",
                                       "x4", " ", "1000000001", "99999999999999999999999" };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) assert_bad(FR_S_SPIN, bad[i]);
    cr_assert(logged("is not a non-negative integer (decimal digits alone, at most 1000000000)"));
    /* empty is unset: the default, no warning */
    fr_settings_t s = load_with(FR_S_SPIN, "");
    cr_assert_eq(s.spin, 2000);
    cr_assert_eq(s.src[FR_S_SPIN], FR_FROM_DEFAULT);
}

Test(settings, seconds_forms)
{
    static const struct { const char *in; double want; } ok[] = {
        { "0", 0 }, { "30", 30 }, { "2.5", 2.5 }, { "2.5s", 2.5 }, { "30s", 30 }, { "0.125", 0.125 },
        { "10000000", 1e7 },
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++)
        cr_assert_float_eq(load_with(FR_S_TIMEOUT, ok[i].in).timeout_s, ok[i].want, 1e-12, "'%s'", ok[i].in);
    static const char *const bad[] = { " 1", "1 ", "+1", "-1", "0x10", "0x1p3", "1e3", ".5", "5.", "inf", "nan",
                                       "s", "1ss", "1.5.2", "10000001", "2,5" };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) assert_bad(FR_S_TIMEOUT, bad[i]);
    cr_assert(logged("is not a number of seconds (like 30 or 2.5) from 0 to 1e7"));
}

Test(settings, size_forms)
{
    static const struct { const char *in; uint64_t want; } ok[] = {
        { "65536", 65536 }, { "256K", 256 << 10 }, { "8M", 8 << 20 }, { "1G", 1ull << 30 }, { "0", 0 },
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++)
        cr_assert_eq(load_with(FR_S_FUSION_BUFFER_MAX, ok[i].in).fusion_buffer_max, ok[i].want, "'%s'", ok[i].in);
    static const char *const bad[] = { " 8M", "-1", "+1", "0x10", "1e3", "8Q", "inf", "M",
                                       "99999999999999999999999", "1.5M" };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) assert_bad(FR_S_FUSION_BUFFER_MAX, bad[i]);
    cr_assert(logged("is not a size (like 4096, 256K, 8M)"));
}

/* The segment's layout needs 64 KiB a rank: less is refused with the
 * reason, not raised behind the user's back. */
Test(settings, shm_size_least)
{
    cr_assert_eq(load_with(FR_S_SHM_SIZE, "64K").shm_size, 65536);
    cr_assert_eq(load_with(FR_S_SHM_SIZE, "1G").shm_size, 1ull << 30);
    static const char *const bad[] = { "0", "65535", "63K", " 8M", "0x10" };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) assert_bad(FR_S_SHM_SIZE, bad[i]);
    cr_assert(logged("FASTREDUCE_SHM_SIZE=0x10 is not a size of at least 64K (like 256K, 8M); using the default 8M"));
}

/* Each word gives its index (the C enum's value); case matters except for
 * FASTREDUCE_DEBUG, whose levels were always read whatever their case. */
Test(settings, enum_words)
{
    static const struct { fr_setting_id_t id; const char *in; int want; } ok[] = {
        { FR_S_DEBUG, "NONE", FR_LOG_NONE }, { FR_S_DEBUG, "WARN", FR_LOG_WARN }, { FR_S_DEBUG, "INFO", FR_LOG_INFO },
        { FR_S_DEBUG, "TRACE", FR_LOG_TRACE }, { FR_S_DEBUG, "info", FR_LOG_INFO }, { FR_S_DEBUG, "Trace", FR_LOG_TRACE },
        { FR_S_BIND, "auto", FR_BIND_AUTO }, { FR_S_BIND, "none", FR_BIND_NONE }, { FR_S_BIND, "core", FR_BIND_CORE },
        { FR_S_BIND, "numa", FR_BIND_NUMA }, { FR_S_BIND, "gpu", FR_BIND_GPU },
        { FR_S_NCCL_TUNER, "auto", FR_NCCL_TUNER_AUTO }, { FR_S_NCCL_TUNER, "0", FR_NCCL_TUNER_OFF },
        { FR_S_NCCL_TUNER, "1", FR_NCCL_TUNER_ON },
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        fr_settings_t s = load_with(ok[i].id, ok[i].in);
        int got = ok[i].id == FR_S_DEBUG ? s.debug : ok[i].id == FR_S_BIND ? s.bind : s.nccl_tuner;
        cr_assert_eq(got, ok[i].want, "%s=%s gave %d", fr_settings[ok[i].id].name, ok[i].in, got);
    }
    assert_bad(FR_S_DEBUG, "LOUD");
    cr_assert(logged("FASTREDUCE_DEBUG=LOUD is not NONE, WARN, INFO or TRACE; using the default WARN"));
    assert_bad(FR_S_BIND, "Core");
    assert_bad(FR_S_BIND, " gpu");
    cr_assert(logged("is not auto, none, core, numa or gpu; using the default auto"));
    assert_bad(FR_S_NCCL_TUNER, "2");
    assert_bad(FR_S_NCCL_TUNER, "yes");
    cr_assert(logged("FASTREDUCE_NCCL_TUNER=yes is not auto, 0 or 1; using the default auto"));
}

Test(settings, shm_stream_forms)
{
    static const struct { const char *in; int mode; double slow; } ok[] = {
        { "auto", FR_STREAM_AUTO, FR_SHM_SLOW }, { "0", FR_STREAM_PLAIN, FR_SHM_SLOW },
        { "1", FR_STREAM_STREAMING, FR_SHM_SLOW }, { "auto:0", FR_STREAM_AUTO, 0 },
        { "auto:2.5", FR_STREAM_AUTO, 2.5 }, { "auto:1000000", FR_STREAM_AUTO, 1e6 },
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        fr_settings_t s = load_with(FR_S_SHM_STREAM, ok[i].in);
        cr_assert_eq(s.shm_stream, ok[i].mode, "'%s'", ok[i].in);
        cr_assert_float_eq(s.shm_slow, ok[i].slow, 1e-12, "'%s'", ok[i].in);
        char txt[32];
        cr_assert_str_eq(fr_setting_text(&s, FR_S_SHM_STREAM, txt, sizeof txt), ok[i].in);
    }
    static const char *const bad[] = { "sometimes", "auto:", "auto:-1", "auto:3x", "auto:nan", "auto:1000001",
                                       "2", "AUTO", "auto:0x10", "auto: 2", "auto:+2", "auto:1e3", "auto:2." };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) assert_bad(FR_S_SHM_STREAM, bad[i]);
}

/* A string is copied; empty counts as unset, except for
 * FASTREDUCE_TUNE_PATH, where empty means "no search". */
Test(settings, strings)
{
    fr_settings_t s = load_with(FR_S_HOSTID, "nodeA");
    cr_assert_str_eq(s.hostid, "nodeA");
    cr_assert_eq(s.src[FR_S_HOSTID], FR_FROM_ENV);
    fr_settings_free(&s);
    s = load_with(FR_S_HOSTID, "");
    cr_assert_null(s.hostid);
    cr_assert_eq(s.src[FR_S_HOSTID], FR_FROM_DEFAULT);
    s = load_with(FR_S_TUNE_PATH, "");
    cr_assert_str_eq(s.tune_path, "");
    cr_assert_eq(s.src[FR_S_TUNE_PATH], FR_FROM_ENV);
    fr_settings_free(&s);
    s = load_with(FR_S_TUNE_PATH, NULL);
    cr_assert_str_eq(s.tune_path, fr_settings[FR_S_TUNE_PATH].def);
    cr_assert_eq(s.src[FR_S_TUNE_PATH], FR_FROM_DEFAULT);
    fr_settings_free(&s);
}

/* fr_config_t's fields override their variables; an empty or zero field
 * leaves the variable. */
Test(settings, config_overrides)
{
    setenv("FASTREDUCE_ALGO", "ring", 1);
    setenv("FASTREDUCE_TUNE_FILE", "/env.tune", 1);
    setenv("FASTREDUCE_NODE_SIZE", "bad", 1);
    fr_config_t cfg = FR_CONFIG_INIT;
    cfg.algo = "tree";
    cfg.tune_file = "";
    cfg.node_size = 2;
    unsigned m = FR_S_BIT(FR_S_ALGO) | FR_S_BIT(FR_S_TUNE) | FR_S_BIT(FR_S_TUNE_FILE) | FR_S_BIT(FR_S_NODE_SIZE);
    fr_settings_t s = {0};
    fr_settings_load(&s, &cfg, 0, m);
    cr_assert_str_eq(s.algo, "tree");
    cr_assert_eq(s.src[FR_S_ALGO], FR_FROM_CONFIG);
    cr_assert_str_eq(s.tune_file, "/env.tune");
    cr_assert_eq(s.src[FR_S_TUNE_FILE], FR_FROM_ENV);
    cr_assert_null(s.tune);
    cr_assert_eq(s.src[FR_S_TUNE], FR_FROM_DEFAULT);
    cr_assert_eq(s.node_size, 2);
    cr_assert_eq(s.src[FR_S_NODE_SIZE], FR_FROM_CONFIG);
    cr_assert(!logged("FASTREDUCE_NODE_SIZE=bad"), "a variable that fr_config_t overrides was read");
    cr_assert_eq(s.loaded, m);
    /* reloading replaces the strings */
    cfg.algo = NULL;
    fr_settings_load(&s, &cfg, 0, m);
    cr_assert_str_eq(s.algo, "ring");
    cr_assert_eq(s.src[FR_S_ALGO], FR_FROM_ENV);
    fr_settings_t copy;
    cr_assert_eq(fr_settings_copy(&copy, &s), FR_SUCCESS);
    cr_assert_str_eq(copy.algo, "ring");
    cr_assert_neq(copy.algo, s.algo);
    fr_settings_free(&s);
    fr_settings_free(&copy);
    cr_assert_null(s.algo);
}

/* Rows marked FR_SETF_RANK0 warn only on rank 0 (or where no rank is known). */
Test(settings, rank0_warnings)
{
    setenv("FASTREDUCE_SHM_STREAM", "never", 1);
    fr_settings_t s = {0};
    fr_settings_load(&s, NULL, 1, FR_S_BIT(FR_S_SHM_STREAM));
    cr_assert(!logged("FASTREDUCE_SHM_STREAM=never"), "rank 1 warned");
    cr_assert_eq(s.src[FR_S_SHM_STREAM], FR_FROM_BAD_ENV);
    fr_settings_load(&s, NULL, 0, FR_S_BIT(FR_S_SHM_STREAM));
    cr_assert(logged("FASTREDUCE_SHM_STREAM=never"), "rank 0 did not warn");
}

/* Every row is in exactly one moment, has a field of its own and a
 * default its own parser takes. */
Test(settings, table_shape)
{
    unsigned all = 0;
    for (int w = FR_WHEN_CREATE; w < FR_WHEN_COUNT; w++) {
        unsigned m = fr_settings_when((fr_setting_when_t)w);
        cr_assert_eq(all & m, 0u, "a row in two moments");
        all |= m;
    }
    cr_assert_eq(all, FR_S_BIT(FR_S_COUNT) - 1);
    for (int i = 0; i < fr_nsettings; i++) {
        cr_assert_not_null(fr_settings[i].name, "row %d has no name (the ids and the table differ)", i);
        cr_assert(!strncmp(fr_settings[i].name, "FASTREDUCE_", 11));
        for (int j = 0; j < i; j++) {
            cr_assert_str_neq(fr_settings[i].name, fr_settings[j].name);
            cr_assert(fr_settings[i].off != fr_settings[j].off, "%s and %s share a field", fr_settings[i].name,
                      fr_settings[j].name);
        }
        fr_settings_t s = {0};
        cr_assert(fr_setting_parse(&s, (fr_setting_id_t)i, fr_settings[i].def), "%s's default '%s' is malformed",
                  fr_settings[i].name, fr_settings[i].def);
        fr_settings_free(&s);
    }
    cr_assert_eq(fr_settings_when(FR_WHEN_LOG),
                 FR_S_BIT(FR_S_DEBUG) | FR_S_BIT(FR_S_DEBUG_SUBSYS) | FR_S_BIT(FR_S_DEBUG_FILE));
    cr_assert_eq(fr_settings_when(FR_WHEN_INTERPOSE), FR_S_BIT(FR_S_DISABLE) | FR_S_BIT(FR_S_STATS));
    cr_assert_eq(fr_settings_when(FR_WHEN_NCCL), FR_S_BIT(FR_S_NCCL_TUNER));
}

/* fastreduce-info --settings: each value and its source; --markdown: each row. */
Test(settings, printed)
{
    setenv("FASTREDUCE_CHECK", "1", 1);
    setenv("FASTREDUCE_SPIN", "-3", 1);
    fr_config_t cfg = FR_CONFIG_INIT;
    cfg.tune = "allreduce host * * * ring";
    fr_settings_t s = {0};
    fr_settings_load(&s, &cfg, 0, FR_S_BIT(FR_S_COUNT) - 1);
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    fr_settings_print_values(&s, f);
    fr_settings_print_markdown(f);
    fclose(f);
    cr_assert(strstr(text, "FASTREDUCE_CHECK           1                environment"), "%s", text);
    cr_assert(strstr(text, "FASTREDUCE_SPIN            2000             default (malformed variable)"), "%s", text);
    cr_assert(strstr(text, "FASTREDUCE_TUNE            allreduce host * * * ring fr_config_t"), "%s", text);
    cr_assert(strstr(text, "FASTREDUCE_SHM_SIZE        8M               default"), "%s", text);
    for (int i = 0; i < fr_nsettings; i++) {
        char row[64];
        snprintf(row, sizeof row, "| `%s` |", fr_settings[i].name);
        cr_assert(strstr(text, row), "the Markdown table has no %s", fr_settings[i].name);
    }
    free(text);
    fr_settings_free(&s);
}
