package acl_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/agora-platform/agora/deploy/acl"
	"github.com/agora-platform/agora/pkg/fabric/fabrictest"
	"github.com/agora-platform/agora/pkg/fabric/registry"
	"github.com/agora-platform/agora/pkg/fabric/topology"
)

// The ACL matrix: every service user tries every operation on every target
// against a real broker, in a throwaway vhost with per-run users, and the
// outcome must match the policy table exactly: allowed operations succeed,
// every other one fails with ACCESS_REFUSED (403).
//
// The expected outcome is computed here from the grant's name sets and what
// RabbitMQ checks for each operation (see the package doc), not from the
// regexes, so a wrong regex, a wrong anchor or a wrong assumption about the
// broker all show up as mismatches.

// probe is one cell of the matrix.
type probe struct {
	op, target string
	want       bool // allowed by the policy table
	do         func(ctx context.Context, ch *amqp.Channel) error
	// destructive probes that succeed are undone by the admin before the next one.
	undo func(t *testing.T)
}

// table is the policy table of one grant: which names each permission covers.
type table struct {
	g                      acl.Grant
	configure, write, read map[string]bool
	// topicWrite and topicRead are the keys per keyed topic exchange
	// (events, commands, work, dead-letter); platform.retry is checked by
	// ownRetryKey.
	topicWrite, topicRead map[string]map[string]bool
}

// newTable is g's table over the world's queue names: g.Queues, and, since a
// consumer's retry tiers are its own whatever their number (RETRY_TIERS),
// every name among queueNames that is Q.retry.<n> of one of g's consumers.
func newTable(g acl.Grant, queueNames []string) table {
	t := table{g: g}
	queues := slices.Clone(g.Queues)
	for _, n := range queueNames {
		if t.ownRetryTier(n) {
			queues = append(queues, n)
		}
	}
	set := func(lists ...[]string) map[string]bool {
		m := map[string]bool{}
		for _, l := range lists {
			for _, n := range l {
				m[n] = true
			}
		}
		return m
	}
	return table{g: g,
		configure:  set(queues, g.ConfigureExchanges),
		write:      set(queues, g.WriteExchanges),
		read:       set(queues, g.ReadExchanges),
		topicWrite: keyed(g.PublishKeys),
		topicRead:  keyed(g.BindKeys),
	}
}

// keyedExchanges are the topic exchanges whose keys the grant lists.
var keyedExchanges = []string{topology.EventsExchange, topology.CommandsExchange, topology.WorkExchange, topology.DeadLetterExchange}

func keyed(keys map[string][]string) map[string]map[string]bool {
	m := map[string]map[string]bool{}
	for _, ex := range keyedExchanges {
		m[ex] = map[string]bool{}
		for _, k := range keys[ex] {
			m[ex][k] = true
		}
	}
	return m
}

// keyAllowed: on a keyed topic exchange the key must be listed; on any
// other exchange topic permissions do not apply.
func keyAllowed(keys map[string]map[string]bool, ex, key string) bool {
	if !slices.Contains(keyedExchanges, ex) {
		return true
	}
	return keys[ex][key]
}

func permName(exchange string) string {
	if exchange == "" {
		return acl.DefaultExchange
	}
	return exchange
}

// canPublish: write on the exchange, and on the topic exchanges topic write
// on the key. The default exchange reaches every queue of the vhost, so no
// service may publish there whatever its grant says (hardening issue 18):
// that expectation is the policy itself, not derived from the grant.
func (t table) canPublish(ex, key string) bool {
	if ex == "" {
		return false
	}
	return t.write[permName(ex)] && keyAllowed(t.topicWrite, ex, key) &&
		(ex != topology.RetryExchange || t.ownRetryKey(key))
}

func (t table) canBind(queue, ex, key string) bool {
	return t.write[queue] && t.read[ex] && keyAllowed(t.topicRead, ex, key) &&
		(ex != topology.RetryExchange || t.ownRetryKey(key))
}

