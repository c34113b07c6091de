/*
 * lifecycle.c - create, attach, destroy, release and root.
 *
 * A session's container is named "sbx-" plus the first 32 hex digits of the
 * key hash and carries labels: sbx.managed=true, sbx.owner=<full key hash>,
 * sbx.spec=<spec hash>, and what it was created with (sbx.network,
 * sbx.mounts) so attach can tell a container that was changed behind our
 * back. The persisted reference is the container ID: a container that was
 * removed and recreated under the same name is a different workspace, and
 * attach reports the old one as not found instead of silently using the new.
 *
 * A container run under sbx-agent (providers.docker.agent, the default)
 * gets the agent binary bound read-only as its init and the session's
 * agent/ directory bound at /.sbx/run; create and attach wait until the
 * agent answers (a wedged one gets its container restarted once).
 */
#include "docker.h"

#include "agent_proto/proto.h"

#include <archive.h>
#include <archive_entry.h>

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#define NAME_PREFIX "sbx-"
#define NAME_HASH_LEN 32

static const char *owner_of(json_object *info)
{
    return sbxp_json_str(sbxp_json_obj(sbxp_json_obj(info, "Config"), "Labels"),
                        DOCKER_LABEL_OWNER);
}

static const char *label_of(json_object *info, const char *key)
{
    return sbxp_json_str(sbxp_json_obj(sbxp_json_obj(info, "Config"), "Labels"), key);
}

static int valid_ref(const char *ref)
{
    size_t n = ref ? strlen(ref) : 0;
    if (n != 64)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!isxdigit((unsigned char)ref[i]) || isupper((unsigned char)ref[i]))
            return 0;
    return 1;
}

/* Canonical text of a mount list: "type:source:destination:rw|ro" joined
 * by ';' in the order given. Anonymous volumes have no stable source. */
static int mounts_canon(json_object *mounts, int from_inspect, char *out, size_t cap)
{
    size_t used = 0;
    out[0] = '\0';
    size_t n = mounts ? json_object_array_length(mounts) : 0;
    for (size_t i = 0; i < n; i++) {
        json_object *m = json_object_array_get_idx(mounts, i);
        const char *type = sbxp_json_str(m, "Type");
        const char *dst = sbxp_json_str(m, from_inspect ? "Destination" : "Target");
        const char *src = sbxp_json_str(m, "Source");
        int rw = from_inspect ? sbxp_json_bool(m, "RW", 0)
                              : !sbxp_json_bool(m, "ReadOnly", 0);
        if (!type || !dst)
            return -1;
        if (strcmp(type, "volume") == 0)
            src = "";
        int k = snprintf(out + used, cap - used, "%s%s:%s:%s:%s", i ? ";" : "", type,
                         src ? src : "", dst, rw ? "rw" : "ro");
        if (k < 0 || (size_t)k >= cap - used)
            return -1;
        used += (size_t)k;
    }
    return 0;
}

/* Mount entries in the container's inspect output, sorted by destination
 * as we create them (we create them in that order). */
static int mounts_of_inspect(json_object *info, char *out, size_t cap)
{
    json_object *mounts;
    if (!json_object_object_get_ex(info, "Mounts", &mounts) ||
        !json_object_is_type(mounts, json_type_array))
        mounts = NULL;
    /* inspect lists mounts in map order: sort a copy by destination */
    size_t n = mounts ? json_object_array_length(mounts) : 0;
    json_object *sorted = json_object_new_array();
    if (!sorted)
        return -1;
    for (size_t i = 0; i < n; i++)
        json_object_array_add(sorted,
                              json_object_get(json_object_array_get_idx(mounts, i)));
    for (size_t i = 1; i < n; i++) {
        for (size_t j = i; j > 0; j--) {
            json_object *a = json_object_array_get_idx(sorted, j - 1);
            json_object *b = json_object_array_get_idx(sorted, j);
            const char *da = sbxp_json_str(a, "Destination");
            const char *db = sbxp_json_str(b, "Destination");
            if (!da || !db || strcmp(da, db) <= 0)
                break;
            json_object_get(a);
            json_object_get(b);
            json_object_array_put_idx(sorted, j - 1, b);
            json_object_array_put_idx(sorted, j, a);
        }
    }
    int rc = mounts_canon(sorted, 1, out, cap);
    json_object_put(sorted);
    return rc;
}

static json_object *str_array(const char *const *v)
{
    json_object *a = json_object_new_array();
    for (size_t i = 0; a && v[i]; i++)
        json_object_array_add(a, json_object_new_string(v[i]));
    return a;
}

static void add_bind_src(json_object *mounts, const char *src, const char *target,
                         int read_only)
{
    json_object *m = json_object_new_object();
    json_object_object_add(m, "Type", json_object_new_string("bind"));
    json_object_object_add(m, "Source", json_object_new_string(src));
    json_object_object_add(m, "Target", json_object_new_string(target));
    json_object_object_add(m, "ReadOnly", json_object_new_boolean(read_only));
    json_object_array_add(mounts, m);
}

static void add_bind(struct docker_state *st, json_object *mounts, const char *name,
                     const char *sub, const char *target, int read_only)
{
    char src[4096];
    docker_res_dir(st, name, sub, src, sizeof src);
    add_bind_src(mounts, src, target, read_only);
}

/* The mounts a new container gets, sorted by destination (attach compares
 * them in that order): the binds of the session's resource directory and,
 * with a read-only root filesystem, the workspace volume. */
