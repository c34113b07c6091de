/*
 * user.c - the user commands and file operations run as, resolved the way
 * the Engine API resolves an exec's User: in the container's own
 * /etc/passwd and /etc/group (no NSS: the agent is static and reads the
 * files directly). A numeric uid without a passwd entry runs with gid 0,
 * as Docker does.
 */
#include "agent.h"

#include <errno.h>
#include <grp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

static int all_digits(const char *s)
{
    if (!*s || strlen(s) > 10)
        return 0;
    for (const char *p = s; *p; p++)
        if (*p < '0' || *p > '9')
            return 0;
    /* a valid id: (uid_t)-1 means "none" to the kernel */
    return strtoull(s, NULL, 10) < 4294967295ull;
}

/* Split a colon-separated line into at most n fields (in place). */
static size_t split(char *line, char **f, size_t n)
{
    size_t k = 0;
    line[strcspn(line, "\n")] = '\0';
    while (k < n) {
        f[k++] = line;
        char *c = strchr(line, ':');
        if (!c)
            break;
        *c = '\0';
        line = c + 1;
    }
    return k;
}

/* The passwd entry whose name (or, when numeric, uid) is want. */
static int find_passwd(const char *want, struct agent_user *u)
{
    FILE *f = fopen("/etc/passwd", "re");
    if (!f)
        return 0;
    char line[1024];
    int found = 0;
    while (!found && fgets(line, sizeof line, f)) {
        char *fld[7];
        if (split(line, fld, 7) < 7)
            continue;
        int match = all_digits(want) ? strcmp(fld[2], want) == 0 : strcmp(fld[0], want) == 0;
        if (!match || !all_digits(fld[2]) || !all_digits(fld[3]))
            continue;
        u->uid = (uid_t)strtoul(fld[2], NULL, 10);
        u->gid = (gid_t)strtoul(fld[3], NULL, 10);
        snprintf(u->name, sizeof u->name, "%s", fld[0]);
        snprintf(u->home, sizeof u->home, "%s", fld[5][0] ? fld[5] : "/");
        found = 1;
    }
    fclose(f);
    return found;
}

/* Scan /etc/group: the gid of the group named want (when *gid_out is
 * asked for), and the groups listing user as a member. */
static int scan_groups(const char *want, gid_t *gid_out, struct agent_user *u)
{
    FILE *f = fopen("/etc/group", "re");
    if (!f)
        return 0;
    char line[4096];
    int found = 0;
    while (fgets(line, sizeof line, f)) {
        char *fld[4];
        if (split(line, fld, 4) < 4 || !all_digits(fld[2]))
            continue;
        gid_t g = (gid_t)strtoul(fld[2], NULL, 10);
        if (want && strcmp(fld[0], want) == 0) {
            *gid_out = g;
            found = 1;
        }
        if (u && u->name[0]) {
            for (char *m = strtok(fld[3], ","); m; m = strtok(NULL, ","))
                if (strcmp(m, u->name) == 0 && u->ngroups < 64)
                    u->groups[u->ngroups++] = g;
        }
    }
    fclose(f);
    return found;
}

int agent_user_resolve(const char *spec, struct agent_user *u, char *msg, size_t cap)
{
    memset(u, 0, sizeof *u);
    snprintf(u->home, sizeof u->home, "/root");
    if (!spec || !*spec)
        spec = "0";
    char buf[256];
    snprintf(buf, sizeof buf, "%s", spec);
    char *group = strchr(buf, ':');
    if (group)
        *group++ = '\0';
    if (!find_passwd(buf, u)) {
        if (!all_digits(buf)) {
            int numeric = buf[0] && strspn(buf, "0123456789") == strlen(buf);
            snprintf(msg, cap,
                     numeric ? "user id %s is out of range"
                             : "unable to find user %s: no matching entries in passwd file",
                     buf);
            return -1;
        }
        u->uid = (uid_t)strtoul(buf, NULL, 10);
        u->gid = 0;
        snprintf(u->home, sizeof u->home, "/");
    }
    u->groups[u->ngroups++] = u->gid;
    if (group) {
        gid_t g;
        if (all_digits(group))
            g = (gid_t)strtoul(group, NULL, 10);
        else if (strspn(group, "0123456789") == strlen(group)) {
            snprintf(msg, cap, "group id %s is out of range", group);
            return -1;
        } else if (!scan_groups(group, &g, NULL)) {
            snprintf(msg, cap, "unable to find group %s: no matching entries in group file",
                     group);
            return -1;
        }
        u->gid = g;
        u->groups[0] = g;
    } else {
        scan_groups(NULL, NULL, u);
    }
    return 0;
}

int agent_user_become(const struct agent_user *u)
{
    if (getuid() == u->uid && getgid() == u->gid)
        return 0;
    if (setgroups(u->ngroups, u->groups) != 0 && errno != EPERM)
        return -1;
    if (setgid(u->gid) != 0 || setuid(u->uid) != 0)
        return -1;
    /* a handler that acts as the user stays out of reach of the user's
     * processes (the credential change may have made it dumpable again,
     * as fs.suid_dumpable says); a command gets it back from execve */
    prctl(PR_SET_DUMPABLE, 0);
    return 0;
}
