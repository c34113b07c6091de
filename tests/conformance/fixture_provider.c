/*
 * fixture_provider.c - "cfixture", a deliberately breakable provider for
 * proving that the conformance suite fails what it should.
 *
 * It wraps the real `local` provider (dlopened from the path in the
 * `inner` key; `root` is read by local through the same host table) and
 * can break one contract at a time, chosen by the `break` key:
 *   none                  behave like local (the suite must pass)
 *   attach_ignores_owner  attach opens the sandbox whatever the key
 *   stderr_to_stdout      exec sends stderr to the stdout sink
 *   read_unconfined       read_file follows any path, even out of the
 *                         workspace (writes stay confined: the fixture
 *                         must never damage the machine it runs on)
 *   hoard_output          exec keeps a copy of all stdout in memory
 *   signal_ignored        exec starts the command with SIGPIPE ignored
 *                         (through a sh wrapper that traps it)
 *   signal_as_exit        exec reports a command killed by a signal as
 *                         exit code 0, term_signal 0
 *   write_in_place        write_file truncates the target and writes it
 *                         chunk by chunk as the source delivers, without a
 *                         temporary file (confined to the workspace like
 *                         local: openat2 below the workspace directory)
 *   crash_in_exec         every exec kills the host process with SIGSEGV
 *   sigpipe_in_exec       every exec writes to a pipe without a reader,
 *                         SIGPIPE unblocked: the host process dies of it
 *   hang_in_exec          every exec sleeps for 10 minutes, ignoring
 *                         cancellation (for the suite's per-case deadline)
 *   egress_merge          egress_set adds the targets but never removes
 *                         the ones no longer listed
 *   egress_default_allow  egress_get reports a default of allow
 *   egress_forget         attach drops the recorded egress policy
 *   read_fifo_blocks      read_file opens the file (confined, like local)
 *                         blocking and without checking its type: a FIFO
 *                         without a writer hangs the read
 *   mode_unchecked        write_file drops the bits outside 0777 instead of
 *                         refusing them
 *   ref_malformed_not_found  attach and destroy of a reference that is not
 *                         one of cfixture's say SBX_E_NOT_FOUND
 *   cwd_missing_root      exec with a cwd that is missing or not a directory
 *                         runs the command in the workspace root
 *   fd_leak               exec starts the command with a descriptor of the
 *                         workspace directory open (fd 9, through a sh
 *                         wrapper), as a provider that keeps a root fd
 *                         without O_CLOEXEC
 *   leftovers_group_only  exec runs the command itself (not through local)
 *                         and, when it exits, kills its process group only:
 *                         what left the group (setsid) survives
 *   destroy_waits         destroy waits for the owner's running commands to
 *                         end instead of killing them
 *
 * Built a second time as "dfixture" (FX_MEMORY defined), a wrapper of the
 * docker provider that also declares MEMORY (ABI 1.1) and forwards its
 * ops, with these breaks:
 *   memory_ro_writable    create makes every attachment read-write, and
 *                         diff reports nothing for the ones that were
 *                         read-only (writes there neither refused nor told)
 *   memory_load_ignored   memory_load reads the archive and drops it
 *   memory_diff_blind     memory_diff reports no change at all
 *   memory_attach_accepts attach accepts each tree as it is (a provider
 *                         that "repairs" its mounts at attach): what a
 *                         crashed host did not write back is forgotten
 *
 * EGRESS (ABI 1.1) is kept in memory, per owner key hash, for the life of
 * the process (a conformance case, restarts included, runs in one).
 *
 * Built a second time with FX_USERS as "cfusers", which also declares
 * SBX_CAP_USERS: group_add and user_add only record names and ids in
 * memory (same id again is accepted, another is SBX_E_EXISTS, an unknown
 * group SBX_E_NOT_FOUND) and exec, read_file and write_file ignore
 * sbx_host.call_user - the provider that claims users and honours none,
 * which the users cases must fail.
 *
 * Built a third time with FX_PROCS as "cfproc", which also declares the
 * ABI 1.2 capabilities PROCESSES, PTY, FILE_OPS and PORTS
 * (fixture_procs.c, fixture_files.c, fixture_ports.c: host processes with
 * replay buffers, openpty, confined *at calls, a loopback forwarder per
 * port), with one break mode per contract the 1.2 cases check:
 *   pty_not_terminal      SBX_PROC_PTY runs the command on pipes
 *   buffer_drops_silently bytes pushed out of the replay buffer are
 *                         forgotten without being counted as lost
 *   cursor_repeats        every read starts 16 bytes before the cursor
 *   proc_survives_destroy destroy leaves the processes running and listed
 *   list_follows_symlink  file_list follows a symlink named last (out of
 *                         the workspace; it only reads names)
 *   port_all_interfaces   ports are published on 0.0.0.0, not loopback
 *   proc_ids_unchecked    any sandbox may use any process id
 *   buffer_grows          buffer_bytes is ignored: a flooding process's
 *                         output is kept, up to 64 MiB, never dropped
 * It also declares PAUSE (pause stops its processes with SIGSTOP, resume
 * continues them; a paused mark per owner key hash, kept for the life of
 * the process, makes every op resume first) and POOL, with
 *   pause_keeps_running   pause marks the sandbox paused and stops nothing
 *   pause_loses_workspace resume removes the workspace's top-level files
 *   resume_not_transparent an op on a paused sandbox fails (UNAVAILABLE)
 *   pause_not_idempotent  pausing a paused sandbox is SBX_E_INVALID
 *   pool_checks_session_key attach refuses a session key other than the one
 *                         create got (ownership by key, not key hash)
 * and FORK (fixture_fork.c: the new sandbox made as create makes it, the
 * source's workspace tree copied into it; the source is left as it was),
 * with
 *   fork_follows_symlinks a symlink to a file becomes a copy of the file
 *   fork_drops_modes      files become 0644 and directories 0755
 *   fork_hardlinks        regular files are hard-linked, not copied
 *   fork_keeps_old_key    the source's key may attach the fork too
 *   fork_stops_source     the source's processes are killed by the fork
 *   fork_resumes_source   a paused source is resumed by the fork
 *   fork_gone_unchecked   a fork of a destroyed sandbox makes an empty one
 * and three that break what libsbx itself checks (test_libsbx_1_2.c):
 *   cursor_skips          proc_read's new cursor is one past the bytes
 *   list_name_slash       file_list names every entry "../escape"
 *   proc_id_malformed     proc_start returns the id "fxp/../1"
 *
 * Its references are "fx<&>:" + hex(session key) + ":" + local's reference:
 * the owner's key travels in the reference so that the broken attach can
 * open the sandbox for anybody, and the markup characters make sure the
 * suite's reports escape references it quotes.
 */
#include <sbx/provider.h>

#include "confine.h"
#ifdef FX_PROCS
#include "fixture_fork.h"
#include "fixture_procs.h"
#endif

#include <dirent.h>
#include <dlfcn.h>
#include <stdbool.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define FX_PREFIX "fx<&>:"

enum fx_break {
    FX_NONE,
    FX_ATTACH_IGNORES_OWNER,
    FX_STDERR_TO_STDOUT,
    FX_READ_UNCONFINED,
    FX_HOARD_OUTPUT,
    FX_SIGNAL_AS_EXIT,
    FX_SIGNAL_IGNORED,
    FX_WRITE_IN_PLACE,
    FX_CRASH_IN_EXEC,
    FX_SIGPIPE_IN_EXEC,
    FX_HANG_IN_EXEC,
    FX_EGRESS_MERGE,
    FX_EGRESS_DEFAULT_ALLOW,
    FX_EGRESS_FORGET,
    FX_READ_FIFO_BLOCKS,
    FX_MODE_UNCHECKED,
    FX_REF_MALFORMED_NOT_FOUND,
    FX_CWD_MISSING_ROOT,
    FX_FD_LEAK,
    FX_LEFTOVERS_GROUP_ONLY,
    FX_DESTROY_WAITS,
    FX_MEMORY_RO_WRITABLE,
    FX_MEMORY_LOAD_IGNORED,
    FX_MEMORY_DIFF_BLIND,
    FX_MEMORY_ATTACH_ACCEPTS,
    FX_PTY_NOT_TERMINAL,
    FX_BUFFER_DROPS_SILENTLY,
    FX_CURSOR_REPEATS,
    FX_PROC_SURVIVES_DESTROY,
    FX_LIST_FOLLOWS_SYMLINK,
    FX_PORT_ALL_INTERFACES,
    FX_PROC_IDS_UNCHECKED,
    FX_BUFFER_GROWS,
    FX_CURSOR_SKIPS,
    FX_LIST_NAME_SLASH,
    FX_PROC_ID_MALFORMED,
    FX_PAUSE_KEEPS_RUNNING,
    FX_PAUSE_LOSES_WORKSPACE,
    FX_RESUME_NOT_TRANSPARENT,
    FX_PAUSE_NOT_IDEMPOTENT,
    FX_POOL_CHECKS_SESSION_KEY,
    FX_FORK_FOLLOWS_SYMLINKS,
    FX_FORK_DROPS_MODES,
    FX_FORK_HARDLINKS,
    FX_FORK_KEEPS_OLD_KEY,
    FX_FORK_STOPS_SOURCE,
    FX_FORK_RESUMES_SOURCE,
    FX_FORK_GONE_UNCHECKED
};

