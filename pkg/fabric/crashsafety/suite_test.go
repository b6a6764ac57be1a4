package crashsafety_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"sort"
	"testing"
	"time"

	"github.com/agora-platform/agora/pkg/fabric"
	"github.com/agora-platform/agora/pkg/fabric/fabrictest"
	"github.com/agora-platform/agora/pkg/fabric/inbox"
	"github.com/agora-platform/agora/pkg/fabric/outbox"
)

type suite struct {
	t      *testing.T
	f      *fabrictest.Fabric
	s      *fabrictest.Schema
	env    fabrictest.Env
	faults int
	logDir string
}

func (su *suite) start(role, crashAt string, extra ...string) *exec.Cmd {
	su.t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envRole+"="+role, envCrashAt+"="+crashAt, envAMQP+"="+su.f.Vhost.URL,
		envDB+"="+su.env.DatabaseURL, envSchema+"="+su.s.Name)
	cmd.Env = append(cmd.Env, extra...)
	logf, err := os.CreateTemp(su.logDir, role+"-*.log")
	if err != nil {
		su.t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		su.t.Fatalf("start %s: %v", role, err)
	}
	return cmd
}

// expectExit waits for cmd and checks its exit code; a crash (crashedCode)
// counts as an injected fault.
func (su *suite) expectExit(cmd *exec.Cmd, want int, what string) {
	su.t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-time.After(90 * time.Second):
		cmd.Process.Kill()
		su.t.Fatalf("%s: still running after 90s", what)
	}
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		su.t.Fatalf("%s: %v", what, err)
	}
	if code != want {
		su.t.Fatalf("%s: exit code %d, want %d (logs in %s)", what, code, want, su.logDir)
	}
	if code == crashedCode {
		su.faults++
	}
}

func (su *suite) count(query string, args ...any) int {
	su.t.Helper()
	var n int
	if err := su.s.Pool.QueryRow(context.Background(), query, args...).Scan(&n); err != nil {
		su.t.Fatalf("%s: %v", query, err)
	}
	return n
}

func (su *suite) ids(query string, args ...any) []string {
	su.t.Helper()
	rows, err := su.s.Pool.Query(context.Background(), query, args...)
	if err != nil {
		su.t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			su.t.Fatal(err)
		}
		out = append(out, id)
	}
	sort.Strings(out)
	return out
}

