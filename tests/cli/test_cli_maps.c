/*
 * test_cli_maps.c - laziness seen from outside: while `sbx run` executes a
 * command, the only provider mapped into the sbx process is the selected
 * one, although several valid plugins are installed in its search path.
 */
#include "cli_harness.h"

#include <criterion/criterion.h>

#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct cli_env env;

static void setup(void)
{
    cli_env_init(&env);
    cli_env_add_fixtures(&env);
    cli_env_local_config(&env);
}

static void teardown(void)
{
    cli_env_fini(&env);
}

TestSuite(cli_maps, .init = setup, .fini = teardown, .timeout = 60);

/* Read /proc/<pid>/maps into a new string. */
static char *read_maps(pid_t pid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/maps", (int)pid);
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f, "cannot open %s", path);
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap);
    cr_assert_not_null(buf);
    for (;;) {
        if (cap - len < 4096) {
            cap *= 2;
            buf = realloc(buf, cap);
            cr_assert_not_null(buf);
        }
        size_t n = fread(buf + len, 1, cap - len - 1, f);
        if (n == 0)
            break;
        len += n;
    }
    fclose(f);
    buf[len] = '\0';
    return buf;
}

/* Whether `path` appears as a whole mapped file name in maps. */
static bool mapped(const char *maps, const char *path)
{
    size_t n = strlen(path);
    for (const char *p = strstr(maps, path); p; p = strstr(p + 1, path))
        if ((p == maps || p[-1] == ' ') && (p[n] == '\n' || p[n] == '\0'))
            return true;
    return false;
}

/* Count the *.so files of dir that are mapped / not mapped. */
static void scan_dir(const char *dir, const char *maps, const char *selected,
                     int *others, int *others_mapped)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *de;
    while ((de = readdir(d))) {
        size_t n = strlen(de->d_name);
        if (n < 4 || strcmp(de->d_name + n - 3, ".so") != 0)
            continue;
        char path[PATH_MAX], real[PATH_MAX];
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        if (!realpath(path, real) || !strcmp(real, selected))
            continue;
        (*others)++;
        if (mapped(maps, real)) {
            (*others_mapped)++;
            cr_log_error("%s is mapped although it was not selected", real);
        }
    }
    closedir(d);
}

Test(cli_maps, only_the_selected_provider_is_mapped)
{
    char selected[PATH_MAX];
    cr_assert_not_null(realpath(SBX_TEST_PROVIDER_DIR "/local.so", selected));

    struct cli_proc p;
    cli_spawn(&env, (const char *[]){"run", "--", "sh", "-c", "echo ready; exec sleep 30",
                                     NULL},
              CLI_STDIN_NULL, &p);
    char line[32];
    cr_assert(cli_read_line(&p, line, sizeof line, 15000), "the command did not start");
    cr_assert_str_eq(line, "ready");
    /* sbx has opened its context, created the sandbox and is in exec. */
    char *maps = read_maps(p.pid);
    kill(p.pid, SIGTERM);
    int status = cli_wait(&p, 10000);

    cr_assert(mapped(maps, selected), "%s is not mapped", selected);
    int others = 0, others_mapped = 0;
    scan_dir(SBX_TEST_PROVIDER_DIR, maps, selected, &others, &others_mapped);
    scan_dir(CLI_FIXTURE_DIR, maps, selected, &others, &others_mapped);
    free(maps);
    /* The check means something only when other plugins are installed. */
    cr_assert_geq(others, 2, "only %d other plugins installed", others);
    cr_assert_eq(others_mapped, 0, "%d other plugins are mapped", others_mapped);
    cr_assert_eq(status, 128 + SIGTERM);
}
