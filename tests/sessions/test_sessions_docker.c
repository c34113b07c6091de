/*
 * test_sessions_docker.c - the session guarantees on the docker provider,
 * against the real daemon of SBX_TEST_DOCKER_HOST (image
 * SBX_TEST_DOCKER_IMAGE; skipped when unset): eight racing workers end with
 * one container, all eight commands ran in it; a worker killed at each
 * step of provisioning and deletion leaves, after `sbx reconcile`, no
 * container without a binding and no binding without its container.
 * Containers are counted through the Engine API by their owner label
 * (sbx.owner = SHA-256 of the session key). On SQLite and PostgreSQL.
 */
#include "session_env.h"

#include <sbx/sbx.h>

#include <archive.h>
#include <archive_entry.h>
#include <criterion/criterion.h>

#include <dlfcn.h>
#include <sbx/provider.h>
#include <curl/curl.h>
#include <errno.h>
#include <json-c/json.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define WORKERS 8

struct docker_env {
    struct sess_env s;
    char socket[512];
    char prefix[64]; /* unique per test: keys of earlier runs never match */
};

static void docker_env_init(struct docker_env *d, const char *driver)
{
    memset(d, 0, sizeof *d);
    const char *host = getenv("SBX_TEST_DOCKER_HOST");
    if (!host || strncmp(host, "unix://", 7) != 0)
        cr_skip_test("SBX_TEST_DOCKER_HOST is not set (scripts/services/dockerd.sh "
                     "start DIR prints it)");
    const char *image = getenv("SBX_TEST_DOCKER_IMAGE");
    snprintf(d->socket, sizeof d->socket, "%s", host + 7);
    char extra[2048];
    snprintf(extra, sizeof extra,
             "  docker:\n"
             "    host: %s\n"
             "    image: %s\n"
             "    resource_dir: @ROOT@-res\n",
             host, image && *image ? image : "sbx-test:busybox");
    sess_env_init_with(&d->s, driver, "docker", extra, false);
    const char *slash = strrchr(d->s.cli.dir, '/');
    snprintf(d->prefix, sizeof d->prefix, "%s", slash ? slash + 1 : "t");
}

static void key_of(const struct docker_env *d, const char *name, char *out,
                   size_t len)
{
    snprintf(out, len, "%s-%s", d->prefix, name);
}

struct body {
    char *data;
    size_t len;
};

static size_t on_body(char *p, size_t size, size_t n, void *ud)
{
    struct body *b = ud;
    size_t add = size * n;
    char *grown = realloc(b->data, b->len + add + 1);
    cr_assert_not_null(grown);
    memcpy(grown + b->len, p, add);
    b->data = grown;
    b->len += add;
    b->data[b->len] = '\0';
    return add;
}

/* GET path from the daemon; returns the HTTP status, body in *out. */
static long docker_get(const struct docker_env *d, const char *path, struct body *out)
{
    CURL *c = curl_easy_init();
    cr_assert_not_null(c);
    char url[1024];
    snprintf(url, sizeof url, "http://docker/v1.41%s", path);
    out->data = NULL;
    out->len = 0;
    curl_easy_setopt(c, CURLOPT_UNIX_SOCKET_PATH, d->socket);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, out);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 30L);
    CURLcode rc = curl_easy_perform(c);
    cr_assert_eq(rc, CURLE_OK, "GET %s: %s", path, curl_easy_strerror(rc));
    long status = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    curl_easy_cleanup(c);
    return status;
}

/* Containers (running or not) whose owner label is this key's hash. */
static int containers_of(const struct docker_env *d, const char *key)
{
    char hash[SBX_KEY_HASH_LEN + 1];
    sbx_key_hash(key, hash);
    char filter[256];
    snprintf(filter, sizeof filter, "{\"label\":[\"sbx.owner=%s\"]}", hash);
    CURL *c = curl_easy_init();
    char *esc = curl_easy_escape(c, filter, 0);
    char path[512];
    snprintf(path, sizeof path, "/containers/json?all=1&filters=%s", esc);
    curl_free(esc);
    curl_easy_cleanup(c);
    struct body b;
    long status = docker_get(d, path, &b);
    cr_assert_eq(status, 200, "list containers: %ld %s", status, b.data);
    json_object *list = json_tokener_parse(b.data);
    cr_assert(json_object_is_type(list, json_type_array), "%s", b.data);
    int n = (int)json_object_array_length(list);
    json_object_put(list);
    free(b.data);
    return n;
}