func TestCrashSafety(t *testing.T) {
	env := fabrictest.EnvFrom(os.Getenv)
	su := &suite{t: t, env: env, f: fabrictest.NewFabric(t, env, desc()), s: fabrictest.NewSchema(t, env), logDir: t.TempDir()}
	ctx := context.Background()
	if _, err := su.s.Pool.Exec(ctx, `
		CREATE TABLE request_row (id uuid PRIMARY KEY);
		CREATE TABLE rolled_back (id uuid PRIMARY KEY);
		CREATE TABLE effect (consumer text NOT NULL, event_id uuid NOT NULL);`); err != nil {
		t.Fatal(err)
	}
	qa, qb := consumers[0].Queue, consumers[1].Queue

	// 1. A producer dies right after its 40th commit, before any relay ran.
	su.expectExit(su.start("producer", "producer.after-commit:40", envCount+"=100"), crashedCode, "producer crash after commit")
	su.expectExit(su.start("producer", "", envCount+"=100"), 0, "producer")
	// 2. A relay dies after the broker confirmed its 2nd batch but before
	//    marking it published: that batch will be sent again.
	su.expectExit(su.start("relay", "relay.after-confirm:2"), crashedCode, "relay crash after confirm")
	// 3. A relay dies holding claimed rows, before publishing them.
	su.expectExit(su.start("relay", "relay.after-claim:1"), crashedCode, "relay crash after claim")
	// 4. Consumers die: A after committing an effect but before acking it
	//    (the message comes again), B inside the handler's transaction.
	su.expectExit(su.start("consumer", "inbox.after-commit:15", envQueue+"="+qa), crashedCode, "consumer A crash after commit")
	su.expectExit(su.start("consumer", "inbox.after-claim:10", envQueue+"="+qb), crashedCode, "consumer B crash mid-transaction")

	// 5. A relay runs in this process while a producer writes more and the
	//    broker drops every connection of the vhost.
	relay := outbox.NewRelay(su.s.Pool, su.s.Name, su.f.Pub, outbox.RelayOptions{BatchSize: 25, PollInterval: 50 * time.Millisecond})
	rctx, stopRelay := context.WithCancel(ctx)
	relayDone := make(chan error, 1)
	go func() { relayDone <- relay.Run(rctx) }()
	producer := su.start("producer", "", envCount+"=100")
	time.Sleep(500 * time.Millisecond)
	if su.f.Vhost.CloseConnections(t) > 0 {
		su.faults++
	}
	su.expectExit(producer, 0, "producer during relay")

	// 6. A consumer is killed (SIGKILL) in the middle of a prefetched batch.
	before := su.count(`SELECT count(*) FROM effect WHERE consumer = $1`, qa)
	victim := su.start("consumer", "", envQueue+"="+qa, envSlowMs+"=5")
	fabrictest.Eventually(t, 60*time.Second, "consumer A progress before the kill", func() bool {
		return su.count(`SELECT count(*) FROM effect WHERE consumer = $1`, qa) >= before+20
	})
	if err := victim.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	victim.Wait()
	su.faults++

	// 7. Healthy consumers finish the job.
	for _, c := range consumers {
		in := inbox.New(su.s.Pool, su.s.Name, c.Queue, inbox.Options{})
		su.f.Run(t, c, in.Handler(effect(c.Queue, 0)), fabric.ConsumerOptions{Prefetch: 50, Concurrency: 4})
	}
	committed := su.ids(`SELECT id::text FROM request_row`)
	fabrictest.Eventually(t, 120*time.Second, "every committed event applied by both consumers and the outbox drained", func() bool {
		n, err := relay.Pending(ctx)
		return err == nil && n == 0 &&
			su.count(`SELECT count(DISTINCT event_id) FROM effect WHERE consumer = $1`, qa) == len(committed) &&
			su.count(`SELECT count(DISTINCT event_id) FROM effect WHERE consumer = $1`, qb) == len(committed)
	})
	time.Sleep(500 * time.Millisecond) // let any stray redelivery land before counting
	stopRelay()
	if err := <-relayDone; err != nil {
		t.Fatal(err)
	}

	lost, dupes := 0, su.count(`SELECT count(*) FROM (SELECT 1 FROM effect GROUP BY consumer, event_id HAVING count(*) > 1) d`)
	for _, q := range []string{qa, qb} {
		got := su.ids(`SELECT DISTINCT event_id::text FROM effect WHERE consumer = $1`, q)
		if !equal(got, committed) {
			t.Errorf("%s: effects for %d events, committed %d: sets differ", q, len(got), len(committed))
			lost += len(committed) - len(got)
		}
		if d := su.f.Depth(t, q+".dlq"); d != 0 {
			t.Errorf("%s.dlq holds %d letters", q, d)
		}
	}
	leaked := su.count(`SELECT count(*) FROM effect e JOIN rolled_back r ON r.id = e.event_id`)
	leakedRows := su.count(`SELECT count(*) FROM outbox_event o JOIN rolled_back r ON r.id = o.id`)
	rolledBack := su.count(`SELECT count(*) FROM rolled_back`)
	pending, _ := relay.Pending(ctx)
	if dupes != 0 || leaked != 0 || leakedRows != 0 || pending != 0 || lost != 0 {
		t.Errorf("duplicate effects %d, rolled-back events seen %d (outbox rows %d), outbox pending %d, lost %d: all must be 0",
			dupes, leaked, leakedRows, pending, lost)
	}
	if len(committed) < 200 || rolledBack == 0 || su.faults < 7 {
		t.Errorf("the suite did not exercise enough: committed %d, rolled back %d, faults %d", len(committed), rolledBack, su.faults)
	}
	t.Logf("crash safety: events sent %d (rolled back %d), consumers 2, faults injected %d, lost %d, duplicate effects %d, outbox pending %d",
		len(committed), rolledBack, su.faults, lost, dupes, pending)
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
