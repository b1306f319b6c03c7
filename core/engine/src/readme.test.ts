import { execFile } from 'node:child_process';
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';

const README = resolve(import.meta.dirname, '../README.md');
const REPO_ROOT = resolve(import.meta.dirname, '../../..');

describe('README', () => {
  it('the API snippet runs and prints what its comments say', async () => {
    const snippet = /```ts\n([\s\S]*?)```/.exec(readFileSync(README, 'utf8'))?.[1];
    expect(snippet).toBeDefined();
    const expected = [...snippet!.matchAll(/console\.log\(.*\); \/\/ (.*)$/gm)].map((m) => m[1]);
    expect(expected.length).toBeGreaterThan(0);
    // Inside the package so '@compresso/engine' resolves as it does for a user of the workspace.
    const file = resolve(import.meta.dirname, `test-support/readme-snippet-${process.pid}.ts`);
    writeFileSync(file, snippet!);
    try {
      const { stdout } = await promisify(execFile)(process.execPath, [file], { cwd: REPO_ROOT });
      expect(stdout.trim().split('\n')).toEqual(expected);
    } finally {
      rmSync(file, { force: true });
    }
  });
});
