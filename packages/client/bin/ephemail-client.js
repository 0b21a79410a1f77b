#!/usr/bin/env node
// `npx @ephemail/client …` / `ephemail-client …`: see src/cli.js, or run it with --help.
import { main } from '../src/cli.js';

process.exitCode = await main(process.argv.slice(2), process.env, { stdout: process.stdout, stderr: process.stderr });
