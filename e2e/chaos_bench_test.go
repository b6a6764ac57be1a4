package e2e

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/mail"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/agora-platform/agora/e2e/harness"
	"github.com/agora-platform/agora/pkg/fabric/broker"
)

// BenchmarkChaos submits BENCH_REQUESTS requests (default 2,000) over REST
// at BENCH_RATE a second (default 30) to the five services of the request
// flow, each a process of its own, and meanwhile, at spaced points of the
// load (the share of the submissions sent), hits the platform with six
// faults one after another:
//
//   - 10 %: communication is SIGKILLed and started again, right after the
//     relay accepted a mail (the tee below sees the acceptance): between
//     the SMTP conversation and the commit, where a crash resends;
//   - 25 %: the broker is stopped (`rabbitmqctl stop_app`) for BENCH_OUTAGE
//     (default 5 s, at most 10 s: the broker is the machine's) and started;
//   - 45 %: communication is SIGKILLed again;
//   - 60 %: every connection of the platform's vhost is closed
//     (`rabbitmqctl close_all_connections --vhost … chaos`);
//   - 75 %: workflow is SIGKILLed and started again;
//   - 90 %: communication is SIGKILLed a third time.
//
// Each fault waits until the platform recovered from the one before:
// every service answers /readyz with 200 and the vhost's queues have their
// consumers back. Then every accepted request must reach all four
// consumers (workflow, communication, analytics, the data lake): one lost
// fails the benchmark.
//
// Communication mails through a tee to two SMTP sinks: one keeps every
// message it accepts, as a relay without deduplication does; the other
// runs with -dedupe, keeping one message per Message-ID, as a provider
// that honours the idempotency key (the notification id) does. Both see
// the same SMTP conversations byte for byte. The benchmark reports the
// notices the first sink got more than once (the same Message-ID twice:
// a resend), which fault each resend followed, and what the second
// recorded twice (it must be nothing). Notices are coalesced over the
// service's default window, so a request normally gets one mail
// (received and in progress together), or two when the move to in
// progress comes after the window: a duplicate is a Message-ID received
// twice, never a second mail of a request.
//
// The broker restart disturbs everything on the machine's broker: run it
// alone, by hand or with `make bench`; it is no part of `make test`.
//
//	go test -run '^$' -bench Chaos -benchtime 1x -timeout 30m ./e2e/
func BenchmarkChaos(b *testing.B) {
	requests := benchInt(b, "BENCH_REQUESTS", 2000)
	rate := benchInt(b, "BENCH_RATE", 30)
	outage := 5 * time.Second
	if v := os.Getenv("BENCH_OUTAGE"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 || d > 10*time.Second {
			b.Fatalf("BENCH_OUTAGE=%q: want a duration up to 10s (the broker is shared)", v)
		}
		outage = d
	}
	ctl := strings.Fields(cmp.Or(os.Getenv("RABBITMQCTL"), "rabbitmqctl"))
	c := startChaosPlatform(b)
	h := c.h
	services := []string{"request", "workflow", "communication", "analytics", "datalake-ingestion"}

	// The load: exactly `requests` submissions at rate, each in its own
	// goroutine; the faults are placed by how many were sent.
	var (
		mu       sync.Mutex
		accepted []string
		refused  int
		sent     atomic.Int64
		wg       sync.WaitGroup
	)
	began := time.Now()
	wg.Go(func() {
		tick := time.NewTicker(time.Second / time.Duration(rate))
		defer tick.Stop()
		for n := range requests {
			<-tick.C
			sent.Add(1)
			wg.Go(func() {
				id, err := c.submit(n)
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					refused++
					return
				}
				accepted = append(accepted, id)
			})
		}
	})

	// The faults, each at its share of the load and after the platform
	// recovered from the one before.
	type fault struct {
		name      string
		at        time.Time
		recovered time.Duration // from the end of the fault to ready again
	}
	var faults []fault
	waitSent := func(share float64) {
		for sent.Load() < int64(share*float64(requests)) {
			time.Sleep(20 * time.Millisecond) // pacing: the load sets the moment
		}
	}
	waitSent(0.05)
	baseline := c.recovered(b, services, 0, time.Time{}) // the consumers of the steady state
	missed := 0                                          // communication crashes that found no mail to strike after
	crash := func(share float64, service string) {
		waitSent(share)
		// Communication dies right after the relay accepted a mail, the
		// moment a crash can resend: between the SMTP conversation and
		// the commit that records it. Elsewhere it resends nothing.
		if service == "communication" && !c.tee.nextAcceptance(10*time.Second) {
			missed++
		}
		at := time.Now()
		h.Kill(service)
		h.Start(b, service, c.env[service])
		faults = append(faults, fault{"SIGKILL " + service, at, c.since(b, services, baseline, at)})
	}
	ctlRun := func(args ...string) {
		cmd := exec.Command(ctl[0], append(ctl[1:], args...)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("%s %v: %v: %s", ctl[0], args, err, out)
		}
	}

	// Communication is killed three times, so that the figure is not one
	// roll of the dice: a kill resends only what it caught in flight.
	crash(0.1, "communication")

	waitSent(0.25)
	at := time.Now()
	ctlRun("stop_app")
	time.Sleep(outage) // the outage's length is the fault
	ctlRun("start_app")
	back := time.Now()
	ctlRun("await_startup")
	faults = append(faults, fault{fmt.Sprintf("broker stopped %v", outage), at, c.since(b, services, baseline, back)})

	crash(0.45, "communication")

	waitSent(0.6)
	// Recovery counts from the moment the connections went, which the
	// probe's own connection in the vhost tells, not from the command's
	// start: rabbitmqctl takes seconds to boot on a loaded machine.
	closed := c.closeSignal(b)
	// Only the benchmark's vhost: other tests on the machine keep theirs.
	ctlRun("close_all_connections", "--vhost", h.Vhost.Name, "chaos")
	at = <-closed
	faults = append(faults, fault{"vhost's connections closed", at, c.since(b, services, baseline, at)})

	crash(0.75, "workflow")
	crash(0.9, "communication")

	wg.Wait()
	loadTime := time.Since(began)
	mu.Lock()
	ids := slices.Clone(accepted)
	mu.Unlock()

	// Nothing lost: every accepted request reaches all four consumers,
	// and communication has handled every notice the request service
	// announced and sent every one it held.
	ctx := context.Background()
	const progress = `SELECT
		(SELECT count(*) FROM workflow.process_instance WHERE request_id = ANY($1::uuid[])),
		(SELECT count(DISTINCT request_id) FROM communication.notification WHERE status = 'sent' AND request_id = ANY($1::uuid[])),
		(SELECT count(*) FROM analytics.inbox_message WHERE event_type = 'request.submitted.v1'),
		(SELECT count(*) FROM datalake_ingestion.lineage WHERE event_type = 'request.submitted.v1'),
		(SELECT count(*) FROM request.outbox_event WHERE event_type IN ('request.submitted.v1', 'request.status-changed.v1'))
			- (SELECT count(*) FROM communication.inbox_message WHERE event_type IN ('request.submitted.v1', 'request.status-changed.v1')),
		(SELECT count(*) FROM communication.notification WHERE status IN ('pending', 'held'))`
	var wf, cm, an, dl, unhandled, waiting int
	for drain := time.Now().Add(5 * time.Minute); ; {
		if err := c.db.QueryRow(ctx, progress, ids).Scan(&wf, &cm, &an, &dl, &unhandled, &waiting); err != nil {
			b.Fatalf("progress query: %v", err)
		}
		if min(wf, cm, an, dl) >= len(ids) && unhandled <= 0 && waiting == 0 {
			break
		}
		if time.Now().After(drain) {
			b.Fatalf("lost: 5 min after the load, of %d accepted requests workflow has %d, communication %d, analytics %d, the data lake %d; "+
				"communication has %d notices to handle and %d pending or held", len(ids), wf, cm, an, dl, unhandled, waiting)
		}
		time.Sleep(250 * time.Millisecond)
	}
	drained := time.Since(began) - loadTime

	// The mails: every notification communication recorded as sent must
	// be in the plain sink; the plain sink's repeats are the resends.
	plain, err := readSink(c.plainDir)
	if err != nil {
		b.Fatalf("plain sink: %v", err)
	}
	sentIDs := map[string]bool{}
	rows, err := c.db.Query(ctx, `SELECT id::text FROM communication.notification WHERE status = 'sent'`)
	if err != nil {
		b.Fatalf("sent notifications: %v", err)
	}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			b.Fatalf("sent notifications: %v", err)
		}
		sentIDs[id] = true
	}
	if err := rows.Err(); err != nil {
		b.Fatalf("sent notifications: %v", err)
	}
	var missing, unrecorded []string
	for id := range sentIDs {
		if len(plain[id]) == 0 {
			missing = append(missing, id)
		}
	}
	if len(missing) > 0 {
		b.Fatalf("lost mails: %d notifications recorded sent are not in the sink, e.g. %v", len(missing), missing[:min(5, len(missing))])
	}
	// A Message-ID the database does not record as sent is a notice
	// mailed under a key of its own (coalesced and yet sent, say): a
	// provider that honours keys records it besides the notice's own.
	for id := range plain {
		if !sentIDs[id] {
			unrecorded = append(unrecorded, id)
		}
	}

	// Resends, by the fault that came between their copies; a few are
	// printed with their times and what the service logged, for the
	// post-mortem.
	dupByFault := make([]int, len(faults))
	var shown []string
	duplicated, extra, mails := 0, 0, 0
	var gaps []time.Duration
	for id, copies := range plain {
		mails += len(copies)
		if len(copies) < 2 {
			continue
		}
		duplicated++
		extra += len(copies) - 1
		slices.SortFunc(copies, func(x, y time.Time) int { return x.Compare(y) })
		gaps = append(gaps, copies[1].Sub(copies[0]))
		// The fault to blame is the first that struck between the two
		// copies: a crash of communication comes right after the first.
		blame := "no fault between the copies"
		for i := range faults {
			if faults[i].at.After(copies[0]) && !faults[i].at.After(copies[1]) {
				dupByFault[i]++
				blame = faults[i].name + " at " + faults[i].at.Format("15:04:05.000")
				break
			}
		}
		if len(shown) < 20 {
			shown = append(shown, fmt.Sprintf("  %s: copies at %s, %s (%s)%s", id, copies[0].Format("15:04:05.000"),
				copies[1].Format("15:04:05.000"), blame, logBetween(filepath.Join(h.LogsDir, "communication.log"), id, copies[0], copies[1])))
		}
	}

	// The deduplicating sink: it has seen the same conversations, so
	// once it holds every Message-ID the plain one got, it is done.
	var deduped map[string][]time.Time
	for deadline := time.Now().Add(time.Minute); ; {
		if deduped, err = readSink(c.dedupeDir); err != nil {
			b.Fatalf("deduplicating sink: %v", err)
		}
		if len(deduped) >= len(plain) {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("deduplicating sink: %d of %d Message-IDs after a minute (tee errors: %d)", len(deduped), len(plain), c.tee.errors.Load())
		}
		time.Sleep(100 * time.Millisecond)
	}
	recordedTwice := 0
	for _, copies := range deduped {
		recordedTwice += len(copies) - 1
	}

	var recovery []string
	perCrash := 0 // the most notices one crash of communication had sent again
	for i, f := range faults {
		recovery = append(recovery, fmt.Sprintf("%s %.1f s (resends after it: %d)", f.name, f.recovered.Seconds(), dupByFault[i]))
		b.ReportMetric(f.recovered.Seconds(), fmt.Sprintf("s-recover-%d", i+1))
		if f.name == "SIGKILL communication" {
			perCrash = max(perCrash, dupByFault[i])
		}
	}
	b.ReportMetric(float64(perCrash), "max-resends-per-crash")
	b.ReportMetric(float64(len(ids)), "accepted")
	b.ReportMetric(0, "lost")
	b.ReportMetric(float64(duplicated), "dup-no-dedupe")
	b.ReportMetric(float64(recordedTwice), "dup-dedupe")
	b.ReportMetric(float64(len(unrecorded)), "unrecorded-keys")
	// Printed, not logged: the testing package cuts a benchmark's log to
	// ten lines.
	fmt.Printf("chaos: %d requests at %d/s (load and faults %.0f s, drained %.0f s later): %d accepted, %d refused, 0 lost; %d mails of %d notices; "+
		"without dedupe %d notices received twice or more (%d extra copies, repeat after %v); with dedupe %d recorded twice; "+
		"%d Message-IDs not recorded as sent; recovery: %s; crashes of communication with no mail accepted within 10 s before: %d; tee errors %d\n",
		requests, rate, loadTime.Seconds(), drained.Seconds(), len(ids), refused, mails, len(plain),
		duplicated, extra, roundAll(gaps), recordedTwice, len(unrecorded), strings.Join(recovery, "; "), missed, c.tee.errors.Load())
	if len(shown) > 0 {
		fmt.Printf("resends:\n%s\n", strings.Join(shown, "\n"))
	}
	if recordedTwice > 0 {
		b.Fatalf("the deduplicating sink recorded %d messages twice", recordedTwice)
	}
}

