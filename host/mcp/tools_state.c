/*
 * tools_state.c - snapshot, restore, port_url, and the SDK's
 * snapshot_read and snapshot_write (docs/MCP.md, "State tools").
 *
 * Named snapshots live in the operator's snapshot directory (--snapshot-
 * dir), never in a path a call names: a name is 1 to 64 of
 * [A-Za-z0-9._-], not "." or "..", so it is one entry of that directory.
 * The directory is opened once per call and every file in it is reached
 * through that descriptor (O_NOFOLLOW, type checked with fstat); libsbx's
 * snapshot calls, which take a path, are given /proc/self/fd/N paths of
 * those descriptors, so they act on exactly what was checked.
 *
 * A snapshot is saved under a temporary name (with '~', which no snapshot
 * name has), hashed from the descriptor, then renamed over the name: a
 * crash leaves no truncated file under a real name. An upload
 * (snapshot_write) goes to "~upload.<name>", strictly in order (each chunk
 * at the offset where the previous ended; offset 0 starts over), locked
 * with flock so that two uploads of one name cannot interleave, bounded in
 * size, and is published by rename only when the final chunk came and the
 * archive checks out.
 */
#include "tools_common.h"

#include "hex.h"
#include "mkdirs.h"

#include <openssl/evp.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#define NAME_MAX_LEN 64
#define UPLOAD_MAX (4ull << 30)   /* bytes of one uploaded snapshot */
#define CHUNK_DEFAULT (1u << 20)  /* snapshot_read's max_bytes default */
#define UPLOAD_PREFIX "~upload."

/* ---- names and the directory ------------------------------------------- */

static int name_ok(const char *tool, const char *name, sbx_error *err)
{
    size_t n = name ? strlen(name) : 0;
    if (n < 1 || n > NAME_MAX_LEN || !strcmp(name, ".") || !strcmp(name, "..") ||
        strspn(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") != n)
        return sbx_error_set(err, SBX_E_INVALID,
                             "invalid snapshot name (1 to %d of A-Z a-z 0-9 . _ -, not "
                             "\".\" or \"..\")", NAME_MAX_LEN);
    return SBX_OK;
}

/* The snapshot directory, made (0700) when missing. -1 with err set. */
static int open_dir(struct sbxm_call *c, const char *tool, sbx_error *err)
{
    const char *dir = sbxm_options(c->srv)->snapshot_dir;
    if (!dir || !*dir) {
        sbx_error_set(err, SBX_E_CONFIG, "the server has no snapshot directory");
        return -1;
    }
    char failed[256];
    int made = dir[0] == '/' ? sbxs_mkdirs(dir, 0700, failed, sizeof failed)
               : mkdir(dir, 0700) == 0 || errno == EEXIST ? 0 : -1;
    if (made != 0) {
        sbx_error_set(err, SBX_E_IO, "cannot make the snapshot directory: %s",
                      strerror(errno));
        return -1;
    }
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0)
        sbx_error_set(err, SBX_E_IO, "cannot open the snapshot directory: %s",
                      strerror(errno));
    return dfd;
}

/* Open entry `name` of dfd as a regular file (never a symlink, never
 * blocking on a FIFO). -1 with err set (SBX_E_NOT_FOUND when missing). */
static int open_entry(int dfd, const char *tool, const char *name, int flags, sbx_error *err)
{
    int fd = openat(dfd, name, flags | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY, 0600);
    struct stat st;
    if (fd < 0) {
        sbx_error_set(err, errno == ENOENT ? SBX_E_NOT_FOUND : SBX_E_IO,
                      "snapshot \"%s\": %s", name,
                      errno == ENOENT ? "no such snapshot"
                      : errno == ELOOP ? "not a regular file"
                                       : strerror(errno));
        return -1;
    }
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || fcntl(fd, F_SETFL, 0) != 0) {
        sbx_error_set(err, SBX_E_IO, "snapshot \"%s\": not a regular file", name);
        close(fd);
        return -1;
    }
    return fd;
}

/* libsbx's messages name the file they were given; say the snapshot's
 * name instead of the /proc path (no host path goes to a client). */
