// workload.mjs - the end-to-end workload: a SandboxAgent on a scripted
// model, run through the SDK's run() on an SbxSandboxClient session.
//
// The manifest: a writable copy of a host repository (local_dir), read-only
// fixtures, an output directory the declared user may write, run as that
// user where the provider has users. The model reads the task, runs the
// failing test, patches the code (apply_patch), reruns the test, tries to
// overwrite a fixture, writes output/report.md.
import { chmodSync, existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { run, setTracingDisabled } from '@openai/agents';
import { Manifest, SandboxAgent, filesystem, shell } from '@openai/agents/sandbox';
import { ScriptedModel, assistantMessage, functionCall } from '@openai/agents-core/testing';

setTracingDisabled(true);

export const USER = 'agent';
const CALC = '#!/bin/sh\nadd() {\n  echo $(($1 - $2))\n}\n';
const TEST = '#!/bin/sh\n. "$(dirname "$0")/calc.sh"\nif [ "$(add 2 3)" = 5 ]; then echo PASS; else echo "FAIL: add 2 3 = $(add 2 3)"; exit 1; fi\n';
export const FIXTURE = 'expected: 5\n';
export const REPORT = '# Report\n\nrepo/test.sh failed (add subtracted); fixed add() in repo/calc.sh; test.sh passes.\n';

/** The host repository the manifest copies (made once per environment). */
export function hostRepo(dir) {
    const repo = join(dir, 'host-repo');
    if (!existsSync(repo)) {
        mkdirSync(repo, { recursive: true });
        writeFileSync(join(repo, 'calc.sh'), CALC);
        writeFileSync(join(repo, 'test.sh'), TEST);
        // Group-writable, so the declared user (in the entry's group) can
        // patch the copy.
        chmodSync(join(repo, 'calc.sh'), 0o664);
        chmodSync(join(repo, 'test.sh'), 0o775);
    }
    return repo;
}

/** The trusted manifest; `variant` changes it (the refused resume). */
export function workloadManifest(dir, { users, variant = '' } = {}) {
    const group = users ? { group: { name: USER } } : {};
    return new Manifest({
        entries: {
            'task.md': { type: 'file', content: `Make repo/test.sh pass, then write output/report.md.${variant}\n` },
            repo: { type: 'local_dir', src: hostRepo(dir), permissions: 0o775, ...group },
            fixtures: {
                type: 'dir',
                permissions: 0o555,
                children: { 'expected.txt': { type: 'file', content: FIXTURE, permissions: 0o444 } },
            },
            output: { type: 'dir', permissions: 0o775, ...group },
        },
        ...(users ? { users: [{ name: USER }] } : {}),
    });
}

const call = (name, args, id) => functionCall(name, args, { callId: id });
// apply_patch is the SDK's hosted tool for a Responses-style model: the
// model emits apply_patch_call items, which the runtime gives the editor.
const patch = (operation, id) => ({ type: 'apply_patch_call', callId: id, id, status: 'completed', operation });

/** The scripted model of the first run: one tool call per turn. */
export function workloadModel() {
    return new ScriptedModel([
        [call('exec_command', { cmd: 'cat task.md' }, 'c1')],
        [call('exec_command', { cmd: 'sh repo/test.sh' }, 'c2')],
        [patch({ type: 'update_file', path: 'repo/calc.sh', diff: ' add() {\n-  echo $(($1 - $2))\n+  echo $(($1 + $2))\n }\n' }, 'c3')],
        [call('exec_command', { cmd: 'sh repo/test.sh' }, 'c4')],
        [call('exec_command', { cmd: 'echo overwritten > fixtures/expected.txt' }, 'c5')],
        [patch({ type: 'update_file', path: 'fixtures/expected.txt', diff: '-expected: 5\n+expected: 6\n' }, 'c6')],
        [patch({ type: 'create_file', path: 'output/report.md', diff: REPORT.replace(/\n$/, '').split('\n').map((l) => `+${l}`).join('\n') + '\n' }, 'c7')],
        [call('exec_command', { cmd: 'cat output/report.md; ls -ln output' }, 'c8')],
        [assistantMessage('Fixed add(); the report is in output/report.md.')],
    ]);
}

export function workloadAgent(model, { users, manifest } = {}) {
    return new SandboxAgent({
        name: 'fixer',
        instructions: 'Fix the repository so that its test passes.',
        model,
        capabilities: [shell(), filesystem()],
        ...(manifest ? { defaultManifest: manifest } : {}),
        ...(users ? { runAs: USER } : {}),
    });
}

/** The tool outputs of a run, by call id. */
export function toolOutputs(result) {
    const out = {};
    for (const item of result.newItems) {
        if (item.type !== 'tool_call_output_item') continue;
        const raw = item.rawItem;
        const o = item.output ?? raw.output;
        const text = typeof o === 'string' ? o : o?.text ?? JSON.stringify(o);
        out[raw.callId] = raw.status === 'failed' ? `[failed] ${text ?? ''}` : text;
    }
    return out;
}

export { run };
