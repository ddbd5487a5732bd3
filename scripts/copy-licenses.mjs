// `prepack` of the published packages (@bpavl/wasm, @bpavl/light-client,
// @bpavl/storage): copies the license texts, kept once at the repository's
// root, into the package being packed (their copies are not committed).
import { copyFileSync } from 'node:fs';
import { join } from 'node:path';

const root = join(import.meta.dirname, '..');
for (const name of ['LICENSE-MIT', 'LICENSE-APACHE']) copyFileSync(join(root, name), join(process.cwd(), name));