static int fail_named(sbx_error *err, const char *tool, const char *name, const char *path,
                      const sbx_error *cause)
{
    char msg[SBX_ERROR_MAX];
    const char *m = cause->message;
    size_t pl = strlen(path), o = 0;
    while (*m && o + 1 < sizeof msg) {
        if (pl && !strncmp(m, path, pl)) {
            o += (size_t)snprintf(msg + o, sizeof msg - o, "%s", name);
            if (o >= sizeof msg)
                o = sizeof msg - 1;
            m += pl;
        } else {
            msg[o++] = *m++;
        }
    }
    msg[o] = '\0';
    return sbx_error_set(err, cause->status ? cause->status : SBX_E_INTERNAL,
                         "snapshot \"%s\": %s", name, msg);
}

/* SHA-256 of fd from its start, and its length. */
static int hash_fd(int fd, char hex[65], uint64_t *bytes)
{
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    unsigned char buf[64 * 1024], out[EVP_MAX_MD_SIZE];
    unsigned int olen = 0;
    uint64_t total = 0;
    int ok = md && EVP_DigestInit_ex(md, EVP_sha256(), NULL) == 1;
    for (off_t off = 0; ok;) {
        ssize_t n = pread(fd, buf, sizeof buf, off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            ok = n == 0;
            break;
        }
        ok = EVP_DigestUpdate(md, buf, (size_t)n) == 1;
        off += n;
        total += (uint64_t)n;
    }
    ok = ok && EVP_DigestFinal_ex(md, out, &olen) == 1 && olen == 32;
    EVP_MD_CTX_free(md);
    if (!ok)
        return -1;
    sbxs_hex(out, 32, hex);
    *bytes = total;
    return 0;
}

/* ---- snapshot, restore ----------------------------------------------------- */

static int tool_snapshot(struct sbxm_call *c, json_object **result, sbx_error *err)
{
    static const char tool[] = "snapshot";
    const char *name = sbxm_arg_str(c, "name");
    int rc = name_ok(tool, name, err);
    if (rc != SBX_OK)
        return rc;
    sbx_handle *h;
    if ((rc = sbxm_tool_sandbox(c, tool, &h, err)) != SBX_OK)
        return rc;
    int dfd = open_dir(c, tool, err);
    if (dfd < 0)
        return err->status;
    char tmp[NAME_MAX_LEN + 40], hexr[17], path[NAME_MAX_LEN + 80];
    snprintf(tmp, sizeof tmp, "~save.%s.%s", sbxs_random_hex(hexr, 8), name);
    snprintf(path, sizeof path, "/proc/self/fd/%d/%s", dfd, tmp);
    sbxm_progress(c, 0, 1, "saving the workspace");
    sbx_error e;
    rc = sbx_snapshot_save(h, path, "gzip", c->cancel, &e);
    if (rc != SBX_OK) {
        fail_named(err, tool, name, path, &e);
        close(dfd);
        return rc;
    }
    char sha[65];
    uint64_t bytes = 0;
    int fd = open_entry(dfd, tool, tmp, O_RDONLY, err);
    if (fd < 0 || hash_fd(fd, sha, &bytes) != 0) {
        if (fd >= 0)
            rc = sbx_error_set(err, SBX_E_IO, "snapshot \"%s\": cannot hash it: %s",
                               name, strerror(errno));
        else
            rc = err->status;
    } else if (renameat(dfd, tmp, dfd, name) != 0) {
        rc = sbx_error_set(err, SBX_E_IO, "snapshot \"%s\": cannot publish it: %s",
                           name, strerror(errno));
    } else {
        fsync(dfd);
    }
    if (fd >= 0)
        close(fd);
    if (rc != SBX_OK)
        unlinkat(dfd, tmp, 0);
    close(dfd);
    if (rc != SBX_OK)
        return rc;
    json_object *out = json_object_new_object();
    json_object_object_add(out, "name", json_object_new_string(name));
    json_object_object_add(out, "bytes", json_object_new_uint64(bytes));
    json_object_object_add(out, "sha256", json_object_new_string(sha));
    *result = out;
    return SBX_OK;
}

