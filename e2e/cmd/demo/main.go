// Command demo drives the platform started by `make up`: it submits a
// citizen's request (or, with -documents, uploads a document and asks the
// chat about it; with -reactive, runs the reactive fabric's two slices)
// and prints, step by step, what each service did.
package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/agora-platform/agora/pkg/fabric/auth"
	"github.com/agora-platform/agora/services/document-worker/doctest"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args, os.Getenv, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

type demo struct {
	out       io.Writer
	base      map[string]string
	citizen   string
	attendant string
	start     time.Time
	client    *http.Client
}

func run(ctx context.Context, args []string, getenv func(string) string, out io.Writer) error {
	fs := flag.NewFlagSet(args[0], flag.ContinueOnError)
	documents := fs.Bool("documents", false, "upload a document and ask the chat about it")
	reactive := fs.Bool("reactive", false, "the reactive fabric: a resumed step and a mass reaction behind the blast-radius gate")
	sources := fs.String("gateway-sources", ".data/gateway/sources.json", "the gateway's sources (make up writes them)")
	keysDir := fs.String("keys-dir", ".data/jwt", "dev JWT keys (make up creates them)")
	tenantID := fs.String("tenant", "org-demo", "tenant")
	timeout := fs.Duration("timeout", 90*time.Second, "how long to wait for the services")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	host := getenv("AGORA_HOST")
	if host == "" {
		host = "127.0.0.1"
	}
	d := &demo{out: out, start: time.Now(), client: &http.Client{Timeout: 10 * time.Second}, base: map[string]string{}}
	for svc, port := range map[string]int{"request": 8081, "workflow": 8082, "communication": 8083, "document-worker": 8084,
		"ai-builder": 8085, "datalake-ingestion": 8086, "analytics": 8087} {
		d.base[svc] = fmt.Sprintf("http://%s:%d", host, port)
	}
	if _, err := d.call(ctx, "GET", "request", "/healthz", "", nil, nil); err != nil {
		return fmt.Errorf("the platform is not running (start it with `make up`): %w", err)
	}
	keys, err := auth.LoadOrCreateDevKeys(*keysDir)
	if err != nil {
		return err
	}
	citizenID := "citizen-" + randHex(3)
	if d.citizen, err = keys.Mint(auth.Claims{Subject: citizenID, TenantID: *tenantID, Roles: []string{auth.RoleCitizen}}, time.Hour); err != nil {
		return err
	}
	if d.attendant, err = keys.Mint(auth.Claims{Subject: "attendant-demo", TenantID: *tenantID, Roles: []string{auth.RoleAttendant}}, time.Hour); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	d.say("tenant %s, citizen %s (tokens minted with the dev key in %s)", *tenantID, citizenID, *keysDir)
	if *documents {
		return d.documents(ctx)
	}
	if *reactive {
		operator, err := keys.Mint(auth.Claims{Subject: "operator-demo", TenantID: *tenantID, Roles: []string{auth.RoleOperator}}, time.Hour)
		if err != nil {
			return err
		}
		return d.reactive(ctx, operator, *sources)
	}
	return d.request(ctx, citizenID)
}

func (d *demo) request(ctx context.Context, citizenID string) error {
	contact := fmt.Sprintf(`{"email":"%s@example.org","preferredChannel":"email"}`, citizenID)
	if _, err := d.call(ctx, "PUT", "communication", "/v1/contacts/"+citizenID, d.citizen, strings.NewReader(contact), nil); err != nil {
		return fmt.Errorf("register contact: %w", err)
	}
	d.say("communication: contact address registered (events carry identifiers only; the address lives in communication's own table)")

	body := `{"serviceId":"alvara-funcionamento","formId":"alvara-form","formVersion":1,"channel":"web","fields":{"cnae":"1091-1/02","area_m2":80}}`
	key := "demo-" + randHex(6)
	var receipt map[string]any
	hdr := map[string]string{"Idempotency-Key": key, "Content-Type": "application/json"}
	if _, err := d.callH(ctx, "POST", "request", "/v1/requests", d.citizen, strings.NewReader(body), hdr, &receipt); err != nil {
		return fmt.Errorf("submit: %w", err)
	}
	id, _ := receipt["id"].(string)
	d.say("request: submitted %s, protocol %v — request row and outbox row committed in one transaction; the relay publishes request.submitted.v1 with confirms", id, receipt["protocol"])
	var again map[string]any
	if _, err := d.callH(ctx, "POST", "request", "/v1/requests", d.citizen, strings.NewReader(body), hdr, &again); err != nil {
		return fmt.Errorf("resubmit: %w", err)
	}
	d.say("request: the same Idempotency-Key and body again → the same request %v (no second event)", again["id"])

	d.wait(ctx, "workflow: process instance started", func() (string, bool) {
		var procs any
		if _, err := d.call(ctx, "GET", "workflow", "/v1/processes?requestId="+id, d.attendant, nil, &procs); err != nil {
			return err.Error(), false
		}
		return compact(procs), nonEmpty(procs)
	})
	d.wait(ctx, "communication: confirmation sent to the citizen by e-mail (see .data/mail)", func() (string, bool) {
		var n any
		if _, err := d.call(ctx, "GET", "communication", "/v1/notifications?requestId="+id, d.citizen, nil, &n); err != nil {
			return err.Error(), false
		}
		s := compact(n)
		return s, strings.Contains(s, `"sent"`)
	})
	today := time.Now().UTC().Format("2006-01-02")
	d.wait(ctx, "analytics: projection counts the request", func() (string, bool) {
		var a any
		if _, err := d.call(ctx, "GET", "analytics", "/v1/analytics/requests?from="+today+"&to="+today, d.attendant, nil, &a); err != nil {
			return err.Error(), false
		}
		s := compact(a)
		return s, strings.Contains(s, "alvara-funcionamento")
	})
	var req map[string]any
	d.wait(ctx, "request: status kept current from workflow events", func() (string, bool) {
		if _, err := d.call(ctx, "GET", "request", "/v1/requests/"+id, d.citizen, nil, &req); err != nil {
			return err.Error(), false
		}
		return fmt.Sprintf("status %v", req["status"]), req["status"] == "in_progress"
	})
	// The submitted event is the root of the request's story: its id is the
	// request's correlation id.
	if eventID, _ := req["correlationId"].(string); eventID != "" {
		d.wait(ctx, "datalake-ingestion: event written as Parquet to the tenant's partition, lineage recorded", func() (string, bool) {
			var l any
			if _, err := d.call(ctx, "GET", "datalake-ingestion", "/v1/lineage/"+eventID, d.attendant, nil, &l); err != nil {
				return err.Error(), false
			}
			return compact(l), true
		})
	}
	d.say("done in %s", time.Since(d.start).Round(time.Millisecond))
	return nil
}