// ownRetryKey: on platform.retry a service may write and bind the keys of
// its own queues only: Q (replay, end of a retry tier) and its retry tiers.
func (t table) ownRetryKey(key string) bool {
	for _, c := range t.g.Consumers {
		if key == c.Queue {
			return true
		}
	}
	return t.ownRetryTier(key)
}

// ownRetryTier: name is Q.retry.<n> of one of the grant's consumers, for
// any tier n ≥ 1 written without a leading zero.
func (t table) ownRetryTier(name string) bool {
	for _, c := range t.g.Consumers {
		n, ok := strings.CutPrefix(name, c.Queue+".retry.")
		if ok && n != "" && n[0] != '0' && strings.Trim(n, "0123456789") == "" {
			return true
		}
	}
	return false
}

// world is the broker-side fixture shared by all users.
type world struct {
	pol        acl.Policy
	reg        *registry.Registry
	admin      *amqp.Connection
	queues     map[string]queueState // every queue target with how to recreate it
	queueNames []string
	bindings   []bindTarget
	exchanges  []topology.Exchange // exchange targets, with the type to declare
}

type queueState struct {
	args     amqp.Table
	bindings []topology.Binding
}

type bindTarget struct{ queue, exchange, key string }

func newWorld(t *testing.T, pol acl.Policy, reg *registry.Registry, admin *amqp.Connection) *world {
	w := &world{pol: pol, reg: reg, admin: admin, queues: map[string]queueState{}}
	for _, c := range pol.Topology.Consumers {
		for _, q := range c.Queues() {
			st := queueState{args: q.Args}
			if q.Name == c.Queue {
				st.bindings = slices.Clone(c.Bindings)
			}
			for _, b := range c.FabricBindings() {
				if b.Queue == q.Name {
					st.bindings = append(st.bindings, topology.Binding{Exchange: b.Exchange, Key: b.Key})
				}
			}
			w.queues[q.Name] = st
		}
		// Names that collide by prefix or suffix with real ones: an
		// unanchored or sloppy regex would grant them. Q.retry.10 is a tier
		// the topology does not declare, which the consumer owns all the
		// same (any n); Q.retry.0 and Q.retry.1x are no tiers at all.
		for _, decoy := range []string{c.Queue + "-evil", c.Queue + ".dlqx", c.Queue + ".retry.10",
			c.Queue + ".retry.0", c.Queue + ".retry.1x", "x" + c.Queue} {
			w.queues[decoy] = queueState{}
		}
		for _, b := range c.FabricBindings() {
			w.bindings = append(w.bindings, bindTarget{b.Queue, b.Exchange, b.Key})
		}
		for _, b := range c.Bindings {
			w.bindings = append(w.bindings, bindTarget{c.Queue, b.Exchange, b.Key})
		}
		other := "workflow.request-submitted"
		if c.Queue == other {
			other = "analytics.request-events"
		}
		w.bindings = append(w.bindings,
			bindTarget{c.Queue, topology.EventsExchange, "#"},
			bindTarget{c.Queue, topology.EventsExchange, "request.submitted.v1"},
			bindTarget{c.Queue, topology.CommandsExchange, "ai.knowledge.index.v1"},
			bindTarget{c.Queue, topology.WorkExchange, "document.ocr.v1"},
			bindTarget{c.DLQ(), topology.DeadLetterExchange, other},
			bindTarget{c.Queue + "-evil", topology.EventsExchange, "request.#"},
			// platform.retry: another consumer's keys, wildcards, a tier
			// the topology does not declare (allowed: any n), look-alikes.
			bindTarget{c.Queue, topology.RetryExchange, other},
			bindTarget{c.Queue, topology.RetryExchange, other + ".retry.1"},
			bindTarget{c.Queue, topology.RetryExchange, "#"},
			bindTarget{c.Queue, topology.RetryExchange, c.Queue + ".#"},
			bindTarget{c.Queue, topology.RetryExchange, c.Queue + ".retry.*"},
			bindTarget{c.RetryQueue(1), topology.RetryExchange, c.Queue + ".retry.12"},
			bindTarget{c.RetryQueue(1), topology.RetryExchange, c.Queue + ".retry.01"},
			bindTarget{c.DLQ(), topology.RetryExchange, c.DLQ()},
			bindTarget{c.Queue + "-evil", topology.RetryExchange, c.Queue},
		)
	}
	// Queues named like the platform exchanges: configure/read/write regexes
	// cover names, not resource kinds.
	for _, e := range pol.Topology.Exchanges {
		w.queues[e.Name] = queueState{}
	}
	for n := range w.queues {
		w.queueNames = append(w.queueNames, n)
	}
	sort.Strings(w.queueNames)
	w.exchanges = append(slices.Clone(pol.Topology.Exchanges),
		topology.Exchange{Name: "platform.events-evil", Type: amqp.ExchangeTopic},
		topology.Exchange{Name: "platform.eventsx", Type: amqp.ExchangeTopic},
		topology.Exchange{Name: "xplatform.dead-letter", Type: amqp.ExchangeTopic},
		topology.Exchange{Name: "platform.retryx", Type: amqp.ExchangeTopic},
	)
	w.restoreAll(t)
	return w
}