// logBetween returns, indented, the lines of a service's JSON log that
// name id or are warnings and errors logged from a little before first to
// a little after second: what the service said around a resend.
func logBetween(path, id string, first, second time.Time) string {
	f, err := os.Open(path)
	if err != nil {
		return "\n    (log: " + err.Error() + ")"
	}
	defer f.Close()
	var out strings.Builder
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for lines := 0; sc.Scan() && lines < 12; {
		var e struct {
			Time  time.Time
			Level string
		}
		if json.Unmarshal(sc.Bytes(), &e) != nil {
			continue
		}
		near := !e.Time.Before(first.Add(-2*time.Second)) && !e.Time.After(second.Add(time.Second))
		if strings.Contains(sc.Text(), id) || near && (e.Level == "WARN" || e.Level == "ERROR") {
			out.WriteString("\n    " + sc.Text())
			lines++
		}
	}
	return out.String()
}

func roundAll(ds []time.Duration) []time.Duration {
	out := make([]time.Duration, len(ds))
	for i, d := range ds {
		out[i] = d.Round(100 * time.Millisecond)
	}
	slices.Sort(out)
	return out
}

// benchInt reads a benchmark's positive whole-number knob name from the
// environment, def when unset; anything else fails the benchmark.
func benchInt(b *testing.B, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		b.Fatalf("%s=%q: want a positive number", name, v)
	}
	return n
}