/* No intent left; every binding's container exists; for each key, as many
 * containers as bindings (0 or 1). */
static void check_consistent(struct docker_env *d, const char *const *keys,
                             size_t nkeys)
{
    cr_assert_eq(sess_count(&d->s, "SELECT count(*) FROM intents"), 0,
                 "an intent was left behind");
    struct cli_result r;
    const char *args[] = {"sessions", "--json", NULL};
    sess_run(&d->s, args, NULL, &r);
    cr_assert_eq(r.status, 0, "%s", r.err);
    json_object *list = json_tokener_parse(r.out);
    cr_assert_not_null(list, "%s", r.out);
    for (size_t k = 0; k < nkeys; k++) {
        int bound = 0;
        for (size_t i = 0; i < json_object_array_length(list); i++) {
            json_object *b = json_object_array_get_idx(list, i), *v, *id;
            json_object_object_get_ex(b, "session", &v);
            if (strcmp(json_object_get_string(v), keys[k]) != 0)
                continue;
            bound++;
            json_object_object_get_ex(b, "external_id", &id);
            char path[256];
            snprintf(path, sizeof path, "/containers/%s/json",
                     json_object_get_string(id));
            struct body body;
            long st = docker_get(d, path, &body);
            free(body.data);
            cr_assert_eq(st, 200, "binding without its container (%ld)", st);
        }
        cr_assert_eq(containers_of(d, keys[k]), bound,
                     "key %zu: %d containers for %d bindings", k,
                     containers_of(d, keys[k]), bound);
    }
    json_object_put(list);
    cli_result_free(&r);
}

static void read_all(int fd, char *buf, size_t len)
{
    size_t n = 0;
    long long deadline = cli_now_ms() + 60000;
    while (n < len - 1 && cli_now_ms() < deadline) {
        ssize_t k = read(fd, buf + n, len - 1 - n);
        if (k > 0) {
            n += (size_t)k;
            continue;
        }
        if (k == 0 || (errno != EAGAIN && errno != EINTR))
            break;
        struct pollfd pfd = {fd, POLLIN, 0};
        poll(&pfd, 1, 100);
    }
    buf[n] = '\0';
}

static void racing_workers(const char *driver)
{
    struct docker_env d;
    docker_env_init(&d, driver);
    char key[128];
    key_of(&d, "race", key, sizeof key);
    const char *args[] = {"exec", key, "--", "sh", "-c", "echo $$ >> shared-file",
                          NULL};
    struct cli_proc p[WORKERS];
    for (int i = 0; i < WORKERS; i++)
        cli_spawn(&d.s.cli, args, CLI_STDIN_NULL, &p[i]);
    for (int i = 0; i < WORKERS; i++) {
        char err[1024];
        read_all(p[i].err_fd, err, sizeof err);
        int st = cli_wait(&p[i], 60000);
        cr_assert_eq(st, 0, "worker %d: status %d: %s", i, st, err);
    }
    cr_assert_eq(containers_of(&d, key), 1, "%d containers for one key",
                 containers_of(&d, key));
    const char *keys[] = {key};
    check_consistent(&d, keys, 1);

    struct cli_result r;
    const char *rd[] = {"read", key, "shared-file", NULL};
    sess_run(&d.s, rd, NULL, &r);
    cr_assert_eq(r.status, 0, "%s", r.err);
    int lines = 0;
    for (const char *c = r.out; *c; c++)
        lines += *c == '\n';
    cr_assert_eq(lines, WORKERS, "%d of %d commands ran in the container: %s", lines,
                 WORKERS, r.out);
    cli_result_free(&r);

    const char *del[] = {"destroy", key, NULL};
    sess_run(&d.s, del, NULL, &r);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cli_result_free(&r);
    cr_assert_eq(containers_of(&d, key), 0);
    sess_env_fini(&d.s);
}

