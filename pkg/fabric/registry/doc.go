// Package registry knows every message type the platform carries — its
// kind (event, command, job), scope, sensitivity, owner and the JSON Schema
// its payload must satisfy — and which services publish and consume it.
//
// The registry is loaded from the catalog embedded in the fabric
// (package catalog: catalog.yaml and one schema per type) with Default.
// Check validates an envelope a producer is about to send against the
// closed schema (strict writer); CheckIncoming validates one a consumer
// received against an open reader view of it, so fields added later and
// new values of enumerations marked "x-extensible" are accepted (tolerant
// reader; docs/contract-evolution.md). A type not in the catalog is
// refused on publish and dead-lettered on consume.
//
// Services returns the catalog's service declarations (catalog.yaml,
// services:), from which the topology (package topology), the broker
// grants and the AsyncAPI document are derived.
package registry
