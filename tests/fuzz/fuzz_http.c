/*
 * fuzz_http.c - HTTP responses and their JSON bodies, as the providers'
 * shared client (plugins/common: libcurl, incremental json-c parsing and
 * the error mapping) receives them from a broken or hostile service.
 *
 * A server thread on a private unix socket answers each request with the
 * input bytes verbatim and closes the connection. Byte 0 picks the call:
 * one JSON document (sbxp_http_json) or a stream of values
 * (sbxp_http_json_each). Every answer must end in SBX_OK or an error with a
 * message and a known status; nothing may hang, crash or leak.
 */
#include "http_json.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int listener = -1;
static char endpoint[160];
static sbxp_http *client;

struct answer {
    const uint8_t *data;
    size_t size;
};

/* Serve one connection: read the request head, send the answer, close. */
static void *serve(void *arg)
{
    struct answer *a = arg;
    int fd = accept(listener, NULL, NULL);
    if (fd < 0)
        return NULL;
    char buf[4096];
    size_t have = 0;
    while (have < sizeof buf - 1) {
        ssize_t n = read(fd, buf + have, sizeof buf - 1 - have);
        if (n <= 0)
            break;
        have += (size_t)n;
        buf[have] = '\0';
        if (strstr(buf, "\r\n\r\n"))
            break;
    }
    size_t off = 0;
    while (off < a->size) {
        ssize_t n = send(fd, a->data + off, a->size - off, MSG_NOSIGNAL);
        if (n <= 0)
            break;
        off += (size_t)n;
    }
    shutdown(fd, SHUT_WR);
    close(fd);
    return NULL;
}

static void setup(void)
{
    char dir[] = "/tmp/sbx-fuzz-http-XXXXXX";
    if (!mkdtemp(dir))
        abort();
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s/s", dir);
    listener = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (listener < 0 || bind(listener, (struct sockaddr *)&sa, sizeof sa) != 0 ||
        listen(listener, 4) != 0)
        abort();
    snprintf(endpoint, sizeof endpoint, "unix://%s", sa.sun_path);
    sbxp_http_error err;
    if (sbxp_http_new(endpoint, &client, &err) != SBX_OK)
        abort();
}

static int count_values(void *ctx, json_object *v)
{
    (void)v;
    return ++*(int *)ctx > 10000 ? SBX_E_PROTOCOL : 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    if (listener < 0)
        setup();
    struct answer a = {data + 1, size - 1};
    pthread_t t;
    if (pthread_create(&t, NULL, serve, &a) != 0)
        return 0;
    struct sbxp_http_request req;
    memset(&req, 0, sizeof req);
    req.method = "GET";
    req.path = "/v1.41/containers/json";
    req.timeout_ms = 2000;
    req.stall_timeout_ms = 1000;
    sbxp_http_error err;
    memset(&err, 0, sizeof err);
    int rc;
    long status = 0;
    if (data[0] & 1) {
        int n = 0;
        rc = sbxp_http_json_each(client, &req, count_values, &n, &err);
    } else {
        json_object *doc = NULL;
        rc = sbxp_http_json(client, &req, &doc, &status, &err);
        json_object_put(doc);
    }
    pthread_join(t, NULL);
    if (rc != SBX_OK && (!err.message[0] || rc < 0 || rc >= 64))
        __builtin_trap(); /* every failure says what and has a status */
    return 0;
}