Test(sessions_docker, racing_workers_sqlite, .timeout = 300) { racing_workers("sqlite"); }
Test(sessions_docker, racing_workers_postgres, .timeout = 300) { racing_workers("postgres"); }

static void run_ok(struct docker_env *d, const char *const *args)
{
    struct cli_result r;
    sess_run(&d->s, args, NULL, &r);
    cr_assert_eq(r.status, 0, "sbx %s: %s", args[0], r.err);
    cli_result_free(&r);
}

static void run_killed(struct docker_env *d, const char *step, const char *const *args)
{
    struct cli_result r;
    sess_require_crash_hooks();
    cli_env_setenv(&d->s.cli, "SBX_TEST_CRASH_AT", step);
    sess_run(&d->s, args, NULL, &r);
    cli_env_setenv(&d->s.cli, "SBX_TEST_CRASH_AT", "");
    cr_assert_eq(r.status, CLI_KILLED_BY + SIGKILL, "%s: status %d: %s", step,
                 r.status, r.err);
    cli_result_free(&r);
}

static void crashes(const char *driver)
{
    static const char *const prov[] = {"before-intent", "after-intent",
                                       "after-create", "before-publish"};
    static const char *const del[] = {"during-destroy", "after-destroy"};
    struct docker_env d;
    docker_env_init(&d, driver);
    const char *const rec[] = {"reconcile", NULL};
    for (size_t i = 0; i < sizeof prov / sizeof prov[0]; i++) {
        char key[128];
        key_of(&d, prov[i], key, sizeof key);
        const char *const exec[] = {"exec", key, "--", "true", NULL};
        const char *const destroy[] = {"destroy", key, NULL};
        const char *keys[] = {key};
        run_killed(&d, prov[i], exec);
        run_ok(&d, rec);
        check_consistent(&d, keys, 1);
        cr_assert_eq(containers_of(&d, key), 0, "%s: orphaned container", prov[i]);
        run_ok(&d, exec);
        cr_assert_eq(containers_of(&d, key), 1);
        run_ok(&d, destroy);
        cr_assert_eq(containers_of(&d, key), 0);
    }
    for (size_t i = 0; i < sizeof del / sizeof del[0]; i++) {
        char key[128];
        key_of(&d, del[i], key, sizeof key);
        const char *const create[] = {"create", key, NULL};
        const char *const destroy[] = {"destroy", key, NULL};
        const char *keys[] = {key};
        run_ok(&d, create);
        cr_assert_eq(containers_of(&d, key), 1);
        run_killed(&d, del[i], destroy);
        run_ok(&d, rec);
        check_consistent(&d, keys, 1);
        cr_assert_eq(containers_of(&d, key), 0, "%s: container left", del[i]);
        cr_assert_eq(sess_count(&d.s, "SELECT count(*) FROM sessions"), 0);
    }
    sess_env_fini(&d.s);
}

Test(sessions_docker, crashes_sqlite, .timeout = 300) { crashes("sqlite"); }
Test(sessions_docker, crashes_postgres, .timeout = 300) { crashes("postgres"); }

/* ------------------------------------------------------------------------ */
/* Packages on docker: an image built offline from the test image plus      */
/* stand-in managers that record their argument vectors.                    */
/* ------------------------------------------------------------------------ */

/* The stand-in: "[name][arg]..." per call into /workspace/pkg.log; the
 * install of a package named "fail-me" fails with a message. */
static const char stand_in_script[] =
    "#!/bin/sh\n"
    "printf '[%s]' \"${0##*/}\" \"$@\" >> /workspace/pkg.log\n"
    "echo >> /workspace/pkg.log\n"
    "for a in \"$@\"; do\n"
    "  [ \"$a\" = fail-me ] && { echo 'E: Unable to locate package fail-me' >&2; exit 100; }\n"
    "done\n"
    "exit 0\n";

static void tar_add(struct archive *a, const char *name, const char *data, int mode)
{
    struct archive_entry *e = archive_entry_new();
    archive_entry_set_pathname(e, name);
    archive_entry_set_size(e, (la_int64_t)strlen(data));
    archive_entry_set_filetype(e, AE_IFREG);
    archive_entry_set_perm(e, (mode_t)mode);
    cr_assert_eq(archive_write_header(a, e), ARCHIVE_OK, "%s", archive_error_string(a));
    cr_assert_eq(archive_write_data(a, data, strlen(data)), (la_ssize_t)strlen(data));
    archive_entry_free(e);
}