// restoreAll (re)declares the whole fixture as the admin: topology and decoys.
func (w *world) restoreAll(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := topology.Apply(ctx, w.admin, w.pol.Topology); err != nil {
		t.Fatalf("admin: apply topology: %v", err)
	}
	for _, n := range w.queueNames {
		if st := w.queues[n]; st.args == nil {
			w.adminDo(t, "declare decoy "+n, func(ch *amqp.Channel) error {
				_, err := ch.QueueDeclare(n, true, false, false, false, nil)
				return err
			})
		}
	}
}

func (w *world) restoreQueue(t *testing.T, name string) {
	t.Helper()
	st := w.queues[name]
	w.adminDo(t, "restore queue "+name, func(ch *amqp.Channel) error {
		if _, err := ch.QueueDeclare(name, true, false, false, false, st.args); err != nil {
			return err
		}
		for _, b := range st.bindings {
			if err := ch.QueueBind(name, b.Key, b.Exchange, false, nil); err != nil {
				return err
			}
		}
		return nil
	})
}

func (w *world) adminDo(t *testing.T, what string, f func(ch *amqp.Channel) error) {
	t.Helper()
	ch, err := w.admin.Channel()
	if err != nil {
		t.Fatalf("admin: %s: open channel: %v", what, err)
	}
	defer ch.Close()
	if err := f(ch); err != nil {
		t.Fatalf("admin: %s: %v", what, err)
	}
}

// publish publishes in confirm mode and reports the broker's verdict: nil
// once confirmed, the channel's close error when it refused.
func publish(ctx context.Context, ch *amqp.Channel, exchange, key string) error {
	closed := ch.NotifyClose(make(chan *amqp.Error, 1))
	if err := ch.Confirm(false); err != nil {
		return fmt.Errorf("confirm mode: %w", err)
	}
	dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, exchange, key, true, false,
		amqp.Publishing{ContentType: "application/json", Body: []byte(`{"acl":"matrix probe"}`)})
	if err != nil {
		return err
	}
	select {
	case <-dc.Done():
		if dc.Acked() {
			return nil
		}
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case e := <-closed:
		if e != nil {
			return e
		}
		return errors.New("channel closed without error")
	case <-time.After(2 * time.Second):
		return errors.New("publish nacked, channel still open")
	}
}

