// dist/ is committed, so that the tests and the examples run where npm is not at hand. When
// TypeScript is installed (npm ci), this checks that dist/ is what src/ compiles to, and that
// the published types serve a TypeScript program (test/usage.ts).
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { existsSync } from "node:fs";
import { readFile, readdir } from "node:fs/promises";
import { dirname, join } from "node:path";
import { describe, it } from "node:test";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";

import { scratch } from "./harness.mjs";

const run = promisify(execFile);
const pkg = dirname(dirname(fileURLToPath(import.meta.url)));
const tsc = join(pkg, "node_modules", "typescript", "bin", "tsc");
const skip = existsSync(tsc) ? false : "TypeScript is not installed: run `npm ci` in clients/typescript";

describe("dist", { skip, timeout: 120_000, concurrency: true }, () => {
  it("is what src compiles to (run `npm run build` after changing src)", async () => {
    const { dir, cleanup } = await scratch();
    try {
      await run(process.execPath, [tsc, "-p", pkg, "--outDir", dir], { cwd: pkg });
      const built = (await readdir(dir)).sort();
      assert.deepEqual((await readdir(join(pkg, "dist"))).sort(), built);
      for (const f of built) {
        assert.equal(await readFile(join(pkg, "dist", f), "utf8"), await readFile(join(dir, f), "utf8"), `dist/${f} is stale: run npm run build`);
      }
    } finally {
      await cleanup();
    }
  });

  it("serves a TypeScript program its types", async () => {
    await run(process.execPath, [tsc, "-p", join(pkg, "test", "tsconfig.json")], { cwd: pkg });
  });
});
