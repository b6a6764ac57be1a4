package sei_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/agora-platform/agora/pkg/fabric"
	"github.com/agora-platform/agora/services/workflow/internal/sei"
	"github.com/agora-platform/agora/services/workflow/seitest"
)

const requestID = "0193a5c2-7e1f-7b3a-9c4d-1e2f3a4b5c6d"

// unavailable is the class of an outage (fabric.ErrUnavailable): the
// consumer waits it out instead of spending retry tiers.
var unavailable = fabric.ClassOf(fabric.ErrUnavailable)

func TestRegisterClassifiesAnswers(t *testing.T) {
	tests := []struct {
		name       string
		status     int
		ctype      string
		body       string
		class      fabric.Class // of the error; "" for success
		number     string
		wantReason string // in the error, for failures
	}{
		{"created", 201, "application/json", `{"seiNumber":"23106.000042/2026-17"}`, "", "23106.000042/2026-17", ""},
		{"replayed key", 200, "application/json", `{"seiNumber":"23106.000042/2026-17"}`, "", "23106.000042/2026-17", ""},
		{"refused with a problem", 422, "application/problem+json", `{"title":"Unprocessable","detail":"unit SEMURB is closed"}`, fabric.ClassPermanent, "", "unit SEMURB is closed"},
		{"refused in plain text", 400, "text/plain", "bad unit", fabric.ClassPermanent, "", "bad unit"},
		{"not found", 404, "", "", fabric.ClassPermanent, "", "404 Not Found"},
		{"conflict", 409, "application/json", `{"title":"Conflict"}`, fabric.ClassPermanent, "", "Conflict"},
		{"request timeout", 408, "", "", fabric.ClassTransient, "", "408"},
		{"too many requests", 429, "", "", fabric.ClassTransient, "", "429"},
		{"internal error", 500, "", "", fabric.ClassTransient, "", "500"},
		{"bad gateway", 502, "text/html", "<html>proxy</html>", unavailable, "", "proxy"},
		{"unavailable", 503, "application/problem+json", `{"detail":"maintenance"}`, unavailable, "", "maintenance"},
		{"gateway timeout", 504, "", "", unavailable, "", "504"},
		{"2xx without a number", 201, "application/json", `{}`, fabric.ClassUnknown, "", "seiNumber"},
		{"2xx not JSON", 200, "text/html", `<html>login</html>`, fabric.ClassUnknown, "", "no registration"},
		{"number with a control character", 201, "application/json", `{"seiNumber":"1\u0007"}`, fabric.ClassUnknown, "", "seiNumber"},
		{"redirect", 302, "", "", fabric.ClassUnknown, "", "302"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if tc.status == 302 {
					w.Header().Set("Location", "/elsewhere")
				}
				if tc.ctype != "" {
					w.Header().Set("Content-Type", tc.ctype)
				}
				w.WriteHeader(tc.status)
				_, _ = io.WriteString(w, tc.body)
			}))
			defer srv.Close()
			c, err := sei.New(srv.URL, time.Second)
			if err != nil {
				t.Fatal(err)
			}
			number, err := c.Register(context.Background(), "org-a", requestID, "")
			if tc.class == "" {
				if err != nil || number != tc.number {
					t.Fatalf("Register = %q, %v; want %q", number, err, tc.number)
				}
				return
			}
			if err == nil {
				t.Fatalf("Register = %q, want a %s error", number, tc.class)
			}
			if got := fabric.ClassOf(err); got != tc.class {
				t.Errorf("class = %s, want %s (%v)", got, tc.class, err)
			}
			if !strings.Contains(err.Error(), tc.wantReason) {
				t.Errorf("error %q does not say %q", err, tc.wantReason)
			}
			var rej *sei.RejectedError
			if errors.As(err, &rej) != (tc.class == fabric.ClassPermanent) {
				t.Errorf("RejectedError in %v: %v, want it exactly for refusals", err, rej)
			}
			if tc.class == fabric.ClassPermanent && fabric.ReasonOf(err, "") != sei.ReasonRejected {
				t.Errorf("dead-letter reason %q, want %s", fabric.ReasonOf(err, ""), sei.ReasonRejected)
			}
		})
	}
}

