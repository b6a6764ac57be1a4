package topology

import (
	"regexp"
	"time"
)

// tierPolicyPrefix starts the name of every retry tier's policy:
// fabric.tier.<Q>.retry.<n>. `fabricctl topology apply` owns the policies
// with this prefix and rewrites them; no other policy should use it.
const tierPolicyPrefix = "fabric.tier."

// tierPolicyPriority is the priority of the retry tiers' policies. RabbitMQ
// applies one policy to a queue, the matching one of highest priority (its
// operator policies are merged on top). 100 is above the 0–10 that broad
// operator policies use, so a catch-all does not silently take a tier's
// delay away; `fabricctl topology apply` and `check` name every regular
// policy that a tier's policy shadows, or that shadows it, and limits
// meant for fabric queues belong in operator policies, which RabbitMQ
// merges with ours (docs/topologies.md).
const tierPolicyPriority = 100

// queuePolicy is a RabbitMQ policy on exactly one queue: Pattern is the
// queue's name, anchored and quoted, so no other queue matches it.
type queuePolicy struct {
	Name       string
	Pattern    string
	ApplyTo    string // "queues"
	Priority   int
	Definition map[string]any
}

// tierPolicy is retry tier queue's policy: message-ttl, the tier's delay.
func tierPolicy(queue string, delay time.Duration) *queuePolicy {
	return &queuePolicy{
		Name:       tierPolicyPrefix + queue,
		Pattern:    "^" + regexp.QuoteMeta(queue) + "$",
		ApplyTo:    "queues",
		Priority:   tierPolicyPriority,
		Definition: map[string]any{"message-ttl": int64(delay / time.Millisecond)},
	}
}
