// Types of @sbx/openai-agents (hand-written; src/*.js is the implementation).
import type { Editor } from '@openai/agents-core';
import type {
    ExecCommandArgs,
    ExposedPortEndpoint,
    ListDirectoryArgs,
    Manifest,
    ManifestInput,
    MaterializeEntryArgs,
    ReadFileArgs,
    SandboxClient,
    SandboxClientCreateArgs,
    SandboxClientResumeOptions,
    SandboxDirectoryEntry,
    SandboxExecResult,
    SandboxSession,
    SandboxSessionState,
    ViewImageArgs,
    WorkspaceArchiveData,
    WriteStdinArgs,
} from '@openai/agents-core/sandbox';
import type { ToolOutputImage } from '@openai/agents-core';

/** Trusted configuration of a client: never taken from a model. */
export interface SbxSandboxClientOptions {
    [key: string]: unknown;
    /** The sbx binary (default "sbx" on PATH). */
    sbxPath?: string;
    /** sbx.yaml for `sbx mcp --config` (default: sbx's own search). */
    configPath?: string;
    /** `sbx mcp --provider` (default: the configuration's default). */
    provider?: string;
    /** Extra environment of the sbx child (e.g. a provider's API key variable). */
    env?: Record<string, string>;
    /** Extra `sbx mcp` flags (limits: --max-read-bytes ...). */
    serverArgs?: string[];
    /** The user every command and file operation acts as (sbx run_as; needs a provider with users). */
    runAs?: string;
    /** The trusted manifest resume() checks against, when the resume options give none. */
    manifest?: ManifestInput;
    /** Whether the provider has PTYs (default true: local, docker, e2b, opensandbox, daytona do). */
    pty?: boolean;
    /** exec_command/write_stdin output cap in bytes (default 1 MiB). */
    maxOutputBytes?: number;
    /** readFile/write cap in bytes (default 64 MiB). */
    maxFileBytes?: number;
    /** persistWorkspace/hydrateWorkspace cap in bytes (default 256 MiB). */
    maxArchiveBytes?: number;
    /** Inline manifest content cap, host sources included (default 8 MiB). */
    maxManifestBytes?: number;
    /** Manifest file count cap (default 10000). */
    maxManifestFiles?: number;
    /** Extra time a tool call may take beyond its yield time (default 120000 ms). */
    callSlackMs?: number;
}

/** Options of create()/resume() (the run's sandbox.options). */
export interface SbxCreateOptions {
    [key: string]: unknown;
    runAs?: string;
    /** resume(): the current trusted manifest. */
    manifest?: ManifestInput;
}

export interface SbxSessionState extends SandboxSessionState {
    sessionKey: string;
    provider: string;
    manifestDigest: string;
    runAs?: string;
}

/** What serializeSessionState returns: no secret, no host path. */
export interface SbxSerializedSessionState {
    [key: string]: unknown;
    sbxStateVersion: 1;
    sessionKey: string;
    provider: string;
    manifestDigest: string;
    runAs?: string;
}

export declare const SBX_SESSION_STATE_VERSION: 1;

export declare class SbxToolError extends Error {
    readonly tool: string;
}

export declare class SbxServer {
    constructor(options?: { sbxPath?: string; configPath?: string; provider?: string; env?: Record<string, string>; tools?: string; extraArgs?: string[]; callSlackMs?: number });
    commandLine(): { command: string; args: string[] };
    call(name: string, args: Record<string, unknown>, options?: { waitMs?: number; signal?: AbortSignal }): Promise<Record<string, any>>;
    hasTool(name: string): Promise<boolean>;
    close(): Promise<void>;
}

export declare class SbxEditor implements Editor {
    createFile(operation: any): Promise<Record<string, never>>;
    updateFile(operation: any): Promise<Record<string, never>>;
    deleteFile(operation: any): Promise<Record<string, never>>;
}

export declare class SbxSandboxSession implements SandboxSession<SbxSessionState> {
    state: SbxSessionState;
    readonly sessionKey: string;
    sbxPath(path?: string): string;
    exec(args: ExecCommandArgs): Promise<SandboxExecResult>;
    execCommand(args: ExecCommandArgs): Promise<string>;
    writeStdin(args: WriteStdinArgs): Promise<string>;
    supportsPty(): boolean;
    readFile(args: ReadFileArgs): Promise<Uint8Array>;
    writeFile(path: string, content: string | Uint8Array, options?: { mode?: number | string; runAs?: string }): Promise<void>;
    stat(path: string): Promise<{ exists: boolean; type?: string; size?: number; mode?: string; mtime?: number }>;
    deletePath(path: string, options?: { recursive?: boolean }): Promise<void>;
    listDir(args: ListDirectoryArgs): Promise<SandboxDirectoryEntry[]>;
    pathExists(path: string, runAs?: string): Promise<boolean>;
    directoryExists(path: string, runAs?: string): Promise<boolean>;
    viewImage(args: ViewImageArgs): Promise<ToolOutputImage>;
    createEditor(runAs?: string): SbxEditor;
    materializeEntry(args: MaterializeEntryArgs): Promise<void>;
    applyManifest(manifest: Manifest, runAs?: string): Promise<void>;
    persistWorkspace(): Promise<Uint8Array>;
    hydrateWorkspace(data: WorkspaceArchiveData): Promise<void>;
    resolveExposedPort(port: number): Promise<ExposedPortEndpoint>;
    start(): Promise<void>;
    running(): Promise<boolean>;
    stop(): Promise<void>;
    shutdown(): Promise<void>;
    delete(): Promise<void>;
    close(): Promise<void>;
}

export declare class SbxSandboxClient implements SandboxClient<SbxCreateOptions, SbxSessionState> {
    readonly backendId: 'sbx';
    readonly supportsDefaultOptions: true;
    readonly options: SbxSandboxClientOptions;
    readonly server: SbxServer;
    constructor(options?: SbxSandboxClientOptions);
    create(args?: SandboxClientCreateArgs<SbxCreateOptions> | Manifest, manifestOptions?: SbxCreateOptions): Promise<SbxSandboxSession>;
    serializeSessionState(state: SbxSessionState): Promise<SbxSerializedSessionState>;
    deserializeSessionState(state: Record<string, unknown>): Promise<SbxSessionState>;
    resume(state: SbxSessionState, options?: SandboxClientResumeOptions<SbxCreateOptions>): Promise<SbxSandboxSession>;
    delete(state: SbxSessionState): Promise<void>;
    close(): Promise<void>;
}

export declare function toSbxManifest(
    manifest: Manifest,
    options?: { runAs?: string; maxBytes?: number; maxFiles?: number },
): Promise<{ manifest: Record<string, unknown>; text: string }>;
