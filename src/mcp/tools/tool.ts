// What a tool is: contract schemas (zod, published as JSON Schema), annotations, and a run function
// that calls one service function and maps the result to the wire (docs/house-style.md rule 4).
import type { z } from 'zod';
import type { Core } from '../../services/core.ts';
import type { Reader } from '../../services/views.ts';

/** Per-request facts a tool may need. */
export interface ToolContext {
  core: Core;
  /** The rate-limit bucket this request is counted in (a session's own, or its IP's). */
  bucket: string;
  /** Aborted when the client goes away; ends a held check_inbox early. */
  signal: AbortSignal;
  /** Who reads (derivations are queued as theirs: services/views.ts); the service's own when absent. */
  reader?: Reader;
}

export interface ToolAnnotations {
  title: string;
  readOnlyHint: true;
  destructiveHint: false;
  idempotentHint: boolean;
  openWorldHint: boolean;
}

export interface ToolOutput<O> {
  structured: O;
  text: string;
}

export interface Tool<I extends z.ZodType = z.ZodType, O extends z.ZodType = z.ZodType> {
  name: string;
  title: string;
  description: string;
  input: I;
  output: O;
  annotations: ToolAnnotations;
  run(ctx: ToolContext, args: z.output<I>): Promise<ToolOutput<z.output<O>>>;
}

/** Keeps each tool's argument and result types checked against its own schemas. */
export const defineTool = <I extends z.ZodType, O extends z.ZodType>(tool: Tool<I, O>): Tool<I, O> => tool;
