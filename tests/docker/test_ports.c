/*
 * test_ports.c - SBX_CAP_PORTS on docker against a real daemon: a port
 * declared at create is published on 127.0.0.1 only, a busybox httpd in
 * the container answers through the endpoint port_resolve gives, no
 * listener for it exists on any other host address, an undeclared port is
 * SBX_E_NOT_FOUND, attach knows the ports from the container's label, and
 * bad declarations fail with a clear message.
 *
 * The daemon the tests start has no default bridge (--bridge=none), so
 * the suite makes a bridge network of its own. "Not reachable on another
 * address" is checked on this host's socket table (every listener of the
 * published port is bound to 127.0.0.1) rather than by sending traffic to
 * a non-loopback address; a wildcard publish_address shows the check
 * fails when the binding is wider.
 */
#include "harness.h"

#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char net[64];

static void setup(void)
{
    dh_require_daemon();
    snprintf(net, sizeof net, "sbx-ports-%d", (int)getpid());
    char body[128];
    snprintf(body, sizeof body, "{\"Name\":\"%s\",\"Driver\":\"bridge\"}", net);
    struct dh_buf out = {0};
    long st = dh_api(getenv("SBX_TEST_DOCKER_HOST"), "POST", "/v1.41/networks/create", body,
                     &out);
    cr_assert(st == 201 || st == 409, "creating network %s: %ld %s", net, st,
              out.data ? out.data : "");
    dh_buf_free(&out);
}

static void teardown(void)
{
    char path[128];
    snprintf(path, sizeof path, "/v1.41/networks/%s", net);
    if (getenv("SBX_TEST_DOCKER_HOST") && *getenv("SBX_TEST_DOCKER_HOST"))
        dh_api(getenv("SBX_TEST_DOCKER_HOST"), "DELETE", path, NULL, NULL);
}

TestSuite(docker_ports, .init = setup, .fini = teardown, .timeout = 180);

static int create_ports(struct dh *h, const char *key, const uint16_t *ports,
                        char ref[SBX_REF_MAX], sbx_sandbox **sb, struct sbx_call *c)
{
    char hash[SBX_KEY_HASH_LEN + 1];
    dh_hash(key, hash);
    struct sbx_create_args a = {.size = sizeof a, .session_key = key, .key_hash = hash,
                                .spec_hash = "spec-ports", .ports = ports};
    *sb = NULL;
    return h->ops->create(h->state, c, &a, ref, sb);
}

/* Start `httpd -f -p PORT -h /workspace/www` detached through the Engine
 * API (an exec through the agent kills what it started when it returns). */
static void start_httpd(const char *id, unsigned port)
{
    const char *host = getenv("SBX_TEST_DOCKER_HOST");
    char path[256], body[256];
    snprintf(path, sizeof path, "/v1.41/containers/%.64s/exec", id);
    snprintf(body, sizeof body,
             "{\"Cmd\":[\"httpd\",\"-f\",\"-p\",\"%u\",\"-h\",\"/workspace/www\"]}", port);
    struct dh_buf out = {0};
    cr_assert_eq(dh_api(host, "POST", path, body, &out), 201, "%s", out.data);
    const char *p = strstr(out.data, "\"Id\":\"");
    cr_assert(p);
    char exec_id[65];
    snprintf(exec_id, sizeof exec_id, "%.64s", p + 6);
    dh_buf_free(&out);
    snprintf(path, sizeof path, "/v1.41/exec/%s/start", exec_id);
    cr_assert_eq(dh_api(host, "POST", path, "{\"Detach\":true}", NULL), 200);
}

/* The local addresses of this host's TCP listeners on port, from
 * /proc/net/tcp and tcp6 ("0100007F" is 127.0.0.1), joined by spaces. */
static void listeners(unsigned port, char *out, size_t cap)
{
    out[0] = '\0';
    const char *files[] = {"/proc/net/tcp", "/proc/net/tcp6"};
    for (int f = 0; f < 2; f++) {
        FILE *fp = fopen(files[f], "r");
        if (!fp)
            continue;
        char line[512];
        while (fgets(line, sizeof line, fp)) {
            char local[64];
            unsigned lport, state;
            if (sscanf(line, " %*d: %63[0-9A-F]:%X %*[0-9A-F]:%*X %X", local, &lport,
                       &state) == 3 &&
                lport == port && state == 0x0A /* LISTEN */) {
                size_t l = strlen(out);
                snprintf(out + l, cap - l, "%s%s", l ? " " : "", local);
            }
        }
        fclose(fp);
    }
}

