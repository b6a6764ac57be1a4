package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"regexp"
	"sort"
	"strings"

	"github.com/agora-platform/agora/pkg/fabric/topology"
)

// fabricQueue is one queue of a description as the policy audit sees it.
type fabricQueue struct {
	Name   string
	Kind   string         // "main", "tier" or "dlq"
	Args   map[string]any // as declared
	Policy *brokerPolicy  // the fabric's own policy, nil for none
}

// fabricQueues lists the description's queues (a shared DLQ once).
func fabricQueues(d topology.Description) []fabricQueue {
	var out []fabricQueue
	seen := map[string]bool{}
	for _, c := range d.Consumers {
		for _, q := range c.Queues() {
			if seen[q.Name] {
				continue
			}
			seen[q.Name] = true
			fq := fabricQueue{Name: q.Name, Kind: "main", Args: q.Args}
			switch {
			case q.Name == c.DLQ():
				fq.Kind = "dlq"
			case q.Policy != nil:
				fq.Kind = "tier"
				fq.Policy = &brokerPolicy{Name: q.Policy.Name, Pattern: q.Policy.Pattern, ApplyTo: q.Policy.ApplyTo,
					Priority: q.Policy.Priority, Definition: q.Policy.Definition}
			}
			out = append(out, fq)
		}
	}
	return out
}

// applyPolicies creates or updates the description's own policies (the
// retry tiers' delays), saying what changed; an unchanged policy is left
// alone.
func applyPolicies(ctx context.Context, m *mgmtClient, d topology.Description, out io.Writer) error {
	existing, err := m.policies(ctx, false)
	if err != nil {
		return err
	}
	have := map[string]brokerPolicy{}
	for _, p := range existing {
		have[p.Name] = p
	}
	changed := 0
	for _, q := range fabricQueues(d) {
		if q.Policy == nil {
			continue
		}
		want := *q.Policy
		old, ok := have[want.Name]
		if ok && samePolicy(old, want) {
			continue
		}
		if err := m.putPolicy(ctx, want); err != nil {
			return fmt.Errorf("policy %s: %w", want.Name, err)
		}
		changed++
		if ok {
			fmt.Fprintf(out, "policy %s: %s -> %s\n", want.Name, describePolicy(old), describePolicy(want))
		} else {
			fmt.Fprintf(out, "policy %s: %s (new)\n", want.Name, describePolicy(want))
		}
	}
	fmt.Fprintf(out, "policies: %d set, %d unchanged\n", changed, countPolicies(d)-changed)
	return nil
}

func countPolicies(d topology.Description) int {
	n := 0
	for _, q := range fabricQueues(d) {
		if q.Policy != nil {
			n++
		}
	}
	return n
}

// samePolicy compares two policies the way the broker holds them (JSON
// numbers, whatever Go type built them).
func samePolicy(a, b brokerPolicy) bool {
	norm := func(p brokerPolicy) string {
		def, _ := json.Marshal(p.Definition)
		var v any
		_ = json.Unmarshal(def, &v)
		def, _ = json.Marshal(v)
		return fmt.Sprintf("%s|%s|%d|%s", p.Pattern, p.ApplyTo, p.Priority, def)
	}
	return norm(a) == norm(b)
}

func describePolicy(p brokerPolicy) string {
	keys := make([]string, 0, len(p.Definition))
	for k := range p.Definition {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s=%v", k, p.Definition[k]))
	}
	return fmt.Sprintf("%s (priority %d, %s)", strings.Join(parts, " "), p.Priority, p.Pattern)
}

// finding is one thing the audit of the broker's policies says about the
// description's queues; a severe one fails apply and check.
type finding struct {
	Severe bool
	Text   string
}

func (f finding) String() string {
	if f.Severe {
		return "ERROR   " + f.Text
	}
	return "warning " + f.Text
}