static int mounts_spec(struct docker_state *st, sbx_call *call, const char *name,
                       const struct sbx_create_args *args, json_object **out)
{
    json_object *mounts = *out = json_object_new_array();
    if (!mounts)
        return st->host->set_error(st->host, call, SBX_E_NOMEM, "out of memory");
    if (st->cfg.agent) {
        /* the agent's socket directory, then the agent itself (read-only) */
        add_bind(st, mounts, name, "agent", DOCKER_AGENT_RUN, 0);
        add_bind_src(mounts, st->cfg.agent_path, DOCKER_AGENT_BIN, 1);
    }
    /* /mnt/memory/<slug> sorts before /mnt/session */
    int rc = docker_memory_binds(st, call, name, args, mounts);
    if (rc != SBX_OK)
        return rc;
    add_bind(st, mounts, name, "outputs", DOCKER_OUTPUTS, 0);
    add_bind(st, mounts, name, "uploads", DOCKER_UPLOADS, 1);
    if (st->cfg.read_only_rootfs) {
        /* The root filesystem is read-only: the workspace lives on an
         * anonymous volume (removed with the container). */
        json_object *m = json_object_new_object();
        json_object_object_add(m, "Type", json_object_new_string("volume"));
        json_object_object_add(m, "Target", json_object_new_string(DOCKER_WORKSPACE));
        json_object_object_add(m, "ReadOnly", json_object_new_boolean(0));
        json_object_array_add(mounts, m);
    }
    add_bind(st, mounts, name, "skills", DOCKER_SKILLS, 1);
    return SBX_OK;
}

static json_object *create_body(struct docker_state *st,
                                const struct sbx_create_args *args,
                                json_object *mounts, const char *mounts_text,
                                const char *agent_user, const char *ports_text,
                                const char *fork_image)
{
    const struct docker_config *c = &st->cfg;
    json_object *b = json_object_new_object();
    json_object *labels = json_object_new_object();
    json_object *hc = json_object_new_object();
    if (!b || !labels || !hc) {
        json_object_put(b);
        json_object_put(labels);
        json_object_put(hc);
        return NULL;
    }
    static const char *const entry[] = {"sleep", "infinity", NULL};
    static const char *const no_cmd[] = {NULL};
    /* Under the agent, the container's init is the agent, as root (it
     * makes its socket and runs commands and file operations as the
     * sandbox user, which it is told here). */
    const char *const agent_entry[] = {DOCKER_AGENT_BIN, "serve", "--socket",
                                       DOCKER_AGENT_RUN "/" DOCKER_AGENT_SOCK, "--root",
                                       DOCKER_WORKSPACE, "--root", DOCKER_OUTPUTS,
                                       "--user", agent_user ? agent_user : "",
                                       /* what own_workspace does on the Engine
                                        * API path */
                                       c->user && !c->read_only_rootfs ? "--own-workspace"
                                                                       : NULL,
                                       NULL};
    json_object_object_add(b, "Image",
                           json_object_new_string(fork_image ? fork_image : c->image));
    json_object_object_add(b, "Entrypoint", str_array(c->agent ? agent_entry : entry));
    json_object_object_add(b, "Cmd", str_array(no_cmd));
    json_object_object_add(b, "WorkingDir", json_object_new_string(DOCKER_WORKSPACE));
    if (c->agent)
        json_object_object_add(b, "User", json_object_new_string("0:0"));
    else if (c->user)
        json_object_object_add(b, "User", json_object_new_string(c->user));
    json_object_object_add(b, "Tty", json_object_new_boolean(0));
    json_object_object_add(b, "OpenStdin", json_object_new_boolean(0));
    json_object_object_add(b, "AttachStdin", json_object_new_boolean(0));
    json_object_object_add(b, "AttachStdout", json_object_new_boolean(0));
    json_object_object_add(b, "AttachStderr", json_object_new_boolean(0));

    for (size_t i = 0; i < c->nlabels; i++)
        json_object_object_add(labels, c->labels[i].key,
                               json_object_new_string(c->labels[i].value));
    json_object_object_add(labels, DOCKER_LABEL_MANAGED, json_object_new_string("true"));
    json_object_object_add(labels, DOCKER_LABEL_OWNER,
                           json_object_new_string(args->key_hash));
    json_object_object_add(labels, DOCKER_LABEL_SPEC,
                           json_object_new_string(args->spec_hash ? args->spec_hash
                                                                  : ""));
    json_object_object_add(labels, DOCKER_LABEL_NETWORK,
                           json_object_new_string(c->network));
    json_object_object_add(labels, DOCKER_LABEL_MOUNTS,
                           json_object_new_string(mounts_text));
    if (ports_text[0])
        json_object_object_add(labels, DOCKER_LABEL_PORTS,
                               json_object_new_string(ports_text));
    if (c->agent)
        json_object_object_add(labels, DOCKER_LABEL_AGENT,
                               json_object_new_string(AP_VERSION_STR));
    /* a fork's container: its image goes when the container does */
    json_object_object_add(labels, DOCKER_LABEL_FORK_IMAGE,
                           json_object_new_string(fork_image ? fork_image : ""));
    json_object_object_add(b, "Labels", labels);

    json_object_object_add(hc, "NetworkMode", json_object_new_string(c->network));
    /* docker-init as PID 1 reaps the orphans of killed exec trees; the
     * agent is an init of its own. */
    json_object_object_add(hc, "Init", json_object_new_boolean(!c->agent));
    if (c->memory) {
        json_object_object_add(hc, "Memory", json_object_new_int64(c->memory));
        json_object_object_add(hc, "MemorySwap", json_object_new_int64(c->memory));
    }
    if (c->nano_cpus)
        json_object_object_add(hc, "NanoCpus", json_object_new_int64(c->nano_cpus));
    if (c->pids_limit)
        json_object_object_add(hc, "PidsLimit", json_object_new_int64(c->pids_limit));
    json_object_object_add(hc, "ReadonlyRootfs",
                           json_object_new_boolean(c->read_only_rootfs));
    if (c->read_only_rootfs) {
        json_object *tmpfs = json_object_new_object();
        json_object_object_add(tmpfs, "/tmp", json_object_new_string("rw,nosuid,nodev"));
        json_object_object_add(hc, "Tmpfs", tmpfs);
    }
    static const char *const secopt[] = {"no-new-privileges:true", NULL};
    json_object_object_add(hc, "SecurityOpt", str_array(secopt));
    /* The daemon's default read-only paths (the list replaces them) plus
     * the cgroup file system: on a cgroup v1 host /sys/fs/cgroup is a
     * writable tmpfs under the read-only controllers, where root inside
     * could make files and directories (a fake cgroup.freeze); read-only,
     * nothing in it changes from inside, and the limits stay readable. */
    static const char *const ro_paths[] = {"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys",
                                           "/proc/sysrq-trigger", "/sys/fs/cgroup", NULL};
    json_object_object_add(hc, "ReadonlyPaths", str_array(ro_paths));
    json_object_object_add(hc, "Mounts", json_object_get(mounts));
    json_object *restart = json_object_new_object();
    json_object_object_add(restart, "Name", json_object_new_string("no"));
    json_object_object_add(hc, "RestartPolicy", restart);
    json_object_object_add(b, "HostConfig", hc);
    if (docker_ports_body(st, ports_text, b, hc) != 0) {
        json_object_put(b);
        return NULL;
    }
    return b;
}

