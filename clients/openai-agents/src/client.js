// client.js - SbxSandboxClient: an OpenAI Agents SDK SandboxClient on sbx.
//
// Sessions run on whatever provider the trusted sbx configuration names,
// through one long-lived `sbx mcp --tools agent,sdk` child per client.
// Serialized state holds the session key, the provider's name and the
// digest of the manifest the session was created with: no secret, no host
// path. resume() connects only with the current trusted manifest: its
// digest is sent to connect_sandbox, and the server refuses any other.
import { randomUUID } from 'node:crypto';
import { UserError } from '@openai/agents-core';
import {
    isNoopSnapshotSpec,
    Manifest,
    normalizeSandboxClientCreateArgs,
    SandboxConfigurationError,
    SandboxUnsupportedFeatureError,
} from '@openai/agents-core/sandbox';
import { deserializeManifest } from '@openai/agents-core/sandbox/internal';
import { toSbxManifest } from './manifest.js';
import { SbxServer } from './server.js';
import { SbxSandboxSession } from './session.js';

export const SBX_SESSION_STATE_VERSION = 1;
const SESSION_KEY_RE = /^[A-Za-z0-9._:@-]{1,200}$/;
const DIGEST_RE = /^[0-9a-f]{64}$/;

function runAsName(runAs) {
    if (runAs === undefined || runAs === null) return undefined;
    const name = typeof runAs === 'string' ? runAs.trim() : runAs.name;
    return name || undefined;
}

export class SbxSandboxClient {
    backendId = 'sbx';
    supportsDefaultOptions = true;
    /** The trusted options given to the constructor. */
    options;
    #server;

