/*
 * accounts.c - groups and users made in the container (protocol 2:
 * AP_GROUP_ADD, AP_USER_ADD), as root, in the container's own /etc/group
 * and /etc/passwd (the files user.c reads).
 *
 * Every change holds an exclusive lock on /etc/.pwd.lock (the file
 * shadow-utils' lckpwdf locks), so two requests (or a useradd inside the
 * container) do not interleave. A file is rewritten whole into a fresh
 * temporary beside it (same owner and mode), synced, and renamed over it:
 * a reader sees the old file or the new one, never half of one. The group
 * file is written before the passwd file, so a user never names a gid
 * that is not there. An existing name with the same id (or when no id was
 * asked for) is accepted unchanged; another id is EEXIST.
 */
#include "agent.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#define ETC_GROUP "/etc/group"
#define ETC_PASSWD "/etc/passwd"
#define ETC_LOCK "/etc/.pwd.lock"
#define FILE_MAX (4u << 20) /* a passwd or group file larger than this is refused */
#define FIRST_ID 1000u
#define LAST_ID 60000u

/* A whole file in memory (small: account files). */
struct text {
    char *p;
    size_t len;
    struct stat st;
};

static int load(const char *path, struct text *t)
{
    memset(t, 0, sizeof *t);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        if (errno != ENOENT)
            return -1;
        /* a missing file starts empty, owned by root, 0644 */
        t->st.st_mode = 0644;
        t->p = calloc(1, 1);
        return t->p ? 0 : -1;
    }
    if (fstat(fd, &t->st) != 0 || t->st.st_size > (off_t)FILE_MAX) {
        if (t->st.st_size > (off_t)FILE_MAX)
            errno = EFBIG;
        close(fd);
        return -1;
    }
    t->p = malloc((size_t)t->st.st_size + 2);
    while (t->p && t->len < (size_t)t->st.st_size) {
        ssize_t n = read(fd, t->p + t->len, (size_t)t->st.st_size - t->len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        t->len += (size_t)n;
    }
    close(fd);
    if (!t->p)
        return -1;
    t->p[t->len] = '\0';
    return 0;
}

/* Replace path with t's text plus `extra` (a line, or NULL): temporary,
 * fsync, rename. */
static int store(const char *path, const struct text *t, const char *extra)
{
    char tmp[256];
    snprintf(tmp, sizeof tmp, "%s.sbx-tmp", path);
    unlink(tmp);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0)
        return -1;
    int bad = 0;
    const char *parts[3] = {t->p, NULL, extra};
    size_t lens[3] = {t->len, 0, extra ? strlen(extra) : 0};
    /* a file whose last line lacks its newline gets one before ours */
    if (extra && t->len && t->p[t->len - 1] != '\n') {
        parts[1] = "\n";
        lens[1] = 1;
    }
    for (int i = 0; i < 3 && !bad; i++)
        for (size_t off = 0; parts[i] && off < lens[i];) {
            ssize_t n = write(fd, parts[i] + off, lens[i] - off);
            if (n < 0 && errno == EINTR)
                continue;
            if (n <= 0) {
                bad = 1;
                break;
            }
            off += (size_t)n;
        }
    if (!bad && (fchown(fd, t->st.st_uid, t->st.st_gid) != 0 ||
                 fchmod(fd, t->st.st_mode & 07777) != 0 || fsync(fd) != 0))
        bad = 1;
    int e = errno;
    if (close(fd) != 0 && !bad) {
        bad = 1;
        e = errno;
    }
    if (!bad && rename(tmp, path) != 0) {
        bad = 1;
        e = errno;
    }
    if (bad) {
        unlink(tmp);
        errno = e;
        return -1;
    }
    return 0;
}