static const struct {
    const char *name;
    enum fx_break mode;
} fx_modes[] = {
    {"none", FX_NONE},
    {"attach_ignores_owner", FX_ATTACH_IGNORES_OWNER},
    {"stderr_to_stdout", FX_STDERR_TO_STDOUT},
    {"read_unconfined", FX_READ_UNCONFINED},
    {"hoard_output", FX_HOARD_OUTPUT},
    {"signal_as_exit", FX_SIGNAL_AS_EXIT},
    {"signal_ignored", FX_SIGNAL_IGNORED},
    {"write_in_place", FX_WRITE_IN_PLACE},
    {"crash_in_exec", FX_CRASH_IN_EXEC},
    {"sigpipe_in_exec", FX_SIGPIPE_IN_EXEC},
    {"hang_in_exec", FX_HANG_IN_EXEC},
    {"egress_merge", FX_EGRESS_MERGE},
    {"egress_default_allow", FX_EGRESS_DEFAULT_ALLOW},
    {"egress_forget", FX_EGRESS_FORGET},
    {"read_fifo_blocks", FX_READ_FIFO_BLOCKS},
    {"mode_unchecked", FX_MODE_UNCHECKED},
    {"ref_malformed_not_found", FX_REF_MALFORMED_NOT_FOUND},
    {"cwd_missing_root", FX_CWD_MISSING_ROOT},
    {"fd_leak", FX_FD_LEAK},
    {"leftovers_group_only", FX_LEFTOVERS_GROUP_ONLY},
    {"destroy_waits", FX_DESTROY_WAITS},
    {"memory_ro_writable", FX_MEMORY_RO_WRITABLE},
    {"memory_load_ignored", FX_MEMORY_LOAD_IGNORED},
    {"memory_diff_blind", FX_MEMORY_DIFF_BLIND},
    {"memory_attach_accepts", FX_MEMORY_ATTACH_ACCEPTS},
    {"pty_not_terminal", FX_PTY_NOT_TERMINAL},
    {"buffer_drops_silently", FX_BUFFER_DROPS_SILENTLY},
    {"cursor_repeats", FX_CURSOR_REPEATS},
    {"proc_survives_destroy", FX_PROC_SURVIVES_DESTROY},
    {"list_follows_symlink", FX_LIST_FOLLOWS_SYMLINK},
    {"port_all_interfaces", FX_PORT_ALL_INTERFACES},
    {"proc_ids_unchecked", FX_PROC_IDS_UNCHECKED},
    {"buffer_grows", FX_BUFFER_GROWS},
    {"cursor_skips", FX_CURSOR_SKIPS},
    {"list_name_slash", FX_LIST_NAME_SLASH},
    {"proc_id_malformed", FX_PROC_ID_MALFORMED},
    {"pause_keeps_running", FX_PAUSE_KEEPS_RUNNING},
    {"pause_loses_workspace", FX_PAUSE_LOSES_WORKSPACE},
    {"resume_not_transparent", FX_RESUME_NOT_TRANSPARENT},
    {"pause_not_idempotent", FX_PAUSE_NOT_IDEMPOTENT},
    {"pool_checks_session_key", FX_POOL_CHECKS_SESSION_KEY},
    {"fork_follows_symlinks", FX_FORK_FOLLOWS_SYMLINKS},
    {"fork_drops_modes", FX_FORK_DROPS_MODES},
    {"fork_hardlinks", FX_FORK_HARDLINKS},
    {"fork_keeps_old_key", FX_FORK_KEEPS_OLD_KEY},
    {"fork_stops_source", FX_FORK_STOPS_SOURCE},
    {"fork_resumes_source", FX_FORK_RESUMES_SOURCE},
    {"fork_gone_unchecked", FX_FORK_GONE_UNCHECKED},
};

#ifdef FX_PROCS
/* The 1.2 defect a break mode selects (FXP_NONE for the others). */
static int fxp_mode(enum fx_break m)
{
    switch (m) {
    case FX_PTY_NOT_TERMINAL: return FXP_PTY_NOT_TERMINAL;
    case FX_BUFFER_DROPS_SILENTLY: return FXP_BUFFER_DROPS_SILENTLY;
    case FX_CURSOR_REPEATS: return FXP_CURSOR_REPEATS;
    case FX_PROC_SURVIVES_DESTROY: return FXP_SURVIVES_DESTROY;
    case FX_LIST_FOLLOWS_SYMLINK: return FXP_LIST_FOLLOWS_SYMLINK;
    case FX_PORT_ALL_INTERFACES: return FXP_PORT_ALL_INTERFACES;
    case FX_PROC_IDS_UNCHECKED: return FXP_IDS_UNCHECKED;
    case FX_BUFFER_GROWS: return FXP_BUFFER_GROWS;
    case FX_CURSOR_SKIPS: return FXP_CURSOR_SKIPS;
    case FX_LIST_NAME_SLASH: return FXP_LIST_NAME_SLASH;
    case FX_PROC_ID_MALFORMED: return FXP_ID_MALFORMED;
    default: return FXP_NONE;
    }
}
#endif

struct fx_state {
    const struct sbx_host *host;
    const struct sbx_provider_ops *inner;
    void *inner_state;
    enum fx_break mode;
};

struct sbx_sandbox {
    struct fx_state *st;
    sbx_sandbox *inner; /* local's handle */
    char owner[SBX_KEY_HASH_LEN + 1];
};

#ifdef FX_PROCS
/* ---- pause, per owner (SBX_CAP_PAUSE), and the keys create got ------------ */

#define FX_PAUSE_SLOTS 64
static struct {
    char owner[SBX_KEY_HASH_LEN + 1];
    char key[128];  /* the session key create got (pool_checks_session_key) */
    bool paused;
} fx_pause_tab[FX_PAUSE_SLOTS];
static pthread_mutex_t fx_pause_lock = PTHREAD_MUTEX_INITIALIZER;

/* The slot of owner (made when `make`), or -1. Called with the lock. */
static int pause_slot(const char *owner, int make)
{
    int free_slot = -1;
    for (int i = 0; i < FX_PAUSE_SLOTS; i++) {
        if (!strcmp(fx_pause_tab[i].owner, owner))
            return i;
        if (!fx_pause_tab[i].owner[0] && free_slot < 0)
            free_slot = i;
    }
    if (make && free_slot >= 0)
        snprintf(fx_pause_tab[free_slot].owner, sizeof fx_pause_tab[0].owner, "%s", owner);
    return make ? free_slot : -1;
}

static bool fx_is_paused(const char *owner)
{
    pthread_mutex_lock(&fx_pause_lock);
    int i = pause_slot(owner, 0);
    bool paused = i >= 0 && fx_pause_tab[i].paused;
    pthread_mutex_unlock(&fx_pause_lock);
    return paused;
}

static void fx_set_paused(const char *owner, bool paused)
{
    pthread_mutex_lock(&fx_pause_lock);
    int i = pause_slot(owner, 1);
    if (i >= 0)
        fx_pause_tab[i].paused = paused;
    pthread_mutex_unlock(&fx_pause_lock);
}

static void fx_record_key(const char *owner, const char *key)
{
    pthread_mutex_lock(&fx_pause_lock);
    int i = pause_slot(owner, 1);
    if (i >= 0)
        snprintf(fx_pause_tab[i].key, sizeof fx_pause_tab[0].key, "%s", key ? key : "");
    pthread_mutex_unlock(&fx_pause_lock);
}

/* Whether key is the one create got for owner (unknown owners pass). */
static bool fx_key_matches(const char *owner, const char *key)
{
    pthread_mutex_lock(&fx_pause_lock);
    int i = pause_slot(owner, 0);
    bool ok = i < 0 || !fx_pause_tab[i].key[0] || !strcmp(fx_pause_tab[i].key, key ? key : "");
    pthread_mutex_unlock(&fx_pause_lock);
    return ok;
}

static void fx_forget_pause(const char *owner)
{
    pthread_mutex_lock(&fx_pause_lock);
    int i = pause_slot(owner, 0);
    if (i >= 0)
        memset(&fx_pause_tab[i], 0, sizeof fx_pause_tab[i]);
    pthread_mutex_unlock(&fx_pause_lock);
}