func TestRegisterUnreachable(t *testing.T) {
	// A port nobody listens on: connection refused.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String()
	ln.Close()
	release := make(chan struct{})
	stall := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Read to the end, so the server notices the client leaving.
		_, _ = io.Copy(io.Discard, r.Body)
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	defer stall.Close()
	defer close(release) // before Close, which waits for the handler
	tests := []struct{ name, url string }{
		{"connection refused", closed},
		{"no answer within the timeout", stall.URL},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := sei.New(tc.url, 200*time.Millisecond)
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			_, err = c.Register(context.Background(), "org-a", requestID, "")
			if fabric.ClassOf(err) != unavailable {
				t.Errorf("Register = %v, want SEI unavailable (an outage)", err)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("Register took %s with a 200ms timeout", d)
			}
		})
	}
}

func TestNewRefusesBadSettings(t *testing.T) {
	tests := []struct {
		url     string
		timeout time.Duration
	}{
		{"", time.Second}, {"sei.example", time.Second}, {"ftp://sei.example", time.Second}, {"http://", time.Second},
		{"http://sei.example", 0},
	}
	for _, tc := range tests {
		if _, err := sei.New(tc.url, tc.timeout); err == nil {
			t.Errorf("New(%q, %s) = nil error", tc.url, tc.timeout)
		}
	}
}

// TestAgainstTheFake is the contract between the client and seitest: what
// the fake is told to do reaches the client as the class the consumer
// needs, and the idempotency key holds across a stalled call.
func TestAgainstTheFake(t *testing.T) {
	fake := seitest.Start(t)
	c, err := sei.New(fake.URL+"/", 300*time.Millisecond) // a trailing slash is fine
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	first, err := c.Register(ctx, "org-a", requestID, "SEMURB")
	if err != nil || first == "" {
		t.Fatalf("Register = %q, %v", first, err)
	}
	again, err := c.Register(ctx, "org-a", requestID, "SEMURB")
	if err != nil || again != first {
		t.Errorf("second Register = %q, %v; want the first number %q", again, err, first)
	}
	calls := fake.Calls(requestID)
	if len(calls) != 2 || calls[0].IdempotencyKey != requestID || calls[0].Unit != "SEMURB" || calls[0].Status != 201 || calls[1].Status != 200 {
		t.Errorf("calls = %+v, want 201 then 200 with the request id as key and the unit", calls)
	}

	other := "0193a5c2-7e1f-7b3a-9c4d-1e2f3a4b5c6e"
	fake.Unavailable(other, 1)
	if _, err := c.Register(ctx, "org-a", other, ""); fabric.ClassOf(err) != unavailable {
		t.Errorf("503: %v, want SEI unavailable (an outage)", err)
	}
	fake.Stall(other, 1)
	if _, err := c.Register(ctx, "org-a", other, ""); fabric.ClassOf(err) != unavailable {
		t.Errorf("stall: %v, want SEI unavailable (an outage)", err)
	}
	number, err := c.Register(ctx, "org-a", other, "")
	if err != nil {
		t.Fatalf("after the stall: %v", err)
	}
	if regs := fake.Registered("org-a", other); len(regs) != 1 || regs[0].Number != number {
		t.Errorf("registrations of %s = %+v, want one, numbered %s", other, regs, number)
	}

	third := "0193a5c2-7e1f-7b3a-9c4d-1e2f3a4b5c6f"
	fake.Reject(third, "unit closed")
	_, err = c.Register(ctx, "org-a", third, "")
	var rej *sei.RejectedError
	if fabric.ClassOf(err) != fabric.ClassPermanent || !errors.As(err, &rej) || rej.Reason != "unit closed" || rej.Status != 422 {
		t.Errorf("rejection: %v, want permanent with reason %q", err, "unit closed")
	}
	if regs := fake.Registered("org-a", third); len(regs) != 0 {
		t.Errorf("a rejected request was registered: %+v", regs)
	}
	// Tenants are apart: the same request id in another tenant is another
	// registration.
	if n, err := c.Register(ctx, "org-b", requestID, ""); err != nil || n == first {
		t.Errorf("org-b Register = %q, %v; want a number of its own", n, err)
	}
}