/* Field k (0-based) of a colon-separated line into out; 0 when present. */
static int field(const char *line, int k, char *out, size_t cap)
{
    const char *p = line;
    for (int i = 0; i < k; i++) {
        p = strpbrk(p, ":\n");
        if (!p || *p != ':')
            return -1;
        p++;
    }
    size_t n = strcspn(p, ":\n");
    if (n >= cap)
        return -1;
    memcpy(out, p, n);
    out[n] = '\0';
    return 0;
}

static int id_of(const char *s, unsigned long *out)
{
    char *end;
    if (!*s || strspn(s, "0123456789") != strlen(s))
        return -1;
    errno = 0;
    *out = strtoul(s, &end, 10);
    return errno || *out >= 4294967295ul ? -1 : 0;
}

/* The line of t whose field 0 is name: its id (field 2) in *id. Returns
 * the line's start, or NULL. */
static const char *find_name(const struct text *t, const char *name, unsigned long *id)
{
    for (const char *l = t->p; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
        char f0[256], f2[32];
        if (field(l, 0, f0, sizeof f0) == 0 && strcmp(f0, name) == 0 &&
            field(l, 2, f2, sizeof f2) == 0 && id_of(f2, id) == 0)
            return l;
    }
    return NULL;
}

/* The name of the line of t whose id (field 2) is id, into name; 0 when
 * one has it. */
static int find_id(const struct text *t, unsigned long id, char *name, size_t cap)
{
    for (const char *l = t->p; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
        char f2[32];
        unsigned long v;
        if (field(l, 2, f2, sizeof f2) == 0 && id_of(f2, &v) == 0 && v == id &&
            field(l, 0, name, cap) == 0)
            return 0;
    }
    return -1;
}

/* The lowest id >= FIRST_ID that no line of a (nor of b, when not NULL)
 * uses; 0 when none is left. */
static unsigned long free_id(const struct text *a, const struct text *b, unsigned long want)
{
    char name[256];
    for (unsigned long id = want ? want : FIRST_ID; id <= LAST_ID; id++)
        if (find_id(a, id, name, sizeof name) != 0 &&
            (!b || find_id(b, id, name, sizeof name) != 0))
            return id;
    return 0;
}