/* The host source of the bind at target in a mount list (create spec or
 * inspect output), or NULL. */
static const char *bind_source(json_object *mounts, int from_inspect,
                               const char *target)
{
    size_t n = mounts && json_object_is_type(mounts, json_type_array)
                   ? json_object_array_length(mounts)
                   : 0;
    for (size_t i = 0; i < n; i++) {
        json_object *m = json_object_array_get_idx(mounts, i);
        const char *type = sbxp_json_str(m, "Type");
        const char *dst = sbxp_json_str(m, from_inspect ? "Destination" : "Target");
        if (type && dst && strcmp(type, "bind") == 0 && strcmp(dst, target) == 0)
            return sbxp_json_str(m, "Source");
    }
    return NULL;
}

static int dup_opt(const char *s, char **out)
{
    *out = s ? strdup(s) : NULL;
    return s && !*out ? -1 : 0;
}

static struct sbx_sandbox *new_handle(struct docker_state *st, const char *id,
                                      const char *key_hash, json_object *mounts,
                                      int from_inspect)
{
    struct sbx_sandbox *sb = calloc(1, sizeof *sb);
    if (!sb)
        return NULL;
    sb->st = st;
    snprintf(sb->id, sizeof sb->id, "%s", id);
    snprintf(sb->key_hash, sizeof sb->key_hash, "%s", key_hash);
    const char *up = bind_source(mounts, from_inspect, DOCKER_UPLOADS);
    const char *run = bind_source(mounts, from_inspect, DOCKER_AGENT_RUN);
    if (run) {
        size_t cap = strlen(run) + sizeof "/" DOCKER_AGENT_SOCK;
        if ((sb->agent_sock = malloc(cap)))
            snprintf(sb->agent_sock, cap, "%s/" DOCKER_AGENT_SOCK, run);
        sb->agent_dir = strdup(run);
    }
    atomic_init(&sb->agent_pid, 0);
    int bad = (run && (!sb->agent_sock || !sb->agent_dir)) || dup_opt(bind_source(mounts, from_inspect, DOCKER_OUTPUTS),
                      &sb->outputs_src) ||
              dup_opt(up, &sb->uploads_src) ||
              dup_opt(bind_source(mounts, from_inspect, DOCKER_SKILLS),
                      &sb->skills_src);
    if (!bad && up) {
        /* staging/ and skill-state/ are the uploads bind's siblings
         * (resources.c) */
        const char *slash = strrchr(up, '/');
        int n = slash ? (int)(slash - up) : 0;
        size_t cap = (size_t)n + sizeof "/skill-state";
        sb->staging = malloc(cap);
        sb->skill_state = malloc(cap);
        bad = !sb->staging || !sb->skill_state;
        if (!bad) {
            snprintf(sb->staging, cap, "%.*s/staging", n, up);
            snprintf(sb->skill_state, cap, "%.*s/skill-state", n, up);
        }
    }
    if (!bad)
        bad = docker_memory_from_mounts(sb, mounts, from_inspect) != 0;
    if (bad) {
        docker_release(sb);
        return NULL;
    }
    return sb;
}

static json_object *inspect_mounts(json_object *info)
{
    json_object *m;
    return json_object_object_get_ex(info, "Mounts", &m) ? m : NULL;
}

static int inspect(struct docker_state *st, sbx_call *call, const char *id_or_name,
                   json_object **info, sbxp_http_error *err)
{
    return docker_json(st, call, "GET", NULL, info, err, "/containers/%s/json",
                       id_or_name);
}

/*
 * Check that an inspected container is ours and unchanged, and make it run.
 * SBX_E_DENIED when labels, network or mounts do not match what we created.
 */