    /**
     * @param {import('./index.js').SbxSandboxClientOptions} options trusted
     *   configuration: the sbx binary, its config file, the provider, the
     *   child's extra environment, limits. Never taken from a model.
     */
    constructor(options = {}) {
        this.options = { ...options };
        this.#server = new SbxServer({
            sbxPath: options.sbxPath,
            configPath: options.configPath,
            provider: options.provider,
            env: options.env,
            extraArgs: options.serverArgs,
            callSlackMs: options.callSlackMs,
        });
    }

    /** The shared `sbx mcp` connection (tests, advanced use). */
    get server() {
        return this.#server;
    }

    #sessionOptions() {
        const o = this.options;
        return {
            pty: o.pty,
            maxOutputBytes: o.maxOutputBytes,
            maxFileBytes: o.maxFileBytes,
            maxArchiveBytes: o.maxArchiveBytes,
            maxManifestBytes: o.maxManifestBytes,
            maxManifestFiles: o.maxManifestFiles,
        };
    }

    #limits() {
        return { maxBytes: this.options.maxManifestBytes, maxFiles: this.options.maxManifestFiles };
    }

    async create(args, manifestOptions) {
        const c = normalizeSandboxClientCreateArgs(args, manifestOptions);
        // The runtime's default spec ({type: 'local'}) and noop are fine: an
        // sbx sandbox keeps its workspace itself. Other stores are not used.
        if (c.snapshot && !isNoopSnapshotSpec(c.snapshot) && c.snapshot.type !== 'local')
            throw new SandboxUnsupportedFeatureError('SbxSandboxClient does not take a snapshot spec at create: use persistWorkspace/hydrateWorkspace (sbx snapshots)', {
                provider: 'SbxSandboxClient',
                feature: 'snapshot',
            });
        const runAs = runAsName(c.options?.runAs ?? this.options.runAs);
        const { manifest } = await toSbxManifest(c.manifest, { runAs, ...this.#limits() });
        const key = `oai-${randomUUID()}`;
        const r = await this.#server.call('create_sandbox', { sandbox: key, manifest });
        const environment = await c.manifest.resolveEnvironment();
        return new SbxSandboxSession({
            server: this.#server,
            options: this.#sessionOptions(),
            state: {
                manifest: c.manifest,
                sessionKey: r.sandbox ?? key,
                provider: r.provider,
                manifestDigest: r.manifest_digest,
                ...(runAs ? { runAs } : {}),
                environment,
                workspaceReady: true,
            },
        });
    }

    async serializeSessionState(state) {
        return {
            sbxStateVersion: SBX_SESSION_STATE_VERSION,
            sessionKey: state.sessionKey,
            provider: state.provider,
            manifestDigest: state.manifestDigest ?? '',
            ...(state.runAs ? { runAs: state.runAs } : {}),
        };
    }

    /** Parse serialized state; everything in it is checked, nothing trusted. */
    async deserializeSessionState(raw) {
        if (!raw || typeof raw !== 'object') throw new UserError('sbx session state: not an object');
        if (raw.sbxStateVersion !== SBX_SESSION_STATE_VERSION)
            throw new UserError(`sbx session state: unsupported version ${JSON.stringify(raw.sbxStateVersion)}`);
        if (typeof raw.sessionKey !== 'string' || !SESSION_KEY_RE.test(raw.sessionKey))
            throw new UserError('sbx session state: sessionKey is missing or malformed');
        if (typeof raw.provider !== 'string' || !/^[A-Za-z0-9_-]{1,64}$/.test(raw.provider))
            throw new UserError('sbx session state: provider is missing or malformed');
        if (typeof raw.manifestDigest !== 'string' || (raw.manifestDigest !== '' && !DIGEST_RE.test(raw.manifestDigest)))
            throw new UserError('sbx session state: manifestDigest is malformed');
        if (raw.runAs !== undefined && (typeof raw.runAs !== 'string' || !/^[a-z_][a-z0-9_-]{0,31}$/.test(raw.runAs)))
            throw new UserError('sbx session state: runAs is malformed');
        return {
            // The runtime hands the SDK envelope's manifest along; resume
            // replaces it with the trusted one.
            manifest: raw.manifest ? deserializeManifest(raw.manifest) : new Manifest(),
            sessionKey: raw.sessionKey,
            provider: raw.provider,
            manifestDigest: raw.manifestDigest,
            ...(raw.runAs ? { runAs: raw.runAs } : {}),
            workspaceReady: true,
        };
    }

    /**
     * Reconnect to a serialized session. The current trusted manifest comes
     * from the application: `options.clientOptions.manifest` (the run's
     * `sandbox.options.manifest`) or the client's `manifest` option, never
     * from the state. Its digest must be the one sbx recorded at create.
     */
    async resume(state, options = {}) {
        const trusted = options.clientOptions?.manifest ?? this.options.manifest;
        if (!trusted)
            throw new SandboxConfigurationError('SbxSandboxClient.resume needs the current trusted manifest (clientOptions.manifest or the manifest client option)', {
                provider: 'SbxSandboxClient',
            });
        const manifest = trusted instanceof Manifest ? trusted : new Manifest(trusted);
        const runAs = runAsName(options.clientOptions?.runAs ?? this.options.runAs);
        // sbx compares the digest of what the manifest declares with the one
        // it recorded at create: the manifest itself is sent, the client
        // computes no digest.
        const { manifest: sbxManifest } = await toSbxManifest(manifest, { runAs, ...this.#limits() });
        const r = await this.#server.call('connect_sandbox', { sandbox: state.sessionKey, manifest: sbxManifest });
        if (state.provider && r.provider && r.provider !== state.provider)
            throw new SandboxConfigurationError(`sbx session ${state.sessionKey} runs on provider ${r.provider}, not ${state.provider} as its state says`, {
                provider: 'SbxSandboxClient',
            });
        return new SbxSandboxSession({
            server: this.#server,
            options: this.#sessionOptions(),
            state: {
                ...state,
                manifest,
                provider: r.provider ?? state.provider,
                manifestDigest: r.manifest_digest,
                ...(runAs ? { runAs } : {}),
                environment: { ...(await manifest.resolveEnvironment()) },
                workspaceReady: true,
            },
        });
    }

    async delete(state) {
        await this.#server.call('destroy_sandbox', { sandbox: state.sessionKey });
    }

    /** End the `sbx mcp` child (sandboxes stay). */
    async close() {
        await this.#server.close();
    }
}