static const char *fx_root(sbx_sandbox *sb);
static void fx_release(sbx_sandbox *sb);

/* The deliberate loss of pause_loses_workspace: the regular files at the
 * top of the workspace go (beneath its directory, nothing followed). */
static void lose_workspace(sbx_sandbox *sb)
{
    int fd = open(fx_root(sb), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return;
    DIR *d = fdopendir(fd);
    if (!d) {
        close(fd);
        return;
    }
    struct dirent *de;
    while ((de = readdir(d)))
        if (de->d_type == DT_REG)
            unlinkat(dirfd(d), de->d_name, 0);
    closedir(d);
}

static int fx_resume(sbx_sandbox *sb, sbx_call *call);

/* Every op on a paused sandbox resumes it first (or, broken, fails). */
static int fx_awake(sbx_sandbox *sb, sbx_call *call)
{
    if (!fx_is_paused(sb->owner))
        return SBX_OK;
    if (sb->st->mode == FX_RESUME_NOT_TRANSPARENT)
        return sb->st->host->set_error(sb->st->host, call, SBX_E_UNAVAILABLE,
                                       "cfproc: the sandbox is paused");
    return fx_resume(sb, call);
}
#define FX_AWAKE(sb, call)                          \
    do {                                            \
        int awake_rc_ = fx_awake((sb), (call));     \
        if (awake_rc_ != SBX_OK)                    \
            return awake_rc_;                       \
    } while (0)
#else
#define FX_AWAKE(sb, call) ((void)0)
#endif

/* ---- memory attachments, per owner (for memory_attach_accepts) ----------- */

#define FX_MEMORY_SLOTS 32
static struct {
    char owner[SBX_KEY_HASH_LEN + 1];
    char slug[64];
    int read_only;
} fx_memory[FX_MEMORY_SLOTS];
static pthread_mutex_t fx_memory_lock = PTHREAD_MUTEX_INITIALIZER;

static void memory_record(const char *owner, const char *slug, int read_only)
{
    pthread_mutex_lock(&fx_memory_lock);
    for (int i = 0; i < FX_MEMORY_SLOTS; i++)
        if (!fx_memory[i].owner[0]) {
            snprintf(fx_memory[i].owner, sizeof fx_memory[i].owner, "%s", owner);
            snprintf(fx_memory[i].slug, sizeof fx_memory[i].slug, "%s", slug);
            fx_memory[i].read_only = read_only;
            break;
        }
    pthread_mutex_unlock(&fx_memory_lock);
}

/* ---- egress policies, per owner ------------------------------------------ */

#define FX_EGRESS_SLOTS 64
#define FX_EGRESS_TARGETS 16
static struct {
    char owner[SBX_KEY_HASH_LEN + 1];
    size_t n;
    char target[FX_EGRESS_TARGETS][128];
} fx_egress[FX_EGRESS_SLOTS];
static pthread_mutex_t fx_egress_lock = PTHREAD_MUTEX_INITIALIZER;

/* The slot of owner (made when create is set), or -1. Lock held. */
static int egress_slot(const char *owner, int create)
{
    int free_slot = -1;
    for (int i = 0; i < FX_EGRESS_SLOTS; i++) {
        if (!strcmp(fx_egress[i].owner, owner))
            return i;
        if (!fx_egress[i].owner[0] && free_slot < 0)
            free_slot = i;
    }
    if (create && free_slot >= 0) {
        snprintf(fx_egress[free_slot].owner, sizeof fx_egress[free_slot].owner, "%s", owner);
        fx_egress[free_slot].n = 0;
    }
    return create ? free_slot : -1;
}

/* Record policy p for owner; merge keeps the targets already there. */
static int egress_record(struct fx_state *st, sbx_call *call, const char *owner,
                         const struct sbx_egress_policy *p, int merge)
{
    pthread_mutex_lock(&fx_egress_lock);
    int i = egress_slot(owner, 1);
    int rc = SBX_OK;
    if (i < 0) {
        rc = SBX_E_NOMEM;
    } else {
        if (!merge)
            fx_egress[i].n = 0;
        for (size_t k = 0; p->allow && p->allow[k]; k++) {
            size_t j = 0;
            while (j < fx_egress[i].n && strcmp(fx_egress[i].target[j], p->allow[k]))
                j++;
            if (j < fx_egress[i].n)
                continue;
            if (fx_egress[i].n == FX_EGRESS_TARGETS || strlen(p->allow[k]) >= 128) {
                rc = SBX_E_INVALID;
                break;
            }
            snprintf(fx_egress[i].target[fx_egress[i].n++], 128, "%s", p->allow[k]);
        }
    }
    pthread_mutex_unlock(&fx_egress_lock);
    if (rc != SBX_OK)
        return st->host->set_error(st->host, call, rc, "cfixture: egress policy too large");
    return SBX_OK;
}

static int fx_init(const struct sbx_host *host, sbx_call *call, void **state)
{
    const char *inner_path = host->config_get(host, "inner");
    const char *mode = host->config_get(host, "break");
    if (!inner_path)
        return host->set_error(host, call, SBX_E_CONFIG,
                               "cfixture: key 'inner' (path of local.so) is required");
    enum fx_break m = FX_NONE;
    size_t i = 0;
    while (mode && i < sizeof fx_modes / sizeof fx_modes[0] &&
           strcmp(mode, fx_modes[i].name) != 0)
        i++;
    if (mode && i == sizeof fx_modes / sizeof fx_modes[0])
        return host->set_error(host, call, SBX_E_CONFIG,
                               "cfixture: unknown break mode '%s'", mode);
    if (mode)
        m = fx_modes[i].mode;
    /* Never dlclosed, like every provider. */
    void *dl = dlopen(inner_path, RTLD_NOW | RTLD_LOCAL);
    if (!dl)
        return host->set_error(host, call, SBX_E_CONFIG, "cfixture: %s", dlerror());
    sbx_provider_describe_fn describe =
        (sbx_provider_describe_fn)dlsym(dl, SBX_PROVIDER_ENTRY);
    const struct sbx_provider_desc *d = describe ? describe() : NULL;
    if (!d || d->abi_major != SBX_ABI_MAJOR || !d->ops)
        return host->set_error(host, call, SBX_E_ABI,
                               "cfixture: %s is not a provider of this ABI",
                               inner_path);
    struct fx_state *st = calloc(1, sizeof *st);
    if (!st)
        return host->set_error(host, call, SBX_E_NOMEM, "cfixture: out of memory");
    st->host = host;
    st->inner = d->ops;
    st->mode = m;
    int rc = st->inner->init(host, call, &st->inner_state);
    if (rc != SBX_OK) {
        free(st);
        return rc;
    }
    *state = st;
    return SBX_OK;
}

static void fx_fini(void *state)
{
    struct fx_state *st = state;
    st->inner->fini(st->inner_state);
    free(st);
}

static int wrap(struct fx_state *st, sbx_call *call, sbx_sandbox *inner, const char *owner,
                sbx_sandbox **out)
{
    sbx_sandbox *sb = calloc(1, sizeof *sb);
    if (!sb) {
        st->inner->release(inner);
        return st->host->set_error(st->host, call, SBX_E_NOMEM,
                                   "cfixture: out of memory");
    }
    sb->st = st;
    sb->inner = inner;
    snprintf(sb->owner, sizeof sb->owner, "%s", owner);
    *out = sb;
    return SBX_OK;
}

static int fx_create(void *state, sbx_call *call, const struct sbx_create_args *args,
                     char *ref, sbx_sandbox **out)
{
    struct fx_state *st = state;
    char inner_ref[SBX_REF_MAX];
    sbx_sandbox *inner = NULL;
    struct sbx_create_args a = *args;
    struct sbx_memory_attachment rw[16];
    const struct sbx_memory_attachment *rwp[17];
    if (args->size >= SBX_CREATE_ARGS_SIZE_MEMORY_1_1 && args->memory) {
        size_t n = 0;
        for (; args->memory[n] && n < 16; n++) {
            memory_record(args->key_hash, args->memory[n]->slug,
                          args->memory[n]->access != SBX_MEMORY_READ_WRITE);
            rw[n] = *args->memory[n];
            /* The deliberate defect: read-only attachments made writable. */
            if (st->mode == FX_MEMORY_RO_WRITABLE)
                rw[n].access = SBX_MEMORY_READ_WRITE;
            rwp[n] = &rw[n];
        }
        rwp[n] = NULL;
        a.memory = rwp;
    }
    int rc = st->inner->create(st->inner_state, call, &a, inner_ref, &inner);
    if (rc != SBX_OK)
        return rc;
    if (strlen(FX_PREFIX) + SBX_KEY_HASH_LEN + 1 + strlen(inner_ref) >= SBX_REF_MAX) {
        st->inner->release(inner);
        return st->host->set_error(st->host, call, SBX_E_INVALID,
                                   "cfixture: inner reference too long");
    }
    size_t used = (size_t)snprintf(ref, SBX_REF_MAX, "%s%s:", FX_PREFIX, args->key_hash);
    memcpy(ref + used, inner_ref, strlen(inner_ref) + 1);
    if (args->size >= SBX_CREATE_ARGS_SIZE_EGRESS_1_1 && args->egress &&
        (rc = egress_record(st, call, args->key_hash, args->egress, 0)) != SBX_OK) {
        st->inner->release(inner);
        return rc;
    }
#ifdef FX_PROCS
    fx_record_key(args->key_hash, args->session_key);
    if (args->size >= SBX_CREATE_ARGS_SIZE_PORTS_1_2 && args->ports &&
        (rc = fxp_ports_declare(st->host, call, args->key_hash, args->ports,
                                fxp_mode(st->mode))) != SBX_OK) {
        st->inner->release(inner);
        return rc;
    }
#endif
    return wrap(st, call, inner, args->key_hash, out);
}

/* Split a reference into the owner's key hash and local's reference. */
static int parse_ref(struct fx_state *st, sbx_call *call, const char *ref,
                     char owner[SBX_KEY_HASH_LEN + 1], const char **inner_ref)
{
    size_t pl = strlen(FX_PREFIX);
    if (strncmp(ref, FX_PREFIX, pl) != 0 || strlen(ref) < pl + SBX_KEY_HASH_LEN + 1 ||
        ref[pl + SBX_KEY_HASH_LEN] != ':')
        /* The deliberate defect of ref_malformed_not_found. */
        return st->host->set_error(st->host, call,
                                   st->mode == FX_REF_MALFORMED_NOT_FOUND ? SBX_E_NOT_FOUND
                                                                          : SBX_E_INVALID,
                                   "cfixture: not a cfixture reference");
    memcpy(owner, ref + pl, SBX_KEY_HASH_LEN);
    owner[SBX_KEY_HASH_LEN] = '\0';
    *inner_ref = ref + pl + SBX_KEY_HASH_LEN + 1;
    return SBX_OK;
}

static int fx_attach(void *state, sbx_call *call, const struct sbx_attach_args *args,
                     sbx_sandbox **out)
{
    struct fx_state *st = state;
    char owner[SBX_KEY_HASH_LEN + 1];
    const char *inner_ref = NULL;
    int rc = parse_ref(st, call, args->ref, owner, &inner_ref);
    if (rc != SBX_OK)
        return rc;
    struct sbx_attach_args inner_args = *args;
    inner_args.ref = inner_ref;
#ifdef FX_PROCS
    /* The deliberate defect of pool_checks_session_key: ownership by the
     * key create got, not by its hash. */
    if (st->mode == FX_POOL_CHECKS_SESSION_KEY && !fx_key_matches(owner, args->session_key))
        return st->host->set_error(st->host, call, SBX_E_DENIED,
                                   "cfproc: the sandbox was made for another session key");
#endif
    /* The deliberate defect: the caller's key is not checked. */
    if (st->mode == FX_ATTACH_IGNORES_OWNER)
        inner_args.key_hash = owner;
#ifdef FX_PROCS
    /* The deliberate defect of fork_keeps_old_key: the source's key opens
     * the fork as well, as labels copied over with the snapshot would. */
    if (st->mode == FX_FORK_KEEPS_OLD_KEY && fxf_is_parent(owner, args->key_hash))
        inner_args.key_hash = owner;
#endif
    sbx_sandbox *inner = NULL;
    rc = st->inner->attach(st->inner_state, call, &inner_args, &inner);
    if (rc != SBX_OK)
        return rc;
    if (st->mode == FX_MEMORY_ATTACH_ACCEPTS && st->inner->memory_accept) {
        pthread_mutex_lock(&fx_memory_lock);
        for (int i = 0; i < FX_MEMORY_SLOTS; i++)
            if (!strcmp(fx_memory[i].owner, args->key_hash))
                st->inner->memory_accept(inner, call, fx_memory[i].slug);
        pthread_mutex_unlock(&fx_memory_lock);
    }
    if (st->mode == FX_EGRESS_FORGET) {
        pthread_mutex_lock(&fx_egress_lock);
        int i = egress_slot(args->key_hash, 0);
        if (i >= 0)
            fx_egress[i].n = 0;
        pthread_mutex_unlock(&fx_egress_lock);
    }
#ifdef FX_PROCS
    rc = wrap(st, call, inner, args->key_hash, out);
    if (rc == SBX_OK && (rc = fx_awake(*out, call)) != SBX_OK) {
        fx_release(*out);
        *out = NULL;
    }
    return rc;
#else
    return wrap(st, call, inner, args->key_hash, out);
#endif
}

/* ---- commands running, per owner (for destroy_waits) --------------------- */

#define FX_RUNNING_SLOTS 32
static struct {
    char owner[SBX_KEY_HASH_LEN + 1];
    unsigned n;
} fx_running[FX_RUNNING_SLOTS];
static pthread_mutex_t fx_running_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t fx_running_cv = PTHREAD_COND_INITIALIZER;

/* Count a command of owner as started (delta 1) or ended (-1). */
static void running_add(const char *owner, int delta)
{
    pthread_mutex_lock(&fx_running_lock);
    int free_slot = -1, i = 0;
    for (; i < FX_RUNNING_SLOTS; i++) {
        if (fx_running[i].n && !strcmp(fx_running[i].owner, owner))
            break;
        if (!fx_running[i].n && free_slot < 0)
            free_slot = i;
    }
    if (i == FX_RUNNING_SLOTS && delta > 0 && free_slot >= 0) {
        i = free_slot;
        snprintf(fx_running[i].owner, sizeof fx_running[i].owner, "%s", owner);
    }
    if (i < FX_RUNNING_SLOTS)
        fx_running[i].n += (unsigned)delta;
    pthread_cond_broadcast(&fx_running_cv);
    pthread_mutex_unlock(&fx_running_lock);
}

/* Wait until owner has no command running. */
static void running_wait(const char *owner)
{
    pthread_mutex_lock(&fx_running_lock);
    for (;;) {
        int busy = 0;
        for (int i = 0; i < FX_RUNNING_SLOTS; i++)
            busy |= fx_running[i].n && !strcmp(fx_running[i].owner, owner);
        if (!busy)
            break;
        pthread_cond_wait(&fx_running_cv, &fx_running_lock);
    }
    pthread_mutex_unlock(&fx_running_lock);
}

static int fx_destroy(void *state, sbx_call *call, const struct sbx_destroy_args *args)
{
    struct fx_state *st = state;
    char owner[SBX_KEY_HASH_LEN + 1];
    const char *inner_ref = NULL;
    int rc = parse_ref(st, call, args->ref, owner, &inner_ref);
    if (rc != SBX_OK)
        return rc;
    struct sbx_destroy_args inner_args = *args;
    inner_args.ref = inner_ref;
    if (st->mode == FX_DESTROY_WAITS)
        running_wait(owner); /* the deliberate defect */
#ifdef FX_PROCS
    /* Only for a reference of the caller's own key: parse_ref's owner is
     * what the reference says, which local checks below. */
    if (!strcmp(owner, args->key_hash)) {
        fx_forget_pause(owner);
        fxp_procs_destroy(owner, fxp_mode(st->mode));
        fxp_ports_destroy(owner);
    }
#endif
    return st->inner->destroy(st->inner_state, call, &inner_args);
}

/* The deliberate defect of hoard_output: a sink that keeps everything. */
struct hoard {
    const struct sbx_sink *next;
    unsigned char *buf;
    size_t len, cap;
};

static int hoard_write(void *ctx, const void *data, size_t len)
{
    struct hoard *h = ctx;
    if (h->len + len > h->cap) {
        size_t cap = (h->len + len) * 2;
        unsigned char *nb = realloc(h->buf, cap);
        if (!nb)
            return SBX_E_NOMEM;
        h->buf = nb;
        h->cap = cap;
    }
    memcpy(h->buf + h->len, data, len);
    h->len += len;
    return h->next ? h->next->write(h->next->ctx, data, len) : SBX_OK;
}

/* The deliberate defect of crash_in_exec: the host process dies of
 * SIGSEGV. The default action is restored first so that the death is the
 * same whatever handler the host (or a sanitizer) installed, and no core
 * file is written for a crash made on purpose. */
static void crash_host(void)
{
    struct rlimit no_core = {0, 0};
    (void)setrlimit(RLIMIT_CORE, &no_core);
    signal(SIGSEGV, SIG_DFL);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGSEGV);
    pthread_sigmask(SIG_UNBLOCK, &set, NULL);
    raise(SIGSEGV);
}