static int verify_and_start(struct docker_state *st, sbx_call *call,
                            json_object *info, const char *key_hash)
{
    const char *id = sbxp_json_str(info, "Id");
    const char *name = sbxp_json_str(info, "Name");
    const char *managed = label_of(info, DOCKER_LABEL_MANAGED);
    const char *owner = owner_of(info);
    if (!id)
        return st->host->set_error(st->host, call, SBX_E_PROTOCOL,
                                   "docker: container inspect without an Id");
    if (!managed || strcmp(managed, "true") != 0 || !owner)
        return st->host->set_error(st->host, call, SBX_E_DENIED,
                                   "docker: container %.12s (%s) is not managed by "
                                   "sbx",
                                   id, name ? name : "?");
    if (strcmp(owner, key_hash) != 0)
        return st->host->set_error(st->host, call, SBX_E_DENIED,
                                   "docker: container %.12s belongs to another "
                                   "session (owner %.12s..., expected %.12s...)",
                                   id, owner, key_hash);
    /* Network: the mode it was created with, and no network attached since. */
    const char *want_net = label_of(info, DOCKER_LABEL_NETWORK);
    const char *mode = sbxp_json_str(sbxp_json_obj(info, "HostConfig"), "NetworkMode");
    if (!want_net || !mode || strcmp(want_net, mode) != 0)
        return st->host->set_error(st->host, call, SBX_E_DENIED,
                                   "docker: container %.12s has network mode %s; it "
                                   "was created with %s",
                                   id, mode ? mode : "?", want_net ? want_net : "?");
    json_object *nets =
        sbxp_json_obj(sbxp_json_obj(info, "NetworkSettings"), "Networks");
    if (nets) {
        json_object_object_foreach(nets, net_name, net_val) {
            (void)net_val;
            if (strcmp(net_name, want_net) != 0)
                return st->host->set_error(
                    st->host, call, SBX_E_DENIED,
                    "docker: container %.12s was connected to network %s after it "
                    "was created with %s",
                    id, net_name, want_net);
        }
    }
    const char *want_mounts = label_of(info, DOCKER_LABEL_MOUNTS);
    char have_mounts[8192];
    if (!want_mounts || mounts_of_inspect(info, have_mounts, sizeof have_mounts) ||
        strcmp(want_mounts, have_mounts) != 0)
        return st->host->set_error(st->host, call, SBX_E_DENIED,
                                   "docker: container %.12s has mounts [%s]; it was "
                                   "created with [%s]",
                                   id, want_mounts ? have_mounts : "?",
                                   want_mounts ? want_mounts : "?");

    /* A bind whose host directory vanished would keep a stopped container
     * from starting: make them again (the skills are restored after). */
    static const char *const binds[] = {DOCKER_OUTPUTS, DOCKER_UPLOADS, DOCKER_SKILLS};
    for (size_t i = 0; i < sizeof binds / sizeof binds[0]; i++) {
        const char *src = bind_source(inspect_mounts(info), 1, binds[i]);
        if (src && docker_res_mkdirs(src, 0755) != 0)
            return st->host->set_error(st->host, call, SBX_E_IO,
                                       "docker: container %.12s: cannot make its "
                                       "bind directory %s: %s",
                                       id, src, strerror(errno));
    }
    json_object *ms = inspect_mounts(info);
    for (size_t i = 0, n = ms ? json_object_array_length(ms) : 0; i < n; i++) {
        json_object *m = json_object_array_get_idx(ms, i);
        const char *dst = sbxp_json_str(m, "Destination");
        const char *src = sbxp_json_str(m, "Source");
        if (dst && src && strncmp(dst, DOCKER_MEMORY "/", sizeof DOCKER_MEMORY) == 0 &&
            docker_res_mkdirs(src, 0755) != 0)
            return st->host->set_error(st->host, call, SBX_E_IO,
                                       "docker: container %.12s: cannot make its memory "
                                       "tree %s: %s",
                                       id, src, strerror(errno));
    }
    const char *run = bind_source(inspect_mounts(info), 1, DOCKER_AGENT_RUN);
    if (run && docker_res_mkdirs(run, 0700) != 0)
        return st->host->set_error(st->host, call, SBX_E_IO,
                                   "docker: container %.12s: cannot make its agent "
                                   "directory %s: %s",
                                   id, run, strerror(errno));

    json_object *state = sbxp_json_obj(info, "State");
    const char *status = sbxp_json_str(state, "Status");
    if (status && (strcmp(status, "removing") == 0 || strcmp(status, "dead") == 0))
        return st->host->set_error(st->host, call, SBX_E_NOT_FOUND,
                                   "docker: container %.12s is being removed", id);
    /* paused (by pause, or stopped by pause_mode stop): resumed here, and
     * the pause forgotten, under the session's pause lock (pause.c) */
    int started = 0;
    return docker_wake_container(st, call, id, key_hash, info, &started);
}

/* After a create that made no container: remove the resource directory
 * prepared for it, unless a container of this session has that name (made
 * meanwhile by another instance). Failures are only logged. */
static void forget_resources(struct docker_state *st, const char *name,
                             const char *key_hash)
{
    json_object *info = NULL;
    sbxp_http_error err;
    int rc = inspect(st, NULL, name, &info, &err);
    const char *owner = rc == SBX_OK ? owner_of(info) : NULL;
    int ours = owner && strcmp(owner, key_hash) == 0;
    json_object_put(info);
    if (rc == SBX_E_NOT_FOUND || (rc == SBX_OK && !ours))
        docker_res_remove(st, NULL, name);
}

/* Make /workspace belong to the configured user: a tar holding the one
 * directory entry, owned by that user, extracted over it. */
static int own_workspace(struct docker_state *st, sbx_call *call, const char *id);

/* A container this create made cannot be used (it did not start: a user
 * the image lacks, a uid out of range, a broken entrypoint...): remove it
 * and its resource directory, so that a failed create leaves nothing
 * behind. Runs even after a cancellation (no call), and only logs. */
static void discard_fresh(struct docker_state *st, const char *id, const char *name)
{
    sbxp_http_error err;
    int rc = docker_json(st, NULL, "DELETE", NULL, NULL, &err,
                         "/containers/%s?force=true&v=true", id);
    if (rc != SBX_OK && rc != SBX_E_NOT_FOUND) {
        st->host->log(st->host, SBX_LOG_WARN,
                      "docker: could not remove container %.12s after a failed "
                      "create: %s",
                      id, err.message);
        return; /* its resources stay bound to it */
    }
    if (docker_res_remove(st, NULL, name) != SBX_OK)
        st->host->log(st->host, SBX_LOG_WARN,
                      "docker: could not remove the resources of %s after a failed "
                      "create",
                      name);
}

/* POST /containers/create, pulling the image once when the Engine API
 * says it is missing (404 is its only 404 for this call). */
static int post_create(struct docker_state *st, sbx_call *call, const char *name,
                       json_object *body, int may_pull, json_object **created,
                       sbxp_http_error *err)
{
    int rc = SBX_OK;
    for (int attempt = 0; attempt < 2; attempt++) {
        rc = docker_json(st, call, "POST", body, created, err,
                         "/containers/create?name=%s", name);
        if (rc == SBX_E_NOT_FOUND && may_pull && attempt == 0 && err->http_status == 404) {
            if ((rc = docker_image_pull(st, call)) != SBX_OK)
                return rc;
            continue;
        }
        break;
    }
    if (rc == SBX_OK || rc == SBX_E_EXISTS)
        return rc;
    return docker_report(st, call, err, "creating container %s from %s", name,
                         st->cfg.image);
}

/* The session's container exists (an earlier create, maybe from another
 * instance): adopt it only if it is this key's. *info is its inspect. */
static int adopt_existing(struct docker_state *st, sbx_call *call, const char *name,
                          const char *key_hash, json_object **info, char id[65])
{
    sbxp_http_error err;
    if (inspect(st, call, name, info, &err) != SBX_OK)
        return docker_report(st, call, &err, "inspecting existing container %s", name);
    const char *owner = owner_of(*info);
    const char *cid = sbxp_json_str(*info, "Id");
    if (!owner || strcmp(owner, key_hash) != 0 || !cid || !valid_ref(cid)) {
        forget_resources(st, name, key_hash);
        return st->host->set_error(st->host, call, SBX_E_EXISTS,
                                   "docker: container %s exists and does not belong "
                                   "to this session",
                                   name);
    }
    snprintf(id, 65, "%s", cid);
    return SBX_OK;
}

