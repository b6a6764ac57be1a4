package crashsafety_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agora-platform/agora/pkg/fabric"
	"github.com/agora-platform/agora/pkg/fabric/envelope"
	"github.com/agora-platform/agora/pkg/fabric/fabrictest"
	"github.com/agora-platform/agora/pkg/fabric/inbox"
	"github.com/agora-platform/agora/pkg/fabric/internal/relay"
	"github.com/agora-platform/agora/pkg/fabric/outbox"
)

type suite struct {
	t      *testing.T
	f      *fabrictest.Fabric
	s      *fabrictest.Schema
	env    fabrictest.Env
	faults int // injected faults verified to have hit work in flight
	logDir string
	seq    int
}

// childProc is a child process and the file it reports its fault to.
type childProc struct {
	cmd    *exec.Cmd
	report string
	what   string
}

func (su *suite) start(what, role, crashAt string, extra ...string) *childProc {
	su.t.Helper()
	su.seq++
	report := filepath.Join(su.logDir, fmt.Sprintf("%02d-%s.report", su.seq, role))
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envRole+"="+role, envCrashAt+"="+crashAt, envAMQP+"="+su.f.Vhost.URL,
		envDB+"="+su.env.DatabaseURL, envSchema+"="+su.s.Name, envReport+"="+report)
	cmd.Env = append(cmd.Env, extra...)
	logf, err := os.Create(filepath.Join(su.logDir, fmt.Sprintf("%02d-%s.log", su.seq, role)))
	if err != nil {
		su.t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		su.t.Fatalf("start %s: %v", what, err)
	}
	su.t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
		logf.Close()
	})
	return &childProc{cmd: cmd, report: report, what: what}
}

