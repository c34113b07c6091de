/*
 * proto.h - the sbx-agent wire protocol (PROTOCOL.md beside it), shared by the
 * agent and the docker provider: the connection preamble, frames, and the
 * field encoding of request and reply payloads.
 *
 * A frame is a 5-byte header (big-endian u32 payload length, u8 type) and
 * the payload. A payload is a sequence of fields: u32 and u64 big-endian,
 * strings as a u32 length and that many bytes (no NUL inside).
 */
#ifndef SBX_AGENT_PROTO_H
#define SBX_AGENT_PROTO_H

#include <stddef.h>
#include <stdint.h>

#define AP_VERSION 3u
#define AP_VERSION_STR "3" /* the same, for labels */
/* The oldest client version the agent serves: a version-1 request has no
 * user field (the agent's --user applies). */
#define AP_VERSION_MIN 1u
#define AP_MAGIC "SBXA"
#define AP_PREAMBLE_LEN 8 /* magic + u32 version */
#define AP_HDR_LEN 5
#define AP_FRAME_MAX (1u << 20) /* largest payload either side accepts */
#define AP_CHUNK (256u * 1024)  /* data payloads are at most this long */
#define AP_STR_MAX 65536u       /* longest string field */

/* Frame types. Requests (host -> agent) are upper case, the first frame of
 * a connection after the preamble; everything else follows a request. In
 * protocol 2 every request's payload starts with `str user`: the user the
 * request acts as ("" for the agent's --user), then its fields below. */
enum ap_type {
    AP_PING = 'P',   /* -> AP_PONG */
    AP_EXEC = 'X',   /* u64 timeout_ms, str cwd, u32 argc, argv, u32 envc, env */
    AP_READ = 'R',   /* str root, str path */
    AP_WRITE = 'W',  /* str root, str path, u32 mode, u32 flags */
    AP_STAT = 'A',   /* str root, str path */
    AP_LIST = 'L',   /* str root, str path */
    AP_MKDIR = 'M',  /* str root, str path, u32 mode, u32 flags */
    AP_REMOVE = 'U', /* str root, str path, u32 flags */
    /* protocol 2 */
    AP_GROUP_ADD = 'G', /* str name, u32 gid (0: pick) */
    AP_USER_ADD = 'N',  /* str name, u32 uid (0: pick), str group ("": own),
                           u32 n, str groups[n] */
    /* protocol 3: open a process channel (empty after the user field);
     * answered with AP_OK, after which the connection carries the process
     * requests below, one after another, each answered in turn */
    AP_PROC_CHANNEL = 'Q',

    /* protocol 3, on a process channel (no user field but in start) */
    AP_PROC_START = 'S',  /* str user, u32 flags, u64 timeout_ms, u64 buffer_bytes,
                             u32 rows, u32 cols, str cwd, u32 argc, argv,
                             u32 envc, env -> AP_PROC_STARTED */
    AP_PROC_WRITE = 'I',  /* str id, u32 flags (AP_PW_*), bytes -> AP_OK, or
                             AP_PROC_WROTE with AP_PW_PEEK on a PTY */
    AP_PROC_READ = 'O',   /* str id, u64 out_cursor, u64 err_cursor,
                             u32 max_bytes, u32 wait_ms -> AP_PROC_OUTPUT */
    AP_PROC_SIGNAL = 'K', /* str id, u32 signal -> AP_OK */
    AP_PROC_RESIZE = 'Z', /* str id, u32 rows, u32 cols -> AP_OK */
    AP_PROC_LIST = 'T',   /* (empty) -> AP_PROC_ENTRY..., AP_OK */
    AP_PROC_KILL_ALL = 'Y', /* (empty) -> AP_OK once every process was killed */
    /* protocol 3: files */
    AP_RENAME = 'V',    /* str root, str from, str to, u32 flags (AP_NOREPLACE) */

    /* host -> agent during a request */
    AP_STDIN = 'i',     /* data for the command's stdin */
    AP_STDIN_END = 'j', /* end of stdin (empty) */
    AP_SIGNAL = 'g',    /* u32 signal: sent to the command's leader */
    AP_CANCEL = 'c',    /* kill the command's whole tree (empty) */
    AP_DATA = 'd',      /* file data (write from the host, read from the agent) */
    AP_TRAILER = 't',   /* write: u64 length, 32-byte SHA-256 */

    /* agent -> host */
    AP_PONG = 'p',   /* u32 version, u32 agent pid, str agent build */
    AP_STDOUT = 'o', /* command output */
    AP_STDERR = 'e',
    AP_EXIT = 'z',   /* u32 flags (AP_EXIT_*), u32 exit code, u32 signal */
    AP_END = 'n',    /* read: u64 total length, 32-byte SHA-256 */
    AP_STATR = 'a',  /* u32 kind, u32 mode, u64 size, u64 mtime (s)
                        [protocol 3: u64 mtime_ns] */
    AP_ENTRY = 'y',  /* list: str name, u32 kind, u32 mode, u64 size
                        [protocol 3: u64 mtime_ns] */
    AP_OK = 'k',     /* the request is done (empty) */
    /* protocol 3 answers on a process channel */
    AP_PROC_STARTED = 's', /* str id */
    AP_PROC_WROTE = 'w',   /* u64 offset, u32 n, bytes[n]: the terminal's output
                              from offset on, as it was when the write's echo
                              came (AP_PW_PEEK) */
    AP_PROC_OUTPUT = 'r',  /* u32 state, u32 flags (AP_PR_*), u32 exit code,
                              u32 signal, u64 out_cursor, u64 out_lost,
                              u32 n, bytes[n], u64 err_cursor, u64 err_lost,
                              u32 n, bytes[n] */
    AP_PROC_ENTRY = 'l',   /* str id, u32 flags (AP_PS_*), u32 state,
                              u32 exit flags (AP_PR_*), u32 exit code,
                              u32 signal, u64 started_ms, str command */
    AP_ERROR = 'f'   /* u32 errno, str stage, str message; connection closes */
};