/* The agent of a container that runs: answering, and speaking our
 * protocol. One that does not answer although its container runs
 * (wedged), or whose socket a process in the container replaced, gets the
 * container restarted once (its agent then makes its socket again); one
 * whose container stopped right after the start (it refused to start: a
 * user the image lacks) fails the call with its reason. */
int docker_agent_up(struct docker_state *st, sbx_call *call, sbx_sandbox *sb)
{
    if (!sb->agent_sock)
        return SBX_OK;
    int stopped, replaced;
    int rc = docker_agent_ready(sb, call, st->cfg.request_timeout_ms, &stopped, &replaced);
    if (!replaced && ((rc != SBX_E_UNAVAILABLE && rc != SBX_E_TIMEOUT) || stopped))
        return rc;
    st->host->log(st->host, SBX_LOG_WARN,
                  replaced ? "docker: the socket of the sbx agent of container %.12s was "
                             "replaced from inside the container; restarting the container"
                           : "docker: the sbx agent of container %.12s does not answer; "
                             "restarting the container",
                  sb->id);
    sbxp_http_error err;
    rc = docker_json(st, call, "POST", NULL, NULL, &err, "/containers/%s/restart?t=1",
                     sb->id);
    if (rc != SBX_OK)
        return docker_report(st, call, &err, "restarting container %.12s", sb->id);
    return docker_agent_ready(sb, call, st->cfg.request_timeout_ms, &stopped, &replaced);
}

/* The user the agent runs commands as: the configured one, else the
 * image's own (Config.User), which the agent's container does not get
 * (it runs as root). A missing image is pulled once. *out is malloc'd. */
static int agent_user_of(struct docker_state *st, sbx_call *call, char **out)
{
    *out = NULL;
    if (st->cfg.user) {
        *out = strdup(st->cfg.user);
        return *out ? SBX_OK : docker_error(st, call, SBX_E_NOMEM, "out of memory");
    }
    char *esc = sbxp_http_escape(st->cfg.image);
    if (!esc)
        return docker_error(st, call, SBX_E_NOMEM, "out of memory");
    json_object *info = NULL;
    sbxp_http_error err;
    int rc = SBX_OK;
    for (int attempt = 0; attempt < 2; attempt++) {
        rc = docker_json(st, call, "GET", NULL, &info, &err, "/images/%s/json", esc);
        if (rc == SBX_E_NOT_FOUND && attempt == 0) {
            if ((rc = docker_image_pull(st, call)) != SBX_OK)
                break;
            continue;
        }
        if (rc != SBX_OK)
            rc = docker_report(st, call, &err, "inspecting image %s", st->cfg.image);
        break;
    }
    free(esc);
    if (rc == SBX_OK) {
        const char *u = sbxp_json_str(sbxp_json_obj(info, "Config"), "User");
        *out = strdup(u ? u : "");
        if (!*out)
            rc = docker_error(st, call, SBX_E_NOMEM, "out of memory");
    }
    json_object_put(info);
    return rc;
}

/* The agent binary must be a regular file on this host (the daemon binds
 * it from there). */
static int agent_present(struct docker_state *st, sbx_call *call)
{
    struct stat s;
    if (stat(st->cfg.agent_path, &s) == 0 && S_ISREG(s.st_mode) && (s.st_mode & 0111))
        return SBX_OK;
    return docker_error(st, call, SBX_E_CONFIG,
                        "docker: the in-container agent %s is missing or not executable "
                        "(install sbx-agent next to docker.so, set "
                        "providers.docker.agent_path, or set providers.docker.agent: false "
                        "to use the Engine API for exec and files)",
                        st->cfg.agent_path);
}

/* A container we just made: a new workspace starts empty, even when a
 * container of the same name left its resource directory behind; then
 * start it and hand the workspace to the sandbox user. */
static int start_fresh(struct docker_state *st, sbx_call *call, const char *name,
                       const char *id, const char *key_hash, json_object *mounts,
                       sbx_sandbox **out)
{
    int rc = docker_res_empty(st, call, name);
    if (rc == SBX_OK)
        rc = docker_res_own_outputs(st, call, name);
    if (rc != SBX_OK)
        return rc;
    sbxp_http_error err;
    rc = docker_json(st, call, "POST", NULL, NULL, &err, "/containers/%s/start", id);
    if (rc != SBX_OK && err.http_status != 304)
        return docker_report(st, call, &err, "starting container %s", name);
    if ((rc = own_workspace(st, call, id)) != SBX_OK)
        return rc;
    *out = new_handle(st, id, key_hash, mounts, 0); /* mounts borrowed */
    if (*out && (rc = docker_agent_up(st, call, *out)) != SBX_OK) {
        docker_release(*out);
        *out = NULL;
    }
    return rc;
}

/* An adopted container: checked, started if stopped, skills repaired. */
static int resume_existing(struct docker_state *st, sbx_call *call, json_object *info,
                           const char *id, const char *key_hash, sbx_sandbox **out)
{
    int rc = verify_and_start(st, call, info, key_hash);
    if (rc != SBX_OK)
        return rc;
    *out = new_handle(st, id, key_hash, inspect_mounts(info), 1);
    if (*out && ((rc = docker_agent_up(st, call, *out)) != SBX_OK ||
                 (rc = docker_skills_repair(*out, call)) != SBX_OK)) {
        docker_release(*out);
        *out = NULL;
    }
    return rc;
}

static int create_from(struct docker_state *st, sbx_call *call,
                       const struct sbx_create_args *args, const char *fork_image,
                       char *ref, sbx_sandbox **out);

int docker_create(void *state, sbx_call *call, const struct sbx_create_args *args,
                  char *ref, sbx_sandbox **out)
{
    return create_from(state, call, args, NULL, ref, out);
}

/* The tag a fork's commit gets while the new container is made. */
static void fork_tag(const char *key_hash, char *out, size_t cap)
{
    snprintf(out, cap, "sbx-fork:%.*s", NAME_HASH_LEN, key_hash);
}

