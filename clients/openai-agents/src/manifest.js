// manifest.js - an SDK Manifest as an sbx manifest (docs/MANIFEST.md).
//
// `sbx mcp` accepts inline entries only (file, dir), users, groups and
// run_as: a tool call can never name a host path. Entries with host sources
// (local_file, local_dir) are read here, by the client, which is trusted
// application code: each file is opened without following symlinks, checked
// on its descriptor, bounded in size and count, and sent as inline base64.
import { constants as fsc } from 'node:fs';
import { open, opendir } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { Permissions } from '@openai/agents-core/sandbox';
import { stableJsonStringify } from '@openai/agents-core/sandbox/internal';

export const DEFAULT_MAX_MANIFEST_BYTES = 8 * 1024 * 1024; // inline content, all entries
export const DEFAULT_MAX_MANIFEST_FILES = 10_000;

/** The octal text sbx manifests take for a mode ("0644"). */
function modeText(mode) {
    return '0' + (mode & 0o777).toString(8).padStart(3, '0');
}

function entryMode(entry) {
    if (entry.permissions === undefined) return undefined;
    const mode = new Permissions(entry.permissions).toMode() & 0o777;
    return mode === 0 ? undefined : mode;
}

function entryGroup(entry) {
    const g = entry.group;
    if (!g) return undefined;
    return typeof g === 'string' ? g : g.name;
}

export class Budget {
    constructor(maxBytes, maxFiles) {
        this.maxBytes = maxBytes;
        this.maxFiles = maxFiles;
        this.bytes = 0;
        this.files = 0;
    }
    take(path, bytes) {
        this.bytes += bytes;
        this.files += 1;
        if (this.bytes > this.maxBytes)
            throw new Error(`manifest entry ${path}: the manifest's content is larger than the limit of ${this.maxBytes} bytes (maxManifestBytes)`);
        if (this.files > this.maxFiles)
            throw new Error(`manifest entry ${path}: the manifest has more than ${this.maxFiles} files (maxManifestFiles)`);
    }
}

/** Read one host regular file: no symlink, no FIFO (O_NONBLOCK), bounded. */
async function readHostFile(source, entryPath, budget) {
    let fh;
    try {
        fh = await open(source, fsc.O_RDONLY | fsc.O_NOFOLLOW | fsc.O_NONBLOCK | fsc.O_CLOEXEC);
    } catch (error) {
        throw new Error(`manifest entry ${entryPath}: source ${source}: ${error.code === 'ELOOP' ? 'is a symlink' : error.message}`);
    }
    try {
        const st = await fh.stat();
        if (!st.isFile()) throw new Error(`manifest entry ${entryPath}: source ${source} is not a regular file`);
        budget.take(entryPath, st.size);
        const data = Buffer.alloc(st.size);
        let got = 0;
        while (got < st.size) {
            const { bytesRead } = await fh.read(data, got, st.size - got, got);
            if (bytesRead === 0) break;
            got += bytesRead;
        }
        return { data: data.subarray(0, got), mode: st.mode & 0o777 };
    } finally {
        await fh.close();
    }
}

/** A host tree as dir and file entries (regular files and directories only). */
async function expandHostDir(source, entryPath, out, budget, depth = 0) {
    if (depth > 64) throw new Error(`manifest entry ${entryPath}: deeper than 64 levels`);
    let dir;
    try {
        // Opening the directory itself with O_NOFOLLOW|O_DIRECTORY refuses a
        // symlink at any level: every level is entered through here.
        const fh = await open(source, fsc.O_RDONLY | fsc.O_NOFOLLOW | fsc.O_DIRECTORY | fsc.O_CLOEXEC);
        await fh.close();
        dir = await opendir(source);
    } catch (error) {
        throw new Error(`manifest entry ${entryPath}: source ${source}: ${error.code === 'ELOOP' || error.code === 'ENOTDIR' ? 'is not a directory (or is a symlink)' : error.message}`);
    }
    const names = [];
    for await (const d of dir) names.push(d);
    names.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    for (const d of names) {
        const child = `${entryPath}/${d.name}`;
        const src = join(source, d.name);
        if (d.isDirectory()) {
            budget.take(child, 0);
            out.push({ path: child, type: 'dir' });
            await expandHostDir(src, child, out, budget, depth + 1);
        } else if (d.isFile()) {
            const { data, mode } = await readHostFile(src, child, budget);
            out.push({ path: child, type: 'file', encoding: 'base64', content: data.toString('base64'), mode: modeText(mode) });
        } else {
            throw new Error(`manifest entry ${child}: source ${src} is a symlink or special file`);
        }
    }
}