// wait waits for c and returns its exit code.
func (su *suite) wait(c *childProc) int {
	su.t.Helper()
	done := make(chan error, 1)
	go func() { done <- c.cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-time.After(90 * time.Second):
		c.cmd.Process.Kill()
		<-done
		su.t.Fatalf("%s: still running after 90s (logs in %s)", c.what, su.logDir)
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err != nil {
		su.t.Fatalf("%s: %v", c.what, err)
	}
	return 0
}

// expectClean waits for c to finish its work and exit 0.
func (su *suite) expectClean(c *childProc) {
	su.t.Helper()
	if code := su.wait(c); code != 0 {
		su.t.Fatalf("%s: exit code %d, want 0 (logs in %s)", c.what, code, su.logDir)
	}
}

// expectFault waits for c to crash at point and counts the fault only if
// the child reported work in flight there and verify, run after the
// crash, finds that work in the state the fault must leave it in.
func (su *suite) expectFault(c *childProc, point string, verify func(r faultReport) error) {
	su.t.Helper()
	if code := su.wait(c); code != crashedCode {
		su.t.Fatalf("%s: exit code %d, want %d: the planned fault did not happen (logs in %s)", c.what, code, crashedCode, su.logDir)
	}
	su.verified(c, point, su.readReport(c), verify)
}

func (su *suite) verified(c *childProc, point string, r *faultReport, verify func(r faultReport) error) {
	su.t.Helper()
	switch {
	case r == nil:
		su.t.Fatalf("%s: planned fault %s not verified: the child wrote no report (logs in %s)", c.what, point, su.logDir)
	case r.Point != point:
		su.t.Fatalf("%s: planned fault %s not verified: the child reported %s", c.what, point, r.Point)
	case len(r.InFlight) == 0:
		su.t.Fatalf("%s: planned fault %s not verified: nothing was in flight there", c.what, point)
	}
	if err := verify(*r); err != nil {
		su.t.Fatalf("%s: planned fault %s not verified: %v", c.what, point, err)
	}
	su.faults++
	su.t.Logf("fault %d verified: %s at %s with %d in flight", su.faults, c.what, point, len(r.InFlight))
}

// readReport returns the child's fault report, nil if it has written
// none (or not a whole line yet).
func (su *suite) readReport(c *childProc) *faultReport {
	su.t.Helper()
	b, err := os.ReadFile(c.report)
	if errors.Is(err, os.ErrNotExist) || len(b) == 0 || b[len(b)-1] != '\n' {
		return nil
	}
	if err != nil {
		su.t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	if len(lines) != 1 {
		su.t.Fatalf("%s: %d fault reports in %s, want 1", c.what, len(lines), c.report)
	}
	r := new(faultReport)
	if err := json.Unmarshal([]byte(lines[0]), r); err != nil {
		su.t.Fatalf("%s: report %q: %v", c.what, lines[0], err)
	}
	return r
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
	if err := rows.Err(); err != nil {
		su.t.Fatal(err)
	}
	sort.Strings(out)
	return out
}

// pending returns how many outbox rows are unpublished; an error fails
// the test (it must never read as "nothing pending").
func (su *suite) pending(relay *relay.Relay) int64 {
	su.t.Helper()
	n, err := relay.Pending(context.Background())
	if err != nil {
		su.t.Fatal(err) // already says "outbox pending"
	}
	return n
}

const unpublished = `SELECT count(*) FROM outbox_event WHERE published_at IS NULL AND id = ANY($1)`

// allUnpublished: the rows a relay held when it died are still pending
// (the relay never recorded them), so another relay sends them.
func (su *suite) allUnpublished(ids []string) error {
	if n := su.count(unpublished, ids); n != len(ids) {
		return fmt.Errorf("%d of the %d claimed rows are still pending, want all", n, len(ids))
	}
	return nil
}

// idle counts the healthy consumers' handler calls, to tell when none is
// running and none has started for a while.
type idle struct {
	mu      sync.Mutex
	running int
	last    time.Time
}

func (i *idle) wrap(h fabric.Handler) fabric.Handler {
	return func(ctx context.Context, e envelope.Envelope) error {
		i.mu.Lock()
		i.running++
		i.last = time.Now()
		i.mu.Unlock()
		defer func() {
			i.mu.Lock()
			i.running--
			i.mu.Unlock()
		}()
		return h(ctx, e)
	}
}

func (i *idle) since(d time.Duration) bool {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.running == 0 && time.Since(i.last) >= d
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
	effects := func(q string, ids []string) int {
		return su.count(`SELECT count(*) FROM effect WHERE consumer = $1 AND event_id = ANY($2)`, q, ids)
	}
	published := func() int { return su.count(`SELECT count(*) FROM outbox_event WHERE published_at IS NOT NULL`) }
	const planned = 7

	// 1. A producer dies right after its 40th commit, before any relay ran.
	su.expectFault(su.start("producer crash after commit", "producer", "producer.after-commit:40", envCount+"=100"),
		"producer.after-commit", func(r faultReport) error {
			if n := su.count(`SELECT count(*) FROM request_row WHERE id = $1`, r.At); n != 1 {
				return fmt.Errorf("the reported commit %s is not in request_row", r.At)
			}
			if n := su.count(unpublished, []string{r.At}); n != 1 {
				return fmt.Errorf("the reported commit %s has no pending outbox row", r.At)
			}
			return nil
		})
	su.expectClean(su.start("producer", "producer", "", envCount+"=100"))

	// 2. A relay dies after the broker confirmed its 2nd batch but before
	//    marking it published: that batch will be sent again.
	depth, pub := su.f.Depth(t, qa), published()
	su.expectFault(su.start("relay crash after confirm", "relay", "relay.after-confirm:2"),
		"relay.after-confirm", func(r faultReport) error {
			if err := su.allUnpublished(r.InFlight); err != nil {
				return err
			}
			// On the queue but not recorded: the queue grew by what was
			// marked published plus the claimed batch.
			if grew, marked := su.f.Depth(t, qa)-depth, published()-pub; grew != marked+len(r.InFlight) {
				return fmt.Errorf("%s grew by %d with %d rows marked published, want %d more: the claimed batch was not confirmed",
					qa, grew, marked, len(r.InFlight))
			}
			return nil
		})
	// 3. A relay dies holding claimed rows, before publishing them.
	depth, pub = su.f.Depth(t, qa), published()
	su.expectFault(su.start("relay crash after claim", "relay", "relay.after-claim:1"),
		"relay.after-claim", func(r faultReport) error {
			if err := su.allUnpublished(r.InFlight); err != nil {
				return err
			}
			if grew, marked := su.f.Depth(t, qa)-depth, published()-pub; grew != 0 || marked != 0 {
				return fmt.Errorf("%s grew by %d and %d rows were marked: the relay published before the fault", qa, grew, marked)
			}
			return nil
		})
	// 4. Consumers die: A after committing an effect but before acking it
	//    (the message comes again), B inside the handler's transaction.
	//    One handler each, so the report names the event at the point.
	su.expectFault(su.start("consumer A crash after commit", "consumer", "inbox.after-commit:15", envQueue+"="+qa, envHandlers+"=1"),
		"inbox.after-commit", func(r faultReport) error {
			if r.At == "" || effects(qa, []string{r.At}) != 1 {
				return fmt.Errorf("the event at the point (%q) has no committed effect", r.At)
			}
			return nil
		})
	su.expectFault(su.start("consumer B crash mid-transaction", "consumer", "inbox.after-claim:10", envQueue+"="+qb, envHandlers+"=1"),
		"inbox.after-claim", func(r faultReport) error {
			if r.At == "" || su.count(`SELECT count(*) FROM inbox_message WHERE consumer = $1 AND event_id = $2`, qb, r.At) != 0 {
				return fmt.Errorf("the event at the point (%q) has a committed claim: no transaction was cut", r.At)
			}
			return nil
		})

	// 5. A relay runs in this process while a producer writes more and the
	//    broker drops every connection of the vhost.
	relay := relay.New(su.s.Pool, su.s.Name, su.f.Pub, relay.Options{BatchSize: 25, PollInterval: 50 * time.Millisecond})
	rctx, stopRelay := context.WithCancel(ctx)
	relayDone := make(chan error, 1)
	go func() { relayDone <- relay.Run(rctx) }()
	t.Cleanup(stopRelay)
	rows := su.count(`SELECT count(*) FROM request_row`)
	const producerCommits = 86 // 100 transactions, every seventh rolled back
	producer := su.start("producer during relay", "producer", "", envCount+"=100", envSlowMs+"=40")
	fabrictest.Eventually(t, 30*time.Second, "the producer under way", func() bool {
		return su.count(`SELECT count(*) FROM request_row`) >= rows+10
	})
	connects, pubBefore := su.f.Conn.Connects(), published()
	closed := su.f.Vhost.CloseConnections(t)
	written := su.count(`SELECT count(*) FROM request_row`) - rows
	fabrictest.Eventually(t, 20*time.Second, "the relay's connection back", func() bool { return su.f.Conn.Connects() > connects })
	fabrictest.Eventually(t, 30*time.Second, "the relay publishing again", func() bool { return published() > pubBefore })
	su.expectClean(producer)
	switch {
	case closed == 0:
		t.Fatalf("planned fault connection loss not verified: close_all_connections closed nothing")
	case written >= producerCommits:
		t.Fatalf("planned fault connection loss not verified: the producer had finished (%d commits) when the connections closed", written)
	}
	su.faults++
	t.Logf("fault %d verified: connection loss (%d connections) with the producer %d/%d commits in and the relay running", su.faults, closed, written, producerCommits)

	// 6. A consumer is killed (SIGKILL) in the middle of a prefetched batch:
	//    it hangs with its handlers inside their transactions.
	victim := su.start("consumer A killed mid-batch", "consumer", "", envQueue+"="+qa, envSlowMs+"=5", envHold+"=20")
	var held *faultReport
	fabrictest.Eventually(t, 60*time.Second, "consumer A holding a batch", func() bool {
		held = su.readReport(victim)
		return held != nil
	})
	if err := victim.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	if code := su.wait(victim); code != -1 {
		t.Fatalf("%s: exit code %d, want -1 (killed)", victim.what, code)
	}
	su.verified(victim, pointHold, held, func(r faultReport) error {
		if effects(qa, []string{r.At}) != 0 {
			return fmt.Errorf("the held event %s has a committed effect: the kill cut nothing", r.At)
		}
		return nil
	})
	if su.faults != planned {
		t.Fatalf("verified %d faults, planned %d", su.faults, planned)
	}

	// 7. Healthy consumers finish the job.
	var quiet idle
	for _, c := range consumers {
		in := inbox.New(su.s.Pool, su.s.Name, c.Queue, inbox.Options{})
		su.f.Run(t, c, quiet.wrap(in.Handler(effect(c.Queue, 0))), fabric.ConsumerOptions{Prefetch: 50, Concurrency: 4})
	}
	committed := su.ids(`SELECT id::text FROM request_row`)
	fabrictest.Eventually(t, 120*time.Second, "every committed event applied by both consumers and the outbox drained", func() bool {
		return su.pending(relay) == 0 &&
			su.count(`SELECT count(DISTINCT event_id) FROM effect WHERE consumer = $1`, qa) == len(committed) &&
			su.count(`SELECT count(DISTINCT event_id) FROM effect WHERE consumer = $1`, qb) == len(committed)
	})

	// A late duplicate would be a redelivery or a re-sent copy arriving
	// after every event had its effect. Wait until nothing is queued (retry
	// tiers included) and no handler has run for a while, then keep
	// checking for a window; a marker committed at the window's end must
	// reach both consumers, which proves the relay and both consumers ran
	// through the window.
	var queues []string
	for _, c := range consumers {
		queues = append(queues, c.Queue)
		for n := range c.Tiers() {
			queues = append(queues, c.RetryQueue(n+1))
		}
	}
	fabrictest.Eventually(t, 60*time.Second, "queues empty and consumers idle", func() bool {
		for _, q := range queues {
			if su.f.Depth(t, q) != 0 {
				return false
			}
		}
		return quiet.since(500 * time.Millisecond)
	})
	dupesQuery := `SELECT count(*) FROM (SELECT 1 FROM effect GROUP BY consumer, event_id HAVING count(*) > 1) d`
	const window = 3 * time.Second
	for start := time.Now(); time.Since(start) < window; time.Sleep(100 * time.Millisecond) {
		if n := su.count(dupesQuery); n != 0 {
			t.Fatalf("%d events have more than one effect, %s into the watch window", n, time.Since(start).Round(time.Millisecond))
		}
	}
	marker := commitMarker(t, su)
	fabrictest.Eventually(t, 30*time.Second, "the marker applied by both consumers", func() bool {
		return effects(qa, []string{marker}) == 1 && effects(qb, []string{marker}) == 1
	})
	stopRelay()
	if err := <-relayDone; err != nil {
		t.Fatal(err)
	}

	committed = su.ids(`SELECT id::text FROM request_row`)
	lost, dupes := 0, su.count(dupesQuery)
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
	pending := su.pending(relay)
	if dupes != 0 || leaked != 0 || leakedRows != 0 || pending != 0 || lost != 0 {
		t.Errorf("duplicate effects %d, rolled-back events seen %d (outbox rows %d), outbox pending %d, lost %d: all must be 0",
			dupes, leaked, leakedRows, pending, lost)
	}
	if len(committed) < 200 || rolledBack == 0 {
		t.Errorf("the suite did not exercise enough: committed %d, rolled back %d", len(committed), rolledBack)
	}
	t.Logf("crash safety: events sent %d (rolled back %d), consumers 2, faults injected and verified %d of %d, lost %d, duplicate effects %d (watched %s after the queues emptied), outbox pending %d",
		len(committed), rolledBack, su.faults, planned, lost, dupes, window, pending)
}

// commitMarker commits one more business transaction, as the producer
// does, and returns its event id.
func commitMarker(t *testing.T, su *suite) string {
	t.Helper()
	ctx := context.Background()
	e, err := envelope.New("request.submitted.v1", "org-crash", "crash-marker", map[string]any{
		"requestId": "0192d3a0-0000-7000-8000-000000000001", "protocol": "AGR-2026-000001", "serviceId": "s",
		"formId": "f", "formVersion": 1, "channel": "web", "citizenId": "c", "submittedAt": "2026-11-30T10:00:00Z"})
	if err != nil {
		t.Fatal(err)
	}
	err = pgx.BeginFunc(ctx, su.s.Pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO request_row (id) VALUES ($1)`, e.ID); err != nil {
			return err
		}
		return outbox.New(su.f.Reg).Enqueue(ctx, tx, outbox.Item{Aggregate: outbox.Aggregate{Type: "request", ID: e.ID}, Envelope: e})
	})
	if err != nil {
		t.Fatalf("commit the marker: %v", err)
	}
	return e.ID
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
