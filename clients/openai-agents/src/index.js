// @sbx/openai-agents: a SandboxClient for the OpenAI Agents SDK on sbx.
export { SbxSandboxClient, SBX_SESSION_STATE_VERSION } from './client.js';
export { SbxSandboxSession, SbxEditor } from './session.js';
export { SbxServer, SbxToolError } from './server.js';
export { toSbxManifest } from './manifest.js';