/** The entries of an SDK manifest (flattened) as sbx manifest entries. */
export async function sbxEntries(manifest, budget) {
    const out = [];
    for (const { logicalPath, entry } of manifest.iterEntries()) {
        await sbxEntry(logicalPath, entry, out, budget);
    }
    return out;
}

async function sbxEntry(path, entry, out, budget) {
    if (!path) throw new Error('manifest entry: an entry may not be the workspace root');
    const mode = entryMode(entry);
    const group = entryGroup(entry);
    const extra = {
        ...(mode !== undefined ? { mode: modeText(mode) } : {}),
        ...(group ? { group } : {}),
    };
    switch (entry.type) {
        case 'dir':
            // Children are visited by iterEntries.
            out.push({ path, type: 'dir', ...extra });
            return;
        case 'file': {
            const bytes = typeof entry.content === 'string' ? Buffer.from(entry.content, 'utf8') : Buffer.from(entry.content);
            budget.take(path, bytes.length);
            if (typeof entry.content === 'string') out.push({ path, type: 'file', content: entry.content, ...extra });
            else out.push({ path, type: 'file', encoding: 'base64', content: bytes.toString('base64'), ...extra });
            return;
        }
        case 'local_file': {
            const { data, mode: srcMode } = await readHostFile(resolve(entry.src), path, budget);
            out.push({ path, type: 'file', encoding: 'base64', content: data.toString('base64'), mode: modeText(mode ?? srcMode), ...(group ? { group } : {}) });
            return;
        }
        case 'local_dir': {
            out.push({ path, type: 'dir', ...extra });
            const at = out.length;
            await expandHostDir(resolve(entry.src), path, out, budget);
            if (group) for (let i = at; i < out.length; i++) out[i].group = group;
            return;
        }
        case 'git_repo':
            throw new Error(`manifest entry ${path}: git_repo entries are not supported by SbxSandboxClient (sbx mcp takes inline entries only); check the repository out on the host and use a local_dir entry`);
        default:
            throw new Error(`manifest entry ${path}: entries of type ${entry.type} (mounts) are not supported by SbxSandboxClient`);
    }
}

/** Users and groups of an SDK manifest: sbx users carry their groups. */
export function sbxUsersAndGroups(manifest) {
    const groups = manifest.groups.map((g) => ({ name: g.name }));
    const membership = new Map();
    const users = [];
    const addUser = (name) => {
        if (!membership.has(name)) {
            membership.set(name, []);
            users.push(name);
        }
    };
    for (const u of manifest.users) addUser(u.name);
    for (const g of manifest.groups) {
        for (const u of g.users ?? []) {
            addUser(u.name);
            membership.get(u.name).push(g.name);
        }
    }
    return {
        groups,
        users: users.map((name) => ({ name, ...(membership.get(name).length ? { groups: membership.get(name) } : {}) })),
    };
}

/**
 * The sbx manifest of an SDK manifest plus an optional run_as, in canonical
 * form (keys sorted, sent in that order), and that text. sbx computes the
 * digest (of what the manifest declares, whatever its text).
 */
export async function toSbxManifest(manifest, { runAs, maxBytes = DEFAULT_MAX_MANIFEST_BYTES, maxFiles = DEFAULT_MAX_MANIFEST_FILES } = {}) {
    if (manifest.extraPathGrants?.length)
        throw new Error('manifest: extraPathGrants are not supported by SbxSandboxClient (sbx confines every path to the workspace)');
    const budget = new Budget(maxBytes, maxFiles);
    const entries = await sbxEntries(manifest, budget);
    const { users, groups } = sbxUsersAndGroups(manifest);
    // sbx wants every entry's group declared; the SDK lets an entry name a
    // user (its own group): declare those groups too (sbx makes the group
    // first and reuses it as the user's primary group).
    for (const e of entries)
        if (e.group && !groups.some((g) => g.name === e.group)) groups.push({ name: e.group });
    const m = { version: 1, entries };
    if (users.length) m.users = users;
    if (groups.length) m.groups = groups;
    if (runAs) m.run_as = runAs;
    const text = stableJsonStringify(m);
    return { manifest: JSON.parse(text), text };
}