// quorumUnsupported are policy keys RabbitMQ does not apply to quorum
// queues (3.10 and 4.x): a policy carrying one does not apply to them at
// all, and the next matching policy does.
var quorumUnsupported = map[string]bool{
	"max-priority": true, "queue-mode": true, "single-active-consumer": true, "ha-mode": true, "ha-params": true,
	"ha-sync-mode": true, "ha-promote-on-shutdown": true, "ha-promote-on-failure": true, "queue-master-locator": true,
	"max-age": true, "stream-max-segment-size-bytes": true, "initial-cluster-size": true,
}

// matching returns the policies that RabbitMQ applies to a quorum queue
// named name, highest priority first, and the patterns it could not
// evaluate (RabbitMQ's are PCRE, these RE2).
func matching(name string, ps []brokerPolicy) (out []brokerPolicy, unknown []string) {
	for _, p := range ps {
		switch p.ApplyTo {
		case "queues", "all", "quorum_queues", "":
		default:
			continue
		}
		re, err := regexp.Compile(p.Pattern)
		if err != nil {
			unknown = append(unknown, p.Name)
			continue
		}
		if !re.MatchString(name) {
			continue
		}
		applies := true
		for k := range p.Definition {
			applies = applies && !quorumUnsupported[k]
		}
		if applies {
			out = append(out, p)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Priority > out[j].Priority })
	return out, unknown
}

// auditPolicies says, for the description's queues, which policies the
// broker applies to them and what in them can cost a message or take the
// fabric's settings away (docs/topologies.md, "Changing retry tiers and
// queue settings"): RabbitMQ applies one policy per queue, the matching
// one of highest priority, with the winning operator policy merged on top.
func auditPolicies(d topology.Description, regular, operator []brokerPolicy) []finding {
	var out []finding
	severe := func(format string, a ...any) { out = append(out, finding{true, fmt.Sprintf(format, a...)}) }
	warn := func(format string, a ...any) { out = append(out, finding{false, fmt.Sprintf(format, a...)}) }
	shadowed := map[string][]string{} // policy name → fabric tiers where ours wins over it
	ourPriority := 0
	unknownSeen := map[string]bool{}
	for _, q := range fabricQueues(d) {
		reg, unknown := matching(q.Name, regular)
		ops, unknownOps := matching(q.Name, operator)
		for _, u := range append(unknown, unknownOps...) {
			if !unknownSeen[u] {
				unknownSeen[u] = true
				warn("policy %s: its pattern is not RE2, so fabricctl cannot tell which fabric queues it matches; check it by hand", u)
			}
		}
		var winner *brokerPolicy
		if len(reg) > 0 {
			winner = &reg[0]
			if len(reg) > 1 && reg[1].Priority == winner.Priority {
				severe("%s: policies %s and %s match with the same priority %d; RabbitMQ applies one of them, which one is not defined",
					q.Name, reg[0].Name, reg[1].Name, winner.Priority)
			}
		}
		if q.Kind == "tier" {
			ourPriority = q.Policy.Priority
			switch {
			case winner == nil:
				severe("%s: no policy applies; %s is missing (run fabricctl topology apply): the tier returns messages only by their own expiration",
					q.Name, q.Policy.Name)
			case winner.Name != q.Policy.Name:
				severe("%s: policy %s (priority %d) applies instead of %s (priority %d); the tier's delay %s is not its backstop. "+
					"Give %s a lower priority or a pattern that leaves fabric queues alone, and put limits in operator policies",
					q.Name, winner.Name, winner.Priority, q.Policy.Name, q.Policy.Priority, describePolicy(*q.Policy), winner.Name)
			case !samePolicy(*winner, *q.Policy):
				severe("%s: policy %s is %s, want %s (run fabricctl topology apply)", q.Name, winner.Name, describePolicy(*winner), describePolicy(*q.Policy))
			}
			for _, p := range reg {
				if winner != nil && winner.Name == q.Policy.Name && p.Priority < winner.Priority {
					shadowed[p.Name] = append(shadowed[p.Name], q.Name)
				}
			}
		}
		eff := map[string]any{}
		source := map[string]string{}
		if winner != nil {
			for k, v := range winner.Definition {
				eff[k], source[k] = v, "policy "+winner.Name
			}
		}
		if len(ops) > 0 {
			for k, v := range ops[0].Definition {
				if old, ok := number(eff[k]); ok {
					if n, ok := number(v); ok && n >= old {
						continue // the lower of policy and operator policy applies
					}
				}
				eff[k], source[k] = v, "operator policy "+ops[0].Name
			}
		}
		out = append(out, hazards(q, eff, source)...)
	}
	names := make([]string, 0, len(shadowed))
	for n := range shadowed {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		qs := shadowed[n]
		warn("policy %s matches %d fabric retry tiers (%s%s) where the tiers' own policies (priority %d) apply instead: its keys do not reach them. "+
			"Limits meant for fabric queues belong in an operator policy (rabbitmqctl set_operator_policy), which RabbitMQ merges with the fabric's",
			n, len(qs), qs[0], map[bool]string{true: ", …", false: ""}[len(qs) > 1], ourPriority)
	}
	return out
}