func (w *world) probes(t *testing.T, tb table) []probe {
	var ps []probe
	add := func(op, target string, want bool, do func(context.Context, *amqp.Channel) error, undo func(*testing.T)) {
		ps = append(ps, probe{op: op, target: target, want: want, do: do, undo: undo})
	}
	// publish: every catalogued routing key on its exchange, retries and dead
	// letters to every consumer's queues, and look-alike exchanges and keys.
	type pubTarget struct{ ex, key string }
	var pubs []pubTarget
	for _, d := range w.reg.All() {
		ex := topology.EventsExchange
		switch d.Kind {
		case registry.KindCommand:
			ex = topology.CommandsExchange
		case registry.KindJob:
			ex = topology.WorkExchange
		}
		pubs = append(pubs, pubTarget{ex, d.Type})
	}
	pubs = append(pubs,
		pubTarget{topology.EventsExchange, "request.submitted.v1.evil"},
		pubTarget{topology.EventsExchange, "xrequest.submitted.v1"},
		pubTarget{topology.EventsExchange, ""},
		pubTarget{topology.CommandsExchange, "ai.knowledge.index.v1x"},
		pubTarget{"platform.events-evil", "request.submitted.v1"},
		pubTarget{"platform.eventsx", "request.submitted.v1"},
		pubTarget{topology.RetryExchange, ""},
		pubTarget{topology.RetryExchange, "#"},
	)
	for _, c := range w.pol.Topology.Consumers {
		pubs = append(pubs,
			pubTarget{topology.DeadLetterExchange, c.Queue},
			// The default exchange reaches any queue: refused to everyone.
			pubTarget{"", c.Queue},
			pubTarget{"", c.RetryQueue(1)},
			pubTarget{"", c.DLQ()},
			// platform.retry: the consumer's own keys only (replay to Q,
			// retry tiers of any number), nothing else.
			pubTarget{topology.RetryExchange, c.Queue},
			pubTarget{topology.RetryExchange, c.RetryQueue(1)},
			pubTarget{topology.RetryExchange, c.RetryQueue(3)},
			pubTarget{topology.RetryExchange, c.Queue + ".retry.12"},
			pubTarget{topology.RetryExchange, c.Queue + ".retry.0"},
			pubTarget{topology.RetryExchange, c.Queue + ".retry.1.x"},
			pubTarget{topology.RetryExchange, c.Queue + ".retry.1x"},
			pubTarget{topology.RetryExchange, c.Queue + "-evil"},
			pubTarget{topology.RetryExchange, c.DLQ()},
			pubTarget{"platform.retryx", c.RetryQueue(1)},
		)
	}
	for _, p := range pubs {
		add("basic.publish", fmt.Sprintf("%q key %q", p.ex, p.key), tb.canPublish(p.ex, p.key),
			func(ctx context.Context, ch *amqp.Channel) error { return publish(ctx, ch, p.ex, p.key) }, nil)
	}
	for _, q := range w.queueNames {
		st := w.queues[q]
		add("queue.declare", q, tb.configure[q], func(_ context.Context, ch *amqp.Channel) error {
			_, err := ch.QueueDeclare(q, true, false, false, false, st.args)
			return err
		}, nil)
		add("basic.consume", q, tb.read[q], func(_ context.Context, ch *amqp.Channel) error {
			_, err := ch.Consume(q, "acl-matrix", false, false, false, false, nil)
			return err
		}, nil)
		add("queue.purge", q, tb.read[q], func(_ context.Context, ch *amqp.Channel) error {
			_, err := ch.QueuePurge(q, false)
			return err
		}, nil)
	}
	for _, b := range w.bindings {
		add("queue.bind", fmt.Sprintf("%s <- %s key %q", b.queue, b.exchange, b.key), tb.canBind(b.queue, b.exchange, b.key),
			func(_ context.Context, ch *amqp.Channel) error {
				return ch.QueueBind(b.queue, b.key, b.exchange, false, nil)
			}, nil)
	}
	for _, e := range w.exchanges {
		add("exchange.declare", e.Name, tb.configure[e.Name], func(_ context.Context, ch *amqp.Channel) error {
			return ch.ExchangeDeclare(e.Name, e.Type, true, false, false, false, nil)
		}, nil) // an allowed declaration is an equivalent redeclaration: nothing to undo
	}
	// Deletes last: each allowed one is undone before the next probe.
	for _, q := range w.queueNames {
		add("queue.delete", q, tb.configure[q], func(_ context.Context, ch *amqp.Channel) error {
			_, err := ch.QueueDelete(q, false, false, false)
			return err
		}, func(t *testing.T) { w.restoreQueue(t, q) })
	}
	for _, e := range w.exchanges {
		add("exchange.delete", e.Name, tb.configure[e.Name], func(_ context.Context, ch *amqp.Channel) error {
			return ch.ExchangeDelete(e.Name, false, false)
		}, func(t *testing.T) { w.restoreAll(t) })
	}
	return ps
}

