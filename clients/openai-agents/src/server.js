// server.js - the one long-lived `sbx mcp` child process of a client.
//
// The child is started with trusted options only (the sbx binary, its
// configuration file, the provider, extra environment): nothing a model
// says reaches its command line. It is spoken to through the official MCP
// Client over stdio, lazily started on the first call and shared by every
// session of the client.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport, getDefaultEnvironment } from '@modelcontextprotocol/sdk/client/stdio.js';

const STDERR_TAIL_BYTES = 8192;
const SANITIZER_RE = /ERROR: (AddressSanitizer|LeakSanitizer)|runtime error:/;
// Time allowed to a call beyond what the call itself waits (yield time).
const DEFAULT_CALL_SLACK_MS = 120_000;

/** A tool that ran and failed (`isError`), or a transport failure. */
export class SbxToolError extends Error {
    constructor(tool, message) {
        super(message);
        this.name = 'SbxToolError';
        this.tool = tool;
    }
}

export class SbxServer {
    #options;
    #client = null;
    #connecting = null;
    #stderrTail = '';
    #transport = null;
    #sanitizerReport = null;
    #closed = false;

    /**
     * @param {{sbxPath?: string, configPath?: string, provider?: string,
     *          env?: Record<string,string>, tools?: string, extraArgs?: string[],
     *          callSlackMs?: number}} options
     */
    constructor(options = {}) {
        this.#options = options;
    }

    /** The command line `sbx mcp` is started with (no secret in it). */
    commandLine() {
        const o = this.#options;
        const args = ['mcp', '--tools', o.tools ?? 'agent,sdk'];
        if (o.configPath) args.push('--config', o.configPath);
        if (o.provider) args.push('--provider', o.provider);
        if (o.extraArgs) args.push(...o.extraArgs);
        return { command: o.sbxPath ?? 'sbx', args };
    }

    async #connect() {
        if (this.#closed) throw new SbxToolError('connect', 'sbx: the sbx mcp server of this client is closed');
        const { command, args } = this.commandLine();
        const transport = new StdioClientTransport({
            command,
            args,
            env: { ...getDefaultEnvironment(), ...(this.#options.env ?? {}) },
            stderr: 'pipe',
            maxBufferSize: 32 * 1024 * 1024,
        });
        // Keep the end of the server's log for error messages, bounded.
        transport.stderr?.on('data', (chunk) => {
            const text = this.#stderrTail + chunk.toString('utf8');
            // A sanitizer build's report (tests fail on it); kept from its start.
            if (!this.#sanitizerReport && SANITIZER_RE.test(text))
                this.#sanitizerReport = text.slice(text.search(SANITIZER_RE)).slice(0, 4 * STDERR_TAIL_BYTES);
            this.#stderrTail = text.slice(-STDERR_TAIL_BYTES);
        });
        const client = new Client({ name: '@sbx/openai-agents', version: '0.1.0' }, { capabilities: {} });
        client.onclose = () => {
            if (this.#client === client) this.#client = null;
        };
        try {
            await client.connect(transport);
        } catch (error) {
            await client.close().catch(() => {});
            throw new SbxToolError('connect', `sbx: cannot start ${command} mcp: ${error.message}${this.#logTail()}`);
        }
        this.#client = client;
        this.#transport = transport;
        return client;
    }

    #logTail() {
        const tail = this.#stderrTail.trim();
        return tail ? ` (server log: ${tail.split('\n').slice(-3).join(' | ')})` : '';
    }

    async client() {
        if (this.#client) return this.#client;
        this.#connecting ??= this.#connect().finally(() => {
            this.#connecting = null;
        });
        return await this.#connecting;
    }

    /**
     * Call a tool; returns its structured content, throws SbxToolError with
     * the server's message when the tool failed.
     */
    async call(name, args, { waitMs = 0, signal } = {}) {
        const client = await this.client();
        let result;
        try {
            result = await client.callTool({ name, arguments: args }, undefined, {
                timeout: waitMs + (this.#options.callSlackMs ?? DEFAULT_CALL_SLACK_MS),
                signal,
            });
        } catch (error) {
            throw new SbxToolError(name, `sbx: ${name}: ${error.message}${this.#client ? '' : this.#logTail()}`);
        }
        const text = (result.content ?? [])
            .filter((c) => c.type === 'text')
            .map((c) => c.text)
            .join('\n');
        if (result.isError) throw new SbxToolError(name, text || `sbx: ${name} failed`);
        if (result.structuredContent) return result.structuredContent;
        try {
            return JSON.parse(text);
        } catch {
            throw new SbxToolError(name, `sbx: ${name}: the server's result is not JSON`);
        }
    }

    /** The start of a sanitizer report the child wrote, or null (tests). */
    get sanitizerReport() {
        return this.#sanitizerReport;
    }

    /** The child's process id while it runs (tests). */
    get pid() {
        return this.#client ? this.#transport?.pid ?? null : null;
    }

    /** Whether the server has the tool (tools/list; the sdk group is optional). */
    async hasTool(name) {
        const client = await this.client();
        const { tools } = await client.listTools();
        return tools.some((t) => t.name === name);
    }

    async close() {
        this.#closed = true;
        const client = this.#client;
        this.#client = null;
        await client?.close();
    }
}
