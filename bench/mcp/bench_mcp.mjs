// bench_mcp.mjs COUNT PROVIDER... - `exec_command` of `true` through one
// running `sbx mcp` (the official MCP SDK Client over stdio) against
// `sbx exec KEY -- true` started as a new process each time, for the same
// session, COUNT of each, interleaved in blocks of 10 so that the machine's
// load falls on both. Prints the medians and the ratio MCP / CLI per
// provider. Nothing is asserted on the times; a failed call fails the run.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { spawnSync } from 'node:child_process';
import { makeEnv } from './common.mjs';

const count = Number(process.argv[2] || 200);
const providers = process.argv.slice(3).length ? process.argv.slice(3) : ['local'];
const block = 10;

const median = (a) => {
  const s = [...a].sort((x, y) => x - y);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};
const pct = (a, p) => [...a].sort((x, y) => x - y)[Math.min(a.length - 1, Math.floor(a.length * p))];
const ms = (ns) => Number(ns) / 1e6;

async function bench(provider) {
  const env = makeEnv(provider);
  const key = `bench-mcp-${provider}-${process.pid}`;
  const client = new Client({ name: 'sbx-bench-mcp', version: '1.0.0' });
  await client.connect(new StdioClientTransport({ command: env.sbx, args: env.mcpArgs(), env: env.env, cwd: env.dir }));
  const mcpTrue = async () => {
    const r = await client.callTool({ name: 'exec_command', arguments: { sandbox: key, argv: ['true'] } });
    if (r.isError || r.structuredContent?.exit_code !== 0) throw new Error(`exec_command: ${JSON.stringify(r)}`);
  };
  const cliTrue = () => {
    const p = spawnSync(env.sbx, ['exec', key, '--', 'true'], { env: env.env, stdio: ['ignore', 'ignore', 'pipe'] });
    if (p.status !== 0) throw new Error(`sbx exec: ${p.status} ${p.stderr}`);
  };
  try {
    const c = await client.callTool({ name: 'create_sandbox', arguments: { sandbox: key } });
    if (c.isError) throw new Error(`create_sandbox: ${JSON.stringify(c)}`);
    for (let i = 0; i < 5; i++) { await mcpTrue(); cliTrue(); }
    const mcp = [], cli = [];
    for (let done = 0; done < count; done += block) {
      const n = Math.min(block, count - done);
      for (let i = 0; i < n; i++) {
        const t = process.hrtime.bigint();
        await mcpTrue();
        mcp.push(ms(process.hrtime.bigint() - t));
      }
      for (let i = 0; i < n; i++) {
        const t = process.hrtime.bigint();
        cliTrue();
        cli.push(ms(process.hrtime.bigint() - t));
      }
    }
    return { provider, mcp, cli };
  } finally {
    await client.callTool({ name: 'destroy_sandbox', arguments: { sandbox: key } }).catch(() => {});
    await client.close().catch(() => {});
    env.cleanup();
  }
}

const rows = [];
for (const p of providers) rows.push(await bench(p));
const f = (x) => x.toFixed(2).padStart(8);
console.log(`exec of true, ${count} calls each, interleaved in blocks of ${block} (ms: median, p90)`);
console.log('provider   MCP exec_command      sbx exec (process)    ratio (median)  target');
for (const { provider, mcp, cli } of rows) {
  const r = median(mcp) / median(cli);
  console.log(`${provider.padEnd(8)} ${f(median(mcp))} ${f(pct(mcp, 0.9))}     ${f(median(cli))} ${f(pct(cli, 0.9))}     ${r.toFixed(3).padStart(8)}x      <= 0.5x`);
}