// outcome runs p on a fresh channel of conn and classifies the result.
func outcome(ctx context.Context, conn *amqp.Connection, p probe) (allowed bool, err error) {
	ch, err := conn.Channel()
	if err != nil {
		return false, fmt.Errorf("open channel: %w", err)
	}
	defer ch.Close()
	perr := p.do(ctx, ch)
	if perr == nil {
		return true, nil
	}
	var aerr *amqp.Error
	if errors.As(perr, &aerr) && aerr.Code == amqp.AccessRefused {
		return false, nil
	}
	return false, fmt.Errorf("neither success nor ACCESS_REFUSED: %w", perr)
}

type tally struct {
	cells, allowed, denied, wrong int
	perOp                         map[string]int
	users                         int
}

func runID(t *testing.T) string {
	t.Helper()
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b[:])
}

// loadPolicy applies pol's definitions for users suffixed with suffix to v
// and deletes the users when the test ends.
func loadPolicy(t *testing.T, v *fabrictest.Vhost, pol acl.Policy, opts acl.Options) acl.Definitions {
	t.Helper()
	defs := pol.Definitions(opts)
	t.Cleanup(func() {
		for _, u := range defs.Users {
			_ = v.Mgmt(http.MethodDelete, "/api/users/"+url.PathEscape(u.Name), nil, nil)
		}
	})
	if err := v.Mgmt(http.MethodPost, "/api/definitions", defs, nil); err != nil {
		t.Fatalf("import definitions into vhost %s (management plugin enabled? run `make infra`): %v", v.Name, err)
	}
	return defs
}