/* The deliberate defect of sigpipe_in_exec: a write to a pipe whose reader
 * is gone, with SIGPIPE unblocked (what local's stdin feeder avoids by
 * blocking it in its thread). SIGPIPE is set to its default action first,
 * so that the host process dies of it even if it ignores SIGPIPE. */
static void sigpipe_host(void)
{
    int p[2];
    if (pipe2(p, O_CLOEXEC) < 0)
        return;
    close(p[0]);
    signal(SIGPIPE, SIG_DFL);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGPIPE);
    pthread_sigmask(SIG_UNBLOCK, &set, NULL);
    ssize_t n = write(p[1], "x", 1);
    (void)n;
    close(p[1]);
}

/* The deliberate defect of hang_in_exec: no return for 10 minutes. */
static void hang(void)
{
    struct timespec ts = {600, 0};
    while (nanosleep(&ts, &ts) != 0)
        ;
}

/* ---- leftovers_group_only: a command run without local --------------------- */

static int64_t fx_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* One chunk of fd to sink; closes fd (-1) at EOF or error. */
static void pump(int *fd, const struct sbx_sink *sink, uint64_t *count)
{
    char buf[16384];
    ssize_t n = read(*fd, buf, sizeof buf);
    if (n < 0 && (errno == EINTR || errno == EAGAIN))
        return;
    if (n <= 0) {
        close(*fd);
        *fd = -1;
        return;
    }
    *count += (uint64_t)n;
    if (sink)
        (void)sink->write(sink->ctx, buf, (size_t)n);
}

