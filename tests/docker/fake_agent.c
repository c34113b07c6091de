/*
 * fake_agent.c - stands in for sbx-agent as a container's init (the
 * provider's agent_path), speaking protocol version 99: it listens where
 * the agent would (`serve --socket PATH ...`, the rest of the command line
 * ignored) and answers every connection with a preamble of version 99.
 * Being the container's init, it passes the provider's peer check, so the
 * version check itself is what refuses it (test_agent.c). Static, like
 * the agent, so that it runs in the busybox test image.
 */
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    const char *path = NULL;
    for (int i = 1; i + 1 < argc; i++)
        if (strcmp(argv[i], "--socket") == 0)
            path = argv[i + 1];
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (!path || strlen(path) >= sizeof sa.sun_path)
        return 2;
    strcpy(sa.sun_path, path);
    signal(SIGPIPE, SIG_IGN);
    unlink(path);
    int lfd = socket(AF_UNIX, SOCK_STREAM, 0);
    if (lfd < 0 || bind(lfd, (struct sockaddr *)&sa, sizeof sa) != 0 || listen(lfd, 16) != 0) {
        perror("fake agent");
        return 1;
    }
    for (;;) {
        int c = accept(lfd, NULL, NULL);
        if (c < 0)
            continue;
        const unsigned char pre[8] = {'S', 'B', 'X', 'A', 0, 0, 0, 99};
        if (write(c, pre, sizeof pre) < 0)
            perror("fake agent: write");
        /* what the client sends is read (and dropped) until it hangs up,
         * so that it always gets to read the preamble */
        struct pollfd p = {.fd = c, .events = POLLIN};
        char buf[4096];
        while (poll(&p, 1, 5000) > 0 && read(c, buf, sizeof buf) > 0)
            ;
        close(c);
    }
}