static int tool_restore(struct sbxm_call *c, json_object **result, sbx_error *err)
{
    static const char tool[] = "restore";
    const char *name = sbxm_arg_str(c, "name");
    int rc = name_ok(tool, name, err);
    if (rc != SBX_OK)
        return rc;
    sbx_handle *h;
    if ((rc = sbxm_tool_sandbox(c, tool, &h, err)) != SBX_OK)
        return rc;
    int dfd = open_dir(c, tool, err);
    if (dfd < 0)
        return err->status;
    int fd = open_entry(dfd, tool, name, O_RDONLY, err);
    close(dfd);
    if (fd < 0)
        return err->status;
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    sbxm_progress(c, 0, 1, "restoring the workspace");
    sbx_error e;
    /* all or nothing: every entry is checked into a staging directory
     * that is swapped in only after the last one (sbx_snapshot_restore) */
    rc = sbx_snapshot_restore(h, path, c->cancel, &e);
    close(fd);
    if (rc != SBX_OK)
        return fail_named(err, tool, name, path, &e);
    json_object *out = json_object_new_object();
    json_object_object_add(out, "name", json_object_new_string(name));
    *result = out;
    return SBX_OK;
}

/* ---- snapshot_read, snapshot_write (sdk) ---------------------------------- */

static int tool_snapshot_read(struct sbxm_call *c, json_object **result, sbx_error *err)
{
    static const char tool[] = "snapshot_read";
    const struct sbxm_options *o = sbxm_options(c->srv);
    const char *name = sbxm_arg_str(c, "name");
    int rc = name_ok(tool, name, err);
    if (rc != SBX_OK)
        return rc;
    int64_t offset = sbxm_arg_int(c, "offset", 0);
    int64_t max = sbxm_arg_int(c, "max_bytes", CHUNK_DEFAULT);
    if (offset < 0)
        return sbx_error_set(err, SBX_E_INVALID, "\"offset\" is negative");
    if (max < 1)
        return sbx_error_set(err, SBX_E_INVALID, "\"max_bytes\" must be 1 or more");
    size_t cap = (uint64_t)max < o->max_read_bytes ? (size_t)max : o->max_read_bytes;
    int dfd = open_dir(c, tool, err);
    if (dfd < 0)
        return err->status;
    int fd = open_entry(dfd, tool, name, O_RDONLY, err);
    close(dfd);
    if (fd < 0)
        return err->status;
    struct stat st;
    char *buf = malloc(cap ? cap : 1);
    unsigned char *b64 = malloc(4 * ((cap + 2) / 3) + 1);
    ssize_t n = 0;
    if (!buf || !b64 || fstat(fd, &st) != 0) {
        rc = sbx_error_set(err, SBX_E_NOMEM, "out of memory");
    } else {
        size_t got = 0;
        while (got < cap) {
            n = pread(fd, buf + got, cap - got, (off_t)offset + (off_t)got);
            if (n < 0 && errno == EINTR)
                continue;
            if (n <= 0)
                break;
            got += (size_t)n;
        }
        if (n < 0)
            rc = sbx_error_set(err, SBX_E_IO, "snapshot \"%s\": %s", name,
                               strerror(errno));
        n = (ssize_t)got;
    }
    close(fd);
    if (rc == SBX_OK) {
        int len = EVP_EncodeBlock(b64, (unsigned char *)buf, (int)n);
        json_object *out = json_object_new_object();
        json_object_object_add(out, "content", json_object_new_string_len((char *)b64, len));
        json_object_object_add(out, "bytes", json_object_new_int64(n));
        json_object_object_add(out, "size", json_object_new_int64(st.st_size));
        json_object_object_add(out, "eof",
                               json_object_new_boolean(offset + n >= (int64_t)st.st_size));
        *result = out;
    }
    free(buf);
    free(b64);
    return rc;
}

/* Whether the n bytes at p start like an archive restore reads: tar
 * ("ustar" at 257), gzip or zstd. The restore checks every entry. */
