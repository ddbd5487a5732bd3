// The shared vector suite against the pure TypeScript verifier.
import * as lc from '../src/verify.js';
import { tsVerifier } from './vectors.adapters.js';
import { runVectorSuite } from './vectors.shared.js';

runVectorSuite('ts', tsVerifier(lc));