/* POST /build with a context holding a Dockerfile and the stand-ins for
 * apt-get and pip (gem is left out: a missing manager). Returns the tag. */
static void build_pkg_image(struct docker_env *d, const char *base, char *tag,
                            size_t len)
{
    char dockerfile[512];
    snprintf(dockerfile, sizeof dockerfile,
             "FROM %s\nCOPY apt-get pip /bin/\n", base);
    size_t cap = 64 * 1024, used = 0;
    char *buf = malloc(cap);
    cr_assert_not_null(buf);
    struct archive *a = archive_write_new();
    archive_write_set_format_pax_restricted(a);
    cr_assert_eq(archive_write_open_memory(a, buf, cap, &used), ARCHIVE_OK);
    tar_add(a, "Dockerfile", dockerfile, 0644);
    tar_add(a, "apt-get", stand_in_script, 0755);
    tar_add(a, "pip", stand_in_script, 0755);
    cr_assert_eq(archive_write_close(a), ARCHIVE_OK);
    archive_write_free(a);

    snprintf(tag, len, "sbx-test-pkg:%s", d->prefix + strlen("sbx-cli-test-"));
    for (char *p = strchr(tag, ':') + 1; *p; p++)
        *p = (char)((*p >= 'A' && *p <= 'Z') ? *p - 'A' + 'a' : *p);
    CURL *c = curl_easy_init();
    char *etag = curl_easy_escape(c, tag, 0);
    char url[512];
    snprintf(url, sizeof url, "http://docker/v1.41/build?t=%s&q=1&rm=1", etag);
    curl_free(etag);
    struct body out = {NULL, 0};
    struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/x-tar");
    curl_easy_setopt(c, CURLOPT_UNIX_SOCKET_PATH, d->socket);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, buf);
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, (long)used);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &out);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 120L);
    CURLcode rc = curl_easy_perform(c);
    long status = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
    free(buf);
    cr_assert_eq(rc, CURLE_OK, "build: %s", curl_easy_strerror(rc));
    cr_assert_eq(status, 200, "build: %ld %s", status, out.data ? out.data : "");
    cr_assert(out.data && !strstr(out.data, "\"error\""), "build failed: %s", out.data);
    free(out.data);
}

static void remove_image(struct docker_env *d, const char *tag)
{
    CURL *c = curl_easy_init();
    char *etag = curl_easy_escape(c, tag, 0);
    char url[512];
    snprintf(url, sizeof url, "http://docker/v1.41/images/%s?force=1", etag);
    curl_free(etag);
    struct body out = {NULL, 0};
    curl_easy_setopt(c, CURLOPT_UNIX_SOCKET_PATH, d->socket);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, "DELETE");
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &out);
    curl_easy_perform(c);
    curl_easy_cleanup(c);
    free(out.data);
}

/* Whether the docker provider declares the packages capability, from its
 * descriptor (what admission reads). */
static bool docker_has_packages(struct docker_env *d)
{
    (void)d;
    char path[1024];
    snprintf(path, sizeof path, "%s/docker.so", SBX_TEST_PROVIDER_DIR);
    void *so = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    cr_assert_not_null(so, "dlopen %s: %s", path, dlerror());
    sbx_provider_describe_fn fn = (sbx_provider_describe_fn)dlsym(so, SBX_PROVIDER_ENTRY);
    cr_assert_not_null(fn);
    return (fn()->caps & SBX_CAP_PACKAGES) != 0;
}

