// A tiny static file server for built pages: 127.0.0.1 only, a free port,
// GET/HEAD only, `.wasm` as application/wasm, nothing cached. `routes` adds
// in-memory responses (e.g. the benchmark's binary payload); `onPost`, if
// given, takes POSTed bodies (≤ 1 MiB, as text; bench:browser's results).
import { createReadStream } from 'node:fs';
import { stat } from 'node:fs/promises';
import { createServer } from 'node:http';
import { extname, join, resolve, sep } from 'node:path';

const TYPES = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.json': 'application/json',
  '.wasm': 'application/wasm',
  '.map': 'application/json',
  '.svg': 'image/svg+xml',
  '.ico': 'image/x-icon',
};

/**
 * Serves `dir` (and `routes`: pathname → `{ type, body }`) on 127.0.0.1.
 * Resolves to `{ url, close }` once listening; `url` ends with `/`.
 *
 * @param {string} dir
 * @param {{ routes?: Record<string, { type: string, body: Uint8Array | string }>, onPost?: (pathname: string, body: string) => void }} [options]
 * @returns {Promise<{ url: string, close: () => Promise<void> }>}
 */
export async function serve(dir, { routes = {}, onPost } = {}) {
  const root = resolve(dir);
  const server = createServer(async (req, res) => {
    const send = (status, type, body) => {
      res.writeHead(status, { 'content-type': type, 'cache-control': 'no-store' });
      res.end(req.method === 'HEAD' ? undefined : body);
    };
    try {
      if (req.method === 'POST' && onPost) {
        let body = '';
        req.setEncoding('utf8');
        for await (const part of req) {
          body += part;
          if (body.length > 1 << 20) return send(413, 'text/plain', 'too large\n');
        }
        send(204, 'text/plain', '');
        onPost(new URL(req.url ?? '/', 'http://127.0.0.1').pathname, body);
        return;
      }
      if (req.method !== 'GET' && req.method !== 'HEAD') return send(405, 'text/plain', 'method not allowed\n');
      const { pathname } = new URL(req.url ?? '/', 'http://127.0.0.1');
      const route = routes[pathname];
      if (route) return send(200, route.type, route.body);
      const rel = decodeURIComponent(pathname.endsWith('/') ? `${pathname}index.html` : pathname);
      const file = resolve(join(root, rel));
      if (file !== root && !file.startsWith(root + sep)) return send(403, 'text/plain', 'forbidden\n');
      const info = await stat(file).catch(() => undefined);
      if (!info?.isFile()) return send(404, 'text/plain', `not found: ${pathname}\n`);
      res.writeHead(200, {
        'content-type': TYPES[extname(file)] ?? 'application/octet-stream',
        'content-length': info.size,
        'cache-control': 'no-store',
      });
      if (req.method === 'HEAD') return res.end();
      createReadStream(file).pipe(res);
    } catch (e) {
      if (!res.headersSent) send(500, 'text/plain', `${e}\n`);
      else res.destroy();
    }
  });
  await new Promise((ok, fail) => {
    server.once('error', fail);
    server.listen(0, '127.0.0.1', ok);
  });
  const { port } = /** @type {import('node:net').AddressInfo} */ (server.address());
  return {
    url: `http://127.0.0.1:${port}/`,
    close: () =>
      new Promise((ok) => {
        server.closeAllConnections();
        server.close(() => ok());
      }),
  };
}
