// types.check.ts - compiled by `npm run typecheck` (tsc --noEmit): the
// hand-written declarations fit the SDK's SandboxClient contract.
import type { SandboxClient, SandboxSession } from '@openai/agents-core/sandbox';
import { SbxSandboxClient, type SbxSessionState } from '../src/index.js';

const client = new SbxSandboxClient({ sbxPath: 'sbx', provider: 'local' });
const asClient: SandboxClient<any, SbxSessionState> = client;
async function check(): Promise<void> {
    const session = await client.create({});
    const asSession: SandboxSession<SbxSessionState> = session;
    const text: string = await session.execCommand({ cmd: 'true', yieldTimeMs: 10, maxOutputTokens: 5 });
    void asClient;
    void asSession;
    void text;
}
void check;
