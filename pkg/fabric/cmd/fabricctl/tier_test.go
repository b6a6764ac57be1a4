package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/agora-platform/agora/pkg/fabric/fabrictest"
	"github.com/agora-platform/agora/pkg/fabric/topology"
)

// tierQueue is the consumer queue of the tier tests.
const tierQueue = "tiers.orders"

// tierFile writes a topology file with tierQueue and the given retry tiers.
func tierFile(t *testing.T, tiers ...string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "tiers.yaml")
	y := fmt.Sprintf(`consumers:
  - queue: %s
    service: tiers
    retryTiers: [%s]
    bindings:
      - {exchange: platform.events, key: order.#}
`, tierQueue, strings.Join(tiers, ", "))
	if err := os.WriteFile(path, []byte(y), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// tierEnv is fabricctl's environment for vh: its AMQP URL (the test's
// administrator) and the management API.
func tierEnv(vh *fabrictest.Vhost) func(string) string {
	return func(k string) string {
		switch k {
		case "AMQP_URL":
			return vh.URL
		case "RABBITMQ_MGMT_URL":
			return env.MgmtURL
		}
		return ""
	}
}

// publisher publishes with confirms and mandatory routing, and fails the
// test on a nack or a return: every message it publishes is routed and
// stored.
type publisher struct {
	t       *testing.T
	ch      *amqp.Channel
	returns chan amqp.Return
}

func newPublisher(t *testing.T, vh *fabrictest.Vhost) *publisher {
	t.Helper()
	conn, err := amqp.Dial(vh.URL)
	if err != nil {
		t.Fatalf("dial %s: %v", vh.URL, err)
	}
	t.Cleanup(func() { conn.Close() })
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	return &publisher{t: t, ch: ch, returns: ch.NotifyReturn(make(chan amqp.Return, 1024))}
}

// publish sends one message with id to exchange/key (with expiration, in
// ms, unless ""), and returns an error when it is not routed and confirmed.
func (p *publisher) publish(exchange, key, id, expiration string) error {
	dc, err := p.ch.PublishWithDeferredConfirm(exchange, key, true, false, amqp.Publishing{
		MessageId: id, DeliveryMode: amqp.Persistent, Expiration: expiration, Body: []byte(`{"id":"` + id + `"}`)})
	if err != nil {
		return err
	}
	ok, err := dc.WaitContext(context.Background())
	if err != nil || !ok {
		return fmt.Errorf("publish %s to %s/%s: confirmed %v, %v", id, exchange, key, ok, err)
	}
	select {
	case r := <-p.returns:
		return fmt.Errorf("publish %s to %s/%s: unroutable: %s", r.MessageId, exchange, key, r.ReplyText)
	default:
	}
	return nil
}

// many publishes n messages named prefix-0 … prefix-(n-1) and returns their ids.
func (p *publisher) many(exchange, key, prefix string, n int, expiration string) []string {
	p.t.Helper()
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("%s-%d", prefix, i)
		if err := p.publish(exchange, key, ids[i], expiration); err != nil {
			p.t.Fatal(err)
		}
	}
	return ids
}

// collector consumes tierQueue and records when each message id arrived.
type collector struct {
	mu      sync.Mutex
	arrived map[string]time.Time
	dups    int
}

