// What every registry entry has (registry.ts), in a file of its own so that an entry kept apart from
// the registry (authentication-view.ts, loaded alone by the verdicts' worker) needs no import of it.

/** Where an email is shown: the API's JSON (GET /api/v1/emails/{id}, `latest`), MCP read_email, the web page. */
export type Face = 'http' | 'mcp' | 'page';

/**
 * A JSON Schema, as plain data (what TypeBox writes, without its symbols: no schema library is
 * loaded on a worker for it). `{ $ref: 'Name' }` names a component of the OpenAPI document
 * (http/schemas/wire.ts SHARED_SCHEMAS).
 */
export type WireSchema = Readonly<Record<string, unknown>>;

/** How a view is shown: the faces read this, never a list of their own (docs/architecture.md "The views registry"). */
export interface Wire {
  /** Its name on every face that shows it (snake_case; the JSON field of the email, of read_email). */
  field: string;
  /** The faces that show it. */
  faces: readonly Face[];
  /**
   * Its value's schema on the API (with its description), as kept or as the face's shape writes it
   * (http/schemas/wire.ts HTTP_SHAPES). MCP publishes the same schema unless read_email shapes it.
   */
  schema: WireSchema;
  /**
   * Present when `latest` filters on it (a query parameter named `field`): the email's value equals
   * the one asked for, case-insensitively; its description. Only for views whose value is a string or null.
   */
  filter?: string;
}

export interface Entry<K extends string> {
  name: K;
  /** Bump when `derive` changes what it gives: views kept by an older version are derived again. */
  version: number;
  /** Milliseconds; null: the derivation's own budget (by message size). */
  budget: number | null;
  /** How the faces show it; null: on none (kept for the service's own use). */
  wire: Wire | null;
}

/** A plain JSON Schema that also allows null (what TypeBox's Union([t, Null()]) writes). */
export const nullable = (schema: WireSchema, description?: string): WireSchema =>
  ({ anyOf: [schema, { type: 'null' }], ...(description ? { description } : {}) });
