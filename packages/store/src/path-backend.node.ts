/**
 * Opens a state directory with the Node backend (node:sqlite). Resolved
 * through `#path-backend` under the `node` condition (package.json
 * "imports"), so that browser bundles of the store never see `node:` modules.
 * @module
 */
export { holdsNoStore, openNodeBackend as openPathBackend } from '../../storage/src/node/index.ts';