// hazards are the effective policy keys that can lose a fabric queue's
// messages or undo what its arguments guarantee.
func hazards(q fabricQueue, eff map[string]any, source map[string]string) []finding {
	var out []finding
	severe := func(k, why string) {
		out = append(out, finding{true, fmt.Sprintf("%s: %s sets %s=%v: %s", q.Name, source[k], k, eff[k], why)})
	}
	warn := func(k, why string) {
		out = append(out, finding{false, fmt.Sprintf("%s: %s sets %s=%v: %s", q.Name, source[k], k, eff[k], why)})
	}
	if v, ok := eff["overflow"]; ok && v != "reject-publish" {
		severe("overflow", "it overrides the queue's x-overflow reject-publish (a policy's overflow wins over the argument), "+
			"which at-least-once dead-lettering needs; a full queue then drops messages")
	}
	if _, ok := eff["expires"]; ok {
		severe("expires", "the broker deletes the queue, messages and all, once it has gone unused that long")
	}
	switch q.Kind {
	case "dlq":
		if _, ok := eff["message-ttl"]; ok {
			severe("message-ttl", "a DLQ dead-letters nowhere, so expired letters are dropped")
		}
		for _, k := range []string{"max-length", "max-length-bytes"} {
			if _, ok := eff[k]; ok {
				severe(k, "a full DLQ drops its oldest letters (it has no reject-publish)")
			}
		}
		if lim, ok := number(eff["delivery-limit"]); ok {
			if arg, _ := number(q.Args["x-delivery-limit"]); lim < arg {
				severe("delivery-limit", "the lower of policy and argument applies, and a letter returned that often is dropped (a DLQ dead-letters nowhere)")
			}
		}
	case "main":
		if _, ok := eff["message-ttl"]; ok {
			warn("message-ttl", "messages that wait longer go to the DLQ unprocessed (reason expired)")
		}
	case "tier":
		if ttl, ok := number(eff["message-ttl"]); ok && strings.HasPrefix(source["message-ttl"], "operator ") {
			if want, _ := number(q.Policy.Definition["message-ttl"]); ttl < want {
				warn("message-ttl", "the tier's delay is shortened to it (the lower applies)")
			}
		}
	}
	return out
}

// number reads a JSON or Go number.
func number(v any) (float64, bool) {
	switch n := v.(type) {
	case float64:
		return n, true
	case int:
		return float64(n), true
	case int64:
		return float64(n), true
	case json.Number:
		f, err := n.Float64()
		return f, err == nil
	}
	rv := reflect.ValueOf(v)
	if rv.IsValid() && rv.CanInt() {
		return float64(rv.Int()), true
	}
	return 0, false
}