func (d *demo) documents(ctx context.Context) error {
	body := `{"serviceId":"alvara-funcionamento","formId":"alvara-form","formVersion":1,"channel":"web","fields":{}}`
	var receipt map[string]any
	if _, err := d.callH(ctx, "POST", "request", "/v1/requests", d.citizen, strings.NewReader(body),
		map[string]string{"Content-Type": "application/json"}, &receipt); err != nil {
		return fmt.Errorf("submit: %w", err)
	}
	id, _ := receipt["id"].(string)
	d.say("request: submitted %s", id)
	png, err := doctest.PNG(doctest.Lines, 36)
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	fw, err := mw.CreateFormFile("file", "alvara.png")
	if err != nil {
		return err
	}
	fw.Write(png)
	mw.Close()
	var doc map[string]any
	if _, err := d.callH(ctx, "POST", "request", "/v1/requests/"+id+"/documents", d.citizen, &buf,
		map[string]string{"Content-Type": mw.FormDataContentType()}, &doc); err != nil {
		return fmt.Errorf("upload: %w", err)
	}
	docID, _ := doc["id"].(string)
	d.say("request: stored %v bytes in MinIO (%v) and enqueued document.uploaded.v1 — a reference, never the bytes", doc["size"], doc["objectKey"])
	d.say("the image says: %q", strings.Join(doctest.Lines, " "))
	question := "Em que rua fica a padaria do alvará de funcionamento?"
	var answer map[string]any
	d.wait(ctx, "document-worker OCR → ai.knowledge.index.v1 → ai-builder indexed it; the chat cites it", func() (string, bool) {
		q, _ := json.Marshal(map[string]any{"question": question, "topK": 3})
		if _, err := d.callH(ctx, "POST", "ai-builder", "/v1/chat", d.attendant, bytes.NewReader(q),
			map[string]string{"Content-Type": "application/json"}, &answer); err != nil {
			return err.Error(), false
		}
		return "", strings.Contains(compact(answer["citations"]), docID)
	})
	d.say("question: %s", question)
	d.say("answer:   %v", answer["answer"])
	d.say("citations: %s", compact(answer["citations"]))
	d.say("done in %s", time.Since(d.start).Round(time.Millisecond))
	return nil
}

func (d *demo) say(format string, a ...any) {
	fmt.Fprintf(d.out, "[%6.2fs] %s\n", time.Since(d.start).Seconds(), fmt.Sprintf(format, a...))
}

// wait polls check until it reports done, then prints what it saw; it
// reports whether it saw it before ctx ended.
func (d *demo) wait(ctx context.Context, what string, check func() (string, bool)) bool {
	last := ""
	for {
		seen, done := check()
		if done {
			d.say("%s\n          %s", what, truncate(seen, 600))
			return true
		}
		last = seen
		select {
		case <-ctx.Done():
			d.say("NOT SEEN: %s (last answer: %s)", what, truncate(last, 300))
			return false
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (d *demo) call(ctx context.Context, method, svc, path, token string, body io.Reader, out any) (int, error) {
	return d.callH(ctx, method, svc, path, token, body, map[string]string{"Content-Type": "application/json"}, out)
}

func (d *demo) callH(ctx context.Context, method, svc, path, token string, body io.Reader, hdr map[string]string, out any) (int, error) {
	req, err := http.NewRequestWithContext(ctx, method, d.base[svc]+path, body)
	if err != nil {
		return 0, err
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := d.client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode >= 300 {
		return resp.StatusCode, fmt.Errorf("%s %s%s: %s: %s", method, svc, path, resp.Status, truncate(string(data), 300))
	}
	if out != nil && len(data) > 0 {
		if err := json.Unmarshal(data, out); err != nil {
			return resp.StatusCode, fmt.Errorf("%s %s: %w", method, path, err)
		}
	}
	return resp.StatusCode, nil
}

func compact(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

func nonEmpty(v any) bool {
	switch x := v.(type) {
	case []any:
		return len(x) > 0
	case map[string]any:
		for _, k := range []string{"processes", "items", "data"} {
			if arr, ok := x[k].([]any); ok {
				return len(arr) > 0
			}
		}
		return len(x) > 0
	}
	return false
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
