// The store conformance suite against the SQLite reference backend.
import { createSqliteStore } from '../../src/store/sqlite/sqlite-store.ts';
import { storeSuite } from './store.suite.ts';

storeSuite('sqlite', { open: async () => createSqliteStore(':memory:') });
