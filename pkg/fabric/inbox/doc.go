// Package inbox gives consumers effectively-once effects over
// at-least-once delivery: the envelope's id is claimed in the same
// transaction as the handler's effect, so a redelivered message finds its
// claim and is acknowledged without running the effect again. A message
// that reuses a claimed id with another tenant or payload is not a
// redelivery: it is refused and recorded as a security event.
//
// A fabric.TxHandler receives that transaction, scoped to the envelope's tenant
// for row-level security; it writes its rows and enqueues any events it
// causes (package outbox) in it. The service host wires it:
// h.ConsumeTx(queue, handler, opts).
package inbox
