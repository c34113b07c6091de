/*
 * quiet_port.h - a loopback port for a server a test starts inside a
 * sandbox of a fake service (which runs it on this machine).
 *
 * The port is below the kernel's ephemeral range, where the fakes, the
 * daemons and every outgoing connection of the tests beside take theirs
 * (with a pid-derived port in 20000-39999, in the ephemeral range, the
 * sandbox's server was not listening after 30 s in two loaded runs: a
 * port already taken makes it exit at once), and it is free
 * when chosen: the first port from 10000 + pid % span that binds on
 * 127.0.0.1 without SO_REUSEADDR. Nothing else binds there on purpose, so
 * it stays free until the server takes it.
 */
#ifndef SBX_TESTS_QUIET_PORT_H
#define SBX_TESTS_QUIET_PORT_H

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <sys/socket.h>
#include <unistd.h>

static inline int quiet_port_free(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return 0;
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int ok = bind(fd, (struct sockaddr *)&sa, sizeof sa) == 0;
    close(fd);
    return ok;
}

/* A free loopback port in [10000, the ephemeral range's start); 0 when
 * none is. */
static inline int quiet_port(void)
{
    int low = 32768;
    FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");
    if (f) {
        if (fscanf(f, "%d", &low) != 1)
            low = 32768;
        fclose(f);
    }
    int span = low - 10000;
    if (span <= 0)
        return 0;
    for (int i = 0; i < span; i++) {
        int port = 10000 + (int)((getpid() + i) % span);
        if (quiet_port_free(port))
            return port;
    }
    return 0;
}

#endif
