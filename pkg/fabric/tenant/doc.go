// Package tenant carries the tenant a piece of work belongs to in its
// context. The fabric's consumer sets it from the envelope (checked against
// the x-tenant-id header) before a handler runs; handlers read it with From
// and never from payloads.
//
// Tx and Set scope a PostgreSQL transaction to a tenant for the row-level
// security policies of every tenant table: a query that forgets its tenant
// sees no rows instead of another tenant's.
package tenant