/* Drop the fork tag of key_hash (a leftover of a fork killed midway, or
 * the one just used): with force the tag goes even when a container uses
 * the image, and the image stays as long as one does. Only logs. */
static void drop_fork_tag(struct docker_state *st, const char *key_hash)
{
    char tag[64];
    fork_tag(key_hash, tag, sizeof tag);
    sbxp_http_error err;
    int rc = docker_json(st, NULL, "DELETE", NULL, NULL, &err, "/images/%s?force=true",
                         tag);
    if (rc != SBX_OK && rc != SBX_E_NOT_FOUND)
        st->host->log(st->host, SBX_LOG_WARN, "docker: could not remove the tag %s: %s",
                      tag, err.message);
}

/*
 * SBX_CAP_FORK: commit src's container (paused for the commit, or as it
 * is when paused already) to an image tagged after the new key, create
 * the new key's container from it exactly as create would (the new key's
 * labels, binds and resource directory: nothing bound into src is in a
 * commit), then drop the tag.
 */
int docker_fork(sbx_sandbox *src, sbx_call *call, const struct sbx_create_args *args,
                char *ref, sbx_sandbox **out)
{
    struct docker_state *st = src->st;
    *out = NULL;
    if (!args || !args->key_hash || strlen(args->key_hash) != SBX_KEY_HASH_LEN)
        return st->host->set_error(st->host, call, SBX_E_INVALID,
                                   "docker: fork needs a %d-character key hash",
                                   SBX_KEY_HASH_LEN);
    if (st->cfg.read_only_rootfs)
        return st->host->set_error(st->host, call, SBX_E_UNSUPPORTED,
                                   "docker: with read_only_rootfs the workspace is an "
                                   "anonymous volume, which a commit does not capture");
    int rc = docker_negotiate(st, call);
    if (rc != SBX_OK)
        return rc;
    char tag[64];
    fork_tag(args->key_hash, tag, sizeof tag);
    json_object *committed = NULL, *img = NULL;
    sbxp_http_error err;
    /* the Engine API wants a JSON body (the container's config as it is) */
    json_object *none = json_object_new_object();
    if (!none)
        return st->host->set_error(st->host, call, SBX_E_NOMEM, "out of memory");
    rc = docker_json(st, call, "POST", none, &committed, &err,
                     "/commit?container=%s&repo=sbx-fork&tag=%.*s&pause=true", src->id,
                     NAME_HASH_LEN, args->key_hash);
    json_object_put(none);
    if (rc != SBX_OK)
        return docker_report(st, call, &err, "committing container %.12s", src->id);
    char image[80];
    const char *iid = sbxp_json_str(committed, "Id");
    snprintf(image, sizeof image, "%s", iid ? iid : "");
    json_object_put(committed);
    if (strncmp(image, "sha256:", 7) != 0 || strlen(image) != 71) {
        drop_fork_tag(st, args->key_hash);
        return st->host->set_error(st->host, call, SBX_E_PROTOCOL,
                                   "docker: commit answered without a valid image Id");
    }
    /* A commit keeps the container's labels, and a container made from it
     * inherits those it does not set: one of ours the new container would
     * not get (a published port's) would be the old key's. */
    rc = docker_json(st, call, "GET", NULL, &img, &err, "/images/%s/json", image);
    if (rc != SBX_OK) {
        drop_fork_tag(st, args->key_hash);
        return docker_report(st, call, &err, "inspecting the commit of %.12s", src->id);
    }
    const char *ports = sbxp_json_str(sbxp_json_obj(sbxp_json_obj(img, "Config"), "Labels"),
                                      DOCKER_LABEL_PORTS);
    int new_ports = args->size >= SBX_CREATE_ARGS_SIZE_PORTS_1_2 && args->ports &&
                     args->ports[0];
    json_object_put(img);
    if (ports && ports[0] && !new_ports) {
        drop_fork_tag(st, args->key_hash);
        return st->host->set_error(st->host, call, SBX_E_UNSUPPORTED,
                                   "docker: the source publishes ports and the fork "
                                   "declares none: its image would carry the source's "
                                   "ports label");
    }
    rc = create_from(st, call, args, image, ref, out);
    drop_fork_tag(st, args->key_hash);
    return rc;
}