func collect(t *testing.T, vh *fabrictest.Vhost) *collector {
	t.Helper()
	conn, err := amqp.Dial(vh.URL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	ds, err := ch.Consume(tierQueue, "tier-test", false, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	c := &collector{arrived: map[string]time.Time{}}
	go func() {
		for d := range ds {
			c.mu.Lock()
			if _, dup := c.arrived[d.MessageId]; dup {
				c.dups++
			} else {
				c.arrived[d.MessageId] = time.Now()
			}
			c.mu.Unlock()
			d.Ack(false)
		}
	}()
	return c
}

// wait waits until every id has arrived, and fails naming the missing ones.
func (c *collector) wait(t *testing.T, timeout time.Duration, ids []string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		c.mu.Lock()
		var missing []string
		for _, id := range ids {
			if _, ok := c.arrived[id]; !ok {
				missing = append(missing, id)
			}
		}
		c.mu.Unlock()
		if len(missing) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d messages did not arrive in %s within %s (lost or held), e.g. %q", len(missing), len(ids), tierQueue, timeout, missing[:min(5, len(missing))])
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (c *collector) at(id string) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.arrived[id]
}

// queueState is what the management API says about a queue.
type queueState struct {
	Arguments map[string]any `json:"arguments"`
	Messages  int            `json:"messages"`
}

func getQueue(t *testing.T, vh *fabrictest.Vhost, name string) (queueState, bool) {
	t.Helper()
	var q queueState
	err := vh.Mgmt(http.MethodGet, "/api/queues/"+url.PathEscape(vh.Name)+"/"+url.PathEscape(name), nil, &q)
	if err != nil && strings.Contains(err.Error(), "404") {
		return q, false
	}
	if err != nil {
		t.Fatal(err)
	}
	return q, true
}

// depth is the number of messages in a queue, from a passive declare (the
// management API's counts lag).
func depth(t *testing.T, vh *fabrictest.Vhost, name string) int {
	t.Helper()
	conn, err := amqp.Dial(vh.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	q, err := ch.QueueDeclarePassive(name, true, false, false, false, nil)
	if err != nil {
		t.Fatalf("queue %s: %v", name, err)
	}
	return q.Messages
}

func policyTTL(t *testing.T, vh *fabrictest.Vhost, name string) float64 {
	t.Helper()
	var p struct {
		Priority   int            `json:"priority"`
		Definition map[string]any `json:"definition"`
	}
	if err := vh.Mgmt(http.MethodGet, "/api/policies/"+url.PathEscape(vh.Name)+"/"+url.PathEscape(name), nil, &p); err != nil {
		t.Fatalf("policy %s: %v", name, err)
	}
	if p.Priority != 100 {
		t.Errorf("policy %s priority = %d, want 100 (docs/topologies.md)", name, p.Priority)
	}
	ttl, _ := p.Definition["message-ttl"].(float64)
	return ttl
}

// A retry tier's delay changes in place on a broker holding messages:
// tier 1 goes from 12 s to 1 s, tier 2 from 2 s to 6 s. `fabricctl topology
// apply` changes the tiers' policies alone — no queue is deleted, the tier
// keeps every message it holds — and every message, in the main queue, in
// the tier before the change (with and without its own expiration) and
// after it, arrives in the consumer's queue: counted one by one. The
// lengthened tier 2 shows the policy rules the queue: an argument could
// only ever have shortened it.
func TestRetryTierChangesInPlaceWithoutLosingMessages(t *testing.T) {
	vh := fabrictest.NewVhost(t, env)
	getenv := tierEnv(vh)
	out := fabricctl(t, getenv, "topology", "apply", "--file", tierFile(t, "12s", "2s"))
	for _, want := range []string{"policy fabric.tier.tiers.orders.retry.1: message-ttl=12000", "applied:", "none severe"} {
		if !strings.Contains(out, want) {
			t.Fatalf("apply lacks %q:\n%s", want, out)
		}
	}
	tier1, tier2 := tierQueue+".retry.1", tierQueue+".retry.2"
	if q, _ := getQueue(t, vh, tier1); q.Arguments["x-message-ttl"] != nil {
		t.Fatalf("%s declared with x-message-ttl: %v", tier1, q.Arguments)
	}

	p := newPublisher(t, vh)
	var all []string
	// In the main queue, through its binding; in tier 1 as a retry of
	// this version (its own expiration, 12 s) and as one of an earlier
	// version or any other publisher (none: the policy's TTL applies).
	tOld := time.Now()
	all = append(all, p.many(topology.EventsExchange, "order.created.v1", "main", 40, "")...)
	all = append(all, p.many(topology.RetryExchange, tier1, "tier1-own-ttl", 30, "12000")...)
	all = append(all, p.many(topology.RetryExchange, tier1, "tier1-policy-ttl", 30, "")...)
	if n := depth(t, vh, tier1); n != 60 {
		t.Fatalf("%s holds %d messages, want 60", tier1, n)
	}
	queuesBefore := brokerQueues(t, vh)
	// The change comes 5 s later, so that a retry after it that waited
	// 12 s would arrive well after those already waiting (at tOld + 17 s).
	time.Sleep(time.Until(tOld.Add(5 * time.Second)))

	out = fabricctl(t, getenv, "topology", "apply", "--file", tierFile(t, "1s", "6s"))
	for _, want := range []string{
		"policy fabric.tier.tiers.orders.retry.1: message-ttl=12000 (priority 100, ^tiers\\.orders\\.retry\\.1$) -> message-ttl=1000",
		"policy fabric.tier.tiers.orders.retry.2: message-ttl=2000 (priority 100, ^tiers\\.orders\\.retry\\.2$) -> message-ttl=6000",
		"0 retry tiers upgraded", "none severe"} {
		if !strings.Contains(out, want) {
			t.Errorf("second apply lacks %q:\n%s", want, out)
		}
	}
	if ttl := policyTTL(t, vh, "fabric.tier."+tier1); ttl != 1000 {
		t.Errorf("tier 1 policy message-ttl = %v, want 1000", ttl)
	}
	if ttl := policyTTL(t, vh, "fabric.tier."+tier2); ttl != 6000 {
		t.Errorf("tier 2 policy message-ttl = %v, want 6000", ttl)
	}
	// Nothing was deleted or declared anew: the same queues, and tier 1
	// still holds what it held.
	if after := brokerQueues(t, vh); !slices.Equal(after, queuesBefore) {
		t.Errorf("queues after the change = %q, before %q", after, queuesBefore)
	}
	if n := depth(t, vh, tier1); n != 60 {
		t.Errorf("%s holds %d messages after the change, want the 60 it held", tier1, n)
	}

	// Retries after the change: tier 1 under the new 1 s policy alone, and
	// tier 2 under its lengthened 6 s policy.
	c := collect(t, vh)
	t0 := time.Now()
	all = append(all, p.many(topology.RetryExchange, tier1, "tier1-after", 30, "")...)
	tier2IDs := p.many(topology.RetryExchange, tier2, "tier2-after", 20, "")
	all = append(all, tier2IDs...)

	c.wait(t, 40*time.Second, all)
	for _, id := range tier2IDs {
		if waited := c.at(id).Sub(t0); waited < 5*time.Second {
			t.Errorf("%s came back from tier 2 after %s: its policy of 6 s does not rule it", id, waited.Round(time.Millisecond))
			break
		}
	}
	// Tier 1's new delay: what waited there without an expiration of its
	// own came back as soon as the 12-s messages ahead of it had (quorum
	// queues expire from the head), at tOld + 12 s, not 12 s after it was
	// published (tOld + 17 s).
	if w := c.at("tier1-after-29").Sub(tOld); w > 14500*time.Millisecond {
		t.Errorf("tier1-after-29 came back %s after the first retries: the 1 s policy does not rule tier 1", w.Round(time.Millisecond))
	}
	for _, q := range []string{tier1, tier2, tierQueue + ".dlq"} {
		if n := depth(t, vh, q); n != 0 {
			t.Errorf("%s still holds %d messages", q, n)
		}
	}
	t.Logf("%d messages arrived, %d duplicates", len(all), c.dups)
}

// brokerQueues lists the vhost's queues.
func brokerQueues(t *testing.T, vh *fabrictest.Vhost) []string {
	t.Helper()
	return slices.Sorted(maps.Keys(vh.Queues(t)))
}

// A retry tier declared by the earlier version, its 30 s delay an
// x-message-ttl argument, holds messages; the tier becomes 1 s. `fabricctl
// topology check` says it must be upgraded; `topology apply` upgrades it
// while a retry is published to it every few milliseconds, with publisher
// confirms and mandatory routing (a publish that reached no queue fails
// the test). Afterwards the tier has no x-message-ttl argument, its policy
// says 1 s, no holding queue is left, and every message — those the old
// tier held, those in the main queue and every retry published during the
// upgrade — arrives in the consumer's queue, long before the old 30 s.
func TestTopologyApplyUpgradesLegacyRetryTiers(t *testing.T) {
	vh := fabrictest.NewVhost(t, env)
	getenv := tierEnv(vh)
	tier1 := tierQueue + ".retry.1"
	file := tierFile(t, "1s")
	desc, err := topology.LoadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	// The earlier version's declarations, spelled out: exchanges, DLQ,
	// main queue, and tier 1 with its delay as an argument.
	conn, err := amqp.Dial(vh.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range topology.PlatformExchanges() {
		if err := ch.ExchangeDeclare(e.Name, e.Type, true, false, false, false, nil); err != nil {
			t.Fatal(err)
		}
	}
	safe := func(dlx string) amqp.Table {
		return amqp.Table{"x-queue-type": "quorum", "x-dead-letter-exchange": dlx, "x-dead-letter-routing-key": tierQueue,
			"x-dead-letter-strategy": "at-least-once", "x-overflow": "reject-publish"}
	}
	old := safe(topology.RetryExchange)
	old["x-message-ttl"] = int64(30_000)
	main := safe(topology.DeadLetterExchange)
	main["x-delivery-limit"] = int64(topology.DefaultDeliveryLimit)
	for _, q := range []struct {
		name string
		args amqp.Table
		ex   string
		key  string
	}{
		{tierQueue + ".dlq", amqp.Table{"x-queue-type": "quorum", "x-delivery-limit": int64(1_000_000)}, topology.DeadLetterExchange, tierQueue},
		{tier1, old, topology.RetryExchange, tier1},
		{tierQueue, main, topology.RetryExchange, tierQueue},
	} {
		if _, err := ch.QueueDeclare(q.name, true, false, false, false, q.args); err != nil {
			t.Fatal(err)
		}
		if err := ch.QueueBind(q.name, q.key, q.ex, false, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := ch.QueueBind(tierQueue, "order.#", topology.EventsExchange, false, nil); err != nil {
		t.Fatal(err)
	}

	p := newPublisher(t, vh)
	var all []string
	all = append(all, p.many(topology.EventsExchange, "order.created.v1", "main", 50, "")...)
	all = append(all, p.many(topology.RetryExchange, tier1, "old-tier", 300, "")...)
	if n := depth(t, vh, tier1); n != 300 {
		t.Fatalf("%s holds %d messages, want 300", tier1, n)
	}

	// check fails, naming the tier; the services' Apply accepts it as it is.
	var buf bytes.Buffer
	err = run(context.Background(), []string{"topology", "check", "--file", file}, getenv, &buf, &buf)
	if err == nil || !strings.Contains(buf.String(), tier1+": declared with x-message-ttl 30000") {
		t.Fatalf("check before the upgrade = %v:\n%s", err, buf.String())
	}
	amqpConn := vh.Dial(t)
	c0, err := amqpConn.Connection(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := topology.Apply(context.Background(), c0, desc); err != nil {
		t.Fatalf("a service's Apply over the earlier tier: %v", err)
	}

	// Retries keep coming during the upgrade, each routed and confirmed.
	stop := make(chan struct{})
	var during []string
	var published atomic.Int64 // how many of during are confirmed so far
	var pubErr error
	var wg sync.WaitGroup
	wg.Add(1)
	bg := newPublisher(t, vh)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			id := fmt.Sprintf("during-%d", i)
			if err := bg.publish(topology.RetryExchange, tier1, id, ""); err != nil {
				pubErr = err
				return
			}
			during = append(during, id)
			published.Add(1)
			time.Sleep(2 * time.Millisecond) // a stream's pace, not a wait
		}
	}()
	// The stream is flowing before the upgrade starts, and goes on after
	// it ends: some retries land on each side of it.
	fabrictest.Eventually(t, 10*time.Second, "retries published before the upgrade", func() bool { return published.Load() >= 20 })
	c := collect(t, vh)
	t0 := time.Now()
	out := fabricctl(t, getenv, "topology", "apply", "--file", file)
	after := published.Load()
	fabrictest.Eventually(t, 10*time.Second, "retries published after the upgrade", func() bool { return published.Load() >= after+20 })
	close(stop)
	wg.Wait()
	if pubErr != nil {
		t.Fatalf("a retry published during the upgrade was not routed and stored: %v", pubErr)
	}
	if !strings.Contains(out, "upgraded "+tier1+": ") || !strings.Contains(out, "1 retry tiers upgraded") {
		t.Fatalf("apply did not upgrade %s:\n%s", tier1, out)
	}
	t.Logf("apply:\n%s", out)

	q, ok := getQueue(t, vh, tier1)
	if !ok || q.Arguments["x-message-ttl"] != nil || q.Arguments["x-dead-letter-exchange"] != topology.RetryExchange {
		t.Errorf("%s after the upgrade: exists %v, args %v; want today's declaration", tier1, ok, q.Arguments)
	}
	if _, ok := getQueue(t, vh, tier1+".upgrade"); ok {
		t.Errorf("holding queue %s.upgrade left behind", tier1)
	}
	if ttl := policyTTL(t, vh, "fabric.tier."+tier1); ttl != 1000 {
		t.Errorf("policy message-ttl = %v, want 1000", ttl)
	}
	var bs []struct {
		Source, Destination string
		RoutingKey          string `json:"routing_key"`
	}
	if err := vh.Mgmt(http.MethodGet, "/api/bindings/"+url.PathEscape(vh.Name), nil, &bs); err != nil {
		t.Fatal(err)
	}
	var tierBindings []string
	for _, b := range bs {
		if b.RoutingKey == tier1 {
			tierBindings = append(tierBindings, b.Source+" -> "+b.Destination)
		}
	}
	if want := []string{"" + " -> " + tier1, topology.RetryExchange + " -> " + tier1}; !slices.Equal(slices.Sorted(slices.Values(tierBindings)), want) {
		t.Errorf("bindings with key %s = %q, want %q", tier1, tierBindings, want)
	}

	all = append(all, during...)
	c.wait(t, 20*time.Second, all)
	if w := time.Since(t0); w > 25*time.Second {
		t.Errorf("the old tier's messages took %s: the 30 s argument still ruled", w)
	}
	for _, q := range []string{tier1, tierQueue + ".dlq"} {
		if n := depth(t, vh, q); n != 0 {
			t.Errorf("%s still holds %d messages", q, n)
		}
	}
	t.Logf("%d messages arrived (50 main, 300 in the old tier, %d retried during the upgrade), %d duplicates", len(all), len(during), c.dups)

	// Applying again finds nothing to upgrade, and check is satisfied.
	if out := fabricctl(t, getenv, "topology", "apply", "--file", file); !strings.Contains(out, "0 retry tiers upgraded") {
		t.Errorf("apply again:\n%s", out)
	}
	if out := fabricctl(t, getenv, "topology", "check", "--file", file); !strings.Contains(out, "none severe") {
		t.Errorf("check after the upgrade:\n%s", out)
	}
}

// An upgrade interrupted after the old tier was emptied into the holding
// queue and deleted is finished by the next apply: the holding queue's
// messages go to the new tier and arrive.
func TestTopologyApplyFinishesAnInterruptedUpgrade(t *testing.T) {
	vh := fabrictest.NewVhost(t, env)
	getenv := tierEnv(vh)
	tier1 := tierQueue + ".retry.1"
	file := tierFile(t, "1s")
	fabricctl(t, getenv, "topology", "apply", "--file", file)
	// What an upgrade leaves when it stops between steps 3 and 4: the
	// holding queue, bound with the tier's key, holding messages.
	conn, err := amqp.Dial(vh.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	args := amqp.Table{"x-queue-type": "quorum", "x-dead-letter-exchange": topology.RetryExchange, "x-dead-letter-routing-key": tierQueue,
		"x-dead-letter-strategy": "at-least-once", "x-overflow": "reject-publish"}
	if _, err := ch.QueueDeclare(tier1+".upgrade", true, false, false, false, args); err != nil {
		t.Fatal(err)
	}
	if err := ch.QueueUnbind(tier1, tier1, topology.RetryExchange, nil); err != nil {
		t.Fatal(err)
	}
	if err := ch.QueueBind(tier1+".upgrade", tier1, topology.RetryExchange, false, nil); err != nil {
		t.Fatal(err)
	}
	p := newPublisher(t, vh)
	ids := p.many(topology.RetryExchange, tier1, "held", 40, "")
	if err := ch.QueueBind(tier1, tier1, topology.RetryExchange, false, nil); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := run(context.Background(), []string{"topology", "check", "--file", file}, getenv, &buf, &buf); err == nil ||
		!strings.Contains(buf.String(), "left half done") {
		t.Fatalf("check = %v:\n%s", err, buf.String())
	}
	c := collect(t, vh)
	out := fabricctl(t, getenv, "topology", "apply", "--file", file)
	if !strings.Contains(out, "upgraded "+tier1+": 0 messages moved to "+tier1+".upgrade and 40 back") {
		t.Errorf("apply:\n%s", out)
	}
	c.wait(t, 15*time.Second, ids)
	if _, ok := getQueue(t, vh, tier1+".upgrade"); ok {
		t.Error("holding queue left behind")
	}
}

// apply and check fail, loudly, without the management API: the retry
// tiers' policies cannot be set otherwise.
func TestTopologyApplyNeedsTheManagementAPI(t *testing.T) {
	getenv := func(k string) string {
		switch k {
		case "AMQP_URL":
			return "amqp://guest:guest@127.0.0.1:5672/"
		case "RABBITMQ_MGMT_URL":
			return "http://127.0.0.1:1" // nothing listens there
		}
		return ""
	}
	for _, cmd := range []string{"apply", "check"} {
		var buf bytes.Buffer
		err := run(context.Background(), []string{"topology", cmd, "--file", tierFile(t, "1s")}, getenv, &buf, &buf)
		if err == nil || !strings.Contains(err.Error(), "management API") {
			t.Errorf("topology %s without the management API = %v, want an error naming it", cmd, err)
		}
	}
}

// The committed definitions file (deploy/rabbitmq/definitions.json) carries
// exactly the policies apply sets for the platform topology, so a broker
// provisioned from it has every tier's policy before a service starts.
func TestDefinitionsCarryTheTierPolicies(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(filepath.Dir(filepath.Dir(topologyFile(t, "platform"))), "rabbitmq", "definitions.json"))
	if err != nil {
		t.Fatal(err)
	}
	var defs struct {
		Policies []struct {
			brokerPolicy
			Vhost string `json:"vhost"`
		} `json:"policies"`
	}
	if err := json.Unmarshal(raw, &defs); err != nil {
		t.Fatal(err)
	}
	got := map[string]brokerPolicy{}
	for _, p := range defs.Policies {
		if p.Vhost != "agora" {
			t.Errorf("policy %s in vhost %q", p.Name, p.Vhost)
		}
		got[p.Name] = p.brokerPolicy
	}
	want := 0
	for _, q := range fabricQueues(topology.Platform()) {
		if q.Policy == nil {
			continue
		}
		want++
		if p, ok := got[q.Policy.Name]; !ok || !samePolicy(p, *q.Policy) {
			t.Errorf("definitions.json policy %s = %+v, want %+v", q.Policy.Name, p, *q.Policy)
		}
	}
	if want == 0 || len(got) != want {
		t.Errorf("definitions.json has %d policies, the platform topology %d", len(got), want)
	}
}

// The audit predicts which policy RabbitMQ applies to each fabric queue
// (one per queue: the matching one of highest priority, operator policies
// merged on top) and names what takes a tier's delay away, what the
// tiers' policies shadow, and what can lose messages.
func TestAuditPolicies(t *testing.T) {
	desc, err := topology.LoadFile(tierFile(t, "1s", "6s"))
	if err != nil {
		t.Fatal(err)
	}
	ours := func(n int, ttl int) brokerPolicy {
		q := fmt.Sprintf("%s.retry.%d", tierQueue, n)
		return brokerPolicy{Name: "fabric.tier." + q, Pattern: `^` + strings.ReplaceAll(q, ".", `\.`) + `$`, ApplyTo: "queues", Priority: 100,
			Definition: map[string]any{"message-ttl": float64(ttl)}}
	}
	for _, tc := range []struct {
		name              string
		regular, operator []brokerPolicy
		want              []string // findings, each as a substring; severe ones start with ERROR
	}{
		{name: "the fabric's alone", regular: []brokerPolicy{ours(1, 1000), ours(2, 6000)}},
		{name: "missing and stale", regular: []brokerPolicy{ours(1, 12000)}, want: []string{
			"ERROR   tiers.orders.retry.1: policy fabric.tier.tiers.orders.retry.1 is message-ttl=12000",
			"ERROR   tiers.orders.retry.2: no policy applies; fabric.tier.tiers.orders.retry.2 is missing"}},
		{name: "a broad policy is shadowed on the tiers, and applies elsewhere",
			regular: []brokerPolicy{ours(1, 1000), ours(2, 6000), {Name: "limits", Pattern: ".*", ApplyTo: "all", Priority: 0,
				Definition: map[string]any{"max-length": float64(100000)}}},
			want: []string{"warning policy limits matches 2 fabric retry tiers (tiers.orders.retry.1, …) where the tiers' own policies (priority 100) apply instead",
				"ERROR   tiers.orders.dlq: policy limits sets max-length=100000: a full DLQ drops its oldest letters"}},
		{name: "a higher priority takes a tier's delay away",
			regular: []brokerPolicy{ours(1, 1000), ours(2, 6000), {Name: "hijack", Pattern: `retry\.2$`, ApplyTo: "queues", Priority: 200,
				Definition: map[string]any{"message-ttl": float64(5000)}}},
			want: []string{"ERROR   tiers.orders.retry.2: policy hijack (priority 200) applies instead of fabric.tier.tiers.orders.retry.2 (priority 100)"}},
		{name: "a tie is ambiguous",
			regular: []brokerPolicy{ours(1, 1000), ours(2, 6000), {Name: "tie", Pattern: `retry\.1$`, ApplyTo: "queues", Priority: 100,
				Definition: map[string]any{"message-ttl": float64(5000)}}},
			want: []string{"ERROR   tiers.orders.retry.1: policies "}},
		{name: "a policy RabbitMQ does not apply to quorum queues is no rival",
			regular: []brokerPolicy{ours(1, 1000), ours(2, 6000), {Name: "ha", Pattern: ".*", ApplyTo: "queues", Priority: 500,
				Definition: map[string]any{"ha-mode": "all"}}}},
		{name: "what loses messages",
			regular: []brokerPolicy{ours(1, 1000), ours(2, 6000),
				{Name: "dlq-ttl", Pattern: `\.dlq$`, ApplyTo: "queues", Priority: 1, Definition: map[string]any{"message-ttl": float64(60000), "max-length": float64(10)}},
				{Name: "drop", Pattern: `^tiers\.orders$`, ApplyTo: "queues", Priority: 1, Definition: map[string]any{"overflow": "drop-head", "expires": float64(60000)}}},
			operator: []brokerPolicy{{Name: "cap", Pattern: ".*", ApplyTo: "queues", Priority: 0, Definition: map[string]any{"message-ttl": float64(500)}}},
			want: []string{
				"ERROR   tiers.orders.dlq: policy dlq-ttl sets max-length=10: a full DLQ drops its oldest letters",
				"ERROR   tiers.orders.dlq: operator policy cap sets message-ttl=500: a DLQ dead-letters nowhere",
				"ERROR   tiers.orders: policy drop sets overflow=drop-head",
				"ERROR   tiers.orders: policy drop sets expires=60000",
				"warning tiers.orders: operator policy cap sets message-ttl=500: messages that wait longer go to the DLQ",
				"warning tiers.orders.retry.1: operator policy cap sets message-ttl=500: the tier's delay is shortened",
				"warning tiers.orders.retry.2: operator policy cap sets message-ttl=500: the tier's delay is shortened"}},
		{name: "a pattern RE2 cannot read is named",
			regular: []brokerPolicy{ours(1, 1000), ours(2, 6000), {Name: "pcre", Pattern: `^(?!amq\.).*`, ApplyTo: "queues", Priority: 0,
				Definition: map[string]any{"max-length": float64(1)}}},
			want: []string{"warning policy pcre: its pattern is not RE2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, f := range auditPolicies(desc, tc.regular, tc.operator) {
				got = append(got, f.String())
			}
			for _, w := range tc.want {
				if !slices.ContainsFunc(got, func(g string) bool { return strings.HasPrefix(g, w) }) {
					t.Errorf("findings lack %q:\n%s", w, strings.Join(got, "\n"))
				}
			}
			if len(got) != len(tc.want) {
				t.Errorf("%d findings, want %d:\n%s", len(got), len(tc.want), strings.Join(got, "\n"))
			}
		})
	}
}

// On the broker: apply fails, naming them, when a policy takes a retry
// tier's delay away or puts a DLQ's letters at risk, and RabbitMQ applies
// the policies the audit says it applies (the management API's "policy"
// of each queue, which it updates every few seconds).
func TestTopologyApplyReportsPoliciesThatEndangerFabricQueues(t *testing.T) {
	vh := fabrictest.NewVhost(t, env)
	getenv := tierEnv(vh)
	file := tierFile(t, "1s", "6s")
	fabricctl(t, getenv, "topology", "apply", "--file", file)
	for name, p := range map[string]map[string]any{
		"limits":  {"pattern": ".*", "apply-to": "queues", "priority": 0, "definition": map[string]any{"max-length": 100000}},
		"hijack":  {"pattern": `^tiers\.orders\.retry\.2$`, "apply-to": "queues", "priority": 200, "definition": map[string]any{"message-ttl": 5000}},
		"dlq-ttl": {"pattern": `\.dlq$`, "apply-to": "queues", "priority": 5, "definition": map[string]any{"message-ttl": 60000}},
	} {
		if err := vh.Mgmt(http.MethodPut, "/api/policies/"+url.PathEscape(vh.Name)+"/"+name, p, nil); err != nil {
			t.Fatal(err)
		}
	}
	var buf bytes.Buffer
	err := run(context.Background(), []string{"topology", "apply", "--file", file}, getenv, &buf, &buf)
	if err == nil {
		t.Fatalf("apply = nil error with a policy over a tier's:\n%s", buf.String())
	}
	for _, want := range []string{
		"ERROR   tiers.orders.retry.2: policy hijack (priority 200) applies instead of fabric.tier.tiers.orders.retry.2 (priority 100)",
		"ERROR   tiers.orders.dlq: policy dlq-ttl sets message-ttl=60000",
		"warning policy limits matches 1 fabric retry tiers (tiers.orders.retry.1)",
	} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("apply output lacks %q:\n%s", want, buf.String())
		}
	}
	want := map[string]string{tierQueue + ".retry.1": "fabric.tier." + tierQueue + ".retry.1", tierQueue + ".retry.2": "hijack",
		tierQueue + ".dlq": "dlq-ttl", tierQueue: "limits"}
	fabrictest.Eventually(t, 30*time.Second, "the broker's policies to be those the audit predicts", func() bool {
		var qs []struct {
			Name   string `json:"name"`
			Policy string `json:"policy"`
		}
		if err := vh.Mgmt(http.MethodGet, "/api/queues/"+url.PathEscape(vh.Name)+"?columns=name,policy", nil, &qs); err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for _, q := range qs {
			got[q.Name] = q.Policy
		}
		return maps.Equal(got, want)
	})
}
