/*
 * remote_memory.h - memory stores (SBX_CAP_MEMORY) in a remote sandbox
 * whose root can write anything: the tree of each attached store is a
 * plain directory /mnt/memory/<slug> in the sandbox, filled from the host's
 * archive and compared after each command with a baseline kept on this
 * machine (below a state_dir, out of the sandbox's reach).
 *
 * What differs between providers is only how a command runs in the
 * sandbox and how a file travels to and from it: the provider fills a
 * struct sbxp_rmem_ops and embeds a struct sbxp_rmem in its sandbox handle.
 * Everything else (the attachments file, the baselines, validating and
 * re-encoding the host's archive, parsing the tree's NUL-separated listing,
 * re-encoding and hashing the fetched files) is here.
 *
 * Threads: the host never runs two memory ops of one sandbox at once; one
 * struct sbxp_rmem is used by one op at a time.
 */
#ifndef SBXP_REMOTE_MEMORY_H
#define SBXP_REMOTE_MEMORY_H

#include <sbx/provider.h>

#include <stddef.h>
#include <stdint.h>

/* Where the trees live in the sandbox. */
#define SBXP_RMEM_ROOT "/mnt/memory"

/* How one provider reaches its sandbox. ctx is the provider's handle. */
struct sbxp_rmem_ops {
    /* Run argv as root (or the sandbox's most privileged user) in "/",
     * no stdin, stdout to out (may be NULL: discarded), timeout_ms (0:
     * none), up to cap-1 bytes of stderr in msg, exit code in *code; call
     * may be NULL (a cleanup step). SBX_OK when it ran (whatever
     * its exit code); otherwise the call's error is set. When download is
     * NULL, stdout must arrive byte-exact. */
    int (*run)(void *ctx, sbx_call *call, const char *const *argv, const struct sbx_sink *out,
               int64_t timeout_ms, int *code, char *msg, size_t cap);
    /* Stream src to the absolute path abs in the sandbox (created or
     * replaced, readable by root). Reports its own errors; what names the
     * transfer for the message. */
    int (*upload)(void *ctx, sbx_call *call, const char *abs, const struct sbx_source *src,
                  const char *what);
    /* Optional: stream the file abs of the sandbox byte-exact to sink
     * (reports its own errors). When set, output the helper needs exact
     * is written to a file in the sandbox and downloaded, for a sandbox
     * whose command output is text rather than bytes. */
    int (*download)(void *ctx, sbx_call *call, const char *abs, const struct sbx_sink *sink,
                    const char *what);
    /* Set when run's commands are not root: the provider made
     * SBXP_RMEM_ROOT (mode 777) before sbxp_rmem_create, which then leaves
     * its mode alone. */
    int shared_root;
    /* Optional: keep the sandbox from expiring during a long memory op. */
    void (*keep_alive)(void *ctx, sbx_call *call);
};

struct sbxp_rmem_list;

/* A store attached at create. */
struct sbxp_rmem_attachment {
    char slug[64];
    int read_write;
    struct sbxp_rmem_list *last; /* the last diff's tree, for accept; or NULL */
};

/* The memory state of one sandbox handle. */
struct sbxp_rmem {
    const struct sbx_host *host;
    const char *provider;  /* for messages and the config key's name */
    const char *state_dir; /* absolute host directory (borrowed) */
    const char *id;        /* the sandbox's id (borrowed) */
    const struct sbxp_rmem_ops *ops;
    void *ctx;
    struct sbxp_rmem_attachment *v;
    size_t n;
};

/* Set up m (no attachments); every pointer is borrowed for m's life. */
void sbxp_rmem_init(struct sbxp_rmem *m, const struct sbx_host *host, const char *provider,
                    const char *state_dir, const char *id, const struct sbxp_rmem_ops *ops,
                    void *ctx);

/* Free m's attachments (m stays usable). */
void sbxp_rmem_free(struct sbxp_rmem *m);

/* At create: check args' attachments (SBX_E_INVALID naming the bad one),
 * record them in <state_dir>/<id>/attachments and make their trees in the
 * sandbox (read-only ones mode 755, read-write ones 777, root-owned). */
int sbxp_rmem_create(struct sbxp_rmem *m, sbx_call *call, const struct sbx_create_args *args);

/* At attach: read the attachments recorded at create (none: none). */
int sbxp_rmem_open(struct sbxp_rmem *m, sbx_call *call);

/* At destroy: remove <state_dir>/<id> (failures are logged). */
void sbxp_rmem_forget(const struct sbx_host *host, const char *provider, const char *state_dir,
                      const char *id);

/* The ops of the ABI (see abi/sbx/provider.h, "Memory stores"). */
int sbxp_rmem_load(struct sbxp_rmem *m, sbx_call *call, const char *slug,
                   const struct sbx_source *tar);
int sbxp_rmem_diff(struct sbxp_rmem *m, sbx_call *call, const char *slug, uint32_t flags,
                   const struct sbx_memory_changes *out);
int sbxp_rmem_accept(struct sbxp_rmem *m, sbx_call *call, const char *slug);

/* Run argv through m's ops as root in "/" (120 s at most); a nonzero
 * exit is SBX_E_IO (SBX_E_INVALID for exit 3: the script refused) with
 * its stderr and exit code in the message. m needs only host, provider,
 * id, ops and ctx (no attachments). */
int sbxp_rmem_script(struct sbxp_rmem *m, sbx_call *call, const char *what,
                     const char *const *argv);

/* The state_dir a provider uses: configured (must be absolute, at most
 * 3000 bytes: SBX_E_CONFIG naming providers.<provider>.state_dir), or
 * $XDG_STATE_HOME/sbx/<provider>, ~/.local/state/sbx/<provider>,
 * /var/lib/sbx/<provider>. *out is malloc'd. */
int sbxp_rmem_state_dir(const struct sbx_host *host, sbx_call *call, const char *provider,
                        const char *configured, char **out);

/*
 * SBXP_RMEM_DEFINE_OPS(prefix, member) - define the provider's three ABI
 * memory ops, prefix##_memory_load, _diff and _accept, on the struct
 * sbxp_rmem at sb->member of its sandbox handle.
 */
#define SBXP_RMEM_DEFINE_OPS(prefix, member)                                              \
    int prefix##_memory_load(sbx_sandbox *sb, sbx_call *call, const char *slug,          \
                             const struct sbx_source *tar)                               \
    {                                                                                    \
        return sbxp_rmem_load(&sb->member, call, slug, tar);                              \
    }                                                                                    \
    int prefix##_memory_diff(sbx_sandbox *sb, sbx_call *call, const char *slug,          \
                             uint32_t flags, const struct sbx_memory_changes *out)       \
    {                                                                                    \
        return sbxp_rmem_diff(&sb->member, call, slug, flags, out);                       \
    }                                                                                    \
    int prefix##_memory_accept(sbx_sandbox *sb, sbx_call *call, const char *slug)        \
    {                                                                                    \
        return sbxp_rmem_accept(&sb->member, call, slug);                                 \
    }

#endif /* SBXP_REMOTE_MEMORY_H */