/*
 * The deliberate defect of leftovers_group_only: the command runs as the
 * leader of a process group, and when it exits (after a 250 ms drain) the
 * group is killed, nothing else. stdin is empty; timeouts and
 * cancellation kill the group too. Runs in the workspace root, or cwd.
 */
static int exec_group_only(sbx_sandbox *sb, sbx_call *call, const struct sbx_exec_args *args,
                           struct sbx_exec_result *res)
{
    const struct sbx_host *host = sb->st->host;
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s/%s", sb->st->inner->root(sb->inner),
             args->cwd ? args->cwd : "");
    static const char *const no_env[] = {"PATH=/usr/local/bin:/usr/bin:/bin", NULL};
    const char *const *env = args->env ? args->env : no_env;
    int out[2], err[2];
    if (pipe2(out, O_CLOEXEC) < 0)
        return host->set_error(host, call, SBX_E_IO, "cfixture: pipe: %s", strerror(errno));
    if (pipe2(err, O_CLOEXEC) < 0) {
        close(out[0]);
        close(out[1]);
        return host->set_error(host, call, SBX_E_IO, "cfixture: pipe: %s", strerror(errno));
    }
    pid_t pid = fork();
    if (pid == 0) {
        sigset_t none;
        sigemptyset(&none);
        int devnull = open("/dev/null", O_RDONLY);
        setpgid(0, 0);
        if (devnull < 0 || dup2(devnull, 0) < 0 || dup2(out[1], 1) < 0 ||
            dup2(err[1], 2) < 0 || chdir(dir) < 0)
            _exit(126);
        sigprocmask(SIG_SETMASK, &none, NULL);
        execvpe(args->argv[0], (char *const *)args->argv, (char *const *)env);
        _exit(127);
    }
    close(out[1]);
    close(err[1]);
    if (pid < 0) {
        close(out[0]);
        close(err[0]);
        return host->set_error(host, call, SBX_E_IO, "cfixture: fork: %s", strerror(errno));
    }
    int64_t start = fx_now_ms(), drain_end = -1;
    int status = 0, exited = 0, killed = 0, rc = SBX_OK;
    while (out[0] >= 0 || err[0] >= 0 || !exited) {
        if (!exited && waitpid(pid, &status, WNOHANG) == pid) {
            exited = 1;
            drain_end = fx_now_ms() + 250;
        }
        int64_t now = fx_now_ms();
        if (!killed && ((args->timeout_ms > 0 && now - start >= args->timeout_ms) ||
                        host->cancelled(host, call))) {
            res->timed_out = !host->cancelled(host, call);
            if (!res->timed_out)
                rc = host->set_error(host, call, SBX_E_CANCELLED, "cfixture: cancelled");
            kill(-pid, SIGKILL);
            killed = 1;
        }
        if (exited && now >= drain_end)
            break;
        struct pollfd pf[2] = {{out[0], POLLIN, 0}, {err[0], POLLIN, 0}};
        if (poll(pf, 2, 20) > 0) {
            if (out[0] >= 0 && pf[0].revents)
                pump(&out[0], args->out, &res->out_bytes);
            if (err[0] >= 0 && pf[1].revents)
                pump(&err[0], args->err, &res->err_bytes);
        }
    }
    kill(-pid, SIGKILL); /* the group only */
    if (out[0] >= 0)
        close(out[0]);
    if (err[0] >= 0)
        close(err[0]);
    if (rc != SBX_OK)
        return rc;
    if (WIFSIGNALED(status)) {
        res->exit_code = -1;
        res->term_signal = WTERMSIG(status);
    } else {
        res->exit_code = WEXITSTATUS(status);
    }
    return SBX_OK;
}

static int fx_exec_modes(sbx_sandbox *sb, sbx_call *call, const struct sbx_exec_args *args,
                         struct sbx_exec_result *res);

/* Whether cwd names something that is not a directory of the workspace
 * (missing, or a file): confined lookup, like local's. */
