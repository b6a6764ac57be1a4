package topology_test

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agora-platform/agora/pkg/fabric/topology"
)

// topologyFile is the path of deploy/topologies/<name>.yaml, found from
// the test's directory upwards (the workspace root holds go.work).
func topologyFile(t *testing.T, name string) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.work")); err == nil {
			return filepath.Join(dir, "deploy", "topologies", name+".yaml")
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.work above the test's directory")
		}
		dir = parent
	}
}

func TestPlatformFileIsPlatform(t *testing.T) {
	d, err := topology.LoadFile(topologyFile(t, "platform"))
	if err != nil {
		t.Fatal(err)
	}
	want := topology.Platform()
	if !reflect.DeepEqual(d, want) {
		t.Fatalf("deploy/topologies/platform.yaml loads as\n%+v\nwant topology.Platform()\n%+v", d, want)
	}
	// What is declared, queue by queue, is today's: the names and arguments
	// of a consumer built without any naming of its own.
	for _, c := range d.Consumers {
		bare := topology.Consumer{Queue: c.Queue, Bindings: c.Bindings, RetryTiers: c.RetryTiers, DeliveryLimit: c.DeliveryLimit}
		if !reflect.DeepEqual(c.Queues(), bare.Queues()) || !reflect.DeepEqual(c.FabricBindings(), bare.FabricBindings()) {
			t.Errorf("%s: declared %v %v, want %v %v", c.Queue, c.Queues(), c.FabricBindings(), bare.Queues(), bare.FabricBindings())
		}
	}
}

func TestCARFile(t *testing.T) {
	d, err := topology.LoadFile(topologyFile(t, "car"))
	if err != nil {
		t.Fatal(err)
	}
	if d.Codec != "car" || d.Tenant != "car" || d.Events != "car.events" {
		t.Errorf("codec, tenant, events = %q %q %q", d.Codec, d.Tenant, d.Events)
	}
	c, ok := d.Consumer("processos.analista")
	if !ok {
		t.Fatal("no processos.analista")
	}
	if got := c.DLQ(); got != "car.dlq.processos.analista" {
		t.Errorf("DLQ() = %q, want car.dlq.processos.analista", got)
	}
	if c.DeadLetterExchange() != "car.dlx" || c.RetryExchange() != "car.retry" || c.SharedDLQ() {
		t.Errorf("exchanges %q %q shared %v", c.DeadLetterExchange(), c.RetryExchange(), c.SharedDLQ())
	}
	if got, want := c.Tiers(), []time.Duration{time.Second, 5 * time.Second, 25 * time.Second}; !slices.Equal(got, want) {
		t.Errorf("Tiers() = %v, want %v", got, want)
	}
	qs := c.Queues()
	var names []string
	for _, q := range qs {
		names = append(names, q.Name)
	}
	want := []string{"car.dlq.processos.analista", "processos.analista.retry.1", "processos.analista.retry.2", "processos.analista.retry.3", "processos.analista"}
	if !slices.Equal(names, want) {
		t.Errorf("Queues() = %q, want %q", names, want)
	}
	if a := qs[1].Args; a["x-dead-letter-exchange"] != "car.retry" || a["x-message-ttl"] != nil {
		t.Errorf("retry tier 1 args = %v, want car.retry and no x-message-ttl (the tier's policy carries it)", a)
	}
	if p := qs[1].Policy; p == nil || p.Pattern != `^processos\.analista\.retry\.1$` || p.Definition["message-ttl"] != int64(1000) {
		t.Errorf("retry tier 1 policy = %+v, want message-ttl 1000 on that queue alone", p)
	}
	if a := qs[4].Args; a["x-dead-letter-exchange"] != "car.dlx" || a["x-dead-letter-routing-key"] != "processos.analista" {
		t.Errorf("main queue args = %v", a)
	}
	if got := c.FabricBindings()[0]; got != (topology.QueueBinding{Queue: "car.dlq.processos.analista", Exchange: "car.dlx", Key: "processos.analista"}) {
		t.Errorf("DLQ binding = %+v", got)
	}
}

func TestImoveisFile(t *testing.T) {
	d, err := topology.LoadFile(topologyFile(t, "imoveis"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range d.Consumers {
		if c.DLQ() != "imoveis.dlq" || !c.SharedDLQ() {
			t.Errorf("%s: DLQ() = %q shared %v, want the shared imoveis.dlq", c.Queue, c.DLQ(), c.SharedDLQ())
		}
		if b := c.FabricBindings()[0]; b != (topology.QueueBinding{Queue: "imoveis.dlq", Exchange: "imoveis.dlx", Key: "#"}) {
			t.Errorf("%s: DLQ binding = %+v", c.Queue, b)
		}
	}
	c, _ := d.Consumer("imoveis.enriquecimento")
	if c.Prefetch != 1 || c.Pace == nil || c.Pace.PerSecond <= 0 {
		t.Errorf("imoveis.enriquecimento prefetch %d pace %+v, want 1 and a rate", c.Prefetch, c.Pace)
	}
}

func TestLoadRefusesBadNaming(t *testing.T) {
	base := "name: x\ncodec: car\ntenant: x\nevents: x.events\n" +
		"exchanges:\n  - {name: x.events, type: topic}\n  - {name: x.dlx, type: topic}\n  - {name: x.retry, type: topic}\n" +
		"consumers:\n  - queue: a.b\n    bindings: [{exchange: x.events, key: a}]\n"
	if _, err := topology.Load([]byte(base + "deadLetter: {exchange: x.dlx, queue: \"x.dlq.{queue}\"}\nretry: {exchange: x.retry}\n")); err != nil {
		t.Fatalf("Load(good) = %v", err)
	}
	for name, tc := range map[string]struct{ yaml, want string }{
		"undeclared dlx":     {base + "deadLetter: {exchange: nowhere}\nretry: {exchange: x.retry}\n", "nowhere is required"},
		"direct retry":       {strings.Replace(base, "{name: x.retry, type: topic}", "{name: x.retry, type: direct}", 1) + "deadLetter: {exchange: x.dlx}\nretry: {exchange: x.retry}\n", "must be a topic exchange"},
		"two placeholders":   {base + "deadLetter: {exchange: x.dlx, queue: \"{queue}.{queue}\"}\nretry: {exchange: x.retry}\n", "neither a queue name"},
		"no tenant":          {strings.Replace(base, "tenant: x\n", "", 1) + "deadLetter: {exchange: x.dlx}\nretry: {exchange: x.retry}\n", "fixed tenant"},
		"no events":          {strings.Replace(base, "events: x.events\n", "", 1) + "deadLetter: {exchange: x.dlx}\nretry: {exchange: x.retry}\n", "events must name"},
		"tenant on agora":    {strings.Replace(base, "codec: car", "codec: agora", 1) + "deadLetter: {exchange: x.dlx}\nretry: {exchange: x.retry}\n", "carries its own tenant"},
		"dlq is a consumer":  {base + "  - queue: x.dlq\n    bindings: [{exchange: x.events, key: b}]\ndeadLetter: {exchange: x.dlx, queue: x.dlq}\nretry: {exchange: x.retry}\n", "reserved suffix"},
		"dlq named as queue": {base + "  - queue: c.d\n    bindings: [{exchange: x.events, key: b}]\ndeadLetter: {exchange: x.dlx, queue: c.d}\nretry: {exchange: x.retry}\n", "also a DLQ"},
		"zero pace":          {base + "    pace: {perSecond: 0}\ndeadLetter: {exchange: x.dlx}\nretry: {exchange: x.retry}\n", "pace needs"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := topology.Load([]byte(tc.yaml))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Load = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}