static int lock_accounts(int fd)
{
    int l = open(ETC_LOCK, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
    if (l < 0 || flock(l, LOCK_EX) != 0) {
        agent_wire_error(fd, errno, "lock", "%s: %s", ETC_LOCK, strerror(errno));
        if (l >= 0)
            close(l);
        return -1;
    }
    return l;
}

static void ok(int fd)
{
    unsigned char k[AP_HDR_LEN];
    sbxs_ap_header(k, AP_OK, 0);
    agent_wire_write_full(fd, k, sizeof k);
}

/* Make group name (gid 0: pick one) in g; *out its gid. 0, or -1 after an
 * error reply. */
static int group_make(int fd, struct text *g, const char *name, unsigned long gid,
                      unsigned long *out)
{
    unsigned long have;
    char other[256];
    if (find_name(g, name, &have)) {
        if (gid && have != gid) {
            agent_wire_error(fd, EEXIST, "group", "group %s exists with gid %lu, not %lu", name,
                       have, gid);
            return -1;
        }
        *out = have;
        return 0;
    }
    if (gid && find_id(g, gid, other, sizeof other) == 0) {
        agent_wire_error(fd, EEXIST, "group", "gid %lu belongs to group %s already", gid, other);
        return -1;
    }
    if (!gid && !(gid = free_id(g, NULL, 0))) {
        agent_wire_error(fd, ENOSPC, "group", "no free gid between %u and %u", FIRST_ID,
                   LAST_ID);
        return -1;
    }
    char line[320];
    snprintf(line, sizeof line, "%s:x:%lu:\n", name, gid);
    if (store(ETC_GROUP, g, line) != 0) {
        agent_wire_error(fd, errno, "group", "%s: %s", ETC_GROUP, strerror(errno));
        return -1;
    }
    free(g->p);
    if (load(ETC_GROUP, g) != 0) {
        agent_wire_error(fd, errno, "group", "%s: %s", ETC_GROUP, strerror(errno));
        return -1;
    }
    *out = gid;
    return 0;
}

static void group_add(int fd, const unsigned char *req, uint32_t len)
{
    struct ap_in in;
    sbxs_ap_in_begin(&in, req, len);
    char *name = sbxs_ap_get_str(&in);
    uint32_t gid = sbxs_ap_get_u32(&in);
    if (!sbxs_ap_in_done(&in) || !name[0] || strpbrk(name, ":\n,")) {
        agent_wire_error(fd, EPROTO, "request", "malformed group request");
        free(name);
        return;
    }
    int l = lock_accounts(fd);
    struct text g = {0};
    unsigned long got;
    if (l >= 0) {
        if (load(ETC_GROUP, &g) != 0)
            agent_wire_error(fd, errno, "group", "%s: %s", ETC_GROUP, strerror(errno));
        else if (group_make(fd, &g, name, gid, &got) == 0)
            ok(fd);
        close(l);
    }
    free(g.p);
    free(name);
}

/* Add user to the member list of group `grp` in g (nothing when it is
 * there). 0, or -1 with errno. */
static int add_member(struct text *g, const char *grp, const char *user)
{
    unsigned long id;
    const char *l = find_name(g, grp, &id);
    if (!l) {
        errno = ENOENT;
        return -1;
    }
    size_t start = (size_t)(l - g->p);
    size_t end = start + strcspn(l, "\n");
    char members[8192];
    if (field(l, 3, members, sizeof members) != 0)
        members[0] = '\0';
    for (char *m = members, *c; m && *m; m = c ? c + 1 : NULL) {
        c = strchr(m, ',');
        size_t n = c ? (size_t)(c - m) : strlen(m);
        if (n == strlen(user) && strncmp(m, user, n) == 0)
            return 0;
    }
    /* the new text: before the line, the line with ",user" (or "user")
     * at its end, after it */
    size_t ul = strlen(user);
    int colons = 0;
    for (const char *p = l; p < g->p + end; p++)
        colons += *p == ':';
    size_t add = ul + 1 + (colons < 3 ? (size_t)(3 - colons) : 0);
    char *n = malloc(g->len + add + 1);
    if (!n)
        return -1;
    size_t k = 0;
    memcpy(n, g->p, end);
    k = end;
    for (int c = colons; c < 3; c++)
        n[k++] = ':';
    if (members[0])
        n[k++] = ',';
    memcpy(n + k, user, ul);
    k += ul;
    memcpy(n + k, g->p + end, g->len - end);
    k += g->len - end;
    n[k] = '\0';
    free(g->p);
    g->p = n;
    g->len = k;
    return 0;
}

/* /home/<name>, owned by the user, 0750 (an existing one is given to the
 * user as it is). */
static int make_home(const char *name, unsigned long uid, unsigned long gid)
{
    if (mkdir("/home", 0755) != 0 && errno != EEXIST)
        return -1;
    char home[320];
    snprintf(home, sizeof home, "/home/%s", name);
    if (mkdir(home, 0750) != 0 && errno != EEXIST)
        return -1;
    int d = open(home, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (d < 0)
        return -1;
    int r = fchown(d, (uid_t)uid, (gid_t)gid);
    close(d);
    return r;
}

static void user_add(int fd, const unsigned char *req, uint32_t len)
{
    struct ap_in in;
    sbxs_ap_in_begin(&in, req, len);
    char *name = sbxs_ap_get_str(&in);
    uint32_t uid = sbxs_ap_get_u32(&in);
    char *group = sbxs_ap_get_str(&in);
    uint32_t n = sbxs_ap_get_u32(&in);
    char **groups = !in.bad && n <= 256 ? calloc(n + 1, sizeof *groups) : NULL;
    int bad = in.bad || !groups || !name[0] || strpbrk(name, ":\n,") ||
              strpbrk(group, ":\n,");
    for (uint32_t i = 0; groups && i < n && !in.bad; i++) {
        groups[i] = sbxs_ap_get_str(&in);
        bad |= !groups[i] || !groups[i][0] || strpbrk(groups[i], ":\n,") != NULL;
    }
    struct text p = {0}, g = {0};
    int l = -1;
    if (bad || !sbxs_ap_in_done(&in)) {
        agent_wire_error(fd, EPROTO, "request", "malformed user request");
        goto out;
    }
    if ((l = lock_accounts(fd)) < 0)
        goto out;
    if (load(ETC_PASSWD, &p) != 0 || load(ETC_GROUP, &g) != 0) {
        agent_wire_error(fd, errno, "user", "reading the account files: %s", strerror(errno));
        goto out;
    }
    unsigned long have, gid;
    char other[256];
    const char *line = find_name(&p, name, &have);
    if (line) {
        if (uid && have != uid)
            agent_wire_error(fd, EEXIST, "user", "user %s exists with uid %lu, not %u", name, have,
                       uid);
        else
            ok(fd);
        goto out;
    }
    if (uid && find_id(&p, uid, other, sizeof other) == 0) {
        agent_wire_error(fd, EEXIST, "user", "uid %u belongs to user %s already", uid, other);
        goto out;
    }
    /* every group named must exist before anything changes */
    for (uint32_t i = 0; i < n; i++)
        if (!find_name(&g, groups[i], &have)) {
            agent_wire_error(fd, ENOENT, "user", "group %s does not exist", groups[i]);
            goto out;
        }
    if (group[0] && !find_name(&g, group, &have)) {
        agent_wire_error(fd, ENOENT, "user", "group %s does not exist", group);
        goto out;
    }
    if (!uid && !(uid = (uint32_t)free_id(&p, NULL, 0))) {
        agent_wire_error(fd, ENOSPC, "user", "no free uid between %u and %u", FIRST_ID, LAST_ID);
        goto out;
    }
    /* the primary group: the one named, else one of the user's name (its
     * gid the uid when that is free) */
    if (group[0]) {
        find_name(&g, group, &gid);
    } else if (!find_name(&g, name, &gid)) {
        unsigned long want = find_id(&g, uid, other, sizeof other) == 0 ? 0 : uid;
        if (group_make(fd, &g, name, want, &gid) != 0)
            goto out;
    }
    for (uint32_t i = 0; i < n; i++)
        if (add_member(&g, groups[i], name) != 0) {
            agent_wire_error(fd, errno, "user", "group %s: %s", groups[i], strerror(errno));
            goto out;
        }
    if (n && store(ETC_GROUP, &g, NULL) != 0) {
        agent_wire_error(fd, errno, "user", "%s: %s", ETC_GROUP, strerror(errno));
        goto out;
    }
    char entry[640];
    snprintf(entry, sizeof entry, "%s:x:%u:%lu::/home/%s:/bin/sh\n", name, uid, gid, name);
    if (store(ETC_PASSWD, &p, entry) != 0) {
        agent_wire_error(fd, errno, "user", "%s: %s", ETC_PASSWD, strerror(errno));
        goto out;
    }
    if (make_home(name, uid, gid) != 0) {
        agent_wire_error(fd, errno, "home", "/home/%s: %s", name, strerror(errno));
        goto out;
    }
    ok(fd);
out:
    if (l >= 0)
        close(l);
    free(p.p);
    free(g.p);
    for (uint32_t i = 0; groups && i < n; i++)
        free(groups[i]);
    free(groups);
    free(name);
    free(group);
}

void agent_accounts_serve(int fd, int type, const unsigned char *req, uint32_t len)
{
    if (type == AP_GROUP_ADD)
        group_add(fd, req, len);
    else
        user_add(fd, req, len);
}