static int cwd_unusable(sbx_sandbox *sb, const char *cwd)
{
    if (!cwd || !*cwd || sbxp_confine_check_path(cwd) < 0)
        return 0;
    int rootfd = open(sb->st->inner->root(sb->inner), O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (rootfd < 0)
        return 0;
    int fd = sbxp_confine_open(rootfd, cwd, O_PATH | O_DIRECTORY, 0);
    close(rootfd);
    if (fd >= 0)
        close(fd);
    return fd == -ENOENT || fd == -ENOTDIR;
}

static int fx_exec(sbx_sandbox *sb, sbx_call *call, const struct sbx_exec_args *args,
                   struct sbx_exec_result *res)
{
    FX_AWAKE(sb, call);
    struct sbx_exec_args a = *args;
    const char *wrapped[64] = {"sh", "-c", "exec 9< .; exec \"$@\"", "sh"};
    switch (sb->st->mode) {
    case FX_CWD_MISSING_ROOT:
        if (cwd_unusable(sb, args->cwd))
            a.cwd = NULL; /* the deliberate defect */
        break;
    case FX_FD_LEAK: {
        /* The deliberate defect: fd 9 is the workspace directory. */
        size_t n = 4;
        for (size_t i = 0; args->argv[i] && n + 1 < 64; i++)
            wrapped[n++] = args->argv[i];
        wrapped[n] = NULL;
        a.argv = wrapped;
        break;
    }
    default:
        break;
    }
    running_add(sb->owner, 1);
    int rc = sb->st->mode == FX_LEFTOVERS_GROUP_ONLY ? exec_group_only(sb, call, &a, res)
                                                     : fx_exec_modes(sb, call, &a, res);
    running_add(sb->owner, -1);
    return rc;
}

static int fx_exec_modes(sbx_sandbox *sb, sbx_call *call, const struct sbx_exec_args *args,
                         struct sbx_exec_result *res)
{
    const struct sbx_host *host = sb->st->host;
    switch (sb->st->mode) {
    case FX_CRASH_IN_EXEC:
        crash_host();
        return host->set_error(host, call, SBX_E_INTERNAL,
                               "cfixture: survived SIGSEGV");
    case FX_SIGPIPE_IN_EXEC:
        sigpipe_host();
        return host->set_error(host, call, SBX_E_INTERNAL,
                               "cfixture: survived SIGPIPE");
    case FX_HANG_IN_EXEC:
        hang();
        return host->set_error(host, call, SBX_E_TIMEOUT,
                               "cfixture: hung for 10 minutes");
    default:
        break;
    }
    struct sbx_exec_args a = *args;
    if (sb->st->mode == FX_STDERR_TO_STDOUT)
        a.err = a.out; /* the deliberate defect */
    if (sb->st->mode == FX_SIGNAL_AS_EXIT) {
        int rc = sb->st->inner->exec(sb->inner, call, &a, res);
        /* The deliberate defect: a death by signal looks like success.
         * Timeouts keep their report (their own case checks them). */
        if (rc == SBX_OK && res->term_signal != 0 && !res->timed_out) {
            res->exit_code = 0;
            res->term_signal = 0;
        }
        return rc;
    }
    if (sb->st->mode == FX_SIGNAL_IGNORED) {
        /* The deliberate defect: the command inherits an ignored SIGPIPE,
         * as from a host that ignores it and spawns without resetting. */
        const char *wrapped[64] = {"sh", "-c", "trap '' PIPE; exec \"$@\"", "sh"};
        size_t n = 4;
        for (size_t i = 0; args->argv[i] && n + 1 < 64; i++)
            wrapped[n++] = args->argv[i];
        wrapped[n] = NULL;
        a.argv = wrapped;
        return sb->st->inner->exec(sb->inner, call, &a, res);
    }
    if (sb->st->mode != FX_HOARD_OUTPUT)
        return sb->st->inner->exec(sb->inner, call, &a, res);
    struct hoard h = {args->out, NULL, 0, 0};
    struct sbx_sink hoarding = SBX_SINK_INIT(&h, hoard_write);
    a.out = &hoarding;
    int rc = sb->st->inner->exec(sb->inner, call, &a, res);
    free(h.buf);
    return rc;
}

/* The deliberate defect: a plain open() of root/path. */
static int read_unconfined(sbx_sandbox *sb, sbx_call *call, const char *path,
                           const struct sbx_sink *sink)
{
    const struct sbx_host *host = sb->st->host;
    char full[PATH_MAX];
    const char *root = sb->st->inner->root(sb->inner);
    if (path[0] == '/')
        snprintf(full, sizeof full, "%s", path);
    else
        snprintf(full, sizeof full, "%s/%s", root, path);
    /* Only the confinement is broken: a FIFO is refused as local does. */
    int fd = open(full, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return host->set_error(host, call,
                               errno == ENOENT ? SBX_E_NOT_FOUND : SBX_E_IO,
                               "cfixture: %s: %s", path, strerror(errno));
    struct stat fst;
    if (fstat(fd, &fst) < 0 || !S_ISREG(fst.st_mode) || fcntl(fd, F_SETFL, 0) < 0) {
        close(fd);
        return host->set_error(host, call, SBX_E_INVALID, "cfixture: %s: not a regular file",
                               path);
    }
    char buf[4096];
    ssize_t n;
    int rc = SBX_OK;
    while (rc == SBX_OK && (n = read(fd, buf, sizeof buf)) > 0)
        rc = sink->write(sink->ctx, buf, (size_t)n);
    close(fd);
    return rc;
}

static int fx_errno_status(int err);

/* The deliberate defect of read_fifo_blocks: confined like local, but a
 * blocking open without a type check. */
static int read_blocking(sbx_sandbox *sb, sbx_call *call, const char *path,
                         const struct sbx_sink *sink)
{
    const struct sbx_host *host = sb->st->host;
    if (sbxp_confine_check_path(path) < 0)
        return host->set_error(host, call, SBX_E_INVALID,
                               "cfixture: read: '%s' leads out of the workspace", path);
    int rootfd = open(sb->st->inner->root(sb->inner), O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (rootfd < 0)
        return host->set_error(host, call, SBX_E_IO, "cfixture: workspace: %s",
                               strerror(errno));
    int fd = sbxp_confine_open(rootfd, path, O_RDONLY | O_NOFOLLOW, 0);
    close(rootfd);
    if (fd < 0)
        return host->set_error(host, call, fx_errno_status(-fd), "cfixture: read: '%s': %s",
                               path, strerror(-fd));
    char buf[4096];
    ssize_t n;
    int rc = SBX_OK;
    while (rc == SBX_OK && (n = read(fd, buf, sizeof buf)) > 0)
        rc = sink->write(sink->ctx, buf, (size_t)n);
    close(fd);
    return rc;
}

static int fx_read_file(sbx_sandbox *sb, sbx_call *call, const char *path,
                        const struct sbx_sink *sink)
{
    FX_AWAKE(sb, call);
    if (sb->st->mode == FX_READ_FIFO_BLOCKS)
        return read_blocking(sb, call, path, sink);
    if (sb->st->mode == FX_READ_UNCONFINED)
        return read_unconfined(sb, call, path, sink);
    return sb->st->inner->read_file(sb->inner, call, path, sink);
}

/* Map an errno of a confined lookup or open to a status. */
static int fx_errno_status(int err)
{
    switch (err) {
    case EXDEV:
    case ELOOP:
    case EISDIR:
    case ENOTDIR:
    case ENXIO:
    case ENAMETOOLONG:
        return SBX_E_INVALID;
    case ENOENT:
        return SBX_E_NOT_FOUND;
    case EACCES:
    case EPERM:
        return SBX_E_DENIED;
    default:
        return SBX_E_IO;
    }
}

/* Copy the source into fd as it arrives, one write per chunk. */
static int copy_in_place(const struct sbx_source *src, int fd)
{
    char buf[16 * 1024];
    for (;;) {
        long n = src->read(src->ctx, buf, sizeof buf);
        if (n < 0)
            return SBX_E_IO; /* the part already written stays: the defect */
        if (n == 0)
            return SBX_OK;
        for (long off = 0; off < n;) {
            ssize_t w = write(fd, buf + off, (size_t)(n - off));
            if (w < 0 && errno == EINTR)
                continue;
            if (w < 0)
                return SBX_E_IO;
            off += w;
        }
    }
}

/*
 * The deliberate defect of write_in_place: the target itself is truncated
 * and written, so a reader sees a part and a failed source leaves one.
 * Everything else follows local's rules, and every lookup goes through
 * openat2(RESOLVE_BENEATH) from the workspace directory (local's root is
 * the absolute workspace path): this fixture never writes outside it.
 */
static int write_in_place(sbx_sandbox *sb, sbx_call *call, const char *path,
                          const struct sbx_source *src, unsigned mode)
{
    const struct sbx_host *host = sb->st->host;
    if (mode & ~0777u)
        return host->set_error(host, call, SBX_E_INVALID,
                               "cfixture: write: mode %#o is not a permission", mode);
    if (mode == 0)
        mode = 0644;
    if (sbxp_confine_check_path(path) < 0)
        return host->set_error(host, call, SBX_E_INVALID,
                               "cfixture: write: '%s' leads out of the workspace",
                               path);
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    if (!*base || !strcmp(base, ".") || !strcmp(base, ".."))
        return host->set_error(host, call, SBX_E_INVALID,
                               "cfixture: write: '%s' does not name a file", path);
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - path) : 0, path);

    int rootfd = open(sb->st->inner->root(sb->inner), O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (rootfd < 0)
        return host->set_error(host, call, SBX_E_IO, "cfixture: workspace: %s",
                               strerror(errno));
    int dirfd = sbxp_confine_mkdirs(rootfd, dir, 0755);
    close(rootfd);
    if (dirfd < 0)
        return host->set_error(host, call, fx_errno_status(-dirfd),
                               "cfixture: write: '%s': %s", path, strerror(-dirfd));
    /* O_NONBLOCK: a FIFO must not hang the open; non-files are refused. */
    int fd = sbxp_confine_open(dirfd, base,
                               O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_NONBLOCK, mode);
    close(dirfd);
    if (fd < 0)
        return host->set_error(host, call, fx_errno_status(-fd),
                               "cfixture: write: '%s': %s", path, strerror(-fd));
    struct stat st;
    int rc = SBX_OK;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
        rc = host->set_error(host, call, SBX_E_INVALID,
                             "cfixture: write: '%s' is not a regular file", path);
    if (rc == SBX_OK && (fcntl(fd, F_SETFL, 0) < 0 || fchmod(fd, mode) < 0))
        rc = host->set_error(host, call, SBX_E_IO, "cfixture: write: '%s': %s",
                             path, strerror(errno));
    if (rc == SBX_OK)
        rc = copy_in_place(src, fd);
    if (close(fd) < 0 && rc == SBX_OK)
        rc = host->set_error(host, call, SBX_E_IO, "cfixture: write: '%s': %s",
                             path, strerror(errno));
    return rc;
}

static int fx_write_file(sbx_sandbox *sb, sbx_call *call, const char *path,
                         const struct sbx_source *src, unsigned mode)
{
    FX_AWAKE(sb, call);
    if (sb->st->mode == FX_MODE_UNCHECKED)
        mode &= 0777u; /* the deliberate defect */
    if (sb->st->mode == FX_WRITE_IN_PLACE)
        return write_in_place(sb, call, path, src, mode);
    return sb->st->inner->write_file(sb->inner, call, path, src, mode);
}

static const char *fx_root(sbx_sandbox *sb)
{
    return sb->st->inner->root(sb->inner);
}

static void fx_release(sbx_sandbox *sb)
{
    sb->st->inner->release(sb->inner);
    free(sb);
}

static int fx_egress_set(sbx_sandbox *sb, sbx_call *call, const struct sbx_egress_policy *p)
{
    if (p->default_action != SBX_EGRESS_DENY)
        return sb->st->host->set_error(sb->st->host, call, SBX_E_INVALID,
                                       "cfixture: the default must be deny");
    return egress_record(sb->st, call, sb->owner, p, sb->st->mode == FX_EGRESS_MERGE);
}

static int fx_egress_get(sbx_sandbox *sb, sbx_call *call, struct sbx_egress_report *out)
{
    (void)call;
    char copy[FX_EGRESS_TARGETS][128];
    size_t n = 0;
    pthread_mutex_lock(&fx_egress_lock);
    int i = egress_slot(sb->owner, 0);
    if (i >= 0) {
        n = fx_egress[i].n;
        memcpy(copy, fx_egress[i].target, sizeof copy);
    }
    pthread_mutex_unlock(&fx_egress_lock);
    out->default_action =
        sb->st->mode == FX_EGRESS_DEFAULT_ALLOW ? SBX_EGRESS_ALLOW : SBX_EGRESS_DENY;
    for (size_t k = 0; k < n; k++) {
        int rc = out->allow ? out->allow(out->ctx, copy[k]) : 0;
        if (rc)
            return rc;
    }
    return SBX_OK;
}

#ifdef FX_USERS
/* ---- users that exist only here (cfusers) ------------------------------- */

#define FX_ACCOUNTS 64

static struct fx_account {
    char owner[SBX_KEY_HASH_LEN + 1];
    char name[40];
    uint32_t id;
    int is_user;
} fx_accounts[FX_ACCOUNTS];
static pthread_mutex_t fx_accounts_lock = PTHREAD_MUTEX_INITIALIZER;

static struct fx_account *account(const char *owner, const char *name, int is_user)
{
    for (size_t i = 0; i < FX_ACCOUNTS; i++)
        if (fx_accounts[i].name[0] && fx_accounts[i].is_user == is_user &&
            !strcmp(fx_accounts[i].owner, owner) && !strcmp(fx_accounts[i].name, name))
            return &fx_accounts[i];
    return NULL;
}

static int account_add(sbx_sandbox *sb, sbx_call *call, const char *name, uint32_t id,
                       int is_user, const char *const *groups)
{
    const struct sbx_host *h = sb->st->host;
    pthread_mutex_lock(&fx_accounts_lock);
    int rc = SBX_OK;
    struct fx_account *a = account(sb->owner, name, is_user);
    for (size_t i = 0; rc == SBX_OK && groups && groups[i]; i++)
        if (!account(sb->owner, groups[i], 0))
            rc = h->set_error(h, call, SBX_E_NOT_FOUND, "cfusers: no group %s", groups[i]);
    if (rc == SBX_OK && a && id && a->id != id)
        rc = h->set_error(h, call, SBX_E_EXISTS, "cfusers: %s has id %u", name, a->id);
    for (size_t i = 0; rc == SBX_OK && !a && i < FX_ACCOUNTS; i++)
        if (!fx_accounts[i].name[0]) {
            a = &fx_accounts[i];
            snprintf(a->owner, sizeof a->owner, "%s", sb->owner);
            snprintf(a->name, sizeof a->name, "%s", name);
            a->id = id ? id : 1000 + (uint32_t)i;
            a->is_user = is_user;
        }
    if (rc == SBX_OK && !a)
        rc = h->set_error(h, call, SBX_E_NOMEM, "cfusers: too many accounts");
    pthread_mutex_unlock(&fx_accounts_lock);
    return rc;
}

static int fx_group_add(sbx_sandbox *sb, sbx_call *call, const struct sbx_group_spec *g)
{
    return account_add(sb, call, g->name, g->gid, 0, NULL);
}

static int fx_user_add(sbx_sandbox *sb, sbx_call *call, const struct sbx_user_spec *u)
{
    return account_add(sb, call, u->name, u->uid, 1, u->groups);
}
#endif

#ifdef FX_MEMORY
static int fx_memory_load(sbx_sandbox *sb, sbx_call *call, const char *slug,
                          const struct sbx_source *tar)
{
    if (sb->st->mode == FX_MEMORY_LOAD_IGNORED) {
        char buf[65536];
        long n;
        while ((n = tar->read(tar->ctx, buf, sizeof buf)) > 0)
            ;
        return n < 0 ? SBX_E_IO : SBX_OK;
    }
    return sb->st->inner->memory_load(sb->inner, call, slug, tar);
}

static int drop_bytes(void *ctx, const void *buf, size_t len)
{
    (void)ctx;
    (void)buf;
    (void)len;
    return 0;
}

static int drop_path(void *ctx, const char *path)
{
    (void)ctx;
    (void)path;
    return 0;
}

static int fx_memory_diff(sbx_sandbox *sb, sbx_call *call, const char *slug, uint32_t flags,
                          const struct sbx_memory_changes *out)
{
    int was_read_only = 0;
    pthread_mutex_lock(&fx_memory_lock);
    for (int i = 0; i < FX_MEMORY_SLOTS; i++)
        if (!strcmp(fx_memory[i].owner, sb->owner) && !strcmp(fx_memory[i].slug, slug))
            was_read_only = fx_memory[i].read_only;
    pthread_mutex_unlock(&fx_memory_lock);
    if (sb->st->mode == FX_MEMORY_DIFF_BLIND ||
        (sb->st->mode == FX_MEMORY_RO_WRITABLE && was_read_only)) {
        /* the inner diff runs (and is dropped); an empty archive is told */
        struct sbx_sink drop = SBX_SINK_INIT(NULL, drop_bytes);
        struct sbx_memory_changes none = {sizeof none, &drop, NULL, drop_path};
        int rc = sb->st->inner->memory_diff(sb->inner, call, slug, flags, &none);
        static const char end[1024];
        return rc != SBX_OK ? rc : out->tar->write(out->tar->ctx, end, sizeof end);
    }
    return sb->st->inner->memory_diff(sb->inner, call, slug, flags, out);
}

static int fx_memory_accept(sbx_sandbox *sb, sbx_call *call, const char *slug)
{
    return sb->st->inner->memory_accept(sb->inner, call, slug);
}

static int fx_memory_watch(sbx_sandbox *sb, sbx_call *call, const char *slug)
{
    return sb->st->inner->memory_watch ? sb->st->inner->memory_watch(sb->inner, call, slug)
                                       : SBX_OK;
}
#endif

#ifdef FX_PROCS
/* ---- ABI 1.2 (cfproc): fixture_procs.c, fixture_files.c, fixture_ports.c */

static struct fxp_sandbox fxp_of(sbx_sandbox *sb)
{
    struct fxp_sandbox f = {sb->st->host, sb->st->inner->root(sb->inner), sb->owner,
                            fxp_mode(sb->st->mode)};
    return f;
}

static int fx_proc_start(sbx_sandbox *sb, sbx_call *call, const struct sbx_proc_spec *spec,
                         char id[SBX_PROC_ID_MAX])
{
    FX_AWAKE(sb, call);
    struct fxp_sandbox f = fxp_of(sb);
    return fxp_proc_start(&f, call, spec, id);
}

static int fx_proc_write(sbx_sandbox *sb, sbx_call *call, const char *id, const void *data,
                         size_t len, uint32_t flags)
{
    FX_AWAKE(sb, call);
    struct fxp_sandbox f = fxp_of(sb);
    return fxp_proc_write(&f, call, id, data, len, flags);
}

static int fx_proc_read(sbx_sandbox *sb, sbx_call *call, const char *id,
                        const struct sbx_proc_read_args *args, struct sbx_proc_read_result *res)
{
    FX_AWAKE(sb, call);
    struct fxp_sandbox f = fxp_of(sb);
    return fxp_proc_read(&f, call, id, args, res);
}

static int fx_proc_signal(sbx_sandbox *sb, sbx_call *call, const char *id, int signo)
{
    FX_AWAKE(sb, call);
    struct fxp_sandbox f = fxp_of(sb);
    return fxp_proc_signal(&f, call, id, signo);
}

static int fx_proc_list(sbx_sandbox *sb, sbx_call *call, const struct sbx_proc_list_sink *sink)
{
    FX_AWAKE(sb, call);
    struct fxp_sandbox f = fxp_of(sb);
    return fxp_proc_list(&f, call, sink);
}

static int fx_proc_resize(sbx_sandbox *sb, sbx_call *call, const char *id, uint16_t rows,
                          uint16_t cols)
{
    FX_AWAKE(sb, call);
    struct fxp_sandbox f = fxp_of(sb);
    return fxp_proc_resize(&f, call, id, rows, cols);
}

static int fx_file_list(sbx_sandbox *sb, sbx_call *call, const char *path,
                        const struct sbx_file_list_sink *sink)
{
    FX_AWAKE(sb, call);
    struct fxp_sandbox f = fxp_of(sb);
    return fxp_file_list(&f, call, path, sink);
}

static int fx_file_stat(sbx_sandbox *sb, sbx_call *call, const char *path,
                        struct sbx_file_info *out)
{
    FX_AWAKE(sb, call);
    struct fxp_sandbox f = fxp_of(sb);
    return fxp_file_stat(&f, call, path, out);
}

static int fx_file_mkdir(sbx_sandbox *sb, sbx_call *call, const char *path, unsigned mode,
                         uint32_t flags)
{
    FX_AWAKE(sb, call);
    struct fxp_sandbox f = fxp_of(sb);
    return fxp_file_mkdir(&f, call, path, mode, flags);
}

static int fx_file_remove(sbx_sandbox *sb, sbx_call *call, const char *path, uint32_t flags)
{
    FX_AWAKE(sb, call);
    struct fxp_sandbox f = fxp_of(sb);
    return fxp_file_remove(&f, call, path, flags);
}

static int fx_file_rename(sbx_sandbox *sb, sbx_call *call, const char *from, const char *to,
                          uint32_t flags)
{
    FX_AWAKE(sb, call);
    struct fxp_sandbox f = fxp_of(sb);
    return fxp_file_rename(&f, call, from, to, flags);
}

static int fx_port_resolve(sbx_sandbox *sb, sbx_call *call, uint16_t port,
                           struct sbx_port_endpoint *out)
{
    FX_AWAKE(sb, call);
    struct fxp_sandbox f = fxp_of(sb);
    return fxp_port_resolve(&f, call, port, out);
}

/* A sandbox that is gone (destroyed by anyone) cannot be paused. */
static int gone(sbx_sandbox *sb, sbx_call *call, const char *op)
{
    struct stat st;
    if (lstat(fx_root(sb), &st) == 0 && S_ISDIR(st.st_mode))
        return SBX_OK;
    return sb->st->host->set_error(sb->st->host, call, SBX_E_NOT_FOUND,
                                   "cfproc: %s: the sandbox no longer exists", op);
}

static int fx_pause(sbx_sandbox *sb, sbx_call *call, uint32_t flags)
{
    (void)flags;
    int rc = gone(sb, call, "pause");
    if (rc != SBX_OK)
        return rc;
    if (sb->st->mode == FX_PAUSE_NOT_IDEMPOTENT && fx_is_paused(sb->owner))
        return sb->st->host->set_error(sb->st->host, call, SBX_E_INVALID,
                                       "cfproc: already paused");
    fx_set_paused(sb->owner, true);
    if (sb->st->mode != FX_PAUSE_KEEPS_RUNNING)
        fxp_procs_signal(sb->owner, SIGSTOP);
    return SBX_OK;
}

static int fx_resume(sbx_sandbox *sb, sbx_call *call)
{
    int rc = gone(sb, call, "resume");
    if (rc != SBX_OK)
        return rc;
    if (!fx_is_paused(sb->owner))
        return SBX_OK;
    fx_set_paused(sb->owner, false);
    fxp_procs_signal(sb->owner, SIGCONT);
    if (sb->st->mode == FX_PAUSE_LOSES_WORKSPACE)
        lose_workspace(sb);
    return SBX_OK;
}

static int fork_copy_mode(enum fx_break m)
{
    switch (m) {
    case FX_FORK_FOLLOWS_SYMLINKS: return FXF_FOLLOWS_SYMLINKS;
    case FX_FORK_DROPS_MODES: return FXF_DROPS_MODES;
    case FX_FORK_HARDLINKS: return FXF_HARDLINKS;
    default: return FXF_EXACT;
    }
}

static int fx_fork(sbx_sandbox *src, sbx_call *call, const struct sbx_create_args *args,
                   char *ref, sbx_sandbox **out)
{
    struct fx_state *st = src->st;
    const struct sbx_host *host = st->host;
    bool unchecked = st->mode == FX_FORK_GONE_UNCHECKED;
    int rc = unchecked ? SBX_OK : gone(src, call, "fork");
    if (rc != SBX_OK)
        return rc;
    if (!strcmp(args->key_hash, src->owner))
        return host->set_error(host, call, SBX_E_INVALID,
                               "cfproc: fork: the new key is the source's");
    /* The deliberate defect of fork_resumes_source. */
    if (st->mode == FX_FORK_RESUMES_SOURCE && (rc = fx_resume(src, call)) != SBX_OK)
        return rc;
    if ((rc = fx_create(st, call, args, ref, out)) != SBX_OK)
        return rc;
    if (!fxf_empty(fx_root(*out))) {
        fx_release(*out);
        *out = NULL;
        return host->set_error(host, call, SBX_E_EXISTS,
                               "cfproc: fork: the new key already has a sandbox");
    }
    char why[512] = "";
    struct stat sst;
    bool missing = unchecked && lstat(fx_root(src), &sst) != 0;
    if (!missing &&
        fxf_copy_tree(fx_root(src), fx_root(*out), fork_copy_mode(st->mode), why,
                      sizeof why) != 0) {
        /* whatever the call made goes again */
        struct sbx_destroy_args d = {
            .size = sizeof d, .session_key = args->session_key, .key_hash = args->key_hash,
            .ref = ref,
        };
        fx_release(*out);
        *out = NULL;
        fx_destroy(st, call, &d);
        return host->set_error(host, call, SBX_E_IO, "cfproc: fork: %s", why);
    }
    fxf_parent_record(args->key_hash, src->owner);
    if (st->mode == FX_FORK_STOPS_SOURCE) /* the deliberate defect */
        fxp_procs_destroy(src->owner, FXP_NONE);
    return SBX_OK;
}
#endif

static const struct sbx_provider_ops fx_ops = {
    .init = fx_init,
    .fini = fx_fini,
    .create = fx_create,
    .attach = fx_attach,
    .exec = fx_exec,
    .read_file = fx_read_file,
    .write_file = fx_write_file,
    .root = fx_root,
    .release = fx_release,
    .destroy = fx_destroy,
    .egress_set = fx_egress_set,
    .egress_get = fx_egress_get,
#ifdef FX_USERS
    .group_add = fx_group_add,
    .user_add = fx_user_add,
#endif
#ifdef FX_MEMORY
    .memory_load = fx_memory_load,
    .memory_diff = fx_memory_diff,
    .memory_accept = fx_memory_accept,
    .memory_watch = fx_memory_watch,
#endif
#ifdef FX_PROCS
    .proc_start = fx_proc_start,
    .proc_write = fx_proc_write,
    .proc_read = fx_proc_read,
    .proc_signal = fx_proc_signal,
    .proc_list = fx_proc_list,
    .proc_resize = fx_proc_resize,
    .file_list = fx_file_list,
    .file_stat = fx_file_stat,
    .file_mkdir = fx_file_mkdir,
    .file_remove = fx_file_remove,
    .file_rename = fx_file_rename,
    .port_resolve = fx_port_resolve,
    .pause = fx_pause,
    .resume = fx_resume,
    .fork = fx_fork,
#endif
};

static const struct sbx_config_key fx_keys[] = {
#ifdef FX_MEMORY
    /* passed on to docker */
    SBX_CONFIG_KEY("host", SBX_CFG_STRING, "the Docker daemon"),
    SBX_CONFIG_KEY("image", SBX_CFG_STRING, "the image"),
    SBX_CONFIG_KEY("resource_dir", SBX_CFG_STRING, "provider-owned host directories"),
#endif
    SBX_CONFIG_KEY("root", SBX_CFG_STRING, "workspace root, passed on to local"),
    SBX_CONFIG_KEY("inner", SBX_CFG_STRING, "path of the local provider's .so"),
    SBX_CONFIG_KEY("break", SBX_CFG_STRING, "which contract to break (see the source)"),
    SBX_CONFIG_KEYS_END,
};

#ifdef FX_PROCS
SBX_PROVIDER_DEFINE("cfproc", "0.0.1",
                    "local, with processes, a PTY, file ops and ports of its own, one "
                    "contract broken on purpose",
                    SBX_ISOLATION_NONE,
                    SBX_CAP_EGRESS | SBX_CAP_PROCESSES | SBX_CAP_PTY | SBX_CAP_FILE_OPS |
                        SBX_CAP_PORTS | SBX_CAP_PAUSE | SBX_CAP_POOL | SBX_CAP_FORK,
                    &fx_ops, fx_keys)
#elif defined(FX_USERS)
SBX_PROVIDER_DEFINE("cfusers", "0.0.1",
                    "local, declaring users that it does not honour",
                    SBX_ISOLATION_NONE, SBX_CAP_EGRESS | SBX_CAP_USERS, &fx_ops, fx_keys)
#elif defined(FX_MEMORY)
SBX_PROVIDER_DEFINE("dfixture", "0.0.1", "docker, with one contract broken on purpose",
                    SBX_ISOLATION_CONTAINER, SBX_CAP_EGRESS | SBX_CAP_MEMORY, &fx_ops, fx_keys)
#else
SBX_PROVIDER_DEFINE("cfixture", "0.0.1", "local, with one contract broken on purpose",
                    SBX_ISOLATION_NONE, SBX_CAP_EGRESS, &fx_ops, fx_keys)
#endif
