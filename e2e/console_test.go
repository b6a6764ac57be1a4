package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/agora-platform/agora/e2e/harness"
	"github.com/agora-platform/agora/pkg/fabric/fabrictest"
	"github.com/agora-platform/agora/services/document-worker/doctest"
)

// TestOperatorConsole drives the operator console in Debian's headless
// Chromium: a corrupt upload is dead-lettered by the document worker; the
// operator of its tenant logs in, sees it on the overview, inspects it,
// dry-runs a replay, replays it, and finds both operations in the audit
// and the letter in the request's journey. The other tenant's operator
// sees none of it. CONSOLE_SCREENSHOT=<file.png> keeps a screenshot of the
// dead-letter page (the README's).
func TestOperatorConsole(t *testing.T) {
	chromium, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatal("no chromium on PATH: run `make infra` (deploy/local/infra.sh installs Debian's chromium)")
	}
	h := harness.New(t, os.Getenv)
	h.RequireProcesses(t)
	h.Start(t, "document-worker")
	h.Start(t, "request", harness.Env{"CONSOLE_SERVICES": "document-worker=" + h.URL("document-worker")})
	tenantA, tenantB := "org-a-"+randHex(3), "org-b-"+randHex(3)
	citizen := h.Token(tenantA, "citizen-"+randHex(2), "citizen")
	operatorA := h.Token(tenantA, "ana.operadora", "operator")
	operatorB := h.Token(tenantB, "bruno.operador", "operator")

	pngData, err := doctest.PNG(pngLines, 36)
	if err != nil {
		t.Fatal(err)
	}
	reqID := submitRequest(t, h.URL("request"), citizen)
	corrupt := uploadDocument(t, h.URL("request"), citizen, reqID, "quebrado.png", pngData[:len(pngData)/3])
	waitDeadLetter(t, h, "document.processing.dlq", corrupt, 2*time.Minute)
	correlationID := requestCorrelation(t, h.URL("request"), citizen, reqID)

	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chromium), chromedp.NoSandbox,
		chromedp.DisableGPU, chromedp.WindowSize(1400, 1000))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelAlloc()
	ctx, cancelBrowser := chromedp.NewContext(actx, chromedp.WithLogf(t.Logf))
	defer cancelBrowser()
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	base := h.URL("request") + "/console/"
	run := func(what string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(ctx, actions...); err != nil {
			page, _ := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("body")))
			t.Fatalf("%s: %v\npage:\n%s", what, err, page)
		}
	}
	text := func(sel string) string {
		t.Helper()
		s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
		if err != nil {
			t.Fatalf("read %s: %v", sel, err)
		}
		return s
	}
	login := func(token string) {
		t.Helper()
		run("log in", chromedp.Navigate(base), chromedp.WaitVisible(chromedp.CSS("#token")),
			chromedp.SetValue(chromedp.CSS("#token"), token), chromedp.Click(chromedp.CSS("#login")))
	}

	// A citizen's token opens nothing.
	login(citizen)
	run("refusal shown", chromedp.WaitVisible(chromedp.CSS("#error")))
	if got := text("#error"); !strings.Contains(got, "operators") {
		t.Errorf("citizen login: %q, want a refusal naming operators", got)
	}

	login(operatorA)
	run("overview", chromedp.WaitVisible(chromedp.CSS("#queues")))
	if got := text("#tenant"); got != tenantA {
		t.Errorf("logged in as tenant %q, want %q", got, tenantA)
	}
	if got := text(`a[data-queue="document.processing"]`); got != "1" {
		t.Errorf("overview: document.processing shows %q dead letters, want 1", got)
	}
	if got := text("#outbox"); !strings.Contains(got, "request") {
		t.Errorf("outbox table %q, want the request service's backlog", got)
	}

	run("dead letters", chromedp.Click(chromedp.CSS(`a[data-queue="document.processing"]`)), chromedp.WaitVisible(chromedp.CSS("#letters")))
	if got := text("#letters"); !strings.Contains(got, "document.uploaded.v1") || !strings.Contains(got, "PERMANENT") {
		t.Errorf("letters table %q, want the uploaded document's letter and its reason", got)
	}
	run("inspect", chromedp.Click(chromedp.CSS("#letters tbody a")), chromedp.WaitVisible(chromedp.CSS("#letter")))
	if got := text("#letter"); !strings.Contains(got, "quebrado.png") && !strings.Contains(got, corrupt) {
		t.Errorf("letter %q, want the corrupt document's payload", got)
	}
	run("back", chromedp.Click(chromedp.CSS("#back")), chromedp.WaitVisible(chromedp.CSS("#letters")))

	act := func(reason string, dryRun bool) string {
		t.Helper()
		steps := []chromedp.Action[chromedp.Void]{chromedp.Click(chromedp.CSS("#letters tbody input[type=checkbox]")),
			chromedp.SetValue(chromedp.CSS("#reason"), reason)}
		if !dryRun {
			steps = append(steps, chromedp.Click(chromedp.CSS("#dryRun")))
		}
		steps = append(steps, chromedp.Click(chromedp.CSS("#replay")), chromedp.WaitVisible(chromedp.CSS("#report")))
		run("replay "+reason, steps...)
		if got := text("#progress"); !strings.Contains(got, "letters examined") {
			t.Errorf("progress %q, want the service's progress lines", got)
		}
		report := text("#report")
		run("back to the letters", chromedp.Click(chromedp.CSS("#back")), chromedp.WaitVisible(chromedp.CSS("#audit")))
		return report
	}
	if got := act("checking the file before replay", true); !strings.Contains(got, "replay-dry-run") || text("#letters") == "" {
		t.Errorf("dry run report %q, want replay-dry-run and the letter still there", got)
	}
	if got := act("the worker's decoder was fixed", false); !strings.Contains(got, "replay") || strings.Contains(got, "dry-run") {
		t.Errorf("replay report %q, want a replay", got)
	}
	audit := text("#audit")
	for _, want := range []string{"replay-dry-run", "checking the file before replay", "the worker's decoder was fixed", "ana.operadora"} {
		if !strings.Contains(audit, want) {
			t.Errorf("audit %q lacks %q", audit, want)
		}
	}
	if path := os.Getenv("CONSOLE_SCREENSHOT"); path != "" {
		png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, png, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	// The replayed letter fails again (the file is still corrupt) and is
	// back in the DLQ once the worker has failed it: the journey is loaded
	// until it shows it, then checked whole.
	wants := []string{"request.submitted.v1", "document.uploaded.v1", "emitted by request", "dead-lettered by document.processing"}
	var tree string
	fabrictest.Eventually(t, 30*time.Second, "the journey showing the dead letter", func() bool {
		run("journey", chromedp.Navigate(base+"journey?correlationId="+correlationID), chromedp.WaitVisible(chromedp.CSS("#tree")))
		tree = text("#tree")
		return strings.Contains(tree, wants[len(wants)-1])
	})
	for _, want := range wants {
		if !strings.Contains(tree, want) {
			t.Errorf("journey %q lacks %q", tree, want)
		}
	}

	// The other tenant's operator sees none of it.
	run("log out", chromedp.Click(chromedp.CSS("header button")), chromedp.WaitVisible(chromedp.CSS("#token")))
	login(operatorB)
	run("overview of B", chromedp.WaitVisible(chromedp.CSS("#queues")))
	if got := text(`a[data-queue="document.processing"]`); got != "0" {
		t.Errorf("tenant B's overview shows %q dead letters, want 0", got)
	}
	run("journey of B", chromedp.Navigate(base+"journey?correlationId="+correlationID), chromedp.WaitVisible(chromedp.CSS("#nothing")))
}

// requestCorrelation returns the correlation id of a request.
func requestCorrelation(t *testing.T, base, token, id string) string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, base+"/v1/requests/"+id, nil)
	status, data := do(t, req, token)
	var r struct {
		CorrelationID string `json:"correlationId"`
	}
	if status != http.StatusOK || json.Unmarshal(data, &r) != nil || r.CorrelationID == "" {
		t.Fatalf("GET request %s = %d %s", id, status, data)
	}
	return r.CorrelationID
}