type chaosPlatform struct {
	h                   *harness.Harness
	db                  *pgxpool.Pool
	token               string
	env                 map[string]harness.Env // each service's settings, to start it again alike
	plainDir, dedupeDir string
	tee                 *smtpTee
	client              *http.Client
	// probe counts consumers live, through passive declares: the
	// management API's counts lag by the broker's statistics interval
	// (10 s as make infra sets it), which read as a slow recovery.
	probe *broker.Conn
}

func startChaosPlatform(b *testing.B) *chaosPlatform {
	h := harness.New(b, os.Getenv)
	h.RequireProcesses(b)
	c := &chaosPlatform{h: h, client: &http.Client{Timeout: 30 * time.Second}, probe: h.Vhost.Dial(b)}
	c.plainDir, c.dedupeDir = benchMailDir(b), benchMailDir(b)
	c.tee = startSMTPTee(b, startSink(b, c.plainDir), startSink(b, c.dedupeDir, "-dedupe"))
	noTraces := func(env harness.Env) harness.Env {
		env["OTEL_TRACES_FILE"] = "" // as in production without a collector: spans cost the box
		return env
	}
	c.env = map[string]harness.Env{
		// One tenant offers the whole load: the figure is the platform's,
		// not the per-tenant submission limit's.
		"request":  noTraces(harness.Env{"SUBMIT_RATE_PER_TENANT": "0"}),
		"workflow": noTraces(harness.Env{}),
		// The default coalescing window: mails go out as in production,
		// through the dispatcher of held notices.
		"communication":      noTraces(harness.Env{"SMTP_ADDR": c.tee.addr}),
		"analytics":          noTraces(harness.Env{}),
		"datalake-ingestion": noTraces(harness.Env{"DATALAKE_BATCH_AGE": "250ms"}),
	}
	for _, s := range []string{"request", "workflow", "communication", "analytics", "datalake-ingestion"} {
		h.Start(b, s, c.env[s])
	}
	tenantID, citizen := "org-chaos", "citizen-chaos"
	c.token = h.Token(tenantID, citizen, "citizen")
	put, _ := http.NewRequest(http.MethodPut, h.URL("communication")+"/v1/contacts/"+citizen,
		bytes.NewBufferString(`{"email":"chaos@example.org","preferredChannel":"email"}`))
	put.Header.Set("Authorization", "Bearer "+c.token)
	put.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(put)
	if err != nil {
		b.Fatalf("register contact: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode >= 300 {
		b.Fatalf("register contact: %s", resp.Status)
	}
	db, err := pgxpool.New(context.Background(), h.DatabaseURL)
	if err != nil {
		b.Fatalf("database: %v", err)
	}
	b.Cleanup(db.Close)
	c.db = db
	return c
}

// submit posts request n and returns its id; an error is a refusal (the
// client saw it: not a loss).
func (c *chaosPlatform) submit(n int) (string, error) { return submitBench(c.client, c.h, c.token, n) }

// submitBench posts the benchmarks' request n to the harness's request
// service with token and returns its id; an error is a refusal.
func submitBench(client *http.Client, h *harness.Harness, token string, n int) (string, error) {
	body := fmt.Sprintf(`{"serviceId":"bench","formId":"f","formVersion":1,"channel":"web","fields":{"n":%d}}`, n)
	req, _ := http.NewRequest(http.MethodPost, h.URL("request")+"/v1/requests", bytes.NewBufferString(body))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return "", fmt.Errorf("submit %d: %w", n, err)
	}
	defer resp.Body.Close()
	var receipt struct{ ID string }
	if resp.StatusCode != http.StatusCreated {
		return "", fmt.Errorf("submit %d: %s", n, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(&receipt); err != nil || receipt.ID == "" {
		return "", fmt.Errorf("submit %d: receipt: %v", n, err)
	}
	return receipt.ID, nil
}

// since waits until the platform recovered (recovered) and returns the
// time from `from`.
func (c *chaosPlatform) since(b *testing.B, services []string, consumers int, from time.Time) time.Duration {
	c.recovered(b, services, consumers, from)
	return time.Since(from)
}

// recovered waits until every service answers /readyz with 200 and the
// vhost's queues have at least consumers consumers, and returns how many
// they have. Two minutes without fail the benchmark.
func (c *chaosPlatform) recovered(b *testing.B, services []string, consumers int, from time.Time) int {
	probe := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(2 * time.Minute)
	var last string
	for {
		ready := 0
		for _, s := range services {
			resp, err := probe.Get(c.h.URL(s) + "/readyz")
			if err != nil {
				last = fmt.Sprintf("%s: %v", s, err)
				continue
			}
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				ready++
			} else {
				last = fmt.Sprintf("%s: /readyz %s", s, resp.Status)
			}
		}
		if ready == len(services) {
			n, err := c.liveConsumers()
			if err == nil {
				if n >= consumers && n > 0 {
					return n
				}
				last = fmt.Sprintf("%d of %d consumers", n, consumers)
			} else {
				last = err.Error()
			}
		}
		if time.Now().After(deadline) {
			b.Fatalf("not recovered 2 min after %s: %s", from.Format(time.TimeOnly), last)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// closeSignal yields the time the probe's connection closes.
func (c *chaosPlatform) closeSignal(b *testing.B) <-chan time.Time {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := c.probe.Connection(ctx)
	if err != nil {
		b.Fatalf("probe connection: %v", err)
	}
	notify := conn.NotifyClose(make(chan *amqp.Error, 1))
	at := make(chan time.Time, 1)
	go func() {
		<-notify
		at <- time.Now()
	}()
	return at
}

// liveConsumers sums the consumers of the vhost's queues as the broker
// counts them now (queue.declare-ok), not as its last statistics said.
func (c *chaosPlatform) liveConsumers() (int, error) {
	var qs []struct{ Name string }
	if err := c.h.Vhost.Mgmt(http.MethodGet, "/api/queues/"+url.PathEscape(c.h.Vhost.Name)+"?columns=name", nil, &qs); err != nil {
		return 0, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	ch, err := c.probe.Channel(ctx)
	if err != nil {
		return 0, err
	}
	defer ch.Close()
	n := 0
	for _, q := range qs {
		d, err := ch.QueueDeclarePassive(q.Name, true, false, false, false, nil)
		if err != nil {
			return 0, fmt.Errorf("queue %s: %w", q.Name, err)
		}
		n += d.Consumers
	}
	return n, nil
}

// readSink returns, per Message-ID (the notification id, without <…@…>),
// when the sink wrote each copy (from the file name, <unix ns>-<seq>.eml).
func readSink(dir string) (map[string][]time.Time, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.eml"))
	if err != nil {
		return nil, err
	}
	out := map[string][]time.Time{}
	for _, f := range files {
		ns, _, _ := strings.Cut(filepath.Base(f), "-")
		at, err := strconv.ParseInt(ns, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%s: not <unix ns>-<seq>.eml", f)
		}
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		msg, err := mail.ReadMessage(bytes.NewReader(data))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		id := strings.TrimSuffix(strings.TrimPrefix(msg.Header.Get("Message-ID"), "<"), ">")
		id, _, _ = strings.Cut(id, "@")
		if id == "" {
			return nil, fmt.Errorf("%s: no Message-ID", f)
		}
		out[id] = append(out[id], time.Unix(0, at))
	}
	return out, nil
}

// startSink builds and runs communication's smtpsink writing to dir with
// extra flags, and returns its address; it stops at cleanup.
func startSink(b *testing.B, dir string, flags ...string) string {
	root, err := harness.RepoRoot()
	if err != nil {
		b.Fatal(err)
	}
	bin := filepath.Join(b.TempDir(), "smtpsink")
	build := exec.Command("go", "build", "-o", bin, "./services/communication/cmd/smtpsink")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		b.Fatalf("build smtpsink: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, append([]string{"-addr", "127.0.0.1:0", "-dir", dir}, flags...)...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatalf("start smtpsink: %v", err)
	}
	b.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		_ = cmd.Wait()
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	addr, ok := strings.CutPrefix(strings.TrimSpace(line), "listening on ")
	if err != nil || !ok {
		b.Fatalf("smtpsink did not start: %q %v", line, err)
	}
	return addr
}

// smtpTee relays each SMTP conversation to a primary sink, whose answers
// the client gets, and copies what the client says to a second sink, whose
// answers are dropped. Both sinks accept everything, so they see the same
// conversations: a message cut off by a crash is cut off at the same byte
// in both, and a message the client completed reaches both.
type smtpTee struct {
	addr     string
	errors   atomic.Int64  // failed writes to the second sink
	accepted chan struct{} // a message the primary accepted, for whoever waits
}

func startSMTPTee(b *testing.B, primary, copyTo string) *smtpTee {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatalf("smtp tee: %v", err)
	}
	t := &smtpTee{addr: ln.Addr().String(), accepted: make(chan struct{}, 1)}
	var (
		mu    sync.Mutex
		conns []net.Conn
	)
	// Registered after the sinks', so it runs before they stop: the
	// conversations communication keeps open would hold their shutdown.
	b.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return // closed at cleanup
			}
			mu.Lock()
			conns = append(conns, conn)
			mu.Unlock()
			go t.relay(conn, primary, copyTo)
		}
	}()
	return t
}

func (t *smtpTee) relay(client net.Conn, primary, copyTo string) {
	defer client.Close()
	p, err := net.Dial("tcp", primary)
	if err != nil {
		return
	}
	defer p.Close()
	c, err := net.Dial("tcp", copyTo)
	if err != nil {
		t.errors.Add(1)
		return
	}
	defer c.Close()
	// SMTP answers a message's end of data (CRLF . CRLF) with the relay's
	// verdict, and the client sends nothing until it has it: the primary's
	// first answer after that marker is the acceptance.
	var ended atomic.Bool
	go func() {
		defer client.Close()
		buf := make([]byte, 4<<10)
		for {
			n, err := p.Read(buf)
			if n > 0 {
				if _, werr := client.Write(buf[:n]); werr != nil {
					return
				}
				if ended.Swap(false) && buf[0] == '2' {
					select {
					case t.accepted <- struct{}{}:
					default: // nobody waiting
					}
				}
			}
			if err != nil {
				return
			}
		}
	}()
	go func() { _, _ = io.Copy(io.Discard, c) }()
	buf := make([]byte, 32<<10)
	var tail []byte // the last bytes seen, for a marker across reads
	for {
		n, err := client.Read(buf)
		if n > 0 {
			tail = append(tail, buf[:n]...)
			if bytes.HasSuffix(tail, []byte("\r\n.\r\n")) {
				ended.Store(true)
			}
			tail = tail[max(0, len(tail)-5):]
			if _, werr := p.Write(buf[:n]); werr != nil {
				return
			}
			if _, werr := c.Write(buf[:n]); werr != nil {
				t.errors.Add(1)
				return
			}
		}
		if err != nil {
			return // the end, or a crashed client: both sinks see the conversation end here
		}
	}
}

// nextAcceptance waits up to timeout for the primary sink to accept a
// message, and reports whether it did.
func (t *smtpTee) nextAcceptance(timeout time.Duration) bool {
	select {
	case <-t.accepted: // an earlier one nobody took
	default:
	}
	select {
	case <-t.accepted:
		return true
	case <-time.After(timeout):
		return false
	}
}
