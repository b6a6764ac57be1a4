package host_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agora-platform/agora/pkg/fabric"
	"github.com/agora-platform/agora/pkg/fabric/envelope"
	"github.com/agora-platform/agora/pkg/fabric/fabrictest"
	"github.com/agora-platform/agora/pkg/fabric/host"
	"github.com/agora-platform/agora/pkg/fabric/topology"
)

// TestTheHostTellsItsReleaseToHandlersAndWorkers: RELEASE_ID reaches what
// the host runs through fabric.ExecutionOf: a ConsumeTx handler, with the
// message's producer as its principal, and a background worker (Go),
// whose principal is the service itself as SYSTEM.
func TestTheHostTellsItsReleaseToHandlersAndWorkers(t *testing.T) {
	f := fabrictest.NewFabric(t, env, topology.Description{Exchanges: topology.PlatformExchanges(), Consumers: []topology.Consumer{spec}})
	s := fabrictest.NewSchema(t, env)
	vars := map[string]string{"AMQP_URL": f.Vhost.URL, "DATABASE_URL": env.DatabaseURL, "DATABASE_SCHEMA": s.Name,
		"HTTP_ADDR": "127.0.0.1:0", "RELEASE_ID": "2026.12.3+bundle-9"}
	cfg, err := host.ConfigFrom("test", ":0", func(k string) string { return vars[k] })
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	h, err := host.New(ctx, cfg, host.Options{Consumers: []topology.Consumer{spec}}, &syncBuffer{})
	if err != nil {
		t.Fatal(err)
	}
	handled, worked := make(chan fabric.Execution, 1), make(chan fabric.Execution, 1)
	if err := h.ConsumeTx(spec.Queue, func(ctx context.Context, _ pgx.Tx, _ envelope.Envelope) error {
		handled <- fabric.ExecutionOf(ctx)
		return nil
	}, fabric.ConsumerOptions{}); err != nil {
		t.Fatal(err)
	}
	h.Go("probe", func(ctx context.Context) error {
		worked <- fabric.ExecutionOf(ctx)
		return nil
	})
	done := make(chan error, 1)
	go func() { done <- h.Serve(ctx, nil, nil) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve = %v", err)
		}
	})
	e, err := envelope.New("request.submitted.v1", "org-a", "request", map[string]any{
		"requestId": "0192d3a0-0000-7000-8000-000000000001", "protocol": "AGR-2026-000001", "serviceId": "s", "formId": "f1",
		"formVersion": 1, "channel": "web", "citizenId": "c-1", "submittedAt": "2026-11-30T10:00:00Z"})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Pub.Publish(ctx, e); err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		got       chan fabric.Execution
		principal envelope.Ref
	}{
		"handler": {handled, envelope.Ref{Type: "SYSTEM", ID: "request"}},
		"worker":  {worked, envelope.Ref{Type: "SYSTEM", ID: "test"}},
	} {
		select {
		case x := <-tc.got:
			if x.Release != "2026.12.3+bundle-9" || x.Principal != tc.principal {
				t.Errorf("%s: ExecutionOf = %+v, want release 2026.12.3+bundle-9 and principal %v", name, x, tc.principal)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("the %s never ran", name)
		}
	}
}

func TestConfigFromReadsReleaseID(t *testing.T) {
	for _, tc := range []struct{ value, want string }{{"", "dev"}, {"2026.12.3", "2026.12.3"}, {"rel_7+b-1", "rel_7+b-1"}} {
		c, err := host.ConfigFrom("test", ":0", func(k string) string {
			if k == "RELEASE_ID" {
				return tc.value
			}
			return ""
		})
		if err != nil || c.Release != tc.want {
			t.Errorf("RELEASE_ID=%q: Release %q, err %v; want %q", tc.value, c.Release, err, tc.want)
		}
	}
}