static int create_from(struct docker_state *st, sbx_call *call,
                       const struct sbx_create_args *args, const char *fork_image,
                       char *ref, sbx_sandbox **out)
{
    *out = NULL;
    if (!args || !args->key_hash || strlen(args->key_hash) != SBX_KEY_HASH_LEN)
        return st->host->set_error(st->host, call, SBX_E_INVALID,
                                   "docker: create needs a %d-character key hash",
                                   SBX_KEY_HASH_LEN);
    int rc = docker_negotiate(st, call);
    if (rc != SBX_OK)
        return rc;

    char name[sizeof NAME_PREFIX + NAME_HASH_LEN];
    snprintf(name, sizeof name, NAME_PREFIX "%.*s", NAME_HASH_LEN, args->key_hash);
    char ports_text[DOCKER_PORTS_TEXT];
    if ((rc = docker_ports_spec(st, call, args, ports_text)) != SBX_OK)
        return rc;
    char *agent_user = NULL;
    if (st->cfg.agent && ((rc = agent_present(st, call)) != SBX_OK ||
                          (rc = agent_user_of(st, call, &agent_user)) != SBX_OK))
        return rc;
    rc = docker_res_prepare(st, call, name);
    if (rc != SBX_OK) {
        free(agent_user);
        return rc;
    }
    json_object *mounts = NULL;
    if ((rc = mounts_spec(st, call, name, args, &mounts)) != SBX_OK) {
        free(agent_user);
        json_object_put(mounts);
        return rc;
    }
    char mounts_text[8192];
    json_object *body = NULL;
    if (!mounts_canon(mounts, 0, mounts_text, sizeof mounts_text))
        body = create_body(st, args, mounts, mounts_text, agent_user, ports_text,
                           fork_image);
    free(agent_user);
    if (!body) {
        json_object_put(mounts);
        return st->host->set_error(st->host, call, SBX_E_NOMEM, "out of memory");
    }

    json_object *created = NULL, *info = NULL;
    sbxp_http_error err;
    char id[65] = "";
    int fresh = 0;
    rc = post_create(st, call, name, body, fork_image == NULL, &created, &err);
    if (rc == SBX_OK) {
        const char *cid = sbxp_json_str(created, "Id");
        if (cid && valid_ref(cid)) {
            snprintf(id, sizeof id, "%s", cid);
            fresh = 1;
        } else {
            rc = st->host->set_error(st->host, call, SBX_E_PROTOCOL,
                                     "docker: container create answered without a "
                                     "valid Id");
        }
    } else if (rc == SBX_E_EXISTS) {
        rc = adopt_existing(st, call, name, args->key_hash, &info, id);
        /* A container cannot gain or lose a published port: a create that
         * declares other ports than it has fails (destroy and make it
         * again). One that declares none (the reconciler looking for the
         * key's resource) adopts it as it is. */
        const char *had = rc == SBX_OK ? label_of(info, DOCKER_LABEL_PORTS) : NULL;
        if (rc == SBX_OK && ports_text[0] && strcmp(had ? had : "", ports_text) != 0)
            rc = st->host->set_error(st->host, call, SBX_E_EXISTS,
                                     "docker: container %s was created with ports [%s], "
                                     "this create declares [%s]; destroy the session to "
                                     "change them",
                                     name, had ? had : "", ports_text);
    } else {
        forget_resources(st, name, args->key_hash);
    }
    if (rc == SBX_OK)
        rc = fresh ? start_fresh(st, call, name, id, args->key_hash, mounts, out)
                   : resume_existing(st, call, info, id, args->key_hash, out);
    if (rc == SBX_OK && !*out)
        rc = st->host->set_error(st->host, call, SBX_E_NOMEM, "out of memory");
    if (rc == SBX_OK &&
        docker_ports_set(*out, fresh ? ports_text : label_of(info, DOCKER_LABEL_PORTS)) != 0) {
        docker_release(*out);
        *out = NULL;
        rc = st->host->set_error(st->host, call, SBX_E_INTERNAL, "docker: ports label");
    }
    if (rc == SBX_OK)
        snprintf(ref, SBX_REF_MAX, "%s", id);
    else if (fresh)
        discard_fresh(st, id, name);
    json_object_put(mounts);
    json_object_put(body);
    json_object_put(created);
    json_object_put(info);
    return rc;
}

/* Common start of attach and destroy: a reference this provider made, the
 * key's hash from the host (for the ownership check) and a negotiated API
 * version. attach and destroy args share their layout up to ref. */
static int prepare_ref_call(struct docker_state *st, sbx_call *call, const char *op,
                            uint32_t size, const char *ref, const char *key_hash)
{
    const size_t need = offsetof(struct sbx_attach_args, ref) + sizeof(const char *);
    if (size < need)
        return st->host->set_error(st->host, call, SBX_E_INVALID,
                                   "docker: %s: argument struct too small (%u bytes)",
                                   op, size);
    if (!valid_ref(ref))
        return st->host->set_error(st->host, call, SBX_E_INVALID,
                                   "docker: \"%.80s\" is not a container reference "
                                   "made by this provider",
                                   ref ? ref : "");
    if (!key_hash || strlen(key_hash) != SBX_KEY_HASH_LEN)
        return st->host->set_error(st->host, call, SBX_E_INVALID,
                                   "docker: %s needs the session key's hash", op);
    return docker_negotiate(st, call);
}

int docker_attach(void *state, sbx_call *call, const struct sbx_attach_args *args,
                  sbx_sandbox **out)
{
    struct docker_state *st = state;
    *out = NULL;
    const char *ref = args->ref, *key_hash = args->key_hash;
    int rc = prepare_ref_call(st, call, "attach", args->size, ref, key_hash);
    if (rc != SBX_OK)
        return rc;
    json_object *info = NULL;
    sbxp_http_error err;
    rc = inspect(st, call, ref, &info, &err);
    if (rc == SBX_E_NOT_FOUND)
        return st->host->set_error(st->host, call, SBX_E_NOT_FOUND,
                                   "docker: container %.12s no longer exists (the "
                                   "workspace is gone)",
                                   ref);
    if (rc != SBX_OK)
        return docker_report(st, call, &err, "inspecting container %.12s", ref);
    rc = verify_and_start(st, call, info, key_hash);
    if (rc == SBX_OK)
        *out = new_handle(st, ref, key_hash, inspect_mounts(info), 1);
    if (*out && docker_ports_set(*out, label_of(info, DOCKER_LABEL_PORTS)) != 0) {
        docker_release(*out);
        *out = NULL;
        rc = st->host->set_error(st->host, call, SBX_E_DENIED,
                                 "docker: container %.12s has a malformed %s label",
                                 ref, DOCKER_LABEL_PORTS);
    }
    json_object_put(info);
    if (rc != SBX_OK)
        return rc;
    if (!*out)
        return st->host->set_error(st->host, call, SBX_E_NOMEM, "out of memory");
    /* the agent must answer (and speak our protocol), and skills must be
     * whole, before a restarted process uses them */
    rc = docker_agent_up(st, call, *out);
    if (rc == SBX_OK)
        rc = docker_skills_repair(*out, call);
    if (rc != SBX_OK) {
        docker_release(*out);
        *out = NULL;
        return rc;
    }
    return SBX_OK;
}

/* After the container `ref` is gone: remove the session's resource
 * directory, unless a newer container of the same name (a later create for
 * the same key) still has it bound. */
static int remove_resources(struct docker_state *st, sbx_call *call, const char *name,
                            const char *ref)
{
    json_object *info = NULL;
    sbxp_http_error err;
    int rc = inspect(st, call, name, &info, &err);
    if (rc == SBX_OK) {
        const char *id = sbxp_json_str(info, "Id");
        int newer = id && strcmp(id, ref) != 0;
        json_object_put(info);
        if (newer)
            return SBX_OK;
    } else if (rc != SBX_E_NOT_FOUND) {
        return docker_report(st, call, &err, "inspecting container %s", name);
    }
    return docker_res_remove(st, call, name);
}

