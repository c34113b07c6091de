// session.js - one sbx session (a session key) as an SDK SandboxSession.
//
// Every operation is one tool call on the client's `sbx mcp` process. Paths
// the SDK gives (workspace-relative, or absolute under the manifest's root)
// become workspace-relative sbx paths; sbx confines them to the workspace.
import { randomBytes } from 'node:crypto';
import { constants as osc } from 'node:os';
import { posix } from 'node:path';
import { applyDiff, UserError } from '@openai/agents-core';
import { Manifest, normalizeExposedPort, recordExposedPortEndpoint } from '@openai/agents-core/sandbox';
import {
    elapsedSeconds,
    formatExecResponse,
    imageOutputFromBytes,
    MAX_VIEW_IMAGE_BYTES,
    mergeManifestDelta,
    mergeManifestEntryDelta,
    toUint8Array,
    truncateOutput,
} from '@openai/agents-core/sandbox/internal';
import { Budget, DEFAULT_MAX_MANIFEST_BYTES, DEFAULT_MAX_MANIFEST_FILES, sbxEntries, toSbxManifest } from './manifest.js';

const DEFAULT_EXEC_YIELD_TIME_MS = 10_000; // as the SDK's own clients
const DEFAULT_WRITE_STDIN_YIELD_TIME_MS = 250;
// What one exec_command/write_stdin returns at most (the SDK's clients keep
// 1 Mi characters of a running process's output).
const DEFAULT_MAX_OUTPUT_BYTES = 1024 * 1024;
const READ_CHUNK_BYTES = 1024 * 1024; // sbx mcp's default read cap
const WRITE_CHUNK_BYTES = 768 * 1024; // base64 of it stays well under a line cap
export const DEFAULT_MAX_FILE_BYTES = 64 * 1024 * 1024;
export const DEFAULT_MAX_ARCHIVE_BYTES = 256 * 1024 * 1024;

function signalExitCode(signal) {
    if (typeof signal === 'number') return 128 + signal;
    if (typeof signal === 'string') {
        const n = osc.signals[signal.startsWith('SIG') ? signal : `SIG${signal}`];
        if (n) return 128 + n;
    }
    return 1;
}

/** A mode as sbx reports it (a number, or octal text) as a number. */
function modeNumber(mode) {
    if (typeof mode === 'number' && Number.isInteger(mode) && mode > 0) return mode;
    if (typeof mode === 'string' && /^0?[0-7]{1,6}$/.test(mode)) return parseInt(mode, 8);
    return undefined;
}

function isNotFound(error) {
    return /not found|no such file|does not exist/i.test(error?.message ?? '');
}

export class SbxSandboxSession {
    /** SandboxSessionState plus sessionKey, provider, manifestDigest, runAs. */
    state;
    #server;
    #options;
    #processes = new Map(); // SDK session id (number) -> sbx process id
    #nextProcessId = 1;
    #deleted = false;

    constructor({ server, state, options = {} }) {
        this.#server = server;
        this.state = state;
        this.#options = options;
    }

    get sessionKey() {
        return this.state.sessionKey;
    }

    #call(tool, args, opts) {
        if (this.#deleted) throw new UserError(`sbx session ${this.state.sessionKey} was deleted`);
        return this.#server.call(tool, { sandbox: this.state.sessionKey, ...args }, opts);
    }

    /** An SDK path as a workspace-relative sbx path ("." for the root). */
    sbxPath(path) {
        if (path === undefined || path === null) return '.';
        const root = this.state.manifest?.root ?? '/workspace';
        let p = String(path).trim();
        if (p === '' || p === root) return '.';
        if (root === '/' && p.startsWith('/')) p = p.slice(1);
        else if (p.startsWith(`${root}/`)) p = p.slice(root.length + 1);
        // Other absolute paths go to sbx as they are: it refuses those outside
        // the workspace.
        if (p.startsWith('/')) return posix.normalize(p);
        const n = posix.normalize(p);
        if (n === '..' || n.startsWith('../'))
            throw new UserError(`Sandbox path "${path}" escapes the workspace root.`);
        return n === '' ? '.' : n;
    }

