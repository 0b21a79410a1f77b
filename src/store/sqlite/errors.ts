// SQLite's failures as the Store seam's typed errors: callers (the SMTP reply, the HTTP 500) branch
// on these classes, never on SQLITE_* codes.
import { StoreFullError, StoreUnavailableError } from '../../domain/errors.ts';

/** A database or disk that is full → StoreFullError; any other SQLite failure, or a closed database → StoreUnavailableError. */
export function typedStoreError(err: unknown, open = true): unknown {
  if (err instanceof StoreUnavailableError) return err;
  const code = (err as { code?: unknown })?.code;
  const message = err instanceof Error ? err.message : String(err);
  if (code === 'SQLITE_FULL' || code === 'ENOSPC') return new StoreFullError(`the SQLite database cannot grow: ${message}`, { cause: err });
  if (!open) return new StoreUnavailableError('the SQLite database is closed', { cause: err });
  if (typeof code === 'string' && code.startsWith('SQLITE_')) return new StoreUnavailableError(`SQLite: ${message}`, { cause: err });
  return err;
}
