/*
 * state.c - the state directory of a `local` sandbox and the ports it
 * declared (SBX_CAP_PORTS).
 *
 * <root>/<hash>.state (mode 0700) sits beside the workspace, outside it:
 * the file API, confined to the workspace, cannot reach it. It holds
 * `ports` (the ports declared at create, one decimal number a line,
 * written whole to a temporary and renamed) and the process supervisor's
 * files (supervisor.c). Every file in it is opened beneath its descriptor
 * without following a symlink, and read with a bound.
 *
 * Ports: local commands are host processes and bind host ports directly,
 * so a declared port resolves to itself on loopback: 127.0.0.1:PORT,
 * http://127.0.0.1:PORT. Nothing stops a command from binding another
 * interface (local is no boundary); docs/providers/local.md says so.
 */
#include "local.h"

#include "confine.h"
#include "hex.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define STATE_DIR_MODE 0700
/* "65535\n" per port */
#define PORTS_FILE_MAX (LOCAL_MAX_PORTS * 6 + 1)

int local_state_open(int rootfd, const char *hash, int create)
{
    char name[SBX_KEY_HASH_LEN + sizeof LOCAL_STATE_SUFFIX];
    snprintf(name, sizeof name, "%s%s", hash, LOCAL_STATE_SUFFIX);
    if (create && mkdirat(rootfd, name, STATE_DIR_MODE) != 0 && errno != EEXIST)
        return -errno;
    int fd = openat(rootfd, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    return fd >= 0 ? fd : -errno;
}

int local_state_open_sb(sbx_sandbox *sb, int create)
{
    int rootfd = open(sb->st->root, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (rootfd < 0)
        return -errno;
    int fd = local_state_open(rootfd, sb->hash, create);
    close(rootfd);
    return fd;
}

/* Keep each port once, in the order given. */
static void add_port(sbx_sandbox *sb, uint16_t port)
{
    for (size_t i = 0; i < sb->nports; i++)
        if (sb->ports[i] == port)
            return;
    sb->ports[sb->nports++] = port;
}

int local_ports_record(sbx_sandbox *sb, sbx_call *call,
                       const struct sbx_create_args *args)
{
    const struct sbx_host *host = sb->st->host;
    if (args->size < SBX_CREATE_ARGS_SIZE_PORTS_1_2 || args->ports == NULL ||
        args->ports[0] == 0)
        return local_ports_load(sb, call);
    size_t n = 0;
    while (args->ports[n] != 0)
        if (++n > LOCAL_MAX_PORTS)
            return host->set_error(host, call, SBX_E_INVALID,
                                   "local: create: more than %d ports declared",
                                   LOCAL_MAX_PORTS);
    sb->nports = 0;
    for (size_t i = 0; i < n; i++)
        add_port(sb, args->ports[i]);

    char text[PORTS_FILE_MAX];
    size_t len = 0;
    for (size_t i = 0; i < sb->nports; i++)
        len += (size_t)snprintf(text + len, sizeof text - len, "%u\n", sb->ports[i]);

    int dir = local_state_open_sb(sb, 1);
    if (dir < 0)
        return host->set_error(host, call, SBX_E_IO,
                               "local: create: cannot open the state directory of '%s': %s",
                               sb->path, strerror(-dir));
    char tmp[32] = "ports.";
    sbxs_random_hex(tmp + 6, 8);
    int rc = SBX_OK;
    int fd = openat(dir, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0 || write(fd, text, len) != (ssize_t)len || fsync(fd) != 0 ||
        renameat(dir, tmp, dir, "ports") != 0)
        rc = host->set_error(host, call, SBX_E_IO,
                             "local: create: cannot record the ports of '%s': %s", sb->path,
                             strerror(errno));
    if (fd >= 0)
        close(fd);
    if (rc != SBX_OK)
        (void)unlinkat(dir, tmp, 0);
    close(dir);
    return rc;
}

int local_ports_load(sbx_sandbox *sb, sbx_call *call)
{
    const struct sbx_host *host = sb->st->host;
    sb->nports = 0;
    int dir = local_state_open_sb(sb, 0);
    if (dir == -ENOENT)
        return SBX_OK; /* no state: nothing declared */
    if (dir < 0)
        return host->set_error(host, call, SBX_E_IO,
                               "local: cannot open the state directory of '%s': %s",
                               sb->path, strerror(-dir));
    int fd = sbxp_confine_open_strict(dir, "ports", O_RDONLY | O_NOFOLLOW | O_NONBLOCK, 0);
    close(dir);
    if (fd == -ENOENT)
        return SBX_OK;
    char text[PORTS_FILE_MAX + 1];
    struct stat st;
    ssize_t n = -1;
    if (fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode))
        n = read(fd, text, sizeof text - 1);
    if (fd >= 0)
        close(fd);
    if (n < 0 || n > PORTS_FILE_MAX)
        return host->set_error(host, call, SBX_E_IO,
                               "local: the ports record of '%s' is unreadable", sb->path);
    text[n] = '\0';
    for (char *p = text; *p != '\0' && sb->nports < LOCAL_MAX_PORTS;) {
        char *end;
        unsigned long v = strtoul(p, &end, 10);
        if (end == p || *end != '\n' || v == 0 || v > 65535)
            return host->set_error(host, call, SBX_E_IO,
                                   "local: the ports record of '%s' is malformed", sb->path);
        add_port(sb, (uint16_t)v);
        p = end + 1;
    }
    return SBX_OK;
}

int local_port_resolve(sbx_sandbox *sb, sbx_call *call, uint16_t port,
                       struct sbx_port_endpoint *out)
{
    const struct sbx_host *host = sb->st->host;
    if (out == NULL || out->size < sizeof *out)
        return host->set_error(host, call, SBX_E_INVALID,
                               "local: port_resolve: no struct sbx_port_endpoint of this ABI");
    for (size_t i = 0; i < sb->nports; i++) {
        if (sb->ports[i] != port)
            continue;
        uint32_t size = out->size;
        memset(out, 0, sizeof *out);
        out->size = size;
        out->port = port;
        out->tls = 0;
        snprintf(out->host, sizeof out->host, "127.0.0.1");
        snprintf(out->url, sizeof out->url, "http://127.0.0.1:%u", port);
        return SBX_OK;
    }
    return host->set_error(host, call, SBX_E_NOT_FOUND,
                           "local: port %u was not declared when the sandbox was created",
                           port);
}