    /** The user a call acts as: the session's run_as unless another is asked. */
    #user(runAs) {
        const name = typeof runAs === 'string' ? runAs.trim() : runAs?.name;
        if (!name || name === this.state.runAs) return {};
        return { user: name };
    }

    #maxOutputBytes() {
        return this.#options.maxOutputBytes ?? DEFAULT_MAX_OUTPUT_BYTES;
    }

    #env() {
        const env = this.state.environment ?? {};
        return Object.keys(env).length ? { env } : {};
    }

    /** An exec_command/write_stdin result as the SDK's clients shape it. */
    #execResult(r, start, maxOutputTokens, { streams = true, sessionId } = {}) {
        const dropped = (r.lost_bytes ?? 0) + (r.truncated_bytes ?? 0);
        const notice = dropped > 0 ? `[...${dropped} characters truncated from process output...]\n` : '';
        const out = truncateOutput(notice + (r.output ?? ''), maxOutputTokens);
        const result = {
            output: out.text,
            ...(streams ? { stdout: r.stdout ?? (r.stderr === undefined ? r.output ?? '' : ''), stderr: r.stderr ?? '' } : {}),
            wallTimeSeconds: elapsedSeconds(start),
            ...(out.originalTokenCount !== undefined ? { originalTokenCount: out.originalTokenCount } : {}),
        };
        if (r.running) {
            // A new process gets the next id; a polled one keeps its own.
            const id = sessionId ?? this.#nextProcessId++;
            this.#processes.set(id, r.process_id);
            result.sessionId = id;
        } else {
            result.exitCode = r.exit_code ?? signalExitCode(r.signal);
        }
        return result;
    }

    async exec(args) {
        const start = Date.now();
        const yieldTimeMs = args.yieldTimeMs ?? DEFAULT_EXEC_YIELD_TIME_MS;
        // The default shell is sbx's `sh -c`; a named shell runs the command
        // itself, as a login shell unless login is false.
        const command = args.shell
            ? { argv: [args.shell, args.login === false ? '-c' : '-lc', args.cmd] }
            : { cmd: args.cmd };
        const r = await this.#call(
            'exec_command',
            {
                ...command,
                cwd: this.sbxPath(args.workdir),
                ...this.#env(),
                yield_time_ms: yieldTimeMs,
                max_output_bytes: this.#maxOutputBytes(),
                tty: !!args.tty,
                ...this.#user(args.runAs),
            },
            { waitMs: yieldTimeMs },
        );
        return this.#execResult(r, start, args.maxOutputTokens);
    }

    async execCommand(args) {
        return formatExecResponse(await this.exec(args));
    }

    async writeStdin(args) {
        const processId = this.#processes.get(args.sessionId);
        if (processId === undefined) {
            return formatExecResponse({
                output: `write_stdin failed: session not found: ${args.sessionId}`,
                wallTimeSeconds: 0,
                exitCode: 1,
            });
        }
        const start = Date.now();
        const yieldTimeMs = args.yieldTimeMs ?? DEFAULT_WRITE_STDIN_YIELD_TIME_MS;
        const r = await this.#call(
            'write_stdin',
            {
                process_id: processId,
                ...(args.chars ? { chars: args.chars } : {}),
                yield_time_ms: yieldTimeMs,
                max_output_bytes: this.#maxOutputBytes(),
            },
            { waitMs: yieldTimeMs },
        );
        this.#processes.delete(args.sessionId);
        const result = this.#execResult({ process_id: processId, ...r }, start, args.maxOutputTokens, {
            streams: false,
            sessionId: args.sessionId,
        });
        return formatExecResponse(result);
    }

    supportsPty() {
        return this.#options.pty ?? true;
    }

    // ---- files ------------------------------------------------------------

    /** The whole file (or its first maxBytes), in 1 MiB reads, bounded. */
    async readFile(args) {
        const path = this.sbxPath(args.path);
        const limit = args.maxBytes ?? this.#options.maxFileBytes ?? DEFAULT_MAX_FILE_BYTES;
        const parts = [];
        let got = 0;
        for (;;) {
            const want = Math.min(READ_CHUNK_BYTES, limit - got + (args.maxBytes === undefined ? 1 : 0));
            if (want <= 0) break;
            const r = await this.#call('read_file', { path, encoding: 'base64', offset: got, max_bytes: want });
            const chunk = Buffer.from(r.content ?? '', 'base64');
            parts.push(chunk);
            got += chunk.length;
            if (args.maxBytes === undefined && got > limit)
                throw new UserError(`sbx: read_file: ${args.path} is larger than the limit of ${limit} bytes (maxFileBytes)`);
            if (!r.truncated || chunk.length === 0) break;
        }
        const data = Buffer.concat(parts);
        return new Uint8Array(data.buffer, data.byteOffset, Math.min(data.length, limit));
    }

    /** Write a whole file (atomic in sbx) as the session's user or runAs. */
    async writeFile(path, content, { mode, runAs } = {}) {
        const data = typeof content === 'string' ? Buffer.from(content, 'utf8') : Buffer.from(content);
        const limit = this.#options.maxFileBytes ?? DEFAULT_MAX_FILE_BYTES;
        if (data.length > limit) throw new UserError(`sbx: write_file: ${path}: larger than the limit of ${limit} bytes`);
        await this.#call('write_file', {
            path: this.sbxPath(path),
            content: data.toString('base64'),
            encoding: 'base64',
            ...(modeNumber(mode) !== undefined ? { mode: '0' + (modeNumber(mode) & 0o777).toString(8) } : {}),
            ...this.#user(runAs),
        });
    }

    async stat(path) {
        try {
            return await this.#call('stat', { path: this.sbxPath(path) });
        } catch (error) {
            if (isNotFound(error)) return { exists: false };
            throw error;
        }
    }

    async deletePath(path, { recursive = false } = {}) {
        await this.#call('delete', { path: this.sbxPath(path), recursive });
    }

    async listDir(args) {
        const path = this.sbxPath(args.path);
        const r = await this.#call('list_files', { path, limit: 10_000 });
        const logical = path === '.' ? '' : path;
        return (r.entries ?? []).map((e) => ({
            name: e.name,
            path: logical ? `${logical}/${e.name}` : e.name,
            type: e.type === 'file' ? 'file' : e.type === 'directory' || e.type === 'dir' ? 'dir' : 'other',
        }));
    }

    async pathExists(path) {
        return !!(await this.stat(path)).exists;
    }

    async directoryExists(path) {
        const st = await this.stat(path);
        return !!st.exists && (st.type === 'directory' || st.type === 'dir');
    }

    async viewImage(args) {
        const bytes = await this.readFile({ path: args.path, maxBytes: MAX_VIEW_IMAGE_BYTES + 1 }).catch((error) => {
            if (isNotFound(error)) throw new UserError(`Image file not found: ${args.path}`);
            if (/is a directory|not a regular file/i.test(error.message)) throw new UserError(`Image path is not a file: ${args.path}`);
            throw error;
        });
        if (bytes.byteLength > MAX_VIEW_IMAGE_BYTES) throw new UserError(`Image file exceeds the 10 MB limit: ${args.path}`);
        return imageOutputFromBytes(args.path, bytes);
    }

    createEditor(runAs) {
        return new SbxEditor(this, runAs);
    }

    // ---- manifests --------------------------------------------------------

    async materializeEntry(args) {
        const logical = this.sbxPath(args.path);
        if (logical === '.' || logical.startsWith('/')) throw new UserError(`materializeEntry: ${args.path} is not a path inside the workspace`);
        const sub = new Manifest({ root: this.state.manifest.root, entries: { [logical]: structuredClone(args.entry) } });
        const entries = await sbxEntries(sub, new Budget(this.#limits().maxBytes, this.#limits().maxFiles));
        await this.#call('apply_manifest', { manifest: { version: 1, entries } });
        this.state.manifest = mergeManifestEntryDelta(this.state.manifest, logical, structuredClone(args.entry));
    }

    async applyManifest(manifest) {
        const { manifest: m } = await toSbxManifest(manifest, this.#limits());
        await this.#call('apply_manifest', { manifest: m });
        this.state.environment = { ...(this.state.environment ?? {}), ...(await manifest.resolveEnvironment()) };
        this.state.manifest = mergeManifestDelta(this.state.manifest, manifest);
    }

    #limits() {
        return {
            maxBytes: this.#options.maxManifestBytes ?? DEFAULT_MAX_MANIFEST_BYTES,
            maxFiles: this.#options.maxManifestFiles ?? DEFAULT_MAX_MANIFEST_FILES,
        };
    }

    // ---- workspace archives (sbx snapshots) -------------------------------

    #archiveLimit() {
        return this.#options.maxArchiveBytes ?? DEFAULT_MAX_ARCHIVE_BYTES;
    }

    /** The workspace as an sbx snapshot file, read in 1 MiB pieces. */
    async persistWorkspace() {
        const name = `oai-${randomBytes(12).toString('hex')}`;
        await this.#call('snapshot', { name });
        const parts = [];
        let offset = 0;
        const limit = this.#archiveLimit();
        for (;;) {
            const r = await this.#call('snapshot_read', { name, offset, max_bytes: READ_CHUNK_BYTES });
            const chunk = Buffer.from(r.content ?? '', 'base64');
            parts.push(chunk);
            offset += chunk.length;
            if (offset > limit) throw new UserError(`sbx: persistWorkspace: the snapshot is larger than the limit of ${limit} bytes (maxArchiveBytes)`);
            if (r.eof || chunk.length === 0) break;
        }
        const data = Buffer.concat(parts);
        return new Uint8Array(data.buffer, data.byteOffset, data.length);
    }

    /** Restore the workspace from what persistWorkspace returned. */
    async hydrateWorkspace(data) {
        const bytes = Buffer.from(await toUint8Array(data));
        const limit = this.#archiveLimit();
        if (bytes.length > limit) throw new UserError(`sbx: hydrateWorkspace: the archive is larger than the limit of ${limit} bytes (maxArchiveBytes)`);
        const name = `oai-${randomBytes(12).toString('hex')}`;
        let offset = 0;
        do {
            const chunk = bytes.subarray(offset, offset + WRITE_CHUNK_BYTES);
            const final = offset + chunk.length >= bytes.length;
            await this.#call('snapshot_write', { name, offset, content: chunk.toString('base64'), final });
            offset += chunk.length;
        } while (offset < bytes.length);
        await this.#call('restore', { name });
    }

    // ---- ports and lifecycle ----------------------------------------------

    async resolveExposedPort(port) {
        const p = normalizeExposedPort(port);
        const r = await this.#call('port_url', { port: p });
        return recordExposedPortEndpoint(
            this.state,
            { host: r.host, port: r.port, tls: !!r.tls, ...(r.url ? { url: r.url } : {}) },
            p,
        );
    }

    async start() {}

    async running() {
        if (this.#deleted) return false;
        try {
            return !!(await this.#call('stat', { path: '.' })).exists;
        } catch {
            return false;
        }
    }

    /** Forget this object's running processes (the sandbox stays). */
    async stop() {
        this.#processes.clear();
    }

    async shutdown() {
        await this.stop();
    }

    /** Destroy the sandbox (its session key is released). */
    async delete() {
        if (this.#deleted) return;
        await this.stop();
        await this.#server.call('destroy_sandbox', { sandbox: this.state.sessionKey });
        this.#deleted = true;
    }

    async close() {
        await this.stop();
    }
}

/** The editor behind apply_patch: read, applyDiff, atomic write_file. */
export class SbxEditor {
    #session;
    #runAs;
    constructor(session, runAs) {
        this.#session = session;
        this.#runAs = runAs;
    }

    async createFile(operation) {
        const content = applyDiff('', operation.diff, 'create');
        await this.#session.writeFile(operation.path, content, { runAs: this.#runAs });
        return {};
    }

    async updateFile(operation) {
        const st = await this.#session.stat(operation.path);
        if (!st.exists) throw new UserError(`File not found: ${operation.path}`);
        const current = Buffer.from(await this.#session.readFile({ path: operation.path })).toString('utf8');
        const next = applyDiff(current, operation.diff);
        const target = operation.moveTo ?? operation.path;
        await this.#session.writeFile(target, next, { mode: st.mode, runAs: this.#runAs });
        if (operation.moveTo && this.#session.sbxPath(operation.moveTo) !== this.#session.sbxPath(operation.path))
            await this.#session.deletePath(operation.path);
        return {};
    }

    async deleteFile(operation) {
        await this.#session.deletePath(operation.path);
        return {};
    }
}
