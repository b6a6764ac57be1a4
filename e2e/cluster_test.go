//go:build containers

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/moby/moby/api/types/container"
	mobynet "github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"
	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/testcontainers/testcontainers-go"
	tcexec "github.com/testcontainers/testcontainers-go/exec"
	"github.com/testcontainers/testcontainers-go/network"
	"github.com/testcontainers/testcontainers-go/wait"

	"github.com/agora-platform/agora/pkg/fabric"
	"github.com/agora-platform/agora/pkg/fabric/broker"
	"github.com/agora-platform/agora/pkg/fabric/envelope"
	"github.com/agora-platform/agora/pkg/fabric/fabrictest"
	"github.com/agora-platform/agora/pkg/fabric/inbox"
	"github.com/agora-platform/agora/pkg/fabric/registry"
	"github.com/agora-platform/agora/pkg/fabric/topology"
)

// The cluster test needs a Docker engine and a RabbitMQ image
// (RABBITMQ_IMAGE; `make cluster-test` passes the local stand-in). It runs
// under the `containers` build tag so `make test` does not need an engine.

var clusterQueue = topology.Consumer{
	Queue: "cluster.request-submitted", Service: "cluster",
	RetryTiers: []topology.Duration{topology.Duration(200 * time.Millisecond)},
	Bindings:   []topology.Binding{{Exchange: topology.EventsExchange, Key: "request.submitted.v1"}},
}

type rabbitNode struct {
	name string // rmq1…: host name, network alias, node rabbit@<name>
	port int    // host port of its AMQP listener
	c    testcontainers.Container
}

func (n *rabbitNode) url() string { return fmt.Sprintf("amqp://guest:guest@127.0.0.1:%d/", n.port) }

