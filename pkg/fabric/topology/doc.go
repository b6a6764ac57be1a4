// Package topology declares exchanges, consumer queues, retry tiers and
// dead-letter queues from a description: the platform's own (Platform,
// derived from the catalog's service declarations and rendered to
// deploy/topologies/platform.yaml) and those of other systems on the fabric
// (deploy/topologies/*.yaml, docs/topologies.md), which name their own
// dead-letter and retry exchanges, DLQs and tiers.
//
// Every consumer queue Q is a quorum queue with:
//
//	Q.retry.<n>   retry tier n: a message waits its delay (a policy,
//	              fabric.tier.<Q>.retry.<n>), then returns to Q alone
//	              through platform.retry with key Q
//	Q.dlq         its dead letters, bound to platform.dead-letter with key Q
//	Q.priority    optionally, a lane for urgent types ahead of a backlog
//
// Events travel on platform.events (topic, key = type), commands on
// platform.commands and jobs on platform.work, each keyed by type (Route).
// Apply declares a description idempotently; a service declares its own
// queues on every connect, with the permissions of its own broker user.
package topology