static bool archive_magic(const unsigned char *p, size_t n)
{
    if (n >= 2 && p[0] == 0x1f && p[1] == 0x8b)
        return true;
    if (n >= 4 && p[0] == 0x28 && p[1] == 0xb5 && p[2] == 0x2f && p[3] == 0xfd)
        return true;
    return n >= 262 && !memcmp(p + 257, "ustar", 5);
}

static int tool_snapshot_write(struct sbxm_call *c, json_object **result, sbx_error *err)
{
    static const char tool[] = "snapshot_write";
    const struct sbxm_options *o = sbxm_options(c->srv);
    const char *name = sbxm_arg_str(c, "name");
    int rc = name_ok(tool, name, err);
    if (rc != SBX_OK)
        return rc;
    int64_t offset = sbxm_arg_int(c, "offset", -1);
    bool final = sbxm_arg_bool(c, "final", false);
    const char *want_sha = sbxm_arg_str(c, "sha256");
    if (offset < 0)
        return sbx_error_set(err, SBX_E_INVALID, "\"offset\" is missing or negative");
    if (want_sha && !sbxs_is_hex(want_sha, 64))
        return sbx_error_set(err, SBX_E_INVALID,
                             "\"sha256\" must be 64 lowercase hex digits");
    json_object *cv = NULL;
    if (!json_object_object_get_ex(c->args, "content", &cv) ||
        !json_object_is_type(cv, json_type_string))
        return sbx_error_set(err, SBX_E_INVALID, "\"content\" is missing");
    const char *text = json_object_get_string(cv);
    size_t tlen = (size_t)json_object_get_string_len(cv);
    size_t max_chunk = o->max_write_bytes;
    if (tlen / 4 * 3 > max_chunk + 3)
        return sbx_error_set(err, SBX_E_INVALID,
                             "a chunk of about %zu bytes is over the server's limit of "
                             "%zu (--max-write-bytes)", tlen / 4 * 3, max_chunk);
    unsigned char *data = malloc(tlen / 4 * 3 + 4);
    EVP_ENCODE_CTX *ectx = EVP_ENCODE_CTX_new();
    int n1 = 0, n2 = 0;
    if (!data || !ectx) {
        free(data);
        EVP_ENCODE_CTX_free(ectx);
        return sbx_error_set(err, SBX_E_NOMEM, "out of memory");
    }
    EVP_DecodeInit(ectx);
    bool ok = EVP_DecodeUpdate(ectx, data, &n1, (const unsigned char *)text, (int)tlen) >= 0 &&
              EVP_DecodeFinal(ectx, data + n1, &n2) == 1;
    EVP_ENCODE_CTX_free(ectx);
    size_t len = (size_t)n1 + (size_t)n2;
    if (!ok) {
        free(data);
        return sbx_error_set(err, SBX_E_INVALID, "\"content\" is not valid base64");
    }
    if ((uint64_t)offset + len > UPLOAD_MAX) {
        free(data);
        return sbx_error_set(err, SBX_E_INVALID,
                             "snapshot \"%s\" would be over %llu bytes", name,
                             (unsigned long long)UPLOAD_MAX);
    }
    int dfd = open_dir(c, tool, err);
    if (dfd < 0) {
        free(data);
        return err->status;
    }
    char tmp[NAME_MAX_LEN + 16];
    snprintf(tmp, sizeof tmp, UPLOAD_PREFIX "%s", name);
    /* offset 0 starts the upload (afresh); a later chunk continues one */
    int fd = open_entry(dfd, tool, tmp, offset == 0 ? O_RDWR | O_CREAT : O_RDWR, err);
    if (fd < 0) {
        if (err->status == SBX_E_NOT_FOUND)
            sbx_error_set(err, SBX_E_INVALID,
                          "snapshot \"%s\": no upload in progress (start one at "
                          "offset 0)", name);
        free(data);
        close(dfd);
        return err->status;
    }
    struct stat st;
    char sha[65] = "";
    uint64_t total = 0;
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        rc = sbx_error_set(err, SBX_E_EXISTS,
                           "snapshot \"%s\": another upload of it is being written",
                           name);
    } else if (offset == 0 && ftruncate(fd, 0) != 0) {
        rc = sbx_error_set(err, SBX_E_IO, "snapshot \"%s\": %s", name,
                           strerror(errno));
    } else if (fstat(fd, &st) != 0) {
        rc = sbx_error_set(err, SBX_E_IO, "snapshot \"%s\": %s", name,
                           strerror(errno));
    } else if ((uint64_t)st.st_size != (uint64_t)offset) {
        /* no gap, no overlap: each chunk starts where the last ended */
        rc = sbx_error_set(err, SBX_E_INVALID,
                           "snapshot \"%s\": a chunk at offset %lld, but the upload "
                           "holds %lld bytes (chunks go in order, without gaps or "
                           "overlaps; offset 0 starts over)", name, (long long)offset, (long long)st.st_size);
    } else {
        size_t done = 0;
        while (done < len) {
            ssize_t w = pwrite(fd, data + done, len - done, (off_t)offset + (off_t)done);
            if (w < 0 && errno == EINTR)
                continue;
            if (w <= 0)
                break;
            done += (size_t)w;
        }
        if (done < len)
            rc = sbx_error_set(err, SBX_E_IO, "snapshot \"%s\": writing: %s", name,
                               strerror(errno));
    }
    free(data);
    total = (uint64_t)offset + len;
    if (rc == SBX_OK && final) {
        unsigned char head[512];
        ssize_t hn = pread(fd, head, sizeof head, 0);
        if (hn < 0 || !archive_magic(head, (size_t)hn))
            rc = sbx_error_set(err, SBX_E_INVALID,
                               "snapshot \"%s\": not a tar, tar.gz or tar.zst archive", name);
        else if (hash_fd(fd, sha, &total) != 0)
            rc = sbx_error_set(err, SBX_E_IO, "snapshot \"%s\": cannot hash it",
                               name);
        else if (want_sha && strcmp(want_sha, sha))
            rc = sbx_error_set(err, SBX_E_INVALID,
                               "snapshot \"%s\": its SHA-256 is %s, not the %s given", name, sha, want_sha);
        else if (fsync(fd) != 0 || renameat(dfd, tmp, dfd, name) != 0)
            rc = sbx_error_set(err, SBX_E_IO, "snapshot \"%s\": cannot publish it: %s", name, strerror(errno));
        else
            fsync(dfd);
        if (rc != SBX_OK && rc != SBX_E_IO)
            unlinkat(dfd, tmp, 0); /* a bad upload is dropped: start again */
    }
    close(fd);
    close(dfd);
    if (rc != SBX_OK)
        return rc;
    json_object *out = json_object_new_object();
    json_object_object_add(out, "name", json_object_new_string(name));
    json_object_object_add(out, "bytes", json_object_new_uint64(total));
    json_object_object_add(out, "final", json_object_new_boolean(final));
    if (final)
        json_object_object_add(out, "sha256", json_object_new_string(sha));
    *result = out;
    return SBX_OK;
}