func dialUser(t *testing.T, env fabrictest.Env, vhost, user, pass string) *amqp.Connection {
	t.Helper()
	u := fmt.Sprintf("amqp://%s:%s@%s/%s", url.PathEscape(user), url.PathEscape(pass), env.AMQPHost, url.PathEscape(vhost))
	// The handshake's deadline is the dial's: 5 s timed out on a loaded
	// 2-core machine (make test runs packages side by side) before the
	// broker answered; 30 s is amqp091's own default.
	conn, err := amqp.DialConfig(u, amqp.Config{Dial: amqp.DefaultDial(30 * time.Second)})
	if err != nil {
		t.Fatalf("dial as %s into %s (is RabbitMQ running? run `make infra`): %v", user, vhost, err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

func TestACLMatrix(t *testing.T) {
	if testing.Short() {
		t.Log("-short: the matrix still runs; it needs the local broker")
	}
	start := time.Now()
	env := fabrictest.EnvFrom(os.Getenv)
	pol, err := acl.Platform()
	if err != nil {
		t.Fatal(err)
	}
	reg, err := registry.Default()
	if err != nil {
		t.Fatal(err)
	}
	id := runID(t)
	opts := acl.Options{UserSuffix: ".acltest-" + id, Topology: true}

	v := fabrictest.NewVhost(t, env)
	opts.Vhost = v.Name
	loadPolicy(t, v, pol, opts)
	admin, err := amqp.Dial(v.URL)
	if err != nil {
		t.Fatalf("dial admin into %s: %v", v.Name, err)
	}
	t.Cleanup(func() { admin.Close() })
	w := newWorld(t, pol, reg, admin)

	tl := tally{perOp: map[string]int{}, users: len(pol.Grants)}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	for _, g := range pol.Grants {
		user := opts.User(g.Service)
		conn := dialUser(t, env, v.Name, user, acl.DevPassword(user))
		for _, p := range w.probes(t, newTable(g, w.queueNames)) {
			if conn.IsClosed() {
				conn = dialUser(t, env, v.Name, user, acl.DevPassword(user))
			}
			pctx, pcancel := context.WithTimeout(ctx, 10*time.Second)
			got, err := outcome(pctx, conn, p)
			pcancel()
			tl.cells++
			tl.perOp[p.op]++
			switch {
			case err != nil:
				tl.wrong++
				t.Errorf("%s: %s %s: %v (want allowed=%v)", g.Service, p.op, p.target, err, p.want)
			case got != p.want:
				tl.wrong++
				t.Errorf("%s: %s %s: allowed=%v, want %v", g.Service, p.op, p.target, got, p.want)
			case got:
				tl.allowed++
			default:
				tl.denied++
			}
			if got && p.undo != nil {
				p.undo(t)
			}
		}
	}

	// Fresh declaration: in a vhost with only the platform exchanges (which
	// the administrator's definitions own), each user applies every
	// consumer's topology. Declaring a NEW queue with a dead-letter exchange
	// also checks write on the DLX (platform.retry for retry tiers,
	// platform.dead-letter for the main queue) and read on the queue, which a
	// redeclaration of an existing queue does not; binding Q and its retry
	// tiers to platform.retry checks topic read on their keys.
	fresh := fabrictest.NewVhost(t, env)
	fopts := opts
	fopts.Vhost, fopts.Topology = fresh.Name, false
	loadPolicy(t, fresh, pol, fopts)
	adminConn, err := fresh.Dial(t).Connection(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := topology.Apply(ctx, adminConn, topology.Description{Exchanges: pol.Topology.Exchanges}); err != nil {
		t.Fatalf("admin declares the platform exchanges: %v", err)
	}
	for _, g := range pol.Grants {
		user := opts.User(g.Service)
		conn := dialUser(t, env, fresh.Name, user, acl.DevPassword(user))
		for _, c := range pol.Topology.Consumers {
			want := c.Service == g.Service
			d := topology.Description{Exchanges: pol.Topology.Exchanges, Consumers: []topology.Consumer{c}}
			got, err := outcome(ctx, conn, probe{do: func(ctx context.Context, _ *amqp.Channel) error { return topology.Apply(ctx, conn, d) }})
			tl.cells++
			tl.perOp["topology.apply (fresh)"]++
			switch {
			case err != nil:
				tl.wrong++
				t.Errorf("%s: apply %s from scratch: %v (want allowed=%v)", g.Service, c.Queue, err, want)
			case got != want:
				tl.wrong++
				t.Errorf("%s: apply %s from scratch: allowed=%v, want %v", g.Service, c.Queue, got, want)
			case got:
				tl.allowed++
			default:
				tl.denied++
			}
		}
	}

	var ops []string
	for op, n := range tl.perOp {
		ops = append(ops, fmt.Sprintf("%s %d", op, n/tl.users))
	}
	sort.Strings(ops)
	verdict := "PASS"
	if tl.wrong > 0 {
		verdict = fmt.Sprintf("FAIL (%d mismatches)", tl.wrong)
	}
	msg := fmt.Sprintf("ACL matrix: %d users × %d operations × targets per operation [%s] = %d checks: %d allowed as granted, %d denied with ACCESS_REFUSED (403); %s in %s",
		tl.users, len(tl.perOp), strings.Join(ops, ", "), tl.cells, tl.allowed, tl.denied, verdict, time.Since(start).Round(time.Millisecond))
	t.Log(msg)
	fmt.Println(msg) // visible without -v, for `make test` logs
}