/* Every listener of port is bound to 127.0.0.1 (and there is one). */
static int loopback_only(unsigned port, char *seen, size_t cap)
{
    listeners(port, seen, cap);
    if (!seen[0])
        return 0;
    for (const char *p = seen; *p;) {
        size_t n = strcspn(p, " ");
        if (n != 8 || strncmp(p, "0100007F", 8) != 0)
            return 0;
        p += n;
        p += *p == ' ';
    }
    return 1;
}

static int resolve(struct dh *h, sbx_sandbox *sb, unsigned port,
                   struct sbx_port_endpoint *ep, struct sbx_call *c)
{
    memset(ep, 0, sizeof *ep);
    ep->size = sizeof *ep;
    return h->ops->port_resolve(sb, c, (uint16_t)port, ep);
}

/* GET /index.html at the endpoint until httpd answers (it starts
 * asynchronously); the HTTP status, the body into out. */
static long get_index(const struct sbx_port_endpoint *ep, struct dh_buf *out)
{
    char uri[300];
    snprintf(uri, sizeof uri, "tcp://%s:%u", ep->host, ep->port);
    long st = -1;
    for (int i = 0; i < 50 && st != 200; i++) {
        dh_buf_free(out);
        st = dh_api(uri, "GET", "/index.html", NULL, out);
        if (st != 200)
            usleep(100 * 1000);
    }
    return st;
}

Test(docker_ports, a_declared_port_is_reachable_on_loopback_only)
{
    struct dh h;
    const char *extra[] = {"network", net, NULL};
    dh_open(&h, NULL, extra);
    char key[64], hash[65], ref[SBX_REF_MAX];
    dh_new_key(key, hash);
    struct sbx_call c;
    dh_call_init(&c);
    const uint16_t ports[] = {8080, 8081, 0};
    sbx_sandbox *sb;
    cr_assert_eq(create_ports(&h, key, ports, ref, &sb, &c), SBX_OK, "%s", c.message);
    free(dh_sh(&h, sb, "mkdir www; echo hello from the sandbox > www/index.html"));
    start_httpd(ref, 8080);

    struct sbx_port_endpoint ep;
    cr_assert_eq(resolve(&h, sb, 8080, &ep, &c), SBX_OK, "%s", c.message);
    cr_expect_str_eq(ep.host, "127.0.0.1");
    cr_expect_neq(ep.port, 0);
    cr_expect_eq(ep.tls, 0);
    char want[64];
    snprintf(want, sizeof want, "http://127.0.0.1:%u", ep.port);
    cr_expect_str_eq(ep.url, want);
    cr_expect_str_eq(ep.header, "");
    struct dh_buf body = {0};
    cr_expect_eq(get_index(&ep, &body), 200, "%s", body.data ? body.data : "");
    cr_expect(body.data && strstr(body.data, "hello from the sandbox"), "%s",
              body.data ? body.data : "");
    dh_buf_free(&body);
    char seen[512];
    cr_expect(loopback_only(ep.port, seen, sizeof seen),
              "listeners of host port %u: [%s] (want 127.0.0.1 only)", ep.port, seen);

    /* the second declared port is published too (nobody listens inside) */
    struct sbx_port_endpoint ep2;
    cr_assert_eq(resolve(&h, sb, 8081, &ep2, &c), SBX_OK, "%s", c.message);
    cr_expect_neq(ep2.port, ep.port);
    cr_expect(loopback_only(ep2.port, seen, sizeof seen), "[%s]", seen);

    /* undeclared ports */
    uint16_t published = ep.port;
    cr_expect_eq(resolve(&h, sb, 9090, &ep, &c), SBX_E_NOT_FOUND);
    cr_expect(strstr(c.message, "9090") && strstr(c.message, "not declared"), "%s",
              c.message);
    cr_expect_eq(resolve(&h, sb, 80, &ep, &c), SBX_E_NOT_FOUND);

    /* a second instance attaching knows the ports from the label */
    struct dh h2;
    dh_open(&h2, NULL, extra);
    sbx_sandbox *sb2;
    char msg[512];
    cr_assert_eq(dh_attach(&h2, key, ref, &sb2, msg, sizeof msg), SBX_OK, "%s", msg);
    struct sbx_port_endpoint ep3;
    cr_assert_eq(resolve(&h2, sb2, 8080, &ep3, &c), SBX_OK, "%s", c.message);
    cr_expect_eq(ep3.port, published);
    cr_expect_eq(resolve(&h2, sb2, 9090, &ep3, &c), SBX_E_NOT_FOUND);
    h2.ops->release(sb2);
    dh_close(&h2);

    /* the same key asking for other ports is refused; the same ports adopt */
    sbx_sandbox *again;
    char ref2[SBX_REF_MAX];
    const uint16_t other[] = {8080, 0};
    cr_expect_eq(create_ports(&h, key, other, ref2, &again, &c), SBX_E_EXISTS);
    cr_expect(strstr(c.message, "[8080,8081]") && strstr(c.message, "[8080]"), "%s",
              c.message);
    const uint16_t same[] = {8081, 8080, 0};
    cr_assert_eq(create_ports(&h, key, same, ref2, &again, &c), SBX_OK, "%s", c.message);
    cr_expect_str_eq(ref2, ref);
    h.ops->release(again);
    /* a create declaring none (the reconciler finding the key's container)
     * adopts it with the ports it has */
    cr_assert_eq(create_ports(&h, key, NULL, ref2, &again, &c), SBX_OK, "%s", c.message);
    cr_expect_str_eq(ref2, ref);
    cr_expect_eq(resolve(&h, again, 8081, &ep3, &c), SBX_OK, "%s", c.message);
    h.ops->release(again);

    h.ops->release(sb);
    dh_destroy(&h, key, ref);
    dh_call_free(&c);
    dh_close(&h);
}