/* write and mkdir flags */
#define AP_MKPARENTS 1u /* make missing parent directories (0755) */
/* remove flags */
#define AP_RECURSIVE 1u
/* rename flags (protocol 3) */
#define AP_NOREPLACE 1u /* an existing target is EEXIST */

/* AP_EXIT flags */
#define AP_EXIT_SIGNALED 1u
#define AP_EXIT_TIMED_OUT 2u
#define AP_EXIT_CANCELLED 4u

/* AP_PROC_START flags */
#define AP_PS_PTY 1u /* on a pseudo-terminal: one output stream */
#define AP_PS_READ 2u /* two more fields after env: u32 max_bytes, u32 wait_ms;
                         AP_PROC_STARTED is followed on the channel by the
                         AP_PROC_OUTPUT of a read from cursors 0 with them,
                         sent at the process's end or after wait_ms (a
                         supervisor that predates it: EPROTO, channel closed) */
#define AP_PS_READ_WAIT_MAX 1000u /* its wait_ms at most */
/* AP_PROC_WRITE flags */
#define AP_PW_CLOSE 1u /* after the bytes, close stdin (a PTY: its EOF character) */
#define AP_PW_PEEK 2u  /* a PTY: answer once output follows (or AP_PW_PEEK_MS
                          passed) with AP_PROC_WROTE, the output so far */
#define AP_PW_PEEK_MS 5u
#define AP_PW_PEEK_MAX 65536u /* bytes of output in AP_PROC_WROTE at most */
/* AP_PROC_OUTPUT / AP_PROC_ENTRY flags (exit code is -1 as u32 after a signal) */
#define AP_PR_EOF 1u       /* ended and both cursors at the ends */
#define AP_PR_TIMED_OUT 2u /* its timeout killed it */
#define AP_PR_SIGNALED 4u  /* ended by a signal */
/* AP_PROC_OUTPUT / AP_PROC_ENTRY states */
#define AP_PROC_RUNNING 0u
#define AP_PROC_EXITED 1u
/* Longest process id, NUL excluded; data of AP_PROC_READ per stream. */
#define AP_PROC_ID_MAX 127u
#define AP_PROC_READ_MAX AP_CHUNK

/* AP_STATR / AP_ENTRY kinds */
enum ap_kind { AP_KIND_FILE = 1, AP_KIND_DIR = 2, AP_KIND_SYMLINK = 3, AP_KIND_OTHER = 4 };

/* ---- building payloads ------------------------------------------------ */

/* A frame under construction in caller memory: buf holds the header. */
struct ap_out {
    unsigned char *buf;
    size_t cap, len;
    int overflow;
};

void sbxs_ap_out_begin(struct ap_out *o, unsigned char *buf, size_t cap, int type);
void sbxs_ap_put_u32(struct ap_out *o, uint32_t v);
void sbxs_ap_put_u64(struct ap_out *o, uint64_t v);
void sbxs_ap_put_bytes(struct ap_out *o, const void *p, size_t n); /* raw */
void sbxs_ap_put_str(struct ap_out *o, const char *s);
/* Fill in the header's length. Returns the frame's total length, 0 when it
 * did not fit. */
size_t sbxs_ap_out_end(struct ap_out *o);

/* Write the 5-byte header of a frame of type with a payload of len bytes. */
void sbxs_ap_header(unsigned char hdr[AP_HDR_LEN], int type, uint32_t len);
/* Parse a header: 0, or -1 when the length exceeds AP_FRAME_MAX. */
int sbxs_ap_parse_header(const unsigned char hdr[AP_HDR_LEN], int *type, uint32_t *len);

void sbxs_ap_preamble(unsigned char out[AP_PREAMBLE_LEN], uint32_t version);
/* 0 and *version, or -1 when the magic is wrong. */
int sbxs_ap_parse_preamble(const unsigned char in[AP_PREAMBLE_LEN], uint32_t *version);

/* ---- reading payloads ----------------------------------------------- */

struct ap_in {
    const unsigned char *p;
    size_t left;
    int bad; /* a field ran past the end, or a string was malformed */
};

void sbxs_ap_in_begin(struct ap_in *in, const void *payload, size_t len);
uint32_t sbxs_ap_get_u32(struct ap_in *in);
uint64_t sbxs_ap_get_u64(struct ap_in *in);
/* n raw bytes into out. */
void sbxs_ap_get_bytes(struct ap_in *in, void *out, size_t n);
/* A string field as a malloc'd NUL-terminated copy; NULL (and in->bad)
 * when malformed (too long, a NUL inside) or out of memory. */
char *sbxs_ap_get_str(struct ap_in *in);
/* Nonzero when everything was read and nothing was malformed. */
int sbxs_ap_in_done(const struct ap_in *in);

#endif /* SBX_AGENT_PROTO_H */