/* ---- port_url ------------------------------------------------------------ */

static int tool_port_url(struct sbxm_call *c, json_object **result, sbx_error *err)
{
    static const char tool[] = "port_url";
    int64_t port = sbxm_arg_int(c, "port", 0);
    if (port < 1 || port > 65535)
        return sbx_error_set(err, SBX_E_INVALID, "\"port\" must be 1 to 65535");
    sbx_handle *h;
    int rc = sbxm_tool_sandbox(c, tool, &h, err);
    if (rc != SBX_OK)
        return rc;
    struct sbx_port_endpoint ep;
    memset(&ep, 0, sizeof ep);
    ep.size = sizeof ep;
    sbx_error e;
    rc = sbx_port_resolve(h, (unsigned)port, &ep, c->cancel, &e);
    if (rc != SBX_OK) {
        memset(ep.header, 0, sizeof ep.header);
        return sbxm_tool_fail(err, tool, NULL, &e);
    }
    json_object *out = json_object_new_object();
    json_object_object_add(out, "host", sbxm_json_bytes(ep.host, strnlen(ep.host, sizeof ep.host)));
    json_object_object_add(out, "port", json_object_new_int(ep.port));
    json_object_object_add(out, "tls", json_object_new_boolean(ep.tls != 0));
    json_object_object_add(out, "url", sbxm_json_bytes(ep.url, strnlen(ep.url, sizeof ep.url)));
    /* the header is a credential some services require to reach the
     * port: the SDK group gets it (its client needs it); an agent's model
     * never sees it */
    if (sbxm_options(c->srv)->tools & SBXM_TOOLS_SDK) {
        size_t hl = strnlen(ep.header, sizeof ep.header);
        json_object_object_add(out, "header", hl ? sbxm_json_bytes(ep.header, hl) : NULL);
    }
    memset(ep.header, 0, sizeof ep.header);
    *result = out;
    return SBX_OK;
}

