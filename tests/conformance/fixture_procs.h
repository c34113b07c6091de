/*
 * fixture_procs.h - the ABI 1.2 half of "cfproc" (fixture_provider.c built
 * with FX_PROCS): processes with replay buffers and a PTY
 * (fixture_procs.c), file operations (fixture_files.c) and exposed ports
 * (fixture_ports.c), each with the defects its break modes select.
 *
 * The state is process-global and keyed by the owner's key hash, so a
 * second provider instance in the same process (a conformance case's
 * "restart") finds the processes, cursors and ports of the first. A
 * conformance case runs in one process; a real provider keeps this state
 * where the sandbox lives instead.
 */
#ifndef SBX_TEST_FIXTURE_PROCS_H
#define SBX_TEST_FIXTURE_PROCS_H

#include <sbx/provider.h>

/* The defects of the 1.2 contracts (break modes of cfproc). */
enum fxp_break {
    FXP_NONE = 0,
    FXP_PTY_NOT_TERMINAL,      /* SBX_PROC_PTY runs on pipes */
    FXP_BUFFER_DROPS_SILENTLY, /* bytes pushed out of the replay buffer are
                                  forgotten and not counted as lost */
    FXP_CURSOR_REPEATS,        /* each read starts 16 bytes before the cursor */
    FXP_SURVIVES_DESTROY,      /* destroy leaves processes running and listed */
    FXP_LIST_FOLLOWS_SYMLINK,  /* file_list follows a symlink (out) */
    FXP_PORT_ALL_INTERFACES,   /* ports are published on 0.0.0.0 */
    FXP_IDS_UNCHECKED,         /* any sandbox may use any process id */
    FXP_BUFFER_GROWS,          /* buffer_bytes ignored: up to 64 MiB kept */
    /* Promises libsbx checks itself (test_libsbx_1_2.c), not the suite: */
    FXP_CURSOR_SKIPS,          /* a new cursor one past what was delivered */
    FXP_LIST_NAME_SLASH,       /* a listed name holds a '/' */
    FXP_ID_MALFORMED           /* proc_start returns an id with a '/' */
};

/* What every 1.2 op needs of the sandbox it runs in. */
struct fxp_sandbox {
    const struct sbx_host *host;
    const char *root;  /* absolute workspace path */
    const char *owner; /* key hash */
    int mode;          /* enum fxp_break */
};

int fxp_proc_start(const struct fxp_sandbox *sb, sbx_call *call,
                   const struct sbx_proc_spec *spec, char id[SBX_PROC_ID_MAX]);
int fxp_proc_write(const struct fxp_sandbox *sb, sbx_call *call, const char *id,
                   const void *data, size_t len, uint32_t flags);
int fxp_proc_read(const struct fxp_sandbox *sb, sbx_call *call, const char *id,
                  const struct sbx_proc_read_args *args, struct sbx_proc_read_result *res);
int fxp_proc_signal(const struct fxp_sandbox *sb, sbx_call *call, const char *id, int signo);
int fxp_proc_list(const struct fxp_sandbox *sb, sbx_call *call,
                  const struct sbx_proc_list_sink *sink);
int fxp_proc_resize(const struct fxp_sandbox *sb, sbx_call *call, const char *id,
                    uint16_t rows, uint16_t cols);
/* Kill and forget every process of owner (unless the mode keeps them). */
void fxp_procs_destroy(const char *owner, int mode);
/* Send signo to the process group of each running process of owner (pause:
 * SIGSTOP, resume: SIGCONT). */
void fxp_procs_signal(const char *owner, int signo);

int fxp_file_list(const struct fxp_sandbox *sb, sbx_call *call, const char *path,
                  const struct sbx_file_list_sink *sink);
int fxp_file_stat(const struct fxp_sandbox *sb, sbx_call *call, const char *path,
                  struct sbx_file_info *out);
int fxp_file_mkdir(const struct fxp_sandbox *sb, sbx_call *call, const char *path,
                   unsigned mode, uint32_t flags);
int fxp_file_remove(const struct fxp_sandbox *sb, sbx_call *call, const char *path,
                    uint32_t flags);
int fxp_file_rename(const struct fxp_sandbox *sb, sbx_call *call, const char *from,
                    const char *to, uint32_t flags);

/* Publish the ports of create (0-terminated) for owner, once per owner. */
int fxp_ports_declare(const struct sbx_host *host, sbx_call *call, const char *owner,
                      const uint16_t *ports, int mode);
int fxp_port_resolve(const struct fxp_sandbox *sb, sbx_call *call, uint16_t port,
                     struct sbx_port_endpoint *out);
/* Stop the forwarders of owner. */
void fxp_ports_destroy(const char *owner);

#endif
