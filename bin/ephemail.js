#!/usr/bin/env node
// The `ephemail` command: loads the TypeScript sources through tsx (no separate build step).
import { register } from 'tsx/esm/api';

register();
await import('../src/main.ts');