int docker_destroy(void *state, sbx_call *call, const struct sbx_destroy_args *args)
{
    struct docker_state *st = state;
    const char *ref = args->ref, *key_hash = args->key_hash;
    int rc = prepare_ref_call(st, call, "destroy", args->size, ref, key_hash);
    if (rc != SBX_OK)
        return rc;
    char name[sizeof NAME_PREFIX + NAME_HASH_LEN];
    snprintf(name, sizeof name, NAME_PREFIX "%.*s", NAME_HASH_LEN, key_hash);
    json_object *info = NULL;
    sbxp_http_error err;
    rc = inspect(st, call, ref, &info, &err);
    if (rc == SBX_E_NOT_FOUND)
        return remove_resources(st, call, name, ref); /* already gone */
    if (rc != SBX_OK)
        return docker_report(st, call, &err, "inspecting container %.12s", ref);
    const char *owner = owner_of(info);
    if (!owner || strcmp(owner, key_hash) != 0) {
        json_object_put(info);
        return st->host->set_error(st->host, call, SBX_E_DENIED,
                                   "docker: container %.12s does not belong to this "
                                   "session; not removing it",
                                   ref);
    }
    char fork_image[80];
    const char *fi = label_of(info, DOCKER_LABEL_FORK_IMAGE);
    snprintf(fork_image, sizeof fork_image, "%s",
             fi && !strncmp(fi, "sha256:", 7) && strlen(fi) == 71 ? fi : "");
    json_object_put(info);
    rc = docker_json(st, call, "DELETE", NULL, NULL, &err,
                     "/containers/%s?force=true&v=true", ref);
    if (rc == SBX_OK || rc == SBX_E_NOT_FOUND) {
        drop_fork_tag(st, key_hash);
        /* the fork's image, unless another container (a fork of this
         * fork) still uses it: then it goes with that one */
        if (fork_image[0] &&
            docker_json_within(st, NULL, 60000, "DELETE", NULL, NULL, &err, "/images/%s",
                               fork_image) != SBX_OK)
            st->host->log(st->host, SBX_LOG_WARN, "docker: image %.19s kept: %s",
                          fork_image, err.message);
    }
    if (rc == SBX_E_NOT_FOUND)
        return remove_resources(st, call, name, ref);
    if (rc == SBX_E_EXISTS) {
        /* "removal already in progress": wait for it to finish */
        for (int i = 0; i < 100; i++) {
            rc = inspect(st, call, ref, NULL, &err);
            if (rc == SBX_E_NOT_FOUND)
                return remove_resources(st, call, name, ref);
            struct timespec ts = {0, 100 * 1000 * 1000};
            nanosleep(&ts, NULL);
        }
        return st->host->set_error(st->host, call, SBX_E_UNAVAILABLE,
                                   "docker: container %.12s is still being removed",
                                   ref);
    }
    if (rc != SBX_OK)
        return docker_report(st, call, &err, "removing container %.12s", ref);
    return remove_resources(st, call, name, ref);
}

const char *docker_root(sbx_sandbox *sb)
{
    (void)sb;
    return DOCKER_WORKSPACE;
}

void docker_release(sbx_sandbox *sb)
{
    if (!sb)
        return;
    free(sb->outputs_src);
    free(sb->uploads_src);
    free(sb->skills_src);
    free(sb->staging);
    free(sb->skill_state);
    free(sb->agent_sock);
    free(sb->agent_dir);
    docker_memory_free(sb);
    docker_procs_free(sb);
    free(sb);
}

/* ---------------------------------------------------------------------- */

static int own_workspace(struct docker_state *st, sbx_call *call, const char *id)
{
    /* With a read-only root filesystem the workspace volume keeps the owner
     * of the image's /workspace (docs/providers/docker.md). Under the agent,
     * the agent does it (--own-workspace). */
    if (!st->cfg.user || st->cfg.read_only_rootfs || st->cfg.agent)
        return SBX_OK;
    enum { TAR_MAX = 16384 };
    unsigned char *buf = malloc(TAR_MAX);
    if (!buf)
        return st->host->set_error(st->host, call, SBX_E_NOMEM, "out of memory");
    size_t used = 0;
    int64_t uid, gid;
    const char *owner_query = docker_upload_owner(&st->cfg, &uid, &gid);
    struct archive *a = archive_write_new();
    struct archive_entry *e = archive_entry_new();
    int ok = a && e && archive_write_set_format_pax_restricted(a) == ARCHIVE_OK &&
             archive_write_set_bytes_per_block(a, 512) == ARCHIVE_OK &&
             archive_write_open_memory(a, buf, TAR_MAX, &used) == ARCHIVE_OK;
    if (ok) {
        archive_entry_set_pathname(e, DOCKER_WORKSPACE + 1);
        archive_entry_set_filetype(e, AE_IFDIR);
        archive_entry_set_perm(e, 0755);
        archive_entry_set_uid(e, uid);
        archive_entry_set_gid(e, gid);
        archive_entry_set_mtime(e, time(NULL), 0);
        ok = archive_write_header(a, e) == ARCHIVE_OK &&
             archive_write_close(a) == ARCHIVE_OK;
    }
    if (e)
        archive_entry_free(e);
    if (a)
        archive_write_free(a);
    if (!ok) {
        free(buf);
        return st->host->set_error(st->host, call, SBX_E_INTERNAL,
                                   "docker: building the workspace archive failed");
    }
    /* The daemon skips the extraction root itself, so the directory entry
     * is extracted into "/". */
    char path[256];
    docker_path(st, path, sizeof path, "/containers/%s/archive?path=%%2F%s", id,
                owner_query);
    struct sbxp_call_cancel dc;
    sbxp_call_cancel_init(&dc, st->host, call);
    struct sbxp_http_request req = {0};
    req.method = "PUT";
    req.path = path;
    req.content_type = "application/x-tar";
    req.body = buf;
    req.body_len = used;
    req.cancel = &dc.c;
    req.timeout_ms = st->cfg.request_timeout_ms;
    sbxp_http_error err;
    int rc = sbxp_http_request(st->http, &req, NULL, NULL, &err);
    free(buf);
    if (rc != SBX_OK)
        return docker_report(st, call, &err, "giving %s to user %s in container %.12s",
                             DOCKER_WORKSPACE, st->cfg.user, id);
    return SBX_OK;
}
