package acl_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"testing"

	"github.com/agora-platform/agora/deploy/acl"
	"github.com/agora-platform/agora/pkg/fabric/registry"
	"github.com/agora-platform/agora/pkg/fabric/topology"
)

var update = flag.Bool("update", false, "rewrite the committed generated files")

// committed maps generated files (relative to this package) to their generators.
func TestCommittedFilesMatchGenerator(t *testing.T) {
	tests := []struct {
		path string
		gen  func() ([]byte, error)
	}{
		{"../rabbitmq/definitions.json", acl.PlatformDefinitions},
		{"../helm/agora/files/acl.json", acl.ChartACL},
	}
	for _, tt := range tests {
		t.Run(filepath.Base(tt.path), func(t *testing.T) {
			want, err := tt.gen()
			if err != nil {
				t.Fatal(err)
			}
			if *update {
				if err := os.WriteFile(tt.path, want, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			got, err := os.ReadFile(tt.path)
			if err != nil {
				t.Fatalf("%v (generate it: go run ./deploy/cmd/gendeploy)", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("%s drifted from the generator: run `go run ./deploy/cmd/gendeploy` (or go test ./deploy/acl -update) and commit", tt.path)
			}
		})
	}
}

func TestAnchored(t *testing.T) {
	tests := []struct {
		names []string
		want  string
		match []string
		miss  []string
	}{
		{nil, "^$", nil, []string{"a", "amq.default"}},
		{[]string{"b.q", "a.q", "a.q"}, `^(a\.q|b\.q)$`, []string{"a.q", "b.q"}, []string{"aXq", "a.q.dlq", "xa.q", "a.q-evil", ""}},
		{[]string{"task.#"}, `^(task\.#)$`, []string{"task.#"}, []string{"task.x", "task.#.x"}},
	}
	for _, tt := range tests {
		got := acl.Anchored(tt.names)
		if got != tt.want {
			t.Errorf("Anchored(%q) = %q, want %q", tt.names, got, tt.want)
		}
		re := regexp.MustCompile(got)
		for _, m := range tt.match {
			if !re.MatchString(m) {
				t.Errorf("%s does not match %q", got, m)
			}
		}
		for _, m := range tt.miss {
			if re.MatchString(m) {
				t.Errorf("%s matches %q", got, m)
			}
		}
	}
}

func TestBuildRejectsInconsistentInputs(t *testing.T) {
	reg, err := registry.Default()
	if err != nil {
		t.Fatal(err)
	}
	svcs := acl.PlatformServices(reg)
	tests := []struct {
		name     string
		services []acl.Service
	}{
		{"unknown type", append(svcs[:len(svcs):len(svcs)], acl.Service{Name: "rogue", Publishes: []string{"rogue.thing.v1"}})},
		{"duplicate service", append(svcs[:len(svcs):len(svcs)], svcs[0])},
		{"unowned queue", svcs[1:]},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := acl.Build(topology.Platform(), reg, tt.services); !errors.Is(err, acl.ErrPolicy) {
				t.Errorf("Build = %v, want ErrPolicy", err)
			}
		})
	}
}

// The committed definitions agree with the fabric: every queue the topology
// declares is in the file with its exact arguments and is granted (configure,
// write, read) to exactly one user, the service that consumes it; every
// publisher's topic write covers exactly the types it publishes.
func TestDefinitionsAgreeWithTopology(t *testing.T) {
	raw, err := os.ReadFile("../rabbitmq/definitions.json")
	if err != nil {
		t.Fatal(err)
	}
	var defs acl.Definitions
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	dec.UseNumber()
	if err := dec.Decode(&defs); err != nil {
		t.Fatalf("decode definitions.json: %v", err)
	}
	topo := topology.Platform()
	fileQueues := map[string]map[string]any{}
	for _, q := range defs.Queues {
		if q.Vhost != acl.Vhost || !q.Durable || q.AutoDelete {
			t.Errorf("queue %s: vhost %q durable %v auto_delete %v", q.Name, q.Vhost, q.Durable, q.AutoDelete)
		}
		fileQueues[q.Name] = q.Arguments
	}
	type userRe struct{ configure, write, read *regexp.Regexp }
	users := map[string]userRe{}
	for _, p := range defs.Permissions {
		if p.User == acl.AdminUser {
			continue
		}
		users[p.User] = userRe{regexp.MustCompile(p.Configure), regexp.MustCompile(p.Write), regexp.MustCompile(p.Read)}
	}
	if got, want := len(users), len(acl.PlatformServices(defaultRegistry(t))); got != want {
		t.Errorf("definitions grant %d service users, want %d", got, want)
	}
	total := 0
	for _, c := range topo.Consumers {
		for _, q := range c.Queues() {
			total++
			args, ok := fileQueues[q.Name]
			if !ok {
				t.Errorf("queue %s (consumer %s) missing from definitions.json", q.Name, c.Service)
				continue
			}
			want, _ := json.Marshal(map[string]any(q.Args))
			got, _ := json.Marshal(args)
			if !bytes.Equal(got, want) {
				t.Errorf("queue %s arguments = %s, want %s", q.Name, got, want)
			}
			var owners []string
			for u, re := range users {
				c, w, r := re.configure.MatchString(q.Name), re.write.MatchString(q.Name), re.read.MatchString(q.Name)
				if c != w || w != r {
					t.Errorf("queue %s: user %s has configure=%v write=%v read=%v; a queue is owned whole or not at all", q.Name, u, c, w, r)
				}
				if c {
					owners = append(owners, u)
				}
			}
			if len(owners) != 1 || owners[0] != c.Service {
				t.Errorf("queue %s is granted to %v, want exactly [%s]", q.Name, owners, c.Service)
			}
		}
	}
	if len(fileQueues) != total {
		t.Errorf("definitions.json has %d queues, the topology declares %d", len(fileQueues), total)
	}
	reg, err := registry.Default()
	if err != nil {
		t.Fatal(err)
	}
	for _, tp := range defs.TopicPermissions {
		if tp.Exchange != topology.EventsExchange {
			continue // platform.retry: TestRetryExchangeKeysAreOwned
		}
		re := regexp.MustCompile(tp.Write)
		for _, s := range acl.PlatformServices(defaultRegistry(t)) {
			if s.Name != tp.User {
				continue
			}
			for _, d := range reg.All() {
				publishes := false
				for _, p := range s.Publishes {
					publishes = publishes || p == d.Type
				}
				if want := publishes && d.Kind == registry.KindEvent; re.MatchString(d.Type) != want {
					t.Errorf("%s topic write on %s matches %s = %v, want %v", tp.User, tp.Exchange, d.Type, !want, want)
				}
			}
		}
	}
}

// A consumer's retry queues are its own whatever their number (RETRY_TIERS
// may add tiers), and nothing that merely starts like them is.
func TestRetryQueuesOfAnyTierAreOwned(t *testing.T) {
	pol, err := acl.Platform()
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range pol.Grants {
		perm := g.Permissions()
		res := map[string]*regexp.Regexp{"configure": regexp.MustCompile(perm.Configure),
			"write": regexp.MustCompile(perm.Write), "read": regexp.MustCompile(perm.Read)}
		for _, c := range pol.Topology.Consumers {
			own := c.Service == g.Service
			cases := map[string]bool{
				c.Queue + ".retry.1": own, c.Queue + ".retry.9": own, c.Queue + ".retry.12": own,
				c.Queue + ".retry.0": false, c.Queue + ".retry.": false, c.Queue + ".retry.1.x": false,
				c.Queue + ".retry.1x": false, c.Queue + "Xretry.1": false, "x" + c.Queue + ".retry.1": false,
			}
			for name, want := range cases {
				for op, re := range res {
					if got := re.MatchString(name); got != want {
						t.Errorf("%s: %s %q = %v, want %v", g.Service, op, name, got, want)
					}
				}
			}
		}
	}
}

// Hardening issue 18: the default exchange reaches every queue of the vhost,
// so no user may write on it (RabbitMQ checks "" as amq.default). Retries
// and replays travel on platform.retry instead, a topic exchange, where each
// service user writes and binds its own queues' keys only: Q and
// Q.retry.<n>. Every service user has a topic permission on it, since
// without one RabbitMQ allows every key. The committed definitions bind
// each Q and Q.retry.<n> to it with their own names as keys.
func TestRetryExchangeKeysAreOwned(t *testing.T) {
	defs := committedDefinitions(t)
	var retryEx *acl.DefExchange
	for i, e := range defs.Exchanges {
		if e.Name == topology.RetryExchange {
			retryEx = &defs.Exchanges[i]
		}
	}
	if retryEx == nil || retryEx.Type != "topic" || !retryEx.Durable {
		t.Fatalf("definitions.json exchange %s = %+v, want a durable topic exchange", topology.RetryExchange, retryEx)
	}
	for _, p := range defs.Permissions {
		if p.User == acl.AdminUser {
			continue
		}
		if regexp.MustCompile(p.Write).MatchString(acl.DefaultExchange) {
			t.Errorf("%s may write on the default exchange: write %s", p.User, p.Write)
		}
		if regexp.MustCompile(p.Write).MatchString(topology.RetryExchange) != regexp.MustCompile(p.Read).MatchString(topology.RetryExchange) {
			t.Errorf("%s: write and read on %s differ", p.User, topology.RetryExchange)
		}
	}
	topo := topology.Platform()
	type keyRe struct{ write, read *regexp.Regexp }
	retry := map[string]keyRe{}
	for _, tp := range defs.TopicPermissions {
		if tp.Exchange == topology.RetryExchange {
			retry[tp.User] = keyRe{regexp.MustCompile(tp.Write), regexp.MustCompile(tp.Read)}
		}
	}
	for _, s := range acl.PlatformServices(defaultRegistry(t)) {
		re, ok := retry[s.Name]
		if !ok {
			t.Errorf("%s has no topic permission on %s (RabbitMQ would allow every key)", s.Name, topology.RetryExchange)
			continue
		}
		for _, c := range topo.Consumers {
			own := c.Service == s.Name
			keys := map[string]bool{
				c.Queue: own, c.Queue + ".retry.1": own, c.Queue + ".retry.3": own, c.Queue + ".retry.12": own,
				c.Queue + ".retry.0": false, c.Queue + ".retry.": false, c.Queue + ".retry.1.x": false,
				c.Queue + ".retry.1x": false, c.DLQ(): false, c.Queue + ".x": false, "x" + c.Queue: false,
				c.Queue + ".retry.*": false, c.Queue + ".#": false, "#": false, "": false,
			}
			for k, want := range keys {
				if got := re.write.MatchString(k); got != want {
					t.Errorf("%s topic write on %s matches %q = %v, want %v", s.Name, topology.RetryExchange, k, got, want)
				}
				if got := re.read.MatchString(k); got != want {
					t.Errorf("%s topic read on %s matches %q = %v, want %v", s.Name, topology.RetryExchange, k, got, want)
				}
			}
		}
	}
	bound := map[string]bool{}
	for _, b := range defs.Bindings {
		if b.Source == topology.RetryExchange {
			bound[b.Destination+" <- "+b.RoutingKey] = true
		}
	}
	want := map[string]bool{}
	for _, c := range topo.Consumers {
		for _, q := range []string{c.Queue, c.Queue + ".retry.1", c.Queue + ".retry.2", c.Queue + ".retry.3"} {
			want[q+" <- "+q] = true
		}
	}
	if !reflect.DeepEqual(bound, want) {
		t.Errorf("definitions.json binds to %s: %v, want %v", topology.RetryExchange, bound, want)
	}
}

// No service may write a letter into another consumer's DLQ, nor send a
// command or job it does not publish: platform.dead-letter,
// platform.commands and platform.work are topic exchanges, and each user's
// topic write permission there is anchored to the keys it owns. Each case
// fails with the exchanges direct (no topic permission would apply) or with
// the keys left unanchored.
func TestTopicGrantsHoldEachServiceToItsOwnKeys(t *testing.T) {
	defs := committedDefinitions(t)
	for _, e := range defs.Exchanges {
		if e.Type != "topic" {
			t.Errorf("exchange %s is %s: topic permissions would not narrow its keys", e.Name, e.Type)
		}
	}
	write := map[string]*regexp.Regexp{} // user + " " + exchange
	for _, tp := range defs.TopicPermissions {
		write[tp.User+" "+tp.Exchange] = regexp.MustCompile(tp.Write)
	}
	reg := defaultRegistry(t)
	topo := topology.Platform()
	for _, s := range acl.PlatformServices(reg) {
		may := func(ex, key string) bool {
			re, ok := write[s.Name+" "+ex]
			if !ok {
				t.Fatalf("%s has no topic permission on %s (RabbitMQ would allow every key)", s.Name, ex)
			}
			return re.MatchString(key)
		}
		for _, c := range topo.Consumers {
			if got, own := may(topology.DeadLetterExchange, c.Queue), c.Service == s.Name; got != own {
				t.Errorf("%s may write a dead letter keyed %s (%s's queue) = %v, want %v", s.Name, c.Queue, c.Service, got, own)
			}
		}
		for _, d := range reg.All() {
			if d.Kind == registry.KindEvent {
				continue
			}
			ex, key := topology.Route(d)
			if got, want := may(ex, key), slices.Contains(s.Publishes, d.Type); got != want {
				t.Errorf("%s may send %s on %s = %v, want %v (catalog publishes: %v)", s.Name, d.Type, ex, got, want, s.Publishes)
			}
		}
	}
}

// committedDefinitions reads deploy/rabbitmq/definitions.json.
func committedDefinitions(t *testing.T) acl.Definitions {
	t.Helper()
	raw, err := os.ReadFile("../rabbitmq/definitions.json")
	if err != nil {
		t.Fatal(err)
	}
	var defs acl.Definitions
	if err := json.Unmarshal(raw, &defs); err != nil {
		t.Fatal(err)
	}
	return defs
}

func defaultRegistry(t *testing.T) *registry.Registry {
	t.Helper()
	reg, err := registry.Default()
	if err != nil {
		t.Fatal(err)
	}
	return reg
}