/* ---- the table ----------------------------------------------------------- */

#define SANDBOX_PROP "\"sandbox\":{\"type\":\"string\",\"description\":\"the sandbox (session key)\"}"
#define NAME_PROP                                                                         \
    "\"name\":{\"type\":\"string\",\"description\":\"snapshot name: 1 to 64 of "             \
    "A-Z a-z 0-9 . _ - (not . or ..), in the server's snapshot directory\"}"

const struct sbxm_tool sbxm_tools_state[] = {
    {"snapshot", "Snapshot the workspace",
     "Save the sandbox's workspace as the named snapshot (a tar.gz in the server's "
     "snapshot directory, replacing one of that name). Regular files and directories "
     "only.",
     "{\"type\":\"object\",\"properties\":{" SANDBOX_PROP "," NAME_PROP "},"
     "\"required\":[\"sandbox\",\"name\"],\"additionalProperties\":false}",
     NULL, SBXM_TOOLS_AGENT, false, tool_snapshot},
    {"restore", "Restore a snapshot",
     "Replace the sandbox's workspace with the named snapshot, all or nothing: a missing "
     "or damaged snapshot leaves the workspace as it was.",
     "{\"type\":\"object\",\"properties\":{" SANDBOX_PROP "," NAME_PROP "},"
     "\"required\":[\"sandbox\",\"name\"],\"additionalProperties\":false}",
     NULL, SBXM_TOOLS_AGENT, false, tool_restore},
    {"port_url", "Where a port is reached",
     "The URL at which a client outside the sandbox reaches one of its declared TCP ports.",
     "{\"type\":\"object\",\"properties\":{" SANDBOX_PROP ","
     "\"port\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":65535}},"
     "\"required\":[\"sandbox\",\"port\"],\"additionalProperties\":false}",
     NULL, SBXM_TOOLS_AGENT, true, tool_port_url},
    {"snapshot_read", "Read a snapshot",
     "A base64 chunk of the named snapshot from offset (max_bytes, 1 MiB by default, at "
     "most the server's --max-read-bytes); eof once the end is reached.",
     "{\"type\":\"object\",\"properties\":{" SANDBOX_PROP "," NAME_PROP ","
     "\"offset\":{\"type\":\"integer\",\"minimum\":0},"
     "\"max_bytes\":{\"type\":\"integer\",\"minimum\":1}},"
     "\"required\":[\"name\",\"offset\"],\"additionalProperties\":false}",
     NULL, SBXM_TOOLS_SDK, true, tool_snapshot_read},
    {"snapshot_write", "Upload a snapshot",
     "Write a base64 chunk of the named snapshot at offset: offset 0 starts an upload, "
     "each later chunk starts where the previous ended; final publishes it (checked to be "
     "a tar, tar.gz or tar.zst archive, and against sha256 when given).",
     "{\"type\":\"object\",\"properties\":{" SANDBOX_PROP "," NAME_PROP ","
     "\"offset\":{\"type\":\"integer\",\"minimum\":0},"
     "\"content\":{\"type\":\"string\"},"
     "\"final\":{\"type\":\"boolean\"},"
     "\"sha256\":{\"type\":\"string\"}},"
     "\"required\":[\"name\",\"offset\",\"content\"],\"additionalProperties\":false}",
     NULL, SBXM_TOOLS_SDK, false, tool_snapshot_write},
    {0},
};
