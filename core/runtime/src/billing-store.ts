import type { BillingStore } from './billing.ts';
import type { Database } from './database.ts';
import { postgresBillingStore } from './postgres/billing.ts';
import { sqliteBillingStore } from './sqlite/billing.ts';

/** The billing store on whichever backend `db` is (every Database registers BILLING_MIGRATIONS). */
export function billingStore(db: Database): BillingStore {
  return db.backend.kind === 'sqlite'
    ? sqliteBillingStore(db.backend.sql)
    : postgresBillingStore(db.backend.sql);
}
