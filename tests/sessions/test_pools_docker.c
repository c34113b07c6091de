/*
 * test_pools_docker.c - a warm pool on the docker provider against the
 * daemon of SBX_TEST_DOCKER_HOST (skipped when unset): reconcile fills it
 * with real containers, a new session claims one (its command runs in the
 * member's container), the session is destroyed like any other (its
 * container goes), `sbx run` claims too, and removing the pool removes its
 * containers. Containers are counted with the docker CLI on that daemon.
 */
#include "cli_harness.h"

#include <criterion/criterion.h>
#include <json-c/json.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define RUN(e, r, ...)                                        \
    do {                                                      \
        const char *args_[] = {__VA_ARGS__, NULL};            \
        cli_run((e), args_, NULL, 60000, (r));                \
    } while (0)

/* This run's label (labels: in the provider section): other tests on the
 * same daemon make containers of their own meanwhile. */
static char run_label[64];

static int containers(void)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "docker -H '%s' ps -aq --filter 'label=sbx-test-run=%s' | wc -l",
             getenv("SBX_TEST_DOCKER_HOST"), run_label);
    FILE *f = popen(cmd, "r");
    cr_assert_not_null(f);
    int n = -1;
    cr_assert_eq(fscanf(f, "%d", &n), 1);
    pclose(f);
    return n;
}

static int ready(struct cli_env *e, char refs[][128])
{
    struct cli_result r;
    RUN(e, &r, "pools", "--json");
    cr_assert_eq(r.status, 0, "%s", r.err);
    json_object *o = json_tokener_parse(r.out), *list;
    cr_assert(o && json_object_object_get_ex(o, "members", &list), "%s", r.out);
    int n = 0;
    for (size_t i = 0; i < json_object_array_length(list); i++) {
        json_object *m = json_object_array_get_idx(list, i), *st, *ref;
        json_object_object_get_ex(m, "state", &st);
        json_object_object_get_ex(m, "external_id", &ref);
        if (!strcmp(json_object_get_string(st), "ready"))
            snprintf(refs[n++], 128, "%s", json_object_get_string(ref));
    }
    json_object_put(o);
    cli_result_free(&r);
    return n;
}

Test(pools_docker, fill_claim_run_destroy_remove, .timeout = 120)
{
    struct cli_env e;
    cli_env_init(&e);
    char head[PATH_MAX + 64];
    snprintf(head, sizeof head, "store: { driver: sqlite, path: %s/db }\n", e.home);
    snprintf(run_label, sizeof run_label, "pools-%ld-%lld", (long)getpid(), cli_now_ms());
    char tail[256];
    snprintf(tail, sizeof tail,
             "    labels: { sbx-test-run: '%s' }\npools:\n  warm: { provider: docker, size: 2 }\n",
             run_label);
    cli_env_docker_config(&e, head);
    /* the pools come after the provider section */
    char path[4200];
    snprintf(path, sizeof path, "%s", e.config);
    FILE *f = fopen(path, "a");
    cr_assert_not_null(f);
    fputs(tail, f);
    fclose(f);
    int base = containers();
    struct cli_result r;
    RUN(&e, &r, "reconcile");
    cr_assert_eq(r.status, 0, "%s%s", r.out, r.err);
    cli_result_free(&r);
    char refs[4][128];
    cr_assert_eq(ready(&e, refs), 2);
    cr_assert_eq(containers(), base + 2);
    RUN(&e, &r, "exec", "k1", "--", "hostname");
    cr_assert_eq(r.status, 0, "%s", r.err);
    /* the container's hostname is the start of its id */
    cr_assert(!strncmp(r.out, refs[0], 12) || !strncmp(r.out, refs[1], 12),
              "k1 ran in %s, not in a member", r.out);
    cli_result_free(&r);
    cr_assert_eq(containers(), base + 2, "a cold container was made");
    RUN(&e, &r, "sessions");
    cr_assert(strstr(r.out, "k1") && !strstr(r.out, "pool:"), "%s", r.out);
    cli_result_free(&r);
    RUN(&e, &r, "destroy", "k1");
    cr_assert_eq(r.status, 0, "%s", r.err);
    cli_result_free(&r);
    cr_assert_eq(containers(), base + 1, "the claimed container was not destroyed");
    RUN(&e, &r, "run", "--", "echo", "pooled");
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_assert_str_eq(r.out, "pooled\n");
    cli_result_free(&r);
    cr_assert_eq(containers(), base, "sbx run left its container");
    RUN(&e, &r, "reconcile");
    cli_result_free(&r);
    cr_assert_eq(containers(), base + 2);
    /* the pool removed: its members go */
    char yaml[8192];
    f = fopen(path, "r");
    size_t n = fread(yaml, 1, sizeof yaml - 1, f);
    fclose(f);
    yaml[n] = '\0';
    *strstr(yaml, "pools:") = '\0';
    cli_env_write_config(&e, yaml);
    RUN(&e, &r, "reconcile");
    cr_assert_eq(r.status, 0, "%s%s", r.out, r.err);
    cli_result_free(&r);
    cr_assert_eq(containers(), base, "members of a removed pool were kept");
    cli_env_fini(&e);
}
