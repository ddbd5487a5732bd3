// Builds the demo into dist/ (scripts/demo.mjs serves it with /peers.json).
// Relative asset URLs, so the build works from any path.
import { defineConfig } from 'vite';

export default defineConfig({
  root: import.meta.dirname,
  base: './',
  build: {
    outDir: 'dist',
    emptyOutDir: true,
    target: 'es2022',
    reportCompressedSize: false,
    // libp2p is its own chunk, loaded only when a multiaddr is dialled.
    chunkSizeWarningLimit: 1024,
    rollupOptions: {
      onwarn(warning, warn) {
        // The light client imports @libp2p/utils lazily for its gater, but
        // libp2p itself imports it statically: both land in the libp2p chunk,
        // which is what we want. Nothing to act on.
        if (/dynamically imported by .*light-client.* but also statically imported/s.test(warning.message)) return;
        warn(warning);
      },
    },
  },
});