// TestClusterSurvivesLeaderLossAndPartition runs the platform's quorum
// queue on a 3-node RabbitMQ cluster (containers on their own network) and
// has the fabric publish with confirms and consume through an inbox while
// the queue's leader is stopped, and then while a node is cut off the
// network. Clients get only the list of the three addresses. Every
// confirmed event must have exactly one effect.
func TestClusterSurvivesLeaderLossAndPartition(t *testing.T) {
	// No reaper: its image would have to be pulled. Everything started
	// here is removed in t.Cleanup.
	t.Setenv("TESTCONTAINERS_RYUK_DISABLED", "true")
	image := os.Getenv("RABBITMQ_IMAGE")
	if image == "" {
		image = "rabbitmq:3.13-management"
	}
	ctx := context.Background()
	docker, err := testcontainers.NewDockerClientWithOpts(ctx)
	if err != nil {
		t.Fatalf("docker engine (run `make infra`): %v", err)
	}
	t.Cleanup(func() { docker.Close() })

	nw, err := network.New(ctx)
	if err != nil {
		t.Fatalf("network: %v", err)
	}
	t.Cleanup(func() { _ = nw.Remove(context.Background()) })

	nodes := make([]*rabbitNode, 3)
	for i := range nodes {
		nodes[i] = &rabbitNode{name: fmt.Sprintf("rmq%d", i+1), port: freeTCPPort(t)}
	}
	var conf strings.Builder
	conf.WriteString("cluster_formation.peer_discovery_backend = classic_config\n")
	for i, n := range nodes {
		fmt.Fprintf(&conf, "cluster_formation.classic_config.nodes.%d = rabbit@%s\n", i+1, n.name)
	}
	// The minority side of a partition pauses and drops its clients, which
	// then redial a node of the majority.
	conf.WriteString("cluster_partition_handling = pause_minority\n")
	// Until the distribution layer declares a silent node down, schema
	// operations (the clients' redeclaration on reconnect) wait for it:
	// 60 s by default, 10 s here.
	conf.WriteString("net_ticktime = 10\n")
	// One node at a time: the first forms the cluster, the others join it.
	for _, n := range nodes {
		n.c = startRabbit(t, ctx, image, nw, n, conf.String())
	}
	waitClusterSize(t, ctx, nodes[0], 3)

	var urls []string
	for _, n := range nodes {
		urls = append(urls, n.url())
	}
	addresses := strings.Join(urls, ",")
	env := fabrictest.EnvFrom(os.Getenv)
	s := fabrictest.NewSchema(t, env)
	if _, err := s.Pool.Exec(ctx, `CREATE TABLE effect (event_id uuid NOT NULL, at timestamptz NOT NULL DEFAULT clock_timestamp())`); err != nil {
		t.Fatal(err)
	}
	reg, err := registry.Default()
	if err != nil {
		t.Fatal(err)
	}
	desc := topology.Description{Exchanges: topology.PlatformExchanges(), Consumers: []topology.Consumer{clusterQueue}}
	dial := func(name string) *broker.Conn {
		dctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		defer cancel()
		c, err := broker.Dial(dctx, addresses, broker.Options{Name: name, Heartbeat: 3 * time.Second,
			MinBackoff: 100 * time.Millisecond, MaxBackoff: time.Second,
			Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo})).With("client", name)},
			func(ctx context.Context, c *amqp.Connection) error { return topology.Apply(ctx, c, desc) })
		if err != nil {
			t.Fatalf("dial %s: %v", name, err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	pubConn, subConn := dial("cluster-publisher"), dial("cluster-consumer")
	pub, err := broker.NewPublisher(pubConn, reg, broker.PublisherOptions{ConfirmTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	in := inbox.New(s.Pool, s.Name, clusterQueue.Queue, inbox.Options{})
	cons, err := broker.NewConsumer(subConn, pub, reg, clusterQueue, in.Handler(func(ctx context.Context, tx pgx.Tx, e envelope.Envelope) error {
		_, err := tx.Exec(ctx, `INSERT INTO effect (event_id) VALUES ($1)`, e.ID)
		return err
	}), fabric.ConsumerOptions{Prefetch: 50, Concurrency: 4})
	if err != nil {
		t.Fatal(err)
	}
	cctx, stopConsumer := context.WithCancel(ctx)
	consumerDone := make(chan error, 1)
	go func() { consumerDone <- cons.Run(cctx) }()
	t.Cleanup(func() { stopConsumer(); <-consumerDone })

	// The publisher: each event is published until confirmed (the same
	// id on every attempt: at least once, the inbox makes it once). It
	// runs until both faults are behind it.
	var (
		mu        sync.Mutex
		confirmed []string
		at        []time.Time  // when each was confirmed
		lastOK    atomic.Int64 // unix nanos of the latest confirm
		attempts  atomic.Int64
	)
	pubDone, stopPub := make(chan struct{}), make(chan struct{})
	// abort ends the retries when the test ends early (a t.Fatal): without
	// it the goroutine retries on the closed connection while the cleanups
	// run, and its "no node" lines bury the failure.
	abort := make(chan struct{})
	go func() {
		defer close(pubDone)
		tick := time.NewTicker(5 * time.Millisecond) // ~200 events/s offered
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-stopPub:
				return
			case <-tick.C:
			}
			e := clusterEvent(t, i)
			for {
				attempts.Add(1)
				pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				err := pub.Publish(pctx, e)
				cancel()
				if err == nil {
					break
				}
				if attempts.Load()%20 == 0 || !strings.Contains(err.Error(), "nacked") {
					t.Logf("publish %s via %s: %v (retrying)", e.ID, nodeOf(pubConn, nodes), err)
				}
				select {
				case <-abort:
					return
				case <-time.After(50 * time.Millisecond):
				}
			}
			lastOK.Store(time.Now().UnixNano())
			mu.Lock()
			confirmed = append(confirmed, e.ID)
			at = append(at, time.Now())
			mu.Unlock()
		}
	}()
	// Registered after the connections' cleanups, so it runs before them.
	t.Cleanup(func() { close(abort); <-pubDone })
	confirmedCount := func() int { mu.Lock(); defer mu.Unlock(); return len(confirmed) }
	// outage is the longest pause between two confirms from a fault until
	// end: how long the publisher was held up by it.
	outage := func(fault, end time.Time) time.Duration {
		mu.Lock()
		defer mu.Unlock()
		var longest time.Duration
		for i := 1; i < len(at); i++ {
			if at[i].After(fault) && at[i-1].Before(end) {
				from := at[i-1]
				if from.Before(fault) {
					from = fault
				}
				longest = max(longest, at[i].Sub(from))
			}
		}
		return longest
	}

	// Fault 1: stop the node that leads the queue, mid-publish.
	fabrictest.Eventually(t, time.Minute, "1,000 events confirmed", func() bool { return confirmedCount() >= 1000 })
	if lastOK.Load() < time.Now().Add(-time.Second).UnixNano() {
		t.Fatal("the publisher is not running when the first fault comes")
	}
	leader := queueLeader(t, ctx, nodes, clusterQueue.Queue)
	t.Logf("stopping %s, the leader of %s, at %d confirmed", leader.name, clusterQueue.Queue, confirmedCount())
	stopAt := time.Now()
	stopTimeout := 10 * time.Second
	if err := leader.c.Stop(ctx, &stopTimeout); err != nil {
		t.Fatalf("stop %s: %v", leader.name, err)
	}
	atStop := confirmedCount()
	fabrictest.Eventually(t, 3*time.Minute, "200 more events confirmed without the leader", func() bool {
		return confirmedCount() >= atStop+200
	})
	if err := leader.c.Start(ctx); err != nil {
		t.Fatalf("restart %s: %v", leader.name, err)
	}
	waitClusterSize(t, ctx, leader, 3)
	// The second fault is for a healthy cluster: the restarted node's
	// replica must be back in the queue's Raft group, or cutting another
	// node leaves one replica of three and the queue rightly refuses
	// every publish.
	waitReplicasOnline(t, ctx, leader, clusterQueue.Queue, 3)

	// Fault 2: cut off the network the node the publisher is connected to,
	// so the fault reaches a client.
	cut := connectedNode(t, ctx, pubConn, nodes)
	connectsBefore := pubConn.Connects()
	id := cut.c.GetContainerID()
	t.Logf("disconnecting %s from the network at %d confirmed", cut.name, confirmedCount())
	cutAt := time.Now()
	if _, err := docker.NetworkDisconnect(ctx, nw.ID, client.NetworkDisconnectOptions{Container: id, Force: true}); err != nil {
		t.Fatalf("network disconnect %s: %v", cut.name, err)
	}
	atCut := confirmedCount()
	fabrictest.Eventually(t, 3*time.Minute, "200 more events confirmed while a node is cut off", func() bool {
		return confirmedCount() >= atCut+200
	})
	if _, err := docker.NetworkConnect(ctx, nw.ID, client.NetworkConnectOptions{Container: id,
		EndpointConfig: &mobynet.EndpointSettings{Aliases: []string{cut.name}}}); err != nil {
		t.Fatalf("network connect %s: %v", cut.name, err)
	}

	atReconnect := confirmedCount()
	fabrictest.Eventually(t, 2*time.Minute, "200 more events confirmed after the node is back", func() bool {
		return confirmedCount() >= atReconnect+200
	})
	close(stopPub)
	select {
	case <-pubDone:
	case <-time.After(time.Minute):
		t.Fatalf("publisher stuck at %d confirmed", confirmedCount())
	}
	mu.Lock()
	ids := append([]string(nil), confirmed...)
	mu.Unlock()
	fabrictest.Eventually(t, 3*time.Minute, "an effect for every confirmed event", func() bool {
		var n int
		err := s.Pool.QueryRow(ctx, `SELECT count(DISTINCT event_id) FROM effect WHERE event_id = ANY($1::uuid[])`, ids).Scan(&n)
		return err == nil && n == len(ids)
	})
	var rows, distinct, lost int
	if err := s.Pool.QueryRow(ctx, `SELECT count(*), count(DISTINCT event_id) FROM effect`).Scan(&rows, &distinct); err != nil {
		t.Fatal(err)
	}
	if err := s.Pool.QueryRow(ctx, `SELECT count(*) FROM unnest($1::uuid[]) c(id) WHERE NOT EXISTS (SELECT 1 FROM effect WHERE event_id = c.id)`, ids).Scan(&lost); err != nil {
		t.Fatal(err)
	}
	t.Logf("cluster: confirmed %d, lost %d, duplicated effects %d; publish attempts %d; publishing held up %.1f s by the leader's stop, %.1f s by the cut; publisher connections %d, consumer connections %d",
		len(ids), lost, rows-distinct, attempts.Load(), outage(stopAt, cutAt).Seconds(), outage(cutAt, time.Now()).Seconds(), pubConn.Connects(), subConn.Connects())
	if lost != 0 || rows != distinct {
		t.Fatalf("confirmed %d, lost %d, duplicated effects %d", len(ids), lost, rows-distinct)
	}
	if pubConn.Connects() <= connectsBefore {
		t.Errorf("the publisher never left the node cut off the network (connections %d)", pubConn.Connects())
	}
}

func clusterEvent(t *testing.T, i int) envelope.Envelope {
	t.Helper()
	e, err := envelope.New("request.submitted.v1", "org-cluster", "cluster-test", map[string]any{
		"requestId": "0192d3a0-0000-7000-8000-000000000001", "protocol": fmt.Sprintf("AGR-2026-%06d", i), "serviceId": "s",
		"formId": "f", "formVersion": 1, "channel": "web", "citizenId": "c", "submittedAt": "2026-11-30T10:00:00Z"})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func startRabbit(t *testing.T, ctx context.Context, image string, nw *testcontainers.DockerNetwork, n *rabbitNode, conf string) testcontainers.Container {
	t.Helper()
	req := testcontainers.GenericContainerRequest{Started: true, ContainerRequest: testcontainers.ContainerRequest{
		Image:          image,
		Name:           fmt.Sprintf("agora-cluster-%s-%d", n.name, n.port),
		Networks:       []string{nw.Name},
		NetworkAliases: map[string][]string{nw.Name: {n.name}},
		Env:            map[string]string{"RABBITMQ_ERLANG_COOKIE": "agora-cluster-test-cookie"},
		ExposedPorts:   []string{"5672/tcp"},
		Files: []testcontainers.ContainerFile{{Reader: strings.NewReader(conf),
			ContainerFilePath: "/etc/rabbitmq/conf.d/20-cluster.conf", FileMode: 0o644}},
		ConfigModifier: func(c *container.Config) { c.Hostname = n.name },
		HostConfigModifier: func(hc *container.HostConfig) {
			// A fixed host port: a restarted node comes back where the
			// clients' address list expects it.
			hc.PortBindings = mobynet.PortMap{mobynet.MustParsePort("5672/tcp"): {{HostIP: netip.MustParseAddr("127.0.0.1"), HostPort: fmt.Sprint(n.port)}}}
		},
		WaitingFor: wait.ForExec([]string{"rabbitmq-diagnostics", "-q", "check_running"}).
			WithStartupTimeout(2 * time.Minute).WithPollInterval(time.Second),
	}}
	c, err := testcontainers.GenericContainer(ctx, req)
	if c != nil {
		t.Cleanup(func() {
			if t.Failed() {
				if r, err := c.Logs(context.Background()); err == nil {
					logs, _ := io.ReadAll(r)
					t.Logf("--- %s ---\n%s", n.name, tailString(string(logs), 40))
				}
			}
			_ = c.Terminate(context.Background())
		})
	}
	if err != nil {
		t.Fatalf("start %s from %s: %v", n.name, image, err)
	}
	return c
}

// connectedNode returns the node c is connected to now.
func connectedNode(t *testing.T, ctx context.Context, c *broker.Conn, nodes []*rabbitNode) *rabbitNode {
	t.Helper()
	conn, err := c.Connection(ctx)
	if err != nil {
		t.Fatal(err)
	}
	addr, ok := conn.RemoteAddr().(*net.TCPAddr)
	if !ok {
		t.Fatalf("remote address %v", conn.RemoteAddr())
	}
	for _, n := range nodes {
		if n.port == addr.Port {
			return n
		}
	}
	t.Fatalf("connected to %v, which is none of the nodes", addr)
	return nil
}

// nodeOf names the node c is connected to, for logs.
func nodeOf(c *broker.Conn, nodes []*rabbitNode) string {
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	conn, err := c.Connection(ctx)
	if err != nil {
		return "no node"
	}
	if addr, ok := conn.RemoteAddr().(*net.TCPAddr); ok {
		for _, n := range nodes {
			if n.port == addr.Port {
				return n.name
			}
		}
	}
	return conn.RemoteAddr().String()
}

// rabbitctl runs rabbitmqctl on node and returns its output.
func rabbitctl(ctx context.Context, n *rabbitNode, args ...string) (string, error) {
	// Without the cookie variable the CLI reads the cookie file the entry
	// point wrote, and prints no deprecation notice before its JSON.
	code, r, err := n.c.Exec(ctx, append([]string{"env", "-u", "RABBITMQ_ERLANG_COOKIE", "rabbitmqctl"}, args...), tcexec.Multiplexed())
	if err != nil {
		return "", err
	}
	out, _ := io.ReadAll(r)
	if code != 0 {
		return "", fmt.Errorf("rabbitmqctl %s on %s: exit %d: %s", strings.Join(args, " "), n.name, code, out)
	}
	return string(out), nil
}

func waitClusterSize(t *testing.T, ctx context.Context, n *rabbitNode, want int) {
	t.Helper()
	fabrictest.Eventually(t, 2*time.Minute, fmt.Sprintf("%d running nodes seen from %s", want, n.name), func() bool {
		out, err := rabbitctl(ctx, n, "cluster_status", "--formatter", "json")
		if err != nil {
			return false
		}
		var st struct {
			RunningNodes []string `json:"running_nodes"`
		}
		return json.Unmarshal([]byte(jsonPart(out)), &st) == nil && len(st.RunningNodes) == want
	})
}

// waitReplicasOnline waits until n reports want online members of queue.
func waitReplicasOnline(t *testing.T, ctx context.Context, n *rabbitNode, queue string, want int) {
	t.Helper()
	fabrictest.Eventually(t, 2*time.Minute, fmt.Sprintf("%d online replicas of %s", want, queue), func() bool {
		out, err := rabbitctl(ctx, n, "list_queues", "-q", "--formatter", "json", "name", "online")
		if err != nil {
			return false
		}
		var qs []struct {
			Name   string
			Online []string
		}
		if json.Unmarshal([]byte(jsonPart(out)), &qs) != nil {
			return false
		}
		for _, q := range qs {
			if q.Name == queue {
				return len(q.Online) == want
			}
		}
		return false
	})
}

// queueLeader asks a running node which node leads queue.
func queueLeader(t *testing.T, ctx context.Context, nodes []*rabbitNode, queue string) *rabbitNode {
	t.Helper()
	var leader *rabbitNode
	fabrictest.Eventually(t, time.Minute, "the leader of "+queue, func() bool {
		for _, n := range nodes {
			out, err := rabbitctl(ctx, n, "list_queues", "-q", "--formatter", "json", "name", "leader")
			if err != nil {
				continue
			}
			var qs []struct{ Name, Leader string }
			if json.Unmarshal([]byte(jsonPart(out)), &qs) != nil {
				continue
			}
			for _, q := range qs {
				for _, m := range nodes {
					if q.Name == queue && q.Leader == "rabbit@"+m.name {
						leader = m
						return true
					}
				}
			}
		}
		return false
	})
	return leader
}

// jsonPart drops any lines the CLI prints before its JSON.
func jsonPart(s string) string {
	for i, line := range strings.SplitAfter(s, "\n") {
		if strings.HasPrefix(line, "{") || strings.HasPrefix(line, "[") {
			return strings.Join(strings.SplitAfter(s, "\n")[i:], "")
		}
	}
	return s
}

func tailString(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func freeTCPPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
