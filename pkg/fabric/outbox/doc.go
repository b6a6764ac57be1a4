// Package outbox implements the transactional outbox: envelopes are stored
// in the caller's database transaction, so a fact is never committed
// without its event nor an event sent for a rolled-back fact, and a relay
// publishes them with publisher confirms after commit.
//
// Application code calls Enqueue with the transaction that records the
// fact (tenant.Tx gives one scoped to the tenant); the envelope is
// validated against the catalog there, so a bad event fails the
// transaction, not the relay. The service host runs the relay: it wakes on
// NOTIFY at commit, claims rows in order per aggregate, publishes them and
// marks them published. A row whose publish is not confirmed stays and is
// sent again: delivery is at least once, and consumers dedupe with the
// inbox.
package outbox