Test(sessions_docker, packages_with_stand_in_managers, .timeout = 300)
{
    struct docker_env d;
    docker_env_init(&d, "sqlite");
    if (!docker_has_packages(&d)) {
        /* Admission must refuse, from the descriptor, before any container
         * exists. */
        char key[128];
        key_of(&d, "pkg-refused", key, sizeof key);
        struct cli_result r;
        const char *args[] = {"create", key, "--package", "pip:requests", NULL};
        sess_run(&d.s, args, NULL, &r);
        cr_assert_eq(r.status, 125);
        cr_assert(strstr(r.err, "lacks capability packages"), "%s", r.err);
        cli_result_free(&r);
        cr_assert_eq(containers_of(&d, key), 0);
        sess_env_fini(&d.s);
        cr_skip_test("the docker provider does not declare the packages "
                     "capability: only its refusal was tested");
    }
    const char *image = getenv("SBX_TEST_DOCKER_IMAGE");
    char tag[128];
    build_pkg_image(&d, image && *image ? image : "sbx-test:busybox", tag, sizeof tag);
    char yaml[2048];
    snprintf(yaml, sizeof yaml,
             "default_provider: docker\n"
             "store: { driver: sqlite, path: %s }\n"
             "providers:\n"
             "  docker:\n"
             "    host: unix://%s\n"
             "    image: %s\n"
             "    resource_dir: @ROOT@-res\n", d.s.db.target, d.socket, tag);
    cli_env_write_config(&d.s.cli, yaml);

    char ok[128], bad[128], missing[128];
    key_of(&d, "pkg-ok", ok, sizeof ok);
    key_of(&d, "pkg-bad", bad, sizeof bad);
    key_of(&d, "pkg-missing", missing, sizeof missing);
    struct cli_result r;
    const char *create_ok[] = {"create", ok, "--package", "pip:requests==2.31.0",
                               "--package", "apt:curl", "--package",
                               "pip:x;touch${IFS}pwned", NULL};
    sess_run(&d.s, create_ok, NULL, &r);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cli_result_free(&r);
    const char *log_args[] = {"read", ok, "pkg.log", NULL};
    sess_run(&d.s, log_args, NULL, &r);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_assert_str_eq(r.out, "[pip][--version]\n"
                            "[pip][install][--no-input][requests==2.31.0]"
                            "[x;touch${IFS}pwned]\n"
                            "[apt-get][--version]\n"
                            "[apt-get][update]\n"
                            "[apt-get][install][-y][--no-install-recommends][curl]\n");
    cli_result_free(&r);

    /* A failing install and a missing manager: not published, the intent
     * and its container left for the reconciler. */
    const char *create_bad[] = {"create", bad, "--package", "apt:fail-me", NULL};
    sess_run(&d.s, create_bad, NULL, &r);
    cr_assert_eq(r.status, 125);
    cr_assert(strstr(r.err, "Unable to locate package fail-me"), "%s", r.err);
    cli_result_free(&r);
    const char *create_missing[] = {"create", missing, "--package", "gem:rails", NULL};
    sess_run(&d.s, create_missing, NULL, &r);
    cr_assert_eq(r.status, 125);
    cr_assert(strstr(r.err, "package manager 'gem' is not installed"), "%s", r.err);
    cli_result_free(&r);
    cr_assert_eq(sess_count(&d.s, "SELECT count(*) FROM intents"), 2);
    cr_assert_eq(containers_of(&d, bad), 1);
    cr_assert_eq(containers_of(&d, missing), 1);
    const char *exec_bad[] = {"read", bad, "pkg.log", NULL};
    sess_run(&d.s, exec_bad, NULL, &r);
    cr_assert_eq(r.status, 125, "a failed sandbox was reachable");
    cli_result_free(&r);

    /* A crash during package setup. */
    char crashy[128];
    key_of(&d, "pkg-crash", crashy, sizeof crashy);
    const char *create_crash[] = {"create", crashy, "--package", "pip:a", NULL};
    run_killed(&d, "during-packages", create_crash);

    const char *const rec[] = {"reconcile", NULL};
    run_ok(&d, rec);
    const char *keys[] = {ok, bad, missing, crashy};
    check_consistent(&d, keys, 4);
    cr_assert_eq(containers_of(&d, bad) + containers_of(&d, missing) +
                     containers_of(&d, crashy), 0);
    const char *destroy_ok[] = {"destroy", ok, NULL};
    run_ok(&d, destroy_ok);
    cr_assert_eq(containers_of(&d, ok), 0);
    remove_image(&d, tag);
    sess_env_fini(&d.s);
}