Test(docker_ports, a_wildcard_publish_address_is_caught_by_the_check)
{
    /* publish_address is the operator's risk to take: with 0.0.0.0 the
     * port listens on every address, and loopback_only says so */
    struct dh h;
    const char *extra[] = {"network", net, "publish_address", "0.0.0.0", NULL};
    dh_open(&h, NULL, extra);
    char key[64], hash[65], ref[SBX_REF_MAX];
    dh_new_key(key, hash);
    struct sbx_call c;
    dh_call_init(&c);
    const uint16_t ports[] = {8080, 0};
    sbx_sandbox *sb;
    cr_assert_eq(create_ports(&h, key, ports, ref, &sb, &c), SBX_OK, "%s", c.message);
    struct sbx_port_endpoint ep;
    cr_assert_eq(resolve(&h, sb, 8080, &ep, &c), SBX_OK, "%s", c.message);
    cr_expect_str_eq(ep.host, "127.0.0.1", "a wildcard is reached through loopback here");
    char seen[512];
    cr_expect_not(loopback_only(ep.port, seen, sizeof seen), "[%s]", seen);
    cr_expect(strstr(seen, "00000000"), "[%s]", seen);
    h.ops->release(sb);
    dh_destroy(&h, key, ref);
    dh_call_free(&c);
    dh_close(&h);
}

Test(docker_ports, bad_declarations_are_refused_clearly)
{
    struct sbx_call c;
    dh_call_init(&c);
    char key[64], hash[65], ref[SBX_REF_MAX];
    sbx_sandbox *sb;
    /* the default network is none: nothing can be published */
    struct dh h;
    dh_open(&h, NULL, NULL);
    dh_new_key(key, hash);
    const uint16_t ports[] = {8080, 0};
    cr_expect_eq(create_ports(&h, key, ports, ref, &sb, &c), SBX_E_UNSUPPORTED);
    cr_expect(strstr(c.message, "providers.docker.network") && strstr(c.message, "none"),
              "%s", c.message);
    /* no ports with network none is fine, and resolve is NOT_FOUND */
    cr_assert_eq(create_ports(&h, key, NULL, ref, &sb, &c), SBX_OK, "%s", c.message);
    struct sbx_port_endpoint ep;
    cr_expect_eq(resolve(&h, sb, 8080, &ep, &c), SBX_E_NOT_FOUND);
    h.ops->release(sb);
    dh_destroy(&h, key, ref);
    dh_close(&h);

    const char *extra[] = {"network", net, NULL};
    dh_open(&h, NULL, extra);
    dh_new_key(key, hash);
    const uint16_t dup[] = {8080, 9000, 8080, 0};
    cr_expect_eq(create_ports(&h, key, dup, ref, &sb, &c), SBX_E_INVALID);
    cr_expect(strstr(c.message, "8080") && strstr(c.message, "twice"), "%s", c.message);
    uint16_t many[66];
    for (int i = 0; i < 65; i++)
        many[i] = (uint16_t)(10000 + i);
    many[65] = 0;
    cr_expect_eq(create_ports(&h, key, many, ref, &sb, &c), SBX_E_INVALID);
    cr_expect(strstr(c.message, "64"), "%s", c.message);
    dh_close(&h);

    /* a publish_address that is not an address */
    const char *bad[] = {"publish_address", "localhost:80", NULL};
    char msg[512];
    cr_expect_eq(dh_try_open(&h, NULL, bad, msg, sizeof msg), SBX_E_CONFIG);
    cr_expect(strstr(msg, "providers.docker.publish_address"), "%s", msg);
    dh_call_free(&c);
}
