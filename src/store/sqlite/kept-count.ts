// A table's row count kept in memory, read again after every write that may change it (this process
// is the only one that writes the table to the file): a hot path that finds it 0 asks the database
// nothing (new mail with no webhook registered, a recipient with no fault rule stored).

export interface KeptCount {
  /** The rows counted after the last write (or at open). */
  readonly value: number;
  /** Runs a write, then counts again (also when it throws). */
  after<T>(write: () => T): T;
}

export function keptCount(count: () => number): KeptCount {
  let value = count();
  return {
    get value() {
      return value;
    },
    after(write) {
      try {
        return write();
      } finally {
        value = count();
      }
    },
  };
}
