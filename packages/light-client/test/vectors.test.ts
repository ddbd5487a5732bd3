// The shared vector suite against the pure TypeScript verifier.
import { tsVerifier } from '../src/verify.js';
import { runVectorSuite } from './vectors.shared.js';

runVectorSuite('ts', tsVerifier);
